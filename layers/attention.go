package layers

import (
	"fmt"
	"math"

	"github.com/probformer/probformer/graph"
)

// AttentionConfig selects the attention kernel of a layer: "softmax" is
// scaled dot-product attention, "em" the unrolled EM inference of em/
// (em/MATH.md), whose iteration counts and options follow Kind, and
// "bayes-weibull" and "bayes-lognormal" Bayesian attention
// (layers/BAYES.md, BayesAttention).
type AttentionConfig struct {
	Kind           string `yaml:"kind" json:"kind"`
	KeyIters       int    `yaml:"key_iters" json:"key_iters"`             // T_k, em/MATH.md §4
	ValueIters     int    `yaml:"value_iters" json:"value_iters"`         // T_v, §3
	PropagateIters int    `yaml:"propagate_iters" json:"propagate_iters"` // T_p, §5
	AdaptAlpha     bool   `yaml:"adapt_alpha" json:"adapt_alpha"`
	AdaptBeta      bool   `yaml:"adapt_beta" json:"adapt_beta"`
	AdaptPi        bool   `yaml:"adapt_pi" json:"adapt_pi"`
	// Prior is em's initial mixing prior, linked (default) or free; for
	// the Bayesian kinds, the prior of the weights, contextual (default)
	// or constant.
	Prior string `yaml:"prior" json:"prior"`
	// K is the Weibull shape of bayes-weibull, Sigma the σ of
	// bayes-lognormal, PriorRate the Gamma prior's rate β₀ (Weibull) and
	// PriorSigma the prior's σ₀ (log-normal); 0 picks the DefaultBayes*
	// value (layers/BAYES.md §3, §4).
	K          float64 `yaml:"k" json:"k"`
	Sigma      float64 `yaml:"sigma" json:"sigma"`
	PriorRate  float64 `yaml:"prior_rate" json:"prior_rate"`
	PriorSigma float64 `yaml:"prior_sigma" json:"prior_sigma"`
	// Score is softmax attention's score function a(q, k): dot,
	// scaled_dot (the default, ""), bilinear or additive (see
	// ScoredAttention).
	Score string `yaml:"score" json:"score"`
	// RelativePositions is the clip distance δ of the relative position
	// representations (Shaw et al. 2018) of encoder and decoder
	// self-attention; 0 turns them off. See SelfKernel.
	RelativePositions int `yaml:"relative_positions" json:"relative_positions"`
	// HeadDiversity is the weight λ of the head-diversity regulariser
	// ‖AAᵀ − I‖² (Lin et al. 2017); when positive, every multi-head
	// attention layer of a training graph records the regulariser as a
	// penalty named <layer>.diversity (see DiversityKernel,
	// HeadDiversity). The weight itself is applied by the objective; it
	// must be ≥ 0.
	HeadDiversity float64 `yaml:"head_diversity" json:"head_diversity"`
	// Dropout is the rate of dropout on the attention weights of softmax
	// scaled_dot attention in training graphs, as nn.MultiheadAttention
	// has it (nn.Transformer uses its dropout there); 0 turns it off.
	Dropout float64 `yaml:"dropout" json:"dropout"`
}

// AttentionFieldError is an AttentionConfig field that Validate refuses:
// Field is its YAML key (as in AttentionConfig's tags) and Want what it
// should be.
type AttentionFieldError struct {
	Field, Want string
}

func (e *AttentionFieldError) Error() string {
	return fmt.Sprintf("attention %s: want %s", e.Field, e.Want)
}

