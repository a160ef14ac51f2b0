package tasks

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/probformer/probformer/em"
	"github.com/probformer/probformer/graph"
)

func TestPrintPriors(t *testing.T) {
	params := graph.NewParams(graph.Float64, 1)
	_, err := graph.Compile(params, func(b *graph.Builder) error {
		raw := func(v ...float64) graph.Init {
			return func(_ *rand.Rand, _ []int) []float64 { return v }
		}
		a := b.Param(em.ParamName("enc.1", "alpha0"), []int{3}, raw(0, 0, 0))
		x := b.Param(em.ParamName("enc.1", "theta_xi"), []int{3}, raw(0, 1, -1))
		b.Output("sum", graph.Add(a, x))
		return nil
	}, false)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := printPriors(&out, params, em.DefaultRawParams(4)); err != nil {
		t.Fatal(err)
	}
	// θ_ξ = 1e-4 + softplus(r), α⁰ = 1e-8 + softplus(r); initially θ_ξ = 10
	// and α⁰ = 1/√4.
	want := [][]string{
		{"enc.1", "initial", "10", "—", "—", "—", "—", "—", "—", "0.5", "—"},
		{"enc.1", "0", "0.6932", "—", "—", "—", "—", "—", "—", "0.6931", "—"},
		{"enc.1", "1", "1.313", "—", "—", "—", "—", "—", "—", "0.6931", "—"},
		{"enc.1", "2", "0.3134", "—", "—", "—", "—", "—", "—", "0.6931", "—"},
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2+len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), 2+len(want), out.String())
	}
	if h := strings.Fields(lines[1]); strings.Join(h, " ") != "layer head θ_ξ a_α b_α θ_μ a_β b_β θ_π α⁰ β⁰" {
		t.Errorf("header %q", lines[1])
	}
	for i, w := range want {
		if got := strings.Fields(lines[2+i]); strings.Join(got, " ") != strings.Join(w, " ") {
			t.Errorf("row %d: %q, want %q", i, got, w)
		}
	}

	// A model without EM layers prints nothing.
	out.Reset()
	if err := printPriors(&out, graph.NewParams(graph.Float64, 1), em.DefaultRawParams(4)); err != nil || out.Len() != 0 {
		t.Errorf("no EM layers: %q, %v", out.String(), err)
	}
}
