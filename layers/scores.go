package layers

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/probformer/probformer/graph"
)

// Score functions a(q, k) of softmax attention (issue 7). The issue writes
// them on a layer's inputs h, h'; here, as in most implementations, they
// act on the projected queries q = W_q h' and keys k = W_k h of one head,
// so W_q and W_k are always there and "dot" differs from "scaled_dot" only
// by the 1/√d:
//
//	dot:        a(q, k) = qᵀk
//	scaled_dot: a(q, k) = qᵀk / √d              (Vaswani et al. 2017 §3.2.1)
//	bilinear:   a(q, k) = qᵀ W k,  W [d, d]      (Luong et al. 2015 "general")
//	additive:   a(q, k) = wᵀ tanh(U q + V k),  U, V [d, d_a], w [d_a]
//	            (Bahdanau et al. 2015), with d_a = d
//
// W, U, V and w are learned per head.
const (
	ScoreDot       = "dot"
	ScoreScaledDot = "scaled_dot"
	ScoreBilinear  = "bilinear"
	ScoreAdditive  = "additive"
)

// ScoredAttention is softmax attention with a configurable score and,
// optionally, the relative position representations of Shaw et al. (2018)
// §3:
//
//	out_n = Σ_m softmax_m(a(q_n, k_m + w^k_{m⊟n}) + mask_nm) (v_m + w^v_{m⊟n})
//
// with m⊟n = max(min(m − n, δ), −δ) and δ = Relative. For the dot-product
// scores (dot, scaled_dot, bilinear) a(q, k + w) = a(q, k) + a(q, w), which
// is how it is computed, without a [N, M, d] key tensor. For additive,
// a(q, k + w) = wᵀ tanh(U q + V k + V w^k_{m⊟n}): the table's rows are
// projected by each head's V and gathered into the [N, M, d_a] grid that
// the additive score builds anyway. Relative = 0 adds nothing: no tables,
// plain attention.
//
// Parameters (d the width of a head): bilinear <name>.score.w [H, d, d];
// additive <name>.score.u, <name>.score.v [H, d, d], <name>.score.w [H, d];
// relative positions <name>.rel.k [2δ+1, d] and <name>.rel.v [2δ+1, dv],
// shared by the heads of a layer as in the paper.
//
// The scores [B, H, N, M] are composed from graph ops and masked with
// (mask − 1)·1e9 and a causal constant, so every score can be masked; a
// query that sees no key at all gets meaningless (finite) weights, where
// the fused ScaledDotProduct reads out 0. NewKernel returns
// ScaledDotProduct, not this, for plain scaled_dot.
type ScoredAttention struct {
	Score    string // one of the Score* names
	Relative int    // clip distance δ of relative positions; 0 turns them off
}

// Attend implements Kernel.
func (s ScoredAttention) Attend(b *graph.Builder, name string, q, k, v *graph.Node, heads int, mask Mask) *graph.Node {
	out, _ := s.attendWeighted(b, name, q, k, v, heads, mask)
	return out
}

// attendWeighted implements weightedAttender: Attend's readout and the
// weights that formed it.
func (s ScoredAttention) attendWeighted(b *graph.Builder, name string, q, k, v *graph.Node, heads int, mask Mask) (out, weights *graph.Node) {
	return s.attend(b, name, name+".score", q, k, v, heads, mask)
}

// Weights implements WeightsKernel. Its constants are named apart from
// Attend's, so that one graph may hold both.
func (s ScoredAttention) Weights(b *graph.Builder, name string, q, k, v *graph.Node, heads int, mask Mask) *graph.Node {
	_, p := s.attend(b, name, name+".weights", q, k, v, heads, mask)
	return p
}

// attend returns the readout [B, N, H·dv] and the weights [B, H, N, M].
// consts prefixes the names of the constants it adds.
func (s ScoredAttention) attend(b *graph.Builder, name, consts string, q, k, v *graph.Node, heads int, mask Mask) (out, weights *graph.Node) {
	qs, ks := graph.Shape(q), graph.Shape(k)
	bs, n, m, d := qs[0], qs[1], ks[1], qs[2]/heads
	if s.Relative < 0 {
		b.Fail(fmt.Errorf("%s: relative position clip %d < 0", name, s.Relative))
	}
	if mask.Causal && n != m {
		b.Fail(fmt.Errorf("%s: causal attention needs as many queries as keys, has %d and %d", name, n, m))
	}
	// Heads first, so that per-head parameters [H, ...] batch with them.
	qh, kh := headMajor(q, heads), headMajor(k, heads) // [H, B·N, d], [H, B·M, d]
	var qt *graph.Node                                 // [H·B, N, d]: q̃ with a(q, k) = q̃ᵀk
	var add *additiveParams
	switch s.Score {
	case ScoreDot:
		qt = graph.Reshape(qh, heads*bs, n, d)
	case ScoreScaledDot:
		qt = graph.Reshape(graph.Scale(qh, 1/math.Sqrt(float64(d))), heads*bs, n, d)
	case ScoreBilinear:
		w := b.Param(name+".score.w", []int{heads, d, d}, scaledIdentity)
		qt = graph.Reshape(graph.BatchedMatMul(qh, w, false, false), heads*bs, n, d)
	case ScoreAdditive:
		add = newAdditiveParams(b, name, heads, d)
	default:
		b.Fail(fmt.Errorf("%s: unknown attention score %q", name, s.Score))
	}
	// The tables come after the score's parameters, which keeps the order
	// in which parameters are created, and so their initial values.
	var rel *relativeTables
	if s.Relative > 0 {
		rel = newRelativeTables(b, name, consts, s.Relative, d, graph.Shape(v)[2]/heads, n, m)
	}
	var scores *graph.Node // [H·B, N, M]
	if add != nil {
		scores = add.scores(b, consts, qh, kh, bs, n, m, rel)
	} else {
		scores = graph.BatchedMatMul(qt, graph.Reshape(kh, heads*bs, m, d), false, true)
		if rel != nil {
			scores = graph.Add(scores, rel.scores(qt, heads*bs))
		}
	}
	// [H·B, N, M] → [B, H, N, M]
	scores = graph.Transpose(graph.Reshape(scores, heads, bs, n, m), 1, 0, 2, 3)
	if mask.Causal {
		flat := graph.Reshape(scores, bs*heads, n*m)
		flat = graph.BroadcastAdd(flat, b.Constant(consts+".causal", []int{n * m}, causalScores(n)), 0)
		scores = graph.Reshape(flat, bs, heads, n, m)
	}
	weights = graph.MaskedSoftmax(scores, mask.Keys)
	read := graph.BatchedMatMul(weights, splitHeads(v, heads), false, false) // [B, H, N, dv]
	if rel != nil {
		read = graph.Add(read, rel.values(weights))
	}
	return mergeHeads(read), weights
}

