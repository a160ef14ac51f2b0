package losses

import (
	"fmt"
	"math"
	"testing"

	"github.com/probformer/probformer/graph"
)

// ceLogits are [2, 3, 4] logits for ceTargets [2, 3].
var (
	ceLogits = []float64{
		0.5, -1.25, 2, 0.75,
		3, 0, -2, 1.5,
		-0.5, -0.5, 0.25, 4,
		1, 2, 3, 4,
		-3, 2.5, 0, 0.125,
		10, -10, 5, 0,
	}
	ceTargets = []int{2, 0, 3, 3, 1, 0}
	cePad     = []float64{1, 1, 0, 1, 1, 0}
)

// crossEntropyGraph evaluates TokenCrossEntropy in a graph of dtype dt,
// feeding the targets twice and running twice, to catch state carried
// between runs.
func crossEntropyGraph(dt graph.DType, shape []int, logits []float64, targets []int, mask []float64, eps float64) (float64, error) {
	prog, err := graph.Compile(graph.NewParams(dt, 1), func(b *graph.Builder) error {
		var m *graph.Node
		if mask != nil {
			m = b.Constant("mask", shape[:2], mask)
		}
		l, err := TokenCrossEntropy(b, "ce", b.Constant("logits", shape, logits), b.IndexInput("y", shape[:2]...), m, eps)
		if err != nil {
			return err
		}
		b.Output("loss", l)
		return nil
	}, false)
	if err != nil {
		return 0, err
	}
	var loss []float64
	for range 2 {
		if err := prog.FeedIndices("y", targets); err != nil {
			return 0, err
		}
		if err := prog.Run(); err != nil {
			return 0, err
		}
		l, _, _ := prog.Output("loss")
		if loss != nil && l[0] != loss[0] {
			return 0, fmt.Errorf("second run gives %v, first %v", l[0], loss[0])
		}
		loss = l
	}
	return loss[0], nil
}

func TestTokenCrossEntropyValues(t *testing.T) {
	// Reference values from 40-digit decimal arithmetic.
	cases := []struct {
		name    string
		shape   []int
		logits  []float64
		targets []int
		mask    []float64
		eps     float64
		want    float64
	}{
		{"nll", []int{2, 3, 4}, ceLogits, ceTargets, nil, 0, 0.223385689026744651},
		{"nll-all-ones-mask", []int{2, 3, 4}, ceLogits, ceTargets, []float64{1, 1, 1, 1, 1, 1}, 0, 0.223385689026744651},
		{"nll-padded", []int{2, 3, 4}, ceLogits, ceTargets, cePad, 0, 0.322208248621501887},
		{"smoothed-0.1", []int{2, 3, 4}, ceLogits, ceTargets, nil, 0.1, 0.555156522360077985},
		{"smoothed-0.1-padded", []int{2, 3, 4}, ceLogits, ceTargets, cePad, 0.1, 0.521426998621501887},
		{"smoothed-0.3-padded", []int{2, 3, 4}, ceLogits, ceTargets, cePad, 0.3, 0.919864498621501887},
		// exp(800) overflows: only a max-subtracted log-softmax gets these.
		{"large-logits", []int{1, 2, 4}, []float64{800, 0, -800, 5, 1, 2, 3, 800}, []int{3, 3}, nil, 0, 397.5},
		{"large-logits-smoothed", []int{1, 2, 4}, []float64{800, 0, -800, 5, 1, 2, 3, 800}, []int{3, 3}, nil, 0.1, 427.6125},
	}
	for _, c := range cases {
		got, err := TokenCrossEntropyValue(c.logits, c.targets, c.mask, c.shape[2], c.eps)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(got-c.want) > 1e-15*math.Max(1, c.want) {
			t.Errorf("%s: value %.17g, want %.17g", c.name, got, c.want)
		}
		for _, dt := range []graph.DType{graph.Float64, graph.Float32} {
			got, err := crossEntropyGraph(dt, c.shape, c.logits, c.targets, c.mask, c.eps)
			if err != nil {
				t.Fatalf("%s %v: %v", c.name, dt, err)
			}
			tol := 1e-14 * math.Max(1, c.want)
			if dt == graph.Float32 {
				tol = 1e-6 * math.Max(1, c.want)
			}
			if math.Abs(got-c.want) > tol {
				t.Errorf("%s %v graph: %.17g, want %.17g", c.name, dt, got, c.want)
			}
		}
	}
}

