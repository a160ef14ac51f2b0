package train_test

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/probformer/probformer/cmd/trainer/train"
	"github.com/probformer/probformer/graph"
	"github.com/probformer/probformer/graph/ckpt"
	"github.com/probformer/probformer/graph/optim"
)

// group is an in-process train.Comm of n goroutines: what MPI does
// between processes, with a barrier. Sums are taken in rank order, so
// every member gets the same bits.
type group struct {
	mu      sync.Mutex
	cond    *sync.Cond
	n       int
	arrived int
	gen     int
	bufs    [][]float64
	pending []byte // root's broadcast, until all have arrived
	bytes   []byte
	result  []float64
}

func newGroup(n int) *group {
	g := &group{n: n, bufs: make([][]float64, n)}
	g.cond = sync.NewCond(&g.mu)
	return g
}

// member is one rank's handle on a group.
type member struct {
	g    *group
	rank int
}

func (m member) Rank() int { return m.rank }
func (m member) Size() int { return m.g.n }

// meet runs deposit for every member and last for the last to arrive,
// then done for every member. A member may deposit for the next meeting
// before the others are done with this one, so deposit must not touch
// what done reads; last moves it there.
func (g *group) meet(deposit func(), last func(), done func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	deposit()
	gen := g.gen
	g.arrived++
	if g.arrived == g.n {
		last()
		g.arrived = 0
		g.gen++
		g.cond.Broadcast()
	} else {
		for gen == g.gen {
			g.cond.Wait()
		}
	}
	done()
}

func (m member) AllreduceSum(buf []float64) error {
	g := m.g
	g.meet(func() { g.bufs[m.rank] = append([]float64(nil), buf...) }, func() {
		g.result = make([]float64, len(buf))
		for _, b := range g.bufs {
			for i, v := range b {
				g.result[i] += v
			}
		}
	}, func() { copy(buf, g.result) })
	return nil
}

func (m member) Broadcast(buf []byte, root int) error {
	g := m.g
	g.meet(func() {
		if m.rank == root {
			g.pending = append([]byte(nil), buf...)
		}
	}, func() { g.bytes = g.pending }, func() { copy(buf, g.bytes) })
	return nil
}

// maskedEcho learns y_i = 2·x_i on sets of 8 numbers of random lengths,
// through a dropout layer: its loss is a mean over the real elements, so
// shards hold unequal counts and must be weighed by them.
type maskedEcho struct{}

func (maskedEcho) Build(batch int) graph.BuildFunc {
	return func(b *graph.Builder) error {
		x, y, m := b.Input("x", batch*8, 1), b.Input("y", batch*8, 1), b.Input("m", batch*8, 1)
		h := graph.LinearReLU(x, b.Param("l1.w", []int{1, 16}, graph.Glorot), b.Param("l1.b", []int{16}, graph.Zeros))
		h = b.Dropout("drop", h, 0.2)
		pred := graph.Linear(h, b.Param("l2.w", []int{16, 1}, graph.Glorot), b.Param("l2.b", []int{1}, graph.Zeros))
		real := graph.Sum(m)
		b.SetLoss(graph.Div(graph.Sum(graph.Mul(graph.Square(graph.Sub(pred, y)), m)), real))
		b.SetLossWeight(real)
		return nil
	}
}

func (maskedEcho) Feed(rng *rand.Rand, prog *graph.Program, _ int) error {
	n := prog.InputShape("x")[0] // the global batch's elements, in a shard too
	x, y, m := make([]float64, n), make([]float64, n), make([]float64, n)
	for s := 0; s < n/8; s++ {
		size := 1 + rng.IntN(8)
		for i := range size {
			x[8*s+i] = rng.Float64()
			y[8*s+i], m[8*s+i] = 2*x[8*s+i], 1
		}
	}
	for _, f := range []struct {
		name string
		v    []float64
	}{{"x", x}, {"y", y}, {"m", m}} {
		if err := prog.Feed(f.name, f.v); err != nil {
			return err
		}
	}
	return nil
}

func (maskedEcho) EvalBatch() int { return 64 }

func (t maskedEcho) Evaluate(_ *graph.Params, prog *graph.Program, split string) (map[string]float64, error) {
	if err := t.Feed(rand.New(rand.NewPCG(uint64(len(split)), 0)), prog, 0); err != nil {
		return nil, err
	}
	if err := prog.Run(); err != nil {
		return nil, err
	}
	return map[string]float64{split + "_mse": prog.Loss()}, nil
}

func (maskedEcho) Selection() (string, bool) { return "valid_mse", false }