// headMajor: x [B, N, H·d] → [H, B·N, d].
func headMajor(x *graph.Node, heads int) *graph.Node {
	s := graph.Shape(x)
	t := graph.Transpose(graph.Reshape(x, s[0], s[1], heads, s[2]/heads), 2, 0, 1, 3)
	return graph.Reshape(t, heads, s[0]*s[1], s[2]/heads)
}

// additiveParams are the per-head parameters of the additive score:
// U, V [H, d, d_a] and w [H, d_a], with d_a = d.
type additiveParams struct {
	u, v, w *graph.Node
}

func newAdditiveParams(b *graph.Builder, name string, heads, d int) *additiveParams {
	da := d
	return &additiveParams{
		u: b.Param(name+".score.u", []int{heads, d, da}, graph.Glorot),
		v: b.Param(name+".score.v", []int{heads, d, da}, graph.Glorot),
		w: b.Param(name+".score.w", []int{heads, da}, graph.Glorot),
	}
}

// scores: qh [H, B·N, d], kh [H, B·M, d] → [H·B, N, M] with entries
// wᵀ tanh(U q_n + V k_m), or with relative positions (rel not nil)
// wᵀ tanh(U q_n + V (k_m + w^k_{m⊟n})) = wᵀ tanh(U q_n + V k_m + V w^k_{m⊟n}).
// The sum over all (n, m) pairs is built by broadcasts over axis 1 of 3-D
// folds (Gorgonia refuses middle axes).
func (a *additiveParams) scores(b *graph.Builder, consts string, qh, kh *graph.Node, bs, n, m int, rel *relativeTables) *graph.Node {
	h, da := graph.Shape(a.w)[0], graph.Shape(a.w)[1]
	uq := graph.Reshape(graph.BatchedMatMul(qh, a.u, false, false), h*bs*n, da) // U q
	vk := graph.Reshape(graph.BatchedMatMul(kh, a.v, false, false), h*bs, m*da) // V k
	grid := b.Constant(consts+".grid", []int{h * bs * n, m, da}, make([]float64, h*bs*n*m*da))
	sum := graph.Reshape(graph.BroadcastAdd(grid, uq, 1), h*bs, n, m*da)
	sum = graph.BroadcastAdd(sum, vk, 1) // [H·B, N, M·d_a]: U q_n + V k_m
	if rel != nil {
		// + V w^k_{m⊟n}, the same for every example.
		flat := graph.Reshape(sum, h, bs, n*m*da)
		sum = graph.BroadcastAdd(flat, rel.additiveKeys(a.v), 1)
	}
	t := graph.Reshape(graph.Tanh(sum), h, bs*n*m, da)
	return graph.Reshape(graph.BatchedMatMul(t, graph.Reshape(a.w, h, da, 1), false, false), h*bs, n, m)
}

// scaledIdentity initialises each head's bilinear W [H, d, d] to I/√d, so
// that a bilinear layer starts out as scaled dot-product attention.
func scaledIdentity(_ *rand.Rand, shape []int) []float64 {
	h, d := shape[0], shape[1]
	v := make([]float64, h*d*d)
	for i := range h {
		for j := range d {
			v[i*d*d+j*d+j] = 1 / math.Sqrt(float64(d))
		}
	}
	return v
}

// causalScores is the additive causal mask [N, N] (row-major): 0 where key
// m ≤ query n, MaskNegInf after.
func causalScores(n int) []float64 {
	c := make([]float64, n*n)
	for i := range n {
		for j := i + 1; j < n; j++ {
			c[i*n+j] = graph.MaskNegInf
		}
	}
	return c
}

// SelfAttentionKernel returns the kernel of the encoder's and decoder's
// self-attention for cfg: NewKernel's, or with cfg.RelativePositions = δ > 0
// a ScoredAttention with relative positions and cfg's score, wrapped in a
// DiversityKernel as NewKernel's when cfg.HeadDiversity > 0.
// Cross-attention has no relative positions and uses NewKernel's kernel.
func SelfAttentionKernel(cfg AttentionConfig) (Kernel, error) {
	kernel, err := newKernel(cfg)
	if err != nil {
		return nil, err
	}
	if cfg.RelativePositions > 0 {
		score := cfg.Score
		if score == "" {
			score = ScoreScaledDot
		}
		kernel = ScoredAttention{Score: score, Relative: cfg.RelativePositions}
	}
	return withDiversity(cfg, kernel)
}