// Validate checks every field of c and returns the first bad one as an
// *AttentionFieldError. An empty Kind is softmax. These are the rules of
// a config's model.attention section: configs calls Validate once per
// config, and names the field in its own terms.
func (c AttentionConfig) Validate() error {
	bayes := c.Kind == KindBayesWeibull || c.Kind == KindBayesLogNormal
	plainScore := c.Score == "" || c.Score == ScoreScaledDot
	softmax := c.Kind == "" || c.Kind == "softmax"
	rules := []struct {
		ok          bool
		field, want string
	}{
		{softmax || c.Kind == "em" || bayes, "kind", "softmax, em, bayes-weibull or bayes-lognormal"},
		{c.KeyIters >= 0, "key_iters", "≥ 0"},
		{c.ValueIters >= 0, "value_iters", "≥ 0"},
		{c.PropagateIters >= 0, "propagate_iters", "≥ 0"},
		{bayes || c.Prior == "" || c.Prior == "linked" || c.Prior == "free", "prior", "linked or free"},
		{!bayes || c.Prior == "" || c.Prior == "contextual" || c.Prior == "constant", "prior", "contextual or constant for Bayesian attention"},
		{c.K >= 0, "k", "≥ 0 (0: the default, 10)"},
		{c.Sigma >= 0, "sigma", "≥ 0 (0: the default, 1)"},
		{c.PriorRate >= 0, "prior_rate", "≥ 0 (0: the default, 1)"},
		{c.PriorSigma >= 0, "prior_sigma", "≥ 0 (0: the default, 1)"},
		{!bayes || plainScore, "score", "scaled_dot for Bayesian attention"},
		{!bayes || c.RelativePositions == 0, "relative_positions", "0 for Bayesian attention"},
		{plainScore || c.Score == ScoreDot || c.Score == ScoreBilinear || c.Score == ScoreAdditive, "score", "dot, scaled_dot, bilinear or additive"},
		{c.RelativePositions >= 0, "relative_positions", "≥ 0 (0: off)"},
		{c.HeadDiversity >= 0 && c.HeadDiversity <= math.MaxFloat64, "head_diversity", "a finite number ≥ 0 (0: off)"},
		{c.Dropout >= 0 && c.Dropout < 1, "dropout", "in [0, 1) (0: off)"},
		{c.Dropout == 0 || (softmax && plainScore && c.RelativePositions == 0), "dropout",
			"0 unless kind softmax with score scaled_dot and no relative positions"},
	}
	for _, r := range rules {
		if !r.ok {
			return &AttentionFieldError{Field: r.field, Want: r.want}
		}
	}
	return nil
}

// Mask says which keys each query may see.
type Mask struct {
	// Keys [B, M]: 1 for a real key, 0 for padding; nil if none is padded.
	Keys *graph.Node
	// Queries [B, N]: 1 for a real query, 0 for padding; nil if none is
	// padded. Softmax attention treats each query alone and may ignore
	// it; kernels that sum over queries (EM's key adaptation, the
	// Bayesian KL mean) leave padded queries out of those sums, so that
	// padding changes nothing for the real elements.
	Queries *graph.Node
	// Causal lets query i see keys j ≤ i only (self-attention of a
	// decoder; N = M).
	Causal bool
}

// Kernel computes the readout of multi-head attention from projected
// queries, keys and values whose heads are not split yet, so that each
// kernel lays out heads as suits it best.
type Kernel interface {
	// Attend: q [B, N, H·d], k [B, M, H·d], v [B, M, H·dv] → [B, N, H·dv].
	// name prefixes any parameter the kernel owns.
	Attend(b *graph.Builder, name string, q, k, v *graph.Node, heads int, mask Mask) *graph.Node
}

// WeightsKernel is a kernel whose attention weights can be read, for
// plots and inspection.
type WeightsKernel interface {
	Kernel
	// Weights: q [B, N, H·d], k [B, M, H·d], v [B, M, H·dv] → [B, H, N, M]
	// (v matters to kernels whose weights depend on the values).
	Weights(b *graph.Builder, name string, q, k, v *graph.Node, heads int, mask Mask) *graph.Node
}

// NewKernel returns the kernel that cfg names. Plain scaled_dot softmax
// attention is the fused ScaledDotProduct; the other scores are
// ScoredAttention. Relative positions are not part of it (see
// SelfAttentionKernel). With cfg.HeadDiversity > 0 the kernel is wrapped
// in a DiversityKernel, which records the head-diversity penalty.
func NewKernel(cfg AttentionConfig) (Kernel, error) {
	kernel, err := newKernel(cfg)
	if err != nil {
		return nil, err
	}
	return withDiversity(cfg, kernel)
}

