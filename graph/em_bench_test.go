package graph

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkEMAttention times one forward and backward pass of an EM
// attention op in float32 the size of a Set Transformer block's: B = 64,
// H = 4, N = 32 query units, M = 16 memory units, d = dv = 16, with T_k
// key iterations (α adapted when "alpha") and T_v value iterations, next
// to the fused softmax attention op of the same size. The "go" rows run
// the Go path that em.c replaces.
func BenchmarkEMAttention(b *testing.B) {
	const batch, heads, n, m, d = 64, 4, 32, 16, 16
	k1 := EMSpec{KeyIters: 1, Heads: heads}
	k2 := EMSpec{KeyIters: 2, ValueIters: 1, AdaptAlpha: true, Heads: heads}
	for _, path := range []struct {
		name    string
		spec    EMSpec
		c       bool
		softmax bool
	}{{"softmax", k1, true, true}, {"em-k1-v0", k1, true, false}, {"em-k2-alpha-v1", k2, true, false}, {"em-k2-alpha-v1-go", k2, false, false}} {
		spec := path.spec
		b.Run(path.name, func(b *testing.B) {
			defer func(u bool) { emUseC = u }(emUseC)
			emUseC = path.c
			rng := rand.New(rand.NewPCG(1, 2))
			prog, err := Compile(NewParams(Float32, 1), func(bd *Builder) error {
				hp := func(name string, c float64, use bool) *Node {
					if !use {
						return nil
					}
					return bd.Param(name, []int{heads}, Constant(c))
				}
				q := bd.Param("q", []int{batch, n, heads * d}, Normal(0.5))
				k := bd.Param("k", []int{batch, m, heads * d}, Normal(0.5))
				v := bd.Param("v", []int{batch, m, heads * d}, Normal(0.5))
				var res EMResult
				if path.softmax {
					res.Readout = Attention(q, k, v, nil, heads, false)
				} else {
					res = EMAttention(spec, EMInputs{Q: q, K: k, V: v,
						Alpha0: hp("alpha0", 1, true), Beta0: hp("beta0", 1, true), ThetaXi: hp("theta_xi", 1, true),
						AAlphaExtra: hp("a_alpha", 1, spec.AdaptAlpha), BAlpha: hp("b_alpha", 1, spec.AdaptAlpha),
					}, EMReadout)
				}
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
