package graph

import (
	"math/rand/v2"
	"slices"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
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

// TestKeptHeaders: an op's output header and an unpack's view are handed
// out again on the next run only while no reader has changed them; a
// reshape in place, a transpose, another backing or another shape gives
// a fresh header over the right values.
func TestKeptHeaders(t *testing.T) {
	t.Parallel()
	b := &outBuffer{}
	in := []*tensor.Dense{tensor.New(tensor.WithShape(2, 3), tensor.WithBacking(make([]float32, 6)))}
	h1 := b.take(tensor.Float32, tensor.Shape{2, 3}, in)
	if h2 := b.take(tensor.Float32, tensor.Shape{2, 3}, in); h2 != h1 {
		t.Fatal("an unchanged output header was not kept")
	}
	if err := h1.Reshape(3, 2); err != nil { // Gorgonia's Reshape.UnsafeDo does this
		t.Fatal(err)
	}
	h3 := b.take(tensor.Float32, tensor.Shape{2, 3}, in)
	if h3 == h1 || !slices.Equal([]int(h3.Shape()), []int{2, 3}) || !slices.Equal(h3.Strides(), []int{3, 1}) {
		t.Fatalf("after a reshape in place: header kept %v, shape %v strides %v", h3 == h1, h3.Shape(), h3.Strides())
	}
	h3.T() // a transpose backs up the access pattern
	if h4 := b.take(tensor.Float32, tensor.Shape{2, 3}, in); h4 == h3 || h4.IsMaterializable() {
		t.Fatal("a transposed header was handed out again")
	}
	if h5 := b.take(tensor.Float32, tensor.Shape{6}, in); !slices.Equal([]int(h5.Shape()), []int{6}) {
		t.Fatalf("shape %v for (6)", h5.Shape())
	}
	// (1, 6) is Eq to (6) for tensor.Shape, not for a kept header
	if h6 := b.take(tensor.Float32, tensor.Shape{1, 6}, in); !slices.Equal([]int(h6.Shape()), []int{1, 6}) {
		t.Fatalf("shape %v for (1, 6)", h6.Shape())
	}
	if h7 := b.take(tensor.Float64, tensor.Shape{1, 6}, in); h7.Dtype() != tensor.Float64 {
		t.Fatalf("dtype %v for Float64", h7.Dtype())
	}

	u := unpackKernel{offset: 2, shape: fix(tensor.Shape{2, 2})}
	vb := &outBuffer{}
	packed := func(vals ...float32) *tensor.Dense {
		return tensor.New(tensor.WithShape(len(vals)), tensor.WithBacking(vals))
	}
	p := packed(0, 1, 2, 3, 4, 5, 6)
	v1, err := viewDo(u, []G.Value{p}, vb)
	if err != nil {
		t.Fatal(err)
	}
	v2, _ := viewDo(u, []G.Value{p}, vb)
	if v2 != v1 {
		t.Fatal("an unchanged view header was not kept")
	}
	q := packed(10, 11, 12, 13, 14, 15, 16) // another backing
	v3, _ := viewDo(u, []G.Value{q}, vb)
	if v3 == v1 || !slices.Equal(floats[float32](v3.(*tensor.Dense)), []float32{12, 13, 14, 15}) {
		t.Fatalf("view of another backing: %v", v3)
	}
	if err := v3.(*tensor.Dense).Reshape(4); err != nil {
		t.Fatal(err)
	}
	v4, _ := viewDo(u, []G.Value{q}, vb)
	if v4 == v3 || !slices.Equal([]int(v4.Shape()), []int{2, 2}) {
		t.Fatalf("view after a reshape in place: shape %v", v4.Shape())
	}
	if _, err := viewDo(u, []G.Value{packed(1, 2, 3)}, vb); err == nil {
		t.Fatal("a range past the packed values gave no error")
	}
}
