package configs

import (
	"slices"
	"testing"
)

// TestNoStaleDescription: every description names a preset that exists,
// so a renamed or removed preset leaves none behind.
func TestNoStaleDescription(t *testing.T) {
	names := Presets()
	for name := range presetDescriptions {
		if !slices.Contains(names, name) {
			t.Errorf("description of %q, which is no preset", name)
		}
	}
}
