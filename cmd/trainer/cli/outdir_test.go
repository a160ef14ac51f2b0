package cli

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/probformer/probformer/cmd/trainer/train"
)

// TestOutRefusesUsersDirectory: `train --out` into a directory that holds
// files of its own and no run is refused before anything is written
// there (not even the lock), and a file behind a symbolic link in it is
// not followed. Before, the run replaced a user's config.yaml, appended
// to a metrics.jsonl, wrote through a link to a file outside, and took
// `--out /` as a run directory.
func TestOutRefusesUsersDirectory(t *testing.T) {
	base := t.TempDir()
	outside := filepath.Join(base, "target.txt")
	if err := os.WriteFile(outside, []byte("precious target\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	own := filepath.Join(base, "proj")
	linked := filepath.Join(base, "linkdir")
	for _, d := range []string{own, linked} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(own, "config.yaml"), []byte("precious\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(linked, "config.yaml")); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{own, linked, "/"} {
		before := listDir(t, dir)
		code, _, stderr := runCLI(t, append([]string{"train", "--out", dir, "--set", "training.steps=2"}, tiny...)...)
		if code != 2 || !strings.Contains(stderr, "not empty") || !strings.Contains(stderr, dir) {
			t.Errorf("train --out %s: exit %d, stderr %q; want 2 and a message that the directory is not empty", dir, code, stderr)
		}
		if after := listDir(t, dir); after != before {
			t.Errorf("train --out %s changed the directory: %s, was %s", dir, after, before)
		}
	}
	for path, want := range map[string]string{filepath.Join(own, "config.yaml"): "precious\n", outside: "precious target\n"} {
		if got, _ := os.ReadFile(path); string(got) != want {
			t.Errorf("%s holds %q, want %q", path, got, want)
		}
	}
}

// TestOutRestartsRunStoppedInSetUp: a run stopped in its set-up leaves
// its lock and config.yaml; the same command starts it again there, and
// --resume says how.
func TestOutRestartsRunStoppedInSetUp(t *testing.T) {
	done := filepath.Join(t.TempDir(), "done")
	args := append([]string{"train", "--set", "training.steps=2"}, tiny...)
	if code, _, stderr := runCLI(t, append(args, "--out", done)...); code != 0 {
		t.Fatalf("train: exit %d: %s", code, stderr)
	}
	stopped := filepath.Join(t.TempDir(), "stopped")
	if err := os.MkdirAll(stopped, 0o755); err != nil {
		t.Fatal(err)
	}
	config, err := os.ReadFile(filepath.Join(done, train.ConfigFile))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(stopped, train.ConfigFile), config, 0o644)
	os.WriteFile(filepath.Join(stopped, train.LockFile), []byte("1"), 0o644)
	code, _, stderr := runCLI(t, "train", "--resume", stopped)
	if code != 2 || !strings.Contains(stderr, "trainer train --config "+filepath.Join(stopped, train.ConfigFile)+" --out "+stopped) {
		t.Errorf("train --resume of a run stopped in set-up: exit %d, stderr %q; want 2 and the command that starts it again", code, stderr)
	}
	if code, _, stderr := runCLI(t, append(args, "--out", stopped)...); code != 0 {
		t.Fatalf("the same train command again: exit %d: %s", code, stderr)
	}
	if steps, _ := train.StepCheckpoints(stopped); len(steps) != 1 {
		t.Errorf("the run started again holds %d step checkpoints, want 1", len(steps))
	}
	// another config is not the stopped run's: refused
	other := filepath.Join(t.TempDir(), "other")
	os.MkdirAll(other, 0o755)
	os.WriteFile(filepath.Join(other, train.ConfigFile), config, 0o644)
	if code, _, stderr := runCLI(t, append(args, "--out", other, "--set", "seed=7")...); code != 2 || !strings.Contains(stderr, "config.yaml") {
		t.Errorf("train --out a directory holding another config: exit %d, stderr %q; want 2 naming config.yaml", code, stderr)
	}
}

// listDir names dir's entries, for comparing a directory before and after.
func listDir(t *testing.T, dir string) string {
	t.Helper()
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	return strings.Join(names, " ")
}

// TestResumeRefusesConfigAndOut: --config and --out with --resume are
// refused (exit 2); before, both were silently ignored.
func TestResumeRefusesConfigAndOut(t *testing.T) {
	run := filepath.Join(t.TempDir(), "run")
	for _, extra := range [][]string{{"--config", "maxnorm"}, {"--out", filepath.Join(t.TempDir(), "elsewhere")}} {
		code, _, stderr := runCLI(t, append([]string{"train", "--resume", run}, extra...)...)
		if code != 2 || !strings.Contains(stderr, extra[0]+" with --resume") {
			t.Errorf("train --resume %s %v: exit %d, stderr %q; want 2 naming %s", run, extra, code, stderr, extra[0])
		}
	}
}

// TestCountsHaveCeilings: eval --samples, sweep --timing-steps and an
// empty board directory are refused with exit 2 before any work; a
// billion samples or timed steps ran for ever, and board "" served the
// working directory.
func TestCountsHaveCeilings(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"eval", "--checkpoint", filepath.Join(dir, "none"), "--samples", "1000000000"}, "--samples 1000000000: want 0"},
		{[]string{"sweep", "--out", filepath.Join(dir, "s"), "--variant", "a", "--timing-steps", "1000000000"}, "--timing-steps 1000000000: want 1 to"},
		{[]string{"board", ""}, `board: "": give a directory`},
	} {
		code, _, stderr := runCLI(t, c.args...)
		if code != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("%q: exit %d, stderr %q; want 2 and %q", c.args, code, stderr, c.want)
		}
	}
}
