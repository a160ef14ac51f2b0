package em

import (
	"strconv"

	"github.com/probformer/probformer/graph"
)

// The graph form of the phases. Nodes are 3-D, batched over the G = B·H
// example-and-head problems (see layer): queries [G, N, d], scores and
// weights [G, N, M], per-unit quantities [G, M], and per-head
// hyperparameters [G].

// pairDist returns ‖a_i − c_j‖² for every pair in the expanded form of
// MATH.md §1, ‖a_i‖² − 2 a_i·c_j + ‖c_j‖², clamped at 0 (as sqDist of
// the reference). a: [G, N, k]; c: [G, M, k]; result: [G, N, M].
func pairDist(a, c *graph.Node) *graph.Node {
	cross := graph.Scale(graph.BatchedMatMul(a, c, false, true), -2)
	withA := graph.BroadcastAdd(cross, graph.Sum(graph.Square(a), 2), 2)
	return graph.ReLU(graph.BroadcastAdd(withA, graph.Sum(graph.Square(c), 2), 1))
}

// gaussianTerm returns (k/2) log λ_j − (λ_j/2) D_ij, the part of a
// component score that one Gaussian factor contributes (MATH.md §1).
// lambda: [G, M]; dist: [G, N, M]; k is the factor's dimension.
func gaussianTerm(lambda, dist *graph.Node, k int) *graph.Node {
	quadratic := graph.BroadcastMul(dist, graph.Scale(lambda, -0.5), 1)
	return graph.BroadcastAdd(quadratic, graph.Scale(graph.Log(lambda), float64(k)/2), 1)
}

// withLogPi adds log π_j [G, M] to a score term [G, N, M].
func withLogPi(term, logPi *graph.Node) *graph.Node {
	return graph.BroadcastAdd(term, logPi, 1)
}

// weightsOf returns softmax_j of scores [G, N, M] over the real memory
// units, with the rows of the query units outside rows ([G, N], nil for
// all) set to 0, so that they drop out of every sum over i.
func (l *layer) weightsOf(scores, rows *graph.Node) *graph.Node {
	w := graph.MaskedSoftmax(scores, l.keyMask)
	if rows == nil {
		return w
	}
	return graph.BroadcastMul(w, rows, 2)
}

// masked adds MaskNegInf to the entries [G, M] of padded memory units.
func (l *layer) masked(x *graph.Node) *graph.Node {
	if l.maskAdd == nil {
		return x
	}
	return graph.Add(x, l.maskAdd)
}

// perUnit repeats a value per problem, p [G], for every memory unit:
// [G, M].
func (l *layer) perUnit(field string, p *graph.Node) *graph.Node {
	zeros := l.b.Constant(ParamName(l.name, field+".per_unit"), []int{l.groups, l.nMemory}, make([]float64, l.groups*l.nMemory))
	return graph.BroadcastAdd(zeros, p, 1)
}

// initialMixture returns the mixture EM starts from, as InitialMixture:
// ξ⁰, μ⁰, the per-head α⁰, β⁰ repeated for every unit, and log π⁰ from the
// linked prior of MATH.md §2,
//
//	log π_j⁰ = (α⁰/2) ‖ξ_j⁰‖² + (β⁰/2) ‖μ_j⁰‖² − log Z,
//
// or the log-softmax of free logits, normalised over the real units.
func (l *layer) initialMixture() MixtureNodes {
	p := l.params
	mix := MixtureNodes{Xi: l.xi0, Mu: l.mu0, Alpha: l.perUnit(paramAlpha0, p.alpha0)}
	if p.beta0 != nil {
		mix.Beta = l.perUnit(paramBeta0, p.beta0)
	}
	var logits *graph.Node // [G, M]
	switch {
	case l.cfg.Prior == LinkedPrior:
		keyNorms := graph.Sum(graph.Square(l.xi0), 2)
		valueNorms := graph.Sum(graph.Square(l.mu0), 2)
		logits = graph.Add(
			graph.BroadcastMul(keyNorms, graph.Scale(p.alpha0, 0.5), 1),
			graph.BroadcastMul(valueNorms, graph.Scale(p.beta0, 0.5), 1))
	case l.piLogits != nil:
		logits = l.piLogits
	default:
		learned := l.b.Param(ParamName(l.name, paramPiLogits), []int{l.heads, l.nMemory}, graph.Zeros)
		logits = l.perGroup(paramPiLogits, learned)
	}
	mix.LogPi = graph.LogSoftmax(l.masked(logits), 1)
	return mix
}

// keyTerm returns the key term of the scores of MATH.md §1 without
// log π, (d/2) log α_j − (α_j/2) ‖q_i − ξ_j‖²: [G, N, M].
func (l *layer) keyTerm(mix MixtureNodes) *graph.Node {
	return gaussianTerm(mix.Alpha, pairDist(l.q, mix.Xi), l.keyDim)
}

