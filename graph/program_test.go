package graph

import (
	"strings"
	"testing"
)

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
