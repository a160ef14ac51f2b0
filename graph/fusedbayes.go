package graph

import (
	"fmt"
	"math"
	"runtime"

	"gorgonia.org/tensor"

	"github.com/probformer/probformer/graph/internal/kernels"
)

// Fused ops of Bayesian attention (layers/BAYES.md). A sample's
// normalised weights are softmax attention with an additive score bias:
// with φ_ij = softmax_j s_ij, log φ_ij differs from s_ij by a constant per
// row, as do the constants −lgamma(1+1/k) (§3) and −σ²/2 (§4), and a
// softmax ignores such constants, so
//
//	W_ij = softmax_j log S_ij = softmax_j (s_ij + b_ij)
//
// with b_ij the noise term alone: (1/k)·log(−log u_ij) for the Weibull
// kernel (WeibullLogNoise), σ·ε_ij for the log-normal one. The sampled
// readout is then BiasedAttention, and its backward pass is softmax
// attention's given the saved sampled weights. The KL penalty (§3–§5) is
// BayesAttentionKL, one op with an analytic backward pass.

// BiasedAttention is Attention with an additive, non-differentiated score
// bias (layers/BAYES.md §3, §4: the noise of a Bayesian attention
// sample), per head h:
//
//	out_h = softmax(q_h k_hᵀ / √d + bias_h + mask) v_h
//
// q: [B, N, H·d], k: [B, M, H·d], v: [B, M, H·dv], keyMask: [B, M] or nil,
// bias: [B, H, N, M] → [B, N, H·dv]. Masked keys keep weight exactly 0
// whatever their bias, a query with no visible key reads out 0, and a
// bias of −∞ at a visible key gives it weight 0. The bias takes no
// gradient; those of q, k and v are Attention's, from the saved weights.
func BiasedAttention(q, k, v, keyMask, bias *Node, heads int, causal bool) *Node {
	a := attentionKernel{heads: heads, causal: causal, masked: keyMask != nil, biased: true, saved: &savedWeights{}}
	return apply(a, append(attentionInputs(q, k, v, keyMask), bias)...)
}

// WeibullLogNoise is the log of a Weibull(k, 1) draw made from a uniform
// one (layers/BAYES.md §3), element-wise, any shape:
//
//	b = (1/k) · log(−log u),   u ∈ (0, 1]
//
// −log(1 − u) is an Exp(1) draw, and so is −log u; the latter keeps a
// float32 u that rounds to 1 harmless: b = −∞, a sample weight of 0,
// where 1 − u = 0 would give +∞ and a NaN softmax. It has no gradient
// (u is noise); k must be > 0.
func WeibullLogNoise(u *Node, k float64) *Node {
	if !(k > 0) || math.IsInf(k, 0) {
		fail("Weibull noise: shape k = %v, want a finite number > 0", k)
	}
	return apply(weibullNoiseKernel{scale: 1 / k}, u)
}

type weibullNoiseKernel struct{ scale float64 }

func (w weibullNoiseKernel) name() string { return fmt.Sprintf("weibull-log-noise(%g)", w.scale) }
func (weibullNoiseKernel) outShape(in []tensor.Shape) (tensor.Shape, error) {
	return in[0].Clone(), nil
}
func (weibullNoiseKernel) constInput(int) bool { return true }
func (w weibullNoiseKernel) do(in []*tensor.Dense, out *tensor.Dense) error {
	switch y := out.Data().(type) {
	case []float32:
		u := in[0].Data().([]float32)
		kernels.SplitRange(len(u), 8, func(lo, hi int) {
			if !kernels.WeibullLogNoise32(u[lo:hi], y[lo:hi], float32(w.scale)) {
				weibullLogNoiseGo(u[lo:hi], y[lo:hi], w.scale)
			}
		})
	case []float64:
		u := in[0].Data().([]float64)
		kernels.SplitRange(len(u), 8, func(lo, hi int) { weibullLogNoiseGo(u[lo:hi], y[lo:hi], w.scale) })
	default:
		return fmt.Errorf("unsupported dtype %v", out.Dtype())
	}
	return nil
}

// weibullLogNoiseGo is WeibullLogNoise's values in Go.
func weibullLogNoiseGo[T float](u, b []T, scale float64) {
	for i, x := range u {
		b[i] = T(scale * math.Log(-math.Log(float64(x))))
	}
}

// BayesPosterior is the family of the attention weights' posterior.
type BayesPosterior int

const (
	// BayesWeibull: S ~ Weibull(k, φ/Γ(1+1/k)), prior Gamma(β₀ p, β₀)
	// (layers/BAYES.md §3).
	BayesWeibull BayesPosterior = iota
	// BayesLogNormal: S ~ LogNormal(log φ − σ²/2, σ²), prior
	// LogNormal(log p − σ₀²/2, σ₀²) (§4).
	BayesLogNormal
)