// adaptKeys unrolls cfg.KeyIters iterations of online key adaptation,
// MATH.md §4, as AdaptKeys:
//
//	w_ij = softmax_j s_ij(q_i)                      (real query units i)
//	n_j  = Σ_i w_ij
//	ξ_j ← (θ_ξ ξ_j⁰ + α_j Σ_i w_ij q_i) / (θ_ξ + α_j n_j)
//	α_j ← (a_α − 1 + (d/2) n_j) / (b_α + ½ Σ_i w_ij ‖q_i − ξ_j‖²)   (AdaptAlpha; new ξ_j)
//
// It returns the adapted mixture and its key term (keyTerm), which the
// later phases share since ξ and α no longer change.
func (l *layer) adaptKeys(mix MixtureNodes) (MixtureNodes, *graph.Node) {
	p := l.params
	term := l.keyTerm(mix)
	for range l.cfg.KeyIters {
		w := l.weightsOf(withLogPi(term, mix.LogPi), l.queryMask)
		var n *graph.Node
		mix.Xi, n = updateCentres(w, l.q, l.xi0, mix.Alpha, p.thetaXi)
		if l.cfg.AdaptAlpha {
			mix.Alpha = updatePrecision(w, l.q, mix.Xi, n, p.aAlphaExtra, p.bAlpha, l.keyDim)
		}
		term = l.keyTerm(mix)
	}
	return mix, term
}

// updateCentres is the M-step of a Gaussian mean under the prior
// N(c_j⁰, θ⁻¹ I) (MATH.md §4 for keys, §5 for values):
//
//	c_j ← (θ c_j⁰ + λ_j Σ_i w_ij x_i) / (θ + λ_j n_j),  n_j = Σ_i w_ij.
//
// w: [G, N, M]; x: [G, N, k]; c0: [G, M, k]; lambda: [G, M]; theta: [G].
// It returns c [G, M, k] and n [G, M].
func updateCentres(w, x, c0, lambda, theta *graph.Node) (c, n *graph.Node) {
	n = graph.Sum(w, 1)
	weighted := graph.BroadcastMul(graph.BatchedMatMul(w, x, true, false), lambda, 2)
	numerator := graph.Add(graph.BroadcastMul(c0, theta, 1, 2), weighted)
	denominator := graph.BroadcastAdd(graph.Mul(lambda, n), theta, 1)
	return graph.BroadcastDiv(numerator, denominator, 2), n
}

// updatePrecision is the M-step of a Gaussian precision under the prior
// Gamma(a, b) (MATH.md §4 for α, §5 for β), with the new centres c:
//
//	λ_j ← (a − 1 + (k/2) n_j) / (b + ½ Σ_i w_ij ‖x_i − c_j‖²).
//
// aExtra = a − 1 and b are [G]; the distances are the clamped expansion.
func updatePrecision(w, x, c, n, aExtra, b *graph.Node, k int) *graph.Node {
	spread := graph.Sum(graph.Mul(w, pairDist(x, c)), 1)
	numerator := graph.BroadcastAdd(graph.Scale(n, float64(k)/2), aExtra, 1)
	denominator := graph.BroadcastAdd(graph.Scale(spread, 0.5), b, 1)
	return graph.Div(numerator, denominator)
}

// fresh returns x times a constant 1 of its own (named by the iteration
// t), a node that no other iteration shares. Gorgonia v0.9.18 merges
// equal expressions of a graph: with β unchanged between iterations
// (AdaptBeta off, T_p ≥ 2), every iteration's Scale(β) and Log(β) would be
// the same nodes, and the gradient of β⁰ through them comes out wrong
// (finite differences and the fused op agree with each other, not with
// it; TestFusedEqualsComposed). A distinct λ per iteration keeps the
// iterations' nodes apart.
func (l *layer) fresh(x *graph.Node, t int) *graph.Node {
	shape := graph.Shape(x)
	n := 1
	for _, s := range shape {
		n *= s
	}
	one := make([]float64, n)
	for i := range one {
		one[i] = 1
	}
	return graph.Mul(x, l.b.Constant(ParamName(l.name, "propagate.one."+strconv.Itoa(t)), shape, one))
}

