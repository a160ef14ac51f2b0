package graph

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/probformer/probformer/graph/graphtest"
)

// TestEMAttentionEmptyMemory: an example whose memory units are all
// padded reads out 0 and leaves every gradient finite, in both dtypes
// (its NaN weights once spread through the per-head sums to the whole
// batch); the other example is unaffected.
func TestEMAttentionEmptyMemory(t *testing.T) {
	t.Parallel()
	const batch, heads, n, m, d = 2, 2, 3, 4, 4
	for _, dt := range []DType{Float32, Float64} {
		ps := NewParams(dt, 1)
		prog, err := Compile(ps, func(b *Builder) error {
			hp := func(name string) *Node { return b.Param(name, []int{heads}, Constant(0.5)) }
			mask := []float64{1, 1, 0, 1, 0, 0, 0, 0} // example 1 has no real memory unit
			res := EMAttention(EMSpec{KeyIters: 2, ValueIters: 1, AdaptAlpha: true, Heads: heads}, EMInputs{
				Q:       b.Param("q", []int{batch, n, heads * d}, Normal(1)),
				K:       b.Param("k", []int{batch, m, heads * d}, Normal(1)),
				V:       b.Param("v", []int{batch, m, heads * d}, Normal(1)),
				KeyMask: b.Constant("key_mask", []int{batch, m}, mask),
				Alpha0:  hp("alpha0"), Beta0: hp("beta0"), ThetaXi: hp("theta_xi"), AAlphaExtra: hp("a_alpha"), BAlpha: hp("b_alpha"),
			}, EMReadout)
			b.Output("readout", res.Readout)
			b.SetLoss(Sum(Square(res.Readout)))
			return nil
		}, true)
		if err != nil {
			t.Fatal(err)
		}
		if err := prog.Run(); err != nil {
			t.Fatal(err)
		}
		out, _, err := prog.Output("readout")
		if err != nil {
			t.Fatal(err)
		}
		half := len(out) / 2
		for i, x := range out {
			if (i >= half && x != 0) || math.IsNaN(x) {
				t.Fatalf("%v: readout[%d] = %v; want 0 for the example without memory, finite elsewhere", dt, i, x)
			}
		}
		grads, err := prog.Gradients()
		if err != nil {
			t.Fatal(err)
		}
		for name, g := range grads {
			for i, x := range g {
				if math.IsNaN(x) || math.IsInf(x, 0) {
					t.Fatalf("%v: gradient %s[%d] = %v", dt, name, i, x)
				}
			}
		}
	}
}

// TestEMPackedResidualIsAdd: the EM op reading keys and values in place
// from one packed kv [B, M, 2·H·d] with the residual connection inside
// (EMSpec.PackedKV, EMSpec.Residual; the EM model's MAB) gives
// Add(q, readout) of the plain op on kv's two halves, its readout and
// every gradient bit for bit, in float64 and float32, with key and query
// masks, an example without memory, and key, value and propagation-free
// iteration counts; and the packed op alone (no residual) the plain op's.
// The op with the residual inside on kv's two halves (not packed) gives
// the same too. With the residual inside, float32 problems run as one
// pool.c job a pass (kernels.EMPass32), the others a Go job a pass: so
// the two paths give the same bits.
func TestEMPackedResidualIsAdd(t *testing.T) {
	t.Parallel()
	const batch, n, m = 3, 5, 6
	specs := []EMSpec{
		{KeyIters: 1, Heads: 4},
		{KeyIters: 2, ValueIters: 1, AdaptAlpha: true, Heads: 2},
		{ValueIters: 2, Heads: 1},
	}
	for si, spec := range specs {
		for _, d := range []int{8, 3} {
			for _, masked := range []bool{false, true} {
				for _, residual := range []bool{true, false} {
					for _, dt := range []DType{Float64, Float32} {
						run := func(packed, inside bool) graphtest.Result {
							p, err := Compile(NewParams(dt, 7), func(b *Builder) error {
								dim := spec.Heads * d
								// a value of its own for each head
								hp := func(name string) *Node {
									return b.Param(name, []int{spec.Heads}, func(_ *rand.Rand, s []int) []float64 {
										v := make([]float64, s[0])
										for h := range v {
											v[h] = 0.5 + 0.125*float64(h)
										}
										return v
									})
								}
								q := b.Param("q", []int{batch, n, dim}, Normal(1))
								kv := b.Param("kv", []int{batch, m, 2 * dim}, Normal(1))
								in := EMInputs{Alpha0: hp("alpha0"), Beta0: hp("beta0")}
								if spec.KeyIters > 0 {
									in.ThetaXi = hp("theta_xi")
								}
								if spec.AdaptAlpha {
									in.AAlphaExtra, in.BAlpha = hp("a_alpha"), hp("b_alpha")
								}
								if masked {
									// example 2 has no real memory unit
									in.KeyMask = b.Constant("key_mask", []int{batch, m}, []float64{
										1, 1, 0, 1, 1, 0, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0})
									in.QueryMask = b.Constant("query_mask", []int{batch, n}, []float64{
										1, 1, 1, 0, 0, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1})
								}
								s := spec
								var out *Node
								if packed {
									s.PackedKV, s.Residual = true, residual
									in.Q, in.K = q, kv
									out = EMAttention(s, in, EMReadout).Readout
								} else {
									in.Q, in.K, in.V = q, SliceAxis(kv, 2, 0, dim), SliceAxis(kv, 2, dim, 2*dim)
									s.Residual = residual && inside
									out = EMAttention(s, in, EMReadout).Readout
									if residual && !inside {
										out = Add(q, out)
									}
								}
								b.Output("out", out)
								r := make([]float64, batch*n*dim)
								for i := range r {
									r[i] = math.Sin(float64(3*i + 1))
								}
								b.SetLoss(Sum(Mul(out, b.Constant("r", []int{batch, n, dim}, r))))
								return nil
							}, true)
							if err != nil {
								t.Fatal(err)
							}
							return graphtest.Run(t, p, "out")
						}
						what := fmt.Sprintf("spec %d d %d masked %v residual %v %v", si, d, masked, residual, dt)
						plain := run(false, false)
						graphtest.ExpectRunsClose(t, what, run(true, false), plain, 0, nil)
						if residual {
							graphtest.ExpectRunsClose(t, what+" (residual inside, kv split)", run(false, true), plain, 0, nil)
						}
					}
				}
			}
		}
	}
}

