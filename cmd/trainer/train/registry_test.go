package train

import (
	"slices"
	"strings"
	"testing"

	"github.com/probformer/probformer/configs"
)

// TestRegistry: a registered factory is found by name, a second
// registration of the name is refused, and an unknown name lists the
// registered ones.
func TestRegistry(t *testing.T) {
	f := func(*configs.Config, map[string][]byte) (Task, error) { return nil, nil }
	if err := Register("registry-test", f); err != nil {
		t.Fatal(err)
	}
	if err := Register("registry-test", f); err == nil {
		t.Error("a name registered twice")
	}
	if err := Register("", f); err == nil {
		t.Error("an empty name registered")
	}
	if _, ok := Lookup("registry-test"); !ok || !slices.Contains(Names(), "registry-test") {
		t.Error("registered task not found")
	}
	_, err := NewTask(&configs.Config{Task: "no-such-task"}, nil)
	if err == nil || !strings.Contains(err.Error(), "registry-test") {
		t.Errorf("unknown task: error %v", err)
	}
}
