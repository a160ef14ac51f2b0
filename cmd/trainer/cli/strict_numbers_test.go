package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestStrictNumbersExitTwo: `trainer train` refuses a number its field
// cannot hold, from a config file or --set, before it trains: exit 2 and
// one line naming the key and the file's line or the flag. Before, a
// fraction was truncated (--set training.steps=1.5 trained 1 step).
func TestStrictNumbersExitTwo(t *testing.T) {
	dir := t.TempDir()
	preset, err := os.ReadFile("../../../configs/presets/maxnorm.yaml")
	if err != nil {
		t.Fatal(err)
	}
	file := func(name, old, new string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, bytes.Replace(preset, []byte(old), []byte(new), 1), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	out := filepath.Join(dir, "run")
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"fraction in a file", []string{"--config", file("half.yaml", "  batch: 64", "  batch: 64.5")},
			[]string{"half.yaml", "line 39", "training.batch = 64.5", "want an integer"}},
		{"huge in a file", []string{"--config", file("huge.yaml", "  dim: 64", "  dim: 1e20")},
			[]string{"huge.yaml", "line 16", "model.dim = 1e20", "want an integer in ["}},
		{"empty in a file", []string{"--config", file("empty.yaml", "  steps: 3000", `  steps: ""`)},
			[]string{"empty.yaml", "line 38", "training.steps is empty"}},
		{"negative in a file", []string{"--config", file("negative.yaml", "  batch: 64", "  batch: -1")},
			[]string{"negative.yaml", "line 39", "training.batch = -1", "positive integer"}},
		{"NaN lr in a file", []string{"--config", file("nan.yaml", "  lr: 1.0e-3", "  lr: .nan")},
			[]string{"nan.yaml", "line 28", "optimizer.lr", "finite"}},
		{"fraction by --set", []string{"--set", "training.steps=1.5"}, []string{"--set training.steps=1.5", "want an integer"}},
		{"fraction batch by --set", []string{"--set", "training.batch=3.5"}, []string{"--set training.batch=3.5", "want an integer"}},
		{"huge by --set", []string{"--set", "model.dim=1e20"}, []string{"--set model.dim=1e20", "want an integer in ["}},
		{"negative seed by --set", []string{"--set", "seed=-1"}, []string{"--set seed=-1", "[0, 18446744073709551615]"}},
		{"empty by --set", []string{"--set", "training.batch="}, []string{"--set training.batch=", "empty"}},
		{"NaN by --set", []string{"--set", "training.batch=.nan"}, []string{"--set training.batch=.nan", "want an integer"}},
		{"Inf lr by --set", []string{"--set", "optimizer.lr=.inf"}, []string{"--set optimizer.lr=.inf", "finite"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			expectBadInput(t, append([]string{"train", "--out", out}, c.args...), c.want...)
			if _, err := os.Stat(out); err == nil {
				t.Errorf("a refused config left a run directory")
			}
		})
	}
}

// TestStrictNumbersOnResume: a resumed run's --set is held to the same
// rules.
func TestStrictNumbersOnResume(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	if code, _, stderr := runCLI(t, append([]string{"train", "--out", dir, "--set", "training.steps=2"}, tiny...)...); code != 0 {
		t.Fatal(stderr)
	}
	expectBadInput(t, []string{"train", "--resume", dir, "--set", "training.steps=4.5"}, "--set training.steps=4.5", "want an integer")
	expectBadInput(t, []string{"train", "--resume", dir, "--set", "training.steps=-4"}, "training.steps = -4 (--set)")
}