// BayesKL holds the settings of BayesAttentionKL.
type BayesKL struct {
	Posterior  BayesPosterior
	K          float64 // Weibull shape k > 0
	PriorRate  float64 // Gamma prior rate β₀ > 0 (Weibull)
	Sigma      float64 // log-normal σ > 0
	PriorSigma float64 // log-normal prior σ₀ > 0
	Heads      int
	Causal     bool // query i sees keys j ≤ i only (N = M)
}

// BayesAlphaFloor keeps the Gamma prior's shape α = β₀·max(p, floor)
// positive (lgamma has a pole at 0) where a prior mean underflows.
const BayesAlphaFloor = 1e-8

// eulerGamma is the Euler–Mascheroni constant γ = −ψ(1).
const eulerGamma = 0.5772156649015329

// BayesAttentionKL is a Bayesian attention layer's KL̄ (layers/BAYES.md
// §5): the mean, over heads, real queries and the keys each sees, of the
// KL of each weight's posterior from its prior. Per head, with
// s_ij = q_i·k_j/√d and V_i the keys query i sees (not padding; j ≤ i when
// causal),
//
//	φ_ij = softmax_{j∈V_i} s_ij,   p_ij = softmax_{j∈V_i} c_j   (§1, §2)
//	Weibull (§3):    KL_ij = α_ij(γ/k − log λ_ij − log β₀) + β₀ Γ(1+1/k) λ_ij
//	                         + lgamma(α_ij) + log k − γ − 1,
//	                 λ_ij = φ_ij/Γ(1+1/k),  α_ij = β₀·max(p_ij, BayesAlphaFloor)
//	log-normal (§4): KL_ij = log(σ₀/σ) + (σ² + (μ_ij − μ0_ij)²)/(2σ₀²) − ½,
//	                 μ_ij = log φ_ij − σ²/2,  μ0_ij = log p_ij − σ₀²/2
//	KL̄ = Σ_{h, i real, j∈V_i} KL_ij / (H · Σ_{i real} |V_i|)
//
// q: [B, N, H·d], k: [B, M, H·d], keyMask: [B, M] or nil (no padded key),
// queryMask: [B, N] or nil (no padded query; a padded query is left out of
// both sums, so padding changes nothing for the real ones), priorLogits
// c: [B, H, M], or nil for the constant prior p_ij = 1/|V_i| → a scalar,
// 0 when no query sees a key. The backward pass is analytic, to q, k and
// c; the masks take no gradient. Results do not depend on the core count.
func BayesAttentionKL(q, k, keyMask, queryMask, priorLogits *Node, cfg BayesKL) *Node {
	if err := cfg.check(); err != nil {
		fail("Bayesian attention KL: %v", err)
	}
	kk := bayesKLKernel{cfg: cfg, masked: keyMask != nil, queryMasked: queryMask != nil, contextual: priorLogits != nil}
	in := []*Node{q, k}
	for _, x := range []*Node{keyMask, queryMask, priorLogits} {
		if x != nil {
			in = append(in, x)
		}
	}
	return Sum(apply(kk, in...))
}

func (c BayesKL) check() error {
	positive := func(what string, v float64) error {
		if !(v > 0) || math.IsInf(v, 0) {
			return fmt.Errorf("%s = %v, want a finite number > 0", what, v)
		}
		return nil
	}
	if c.Heads < 1 {
		return fmt.Errorf("%d heads", c.Heads)
	}
	switch c.Posterior {
	case BayesWeibull:
		if err := positive("k", c.K); err != nil {
			return err
		}
		return positive("prior rate", c.PriorRate)
	case BayesLogNormal:
		if err := positive("σ", c.Sigma); err != nil {
			return err
		}
		return positive("prior σ", c.PriorSigma)
	}
	return fmt.Errorf("unknown posterior %d", c.Posterior)
}

// bayesKLKernel is BayesAttentionKL's op: inputs q, k, then the key mask,
// the query mask and the prior logits where it has them; output [1].
type bayesKLKernel struct {
	cfg                             BayesKL
	masked, queryMasked, contextual bool
}

func (a bayesKLKernel) name() string {
	c := a.cfg
	return fmt.Sprintf("bayes-kl(%d,k=%g,rate=%g,σ=%g,σ0=%g,h=%d,causal=%v,masked=%v,qmasked=%v,ctx=%v)",
		c.Posterior, c.K, c.PriorRate, c.Sigma, c.PriorSigma, c.Heads, c.Causal, a.masked, a.queryMasked, a.contextual)
}

