package layers

import (
	"fmt"
	"math"

	"github.com/probformer/probformer/graph"
)

// The composed reference implementation of Bayesian attention: the layer
// as BAYES.md writes it, from generic graph ops (batched products, log-
// softmaxes, lgamma, broadcasts). It is 8–12× slower than the fused path
// of bayes.go, which the tests hold equal to it to 1e-9 in float64.

// attendComposed is the reference implementation of attend, built from
// generic graph ops as BAYES.md writes it: it returns the readout
// [B, N, H·dv] and the weights W [B, H, N, M] for the noise [B, H, N, M] (u
// or ε), and with withKL the layer's KL̄ (a scalar); without noise, the
// weights are φ and there is no KL. The fused attend must equal it; Weights
// uses it for φ with a gradient. The prior network is only built for the
// KL. consts prefixes the names of the constants it adds.
func (a BayesAttention) attendComposed(b *graph.Builder, name, consts string, q, k, v *graph.Node, heads int, mask Mask, noise *graph.Node, withKL bool) (out, weights, kl *graph.Node) {
	qs, ks := graph.Shape(q), graph.Shape(k)
	n, m, d := qs[1], ks[1], qs[2]/heads
	if mask.Causal && n != m {
		b.Fail(fmt.Errorf("%s: causal attention needs as many queries as keys, has %d and %d", name, n, m))
	}
	scores := graph.BatchedMatMul(splitHeads(q, heads), splitHeads(k, heads), false, true) // [B, H, N, M]
	scores = maskLogits(b, consts+".causal", graph.Scale(scores, 1/math.Sqrt(float64(d))), mask)
	if noise == nil {
		weights = graph.Softmax(scores, 3)
	} else {
		logPhi := graph.LogSoftmax(scores, 3)
		weights = graph.Softmax(a.logSample(logPhi, noise), 3)
		if withKL {
			logP := a.logPrior(b, name, consts, k, heads, n, mask)
			kl = a.meanKL(b, consts, logPhi, logP, heads, mask)
		}
	}
	read := graph.BatchedMatMul(weights, splitHeads(v, heads), false, false) // [B, H, N, dv]
	return mergeHeads(read), weights, kl
}

// logSample is log S of §3 or §4 from log φ and the noise, both
// [B, H, N, M].
func (a BayesAttention) logSample(logPhi, noise *graph.Node) *graph.Node {
	if a.Kind == KindBayesLogNormal {
		return graph.Add(graph.AddScalar(logPhi, -a.Sigma*a.Sigma/2), graph.Scale(noise, a.Sigma))
	}
	lg, _ := math.Lgamma(1 + 1/a.K)
	// −log(1 − u) is an Exp(1) draw, whose 1/k-th power is a Weibull(k, 1)
	// draw. It is computed as −log u, which has the same distribution:
	// a float32 u just below 1 rounds to 1, where 1 − u would give S = ∞
	// and a NaN softmax, while u gives S = 0, a weight of 0.
	gumbel := graph.Log(graph.Neg(graph.Log(noise)))
	return graph.Add(graph.AddScalar(logPhi, -lg), graph.Scale(gumbel, 1/a.K))
}

// logPrior is log p [B, H, N, M], the log prior mean of each weight (§2),
// normalised over the keys each query sees.
func (a BayesAttention) logPrior(b *graph.Builder, name, consts string, k *graph.Node, heads, n int, mask Mask) *graph.Node {
	ks := graph.Shape(k)
	bs, m := ks[0], ks[1]
	grid := b.Constant(consts+".prior.grid", []int{bs * heads, n, m}, make([]float64, bs*heads*n*m))
	logits := grid // constant prior: equal logits
	if a.Prior == PriorContextual {
		c := contextualPriorLogitsComposed(b, name, k, heads)               // [B, H, M]
		logits = graph.BroadcastAdd(grid, graph.Reshape(c, bs*heads, m), 1) // over queries
	}
	logits = maskLogits(b, consts+".prior.causal", graph.Reshape(logits, bs, heads, n, m), mask)
	return graph.LogSoftmax(logits, 3)
}

