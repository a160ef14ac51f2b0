package configs

import (
	"fmt"
	"strings"
	"sync"
)

// Section is a task's part of the config schema: the rules of the data
// and model sections its task reads, and of the fields of the shared
// sections only it gives a meaning (training.loss, say). Validate runs
// after the shared parts (task, seed, dtype, optimizer and the training
// schedule) are valid, and returns the first bad field, as Check does.
//
// A task registers its Section under its name (RegisterTask); Validate
// then accepts configs of that task with no other change to this package.
type Section interface {
	Validate(c *Config) error
}

// sections maps task names to their sections, in registration order.
var sections = struct {
	sync.RWMutex
	names  []string
	byName map[string]Section
}{byName: map[string]Section{}}

// RegisterTask makes name a task Validate accepts, with the rules of s. It
// is an error to register a name twice or a nil section.
func RegisterTask(name string, s Section) error {
	if name == "" || s == nil {
		return fmt.Errorf("configs: register task %q: want a name and a section", name)
	}
	sections.Lock()
	defer sections.Unlock()
	if _, dup := sections.byName[name]; dup {
		return fmt.Errorf("configs: task %q is registered twice", name)
	}
	sections.byName[name] = s
	sections.names = append(sections.names, name)
	return nil
}

// Tasks lists the registered task names in the order they were
// registered: the built-in ones first.
func Tasks() []string {
	sections.RLock()
	defer sections.RUnlock()
	return append([]string(nil), sections.names...)
}

func lookupSection(name string) (Section, bool) {
	sections.RLock()
	defer sections.RUnlock()
	s, ok := sections.byName[name]
	return s, ok
}

// Rule is one check of a config field: OK, or the field at the dotted
// key Field should be Want.
type Rule struct {
	OK    bool
	Field string
	Want  string
}

// Check returns the error of the first rule that fails, naming its field,
// the field's value and what it should be ("training.steps = 0: want a
// positive integer"), or nil.
func (c *Config) Check(rules ...Rule) error {
	for _, r := range rules {
		if !r.OK {
			v, _ := c.Get(r.Field)
			return fmt.Errorf("%s = %s: want %s", r.Field, show(v), r.Want)
		}
	}
	return nil
}

// orList joins options as "a, b or c".
func orList(options []string) string {
	if len(options) < 2 {
		return strings.Join(options, "")
	}
	return strings.Join(options[:len(options)-1], ", ") + " or " + options[len(options)-1]
}
