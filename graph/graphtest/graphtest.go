// Package graphtest is the harness the fused-op tests share: run a
// compiled program once, keep copies of its outputs and gradients, and
// compare two such runs (or two slices) to a tolerance.
//
// It does not import graph, so that graph's own (internal) tests can use
// it: Program is the part of *graph.Program it reads.
package graphtest

import (
	"math"
	"slices"
	"testing"
)

// Program is what graphtest reads of a *graph.Program.
type Program interface {
	Run() error
	Output(name string) ([]float64, []int, error)
	Gradients() (map[string][]float64, error)
}

// Result is one run: outputs by name and, for a training program, the
// gradients by parameter name. Both are copies, so later runs of the
// program do not change them.
type Result struct {
	Out   map[string][]float64
	Grads map[string][]float64
}

// Run runs a training program once and returns copies of the named
// outputs (an output the program does not have is left out) and of every
// gradient. Any error fails the test.
func Run(t testing.TB, p Program, outputs ...string) Result {
	t.Helper()
	r := Forward(t, p, outputs...)
	var err error
	if r.Grads, err = p.Gradients(); err != nil {
		t.Fatal(err)
	}
	return r
}

// Forward is Run without the gradients, for evaluation programs.
func Forward(t testing.TB, p Program, outputs ...string) Result {
	t.Helper()
	if err := p.Run(); err != nil {
		t.Fatal(err)
	}
	r := Result{Out: map[string][]float64{}}
	for _, name := range outputs {
		if v, _, err := p.Output(name); err == nil && v != nil {
			r.Out[name] = slices.Clone(v)
		}
	}
	return r
}

// ExpectClose fails unless got and want have the same length and every
// |got[i] − want[i]| ≤ tol·max(1, max_j |want[j]|): a tolerance relative
// to the result's scale, absolute for results below 1.
func ExpectClose(t testing.TB, what string, got, want []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	scale := 1.0
	for _, x := range want {
		scale = math.Max(scale, math.Abs(x))
	}
	for i := range got {
		if d := math.Abs(got[i] - want[i]); !(d <= tol*scale) {
			t.Fatalf("%s[%d] = %.17g, want %.17g (tol %g, scale %g)", what, i, got[i], want[i], tol, scale)
		}
	}
}

// ExpectRunsClose fails unless got has every output and gradient of want,
// the same number of gradients, and each agrees to tol (ExpectClose).
// names gives outputs the names to print (nil: their own).
func ExpectRunsClose(t testing.TB, what string, got, want Result, tol float64, names map[string]string) {
	t.Helper()
	for _, name := range sortedKeys(want.Out) {
		label := name
		if l, ok := names[name]; ok {
			label = l
		}
		g, ok := got.Out[name]
		if !ok {
			t.Fatalf("%s: no output %s", what, name)
		}
		ExpectClose(t, what+": "+label, g, want.Out[name], tol)
	}
	if len(got.Grads) != len(want.Grads) {
		t.Fatalf("%s: gradients of %d parameters, want %d", what, len(got.Grads), len(want.Grads))
	}
	for _, name := range sortedKeys(want.Grads) {
		g, ok := got.Grads[name]
		if !ok {
			t.Fatalf("%s: no gradient of %s", what, name)
		}
		ExpectClose(t, what+": gradient of "+name, g, want.Grads[name], tol)
	}
}

// RelDiff is ‖a − b‖ / max(‖a‖, ‖b‖), 0 for two zero vectors.
func RelDiff(a, b []float64) float64 {
	var d, na, nb float64
	for i := range a {
		d += (a[i] - b[i]) * (a[i] - b[i])
		na += a[i] * a[i]
		nb += b[i] * b[i]
	}
	return math.Sqrt(d) / math.Max(math.Sqrt(math.Max(na, nb)), 1e-300)
}

func sortedKeys(m map[string][]float64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// ReportFlops adds a benchmark's matrix-product rate to its report:
// GFLOP/s over the benchmark's elapsed time and GFLOP per iteration, from
// flops, the growth of graph.MatMulFlops over its b.N iterations.
func ReportFlops(b *testing.B, flops int64) {
	if b.N == 0 || b.Elapsed() <= 0 {
		return
	}
	b.ReportMetric(float64(flops)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	b.ReportMetric(float64(flops)/float64(b.N)/1e9, "GFLOP/step")
}
