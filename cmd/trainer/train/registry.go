package train

import (
	"fmt"
	"slices"
	"sync"

	"github.com/probformer/probformer/configs"
)

// Factory builds a task from a validated config. state is the task state
// of a checkpoint (Stateful), or nil for a new run.
type Factory func(cfg *configs.Config, state map[string][]byte) (Task, error)

// registry maps task names to factories. It is the package's one piece
// of mutable state: tasks register from their packages' init functions,
// as database/sql drivers and image formats do, so that `trainer train`
// finds a task by the name in a config without a switch that every new
// task must edit. The lock makes Register safe from any goroutine.
var registry = struct {
	sync.RWMutex
	byName map[string]Factory
}{byName: map[string]Factory{}}

// Register makes a task available under name, for configs whose `task`
// is name; configs.RegisterTask registers the rules of its config section,
// so that configs.Validate accepts the name. It is an error to register a
// name twice or a nil factory.
func Register(name string, f Factory) error {
	if name == "" || f == nil {
		return fmt.Errorf("train: register %q: want a name and a factory", name)
	}
	registry.Lock()
	defer registry.Unlock()
	if _, dup := registry.byName[name]; dup {
		return fmt.Errorf("train: task %q is registered twice", name)
	}
	registry.byName[name] = f
	return nil
}

// Lookup returns the factory registered under name.
func Lookup(name string) (Factory, bool) {
	registry.RLock()
	defer registry.RUnlock()
	f, ok := registry.byName[name]
	return f, ok
}

// Names lists the registered task names, sorted.
func Names() []string {
	registry.RLock()
	defer registry.RUnlock()
	names := make([]string, 0, len(registry.byName))
	for n := range registry.byName {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// NewTask builds the task that cfg.Task names; state, from a checkpoint,
// is nil for a new run.
func NewTask(cfg *configs.Config, state map[string][]byte) (Task, error) {
	f, ok := Lookup(cfg.Task)
	if !ok {
		return nil, fmt.Errorf("unknown task %q (registered: %v)", cfg.Task, Names())
	}
	return f(cfg, state)
}
