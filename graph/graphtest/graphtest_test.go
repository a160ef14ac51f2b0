package graphtest

import (
	"errors"
	"testing"
)

// fakeProgram is a Program whose outputs and gradients are fixed, and
// whose backing it reuses between runs, as a compiled program does.
type fakeProgram struct {
	out   []float64
	grads map[string][]float64
	runs  int
}

func (p *fakeProgram) Run() error { p.runs++; return nil }
func (p *fakeProgram) Output(name string) ([]float64, []int, error) {
	if name != "y" {
		return nil, nil, errors.New("no output " + name)
	}
	return p.out, []int{len(p.out)}, nil
}
func (p *fakeProgram) Gradients() (map[string][]float64, error) { return p.grads, nil }

// TestRunCopies: Run runs once, keeps copies of the outputs it was asked
// for that exist, and the gradients.
func TestRunCopies(t *testing.T) {
	t.Parallel()
	p := &fakeProgram{out: []float64{1, 2}, grads: map[string][]float64{"w": {3}}}
	r := Run(t, p, "y", "missing")
	p.out[0] = 9
	if p.runs != 1 || len(r.Out) != 1 || r.Out["y"][0] != 1 || r.Grads["w"][0] != 3 {
		t.Fatalf("runs %d, result %+v", p.runs, r)
	}
	if f := Forward(t, p, "y"); f.Grads != nil || f.Out["y"][0] != 9 {
		t.Fatalf("forward %+v", f)
	}
}

// TestTolerances: ExpectClose is relative above 1 and absolute below, and
// RelDiff is a ratio of norms.
func TestTolerances(t *testing.T) {
	t.Parallel()
	ExpectClose(t, "small", []float64{0.001}, []float64{0}, 1e-3)
	ExpectClose(t, "large", []float64{1001}, []float64{1000}, 1e-3)
	want := Result{Out: map[string][]float64{"y": {1}}, Grads: map[string][]float64{"w": {2}}}
	ExpectRunsClose(t, "runs", want, want, 0, nil)
	if d := RelDiff([]float64{3, 4}, []float64{0, 0}); d != 1 {
		t.Fatalf("RelDiff = %g, want 1", d)
	}
	if d := RelDiff([]float64{0}, []float64{0}); d != 0 {
		t.Fatalf("RelDiff of zeros = %g", d)
	}
}