// meanKL is KL̄ of §5 for one layer: the KL of each weight's posterior
// from its prior (§3 or §4), averaged over heads and the (i, j) that the
// mask lets through, real queries only. logPhi and logP are [B, H, N, M].
func (a BayesAttention) meanKL(b *graph.Builder, consts string, logPhi, logP *graph.Node, heads int, mask Mask) *graph.Node {
	s := graph.Shape(logPhi)
	bs, n, m := s[0], s[2], s[3]
	var kl *graph.Node
	if a.Kind == KindBayesLogNormal {
		mu := graph.AddScalar(logPhi, -a.Sigma*a.Sigma/2)
		mu0 := graph.AddScalar(logP, -a.PriorSigma*a.PriorSigma/2)
		kl = klLogNormal(mu, mu0, a.Sigma, a.PriorSigma)
	} else {
		lg, _ := math.Lgamma(1 + 1/a.K)
		floor := make([]float64, graph.Shape(logP)[0]*heads*n*m)
		for i := range floor {
			floor[i] = bayesAlphaFloor
		}
		p := graph.Maximum(graph.Exp(logP), b.Constant(consts+".alpha_floor", s, floor))
		kl = klWeibullGamma(a.K, graph.AddScalar(logPhi, -lg), graph.Scale(p, a.PriorRate), a.PriorRate)
	}
	if mask.Keys == nil && mask.Queries == nil && !mask.Causal {
		return graph.Mean(kl)
	}
	ones := make([]float64, bs*n*m)
	for i := range ones {
		ones[i] = 1
	}
	seen := b.Constant(consts+".kl.seen", []int{bs, n, m}, ones) // [B, N, M]: 1 where query i sees key j
	if mask.Keys != nil {
		seen = graph.BroadcastMul(seen, mask.Keys, 1)
	}
	if mask.Queries != nil { // a padded query sees nothing
		seen = graph.BroadcastMul(seen, mask.Queries, 2)
	}
	seen = graph.Reshape(seen, bs, n*m)
	if mask.Causal {
		lower := causalScores(n)
		for i := range lower {
			lower[i] = 1 - lower[i]/graph.MaskNegInf
		}
		seen = graph.BroadcastMul(seen, b.Constant(consts+".kl.causal", []int{n * m}, lower), 0)
	}
	total := graph.Sum(graph.BroadcastMul(graph.Reshape(kl, bs, heads, n*m), seen, 1))
	return graph.Div(total, graph.Scale(graph.Sum(seen), float64(heads)))
}

// maskLogits adds the masks to logits x [B, H, N, M]: MaskNegInf where a
// key is padding (mask.Keys) or after the query (mask.Causal). The causal
// constant is named causalName.
func maskLogits(b *graph.Builder, causalName string, x *graph.Node, mask Mask) *graph.Node {
	s := graph.Shape(x)
	bs, heads, n, m := s[0], s[1], s[2], s[3]
	if mask.Causal {
		flat := graph.Reshape(x, bs*heads, n*m)
		flat = graph.BroadcastAdd(flat, b.Constant(causalName, []int{n * m}, causalScores(n)), 0)
		x = graph.Reshape(flat, bs, heads, n, m)
	}
	if mask.Keys != nil {
		// (mask − 1)·1e9 is 0 for real keys and −1e9 for padding.
		additive := graph.Scale(graph.AddScalar(mask.Keys, -1), -graph.MaskNegInf)
		folded := graph.BroadcastAdd(graph.Reshape(x, bs, heads*n, m), additive, 1)
		x = graph.Reshape(folded, bs, heads, n, m)
	}
	return x
}

// klWeibullGamma is KL(Weibull(k, λ) ‖ Gamma(α, β)) element-wise
// (layers/BAYES.md §3), with β the rate:
//
//	KL = α (γ/k − log λ − log β) + β Γ(1+1/k) λ + lgamma(α) + log k − γ − 1
//
// logLambda and alpha have the same shape; α must be > 0 everywhere.
func klWeibullGamma(k float64, logLambda, alpha *graph.Node, beta float64) *graph.Node {
	linear := graph.Mul(alpha, graph.AddScalar(graph.Neg(logLambda), eulerGamma/k-math.Log(beta)))
	mean := graph.Scale(graph.Exp(logLambda), beta*math.Gamma(1+1/k))
	kl := graph.Add(graph.Add(linear, mean), graph.Lgamma(alpha))
	return graph.AddScalar(kl, math.Log(k)-eulerGamma-1)
}

// klLogNormal is KL(LogNormal(μ, σ²) ‖ LogNormal(μ₀, σ₀²)) element-wise
// (layers/BAYES.md §4), that of the underlying normals:
//
//	KL = log(σ₀/σ) + (σ² + (μ − μ₀)²) / (2σ₀²) − ½
//
// mu and mu0 have the same shape.
func klLogNormal(mu, mu0 *graph.Node, sigma, sigma0 float64) *graph.Node {
	sq := graph.Scale(graph.Square(graph.Sub(mu, mu0)), 1/(2*sigma0*sigma0))
	return graph.AddScalar(sq, math.Log(sigma0/sigma)+sigma*sigma/(2*sigma0*sigma0)-0.5)
}

// contextualPriorLogitsComposed is the contextual prior network (§2) from
// graph ops, which graph.BayesAttentionSample runs fused: k [B, M, H·d] →
// c [B, H, M] with c_j = w₂·ReLU(W₁ k_j + b₁) + b₂ per head.
func contextualPriorLogitsComposed(b *graph.Builder, name string, k *graph.Node, heads int) *graph.Node {
	ks := graph.Shape(k)
	bs, m := ks[0], ks[1]
	w1, b1, w2, b2 := priorParams(b, name, k, heads)
	kh := headMajor(k, heads) // [H, B·M, d]
	hidden := graph.ReLU(graph.BroadcastAdd(graph.BatchedMatMul(kh, w1, false, false), b1, 1))
	c := graph.Reshape(graph.BatchedMatMul(hidden, w2, false, false), heads, bs*m)
	c = graph.BroadcastAdd(c, b2, 1)
	return graph.Transpose(graph.Reshape(c, heads, bs, m), 1, 0, 2)
}
