package graph

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkEMAttention times one forward and backward pass of an EM
// attention op in float32 the size of a Set Transformer block's: B = 64,
// H = 4, N = 32 query units, M = 16 memory units, d = dv = 16, two key
// iterations with α and one value iteration. "go" runs the Go path that
// em.c replaces.
func BenchmarkEMAttention(b *testing.B) {
	const batch, heads, n, m, d = 64, 4, 32, 16, 16
	spec := EMSpec{KeyIters: 2, ValueIters: 1, AdaptAlpha: true, Heads: heads}
	for _, path := range []struct {
		name string
		c    bool
	}{{"c", true}, {"go", false}} {
		b.Run(path.name, func(b *testing.B) {
			defer func(u bool) { emUseC = u }(emUseC)
			emUseC = path.c
			rng := rand.New(rand.NewPCG(1, 2))
			prog, err := Compile(NewParams(Float32, 1), func(bd *Builder) error {
				hp := func(name string, c float64) *Node { return bd.Param(name, []int{heads}, Constant(c)) }
				res := EMAttention(spec, EMInputs{
					Q:      bd.Param("q", []int{batch, n, heads * d}, Normal(0.5)),
					K:      bd.Param("k", []int{batch, m, heads * d}, Normal(0.5)),
					V:      bd.Param("v", []int{batch, m, heads * d}, Normal(0.5)),
					Alpha0: hp("alpha0", 1), Beta0: hp("beta0", 1), ThetaXi: hp("theta_xi", 1),
					AAlphaExtra: hp("a_alpha", 1), BAlpha: hp("b_alpha", 1),
				}, EMReadout)
				coef := make([]float64, batch*n*heads*d)
				for i := range coef {
					coef[i] = rng.NormFloat64()
				}
				bd.SetLoss(Sum(Mul(res.Readout, bd.Constant("coef", Shape(res.Readout), coef))))
				return nil
			}, true)
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for range b.N {
				if err := prog.Run(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
