package train

import (
	"math"
	"slices"
	"testing"

	"github.com/probformer/probformer/graph"
)

// TestWeightAverage follows the average by hand over three steps, for
// float32 and float64 parameters, and checks that swapping the average
// in and out restores the weights and that it survives encode/decode.
func TestWeightAverage(t *testing.T) {
	for _, dt := range []graph.DType{graph.Float32, graph.Float64} {
		params := graph.NewParams(dt, 1)
		if _, err := graph.Compile(params, func(b *graph.Builder) error {
			b.Output("w", b.Param("w", []int{2}, graph.Constant(1)))
			return nil
		}, false); err != nil {
			t.Fatal(err)
		}
		w := params.Lookup("w")
		a := NewWeightAverage(params, 0.5)
		want := []float64{1, 1}
		for step, v := range []float64{3, -1, 0.25} {
			if err := w.SetValues([]float64{v, 2 * v}); err != nil {
				t.Fatal(err)
			}
			a.Update(step + 1)
			d := math.Min(0.5, float64(2+step)/float64(11+step)) // d_t = min(decay, (1+t)/(10+t))
			want = []float64{d*want[0] + (1-d)*v, d*want[1] + (1-d)*2*v}
		}
		if math.Abs(a.avg[0][0]-want[0]) > 1e-15 || math.Abs(a.avg[0][1]-want[1]) > 1e-15 {
			t.Errorf("%v: average %v, want %v", dt, a.avg[0], want)
		}
		if err := a.SwapIn(); err != nil {
			t.Fatal(err)
		}
		if got := w.Values(); math.Abs(got[0]-want[0]) > 1e-7*math.Abs(want[0]) {
			t.Errorf("%v: swapped in %v, want %v", dt, got, want)
		}
		if err := a.SwapOut(); err != nil {
			t.Fatal(err)
		}
		if got := w.Values(); !slices.Equal(got, []float64{0.25, 0.5}) {
			t.Errorf("%v: swapped back %v, want the weights [0.25 0.5]", dt, got)
		}
		b := NewWeightAverage(params, 0.5)
		if err := b.Decode(a.Encode()); err != nil || !slices.Equal(b.avg[0], a.avg[0]) {
			t.Errorf("%v: decoded %v (%v), want %v", dt, b.avg[0], err, a.avg[0])
		}
		if err := b.Decode(a.Encode()[1:]); err == nil {
			t.Errorf("%v: a truncated average decoded", dt)
		}
	}
}
