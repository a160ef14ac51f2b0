package train_test

import (
	"bytes"
	"context"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/probformer/probformer/cmd/trainer/train"
	"github.com/probformer/probformer/graph"
)

// steppedSum is setSum on a clock that a step moves by 100 ms, so that the
// loop's speeds are known without timing anything; it knows its training
// set's size, and cancels its run while feeding step stopAt, if set.
type steppedSum struct {
	setSum
	clock  *time.Time
	stop   context.CancelFunc
	stopAt int
}

func (t steppedSum) Feed(rng *rand.Rand, prog *graph.Program, step int) error {
	*t.clock = time.Unix(0, 0).Add(time.Duration(step) * 100 * time.Millisecond)
	if t.stop != nil && step == t.stopAt {
		t.stop()
	}
	return t.setSum.Feed(rng, prog, step)
}

func (steppedSum) Examples(split string) (int, bool) { return 5000, split == "train" }

// recorder is a Progress that keeps what the loop tells it.
type recorder struct {
	info     train.RunInfo
	rates    map[int]float64
	finished int
}

func (r *recorder) Start(info train.RunInfo) { r.info, r.rates = info, map[int]float64{} }
func (r *recorder) Update(int, float64)      {}
func (r *recorder) Log(step int, _, _, rate float64, _ map[string]float64) {
	r.rates[step] = rate
}
func (r *recorder) Eval(int, map[string]float64) {}
func (r *recorder) Finish(step int)              { r.finished = step }

// TestLoopProgressAcrossResume: a run interrupted at step 15 ends its
// display at step 15 and says it saved; resumed to 40 steps, the display
// starts with the run's description from step 15, and the first speed it
// reports counts the steps since the resume, not since step 0.
func TestLoopProgressAcrossResume(t *testing.T) {
	dir := t.TempDir()
	var now time.Time
	run := func(task steppedSum) (*train.Loop, *recorder, *bytes.Buffer) {
		rec, out := &recorder{}, &bytes.Buffer{}
		l, err := train.New(task, train.Settings{Dir: dir, Steps: 40, Batch: 8, Seed: 1, DType: graph.Float64,
			LogEvery: 10, EvalEvery: 20, Progress: rec, Out: out, Clock: func() time.Time { return now }})
		if err != nil {
			t.Fatal(err)
		}
		return l, rec, out
	}

	ctx, cancel := context.WithCancel(context.Background())
	first, rec, out := run(steppedSum{clock: &now, stop: cancel, stopAt: 15})
	if err := first.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if rec.finished != 15 || !first.Interrupted() {
		t.Errorf("interrupted run: display finished at step %d (interrupted %v), want 15", rec.finished, first.Interrupted())
	}
	if !strings.Contains(out.String(), "interrupted at step 15: saved checkpoint") {
		t.Errorf("output %q does not say where the run stopped and was saved", out.String())
	}

	second, rec, _ := run(steppedSum{clock: &now})
	if _, err := second.Resume(nil); err != nil {
		t.Fatal(err)
	}
	now = time.Unix(0, 0).Add(15 * 100 * time.Millisecond) // the resume happens at step 15's time
	if err := second.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := train.RunInfo{Steps: 40, From: 15, Params: second.Params().Count(), Dir: dir,
		Threads: runtime.GOMAXPROCS(0), Examples: map[string]int{"train": 5000}}
	got := rec.info
	if got.Steps != want.Steps || got.From != want.From || got.Params != want.Params || got.Dir != want.Dir ||
		got.Threads != want.Threads || len(got.Examples) != 1 || got.Examples["train"] != 5000 {
		t.Errorf("start info %+v, want %+v", got, want)
	}
	// Step 20 is 5 steps and 0.5 s after the resume: 10 steps/s (from
	// step 0 it would be 40).
	if r := rec.rates[20]; r != 10 {
		t.Errorf("first speed after the resume: %v steps/s, want 10", r)
	}
	if rec.finished != 40 {
		t.Errorf("finished run: display finished at step %d, want 40", rec.finished)
	}
}
