package layers

import (
	"fmt"
	"math"

	"probformer/graph"
)

// Kinds of Bayesian attention (layers/BAYES.md): the attention weights
// are random variables, sampled with a reparameterisation.
const (
	KindBayesWeibull   = "bayes-weibull"
	KindBayesLogNormal = "bayes-lognormal"
)

// Priors of Bayesian attention (layers/BAYES.md §2).
const (
	PriorContextual = "contextual" // p = softmax of a small network of the keys
	PriorConstant   = "constant"   // p = 1/M over the real keys (the ablation)
)

// Defaults of the Bayesian attention hyperparameters that a zero
// AttentionConfig field stands for.
const (
	DefaultBayesK          = 10 // Weibull shape k (§3): a sample's coefficient of variation is about 0.12
	DefaultBayesSigma      = 1  // log-normal σ (§4)
	DefaultBayesPriorRate  = 1  // Gamma prior rate β₀ (§3): prior variance p/β₀
	DefaultBayesPriorSigma = 1  // log-normal prior σ₀ (§4)
)

// bayesPriorHidden is the width of the contextual prior network (§2).
const bayesPriorHidden = 10

// bayesAlphaFloor keeps the Gamma prior's shape α = β₀·max(p, floor)
// positive where a key is masked (p = 0), since lgamma has a pole at 0; the
// KL of such entries is left out of the mean.
const bayesAlphaFloor = 1e-8

// eulerGamma is the Euler–Mascheroni constant γ = −ψ(1).
const eulerGamma = 0.5772156649015329

// BayesAttention is Bayesian attention (Fan et al. 2020;
// layers/BAYES.md). Per head, with s_ij = q_i·k_j/√d masked (§1),
//
//	φ_ij = softmax_j s_ij
//	bayes-weibull:   log S_ij = log φ_ij − lgamma(1 + 1/k) + (1/k)·log(−log u_ij),  u ~ U(0, 1)   (§3)
//	bayes-lognormal: log S_ij = log φ_ij − σ²/2 + σ ε_ij,                               ε ~ N(0, 1)   (§4)
//	W_ij = softmax_j log S_ij,   out_i = Σ_j W_ij v_j
//
// so that E[S_ij] = φ_ij. A training graph samples, with the noise a
// graph.Noise input that the trainer draws each step, and records the
// layer's KL̄ (the mean of the KL over heads and unmasked (i, j)) as the
// penalty <name>.kl; an evaluation graph uses the mean W = φ, which is
// softmax attention.
//
// The prior has mean p_j: Gamma(β₀ p_j, β₀) for the Weibull kernel,
// LogNormal(log p_j − σ₀²/2, σ₀²) for the log-normal. The contextual
// prior (§2) is p_j = softmax_j(w₂·ReLU(W₁ k_j + b₁) + b₂) with W₁ [d, 10]
// per head: parameters <name>.prior.w1 [H, d, 10], .b1 [H, 10],
// .w2 [H, 10, 1], .b2 [H]. The constant prior is p_j = 1/M over the real
// keys. Under a causal mask the prior is normalised over the keys each
// query sees.
type BayesAttention struct {
	Kind       string  // KindBayesWeibull or KindBayesLogNormal
	K          float64 // Weibull shape k > 0
	Sigma      float64 // log-normal σ > 0
	Prior      string  // PriorContextual or PriorConstant
	PriorRate  float64 // Gamma prior rate β₀ > 0 (Weibull)
	PriorSigma float64 // log-normal prior σ₀ > 0

	// fixed, when set, replaces the noise input by a constant in every
	// graph, training or not, so that tests can hold the sample fixed.
	fixed *[]float64
}

// newBayesKernel fills in the defaults of cfg's zero fields and checks
// the rest.
func newBayesKernel(cfg AttentionConfig) (BayesAttention, error) {
	if cfg.Score != "" && cfg.Score != ScoreScaledDot {
		return BayesAttention{}, fmt.Errorf("attention score %q needs kind softmax, not %s", cfg.Score, cfg.Kind)
	}
	if cfg.RelativePositions > 0 {
		return BayesAttention{}, fmt.Errorf("relative positions need kind softmax, not %s", cfg.Kind)
	}
	a := BayesAttention{Kind: cfg.Kind, K: cfg.K, Sigma: cfg.Sigma, Prior: cfg.Prior,
		PriorRate: cfg.PriorRate, PriorSigma: cfg.PriorSigma}
	def := func(v *float64, d float64) {
		if *v == 0 {
			*v = d
		}
	}
	def(&a.K, DefaultBayesK)
	def(&a.Sigma, DefaultBayesSigma)
	def(&a.PriorRate, DefaultBayesPriorRate)
	def(&a.PriorSigma, DefaultBayesPriorSigma)
	if a.Prior == "" {
		a.Prior = PriorContextual
	}
	return a, a.check()
}

