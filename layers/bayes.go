package layers

import (
	"fmt"
	"math"

	"github.com/probformer/probformer/graph"
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
// KL of such entries is left out of the mean. It is the fused ops' floor.
const bayesAlphaFloor = graph.BayesAlphaFloor

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
// layer's KL̄ (§5: the mean of the KL over heads, real queries and the
// keys each sees) as the penalty <name>.kl; an evaluation graph uses the
// mean W = φ, which is softmax attention (graph.Attention). Padded
// queries (Mask.Queries) are left out of KL̄, so padding a set changes
// nothing for its real elements.
//
// The layer runs on fused ops with analytic backward passes (see attend):
// in a training graph the sample, the contextual prior network and the KL
// are one op (graph.BayesAttentionSample), which computes the scores once
// for all three and shares the sample's dq/dk products with the KL; a
// sample without its KL is softmax attention with the noise term as a
// score bias (graph.BiasedAttention). attendComposed (bayes_reference.go)
// builds the same from generic graph ops; the tests hold the two equal to
// 1e-9.
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

// Attend implements Kernel: q [B, N, H·d], k [B, M, H·d], v [B, M, H·dv]
// → [B, N, H·dv]. In a training graph it samples the weights and records
// the penalty <name>.kl; otherwise it reads out with W = φ.
func (a BayesAttention) Attend(b *graph.Builder, name string, q, k, v *graph.Node, heads int, mask Mask) *graph.Node {
	if err := a.check(); err != nil {
		b.Fail(fmt.Errorf("%s: %w", name, err))
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
	out, kl := a.attend(b, name, q, k, v, heads, mask, noise, b.Training())
	if kl != nil {
		b.AddPenaltyKind(graph.PenaltyKL, name+".kl", kl)
	}
	return out
}

// Weights implements WeightsKernel: q [B, N, H·d], k [B, M, H·d] → the
// mean weights φ [B, H, N, M], composed from graph ops so that they have a
// gradient (the head-diversity penalty trains through them).
func (a BayesAttention) Weights(b *graph.Builder, name string, q, k, v *graph.Node, heads int, mask Mask) *graph.Node {
	_, w, _ := a.attendComposed(b, name, name+".weights", q, k, v, heads, mask, nil, false)
	return w
}

// attend returns the readout [B, N, H·dv] for the noise [B, H, N, M] (u or
// ε), and with withKL the layer's KL̄ (a scalar); without noise the weights
// are φ and there is no KL. It is attendComposed's computation, fused
// (graph/fusedbayessample.go, graph/fusedbayes.go): with the noise term
// alone as a score bias,
//
//	b_ij = (1/k)·log(−log u_ij)  (Weibull, §3),   b_ij = σ ε_ij  (log-normal, §4)
//
// W_ij = softmax_j log S_ij = softmax_j (s_ij + b_ij), since log φ_ij − s_ij
// and the constants −lgamma(1+1/k), −σ²/2 are the same for every key of a
// row and a softmax ignores them. So a sample with its KL̄ (§5) and the
// contextual prior network (§2) is graph.BayesAttentionSample, fed the
// noise itself (it computes b); a sample without the KL is
// graph.BiasedAttention, and the mean readout graph.Attention, each one op
// with an analytic backward pass. The KL leaves padded queries
// (mask.Queries) out of its mean. The prior network is only built for the
// KL: a graph whose loss leaves it out cannot have its parameters.
func (a BayesAttention) attend(b *graph.Builder, name string, q, k, v *graph.Node, heads int, mask Mask, noise *graph.Node, withKL bool) (out, kl *graph.Node) {
	qs, ks := graph.Shape(q), graph.Shape(k)
	if mask.Causal && qs[1] != ks[1] {
		b.Fail(fmt.Errorf("%s: causal attention needs as many queries as keys, has %d and %d", name, qs[1], ks[1]))
	}
	if noise == nil {
		return graph.Attention(q, k, v, mask.Keys, heads, mask.Causal), nil
	}
	if !withKL {
		return graph.BiasedAttention(q, k, v, mask.Keys, a.noiseBias(noise), heads, mask.Causal), nil
	}
	var prior *graph.BayesPriorNet // nil: the constant prior
	if a.Prior == PriorContextual {
		w1, b1, w2, b2 := priorParams(b, name, k, heads)
		prior = &graph.BayesPriorNet{W1: w1, B1: b1, W2: w2, B2: b2}
	}
	return graph.BayesAttentionSample(q, k, v, mask.Keys, mask.Queries, noise, prior, a.klConfig(heads, mask.Causal))
}

// noiseBias is the score bias b [B, H, N, M] of a sample from the noise
// [B, H, N, M]: (1/k)·log(−log u) for the Weibull kernel (§3), σ·ε for the
// log-normal (§4). −log(1 − u) is the Exp(1) draw of §3; −log u has the
// same distribution and keeps a float32 u that rounds to 1 harmless (a
// weight of 0, where 1 − u = 0 would give a NaN softmax).
func (a BayesAttention) noiseBias(noise *graph.Node) *graph.Node {
	if a.Kind == KindBayesLogNormal {
		if a.Sigma == 1 { // the default: ε itself, without a pass over it
			return noise
		}
		return graph.Scale(noise, a.Sigma)
	}
	return graph.WeibullLogNoise(noise, a.K)
}

// klConfig is the fused ops' view of a.
func (a BayesAttention) klConfig(heads int, causal bool) graph.BayesKL {
	post := graph.BayesWeibull
	if a.Kind == KindBayesLogNormal {
		post = graph.BayesLogNormal
	}
	return graph.BayesKL{Posterior: post, K: a.K, PriorRate: a.PriorRate, Sigma: a.Sigma, PriorSigma: a.PriorSigma,
		Heads: heads, Causal: causal}
}

// priorParams creates the contextual prior's parameters <name>.prior.w1
// [H, d, 10], .b1 [H, 10], .w2 [H, 10, 1], .b2 [H], in that order (the
// order decides their initial values, and checkpoints hold these names
// and shapes).
func priorParams(b *graph.Builder, name string, k *graph.Node, heads int) (w1, b1, w2, b2 *graph.Node) {
	d := graph.Shape(k)[2] / heads
	w1 = b.Param(name+".prior.w1", []int{heads, d, bayesPriorHidden}, graph.Glorot)
	b1 = b.Param(name+".prior.b1", []int{heads, bayesPriorHidden}, graph.Zeros)
	w2 = b.Param(name+".prior.w2", []int{heads, bayesPriorHidden, 1}, graph.Glorot)
	b2 = b.Param(name+".prior.b2", []int{heads}, graph.Zeros)
	return w1, b1, w2, b2
}
