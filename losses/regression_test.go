package losses

import (
	"math"
	"testing"

	"github.com/probformer/probformer/graph"
)

func TestRegressionValues(t *testing.T) {
	pred := []float64{1, 2, 3, 4, 10, 10}
	target := []float64{0, 0, 3, 1, 0, 0}
	mask := []float64{1, 1, 0}
	cases := []struct {
		kind string
		mask []float64
		want float64
	}{
		{MSE, mask, (1 + 4 + 0 + 9) / 4.0},
		{MAE, mask, (1 + 2 + 0 + 3) / 4.0},
		{Euclidean, mask, (math.Sqrt(5) + 3) / 2},
		{MSE, nil, (1 + 4 + 0 + 9 + 200) / 6.0},
	}
	for _, c := range cases {
		got, err := RegressionValue(c.kind, pred, target, c.mask, 2)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(got-c.want) > 1e-15 {
			t.Errorf("%s: %v, want %v", c.kind, got, c.want)
		}
		// The graph version agrees with the plain one.
		outs, err := graph.Evaluate(graph.NewParams(graph.Float64, 1), func(b *graph.Builder) error {
			var m *graph.Node
			if c.mask != nil {
				m = b.Constant("m", []int{3}, c.mask)
			}
			l, err := Regression(c.kind, b.Constant("p", []int{3, 2}, pred), b.Constant("y", []int{3, 2}, target), m)
			b.Output("l", l)
			return err
		}, "l")
		if err != nil {
			t.Fatal(err)
		}
		if g := outs[0]; math.Abs(g[0]-c.want) > 1e-12 { // euclidean adds 1e-12 under the root
			t.Errorf("%s graph: %v, want %v", c.kind, g[0], c.want)
		}
	}
	if _, err := RegressionValue("huber", pred, target, nil, 2); err == nil {
		t.Error("unknown loss accepted")
	}
	if _, err := RegressionValue(MSE, pred, target, []float64{0, 0, 0}, 2); err == nil {
		t.Error("fully masked batch accepted")
	}
}

func TestRegressionGradients(t *testing.T) {
	for i, kind := range []string{MSE, MAE, Euclidean} {
		_, err := graph.CheckGradients(graph.NewParams(graph.Float64, uint64(i+1)), func(b *graph.Builder) *graph.Node {
			p := b.Param("p", []int{2, 3, 2}, graph.Normal(1))
			y := b.Constant("y", []int{2, 3, 2}, []float64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11})
			l, err := Regression(kind, p, y, b.Constant("m", []int{2, 3}, []float64{1, 1, 0, 1, 0, 1}))
			if err != nil {
				t.Fatal(err)
			}
			return l
		}, graph.GradCheckOptions{})
		if err != nil {
			t.Errorf("%s: %v", kind, err)
		}
	}
}
