package train_test

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/probformer/probformer/cmd/trainer/train"
	"github.com/probformer/probformer/graph"
	"github.com/probformer/probformer/graph/optim"
)

// lineFit regresses y = Σ x·w on 4 inputs, through a hidden layer, with
// a validation set of 1,000 examples scored in batches of 256: its
// Evaluate is written per batch with the library's helpers, with no
// padding code. Its loss is a mean over the rows the mask input keeps,
// with their count as the loss weight.
type lineFit struct {
	x, y []float64 // the validation set: 4 inputs and 1 target an example
}

func newLineFit(n int) lineFit {
	rng := rand.New(rand.NewPCG(7, 7))
	t := lineFit{x: make([]float64, 4*n), y: make([]float64, n)}
	fill(rng, t.x, t.y)
	return t
}

// fill draws examples: 4 inputs each in x, their target in y.
func fill(rng *rand.Rand, x, y []float64) {
	for i := range y {
		y[i] = 0
		for j, w := range []float64{1, -2, 0.5, 3} {
			x[4*i+j] = rng.NormFloat64()
			y[i] += w * x[4*i+j]
		}
	}
}

func (lineFit) Build(batch int) graph.BuildFunc {
	return func(b *graph.Builder) error {
		x, y, m := b.Input("x", batch, 4), b.Input("y", batch, 1), b.Input("m", batch, 1)
		h := graph.LinearReLU(x, b.Param("l1.w", []int{4, 16}, graph.Glorot), b.Param("l1.b", []int{16}, graph.Zeros))
		pred := graph.Linear(h, b.Param("l2.w", []int{16, 1}, graph.Glorot), b.Param("l2.b", []int{1}, graph.Zeros))
		b.Output("pred", pred)
		real := graph.Sum(m)
		b.SetLoss(graph.Div(graph.Sum(graph.Mul(graph.Square(graph.Sub(pred, y)), m)), real))
		b.SetLossWeight(real)
		return nil
	}
}

func (lineFit) Feed(rng *rand.Rand, prog *graph.Program, _ int) error {
	n := prog.InputShape("y")[0]
	x, y, m := make([]float64, 4*n), make([]float64, n), make([]float64, n)
	fill(rng, x, y)
	for i := range m {
		m[i] = 1
	}
	return feedAll(prog, x, y, m)
}

func feedAll(prog *graph.Program, x, y, m []float64) error {
	if err := prog.Feed("x", x); err != nil {
		return err
	}
	if err := prog.Feed("y", y); err != nil {
		return err
	}
	return prog.Feed("m", m)
}

func (lineFit) EvalBatch() int { return 256 }

// Evaluate scores the validation set: valid_mse from the masked loss,
// valid_mae from the real rows' predictions.
func (t lineFit) Evaluate(_ *graph.Params, prog *graph.Program, split string) (map[string]float64, error) {
	var means train.Means
	err := train.RunEvalBatches(prog, len(t.y), t.EvalBatch(),
		func(b train.EvalBatch) error {
			return feedAll(prog, b.Gather(t.x, 4), b.Gather(t.y, 1), b.Mask())
		},
		func(b train.EvalBatch) error {
			means.AddLoss(split+"_mse", prog)
			pred, _, err := prog.Output("pred")
			var abs float64
			for i, p := range b.Keep(pred) {
				abs += math.Abs(p - t.y[b.Start+i])
			}
			means.Add(split+"_mae", abs/float64(b.Real), float64(b.Real))
			return err
		})
	return means.Metrics(), err
}

func (lineFit) Selection() (string, bool) { return "valid_mse", false }

// TestEvalBatchesAnySize: a task whose validation set of 1,000 examples
// is not a multiple of its evaluation batch of 256, trained by the loop,
// scores the validation set as one program of all 1,000 examples does,
// to 1e-12: the padding of the last batch counts for nothing.
func TestEvalBatchesAnySize(t *testing.T) {
	task := newLineFit(1000)
	l, err := train.New(task, train.Settings{Dir: t.TempDir(), Steps: 40, Batch: 32, Seed: 1, DType: graph.Float64,
		LogEvery: 10, EvalEvery: 20, Optimizer: optim.NewAdam(1e-2)})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := l.Metrics()

	all, err := graph.Compile(l.Params(), task.Build(1000), false)
	if err != nil {
		t.Fatal(err)
	}
	ones := slices.Repeat([]float64{1}, 1000)
	if err := feedAll(all, task.x, task.y, ones); err != nil {
		t.Fatal(err)
	}
	if err := all.Run(); err != nil {
		t.Fatal(err)
	}
	pred, _, _ := all.Output("pred")
	var abs float64
	for i, p := range pred {
		abs += math.Abs(p - task.y[i])
	}
	want := map[string]float64{"valid_mse": all.Loss(), "valid_mae": abs / 1000}
	for name, w := range want {
		if g, ok := got[name]; !ok || math.Abs(g-w) > 1e-12*math.Max(1, math.Abs(w)) {
			t.Errorf("%s = %.17g in batches of 256, %.17g over all 1,000 at once", name, g, w)
		}
	}
	// The last batch is padded: without the mask the score would differ.
	if w := want["valid_mse"]; w < 1e-6 {
		t.Fatalf("valid_mse %g: too small to tell padding from none", w)
	}
}

func TestEvalBatches(t *testing.T) {
	bs := train.EvalBatches(10, 4)
	want := []train.EvalBatch{{Start: 0, Real: 4, Size: 4}, {Start: 4, Real: 4, Size: 4}, {Start: 8, Real: 2, Size: 4}}
	if !slices.Equal(bs, want) {
		t.Fatalf("EvalBatches(10, 4) = %v, want %v", bs, want)
	}
	last := bs[2]
	if !last.Padded() || !slices.Equal(last.Examples(), []int{8, 9, 8, 8}) || !slices.Equal(last.Mask(), []float64{1, 1, 0, 0}) {
		t.Errorf("last batch: examples %v, mask %v", last.Examples(), last.Mask())
	}
	values := []float64{0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9}
	if g := last.Gather(values, 2); !slices.Equal(g, []float64{8, 8, 9, 9, 8, 8, 8, 8}) {
		t.Errorf("Gather: %v", g)
	}
	if g := last.GatherIndices([]int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, 1); !slices.Equal(g, []int{8, 9, 8, 8}) {
		t.Errorf("GatherIndices: %v", g)
	}
	if k := last.Keep([]float64{1, 2, 3, 4, 5, 6, 7, 8}); !slices.Equal(k, []float64{1, 2, 3, 4}) {
		t.Errorf("Keep: %v", k)
	}
	if m := last.RowMask(3); !slices.Equal(m, []float64{1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0}) {
		t.Errorf("RowMask(3): %v", m)
	}
	if len(train.EvalBatches(0, 4)) != 0 {
		t.Error("an empty split has batches")
	}
	var m train.Means
	m.Add("a", 2, 3)
	m.Add("a", 4, 1)
	m.Add("b", 1, 0)
	if got := m.Metrics(); got["a"] != 2.5 || len(got) != 1 {
		t.Errorf("Means: %v, want a = 2.5 alone", got)
	}
}
