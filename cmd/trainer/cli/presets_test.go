package cli

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/probformer/probformer/configs"
)

// TestPresetsCommand: `trainer presets` lists every preset, in
// alphabetical order, one a line with its description in a column;
// `trainer presets NAME` prints the preset's YAML as its file has it.
func TestPresetsCommand(t *testing.T) {
	code, stdout, stderr := runCLI(t, "presets")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	names := configs.Presets()
	if len(lines) != len(names) {
		t.Fatalf("%d lines for %d presets:\n%s", len(lines), len(names), stdout)
	}
	column := -1
	for i, name := range names {
		d := configs.PresetDescription(name)
		if !strings.HasPrefix(lines[i], name+" ") || !strings.HasSuffix(lines[i], "  "+d) {
			t.Errorf("line %d %q, want %s and its description %q", i+1, lines[i], name, d)
			continue
		}
		if c := strings.Index(lines[i], d); column < 0 {
			column = c
		} else if c != column {
			t.Errorf("line %d: the description starts at byte %d, not %d", i+1, c, column)
		}
	}
	// Lines follow names (above); maxnorm sorts before maxnorm-bayes,
	// whose file sorts first.
	if !slices.IsSorted(names) || slices.Index(names, "maxnorm")+1 != slices.Index(names, "maxnorm-bayes") {
		t.Errorf("not in alphabetical order:\n%s", stdout)
	}

	code, stdout, _ = runCLI(t, "presets", "maxnorm")
	want, _ := os.ReadFile("../../../configs/presets/maxnorm.yaml")
	if code != 0 || stdout != string(want) {
		t.Errorf("presets maxnorm: exit %d:\n%s", code, stdout)
	}
	expectBadInput(t, []string{"presets", "maxnrom"}, `no preset "maxnrom"`, "maxnorm-em")
}