// newKernel is NewKernel without the diversity wrapper.
func newKernel(cfg AttentionConfig) (Kernel, error) {
	if cfg.RelativePositions < 0 {
		return nil, fmt.Errorf("relative_positions must be ≥ 0, is %d", cfg.RelativePositions)
	}
	if !(cfg.Dropout >= 0 && cfg.Dropout < 1) { // NaN too
		return nil, fmt.Errorf("attention dropout must be in [0, 1), is %g", cfg.Dropout)
	}
	plain := (cfg.Kind == "" || cfg.Kind == "softmax") && (cfg.Score == "" || cfg.Score == ScoreScaledDot) && cfg.RelativePositions == 0
	if cfg.Dropout > 0 && !plain {
		return nil, fmt.Errorf("attention dropout needs softmax scaled_dot attention without relative positions")
	}
	switch cfg.Kind {
	case "", "softmax":
		switch cfg.Score {
		case "", ScoreScaledDot:
			return ScaledDotProduct{Dropout: cfg.Dropout}, nil
		case ScoreDot, ScoreBilinear, ScoreAdditive:
			return ScoredAttention{Score: cfg.Score}, nil
		}
		return nil, fmt.Errorf("unknown attention score %q (want dot, scaled_dot, bilinear or additive)", cfg.Score)
	case "em":
		if cfg.Score != "" && cfg.Score != ScoreScaledDot {
			return nil, fmt.Errorf("attention score %q needs kind softmax, not em", cfg.Score)
		}
		if cfg.RelativePositions > 0 {
			return nil, fmt.Errorf("relative positions need kind softmax, not em")
		}
		return newEMKernel(cfg)
	case KindBayesWeibull, KindBayesLogNormal:
		return newBayesKernel(cfg)
	}
	return nil, fmt.Errorf("unknown attention kind %q (want softmax, em, %s or %s)", cfg.Kind, KindBayesWeibull, KindBayesLogNormal)
}

// ScaledDotProduct is softmax attention (Vaswani et al. 2017 §3.2.1), per
// head h:
//
//	out_h = softmax(q_h k_hᵀ / √d + mask) v_h
//
// with masked keys given weight exactly 0. It runs as graph.Attention, one
// fused op with an analytic backward pass. With Dropout p > 0, training
// graphs drop attention weights, out_h = (P_h ⊙ D_h) v_h with D_h
// Bernoulli(1−p)/(1−p), the mask named <layer>.attn_drop.
type ScaledDotProduct struct {
	// Dropout is the rate p of dropout on the weights; 0 is off.
	Dropout float64
}

// Attend implements Kernel.
func (s ScaledDotProduct) Attend(b *graph.Builder, name string, q, k, v *graph.Node, heads int, mask Mask) *graph.Node {
	return b.AttentionDropout(name+".attn_drop", q, k, v, mask.Keys, heads, mask.Causal, s.Dropout)
}

// projectAttend is dense's query projection of x (name.q) and key and
// value projections of y (name.k, name.v), created in that order, then
// Attend on them, with the projections of one input computed as one
// GEMM (graph.LinearConcat) that the attention op reads in place
// (Builder.AttentionPacked): for self-attention (x is y, without
// residual) the three as one [q k v], else q alone and [k v]. With
// residual, out is q + Attend(…), the residual connection in the same op
// (Builder.ResidualAttentionPacked). The values are those of dense and
// Attend to rounding; the parameters are dense's, so checkpoints are
// unchanged. x [B, N, dx], y [B, M, dy] → out [B, N, dim]. With tile set, x is seeds [k, dx] that every example queries
// with (ISAB's inducing points, PMA's seeds): their projection is the
// same for every example, so it is computed once and then tiled over
// the batch (b.Tile with tile's name) — the values of projecting the
// tiled seeds, at 1/B of that product's cost.
func (s ScaledDotProduct) projectAttend(b *graph.Builder, name string, x, y *graph.Node, dim, heads int, mask Mask, residual bool, tile *tiling) *graph.Node {
	wq, bq := denseParams(b, name+".q", x, dim)
	wk, bk := denseParams(b, name+".k", y, dim)
	wv, bv := denseParams(b, name+".v", y, dim)
	if x == y && !residual && tile == nil {
		qkv := graph.LinearConcat(x, []*graph.Node{wq, wk, wv}, []*graph.Node{bq, bk, bv})
		return b.AttentionPacked(name+".attn_drop", nil, qkv, mask.Keys, heads, mask.Causal, s.Dropout)
	}
	q := graph.Linear(x, wq, bq)
	if tile != nil {
		q = b.Tile(tile.name, q, tile.n)
	}
	kv := graph.LinearConcat(y, []*graph.Node{wk, wv}, []*graph.Node{bk, bv})
	if residual {
		return b.ResidualAttentionPacked(name+".attn_drop", q, kv, mask.Keys, heads, mask.Causal, s.Dropout)
	}
	return b.AttentionPacked(name+".attn_drop", q, kv, mask.Keys, heads, mask.Causal, s.Dropout)
}

