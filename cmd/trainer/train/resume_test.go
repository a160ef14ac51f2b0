package train_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/probformer/probformer/cmd/trainer/train"
	"github.com/probformer/probformer/graph"
	"github.com/probformer/probformer/graph/optim"
)

// echoLoop is a loop of maskedEcho (or a task that wraps it) on dir.
func echoLoop(t *testing.T, task train.Task, dir string, steps int) *train.Loop {
	t.Helper()
	l, err := train.New(task, train.Settings{Dir: dir, Steps: steps, Batch: 8, Seed: 3, DType: graph.Float64,
		LogEvery: 5, EvalEvery: 10, CheckpointEvery: 10, Optimizer: optim.NewAdam(1e-2)})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestResumeNoCheckpoint: Resume of a run directory that does not exist,
// is empty, or holds only the metrics of a run killed before its first
// checkpoint is an ErrNoCheckpoint; ResumeOrStart starts a new run there
// (dropping the dead run's metrics), and resumes a run that has a
// checkpoint, along the uninterrupted curve. Checkpoints that all fail to
// load are another error, which ResumeOrStart returns rather than
// starting over them.
func TestResumeNoCheckpoint(t *testing.T) {
	straight := t.TempDir()
	if err := echoLoop(t, maskedEcho{}, straight, 30).Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := trainLosses(t, straight)

	root := t.TempDir()
	killed := filepath.Join(root, "killed")
	if err := os.MkdirAll(killed, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(killed, train.MetricsFile), []byte(`{"step":5,"train_loss":99}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{filepath.Join(root, "missing"), t.TempDir(), killed} {
		_, err := echoLoop(t, maskedEcho{}, dir, 30).Resume(nil)
		if !errors.Is(err, train.ErrNoCheckpoint) {
			t.Fatalf("%s: Resume: %v, want ErrNoCheckpoint", dir, err)
		}
		l := echoLoop(t, maskedEcho{}, dir, 30)
		resumed, err := l.ResumeOrStart(nil)
		if err != nil || resumed {
			t.Fatalf("%s: ResumeOrStart: resumed %v, %v; want a new run", dir, resumed, err)
		}
		if err := l.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := trainLosses(t, dir); !equalLosses(got, want) {
			t.Errorf("%s: new run's losses %v, want %v", dir, got, want)
		}
	}

	// Interrupted at step 17 (saved there), then ResumeOrStart resumes.
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	if err := echoLoop(t, cancelAt{maskedEcho{}, cancel, 17}, dir, 30).Run(ctx); err != nil {
		t.Fatal(err)
	}
	l := echoLoop(t, maskedEcho{}, dir, 30)
	resumed, err := l.ResumeOrStart(nil)
	if err != nil || !resumed || l.Step() != 17 {
		t.Fatalf("ResumeOrStart of a run saved at step 17: resumed %v at step %d, %v", resumed, l.Step(), err)
	}
	if err := l.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := trainLosses(t, dir); !equalLosses(got, want) {
		t.Errorf("resumed run's losses %v, want %v", got, want)
	}

	// A checkpoint that does not load is not "no checkpoint".
	broken := t.TempDir()
	if err := os.WriteFile(filepath.Join(broken, train.CheckpointName(10)), []byte("not a checkpoint"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = echoLoop(t, maskedEcho{}, broken, 30).ResumeOrStart(nil)
	if err == nil || errors.Is(err, train.ErrNoCheckpoint) || !strings.Contains(err.Error(), "no loadable checkpoint") {
		t.Errorf("ResumeOrStart over an unloadable checkpoint: %v, want an error that is not ErrNoCheckpoint", err)
	}
}

// equalLosses reports whether two runs logged the same losses at the same
// steps, bit for bit.
func equalLosses(a, b map[int]float64) bool {
	if len(a) != len(b) {
		return false
	}
	for step, v := range a {
		if w, ok := b[step]; !ok || w != v {
			return false
		}
	}
	return true
}
