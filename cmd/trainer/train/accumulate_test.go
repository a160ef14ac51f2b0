package train_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/probformer/probformer/cmd/trainer/train"
	"github.com/probformer/probformer/graph"
	"github.com/probformer/probformer/graph/ckpt"
	"github.com/probformer/probformer/graph/optim"
)

// runAccumulated trains maskedEcho (batch 16, dropout, losses over
// unequal numbers of real elements) with accumulate micro-batches a step
// on ranks in-process processes; the rank given (if ≥ 0) is interrupted
// while it feeds step stopAt, and resume restores the latest checkpoint
// first. It returns each rank's loop.
func runAccumulated(t *testing.T, dir string, ranks, accumulate, steps int, resume bool, stopRank, stopAt int) []*train.Loop {
	t.Helper()
	g := newGroup(ranks)
	loops := make([]*train.Loop, ranks)
	errs := make([]error, ranks)
	var wg sync.WaitGroup
	for r := range ranks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var task train.Task = maskedEcho{}
			if r == stopRank {
				task = cancelAt{maskedEcho{}, cancel, stopAt}
			}
			s := train.Settings{Dir: dir, Steps: steps, Batch: 16, Seed: 5, DType: graph.Float64,
				LogEvery: 5, EvalEvery: 10, CheckpointEvery: 10, KeepCheckpoints: 10,
				Optimizer: optim.NewAdam(1e-2), Accumulate: accumulate}
			if ranks > 1 {
				s.Comm = member{g, r}
			}
			l, err := train.New(task, s)
			if err != nil {
				errs[r] = err
				return
			}
			loops[r] = l
			if resume {
				var ck *ckpt.Checkpoint
				if r == 0 {
					if ck, _, err = train.LatestCheckpoint(dir, nil); err != nil {
						errs[r] = err
						return
					}
				}
				if ranks > 1 {
					if ck, err = train.ShareCheckpoint(member{g, r}, ck); err != nil {
						errs[r] = err
						return
					}
				}
				if err := l.Restore(ck); err != nil {
					errs[r] = err
					return
				}
			}
			errs[r] = l.Run(ctx)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return loops
}

// sameRun checks that two runs logged the same losses and validation
// score and ended on the same weights, to tol (0: bit for bit).
func sameRun(t *testing.T, what string, gotDir string, got *train.Loop, wantDir string, want *train.Loop, tol float64) {
	t.Helper()
	g, w := trainLosses(t, gotDir), trainLosses(t, wantDir)
	if len(g) != len(w) || len(w) == 0 {
		t.Fatalf("%s: logged %d losses, want %d", what, len(g), len(w))
	}
	for step, v := range w {
		if !closeTo(g[step], v, tol) {
			t.Errorf("%s: step %d: loss %.17g, want %.17g", what, step, g[step], v)
		}
	}
	if !closeTo(got.Metrics()["valid_mse"], want.Metrics()["valid_mse"], tol) {
		t.Errorf("%s: valid_mse %.17g, want %.17g", what, got.Metrics()["valid_mse"], want.Metrics()["valid_mse"])
	}
	sameWeights(t, what, got, want, tol)
}

// sameWeights checks that two loops' parameters agree to tol.
func sameWeights(t *testing.T, what string, got, want *train.Loop, tol float64) {
	t.Helper()
	for _, p := range want.Params().List() {
		q := got.Params().Lookup(p.Name).Values()
		for i, v := range p.Values() {
			if !closeTo(q[i], v, tol) {
				t.Fatalf("%s: %s[%d] = %.17g, want %.17g", what, p.Name, i, q[i], v)
			}
		}
	}
}

// TestAccumulateEqualsOneBatch: 4 micro-batches of 4 a step follow the
// run of one batch of 16 to 1e-10 in float64 (dropout masks, and losses
// that are means over unequal numbers of real elements, weighed by their
// loss weights); so do 2 in-process ranks of 2 micro-batches each. A run
// with accumulation interrupted at step 13 resumes bit for bit to the
// uninterrupted one's losses and weights, and may resume with another
// split.
func TestAccumulateEqualsOneBatch(t *testing.T) {
	oneDir, fourDir, pairDir := t.TempDir(), t.TempDir(), t.TempDir()
	one := runAccumulated(t, oneDir, 1, 1, 30, false, -1, 0)[0]
	four := runAccumulated(t, fourDir, 1, 4, 30, false, -1, 0)[0]
	sameRun(t, "accumulate 4", fourDir, four, oneDir, one, 1e-10)
	pair := runAccumulated(t, pairDir, 2, 2, 30, false, -1, 0)
	sameRun(t, "2 ranks × accumulate 2", pairDir, pair[0], oneDir, one, 1e-10)
	sameWeights(t, "2 ranks × accumulate 2, rank 1", pair[1], one, 1e-10)

	stopped := t.TempDir()
	l := runAccumulated(t, stopped, 1, 4, 30, false, 0, 13)[0]
	if !l.Interrupted() || l.Step() != 13 {
		t.Fatalf("interrupted %v at step %d, want step 13", l.Interrupted(), l.Step())
	}
	resumed := runAccumulated(t, stopped, 1, 4, 30, true, -1, 0)[0]
	sameRun(t, "accumulate 4, resumed at step 13", stopped, resumed, fourDir, four, 0)

	other := t.TempDir()
	runAccumulated(t, other, 1, 4, 30, false, 0, 13)
	resumed = runAccumulated(t, other, 2, 1, 30, true, -1, 0)[0]
	sameRun(t, "accumulate 4 resumed on 2 ranks without", other, resumed, oneDir, one, 1e-10)
}

func TestAccumulateErrors(t *testing.T) {
	for _, c := range []struct {
		s    train.Settings
		want string
	}{
		{train.Settings{Steps: 10, Batch: 16, Accumulate: 3}, "training.batch = 16: want a multiple of training.accumulate = 3"},
		{train.Settings{Steps: 10, Batch: 16, Accumulate: 3, Comm: member{newGroup(2), 0}}, "training.accumulate = 3 times the 2 processes"},
		{train.Settings{Steps: 10, Batch: 16, Accumulate: -1}, "accumulate -1"},
	} {
		_, err := train.New(maskedEcho{}, c.s)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.s, err, c.want)
		}
	}
}
