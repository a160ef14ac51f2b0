package losses

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/probformer/probformer/graph"
)

// projectedLoss compiles the loss of hidden states [B, T, d] (parameter
// "h") under the output layer "out.w" [d, V], "out.b" [V] on ps: fused
// with ProjectedTokenCrossEntropy, or as Linear + TokenCrossEntropy. The
// targets are the index input "y", the mask (if masked) the input "mask".
func projectedLoss(ps *graph.Params, b, t, d, v int, masked, fused bool, eps float64) (*graph.Program, error) {
	return graph.Compile(ps, func(bl *graph.Builder) error {
		h := bl.Param("h", []int{b, t, d}, graph.Normal(1))
		w := bl.Param("out.w", []int{d, v}, graph.Normal(0.5))
		bias := bl.Param("out.b", []int{v}, graph.Normal(0.5))
		y := bl.IndexInput("y", b, t)
		var m *graph.Node
		if masked {
			m = bl.Input("mask", b, t)
		}
		var l *graph.Node
		var err error
		if fused {
			l, err = ProjectedTokenCrossEntropy(bl, h, w, bias, y, m, eps)
		} else {
			l, err = TokenCrossEntropy(bl, "ce", graph.Linear(h, w, bias), y, m, eps)
		}
		if err != nil {
			return err
		}
		bl.SetLoss(l)
		return nil
	}, false)
}

// runProjected feeds targets and mask (nil: none), runs p and returns its
// loss.
func runProjected(p *graph.Program, targets []int, mask []float64) (float64, error) {
	if err := p.FeedIndices("y", targets); err != nil {
		return 0, err
	}
	if mask != nil {
		if err := p.Feed("mask", mask); err != nil {
			return 0, err
		}
	}
	if err := p.Run(); err != nil {
		return 0, err
	}
	return p.Loss(), nil
}

// TestProjectedTokenCrossEntropyValue: the fused loss is the value of
// Linear + TokenCrossEntropy, to 1e-12 in float64 and to float32 rounding
// in float32, with and without padding and smoothing.
func TestProjectedTokenCrossEntropyValue(t *testing.T) {
	cases := []struct {
		name       string
		dt         graph.DType
		b, t, d, v int
		mask       []float64
		eps        float64
		tol        float64
	}{
		{"f64-nll-padded", graph.Float64, 2, 3, 4, 5, cePad, 0, 1e-12},
		{"f64-smoothed-padded", graph.Float64, 2, 3, 4, 5, cePad, 0.1, 1e-12},
		{"f64-smoothed-no-mask", graph.Float64, 2, 3, 4, 5, nil, 0.1, 1e-12},
		{"f64-wide", graph.Float64, 4, 11, 64, 300, projectedPadMask(4, 11, 7, 11, 2, 9), 0.1, 1e-12},
		{"f32-smoothed-padded", graph.Float32, 2, 3, 4, 5, cePad, 0.1, 1e-6},
		{"f32-eng-fra-vocab", graph.Float32, 4, 11, 64, 4459, projectedPadMask(4, 11, 7, 11, 2, 9), 0.1, 1e-6},
	}
	for _, c := range cases {
		ps := graph.NewParams(c.dt, 3)
		fused, err := projectedLoss(ps, c.b, c.t, c.d, c.v, c.mask != nil, true, c.eps)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		ref, err := projectedLoss(ps, c.b, c.t, c.d, c.v, c.mask != nil, false, c.eps)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		rng := rand.New(rand.NewPCG(uint64(c.v), 5))
		y := make([]int, c.b*c.t)
		for i := range y {
			y[i] = rng.IntN(c.v)
		}
		got, err := runProjected(fused, y, c.mask)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		want, err := runProjected(ref, y, c.mask)
		if err != nil {
			t.Fatalf("%s: reference: %v", c.name, err)
		}
		if math.Abs(got-want) > c.tol*math.Max(1, math.Abs(want)) {
			t.Errorf("%s: %.17g, Linear + TokenCrossEntropy %.17g", c.name, got, want)
		}
	}
}

// projectedPadMask is a [b, t] padding mask whose sentence i has lens[i mod
// len(lens)] real tokens.
func projectedPadMask(b, t int, lens ...int) []float64 {
	m := make([]float64, b*t)
	for i := range b {
		for j := range lens[i%len(lens)] {
			m[i*t+j] = 1
		}
	}
	return m
}