// klOperands are the values of a KL node's inputs; absent ones are nil.
type klOperands[T float] struct {
	q, k, keyMask, queryMask, c []T
}

func klOperandsOf[T float](a bayesKLKernel, in []*tensor.Dense) klOperands[T] {
	o := klOperands[T]{q: in[0].Data().([]T), k: in[1].Data().([]T)}
	i := 2
	if a.masked {
		o.keyMask, i = in[i].Data().([]T), i+1
	}
	if a.queryMasked {
		o.queryMask, i = in[i].Data().([]T), i+1
	}
	if a.contextual {
		o.c = in[i].Data().([]T)
	}
	return o
}

// dims checks the input shapes and returns B, N, M and d per head.
func (a bayesKLKernel) dims(in []tensor.Shape) (b, n, m, d int, err error) {
	h := a.cfg.Heads
	q, k := in[0], in[1]
	if len(q) != 3 || len(k) != 3 || q[0] != k[0] || q[2] != k[2] || q[2]%h != 0 {
		return 0, 0, 0, 0, fmt.Errorf("q %v and k %v do not fit %d heads", q, k, h)
	}
	b, n, m, d = q[0], q[1], k[1], q[2]/h
	if a.cfg.Causal && n != m {
		return 0, 0, 0, 0, fmt.Errorf("a causal mask needs as many queries as keys, have %d and %d", n, m)
	}
	i := 2
	for _, want := range []struct {
		on    bool
		what  string
		shape tensor.Shape
	}{{a.masked, "key mask", tensor.Shape{b, m}}, {a.queryMasked, "query mask", tensor.Shape{b, n}},
		{a.contextual, "prior logits", tensor.Shape{b, h, m}}} {
		if !want.on {
			continue
		}
		if i >= len(in) || !in[i].Eq(want.shape) {
			return 0, 0, 0, 0, fmt.Errorf("%s %v, want %v", want.what, in[min(i, len(in)-1)], want.shape)
		}
		i++
	}
	if i != len(in) {
		return 0, 0, 0, 0, fmt.Errorf("%d inputs, want %d", len(in), i)
	}
	return b, n, m, d, nil
}

func (a bayesKLKernel) outShape(in []tensor.Shape) (tensor.Shape, error) {
	if _, _, _, _, err := a.dims(in); err != nil {
		return nil, err
	}
	return tensor.Shape{1}, nil
}

func (a bayesKLKernel) do(in []*tensor.Dense, out *tensor.Dense) error {
	switch o := out.Data().(type) {
	case []float32:
		o[0] = float32(bayesKLRun(a, klOperandsOf[float32](a, in), shapes(in), 0, nil))
	case []float64:
		o[0] = bayesKLRun(a, klOperandsOf[float64](a, in), shapes(in), 0, nil)
	default:
		return fmt.Errorf("unsupported dtype %v", out.Dtype())
	}
	return nil
}

// constInput: the masks take no gradient.
func (a bayesKLKernel) constInput(i int) bool {
	return i >= 2 && !(a.contextual && i == a.priorIndex())
}

// priorIndex is the input index of the prior logits.
func (a bayesKLKernel) priorIndex() int {
	i := 2
	if a.masked {
		i++
	}
	if a.queryMasked {
		i++
	}
	return i
}

// grads packs dq, dk (and dc) from one backward pass and unpacks them.
func (a bayesKLKernel) grads(in []*Node, _, g *Node) []*Node {
	packed := apply(bayesKLGradKernel{a}, append(append([]*Node{}, in...), g)...)
	s := []tensor.Shape{in[0].Shape(), in[1].Shape()}
	if a.contextual {
		s = append(s, in[a.priorIndex()].Shape())
	}
	gs := unpack(packed, s...)
	out := make([]*Node, len(in))
	out[0], out[1] = gs[0], gs[1]
	if a.contextual {
		out[a.priorIndex()] = gs[2]
	}
	return out
}

// bayesKLGradKernel computes the gradients of KL̄ (BayesAttentionKL) from
// its inputs and the upstream gradient G [1], packed as [dq | dk | dc].
// With g = G / (H · Σ_i |V_i|) and, per row i over j ∈ V_i,
//
//	Weibull:    dS_ij = g (φ_ij Σ_l α_il − α_ij)
//	            e_ij  = ∂KL_ij/∂log p_ij = α_ij (γ/k + lgamma(1+1/k) − log β₀ − log φ_ij + ψ(α_ij))
//	                    (0 where the floor holds α)
//	log-normal: δ_ij  = μ_ij − μ0_ij
//	            dS_ij = g/σ₀² (δ_ij − φ_ij Σ_l δ_il),  e_ij = −δ_ij/σ₀²
//	dc_l  = g Σ_i (e_il − p_il Σ_j e_ij)       (the softmax's Jacobian)
//	dq = dS k/√d,  dk = dSᵀ q/√d.
type bayesKLGradKernel struct{ a bayesKLKernel }