// trainLosses reads the train_loss of every line of a run's metrics.jsonl.
func trainLosses(t *testing.T, dir string) map[int]float64 {
	t.Helper()
	out, err := train.ReadMetric(dir, "train_loss")
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// runGroup trains maskedEcho on n in-process ranks to steps; ctx of rank
// stopRank (if ≥ 0) is cancelled while it feeds step stopAt. It returns
// each rank's loop.
func runGroup(t *testing.T, dir string, n, steps int, resume bool, stopRank, stopAt int) []*train.Loop {
	t.Helper()
	g := newGroup(n)
	loops := make([]*train.Loop, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var task train.Task = maskedEcho{}
			if r == stopRank {
				task = cancelAt{maskedEcho{}, cancel, stopAt}
			}
			s := train.Settings{Dir: dir, Steps: steps, Batch: 8, Seed: 3, DType: graph.Float64,
				LogEvery: 5, EvalEvery: 10, CheckpointEvery: 10, KeepCheckpoints: 10,
				Optimizer: optim.NewAdam(1e-2)}
			if n > 1 {
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
					ck, _, err = train.LatestCheckpoint(dir, nil)
					if err != nil {
						errs[r] = err
						return
					}
				}
				if n > 1 {
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

// cancelAt cancels its run's context while feeding step at.
type cancelAt struct {
	maskedEcho
	cancel context.CancelFunc
	at     int
}

func (c cancelAt) Feed(rng *rand.Rand, prog *graph.Program, step int) error {
	if step == c.at {
		c.cancel()
	}
	return c.maskedEcho.Feed(rng, prog, step)
}

func closeTo(a, b, tol float64) bool { return math.Abs(a-b) <= tol*(1+math.Abs(b)) }

// TestDataParallelEqualsOneProcess: two ranks, each training on its half
// of every batch (unequal numbers of real elements, dropout), follow the
// loss curve of one process to 1e-10 in float64 and end with its
// parameters; only rank 0 writes. Then a run stopped on one rank only
// stops on both at the same step, and resumes on one process along the
// uninterrupted curve.
func TestDataParallelEqualsOneProcess(t *testing.T) {
	one, two := t.TempDir(), t.TempDir()
	single := runGroup(t, one, 1, 40, false, -1, 0)[0]
	pair := runGroup(t, two, 2, 40, false, -1, 0)
	want, got := trainLosses(t, one), trainLosses(t, two)
	if len(got) != len(want) || len(want) != 8 {
		t.Fatalf("logged %d and %d losses, want 8 each", len(got), len(want))
	}
	for step, w := range want {
		if !closeTo(got[step], w, 1e-10) {
			t.Errorf("step %d: two ranks' loss %.15g, one process %.15g", step, got[step], w)
		}
	}
	for _, l := range pair {
		for _, p := range single.Params().List() {
			q := l.Params().Lookup(p.Name).Values()
			for i, v := range p.Values() {
				if !closeTo(q[i], v, 1e-9) {
					t.Fatalf("%s[%d]: %v on two ranks, %v on one", p.Name, i, q[i], v)
				}
			}
		}
	}
	if !closeTo(pair[0].Metrics()["valid_mse"], single.Metrics()["valid_mse"], 1e-9) {
		t.Errorf("valid_mse %v on two ranks, %v on one", pair[0].Metrics()["valid_mse"], single.Metrics()["valid_mse"])
	}
	if _, ok := pair[1].Metrics()["valid_mse"]; ok {
		t.Error("rank 1 validated: rank 0 alone should")
	}

	// Rank 1 alone is interrupted while it feeds step 17: both stop after
	// that step, and rank 0 saves. One process resumes to 40.
	three := t.TempDir()
	stopped := runGroup(t, three, 2, 40, false, 1, 17)
	for r, l := range stopped {
		if !l.Interrupted() || l.Step() != 17 {
			t.Fatalf("rank %d: interrupted %v at step %d, want step 17", r, l.Interrupted(), l.Step())
		}
	}
	runGroup(t, three, 1, 40, true, -1, 0)
	resumed := trainLosses(t, three)
	for step, w := range want {
		if !closeTo(resumed[step], w, 1e-10) {
			t.Errorf("step %d: resumed on one process: loss %.15g, uninterrupted %.15g", step, resumed[step], w)
		}
	}
}

// TestDataParallelResumesOnMoreRanks: a run of one process resumes on
// two, along the uninterrupted curve.
func TestDataParallelResumesOnMoreRanks(t *testing.T) {
	one, mixed := t.TempDir(), t.TempDir()
	runGroup(t, one, 1, 30, false, -1, 0)
	runGroup(t, mixed, 1, 20, false, -1, 0)
	runGroup(t, mixed, 2, 30, true, -1, 0)
	want, got := trainLosses(t, one), trainLosses(t, mixed)
	for step, w := range want {
		if !closeTo(got[step], w, 1e-10) {
			t.Errorf("step %d: resumed on two ranks: loss %.15g, one process %.15g", step, got[step], w)
		}
	}
}

func TestDataParallelErrors(t *testing.T) {
	g := newGroup(3)
	_, err := train.New(maskedEcho{}, train.Settings{Steps: 10, Batch: 8, Comm: member{g, 0}})
	if err == nil || !strings.Contains(err.Error(), "training.batch = 8") {
		t.Fatalf("a batch of 8 over 3 processes: %v, want an error naming training.batch", err)
	}

	// Ranks whose weights part (here by hand, as a bug would) are caught
	// at the next checkpoint, on every rank.
	g = newGroup(2)
	dir := t.TempDir()
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for r := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := train.New(maskedEcho{}, train.Settings{Dir: dir, Steps: 10, Batch: 8, DType: graph.Float64, Comm: member{g, r}})
			if err != nil {
				errs[r] = err
				return
			}
			if r == 1 {
				p := l.Params().List()[0]
				v := p.Values()
				v[0] += 1e-12
				if err := p.SetValues(v); err != nil {
					errs[r] = err
					return
				}
			}
			errs[r] = l.Run(context.Background())
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if !errors.Is(err, train.ErrRanksDiffer) {
			t.Errorf("rank %d: %v, want ErrRanksDiffer", r, err)
		}
	}
}
