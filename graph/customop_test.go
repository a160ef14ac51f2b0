package graph

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestOutputBuffersReusedAcrossRuns: custom ops keep their output buffers
// from one run to the next, so a program that has already run on other
// inputs must give bit for bit what a fresh program gives: loss, outputs
// and every gradient, in both dtypes.
func TestOutputBuffersReusedAcrossRuns(t *testing.T) {
	t.Parallel()
	const batch, n, d, heads = 3, 5, 8, 2
	fn := func(b *Builder) error {
		x := b.Input("x", batch, n, d)
		mask := b.Input("mask", batch, n)
		h := Linear(x, b.Param("q.w", []int{d, d}, Glorot), b.Param("q.b", []int{d}, Normal(0.1)))
		a := Attention(h, h, h, mask, heads, false)
		a = Add(x, b.Dropout("drop", a, 0.2))
		a = LayerNorm(a, b.Param("ln.g", []int{d}, Ones), b.Param("ln.b", []int{d}, Zeros), 1e-5)
		f := Linear(ReLU(Linear(a, b.Param("f1.w", []int{d, 2 * d}, Glorot), nil)), b.Param("f2.w", []int{2 * d, d}, Glorot), nil)
		y := BroadcastAdd(Mul(f, a), b.Param("pe", []int{n, d}, Normal(0.1)), 0)
		b.Output("y", y)
		b.SetLoss(Mean(Square(y)))
		return nil
	}
	feed := func(p *Program, seed uint64) {
		rng := rand.New(rand.NewPCG(seed, 3))
		x := make([]float64, batch*n*d)
		for i := range x {
			x[i] = rng.NormFloat64()
		}
		m := make([]float64, batch*n)
		for i := range m {
			m[i] = float64(rng.IntN(4) % 3 % 2) // some padding
		}
		m[0] = 1
		if err := p.Feed("x", x); err != nil {
			t.Fatal(err)
		}
		if err := p.Feed("mask", m); err != nil {
			t.Fatal(err)
		}
		p.DrawDropout(rng)
	}
	for _, dt := range []DType{Float32, Float64} {
		ps := NewParams(dt, 5)
		run := func(p *Program, seed uint64) (float64, []float64, map[string][]float64) {
			feed(p, seed)
			if err := p.Run(); err != nil {
				t.Fatal(err)
			}
			y, _, _ := p.Output("y")
			g, err := p.Gradients()
			if err != nil {
				t.Fatal(err)
			}
			return p.Loss(), y, g
		}
		used, err := Compile(ps, fn, true)
		if err != nil {
			t.Fatal(err)
		}
		run(used, 1)
		run(used, 2)
		l1, y1, g1 := run(used, 3)
		fresh, err := Compile(ps, fn, true)
		if err != nil {
			t.Fatal(err)
		}
		l2, y2, g2 := run(fresh, 3)
		if l1 != l2 || !slices.Equal(y1, y2) {
			t.Fatalf("%v: third run gives loss %v, a fresh program %v", dt, l1, l2)
		}
		if len(g1) != 7 {
			t.Fatalf("%v: %d gradients, want 7", dt, len(g1))
		}
		for name, g := range g1 {
			if !slices.Equal(g, g2[name]) {
				t.Fatalf("%v: gradient of %s differs after earlier runs", dt, name)
			}
		}
	}
}
