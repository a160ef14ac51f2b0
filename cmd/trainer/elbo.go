package main

import (
	"fmt"
	"strings"

	"probformer/configs"
	"probformer/graph"
)

// objective returns the training loss: the task's nll plus the penalties
// its layers recorded (graph.Builder.AddPenalty).
//
//   - Bayesian attention's KL terms (<layer>.kl) make the ELBO
//     nll + κ·KL̄ (layers/BAYES.md §5), KL̄ their mean over layers and
//     κ the input kl_weight [1] that atStep anneals.
//   - Head-diversity terms (<layer>.diversity) are summed over layers and
//     weighted by λ = model.attention.head_diversity.
//
// When there are penalties, the nll and the weighted sums are tracked too
// (nll, kl, diversity), so metrics.jsonl and the progress line show each
// part of the loss. A graph without penalties (an evaluation graph, or
// plain attention) gets nll unchanged.
func objective(b *graph.Builder, nll *graph.Node, lambda float64) (*graph.Node, error) {
	var kls, diversities []*graph.Node
	penalties := b.Penalties()
	for i, name := range b.PenaltyNames() {
		switch {
		case strings.HasSuffix(name, ".diversity"):
			diversities = append(diversities, penalties[i])
		case strings.HasSuffix(name, ".kl"):
			kls = append(kls, penalties[i])
		default:
			return nil, fmt.Errorf("penalty %s: the objective has no weight for it", name)
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
		kappa := graph.Sum(b.Input(klWeightInput, 1))
		loss = graph.Add(loss, graph.Mul(kappa, meanKL))
	}
	if len(diversities) > 0 {
		total := sum(diversities)
		b.Track("diversity", total)
		loss = graph.Add(loss, graph.Scale(total, lambda))
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

// klWeight is κ(t) = kl_weight·min(1, t/kl_warmup), the linear warm-up of
// the KL weight (layers/BAYES.md §5).
func klWeight(tr configs.Training, step int) float64 {
	if tr.KLWarmup <= 0 || step >= tr.KLWarmup {
		return tr.KLWeight
	}
	return tr.KLWeight * float64(step) / float64(tr.KLWarmup)
}

// feedKLWeight feeds the KL weight of the step, if the graph has one.
func feedKLWeight(prog *graph.Program, tr configs.Training, step int) error {
	if !prog.HasInput(klWeightInput) {
		return nil
	}
	return prog.Feed(klWeightInput, []float64{klWeight(tr, step)})
}
