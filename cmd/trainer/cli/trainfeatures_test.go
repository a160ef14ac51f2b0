package cli

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/probformer/probformer/cmd/trainer/train"
)

// TestAccumulateFromTheCommandLine: --set training.accumulate=4 trains
// the batch as four micro-batches and follows the curve of one batch, in
// float64; a batch that 4 does not divide is refused with exit 2.
func TestAccumulateFromTheCommandLine(t *testing.T) {
	base := append(append([]string{"train"}, tiny...), "--set", "dtype=float64", "--set", "training.steps=12",
		"--set", "training.eval_every=6", "--set", "training.log_every=2")
	one, four := filepath.Join(t.TempDir(), "one"), filepath.Join(t.TempDir(), "four")
	if code, _, stderr := runCLI(t, append(base, "--out", one)...); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if code, _, stderr := runCLI(t, append(base, "--out", four, "--set", "training.accumulate=4")...); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	a, b := metricCurve(t, one, "train_loss"), metricCurve(t, four, "train_loss")
	if len(a) != 6 || len(a) != len(b) {
		t.Fatalf("logged %d and %d losses, want 6", len(a), len(b))
	}
	for step, v := range a {
		if math.Abs(b[step]-v) > 1e-10*math.Abs(v) {
			t.Errorf("step %d: loss %.15g with accumulate 4, %.15g without", step, b[step], v)
		}
	}
	// In float32 the micro-batches' sums round differently: the curves
	// part in the last bits, which shows the setting reached the loop.
	one32, four32 := filepath.Join(t.TempDir(), "one32"), filepath.Join(t.TempDir(), "four32")
	runCLI(t, append(base, "--out", one32, "--set", "dtype=float32")...)
	runCLI(t, append(base, "--out", four32, "--set", "dtype=float32", "--set", "training.accumulate=4")...)
	a32, b32 := metricCurve(t, one32, "train_loss"), metricCurve(t, four32, "train_loss")
	same := len(a32) > 0
	for step, v := range a32 {
		same = same && b32[step] == v
	}
	if same {
		t.Error("float32 losses bit-identical with and without accumulation: was accumulate applied?")
	}
	code, _, stderr := runCLI(t, append(base, "--out", filepath.Join(t.TempDir(), "x"), "--set", "training.accumulate=3")...)
	if code != 2 || !strings.Contains(stderr, "accumulate") {
		t.Errorf("batch 8 in 3 micro-batches: exit %d: %s", code, stderr)
	}
}

// TestEarlyStopFromTheCommandLine: with a learning rate too small to move
// the validation metric by min_delta, training.early_stop ends the run
// after patience evaluations, logs why, keeps the best checkpoint, and a
// resume with the same patience is refused with what to change.
func TestEarlyStopFromTheCommandLine(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	args := append(append([]string{"train", "--out", dir}, tiny...), "--set", "training.steps=200", "--set", "training.eval_every=5",
		"--set", "optimizer.lr=1e-9", "--set", "optimizer.min_lr=0",
		"--set", "training.early_stop.patience=2", "--set", "training.early_stop.min_delta=0.01")
	code, stdout, stderr := runCLI(t, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout+stderr, "early") {
		t.Errorf("the output does not say the run stopped early:\n%s%s", stdout, stderr)
	}
	log, err := os.ReadFile(filepath.Join(dir, train.MetricsFile))
	if err != nil || !strings.Contains(string(log), `"early_stop":true`) {
		t.Fatalf("metrics.jsonl has no early_stop record (%v)", err)
	}
	steps, err := train.StepCheckpoints(dir)
	if err != nil || len(steps) == 0 || strings.HasSuffix(steps[len(steps)-1], train.CheckpointName(200)) {
		t.Errorf("checkpoints %v (%v): the run went on to step 200", steps, err)
	}
	if _, err := os.Stat(filepath.Join(dir, train.BestCheckpoint)); err != nil {
		t.Errorf("no best checkpoint: %v", err)
	}
	code, _, stderr = runCLI(t, "train", "--resume", dir)
	if code != 2 || !strings.Contains(stderr, "early_stop.patience") {
		t.Errorf("resume of a stopped run: exit %d: %s", code, stderr)
	}
}

// metricCurve is one metric of a run's metrics.jsonl by step.
func metricCurve(t *testing.T, dir, name string) map[int]float64 {
	t.Helper()
	out, err := train.ReadMetric(dir, name)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
