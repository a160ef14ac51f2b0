package optim

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/probformer/probformer/graph"
)

// model is a tiny regression on sets: mean over the set of a linear map.
func model(batch int) graph.BuildFunc {
	return func(b *graph.Builder) error {
		x := b.Input("x", batch, 3, 2)
		y := b.Input("y", batch, 1)
		w := b.Param("lin.w", []int{2, 1}, graph.Glorot)
		bias := b.Param("lin.b", []int{1}, graph.Zeros)
		pred := graph.Mean(graph.Linear(x, w, bias), 1)
		b.Output("pred", pred)
		b.SetLoss(graph.Mean(graph.Square(graph.Sub(pred, y))))
		return nil
	}
}

// TestTrainAndEvalShareWeights runs a training program and an evaluation
// program of another batch size on one Params: every Adam step is seen by
// the evaluation program, and a freshly compiled one agrees with it.
func TestTrainAndEvalShareWeights(t *testing.T) {
	t.Parallel()
	for _, dt := range []graph.DType{graph.Float32, graph.Float64} {
		ps := graph.NewParams(dt, 7)
		train, err := graph.Compile(ps, model(4), true)
		if err != nil {
			t.Fatal(err)
		}
		eval, err := graph.Compile(ps, model(1), false)
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(1, 1))
		opt := NewAdam(0.05)
		xs := make([]float64, 4*3*2)
		ys := make([]float64, 4)
		probe := []float64{1, 2, 3, 4, 5, 6}
		var first, last float64
		for step := range 200 {
			for i := range xs {
				xs[i] = rng.NormFloat64()
			}
			for i := range ys {
				ys[i] = 0
				for j := range 3 {
					ys[i] += (2*xs[i*6+j*2] - xs[i*6+j*2+1]) / 3
				}
			}
			if err := train.Feed("x", xs); err != nil {
				t.Fatal(err)
			}
			if err := train.Feed("y", ys); err != nil {
				t.Fatal(err)
			}
			if err := train.Run(); err != nil {
				t.Fatal(err)
			}
			if step == 0 {
				first = train.Loss()
			}
			last = train.Loss()
			if _, err := opt.Step(train); err != nil {
				t.Fatal(err)
			}
		}
		if !(last < first/100) {
			t.Fatalf("%v: loss %v → %v did not fall", dt, first, last)
		}
		run := func(p *graph.Program) float64 {
			if err := p.Feed("x", probe); err != nil {
				t.Fatal(err)
			}
			if err := p.Run(); err != nil {
				t.Fatal(err)
			}
			v, _, _ := p.Output("pred")
			return v[0]
		}
		fresh, err := graph.Compile(ps, model(1), false)
		if err != nil {
			t.Fatal(err)
		}
		want := (2*1 - 2 + 2*3 - 4 + 2*5 - 6) / 3.0
		if a, b := run(eval), run(fresh); a != b || math.Abs(a-want) > 0.05 {
			t.Fatalf("%v: eval program says %v, fresh program %v, want ≈ %v", dt, a, b, want)
		}
	}
}
