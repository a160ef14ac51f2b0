package graph

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// model is a tiny regression on sets: mean over the set of a linear map.
func model(batch int) BuildFunc {
	return func(b *Builder) error {
		x := b.Input("x", batch, 3, 2)
		y := b.Input("y", batch, 1)
		w := b.Param("lin.w", []int{2, 1}, Glorot)
		bias := b.Param("lin.b", []int{1}, Zeros)
		pred := Mean(Linear(x, w, bias), 1)
		b.Output("pred", pred)
		b.SetLoss(Mean(Square(Sub(pred, y))))
		return nil
	}
}

// TestTrainAndEvalShareWeights runs a training program and an evaluation
// program of another batch size on one Params: every Adam step is seen by
// the evaluation program, and a freshly compiled one agrees with it.
func TestTrainAndEvalShareWeights(t *testing.T) {
	t.Parallel()
	for _, dt := range []DType{Float32, Float64} {
		ps := NewParams(dt, 7)
		train, err := Compile(ps, model(4), true)
		if err != nil {
			t.Fatal(err)
		}
		eval, err := Compile(ps, model(1), false)
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(1, 1))
		opt := NewAdam(0.05)
		xs := make([]float64, 4*3*2)
		ys := make([]float64, 4)
		probe := []float64{1, 2, 3, 4, 5, 6}
		var first, last float64
		for step := range 200 {
			for i := range xs {
				xs[i] = rng.NormFloat64()
			}
			for i := range ys {
				ys[i] = 0
				for j := range 3 {
					ys[i] += (2*xs[i*6+j*2] - xs[i*6+j*2+1]) / 3
				}
			}
			if err := train.Feed("x", xs); err != nil {
				t.Fatal(err)
			}
			if err := train.Feed("y", ys); err != nil {
				t.Fatal(err)
			}
			if err := train.Run(); err != nil {
				t.Fatal(err)
			}
			if step == 0 {
				first = train.Loss()
			}
			last = train.Loss()
			if _, err := opt.Step(train); err != nil {
				t.Fatal(err)
			}
		}
		if !(last < first/100) {
			t.Fatalf("%v: loss %v → %v did not fall", dt, first, last)
		}
		run := func(p *Program) float64 {
			if err := p.Feed("x", probe); err != nil {
				t.Fatal(err)
			}
			if err := p.Run(); err != nil {
				t.Fatal(err)
			}
			v, _, _ := p.Output("pred")
			return v[0]
		}
		fresh, err := Compile(ps, model(1), false)
		if err != nil {
			t.Fatal(err)
		}
		want := (2*1 - 2 + 2*3 - 4 + 2*5 - 6) / 3.0
		if a, b := run(eval), run(fresh); a != b || math.Abs(a-want) > 0.05 {
			t.Fatalf("%v: eval program says %v, fresh program %v, want ≈ %v", dt, a, b, want)
		}
	}
}

func TestParamsNamesAreUnique(t *testing.T) {
	t.Parallel()
	ps := NewParams(Float64, 1)
	_, err := Compile(ps, func(b *Builder) error {
		b.Param("a.w", []int{2, 2}, Glorot)
		b.Param("a.w", []int{3, 2}, Glorot)
		return nil
	}, false)
	if err == nil {
		t.Fatal("a name reused with another shape was accepted")
	}
	_, err = Compile(NewParams(Float64, 1), func(b *Builder) error {
		b.Input("x", 2)
		b.Input("x", 2)
		return nil
	}, false)
	if err == nil {
		t.Fatal("two inputs with one name were accepted")
	}
}

func TestParamsInitIsSeeded(t *testing.T) {
	t.Parallel()
	init := func(seed uint64) []float64 {
		ps := NewParams(Float32, seed)
		if _, err := Compile(ps, func(b *Builder) error {
			b.Param("enc.0.w", []int{4, 4}, Glorot)
			return nil
		}, false); err != nil {
			t.Fatal(err)
		}
		return ps.Lookup("enc.0.w").Values()
	}
	a, b, c := init(1), init(1), init(2)
	for i := range a {
		if a[i] != b[i] {
			t.Fatal("same seed, different initial values")
		}
	}
	if a[0] == c[0] && a[1] == c[1] {
		t.Fatal("different seeds, same initial values")
	}
}

func TestCompileReportsShapeErrors(t *testing.T) {
	t.Parallel()
	_, err := Compile(NewParams(Float32, 1), func(b *Builder) error {
		Linear(b.Input("x", 2, 3), b.Param("w", []int{4, 5}, Glorot), nil)
		return nil
	}, false)
	if err == nil {
		t.Fatal("mismatched linear compiled")
	}
}

// TestPanicsInBuildFunctions checks what Compile returns when a build
// function panics: the project's own failures (a shape mismatch that an
// op reports) are one-line errors, and a foreign panic (a bug such as an
// index out of range in layer code) is an error that carries the stack
// of the panic, so that the bug can be found; neither panics the caller.
func TestPanicsInBuildFunctions(t *testing.T) {
	t.Parallel()
	ps := NewParams(Float64, 1)
	_, err := Compile(ps, func(b *Builder) error {
		Add(b.Input("a", 2, 3), b.Input("b", 3, 2))
		return nil
	}, false)
	if err == nil || strings.Contains(err.Error(), "\n") {
		t.Errorf("own failure: error %q, want one line", err)
	}
	var rows []int
	_, err = Compile(ps, func(b *Builder) error {
		_ = rows[3] // a bug
		return nil
	}, false)
	if err == nil || !strings.Contains(err.Error(), "index out of range") || !strings.Contains(err.Error(), "program_test.go") {
		t.Errorf("foreign panic: error %q, want the panic and the stack that names this file", err)
	}
}

// TestOutputUnknownName: reading an output the program does not have is
// an error that names it, not an empty value.
func TestOutputUnknownName(t *testing.T) {
	t.Parallel()
	prog, err := Compile(NewParams(Float64, 1), func(b *Builder) error {
		b.Output("y", Scale(b.Input("x", 2), 2))
		return nil
	}, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := prog.Run(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := prog.Output("y"); err != nil {
		t.Errorf("known output: %v", err)
	}
	if v, _, err := prog.Output("why"); err == nil || !strings.Contains(err.Error(), `"why"`) || v != nil {
		t.Errorf("unknown output: values %v, error %v; want an error naming it", v, err)
	}
}
