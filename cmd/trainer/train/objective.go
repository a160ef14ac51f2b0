package train

import (
	"fmt"

	"github.com/probformer/probformer/graph"
)

// KLWeightInput is the input [1] that carries the annealed KL weight κ(t)
// of an ELBO built by Objective; FeedKLWeight feeds it.
const KLWeightInput = "kl_weight"

// Objective returns the training loss: the task's nll plus the penalties
// its layers recorded (graph.Builder.AddPenaltyKind), each by its kind.
//
//   - graph.PenaltyKL terms (Bayesian attention) make the ELBO
//     nll + κ·KL̄ (layers/BAYES.md §5), KL̄ their mean over layers and
//     κ the input KLWeightInput, which the task feeds every step
//     (FeedKLWeight, from StepAware.AtStep).
//   - graph.PenaltyDiversity terms are summed over layers and weighted by
//     diversity, the λ of the head-diversity regulariser.
//   - A graph.PenaltyOther term is an error: the objective has no weight
//     for it.
//
// When there are penalties, the nll and the weighted sums are tracked too
// (nll, kl, diversity), so metrics.jsonl and the progress line show each
// part of the loss. A graph without penalties (an evaluation graph, or
// plain attention) gets nll unchanged.
func Objective(b *graph.Builder, nll *graph.Node, diversity float64) (*graph.Node, error) {
	var kls, diversities []*graph.Node
	penalties := b.Penalties()
	names := b.PenaltyNames()
	for i, kind := range b.PenaltyKinds() {
		switch kind {
		case graph.PenaltyDiversity:
			diversities = append(diversities, penalties[i])
		case graph.PenaltyKL:
			kls = append(kls, penalties[i])
		default:
			return nil, fmt.Errorf("penalty %s (kind %v): the objective has no weight for it", names[i], kind)
		}
	}
	if len(penalties) == 0 {
		return nll, nil
	}
	b.Track("nll", nll)
	loss := nll
	if len(kls) > 0 {
		meanKL := graph.Scale(sum(kls), 1/float64(len(kls)))
		b.Track("kl", meanKL)
		// Summing the input [1] makes κ a scalar like the penalties.
		kappa := graph.Sum(b.Input(KLWeightInput, 1))
		loss = graph.Add(loss, graph.Mul(kappa, meanKL))
	}
	if len(diversities) > 0 {
		total := sum(diversities)
		b.Track("diversity", total)
		loss = graph.Add(loss, graph.Scale(total, diversity))
	}
	return loss, nil
}

func sum(xs []*graph.Node) *graph.Node {
	s := xs[0]
	for _, x := range xs[1:] {
		s = graph.Add(s, x)
	}
	return s
}

// KLWeight is κ(t) = weight·min(1, t/warmup), the linear warm-up of the
// KL weight (layers/BAYES.md §5); warmup ≤ 0 is none.
func KLWeight(weight float64, warmup, step int) float64 {
	if warmup <= 0 || step >= warmup {
		return weight
	}
	return weight * float64(step) / float64(warmup)
}

// FeedKLWeight feeds KLWeight(weight, warmup, step) to KLWeightInput, if
// the program has that input.
func FeedKLWeight(prog *graph.Program, weight float64, warmup, step int) error {
	if !prog.HasInput(KLWeightInput) {
		return nil
	}
	return prog.Feed(KLWeightInput, []float64{KLWeight(weight, warmup, step)})
}
