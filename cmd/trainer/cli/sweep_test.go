package cli

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestSweep trains two variants of a tiny maxnorm, tabulates them, and on
// a second call reuses the finished runs instead of training again.
func TestSweep(t *testing.T) {
	out := filepath.Join(t.TempDir(), "sweep")
	args := append([]string{"sweep", "--out", out, "--timing-steps", "2", "--set", "training.steps=10",
		"--variant", "base", "--variant", "mae:training.loss=mae,model.heads=1"}, tiny...)
	code, stdout, stderr := runCLI(t, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	rows := strings.Split(strings.TrimSpace(stdout[strings.Index(stdout, "| variant"):]), "\n")
	if len(rows) != 4 {
		t.Fatalf("table %q: want a header, a rule and two rows", rows)
	}
	for _, want := range []string{"test_mse", "ms/step", "best step"} {
		if !strings.Contains(rows[0], want) {
			t.Errorf("header %q lacks %q", rows[0], want)
		}
	}
	if !strings.HasPrefix(rows[2], "| base | `(preset)` |") || !strings.HasPrefix(rows[3], "| mae | `training.loss=mae, model.heads=1` |") {
		t.Errorf("rows %q", rows[2:])
	}
	saved, err := os.ReadFile(filepath.Join(out, "results.md"))
	if err != nil || !strings.Contains(stdout, string(saved)) {
		t.Fatalf("results.md %q (%v) is not the printed table", saved, err)
	}
	code, again, stderr := runCLI(t, args...)
	if code != 0 || !strings.Contains(stderr, "finished earlier") || !strings.HasSuffix(again, string(saved)) {
		t.Errorf("second sweep: exit %d, stderr %q, stdout %q", code, stderr, again)
	}
	code, retimed, stderr := runCLI(t, append(slices.Clone(args), "--retime")...)
	if code != 0 || !strings.Contains(retimed, "| base | `(preset)` |") || strings.Contains(stderr, "training in") {
		t.Errorf("--retime: exit %d, stderr %q, stdout %q", code, stderr, retimed)
	}
	// Other overrides in the same directory must not reuse the results.
	changed := append(slices.Clone(args), "--set", "optimizer.lr=0.01")
	expectBadInput(t, changed, "another config", filepath.Join(out, "base"))
}

func TestSweepBadInput(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"no variant", []string{"sweep", "--out", dir}, []string{"--variant"}},
		{"bad override", []string{"sweep", "--out", dir, "--variant", "x:model.dimm=3"}, []string{"variant x", "dimm"}},
		{"bad name", []string{"sweep", "--out", dir, "--variant", "a/b"}, []string{`"a/b"`}},
		{"parent", []string{"sweep", "--out", dir, "--variant", "..:training.steps=3"}, []string{`"..:training.steps=3"`, "start with a letter"}},
		{"dot", []string{"sweep", "--out", dir, "--variant", "."}, []string{`"."`}},
		{"twice", []string{"sweep", "--out", dir, "--variant", "a", "--variant", "a:training.steps=3"}, []string{"used twice"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { expectBadInput(t, c.args, c.want...) })
	}
}