func TestTokenCrossEntropyGradients(t *testing.T) {
	for i, eps := range []float64{0, 0.1} {
		for j, mask := range [][]float64{nil, cePad} {
			_, err := graph.CheckGradients(graph.NewParams(graph.Float64, uint64(2*i+j+1)), func(b *graph.Builder) *graph.Node {
				logits := b.Param("logits", []int{2, 3, 4}, graph.Normal(2))
				var m *graph.Node
				if mask != nil {
					m = b.Constant("mask", []int{2, 3}, mask)
				}
				// Repeated targets in a row of the batch: the gathered
				// log-probabilities must not mix.
				l, err := TokenCrossEntropy(b, "ce", logits, b.IndexConstant("y", []int{2, 3}, []int{1, 1, 3, 0, 0, 2}), m, eps)
				if err != nil {
					t.Fatal(err)
				}
				return l
			}, graph.GradCheckOptions{Seed: uint64(i)})
			if err != nil {
				t.Errorf("ε = %g, mask %v: %v", eps, mask, err)
			}
		}
	}
}

// TestTokenCrossEntropyGradientValue checks the gradient of the smoothed
// loss against its closed form ∂L/∂z_btv = m_bt (p_btv − q_btv) / Σ m with
// q = (1 − ε)·onehot(y) + ε/V.
func TestTokenCrossEntropyGradientValue(t *testing.T) {
	const eps, v = 0.2, 4
	ps := graph.NewParams(graph.Float64, 1)
	prog, err := graph.Compile(ps, func(b *graph.Builder) error {
		logits := b.Param("logits", []int{2, 3, v}, graph.Zeros)
		l, err := TokenCrossEntropy(b, "ce", logits, b.IndexConstant("y", []int{2, 3}, ceTargets), b.Constant("mask", []int{2, 3}, cePad), eps)
		if err != nil {
			return err
		}
		b.SetLoss(l)
		return nil
	}, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := ps.Lookup("logits").SetValues(ceLogits); err != nil {
		t.Fatal(err)
	}
	if err := prog.Run(); err != nil {
		t.Fatal(err)
	}
	grads, err := prog.Gradients()
	if err != nil {
		t.Fatal(err)
	}
	g := grads["logits"]
	for r, y := range ceTargets {
		row := ceLogits[r*v : (r+1)*v]
		var z float64
		for _, x := range row {
			z += math.Exp(x)
		}
		for c := range v {
			q := eps / v
			if c == y {
				q += 1 - eps
			}
			want := cePad[r] * (math.Exp(row[c])/z - q) / 4
			if math.Abs(g[r*v+c]-want) > 1e-15 {
				t.Errorf("∂L/∂z[%d,%d] = %v, want %v", r, c, g[r*v+c], want)
			}
		}
	}
}

func TestTokenCrossEntropyErrors(t *testing.T) {
	if _, err := TokenCrossEntropyValue(ceLogits, ceTargets, []float64{0, 0, 0, 0, 0, 0}, 4, 0); err == nil {
		t.Error("fully masked batch accepted")
	}
	if _, err := TokenCrossEntropyValue(ceLogits, []int{2, 0, 4, 3, 1, 0}, nil, 4, 0); err == nil {
		t.Error("target id 4 of 4 classes accepted")
	}
	if _, err := TokenCrossEntropyValue(ceLogits, ceTargets, nil, 4, 1); err == nil {
		t.Error("label smoothing 1 accepted")
	}
	if _, err := crossEntropyGraph(graph.Float64, []int{2, 3, 4}, ceLogits, []int{2, 0, 4, 3, 1, 0}, nil, 0); err == nil {
		t.Error("graph: target id 4 of 4 classes accepted")
	}
	if _, err := crossEntropyGraph(graph.Float64, []int{2, 3, 4}, ceLogits, []int{2, 0, 3, -1, 1, 0}, cePad, 0); err == nil {
		t.Error("graph: target id −1 accepted")
	}
	for _, bad := range []struct {
		name  string
		shape []int
		eps   float64
	}{{"targets of another shape", []int{3, 2}, 0}, {"smoothing < 0", []int{2, 3}, -0.1}} {
		_, err := graph.Compile(graph.NewParams(graph.Float64, 1), func(b *graph.Builder) error {
			_, err := TokenCrossEntropy(b, "ce", b.Constant("logits", []int{2, 3, 4}, ceLogits),
				b.IndexInput("y", bad.shape...), nil, bad.eps)
			return err
		}, false)
		if err == nil {
			t.Errorf("%s accepted", bad.name)
		}
	}
}