func (g bayesKLGradKernel) name() string { return "grad-" + g.a.name() }
func (g bayesKLGradKernel) outShape(in []tensor.Shape) (tensor.Shape, error) {
	n := in[0].TotalSize() + in[1].TotalSize()
	if g.a.contextual {
		n += in[g.a.priorIndex()].TotalSize()
	}
	return tensor.Shape{n}, nil
}
func (g bayesKLGradKernel) do(in []*tensor.Dense, out *tensor.Dense) error {
	ops := in[:len(in)-1]
	switch o := out.Data().(type) {
	case []float32:
		bayesKLRun(g.a, klOperandsOf[float32](g.a, ops), shapes(ops), float64(in[len(in)-1].Data().([]float32)[0]), o)
	case []float64:
		bayesKLRun(g.a, klOperandsOf[float64](g.a, ops), shapes(ops), in[len(in)-1].Data().([]float64)[0], o)
	default:
		return fmt.Errorf("unsupported dtype %v", out.Dtype())
	}
	return nil
}

// klScratch is one worker's buffers for a head.
type klScratch[T float] struct {
	s, ds []T // scores and their gradient [N, M]
	row   []T // a row's exponentials [M]
	// attention.c's per-key coefficients and column sums [M]
	a, b, colsum []T
	// the prior of a set of visible keys [M]: log p, p, α, lgamma(α), ψ(α),
	// and a row's ∂KL/∂log p
	logp, p, alpha, lga, psi, e []float64
	dc                          []float64 // the head's dc [M]
	// BayesAttentionSample's: a head's prior logits, or their gradient
	// [M], the prior network's hidden units [M, R], and attention.c's
	// settings, prior network and parameter gradients of a head (kept
	// here, as cgo would move them to the heap on every call)
	c, u []T
	kc   [7]float64
	net  kernels.PriorNet32
	pg   []float32
}

// klConsts are the per-weight constants of the two KLs.
type klConsts struct {
	a       float64 // Weibull: γ/k + lgamma(1+1/k) − log β₀, the coefficient of α beside −log φ
	c0      float64 // Weibull: log k − γ − 1; log-normal: log(σ₀/σ) + σ²/(2σ₀²) − ½
	shift   float64 // log-normal: δ = log φ − log p + shift, shift = (σ₀² − σ²)/2
	inv2s02 float64 // log-normal: 1/(2σ₀²)
}

func (c BayesKL) consts() klConsts {
	if c.Posterior == BayesWeibull {
		lg, _ := math.Lgamma(1 + 1/c.K)
		return klConsts{a: eulerGamma/c.K + lg - math.Log(c.PriorRate), c0: math.Log(c.K) - eulerGamma - 1}
	}
	s2, s02 := c.Sigma*c.Sigma, c.PriorSigma*c.PriorSigma
	return klConsts{c0: math.Log(c.PriorSigma/c.Sigma) + s2/(2*s02) - 0.5, shift: (s02 - s2) / 2, inv2s02: 1 / (2 * s02)}
}