// tiling says that queries are seeds tiled over a batch of n, with
// b.Tile's constant called name.
type tiling struct {
	name string
	n    int
}

// Weights implements WeightsKernel. The weights are graph.AttentionWeights,
// which has no gradient: they are for plots and inspection only.
func (ScaledDotProduct) Weights(_ *graph.Builder, _ string, q, k, _ *graph.Node, heads int, mask Mask) *graph.Node {
	return graph.AttentionWeights(q, k, mask.Keys, heads, mask.Causal)
}

// attendWeighted implements weightedAttender for a loss on the weights:
// the fused readout, and the same weights composed from graph ops (as
// ScoredAttention's scaled_dot, equal to 1e-12), which have a gradient.
// A query that sees no key reads out 0 but gets finite, meaningless
// weights.
func (s ScaledDotProduct) attendWeighted(b *graph.Builder, name string, q, k, v *graph.Node, heads int, mask Mask) (out, weights *graph.Node) {
	return s.Attend(b, name, q, k, v, heads, mask), ScoredAttention{Score: ScoreScaledDot}.Weights(b, name, q, k, v, heads, mask)
}

// splitHeads: x [B, N, H·d] → [B, H, N, d].
func splitHeads(x *graph.Node, heads int) *graph.Node {
	s := graph.Shape(x)
	return graph.Transpose(graph.Reshape(x, s[0], s[1], heads, s[2]/heads), 0, 2, 1, 3)
}

// mergeHeads: x [B, H, N, d] → [B, N, H·d].
func mergeHeads(x *graph.Node) *graph.Node {
	s := graph.Shape(x)
	return graph.Reshape(graph.Transpose(x, 0, 2, 1, 3), s[0], s[2], s[1]*s[3])
}

// dense is a learned affine map over the last axis: x W + b, with W
// initialised Glorot-uniform and b zero.
func dense(b *graph.Builder, name string, x *graph.Node, dout int) *graph.Node {
	w, bias := denseParams(b, name, x, dout)
	return graph.Linear(x, w, bias)
}

// denseReLU is max(dense(x), 0) as one fused op, with dense's parameters.
func denseReLU(b *graph.Builder, name string, x *graph.Node, dout int) *graph.Node {
	w, bias := denseParams(b, name, x, dout)
	return graph.LinearReLU(x, w, bias)
}

// denseParams creates dense's name.w [din, dout] and name.b [dout], in
// that order (the order decides their initial values).
func denseParams(b *graph.Builder, name string, x *graph.Node, dout int) (w, bias *graph.Node) {
	s := graph.Shape(x)
	w = b.Param(name+".w", []int{s[len(s)-1], dout}, graph.Glorot)
	return w, b.Param(name+".b", []int{dout}, graph.Zeros)
}

// layerNorm is LayerNorm over the last axis with learned gain and bias.
func layerNorm(b *graph.Builder, name string, x *graph.Node) *graph.Node {
	s := graph.Shape(x)
	d := s[len(s)-1]
	return graph.LayerNorm(x, b.Param(name+".g", []int{d}, graph.Ones), b.Param(name+".b", []int{d}, graph.Zeros), 1e-5)
}

// addLayerNorm is layerNorm(x + Dropout(f)) as one op
// (graph.DropoutAddLayerNorm), with layerNorm's parameters, created
// after f's; the dropout mask is called drop (p 0: no dropout).
func addLayerNorm(b *graph.Builder, name string, x, f *graph.Node, drop string, p float64) *graph.Node {
	s := graph.Shape(x)
	d := s[len(s)-1]
	gamma, beta := b.Param(name+".g", []int{d}, graph.Ones), b.Param(name+".b", []int{d}, graph.Zeros)
	return b.DropoutAddLayerNorm(drop, x, f, p, gamma, beta, 1e-5)
}

// noCausalForm marks kernels that cannot mask by position, such as EM,
// whose adapted memory is shared by all queries.
type noCausalForm interface{ noCausalForm() }

// causalKernel returns k for a causal self-attention, or softmax attention
// when k has no causal form. A DiversityKernel stays one around the
// kernel that replaces its inner kernel.
func causalKernel(k Kernel) Kernel {
	if d, ok := k.(DiversityKernel); ok {
		if inner, ok := causalKernel(d.Inner).(WeightsKernel); ok {
			return DiversityKernel{Inner: inner}
		}
		return d
	}
	if _, ok := k.(noCausalForm); ok {
		return ScaledDotProduct{}
	}
	return k
}
