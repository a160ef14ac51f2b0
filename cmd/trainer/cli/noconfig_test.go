package cli

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/probformer/probformer/cmd/trainer/train"
	"github.com/probformer/probformer/graph/ckpt"
)

// TestCheckpointWithoutConfig: a checkpoint of a library run that left
// train.Settings.Config empty is bad input for eval, export and --resume,
// with an error that says what to set (not "config: empty config"), and
// inspect says it holds none.
func TestCheckpointWithoutConfig(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "lib", "run2")
	args := append([]string{"train", "--config", "maxnorm", "--out", dir, "--set", "training.steps=5", "--set", "training.eval_every=5"}, tiny...)
	if code, _, stderr := runCLI(t, args...); code != 0 {
		t.Fatalf("train exit %d: %s", code, stderr)
	}
	for _, name := range []string{train.BestCheckpoint, "step-00000005.ckpt"} {
		path := filepath.Join(dir, name)
		ck, err := ckpt.ReadCheckpoint(path)
		if err != nil {
			t.Fatal(err)
		}
		ck.Config = nil
		if err := ckpt.WriteCheckpoint(path, ck); err != nil {
			t.Fatal(err)
		}
	}
	best := filepath.Join(dir, train.BestCheckpoint)
	want := "checkpoint " + best + " holds no config: a library run must set train.Settings.Config"
	for _, args := range [][]string{
		{"eval", "--checkpoint", dir},
		{"export", "--checkpoint", dir, "--format", "safetensors", "--out", filepath.Join(t.TempDir(), "m.safetensors")},
		{"train", "--resume", best, "--set", "training.steps=10"},
	} {
		code, _, stderr := runCLI(t, args...)
		if code != 2 || !strings.Contains(stderr, want) || strings.Contains(stderr, "empty config") {
			t.Errorf("%s: exit %d, stderr %q; want 2 and %q", args[0], code, stderr, want)
		}
	}
	code, stdout, stderr := runCLI(t, "inspect", dir)
	if code != 0 || !strings.Contains(stdout, "config:\n  none (a library run that left train.Settings.Config empty") {
		t.Errorf("inspect: exit %d, stdout:\n%s\nstderr: %s", code, stdout, stderr)
	}
}
