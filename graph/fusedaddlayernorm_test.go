package graph

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"gorgonia.org/tensor"

	"github.com/probformer/probformer/graph/graphtest"
)

// addLNGraph is LayerNorm(x + f ⊙ D) over parameters x, f [rows, t, d]
// and γ, β, composed of Add, the dropout product and LayerNorm, or fused
// (AddLayerNorm's kernel); drop nil: no dropout. f is tanh of its
// parameter, so that its gradient passes through another op.
func addLNGraph(b *Builder, rows, t, d int, fused bool, drop []float64) *Node {
	x, f := b.Param("x", []int{rows, t, d}, Normal(1)), Tanh(b.Param("f", []int{rows, t, d}, Normal(1)))
	gamma, beta := b.Param("g", []int{d}, Normal(1)), b.Param("b", []int{d}, Normal(1))
	var mask *Node
	if drop != nil {
		mask = b.Constant("drop", []int{rows, t, d}, drop)
	}
	switch {
	case !fused && mask == nil:
		return LayerNorm(Add(x, f), gamma, beta, 1e-5)
	case !fused:
		return LayerNorm(Add(x, apply(mulKernel{constB: true}, f, mask)), gamma, beta, 1e-5)
	case mask == nil:
		return AddLayerNorm(x, f, gamma, beta, 1e-5)
	}
	return apply(newAddLayerNorm(1e-5, true), x, f, mask, gamma, beta)
}

// TestAddLayerNormIsAddThenLayerNorm: the fused residual and layer norm
// give Add then LayerNorm's output and gradients (x, f, γ, β), with and
// without a dropout mask on f, to 1e-12 in float64 and 1e-6 in float32,
// at widths the C layer norm takes (64) and does not (5).
func TestAddLayerNormIsAddThenLayerNorm(t *testing.T) {
	t.Parallel()
	for _, d := range []int{5, 64} {
		const rows, tt = 7, 9
		rng := rand.New(rand.NewPCG(uint64(d), 1))
		r := Normal(1)(rng, []int{rows * tt * d})
		drop := make([]float64, rows*tt*d)
		for i := range drop {
			if rng.Float64() > 0.25 {
				drop[i] = 1 / 0.75
			}
		}
		for _, dr := range [][]float64{nil, drop} {
			for _, dt := range []DType{Float64, Float32} {
				run := func(fused bool) graphtest.Result {
					p, err := Compile(NewParams(dt, 4), func(b *Builder) error {
						y := addLNGraph(b, rows, tt, d, fused, dr)
						b.Output("y", y)
						b.SetLoss(Sum(Mul(y, b.Constant("r", []int{rows, tt, d}, r))))
						return nil
					}, true)
					if err != nil {
						t.Fatal(err)
					}
					return graphtest.Run(t, p, "y")
				}
				tol := 1e-12
				if dt == Float32 {
					tol = 1e-6
				}
				graphtest.ExpectRunsClose(t, fmt.Sprintf("d=%d dropout=%v %v", d, dr != nil, dt), run(true), run(false), tol, nil)
			}
		}
	}
}

// TestAddLayerNormGradients: float64 finite differences, with and
// without dropout.
func TestAddLayerNormGradients(t *testing.T) {
	t.Parallel()
	drop := make([]float64, 2*3*4)
	for i := range drop {
		drop[i] = float64(i%3) * 0.75
	}
	for i, dr := range [][]float64{nil, drop} {
		fn := func(b *Builder) *Node { return addLNGraph(b, 2, 3, 4, true, dr) }
		if _, err := CheckGradients(NewParams(Float64, uint64(i+60)), fn, GradCheckOptions{Seed: uint64(i)}); err != nil {
			t.Fatalf("dropout=%v: %v", dr != nil, err)
		}
	}
}

// TestDropoutAddLayerNormMask: in a training graph the fused op declares
// a mask input of f's shape that DrawDropout fills, as Dropout does; in
// an evaluation graph it is AddLayerNorm.
func TestDropoutAddLayerNormMask(t *testing.T) {
	t.Parallel()
	for _, train := range []bool{true, false} {
		p, err := Compile(NewParams(Float32, 1), func(b *Builder) error {
			x, f := b.Input("x", 2, 3, 4), b.Input("f", 2, 3, 4)
			y := b.DropoutAddLayerNorm("res.drop", x, f, 0.5, b.Param("g", []int{4}, Ones), b.Param("b", []int{4}, Zeros), 1e-5)
			b.Output("y", y)
			b.SetLoss(Sum(y))
			return nil
		}, train)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Feed("res.drop", make([]float64, 24)); (err == nil) != train {
			t.Fatalf("train=%v: feeding the mask: %v", train, err)
		}
	}
}

// TestAddLayerNormOnePassIsTwo: the float32 residual and layer norm in
// one pass over the rows (fused32, layernorm.c's pf_add_layernorm_fwd)
// give the sum, the output and the saved row statistics of the sum then
// the layer norm (sumOf, layerNormKernel.do) bit for bit, split between
// the cores or not.
func TestAddLayerNormOnePassIsTwo(t *testing.T) {
	for _, rows := range []int{3, 1000} {
		const d = 64
		rng := rand.New(rand.NewPCG(uint64(rows), 5))
		vals := func(n int, s float64) []float32 {
			v := make([]float32, n)
			for i := range v {
				v[i] = float32(rng.NormFloat64() * s)
			}
			return v
		}
		in := []*tensor.Dense{
			tensor.New(tensor.WithShape(rows, d), tensor.WithBacking(vals(rows*d, 3))),
			tensor.New(tensor.WithShape(rows, d), tensor.WithBacking(vals(rows*d, 0.5))),
			tensor.New(tensor.WithShape(d), tensor.WithBacking(vals(d, 1))),
			tensor.New(tensor.WithShape(d), tensor.WithBacking(vals(d, 1))),
		}
		one, two := newAddLayerNorm(1e-5, false), newAddLayerNorm(1e-5, false)
		y1 := tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(rows, d))
		y2 := tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(rows, d))
		if !one.fused32(in, y1) {
			t.Skip("no C layer norm here")
		}
		s := two.sumOf(in)
		if err := two.ln.do([]*tensor.Dense{s, in[2], in[3]}, y2); err != nil {
			t.Fatal(err)
		}
		same := func(what string, a, b []float32) {
			for i := range a {
				if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
					t.Fatalf("rows %d: %s[%d] = %v, two passes give %v", rows, what, i, a[i], b[i])
				}
			}
		}
		same("sum", one.sum.s.([]float32), two.sum.s.([]float32))
		same("y", y1.Data().([]float32), y2.Data().([]float32))
		same("mean", one.ln.saved.mean32, two.ln.saved.mean32)
		same("rstd", one.ln.saved.rstd32, two.ln.saved.rstd32)
		if !one.sum.fresh || !one.ln.saved.fresh || !one.ln.saved.fast {
			t.Errorf("rows %d: saved sum or statistics not marked fresh", rows)
		}
	}
}
