package graph

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestTrackAndPenalties: tracked values and penalties are logged by name
// after a run, only penalties are returned for the objective, and a
// non-scalar is refused.
func TestTrackAndPenalties(t *testing.T) {
	t.Parallel()
	prog, err := Compile(NewParams(Float64, 1), func(b *Builder) error {
		x := b.Constant("x", []int{2, 2}, []float64{1, 2, 3, 4})
		b.Track("sum", Sum(x))
		b.AddPenalty("layer.kl", Mean(x))
		if names := b.PenaltyNames(); !slices.Equal(names, []string{"layer.kl"}) || len(b.Penalties()) != 1 {
			t.Errorf("penalties %v, want layer.kl only", names)
		}
		if kinds := b.PenaltyKinds(); !slices.Equal(kinds, []PenaltyKind{PenaltyKL}) {
			t.Errorf("kinds %v, want [kl]: AddPenalty reads the kind from the suffix", kinds)
		}
		return nil
	}, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := prog.Run(); err != nil {
		t.Fatal(err)
	}
	if got := prog.PenaltyValues(); got["sum"] != 10 || got["layer.kl"] != 2.5 || len(got) != 2 {
		t.Errorf("values %v, want sum 10 and layer.kl 2.5", got)
	}
	_, err = Compile(NewParams(Float64, 1), func(b *Builder) error {
		b.Track("rows", b.Constant("x", []int{2}, []float64{1, 2}))
		return nil
	}, false)
	if err == nil || !strings.Contains(err.Error(), "rows must be a scalar") {
		t.Errorf("tracking a vector: error %v", err)
	}
}

// TestPenaltyKinds: a penalty's kind is what AddPenaltyKind says, not
// what its name suggests; AddPenalty infers it from the suffix.
func TestPenaltyKinds(t *testing.T) {
	t.Parallel()
	_, err := Compile(NewParams(Float64, 1), func(b *Builder) error {
		x := b.Constant("x", []int{2}, []float64{1, 2})
		b.AddPenaltyKind(PenaltyDiversity, "enc.0.spread", Sum(x))
		b.AddPenaltyKind(PenaltyKL, "enc.1.divergence", Mean(x))
		b.AddPenalty("enc.2.diversity", Sum(x))
		b.AddPenalty("enc.3.custom", Sum(x))
		want := []PenaltyKind{PenaltyDiversity, PenaltyKL, PenaltyDiversity, PenaltyOther}
		if got := b.PenaltyKinds(); !slices.Equal(got, want) {
			t.Errorf("kinds %v, want %v", got, want)
		}
		if got := PenaltyKL.String() + " " + PenaltyDiversity.String() + " " + PenaltyOther.String(); got != "kl diversity other" {
			t.Errorf("names %q", got)
		}
		return nil
	}, false)
	if err != nil {
		t.Fatal(err)
	}
}

// TestCompileSampler: a sampler draws noise as a training graph does and
// computes the same forward values, but has no gradients.
func TestCompileSampler(t *testing.T) {
	t.Parallel()
	params := NewParams(Float64, 1)
	build := func(b *Builder) error {
		w := b.Param("w", []int{3}, Normal(1))
		y := Mul(w, b.Noise("u", UniformNoise, 3))
		if b.Training() {
			b.AddPenalty("p", Sum(y))
		}
		b.Output("y", y)
		b.SetLoss(Sum(y))
		return nil
	}
	train, err := Compile(params, build, true)
	if err != nil {
		t.Fatal(err)
	}
	sampler, err := CompileSampler(params, build)
	if err != nil {
		t.Fatal(err)
	}
	if !sampler.HasNoise() {
		t.Fatal("the sampler lacks the training graph's noise")
	}
	for _, p := range []*Program{train, sampler} {
		p.DrawNoise(rand.New(rand.NewPCG(4, 5)))
		if err := p.Run(); err != nil {
			t.Fatal(err)
		}
	}
	a, _, _ := train.Output("y")
	b, _, _ := sampler.Output("y")
	if !slices.Equal(a, b) || sampler.PenaltyValues()["p"] != train.PenaltyValues()["p"] {
		t.Errorf("sampler %v, training graph %v", b, a)
	}
	if _, err := sampler.Gradients(); err == nil {
		t.Error("the sampler has gradients")
	}
}
