package train

import (
	"slices"
	"strings"
	"testing"

	"github.com/probformer/probformer/configs"
)

// registryData is the data section of the registry test's task.
type registryData struct {
	Size int `yaml:"size"`
}

// TestRegistry: one registration makes a task's sections known to configs
// and its constructor to NewTask, which hands it the typed sections; a
// second registration of the name is refused, and an unknown name lists
// the registered ones.
func TestRegistry(t *testing.T) {
	var got *registryData
	spec := Spec[registryData, struct{}]{
		Check: func(c *configs.Config, d *registryData, _ *struct{}) error {
			return c.Check(configs.Rule{OK: d.Size > 0, Field: "data.size", Want: "a positive integer"})
		},
		New: func(_ *configs.Config, d *registryData, _ *struct{}, _ map[string][]byte) (Task, error) {
			got = d
			return nil, nil
		},
	}
	if err := Register("registry-test", spec); err != nil {
		t.Fatal(err)
	}
	if err := Register("registry-test", spec); err == nil {
		t.Error("a name registered twice")
	}
	if err := Register("", spec); err == nil {
		t.Error("an empty name registered")
	}
	if err := Register("registry-no-new", Spec[registryData, struct{}]{}); err == nil {
		t.Error("a Spec without New registered")
	}
	intNew := func(*configs.Config, *int, *struct{}, map[string][]byte) (Task, error) { return nil, nil }
	if err := Register("registry-int", Spec[int, struct{}]{New: intNew}); err == nil {
		t.Error("an int section registered")
	} else if slices.Contains(Names(), "registry-int") {
		t.Error("a refused registration is listed")
	}
	if !slices.Contains(Names(), "registry-test") || !slices.IsSorted(Names()) {
		t.Errorf("names %v", Names())
	}
	if !slices.Contains(configs.Tasks(), "registry-test") {
		t.Error("configs does not know the registered task")
	}

	cfg, err := configs.Parse([]byte("task: registry-test\ndata: {size: 0}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "dtype = (missing)") {
		t.Errorf("shared rules: %v", err) // the shared sections are empty
	}
	if _, err := NewTask(cfg, nil); err != nil || got == nil || got != cfg.Data {
		t.Errorf("NewTask: %v, section %p, config's %p", err, got, cfg.Data)
	}
	if _, err := NewTask(&configs.Config{Task: "registry-test"}, nil); err == nil {
		t.Error("NewTask of a config without sections")
	}
	_, err = NewTask(&configs.Config{Task: "no-such-task"}, nil)
	if err == nil || !strings.Contains(err.Error(), "registry-test") {
		t.Errorf("unknown task: error %v", err)
	}
}
