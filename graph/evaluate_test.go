package graph

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
)

// TestEvaluateValues: the named outputs come back in the order asked, in
// either dtype, and parameters are read from params.
func TestEvaluateValues(t *testing.T) {
	t.Parallel()
	for _, dt := range []DType{Float64, Float32} {
		ps := NewParams(dt, 1)
		outs, err := Evaluate(ps, func(b *Builder) error {
			x := b.Constant("x", []int{2, 2}, []float64{1, 2, 3, 4})
			w := b.Param("w", []int{2}, Ones)
			b.Output("sum", Sum(x))
			b.Output("exp", Exp(x))
			b.Output("scaled", Scale(w, 3))
			return nil
		}, "scaled", "sum", "exp")
		if err != nil {
			t.Fatalf("%v: %v", dt, err)
		}
		if len(outs) != 3 {
			t.Fatalf("%v: %d outputs, want 3", dt, len(outs))
		}
		if !slices.Equal(outs[0], []float64{3, 3}) {
			t.Errorf("%v: scaled = %v, want [3 3]", dt, outs[0])
		}
		if !slices.Equal(outs[1], []float64{10}) {
			t.Errorf("%v: sum = %v, want [10]", dt, outs[1])
		}
		for i, v := range outs[2] {
			if want := math.Exp(float64(i + 1)); math.Abs(v-want) > 1e-6*want {
				t.Errorf("%v: exp[%d] = %v, want %v", dt, i, v, want)
			}
		}
		if ps.Lookup("w") == nil {
			t.Errorf("%v: parameter w not added to params", dt)
		}
	}
}

// TestEvaluateErrors: a missing output, an error returned by the build
// function and a shape error raised inside an op are all returned, not
// panicked.
func TestEvaluateErrors(t *testing.T) {
	t.Parallel()
	errBuild := errors.New("no model here")
	cases := []struct {
		name    string
		fn      BuildFunc
		outputs []string
		want    string
	}{
		{"missing output", func(b *Builder) error {
			b.Output("y", b.Constant("x", []int{1}, []float64{1}))
			return nil
		}, []string{"y", "z"}, `no output "z"`},
		{"build error", func(*Builder) error { return errBuild }, []string{"y"}, errBuild.Error()},
		{"shape error", func(b *Builder) error {
			b.Output("y", Linear(b.Input("x", 2, 3), b.Param("w", []int{4, 5}, Glorot), nil))
			return nil
		}, []string{"y"}, ""},
	}
	for _, c := range cases {
		var outs [][]float64
		var err error
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("%s: panicked: %v", c.name, r)
				}
			}()
			outs, err = Evaluate(NewParams(Float64, 1), c.fn, c.outputs...)
		}()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
		if outs != nil {
			t.Errorf("%s: outputs %v returned with an error", c.name, outs)
		}
	}
	if _, err := Evaluate(NewParams(Float64, 1), func(*Builder) error { return errBuild }); !errors.Is(err, errBuild) {
		t.Errorf("build error %v does not wrap the build function's error", err)
	}
}