// bayesKLRun computes KL̄ and returns it; with packed non-nil, it instead
// writes the gradients for the upstream gradient gOut into packed
// ([dq | dk | dc]) and returns 0. Each head's sum lands in its own slot and
// the slots are added in order, so the value does not depend on how the
// heads are spread over cores.
func bayesKLRun[T float](a bayesKLKernel, o klOperands[T], in []tensor.Shape, gOut float64, packed []T) float64 {
	b, n, m, d, _ := a.dims(in)
	h := a.cfg.Heads
	hd := h * d
	scale := 1 / math.Sqrt(float64(d))
	cs := a.cfg.consts()
	count := klCount(a.cfg, o.keyMask, o.queryMask, b, n, m)
	if count == 0 {
		if packed != nil {
			clear(packed)
		}
		return 0
	}
	backward := packed != nil
	var dq, dk, dc []T
	if backward {
		dq, dk = packed[:len(o.q)], packed[len(o.q):len(o.q)+len(o.k)]
		if o.c != nil {
			dc = packed[len(o.q)+len(o.k):]
		}
	}
	g := gOut / float64(count)
	sums := make([]float64, b*h)
	scratch := make([]*klScratch[T], runtime.GOMAXPROCS(0))
	forHeads(b, h, func(w, x int) {
		if scratch[w] == nil {
			f := func() []float64 { return make([]float64, m) }
			scratch[w] = &klScratch[T]{s: make([]T, n*m), ds: make([]T, n*m), row: make([]T, m), a: make([]T, m), b: make([]T, m), colsum: make([]T, m),
				logp: f(), p: f(), alpha: f(), lga: f(), psi: f(), e: f(), dc: f()}
		}
		sc := scratch[w]
		bi, hh := x/h, x%h
		qh, kh := o.q[bi*n*hd+hh*d:], o.k[bi*m*hd+hh*d:]
		var mrow, crow []T
		if o.keyMask != nil {
			mrow = o.keyMask[bi*m : (bi+1)*m]
		}
		if o.c != nil {
			crow = o.c[x*m : (x+1)*m]
		}
		var qrow []T
		if o.queryMask != nil {
			qrow = o.queryMask[bi*n : (bi+1)*n]
		}
		var dqh, dkh []T
		if backward {
			dqh, dkh = dq[bi*n*hd+hh*d:], dk[bi*m*hd+hh*d:]
		}
		if !a.cfg.Causal {
			if v, ok := klHeadC(a.cfg, cs, sc, qh, kh, mrow, qrow, crow, n, m, d, hd, scale, g, dqh, dkh); ok {
				sums[x] = v
				if dc != nil {
					for j, v := range sc.dc {
						dc[x*m+j] = T(v)
					}
				}
				return
			}
		}
		kernels.Gemm(false, true, n, m, d, T(scale), qh, hd, kh, hd, 0, sc.s, m)
		if backward {
			clear(sc.ds)
			clear(sc.dc)
		}
		var sum float64
		priorLim := -1 // the key limit sc's prior was computed for
		for i := range n {
			if o.queryMask != nil && o.queryMask[bi*n+i] == 0 {
				continue
			}
			lim := m
			if a.cfg.Causal {
				lim = i + 1
			}
			if lim != priorLim {
				if klPrior(a.cfg, sc, crow, mrow, lim, termsFor(backward)) == 0 {
					continue
				}
				priorLim = lim
			}
			var ds []T
			if backward {
				ds = sc.ds[i*m : (i+1)*m]
			}
			sum += klRow(a.cfg, cs, sc, mrow, sc.s[i*m:(i+1)*m], lim, g, ds, crow != nil)
		}
		sums[x] = sum
		if !backward {
			return
		}
		kernels.Gemm(false, false, n, d, m, T(scale), sc.ds, m, kh, hd, 0, dqh, hd)
		kernels.Gemm(true, false, m, d, n, T(scale), sc.ds, m, qh, hd, 0, dkh, hd)
		if dc != nil {
			for j, v := range sc.dc {
				dc[x*m+j] = T(v)
			}
		}
	})
	if backward {
		return 0
	}
	var total float64
	for _, s := range sums {
		total += s
	}
	return total / float64(count)
}

// klCount is KL̄'s denominator H · Σ_{b, i real} |V_i|.
func klCount[T float](c BayesKL, keyMask, queryMask []T, b, n, m int) int {
	var count int
	for bi := range b {
		for i := range n {
			if queryMask == nil || queryMask[bi*n+i] != 0 {
				count += visibleCount(keyMask, bi, i, m, c.Causal)
			}
		}
	}
	return count * c.Heads
}

// visibleCount is |V_i|: the keys j < lim that are not padding, with
// lim = i + 1 when causal and M otherwise.
func visibleCount[T float](keyMask []T, bi, i, m int, causal bool) int {
	lim := m
	if causal {
		lim = min(i+1, m)
	}
	if keyMask == nil {
		return lim
	}
	c := 0
	for _, v := range keyMask[bi*m : bi*m+lim] {
		if v != 0 {
			c++
		}
	}
	return c
}

// visible reports whether key j is not padding.
func visible[T float](mrow []T, j int) bool { return mrow == nil || mrow[j] != 0 }

// priorTerms says which functions of α klPrior computes.
type priorTerms int

const (
	priorLgamma  priorTerms = 1 << iota // lgamma(α), for the KL's value
	priorDigamma                        // ψ(α), for its gradient
)

// termsFor is the term a value-only (false) or a backward (true) pass of
// BayesAttentionKL needs.
func termsFor(backward bool) priorTerms {
	if backward {
		return priorDigamma
	}
	return priorLgamma
}

