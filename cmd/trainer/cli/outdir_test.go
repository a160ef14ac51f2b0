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

// TestOutRestartsRunFailedInSetUp: a run whose set-up failed (here its
// init.encoder_from names a directory with no run) leaves its lock and config.yaml; the
// corrected command starts it again in the same directory, --resume
// says so, and a directory whose run went further without a step
// checkpoint is refused as a run, not as a user's directory.
func TestOutRestartsRunFailedInSetUp(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	args := []string{"train", "--config", "seq2seq-toy", "--out", dir, "--set", "training.steps=2", "--set", "model.dim=8",
		"--set", "model.heads=2", "--set", "model.ff=16", "--set", "data.train_pairs=64", "--set", "data.valid_pairs=16",
		"--set", "data.test_pairs=16", "--set", "training.batch=8", "--set", "optimizer.warmup_steps=1"}
	code, _, stderr := runCLI(t, append(args, "--set", "init.encoder_from="+t.TempDir())...)
	if code != 2 {
		t.Fatalf("train with a missing init.encoder_from: exit %d, stderr %q; want 2", code, stderr)
	}
	if got := listDir(t, dir); got != ".lock config.yaml" {
		t.Fatalf("the failed set-up left %q, want the lock and config.yaml", got)
	}
	code, _, stderr = runCLI(t, "train", "--resume", dir)
	if code != 2 || !strings.Contains(stderr, "run the train command that started it again") || !strings.Contains(stderr, "--out "+dir) {
		t.Errorf("train --resume of a run that failed in set-up: exit %d, stderr %q; want 2 and how to start it again", code, stderr)
	}
	if code, _, stderr := runCLI(t, args...); code != 0 {
		t.Fatalf("the corrected command: exit %d: %s", code, stderr)
	}
	if steps, err := train.StepCheckpoints(dir); err != nil || len(steps) != 1 {
		t.Errorf("the run started again holds step checkpoints %v (%v), want one", steps, err)
	}

	further := filepath.Join(t.TempDir(), "further")
	if err := os.MkdirAll(further, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{train.LockFile, train.ConfigFile, train.MetricsFile} {
		if err := os.WriteFile(filepath.Join(further, name), []byte("{}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	code, _, stderr = runCLI(t, append(append([]string{}, args...), "--out", further)...)
	if code != 2 || !strings.Contains(stderr, "holds a run with no step checkpoint") || !strings.Contains(stderr, "metrics.jsonl") {
		t.Errorf("train --out a run with metrics and no checkpoint: exit %d, stderr %q; want 2 naming it a run", code, stderr)
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
