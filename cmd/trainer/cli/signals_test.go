package cli

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/probformer/probformer/cmd/trainer/train"
	"github.com/probformer/probformer/graph/ckpt"
)

// TestSIGKILLLeavesLoadableCheckpoint kills `trainer train` at random
// moments of a run far too long to finish; every time the latest
// checkpoint loads and never goes back, and resuming from it continues the
// run to a new end.
func TestSIGKILLLeavesLoadableCheckpoint(t *testing.T) {
	t.Parallel() // waits on its own processes (the trainer, python3)
	dir := filepath.Join(t.TempDir(), "run")
	args := append([]string{"train", "--out", dir, "--set", "training.steps=1000000", "--set", "training.checkpoint_every=2",
		"--set", "training.eval_every=25", "--set", "training.keep_checkpoints=2"}, tiny...)
	rng := rand.New(rand.NewPCG(7, 7))
	lastStep := 0
	kills := 0
	for attempt := 0; kills < 5 && attempt < 40; attempt++ {
		cmdArgs := args
		if steps, _ := train.StepCheckpoints(dir); len(steps) > 0 {
			cmdArgs = []string{"train", "--resume", dir}
		}
		cmd, out := startTrainer(t, cmdArgs...)
		time.Sleep(time.Duration(150+rng.IntN(600)) * time.Millisecond)
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Wait(); err == nil {
			t.Fatalf("a run of a million steps finished:\n%s", out)
		}
		path, rerr := resolveCheckpoint(dir, false)
		if rerr != nil {
			continue // killed during start-up, before the first checkpoint
		}
		kills++
		ck, err := ckpt.ReadCheckpoint(path)
		if err != nil {
			t.Fatalf("kill %d left an unloadable latest checkpoint: %v", kills, err)
		}
		if ck.Step < lastStep {
			t.Fatalf("kill %d: latest checkpoint went back from step %d to %d", kills, lastStep, ck.Step)
		}
		lastStep = ck.Step
	}
	if kills < 5 {
		t.Fatalf("only %d kills left a checkpoint", kills)
	}
	t.Logf("%d kills; the last one left step %d", kills, lastStep)
	end := lastStep + 20
	cmd, out := startTrainer(t, "train", "--resume", dir, "--set", "training.steps="+strconv.Itoa(end))
	if err := cmd.Wait(); err != nil {
		t.Fatalf("final resume: %v\n%s", err, out)
	}
	if !strings.Contains(out.String(), "done:") {
		t.Fatalf("resumed run did not finish:\n%s", out)
	}
	ck, err := ckpt.ReadCheckpoint(filepath.Join(dir, train.CheckpointName(end)))
	if err != nil || ck.Step != end {
		t.Fatalf("final checkpoint: %v", err)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("temporary file %s left after a clean finish", e.Name())
		}
	}
}

// TestSIGINTSavesAndExitsZero: Ctrl-C finishes the step, saves, says where,
// and exits 0.
func TestSIGINTSavesAndExitsZero(t *testing.T) {
	t.Parallel() // waits on its own processes (the trainer, python3)
	dir := filepath.Join(t.TempDir(), "run")
	cmd, out := startTrainer(t, append([]string{"train", "--out", dir, "--set", "training.steps=100000",
		"--set", "training.checkpoint_every=1000", "--set", "training.eval_every=1000"}, tiny...)...)
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(out.String(), "step 10/") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGINT: %v\n%s", err, out)
	}
	text := out.String()
	if !strings.Contains(text, "interrupted at step") || !strings.Contains(text, "--resume "+dir) {
		t.Fatalf("no interruption message:\n%s", text)
	}
	path, err := resolveCheckpoint(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ckpt.ReadCheckpoint(path); err != nil {
		t.Fatal(err)
	}
}