// klPrior fills sc's prior for the visible keys j < lim: log p, p, and for
// the Weibull kernel α and those of lgamma(α) and ψ(α) that terms names.
// It returns the number of visible keys. The constant prior's α is one
// value, whose lgamma and ψ are computed once.
func klPrior[T float](c BayesKL, sc *klScratch[T], crow, mrow []T, lim int, terms priorTerms) int {
	nv := 0
	mx := math.Inf(-1)
	for j := range lim {
		if visible(mrow, j) {
			nv++
			if crow != nil {
				mx = math.Max(mx, float64(crow[j]))
			}
		}
	}
	if nv == 0 {
		return 0
	}
	lz := math.Log(float64(nv)) // constant prior: log p = −log |V|
	if crow != nil {
		var z float64
		for j := range lim {
			if visible(mrow, j) {
				sc.p[j] = math.Exp(float64(crow[j]) - mx)
				z += sc.p[j]
			}
		}
		lz = math.Log(z)
		for j := range lim {
			if visible(mrow, j) {
				sc.p[j] /= z
				sc.logp[j] = float64(crow[j]) - mx - lz
			}
		}
	} else {
		for j := range lim {
			sc.p[j], sc.logp[j] = 1/float64(nv), -lz
		}
	}
	if c.Posterior != BayesWeibull {
		return nv
	}
	// float32 heads take the cheaper lgamma and ψ, accurate to 1e-9
	_, fast := any(crow).([]float32)
	var al0, lg0, psi0 float64 // the constant prior's α, lgamma(α) and ψ(α)
	if crow == nil {
		al0 = c.PriorRate * math.Max(1/float64(nv), BayesAlphaFloor)
		if terms&priorDigamma != 0 {
			psi0 = digamma(al0)
		}
		if terms&priorLgamma != 0 {
			lg0, _ = math.Lgamma(al0)
		}
	}
	for j := range lim {
		if !visible(mrow, j) {
			continue
		}
		if crow == nil {
			sc.alpha[j], sc.lga[j], sc.psi[j] = al0, lg0, psi0
			continue
		}
		al := c.PriorRate * math.Max(sc.p[j], BayesAlphaFloor)
		sc.alpha[j] = al
		switch {
		case terms&priorDigamma != 0 && fast:
			sc.psi[j] = digammaFast(al)
		case terms&priorDigamma != 0:
			sc.psi[j] = digamma(al)
		}
		switch {
		case terms&priorLgamma != 0 && fast:
			sc.lga[j] = lgammaFast(al)
		case terms&priorLgamma != 0:
			sc.lga[j], _ = math.Lgamma(al)
		}
	}
	return nv
}

// klRow returns Σ_{j∈V_i} KL_ij for one query row s (its scores [M]), with
// the prior in sc; with ds non-nil it also writes g·∂KL/∂s_ij into ds and
// adds g·∂KL/∂c_j to sc.dc.
func klRow[T float](c BayesKL, cs klConsts, sc *klScratch[T], mrow, s []T, lim int, g float64, ds []T, contextual bool) float64 {
	// log φ_ij = s_ij − lse; masked keys get exactly 0 from kernels.ExpRow
	mx := T(math.Inf(-1))
	nv := 0
	for j := range lim {
		if visible(mrow, j) {
			nv++
			if s[j] > mx || s[j] != s[j] {
				mx = s[j]
			}
		}
	}
	row := sc.row[:lim]
	for j := range lim {
		row[j] = s[j]
		if !visible(mrow, j) {
			row[j] = mx + MaskNegInf
		}
	}
	z := kernels.ExpRow(row, row, mx)
	lse := float64(mx) + math.Log(z)
	var sum float64
	if c.Posterior == BayesWeibull {
		var sumA, sumAS, sumLg float64
		for j := range lim {
			if visible(mrow, j) {
				sumA += sc.alpha[j]
				sumAS += sc.alpha[j] * float64(s[j])
				sumLg += sc.lga[j]
			}
		}
		// Σ_j [α_j(A − log φ_j) + β₀ φ_j + lgamma α_j + C0], with Σ φ_j = 1
		sum = cs.a*sumA + lse*sumA - sumAS + c.PriorRate + sumLg + float64(nv)*cs.c0
		if ds == nil {
			return sum
		}
		// e_j = ∂KL_ij/∂log p_ij, 0 where the floor holds α
		var sumE float64
		for j := range lim {
			if !visible(mrow, j) {
				continue
			}
			ds[j] = T(g * (float64(row[j])/z*sumA - sc.alpha[j]))
			sc.e[j] = 0
			if sc.p[j] > BayesAlphaFloor {
				sc.e[j] = sc.alpha[j] * (cs.a - (float64(s[j]) - lse) + sc.psi[j])
				sumE += sc.e[j]
			}
		}
		if contextual {
			for j := range lim {
				if visible(mrow, j) {
					sc.dc[j] += g * (sc.e[j] - sc.p[j]*sumE)
				}
			}
		}
		return sum
	}
	// log-normal: δ_j = log φ_j − log p_j + shift
	var sumD, sumD2 float64
	for j := range lim {
		if visible(mrow, j) {
			dl := float64(s[j]) - lse - sc.logp[j] + cs.shift
			sumD += dl
			sumD2 += dl * dl
		}
	}
	sum = float64(nv)*cs.c0 + sumD2*cs.inv2s02
	if ds == nil {
		return sum
	}
	k := 2 * cs.inv2s02 * g // g/σ₀²
	for j := range lim {
		if !visible(mrow, j) {
			continue
		}
		dl := float64(s[j]) - lse - sc.logp[j] + cs.shift
		phi := float64(row[j]) / z
		ds[j] = T(k * (dl - phi*sumD))
		if contextual {
			sc.dc[j] -= k * (dl - sc.p[j]*sumD)
		}
	}
	return sum
}