// TestEMHyperShiftIsSoftplusShift: the EM op given raw hyperparameters
// and their shifts (EMInputs.HyperShift) gives what SoftplusShift of
// each raw parameter into the op gives, its readout and every gradient
// (the raw parameters' included) bit for bit, in float64 and float32,
// with all nine hyperparameters in use (key and value iterations, α, β
// and π adapted, propagation from annotated units) and raw values on
// both sides of the softplus's and the sigmoid's cut-offs.
func TestEMHyperShiftIsSoftplusShift(t *testing.T) {
	t.Parallel()
	const batch, heads, n, m, d = 2, 2, 4, 5, 3
	spec := EMSpec{KeyIters: 1, PropagateIters: 2, ValueIters: 1, AdaptAlpha: true, AdaptBeta: true, AdaptPi: true,
		Heads: heads}
	shifts := [9]float64{1e-8, 1e-8, 1e-4, 1e-4, 1e-4, 1e-4, 0.25, 1e-4, 1e-4}
	raws := [9][heads]float64{{0.3, -1.2}, {-2, 0.7}, {2.3, 15.5}, {-120, 0.4}, {1.1, 17}, {-95, 0.9},
		{0.2, -0.6}, {3, -104}, {0.5, 14.2}}
	for _, dt := range []DType{Float64, Float32} {
		run := func(fused bool) graphtest.Result {
			p, err := Compile(NewParams(dt, 3), func(b *Builder) error {
				var hp [9]*Node
				for i := range hp {
					init := raws[i]
					hp[i] = b.Param(fmt.Sprintf("h%d", i), []int{heads}, func(*rand.Rand, []int) []float64 { return init[:] })
					if !fused {
						hp[i] = SoftplusShift(hp[i], shifts[i])
					}
				}
				q := b.Param("q", []int{batch, n, heads * d}, Normal(1))
				k := b.Param("k", []int{batch, m, heads * d}, Normal(1))
				v := b.Param("v", []int{batch, m, heads * d}, Normal(1))
				vals := b.Param("vals", []int{batch, n, heads * d}, Normal(1))
				in := EMInputs{Q: q, K: k, V: v, Values: vals,
					Annotated: b.Constant("annotated", []int{batch, n}, []float64{1, 0, 1, 0, 0, 1, 1, 0}),
					Alpha0:    hp[0], Beta0: hp[1], ThetaXi: hp[2], AAlphaExtra: hp[3], BAlpha: hp[4],
					ThetaMu: hp[5], ABetaExtra: hp[6], BBeta: hp[7], PiExtra: hp[8]}
				if fused {
					in.HyperShift = &shifts
				}
				out := EMAttention(spec, in, EMReadout).Readout
				b.Output("out", out)
				r := make([]float64, batch*n*heads*d)
				for i := range r {
					r[i] = math.Sin(float64(5*i + 2))
				}
				b.SetLoss(Sum(Mul(out, b.Constant("r", []int{batch, n, heads * d}, r))))
				return nil
			}, true)
			if err != nil {
				t.Fatal(err)
			}
			return graphtest.Run(t, p, "out")
		}
		fused, composed := run(true), run(false)
		graphtest.ExpectRunsClose(t, fmt.Sprint(dt), fused, composed, 0, nil)
		if len(fused.Grads) != 9+4 {
			t.Fatalf("%v: %d gradients, want the 9 raw hyperparameters' and q, k, v, vals'", dt, len(fused.Grads))
		}
	}
}
