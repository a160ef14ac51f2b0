package tasks

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/probformer/probformer/cmd/trainer/train"
	"github.com/probformer/probformer/configs"
	"github.com/probformer/probformer/graph"
)

// stopAt is a task that cancels its run while feeding step at.
type stopAt struct {
	train.Task
	cancel context.CancelFunc
	at     int
}

func (s stopAt) Feed(rng *rand.Rand, prog *graph.Program, step int) error {
	if step == s.at {
		s.cancel()
	}
	return s.Task.Feed(rng, prog, step)
}

// libraryRun trains a preset with overrides through the library
// (configs.Load, train.NewTask, train.SettingsFromConfig) in dir; if stop
// > 0 the run is interrupted at that step, and resume resumes the run in
// dir first.
func libraryRun(t *testing.T, dir, preset string, sets []string, stop int, resume bool) *train.Loop {
	t.Helper()
	cfg, err := configs.Load(preset, sets)
	if err != nil {
		t.Fatal(err)
	}
	tk, err := train.NewTask(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := train.SettingsFromConfig(cfg, dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if stop > 0 {
		tk = stopAt{tk, cancel, stop}
	}
	loop, err := train.New(tk, s)
	if err != nil {
		t.Fatal(err)
	}
	if resume {
		if _, err := loop.Resume(nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := loop.Run(ctx); err != nil {
		t.Fatal(err)
	}
	return loop
}

// compareRuns checks that two runs logged the same numeric metrics at
// the same steps and ended on the same weights, to tol relative (0: bit
// for bit).
func compareRuns(t *testing.T, what string, gotDir string, got *train.Loop, wantDir string, want *train.Loop, tol float64) {
	t.Helper()
	close := func(a, b float64) bool { return a == b || math.Abs(a-b) <= tol*(1+math.Abs(b)) }
	g, err := train.ReadMetrics(gotDir)
	if err != nil {
		t.Fatal(err)
	}
	w, err := train.ReadMetrics(wantDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(g) != len(w) {
		t.Fatalf("%s: %d metrics lines, want %d", what, len(g), len(w))
	}
	compared := 0
	for i := range w {
		for name, v := range w[i] {
			if name == "wall_sec" || name == "steps_per_sec" {
				continue
			}
			compared++
			if !close(g[i][name], v) {
				t.Errorf("%s: step %v: %s = %.17g, want %.17g", what, w[i]["step"], name, g[i][name], v)
			}
		}
	}
	for _, p := range want.Params().List() {
		q := got.Params().Lookup(p.Name).Values()
		for i, v := range p.Values() {
			if !close(q[i], v) {
				t.Fatalf("%s: %s[%d] = %.17g, want %.17g", what, p.Name, i, q[i], v)
			}
		}
	}
	if compared == 0 {
		t.Fatalf("%s: no metrics compared", what)
	}
}

// TestAccumulateEqualsOneBatch: training.accumulate = 4 runs each step as
// 4 micro-batches of batch/4 and takes one optimizer step; in float64 its
// 20 steps follow the run of accumulate 1 at the same training.batch to
// 1e-10 (losses, validation metrics, final weights), for a regression
// (maxnorm) and a token cross-entropy over padded batches with dropout
// (seq2seq-toy, micro-batches weighed by their real tokens), and BERT's
// MLM + NSP (bert-toy: a mean over masked positions plus a mean over
// pairs, micro-batches holding unequal counts of masked positions). A run
// with accumulation interrupted at step 9 resumes bit for bit.
func TestAccumulateEqualsOneBatch(t *testing.T) {
	for _, c := range []struct {
		preset string
		sets   []string
	}{
		{"maxnorm", append(slices.Clone(tiny), "training.steps=20", "training.eval_every=10")},
		{"seq2seq-toy", append(slices.Clone(tinySeq2Seq), "training.steps=20", "training.eval_every=10")},
		{"bert-toy", append(slices.Clone(tinyBERT), "training.steps=20", "training.eval_every=10")},
	} {
		sets := append(c.sets, "dtype=float64", "training.log_every=1")
		oneDir, fourDir := t.TempDir(), t.TempDir()
		one := libraryRun(t, oneDir, c.preset, append(sets, "training.accumulate=1"), 0, false)
		four := libraryRun(t, fourDir, c.preset, append(sets, "training.accumulate=4"), 0, false)
		compareRuns(t, c.preset+" accumulate 4", fourDir, four, oneDir, one, 1e-10)

		if c.preset != "maxnorm" {
			continue
		}
		stopped := t.TempDir()
		sets = append(sets, "training.accumulate=4")
		if l := libraryRun(t, stopped, c.preset, sets, 9, false); !l.Interrupted() || l.Step() != 9 {
			t.Fatalf("interrupted %v at step %d, want step 9", l.Interrupted(), l.Step())
		}
		resumed := libraryRun(t, stopped, c.preset, sets, 0, true)
		compareRuns(t, c.preset+" accumulate 4 resumed at step 9", stopped, resumed, fourDir, four, 0)
	}
}

// TestMaxNormValidationAnySize: maxnorm's validation set of 1,000 sets,
// not a multiple of its evaluation batch of 256, scores as the model run
// on all 1,000 sets at once does, to 1e-12 in float64; the task's
// Evaluate pads nothing by hand (train.RunEvalBatches).
func TestMaxNormValidationAnySize(t *testing.T) {
	tk, loop := trainTiny(t, "maxnorm", append(slices.Clone(tiny), "data.valid_sets=1000", "dtype=float64",
		"training.steps=10", "training.eval_every=10")...)
	task := tk.(*maxNormTask)
	if task.valid.Size != 1000 {
		t.Fatalf("validation set of %d sets, want 1000", task.valid.Size)
	}
	all, err := graph.Compile(loop.Params(), task.Build(1000), false)
	if err != nil {
		t.Fatal(err)
	}
	if err := feedSets(all, task.valid); err != nil {
		t.Fatal(err)
	}
	if err := all.Run(); err != nil {
		t.Fatal(err)
	}
	pred, _, err := all.Output("pred")
	if err != nil {
		t.Fatal(err)
	}
	want, err := regressionMetrics("valid", pred, task.valid.Y, task.data.Dim)
	if err != nil {
		t.Fatal(err)
	}
	got := loop.Metrics()
	for name, w := range want {
		if g, ok := got[name]; !ok || math.Abs(g-w) > 1e-12*math.Max(1, math.Abs(w)) {
			t.Errorf("%s = %.17g in batches of 256, %.17g over all 1,000 sets at once", name, g, w)
		}
	}
}