// TestProjectedTokenCrossEntropyPaddingTargets: the ids at padding
// positions may be anything in range without changing the loss.
func TestProjectedTokenCrossEntropyPaddingTargets(t *testing.T) {
	p, err := projectedLoss(graph.NewParams(graph.Float64, 1), 2, 3, 4, 5, true, true, 0.1)
	if err != nil {
		t.Fatal(err)
	}
	base, err := runProjected(p, ceTargets, cePad) // cePad drops rows 2 and 5
	if err != nil {
		t.Fatal(err)
	}
	for _, pad := range [][2]int{{0, 0}, {4, 4}, {1, 3}} {
		y := append([]int(nil), ceTargets...)
		y[2], y[5] = pad[0], pad[1]
		got, err := runProjected(p, y, cePad)
		if err != nil {
			t.Fatal(err)
		}
		if got != base {
			t.Errorf("padding targets %v: loss %v, want %v", pad, got, base)
		}
	}
}

// TestProjectedTokenCrossEntropyGradients checks the gradients of the
// padded loss with respect to the hidden states and the output layer by
// central differences.
func TestProjectedTokenCrossEntropyGradients(t *testing.T) {
	for _, eps := range []float64{0, 0.1} {
		_, err := graph.CheckGradients(graph.NewParams(graph.Float64, 4), func(b *graph.Builder) *graph.Node {
			h := b.Param("h", []int{2, 3, 4}, graph.Normal(1))
			w := b.Param("out.w", []int{4, 5}, graph.Normal(1))
			bias := b.Param("out.b", []int{5}, graph.Normal(1))
			l, err := ProjectedTokenCrossEntropy(b, h, w, bias, b.IndexConstant("y", []int{2, 3}, []int{1, 1, 3, 0, 0, 2}),
				b.Constant("mask", []int{2, 3}, cePad), eps)
			if err != nil {
				t.Fatal(err)
			}
			return l
		}, graph.GradCheckOptions{Seed: 2})
		if err != nil {
			t.Errorf("ε = %g: %v", eps, err)
		}
	}
}

// TestProjectedTokenCrossEntropyErrors: bad targets or an all-padding
// batch fail the run; bad shapes or smoothing fail the build with an
// error from the loss.
func TestProjectedTokenCrossEntropyErrors(t *testing.T) {
	p, err := projectedLoss(graph.NewParams(graph.Float64, 1), 2, 3, 4, 5, true, true, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := runProjected(p, []int{2, 0, 3, 5, 1, 0}, cePad); err == nil {
		t.Error("target id 5 of 5 classes at a real token accepted")
	}
	if _, err := runProjected(p, []int{2, 0, 3, -1, 1, 0}, cePad); err == nil {
		t.Error("target id −1 at a real token accepted")
	}
	if _, err := runProjected(p, ceTargets, make([]float64, 6)); err == nil {
		t.Error("batch with no real token accepted")
	}
	for _, bad := range []struct {
		name             string
		h, w, bias, y, m []int
		eps              float64
	}{
		{"hidden of rank 2", []int{6, 4}, []int{4, 5}, []int{5}, []int{2, 3}, []int{2, 3}, 0},
		{"targets of another shape", []int{2, 3, 4}, []int{4, 5}, []int{5}, []int{3, 2}, []int{2, 3}, 0},
		{"w rows ≠ d", []int{2, 3, 4}, []int{3, 5}, []int{5}, []int{2, 3}, []int{2, 3}, 0},
		{"w of rank 3", []int{2, 3, 4}, []int{4, 5, 1}, []int{5}, []int{2, 3}, []int{2, 3}, 0},
		{"bias ≠ V", []int{2, 3, 4}, []int{4, 5}, []int{6}, []int{2, 3}, []int{2, 3}, 0},
		{"mask of another shape", []int{2, 3, 4}, []int{4, 5}, []int{5}, []int{2, 3}, []int{6}, 0},
		{"smoothing < 0", []int{2, 3, 4}, []int{4, 5}, []int{5}, []int{2, 3}, []int{2, 3}, -0.1},
		{"smoothing 1", []int{2, 3, 4}, []int{4, 5}, []int{5}, []int{2, 3}, []int{2, 3}, 1},
	} {
		var lossErr error
		_, err := graph.Compile(graph.NewParams(graph.Float64, 1), func(b *graph.Builder) error {
			_, lossErr = ProjectedTokenCrossEntropy(b, b.Param("h", bad.h, graph.Normal(1)), b.Param("w", bad.w, graph.Normal(1)),
				b.Param("b", bad.bias, graph.Normal(1)), b.IndexInput("y", bad.y...), b.Input("mask", bad.m...), bad.eps)
			return lossErr
		}, false)
		if err == nil || lossErr == nil {
			t.Errorf("%s: accepted (compile error %v)", bad.name, err)
		}
	}
}