// propagate unrolls cfg.PropagateIters iterations of value propagation
// from the annotated units, MATH.md §5, as Propagate:
//
//	w_ij = softmax_j s_ij(q_i, v_i)                 (i ∈ S only)
//	n_j  = Σ_{i∈S} w_ij
//	μ_j ← (θ_μ μ_j⁰ + β_j Σ_{i∈S} w_ij v_i) / (θ_μ + β_j n_j)
//	β_j ← (a_β − 1 + (m/2) n_j) / (b_β + ½ Σ_{i∈S} w_ij ‖v_i − μ_j‖²)   (AdaptBeta; new μ_j)
//	π_j ← (n_j + θ_π − 1) / (|S| + M (θ_π − 1))                        (AdaptPi)
//
// with M the number of real memory units. keyTerm is the key part of the
// scores, fixed in this phase. The β update of the last iteration is left
// out when cfg.ValueIters = 0 (see layer.updateBeta). An example whose S
// is empty keeps the mixture it came with (§5 skips the phase): the graph
// computes its updates anyway, from zero weights, and discards them.
func (l *layer) propagate(mix MixtureNodes, keyTerm *graph.Node) MixtureNodes {
	p := l.params
	before := mix
	sizeS := graph.Sum(l.annotated, 1) // |S|: [G]
	var logDenominator *graph.Node     // log(|S| + M (θ_π − 1)): [G]
	if l.cfg.AdaptPi {
		priorCounts := graph.Scale(p.piExtra, float64(l.nMemory))
		if l.realMemory != nil {
			priorCounts = graph.Mul(p.piExtra, l.realMemory)
		}
		logDenominator = graph.Log(graph.Add(priorCounts, sizeS))
	}
	for t := range l.cfg.PropagateIters {
		scores := graph.Add(withLogPi(keyTerm, mix.LogPi), gaussianTerm(l.fresh(mix.Beta, t), pairDist(l.values, mix.Mu), l.valueDim))
		w := l.weightsOf(scores, l.annotated)
		var n *graph.Node
		mix.Mu, n = updateCentres(w, l.values, l.mu0, mix.Beta, p.thetaMu)
		if l.updateBeta(t) {
			mix.Beta = updatePrecision(w, l.values, mix.Mu, n, p.aBetaExtra, p.bBeta, l.valueDim)
		}
		if l.cfg.AdaptPi {
			counts := graph.BroadcastAdd(n, p.piExtra, 1)
			mix.LogPi = l.masked(graph.BroadcastSub(graph.Log(counts), logDenominator, 1))
		}
	}

	// hasS is 1 for a problem with a nonempty S and 0 otherwise:
	// min(|S|, 1) = 1 − relu(1 − |S|), exact for 0/1 masks.
	hasS := graph.AddScalar(graph.Neg(graph.ReLU(graph.AddScalar(graph.Neg(sizeS), 1))), 1)
	noS := graph.AddScalar(graph.Neg(hasS), 1)
	choose := func(after, before *graph.Node) *graph.Node {
		if after == before {
			return after
		}
		axes := []byte{1, 2}[:after.Dims()-1]
		// hasS·after + (1 − hasS)·before is exactly one of the two.
		return graph.Add(graph.BroadcastMul(after, hasS, axes...), graph.BroadcastMul(before, noS, axes...))
	}
	mix.Mu = choose(mix.Mu, before.Mu)
	mix.Beta = choose(mix.Beta, before.Beta)
	mix.LogPi = choose(mix.LogPi, before.LogPi)
	return mix
}

// inferValues reads out every query unit, MATH.md §3, as InferValues:
//
//	v_i⁰      = Σ_j softmax_j(s_ij(q_i)) μ_j                (plain readout)
//	w_ij^t    = softmax_j s_ij(q_i, v_i^t)                  (E-step)
//	v_i^{t+1} = Σ_j w_ij^t β_j μ_j / Σ_j w_ij^t β_j         (M-step)
//
// and returns v^{T_v} [G, N, m] and the weights that formed it [G, N, M],
// both zero at padded query units.
func (l *layer) inferValues(mix MixtureNodes, keyTerm *graph.Node) (readout, weights *graph.Node) {
	keyScores := withLogPi(keyTerm, mix.LogPi)
	weights = l.weightsOf(keyScores, nil)
	readout = graph.BatchedMatMul(weights, mix.Mu, false, false)
	for range l.cfg.ValueIters {
		scores := graph.Add(keyScores, gaussianTerm(mix.Beta, pairDist(readout, mix.Mu), l.valueDim))
		weights = l.weightsOf(scores, nil)
		precise := graph.BroadcastMul(weights, mix.Beta, 1) // w_ij β_j
		readout = graph.BroadcastDiv(graph.BatchedMatMul(precise, mix.Mu, false, false), graph.Sum(precise, 2), 2)
	}
	if l.queryMask != nil {
		readout = graph.BroadcastMul(readout, l.queryMask, 2)
		weights = graph.BroadcastMul(weights, l.queryMask, 2)
	}
	return readout, weights
}
