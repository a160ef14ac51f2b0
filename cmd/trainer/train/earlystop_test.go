package train_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/probformer/probformer/cmd/trainer/train"
	"github.com/probformer/probformer/graph"
	"github.com/probformer/probformer/graph/ckpt"
)

// scripted trains maskedEcho but reports a scripted validation score: the
// i-th validation (steps every·i) scores scores[i−1].
type scripted struct {
	maskedEcho
	scores []float64
	every  int
	step   *int
}

func (s scripted) Feed(rng *rand.Rand, prog *graph.Program, step int) error {
	*s.step = step
	return s.maskedEcho.Feed(rng, prog, step)
}

func (s scripted) Evaluate(_ *graph.Params, _ *graph.Program, split string) (map[string]float64, error) {
	return map[string]float64{split + "_mse": s.scores[*s.step/s.every-1]}, nil
}

// TestEarlyStop: a validation score that stops improving ends the run
// within the patience: after the patience's validations without an
// improvement, with best.ckpt the best validation's, a metrics line and
// a line on the display and the output that say why. The count survives
// in the checkpoint: resuming with the same patience is ErrStoppedEarly,
// with a message saying what to set; with a larger one the run goes on
// and stops when the count, kept, reaches it. With a min_delta, scores
// that improve by less do not reset the count, yet best.ckpt follows
// them.
func TestEarlyStop(t *testing.T) {
	// Validations at steps 5, 10, …: the best is 2.5 at step 20; 2.6,
	// 2.55, 2.7 do not beat it.
	scores := []float64{5, 4, 3, 2.5, 2.6, 2.55, 2.7, 2.9, 3.0, 3.1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}
	dir := t.TempDir()
	loop := func(patience int, out, display *bytes.Buffer) *train.Loop {
		step := 0
		l, err := train.New(scripted{scores: scores, every: 5, step: &step}, train.Settings{Dir: dir, Steps: 100, Batch: 8,
			Seed: 3, DType: graph.Float64, LogEvery: 5, EvalEvery: 5, CheckpointEvery: 50,
			EarlyStop: train.EarlyStop{Patience: patience}, Out: out,
			Progress: train.NewProgress(train.ProgressLines, display, display)})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	var out, display bytes.Buffer
	l := loop(3, &out, &display)
	if err := l.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if at, ok := l.StoppedEarly(); !ok || at != 35 || l.Step() != 35 || l.Interrupted() {
		t.Fatalf("stopped early %v at step %d (loop at %d), want step 35: the 3rd validation without improvement", ok, at, l.Step())
	}
	best, err := ckpt.ReadCheckpoint(filepath.Join(dir, train.BestCheckpoint))
	if err != nil || best.Step != 20 {
		t.Fatalf("best.ckpt: %v, step %d; want step 20", err, best.Step)
	}
	last := lastMetricsLine(t, dir)
	if last["early_stop"] != true || last["step"] != 35.0 || last["best_step"] != 20.0 || last["best"] != 2.5 ||
		last["metric"] != "valid_mse" || last["patience"] != 3.0 {
		t.Errorf("last metrics line %v, want the early stop at step 35, best valid_mse 2.5 at step 20", last)
	}
	for _, want := range []string{
		"stopped early at step 35 of 100: valid_mse has not improved by more than 0 in 3 validations (since step 20); best valid_mse = 2.5 at step 20",
		"best checkpoint: " + filepath.Join(dir, train.BestCheckpoint),
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output %q does not say %q", out.String(), want)
		}
	}
	if !strings.Contains(display.String(), "step 35  early stop: valid_mse has not improved") {
		t.Errorf("display %q does not show the early stop", display.String())
	}
	if err := l.Run(context.Background()); !errors.Is(err, train.ErrStoppedEarly) {
		t.Errorf("Run again after the stop: %v, want ErrStoppedEarly", err)
	}

	// Resumed with the same patience: a clear error, not a silent no-op.
	_, err = loop(3, &out, &display).Resume(nil)
	if !errors.Is(err, train.ErrStoppedEarly) || !strings.Contains(err.Error(), "raise training.early_stop.patience above 3, or set it to 0") ||
		!strings.Contains(err.Error(), "stopped early at step 35") {
		t.Fatalf("resume of the stopped run: %v, want ErrStoppedEarly saying what to set", err)
	}
	// With patience 5 it goes on, its count at 3: 2.9 and 3.0 end it at
	// step 45.
	out.Reset()
	l = loop(5, &out, &display)
	if _, err := l.Resume(nil); err != nil {
		t.Fatal(err)
	}
	if err := l.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if at, ok := l.StoppedEarly(); !ok || at != 45 {
		t.Errorf("resumed with patience 5: stopped early %v at step %d, want step 45", ok, at)
	}

	// min_delta 0.1: 2.45, 2.42, 2.41 improve on 2.5 by less; best.ckpt
	// still follows them.
	dir = t.TempDir()
	step := 0
	l, err = train.New(scripted{scores: []float64{3, 2.5, 2.45, 2.42, 2.41, 1, 1}, every: 5, step: &step},
		train.Settings{Dir: dir, Steps: 100, Batch: 8, Seed: 3, DType: graph.Float64, LogEvery: 5, EvalEvery: 5,
			EarlyStop: train.EarlyStop{Patience: 3, MinDelta: 0.1}})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	best, err = ckpt.ReadCheckpoint(filepath.Join(dir, train.BestCheckpoint))
	if at, _ := l.StoppedEarly(); at != 25 || err != nil || best.Step != 25 {
		t.Errorf("min_delta 0.1: stopped at step %d, best.ckpt at step %d (%v); want both 25", at, best.Step, err)
	}
}

// lastMetricsLine is the last line of a run's metrics.jsonl.
func lastMetricsLine(t *testing.T, dir string) map[string]any {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, train.MetricsFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var last map[string]any
	for sc := bufio.NewScanner(f); sc.Scan(); {
		last = nil
		if err := json.Unmarshal(sc.Bytes(), &last); err != nil {
			t.Fatal(err)
		}
	}
	return last
}
