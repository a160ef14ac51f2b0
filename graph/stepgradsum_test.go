package graph

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// TestGradSumIsGorgonias: where a node feeds several ops (the input of
// two linears and a residual, three gradients summed), the program
// builds its own sums (no Gorgonia Add of tensors is left in the graph
// it runs)
// and gives the loss and every gradient of the program built with
// Gorgonia's sums bit for bit, in both dtypes, and on sizes below and
// above the point where the sums are split between the cores.
func TestGradSumIsGorgonias(t *testing.T) {
	for _, dt := range []DType{Float32, Float64} {
		for _, rows := range []int{6, 700} {
			const d = 64
			fn := func(b *Builder) error {
				x := b.Input("x", rows, d)
				h := Linear(x, b.Param("a.w", []int{d, d}, Glorot), b.Param("a.b", []int{d}, Normal(0.1)))
				u := LinearReLU(h, b.Param("u.w", []int{d, d}, Glorot), b.Param("u.b", []int{d}, Normal(0.1)))
				v := Linear(h, b.Param("v.w", []int{d, d}, Glorot), nil)
				y := Add(Add(u, v), h)
				b.SetLoss(Mean(Square(y)))
				return nil
			}
			x := make([]float64, rows*d)
			rng := rand.New(rand.NewPCG(uint64(rows), 7))
			for i := range x {
				x[i] = rng.NormFloat64()
			}
			wantLoss, want, gAdds := runGradSums(t, dt, fn, x, true)
			loss, got, adds := runGradSums(t, dt, fn, x, false)
			if gAdds == 0 {
				t.Fatalf("%v rows %d: the graph has no gradient sums to replace", dt, rows)
			}
			if adds != 0 {
				t.Errorf("%v rows %d: %d of Gorgonia's sums left in the graph", dt, rows, adds)
			}
			if math.Float64bits(loss) != math.Float64bits(wantLoss) {
				t.Errorf("%v rows %d: loss %v, want %v", dt, rows, loss, wantLoss)
			}
			expectSameGradients(t, fmt.Sprintf("%v rows %d", dt, rows), got, want)
		}
	}
}

// TestGradSumKernel: the kernel adds element by element, on both cores
// when large, as the Go loop does.
func TestGradSumKernel(t *testing.T) {
	for _, n := range []int{1, 13, 70001} {
		a, b := make([]float32, n), make([]float32, n)
		for i := range a {
			a[i], b[i] = float32(i)*0.37-5, float32(n-i)*1.3e-3
		}
		out := tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(n))
		in := []*tensor.Dense{tensor.New(tensor.WithShape(n), tensor.WithBacking(a)), tensor.New(tensor.WithShape(n), tensor.WithBacking(b))}
		if err := (gradSumKernel{}).do(in, out); err != nil {
			t.Fatal(err)
		}
		for i, v := range out.Data().([]float32) {
			if v != a[i]+b[i] {
				t.Fatalf("n %d: [%d] = %v, want %v", n, i, v, a[i]+b[i])
			}
		}
	}
}

// TestGradSumKeepsPassedThroughGradient: Gorgonia's Add passes its
// gradient through unchanged, so one of Gorgonia's sums can be both a
// custom op's incoming gradient (which ownSum replaces) and a parameter's
// gradient (p below). The program must still compute it: the gradients
// equal those of the program built with Gorgonia's sums, bit for bit,
// where the replaced sum was left out of the program and p's gradient
// was never computed (a nil dereference in Gradients).
func TestGradSumKeepsPassedThroughGradient(t *testing.T) {
	const rows, d = 6, 16
	fn := func(b *Builder) error {
		x := b.Input("x", rows, d)
		h := Linear(x, b.Param("w", []int{d, d}, Glorot), nil)
		p := b.Param("p", []int{rows, d}, Normal(0.1))
		y := must(G.Add(h, p)) // Gorgonia's own Add, not the fused one
		b.SetLoss(Add(Mean(Square(y)), Mean(Tanh(y))))
		return nil
	}
	x := make([]float64, rows*d)
	for i := range x {
		x[i] = math.Sin(float64(i))
	}
	_, want, _ := runGradSums(t, Float32, fn, x, true)
	_, got, _ := runGradSums(t, Float32, fn, x, false)
	expectSameGradients(t, "Gorgonia's Add read by two ops", got, want)
}

