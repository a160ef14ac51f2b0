package optim

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/probformer/probformer/graph"
)

// quadratic builds loss = Σ w⊙c + ½Σ w², whose gradient is c + w.
func quadratic(b *graph.Builder) error {
	w := b.Param("w", []int{3}, func(_ *rand.Rand, _ []int) []float64 { return []float64{1, -2, 0.5} })
	c := b.Constant("c", []int{3}, []float64{0.3, -1.5, 2})
	b.SetLoss(graph.Add(graph.Sum(graph.Mul(w, c)), graph.Scale(graph.Sum(graph.Square(w)), 0.5)))
	return nil
}

func TestAdamMatchesReference(t *testing.T) {
	ps := graph.NewParams(graph.Float64, 1)
	prog, err := graph.Compile(ps, quadratic, true)
	if err != nil {
		t.Fatal(err)
	}
	opt := NewAdam(0.1)
	opt.WeightDecay = 0.01
	for range 3 {
		if err := prog.Run(); err != nil {
			t.Fatal(err)
		}
		if _, err := opt.Step(prog); err != nil {
			t.Fatal(err)
		}
	}
	// Three AdamW steps written out in Python with torch.optim.AdamW's
	// formulas.
	want := []float64{0.698411879242037, -1.69463198001537, 0.199277855972486}
	got := ps.Lookup("w").Values()
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-14 {
			t.Fatalf("w = %v, want %v", got, want)
		}
	}
}

func TestAdamStateRoundTrip(t *testing.T) {
	run := func(split bool) []float64 {
		ps := graph.NewParams(graph.Float64, 1)
		prog, err := graph.Compile(ps, quadratic, true)
		if err != nil {
			t.Fatal(err)
		}
		opt := NewAdam(0.05)
		for i := range 6 {
			if split && i == 3 {
				st := opt.State()
				opt = NewAdam(0.05)
				opt.SetState(st)
			}
			if err := prog.Run(); err != nil {
				t.Fatal(err)
			}
			if _, err := opt.Step(prog); err != nil {
				t.Fatal(err)
			}
		}
		return ps.Lookup("w").Values()
	}
	a, b := run(false), run(true)
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("restored optimizer diverged: %v vs %v", a, b)
		}
	}
}

func TestAdamRefusesNaNGradient(t *testing.T) {
	ps := graph.NewParams(graph.Float64, 1)
	prog, err := graph.Compile(ps, func(b *graph.Builder) error {
		w := b.Param("w", []int{2}, graph.Ones)
		b.SetLoss(graph.Sum(graph.Sqrt(graph.Scale(w, -1))))
		return nil
	}, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := prog.Run(); err != nil {
		t.Fatal(err)
	}
	_, err = NewAdam(0.1).Step(prog)
	if err == nil || !strings.Contains(err.Error(), "w") {
		t.Fatalf("want an error naming w, got %v", err)
	}
	if v := ps.Lookup("w").Values(); v[0] != 1 || v[1] != 1 {
		t.Fatalf("weights changed to %v on a NaN gradient", v)
	}
}

func TestAdamClipNorm(t *testing.T) {
	ps := graph.NewParams(graph.Float64, 1)
	prog, err := graph.Compile(ps, quadratic, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := prog.Run(); err != nil {
		t.Fatal(err)
	}
	opt := NewAdam(0.1)
	opt.ClipNorm = 0.5
	norm, err := opt.Step(prog)
	if err != nil {
		t.Fatal(err)
	}
	// Gradient c + w = (1.3, −3.5, 2.5).
	if want := math.Sqrt(1.3*1.3 + 3.5*3.5 + 2.5*2.5); math.Abs(norm-want) > 1e-14 {
		t.Fatalf("norm %v, want %v", norm, want)
	}
	st := opt.State()
	if m := st.M["w"][0]; math.Abs(m-0.1*1.3*0.5/norm) > 1e-15 {
		t.Fatalf("first moment %v: gradient not clipped", m)
	}
}
