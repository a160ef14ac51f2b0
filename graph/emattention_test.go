package graph

import (
	"math"
	"testing"
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