// runGradSums compiles fn as a training program with Gorgonia's gradient
// sums or with the program's own, runs it on x, and returns the loss,
// every gradient, and how many of Gorgonia's tensor sums the program runs.
func runGradSums(t *testing.T, dt DType, fn BuildFunc, x []float64, gorgonia bool) (float64, map[string][]float64, int) {
	t.Helper()
	gorgoniaGradSums = gorgonia
	defer func() { gorgoniaGradSums = false }()
	p, err := Compile(NewParams(dt, 3), fn, true)
	if err != nil {
		t.Fatal(err)
	}
	adds := 0
	for _, n := range p.runs.AllNodes() {
		if n.Op() != nil && n.Op().String() == "+ false" && len(n.Shape()) > 0 {
			adds++
		}
	}
	if err := p.Feed("x", x); err != nil {
		t.Fatal(err)
	}
	if err := p.Run(); err != nil {
		t.Fatal(err)
	}
	g, err := p.Gradients()
	if err != nil {
		t.Fatalf("Gorgonia's sums %v: %v", gorgonia, err)
	}
	return p.Loss(), g, adds
}

// expectSameGradients fails unless got has want's gradients bit for bit.
func expectSameGradients(t *testing.T, label string, got, want map[string][]float64) {
	t.Helper()
	for name, w := range want {
		if len(got[name]) != len(w) {
			t.Fatalf("%s: gradient of %s: %d values, want %d", label, name, len(got[name]), len(w))
		}
		for i := range w {
			if math.Float64bits(got[name][i]) != math.Float64bits(w[i]) {
				t.Fatalf("%s: gradient of %s[%d] = %v, want %v", label, name, i, got[name][i], w[i])
			}
		}
	}
}

// TestLayerNormTakesGradSum: where a layer norm's output feeds two ops (a
// MAB's h: the feed-forward layer and the residual of the add-layernorm
// after it), the norms' backward takes the two gradients and adds them
// as it reads them; where it feeds three, the first two gradients' sum
// and the third. The program runs no other grad-sum, and gives the
// loss and every gradient of the program built with Gorgonia's sums bit
// for bit, in both dtypes, below and above the size where the backward
// is split between the cores.
func TestLayerNormTakesGradSum(t *testing.T) {
	for _, dt := range []DType{Float32, Float64} {
		for _, rows := range []int{6, 700} {
			const d = 64
			fn := func(b *Builder) error {
				x := b.Input("x", rows, d)
				norm := func(name string) (*Node, *Node) {
					return b.Param(name+".g", []int{d}, Normal(0.5)), b.Param(name+".b", []int{d}, Normal(0.1))
				}
				g0, b0 := norm("ln0")
				h := LayerNorm(Linear(x, b.Param("a.w", []int{d, d}, Glorot), nil), g0, b0, 1e-5)
				g1, b1 := norm("ln1")
				z := AddLayerNorm(h, LinearReLU(h, b.Param("u.w", []int{d, d}, Glorot), b.Param("u.b", []int{d}, Normal(0.1))), g1, b1, 1e-5)
				g2, b2 := norm("ln2")
				y := AddLayerNorm(z, Linear(z, b.Param("v.w", []int{d, d}, Glorot), nil), g2, b2, 1e-5)
				// y feeds three ops: its gradient is a chain of two sums,
				// of which the norm takes the first sum and the third
				g3, b3 := norm("ln3")
				f := Add(LinearReLU(y, b.Param("r.w", []int{d, d}, Glorot), nil), Linear(y, b.Param("s.w", []int{d, d}, Glorot), nil))
				b.SetLoss(Mean(Square(AddLayerNorm(y, f, g3, b3, 1e-5))))
				return nil
			}
			x := make([]float64, rows*d)
			rng := rand.New(rand.NewPCG(uint64(rows), 9))
			for i := range x {
				x[i] = rng.NormFloat64()
			}
			wantLoss, want, _ := runGradSums(t, dt, fn, x, true)
			loss, got, _ := runGradSums(t, dt, fn, x, false)
			if math.Float64bits(loss) != math.Float64bits(wantLoss) {
				t.Errorf("%v rows %d: loss %v, want %v", dt, rows, loss, wantLoss)
			}
			expectSameGradients(t, fmt.Sprintf("%v rows %d", dt, rows), got, want)

			p, err := Compile(NewParams(dt, 3), fn, true)
			if err != nil {
				t.Fatal(err)
			}
			names := map[string]int{}
			for _, n := range p.runs.AllNodes() {
				if n.Op() != nil {
					names[n.Op().String()]++
				}
			}
			if names["grad-sum"] != 1 || names["grad-layernorm(1e-05)+sum"] != 1 ||
				names["grad-add-layernorm(1e-05,dropout=false)+sum"] != 2 {
				t.Errorf("%v rows %d: %d grad-sums left, %d layer norm and %d add-layernorm backwards taking two gradients, want 1 (the chain's first), 1, 2",
					dt, rows, names["grad-sum"], names["grad-layernorm(1e-05)+sum"], names["grad-add-layernorm(1e-05,dropout=false)+sum"])
			}
		}
	}
}
