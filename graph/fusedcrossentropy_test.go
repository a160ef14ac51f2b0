package graph

import (
	"github.com/probformer/probformer/graph/graphtest"
	"math"
	"math/rand/v2"
	"testing"
)

// TestCrossEntropyFloat32MatchesFloat64: the float32 cross-entropy
// (softmax.c's row kernels where the build and CPU have them) agrees with
// the float64 one in loss and gradient, for vocabularies around the
// vector width and one the size of a real corpus's.
func TestCrossEntropyFloat32MatchesFloat64(t *testing.T) {
	t.Parallel()
	for _, v := range []int{5, 8, 17, 4459} {
		const rows = 13
		rng := rand.New(rand.NewPCG(uint64(v), 2))
		targets := make([]int, rows)
		for i := range targets {
			targets[i] = rng.IntN(v)
		}
		fn := func(b *Builder) error {
			logits := b.Param("l", []int{rows, v}, Normal(4))
			b.SetLoss(Mean(SoftmaxCrossEntropy(logits, b.IndexConstant("y", []int{rows}, targets), 0.1)))
			return nil
		}
		losses := map[DType]float64{}
		grads := map[DType][]float64{}
		for _, dt := range []DType{Float32, Float64} {
			p, err := Compile(NewParams(dt, 3), fn, true)
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Run(); err != nil {
				t.Fatal(err)
			}
			g, err := p.Gradients()
			if err != nil {
				t.Fatal(err)
			}
			losses[dt], grads[dt] = p.Loss(), g["l"]
		}
		if e := graphtest.RelDiff([]float64{losses[Float32]}, []float64{losses[Float64]}); e > 1e-6 {
			t.Errorf("V=%d: loss %v (float32) vs %v, rel diff %g", v, losses[Float32], losses[Float64], e)
		}
		if e := graphtest.RelDiff(grads[Float32], grads[Float64]); e > 1e-5 {
			t.Errorf("V=%d: gradient rel diff %g", v, e)
		}
	}
}

// TestCrossEntropyNaNPropagates: a NaN logit anywhere in a row makes the
// loss and the row's gradient NaN in float32 too, so the trainer's
// divergence check sees it (vector min and max drop NaN unless told).
func TestCrossEntropyNaNPropagates(t *testing.T) {
	t.Parallel()
	for _, at := range []int{0, 9, 16, 20} { // in a full vector, in the tail
		logits := make([]float64, 21)
		logits[at] = math.NaN()
		p, err := Compile(NewParams(Float32, 1), func(b *Builder) error {
			l := b.Param("l", []int{1, 21}, func(*rand.Rand, []int) []float64 { return logits })
			b.SetLoss(Mean(SoftmaxCrossEntropy(l, b.IndexConstant("y", []int{1}, []int{(at + 3) % 21}), 0)))
			return nil
		}, true)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Run(); err != nil {
			t.Fatal(err)
		}
		g, _ := p.Gradients()
		if !math.IsNaN(p.Loss()) || !math.IsNaN(g["l"][(at+5)%21]) {
			t.Errorf("NaN at %d: loss %v, gradient %v", at, p.Loss(), g["l"])
		}
	}
}
