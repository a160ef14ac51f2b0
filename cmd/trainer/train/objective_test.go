package train

import (
	"strings"
	"testing"

	"github.com/probformer/probformer/graph"
)

// TestObjectiveByKind: the objective weighs a penalty by its kind, not its
// name: a KL named like a diversity term still joins the ELBO, and a
// penalty of no known kind is an error.
func TestObjectiveByKind(t *testing.T) {
	prog, err := graph.Compile(graph.NewParams(graph.Float64, 1), func(b *graph.Builder) error {
		nll := graph.Sum(b.Constant("nll", []int{1}, []float64{2}))
		b.AddPenaltyKind(graph.PenaltyKL, "a.diversity", graph.Sum(b.Constant("kl", []int{1}, []float64{4})))
		b.AddPenaltyKind(graph.PenaltyDiversity, "b.spread", graph.Sum(b.Constant("div", []int{1}, []float64{8})))
		loss, err := Objective(b, nll, 0.5)
		b.SetLoss(loss)
		return err
	}, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := FeedKLWeight(prog, 0.25, 0, 1); err != nil {
		t.Fatal(err)
	}
	if err := prog.Run(); err != nil {
		t.Fatal(err)
	}
	if got, want := prog.Loss(), 2+0.25*4+0.5*8.0; got != want {
		t.Errorf("loss %v, want nll + κ·KL + λ·diversity = %v", got, want)
	}
	if v := prog.PenaltyValues(); v["kl"] != 4 || v["diversity"] != 8 || v["nll"] != 2 {
		t.Errorf("tracked %v", v)
	}
	_, err = graph.Compile(graph.NewParams(graph.Float64, 1), func(b *graph.Builder) error {
		nll := graph.Sum(b.Constant("nll", []int{1}, []float64{2}))
		b.AddPenaltyKind(graph.PenaltyOther, "c.custom", nll)
		_, err := Objective(b, nll, 0)
		return err
	}, false)
	if err == nil || !strings.Contains(err.Error(), "c.custom") {
		t.Errorf("a penalty of kind other: error %v", err)
	}
	if KLWeight(2, 10, 5) != 1 || KLWeight(2, 10, 20) != 2 || KLWeight(2, 0, 1) != 2 {
		t.Error("KLWeight: want a linear warm-up to the weight")
	}
}