func (a BayesAttention) check() error {
	positive := func(field string, v float64) error {
		if !(v > 0) || math.IsInf(v, 0) {
			return fmt.Errorf("%s attention: %s must be a finite number > 0, is %v", a.Kind, field, v)
		}
		return nil
	}
	switch a.Kind {
	case KindBayesWeibull:
		if err := positive("k", a.K); err != nil {
			return err
		}
		if err := positive("prior_rate", a.PriorRate); err != nil {
			return err
		}
	case KindBayesLogNormal:
		if err := positive("sigma", a.Sigma); err != nil {
			return err
		}
		if err := positive("prior_sigma", a.PriorSigma); err != nil {
			return err
		}
	default:
		return fmt.Errorf("unknown Bayesian attention kind %q (want %s or %s)", a.Kind, KindBayesWeibull, KindBayesLogNormal)
	}
	if a.Prior != PriorContextual && a.Prior != PriorConstant {
		return fmt.Errorf("%s attention: unknown prior %q (want %s or %s)", a.Kind, a.Prior, PriorContextual, PriorConstant)
	}
	return nil
}

// Attend implements Kernel. In a training graph it samples the weights
// and records the penalty <name>.kl; otherwise it reads out with W = φ.
func (a BayesAttention) Attend(b *graph.Builder, name string, q, k, v *graph.Node, heads int, mask Mask) *graph.Node {
	if err := a.check(); err != nil {
		panic(fmt.Errorf("%s: %w", name, err))
	}
	var noise *graph.Node
	shape := []int{graph.Shape(q)[0], heads, graph.Shape(q)[1], graph.Shape(k)[1]} // [B, H, N, M]
	switch {
	case a.fixed != nil:
		noise = b.Constant(name+".noise", shape, *a.fixed)
	case b.Training():
		dist := graph.UniformNoise
		if a.Kind == KindBayesLogNormal {
			dist = graph.NormalNoise
		}
		noise = b.Noise(name+".noise", dist, shape...)
	}
	out, _, kl := a.attend(b, name, name+".bayes", q, k, v, heads, mask, noise, b.Training())
	if kl != nil {
		b.AddPenalty(name+".kl", kl)
	}
	return out
}

// Weights implements WeightsKernel: the mean weights φ [B, H, N, M].
func (a BayesAttention) Weights(b *graph.Builder, name string, q, k, v *graph.Node, heads int, mask Mask) *graph.Node {
	_, w, _ := a.attend(b, name, name+".weights", q, k, v, heads, mask, nil, false)
	return w
}

// attend returns the readout [B, N, H·dv] and the weights W [B, H, N, M]
// for the noise [B, H, N, M] (u or ε), and with withKL the layer's KL̄ (a
// scalar); without noise, the weights are φ and there is no KL. The prior
// network is only built for the KL: a graph whose loss leaves it out
// cannot have its parameters. consts prefixes the names of the constants
// it adds.
func (a BayesAttention) attend(b *graph.Builder, name, consts string, q, k, v *graph.Node, heads int, mask Mask, noise *graph.Node, withKL bool) (out, weights, kl *graph.Node) {
	qs, ks := graph.Shape(q), graph.Shape(k)
	n, m, d := qs[1], ks[1], qs[2]/heads
	if mask.Causal && n != m {
		panic(fmt.Errorf("%s: causal attention needs as many queries as keys, has %d and %d", name, n, m))
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
		c := contextualPriorLogits(b, name, k, heads)                       // [B, H, M]
		logits = graph.BroadcastAdd(grid, graph.Reshape(c, bs*heads, m), 1) // over queries
	}
	logits = maskLogits(b, consts+".prior.causal", graph.Reshape(logits, bs, heads, n, m), mask)
	return graph.LogSoftmax(logits, 3)
}

// contextualPriorLogits: k [B, M, H·d] → c [B, H, M] with
// c_j = w₂·ReLU(W₁ k_j + b₁) + b₂ per head (§2).
func contextualPriorLogits(b *graph.Builder, name string, k *graph.Node, heads int) *graph.Node {
	ks := graph.Shape(k)
	bs, m, d := ks[0], ks[1], ks[2]/heads
	w1 := b.Param(name+".prior.w1", []int{heads, d, bayesPriorHidden}, graph.Glorot)
	b1 := b.Param(name+".prior.b1", []int{heads, bayesPriorHidden}, graph.Zeros)
	w2 := b.Param(name+".prior.w2", []int{heads, bayesPriorHidden, 1}, graph.Glorot)
	b2 := b.Param(name+".prior.b2", []int{heads}, graph.Zeros)
	kh := headMajor(k, heads) // [H, B·M, d]
	hidden := graph.ReLU(graph.BroadcastAdd(graph.BatchedMatMul(kh, w1, false, false), b1, 1))
	c := graph.Reshape(graph.BatchedMatMul(hidden, w2, false, false), heads, bs*m)
	c = graph.BroadcastAdd(c, b2, 1)
	return graph.Transpose(graph.Reshape(c, heads, bs, m), 1, 0, 2)
}

// meanKL is KL̄ of §5 for one layer: the KL of each weight's posterior
// from its prior (§3 or §4), averaged over heads and the (i, j) that the
// mask lets through. logPhi and logP are [B, H, N, M].
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
	if mask.Keys == nil && !mask.Causal {
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