// klHeadC computes one float32 head without a causal mask in attention.c
// (pf_bayes_kl_head) and reports whether it did: the head's Σ KL_ij, or
// with dq and dk (the head's first rows) its gradients, with dc in sc.dc.
// attention.c returns sums over the rows, from which the prior's terms
// follow per key: for the Weibull kernel, with e_ij = ea_j (A + ψ_j) +
// ea_j (lse_i − s_ij) (ea = α where the floor does not hold it, else 0),
//
//	Σ_i e_il = n_r ea_l (A + ψ_l) + ea_l (Σ_i lse_i − Σ_i s_il),
//
// and for the log-normal, Σ_i δ_il = Σ_i s_il − Σ_i lse_i + n_r (shift −
// log p_l), with n_r the real queries.
func klHeadC[T float](c BayesKL, cs klConsts, sc *klScratch[T], qh, kh, mrow, qrow, crow []T, n, m, d, hd int,
	scale, g float64, dqh, dkh []T) (float64, bool) {
	q32, ok := any(qh).([]float32)
	if !ok {
		return 0, false
	}
	backward := dqh != nil
	terms := termsFor(backward)
	co, ok := klHeadCoefs(c, cs, sc, mrow, qrow, crow, n, m, terms)
	if !ok {
		return 0, false // the Go loop writes the zeros
	}
	var dq32, dk32, col32 []float32
	if backward {
		dq32, dk32, col32 = any(dqh).([]float32), any(dkh).([]float32), any(sc.colsum).([]float32)
	}
	var mr, qr []float32
	if mrow != nil {
		mr = any(mrow).([]float32)
	}
	if qrow != nil {
		qr = any(qrow).([]float32)
	}
	var agg [2]float64
	rows, ok := kernels.KLHead32(q32, any(kh).([]float32), hd, n, m, d, float32(scale), mr, qr, co.kind,
		any(sc.a).([]float32), any(sc.b).([]float32), float32(co.gc*g), dq32, dk32, col32, &agg)
	if !ok {
		return 0, false
	}
	if !backward {
		return co.value(c, cs, rows), true
	}
	if crow != nil {
		klPriorGrad(co, c, cs, sc, mrow, m, g, agg)
	}
	return 0, true
}

// klCoefs are the per-head quantities that attention.c's KL rows take
// (sc.a, sc.b) and that turn its sums into the head's KL and dc.
type klCoefs struct {
	kind                      int     // attention.c's kind: 0 Weibull, 1 log-normal
	gc                        float64 // the factor of dS for a unit gradient: 1, or 1/σ₀² (log-normal)
	nv                        int     // visible keys
	nr                        float64 // real queries
	sumA, sumLg, sumEa, sumEb float64 // Σ α, Σ lgamma α, Σ ea, Σ ea (A + ψ) over the visible keys
}

