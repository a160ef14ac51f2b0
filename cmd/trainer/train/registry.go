package train

import (
	"fmt"
	"slices"
	"sync"

	"github.com/probformer/probformer/configs"
)

// Spec is a task as the registry knows it: the types of its config's
// data: and model: sections, their rules, and how to build the task. D
// and M are structs whose fields, by their yaml tags, are the sections'
// keys (see configs.RegisterTask for the decoding rules); a task with no
// model settings uses struct{} for M.
type Spec[D, M any] struct {
	// Check validates the task's sections, and any shared field the task
	// gives a meaning (training.loss, say), after the shared sections
	// passed their rules. It returns the first bad field, by
	// configs.Config.Check ("data.size = 0: want a positive integer") or
	// CheckAttention. Nil accepts every value.
	Check func(cfg *configs.Config, data *D, model *M) error
	// New builds the task from a validated config: its own sections
	// typed, and cfg for the shared ones (seed, training.batch, …). state
	// is the task state of a checkpoint (Stateful), or nil for a new run.
	New func(cfg *configs.Config, data *D, model *M, state map[string][]byte) (Task, error)
}

// factory builds a registered task from a validated config.
type factory func(cfg *configs.Config, state map[string][]byte) (Task, error)

// registry maps task names to factories. It is the package's one piece
// of mutable state: tasks register from their packages' init functions,
// as database/sql drivers and image formats do, so that `trainer train`
// finds a task by the name in a config without a switch that every new
// task must edit. The lock makes Register safe from any goroutine.
var registry = struct {
	sync.RWMutex
	byName map[string]factory
}{byName: map[string]factory{}}

// Register makes a task available under name, for configs whose `task`
// is name: configs.Parse and Load then decode its sections into the
// Spec's types, configs.Config.Validate checks them by Spec.Check, and
// NewTask builds the task by Spec.New. It is the one registration a task
// needs. It is an error to register a name twice, a Spec without New, or
// section types that are not structs.
func Register[D, M any](name string, spec Spec[D, M]) error {
	if name == "" || spec.New == nil {
		return fmt.Errorf("train: register %q: want a name and a Spec with New", name)
	}
	registry.Lock()
	defer registry.Unlock()
	if _, dup := registry.byName[name]; dup {
		return fmt.Errorf("train: task %q is registered twice", name)
	}
	if err := configs.RegisterTask(name, spec.Check); err != nil {
		return fmt.Errorf("train: %w", err)
	}
	registry.byName[name] = func(cfg *configs.Config, state map[string][]byte) (Task, error) {
		d, ok := cfg.Data.(*D)
		if !ok || d == nil {
			return nil, fmt.Errorf("task %s: data section of type %T, want %T (a config from configs.Parse or Load has it)", name, cfg.Data, d)
		}
		m, ok := cfg.Model.(*M)
		if !ok || m == nil {
			return nil, fmt.Errorf("task %s: model section of type %T, want %T (a config from configs.Parse or Load has it)", name, cfg.Model, m)
		}
		t, err := spec.New(cfg, d, m, state)
		if err != nil {
			return nil, err // not a Task holding a nil pointer
		}
		return t, nil
	}
	return nil
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

// NewTask builds the task that cfg.Task names from cfg, which must be
// valid (configs.Load validates; after configs.Parse, call Validate);
// state, from a checkpoint, is nil for a new run.
func NewTask(cfg *configs.Config, state map[string][]byte) (Task, error) {
	registry.RLock()
	f, ok := registry.byName[cfg.Task]
	registry.RUnlock()
	if !ok {
		return nil, fmt.Errorf("unknown task %q (registered: %v)", cfg.Task, Names())
	}
	return f(cfg, state)
}
