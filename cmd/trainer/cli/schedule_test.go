package cli

import (
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/probformer/probformer/cmd/trainer/train"
)

// lrByStep is the learning rate of every training line of a run.
func lrByStep(t *testing.T, dir string) map[int]float64 {
	t.Helper()
	out := map[int]float64{}
	for _, m := range readMetrics(t, dir) {
		if lr, ok := m["lr"]; ok {
			out[int(m["step"])] = lr
		}
	}
	return out
}

// TestResumeLongerContinuesSchedule: a 20-step cosine run resumed from
// step 10 with training.steps=40 goes on decaying from the rate it had at
// step 10 (it never rises, as restarting the 40-step schedule would make
// it) down to min_lr at step 40, and says so; a second resume at the same
// length keeps that schedule to the bit. The warm-up over a tenth of the
// run is warned about, once.
func TestResumeLongerContinuesSchedule(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	args := append([]string{"train", "--out", dir, "--set", "training.steps=20", "--set", "training.eval_every=20",
		"--set", "training.checkpoint_every=10", "--set", "training.keep_checkpoints=5"}, tiny...)
	code, _, stderr := runCLI(t, append(args, "--set", "training.log_every=1")...)
	if code != 0 {
		t.Fatal(stderr)
	}
	if n := strings.Count(stderr, "warning: optimizer.warmup_steps = 5 is more than a tenth of training.steps = 20"); n != 1 {
		t.Errorf("warm-up warning printed %d times, want once:\n%s", n, stderr)
	}
	before := lrByStep(t, dir)

	code, _, stderr = runCLI(t, "train", "--resume", filepath.Join(dir, train.CheckpointName(10)),
		"--set", "training.steps=40", "--set", "training.log_every=1")
	if code != 0 {
		t.Fatal(stderr)
	}
	if !strings.Contains(stderr, "resume: training.steps is now 40; the cosine decay goes on from lr") {
		t.Errorf("the re-anchoring is not reported:\n%s", stderr)
	}
	first := lrByStep(t, dir)
	if first[10] != before[10] {
		t.Fatalf("lr at step 10 changed from %v to %v", before[10], first[10])
	}
	for step := 11; step <= 40; step++ {
		if lr, ok := first[step]; !ok || lr > first[step-1] {
			t.Fatalf("step %d: lr %v (logged: %v) after %v at step %d: want no rise", step, lr, ok, first[step-1], step-1)
		}
	}
	if math.Abs(first[40]-1e-5) > 1e-15 {
		t.Errorf("last step: lr %v, want min_lr 1e-5", first[40])
	}

	code, _, stderr = runCLI(t, "train", "--resume", filepath.Join(dir, train.CheckpointName(30)))
	if code != 0 {
		t.Fatal(stderr)
	}
	if strings.Contains(stderr, "resume: training.steps") {
		t.Errorf("a resume at the same length reported a re-anchoring:\n%s", stderr)
	}
	second := lrByStep(t, dir)
	for step := 31; step <= 40; step++ {
		if second[step] != first[step] {
			t.Errorf("second resume, step %d: lr %v, want %v as before", step, second[step], first[step])
		}
	}
}