// klHeadCoefs fills sc's prior (klPrior, with terms) and per-key
// coefficients sc.a, sc.b for attention.c's KL rows of a head without a
// causal mask: for the Weibull kernel a = α and b = ea, with ea = α where
// the floor does not hold α and 0 where it does; for the log-normal
// a = shift − log p. It reports false when no key is visible or no query
// real (the Go loop handles those heads).
func klHeadCoefs[T float](c BayesKL, cs klConsts, sc *klScratch[T], mrow, qrow, crow []T, n, m int, terms priorTerms) (klCoefs, bool) {
	co := klCoefs{gc: 1, nr: float64(n)}
	if qrow != nil {
		nReal := 0
		for _, v := range qrow {
			if v != 0 {
				nReal++
			}
		}
		co.nr = float64(nReal)
	}
	co.nv = klPrior(c, sc, crow, mrow, m, terms)
	if co.nv == 0 || co.nr == 0 {
		return co, false
	}
	if c.Posterior != BayesWeibull {
		co.kind, co.gc = 1, 2*cs.inv2s02
	}
	for j := range m {
		sc.a[j], sc.b[j] = 0, 0
		if !visible(mrow, j) {
			continue
		}
		if c.Posterior != BayesWeibull {
			sc.a[j] = T(cs.shift - sc.logp[j])
			continue
		}
		sc.a[j] = T(sc.alpha[j])
		co.sumA += sc.alpha[j]
		if terms&priorLgamma != 0 {
			co.sumLg += sc.lga[j]
		}
		if terms&priorDigamma != 0 && sc.p[j] > BayesAlphaFloor {
			sc.b[j] = T(sc.alpha[j])
			co.sumEa += sc.alpha[j]
			co.sumEb += sc.alpha[j] * (cs.a + sc.psi[j])
		}
	}
	return co, true
}

// value is a head's Σ KL_ij from attention.c's row sum.
func (co klCoefs) value(c BayesKL, cs klConsts, rows float64) float64 {
	if c.Posterior == BayesWeibull {
		return rows + co.nr*(cs.a*co.sumA+c.PriorRate+co.sumLg+float64(co.nv)*cs.c0)
	}
	return co.nr*float64(co.nv)*cs.c0 + cs.inv2s02*rows
}

// klPriorGrad sets sc.dc to the head's g·∂KL/∂c from attention.c's
// aggregates agg (Σ_i lse_i and its kind's agg[1]) and sc.colsum (see
// klHeadC).
func klPriorGrad[T float](co klCoefs, c BayesKL, cs klConsts, sc *klScratch[T], mrow []T, m int, g float64, agg [2]float64) {
	lsum, nr := agg[0], co.nr
	if c.Posterior == BayesWeibull {
		etot := nr*co.sumEb + lsum*co.sumEa - agg[1]
		for j := range m {
			sc.dc[j] = 0
			if visible(mrow, j) && sc.p[j] > BayesAlphaFloor {
				ea := sc.alpha[j]
				sc.dc[j] = g * (nr*ea*(cs.a+sc.psi[j]) + ea*(lsum-float64(sc.colsum[j])) - sc.p[j]*etot)
			} else if visible(mrow, j) {
				sc.dc[j] = -g * sc.p[j] * etot
			}
		}
		return
	}
	gc := co.gc * g
	for j := range m {
		sc.dc[j] = 0
		if visible(mrow, j) {
			sc.dc[j] = -gc * (float64(sc.colsum[j]) - lsum + nr*float64(sc.a[j]) - sc.p[j]*agg[1])
		}
	}
}

// lgammaFast is log Γ(x) for x > 0 to about 1e-10 absolute, for float32
// heads (math.Lgamma costs several times more): the recurrence moves x to
// z = x + 6, where Stirling's series to z⁻⁷ holds,
//
//	log Γ(x) = (z − ½) log z − z + ½ log 2π + 1/(12z) − 1/(360z³) + 1/(1260z⁵)
//	           − 1/(1680z⁷) − log(x (x+1) … (x+5)).
func lgammaFast(x float64) float64 {
	var shift float64
	if x < 6 {
		shift = math.Log(x * (x + 1) * (x + 2) * (x + 3) * (x + 4) * (x + 5))
		x += 6
	}
	iz := 1 / x
	iz2 := iz * iz
	series := iz * (1.0/12 - iz2*(1.0/360-iz2*(1.0/1260-iz2/1680)))
	return (x-0.5)*math.Log(x) - x + 0.9189385332046728 + series - shift
}

// digammaFast is ψ(x) for x > 0 to about 1e-10 absolute, for float32
// heads: ψ(x) = ψ(x+6) − Σ_{i<6} 1/(x+i), and for z ≥ 6
//
//	ψ(z) ≈ log z − 1/(2z) − 1/(12z²) + 1/(120z⁴) − 1/(252z⁶) + 1/(240z⁸).
func digammaFast(x float64) float64 {
	var shift float64
	if x < 6 {
		// pairwise: 1/a + 1/b = (a + b)/(ab)
		a, b, c := x*(x+1), (x+2)*(x+3), (x+4)*(x+5)
		shift = (2*x+1)/a + (2*x+5)/b + (2*x+9)/c
		x += 6
	}
	iz := 1 / x
	iz2 := iz * iz
	series := iz2 * (1.0/12 - iz2*(1.0/120-iz2*(1.0/252-iz2/240)))
	return math.Log(x) - 0.5*iz - series - shift
}
