package main

import (
	"probformer/configs"
	"probformer/graph"
)

// withKL returns the ELBO nll + κ·KL̄ of Bayesian attention
// (bayes-attention.md §5), KL̄ the mean of the penalties the layers
// recorded, one per layer, and κ the input kl_weight [1] that atStep
// feeds. A graph without penalties (an evaluation graph, or attention
// that is not Bayesian) gets nll unchanged.
func withKL(b *graph.Builder, nll *graph.Node) *graph.Node {
	penalties := b.Penalties()
	if len(penalties) == 0 {
		return nll
	}
	sum := penalties[0]
	for _, p := range penalties[1:] {
		sum = graph.Add(sum, p)
	}
	// Summing the input [1] makes κ a scalar like the penalties.
	kappa := graph.Sum(b.Input(klWeightInput, 1))
	return graph.Add(nll, graph.Mul(kappa, graph.Scale(sum, 1/float64(len(penalties)))))
}

// klWeight is κ(t) = kl_weight·min(1, t/kl_warmup), the linear warm-up of
// the KL weight (bayes-attention.md §5).
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
