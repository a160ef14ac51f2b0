package layers

import (
	"fmt"
	"math"

	"github.com/probformer/probformer/graph"
)

// HeadDiversity is the head-diversity regulariser of Lin et al. (2017,
// "A structured self-attentive sentence embedding", §2.2, eq. 8) for
// attention weights [B, H, N, M]:
//
//	P = (1/(B·N)) Σ_{b,n} ‖A_{b,n} A_{b,n}ᵀ − I_H‖²_F
//
// where A_{b,n} [H, M] stacks the H heads' weight rows of query n. The
// off-diagonal entries of A Aᵀ are the overlaps of two heads' rows, the
// diagonal ones their squared norms, which for a probability row are 1
// only when it is one-hot: P pushes heads apart and towards sparse rows.
// It is 0 exactly when, for every query, the heads attend to one key
// each and to different keys (so H ≤ M).
//
// Every query row counts, under a causal mask the first query too, whose
// heads all see one key and so contribute H² − H whatever the
// parameters; only the rows of padded queries are left out when
// queryMask [B, N] (1 real, 0 padding) is given, so that padding changes
// nothing: P = Σ_{b,n real} ‖·‖²_F / (number of real queries). It returns
// a scalar; the identity is the constant <name>.diversity.eye [H, H].
func HeadDiversity(b *graph.Builder, name string, weights, queryMask *graph.Node) *graph.Node {
	s := graph.Shape(weights)
	if len(s) != 4 {
		b.Fail(fmt.Errorf("%s: head diversity needs weights [B, H, N, M], has shape %v", name, s))
	}
	bs, h, n, m := s[0], s[1], s[2], s[3]
	a := graph.Reshape(graph.Transpose(weights, 0, 2, 1, 3), bs*n, h, m) // [B·N, H, M]
	gram := graph.BatchedMatMul(a, a, false, true)                       // [B·N, H, H]: A Aᵀ
	eye := make([]float64, h*h)
	for i := range h {
		eye[i*h+i] = 1
	}
	dev := graph.BroadcastSub(gram, b.Constant(name+".diversity.eye", []int{h, h}, eye), 0)
	if queryMask == nil {
		return graph.Scale(graph.Sum(graph.Square(dev)), 1/float64(bs*n))
	}
	perQuery := graph.Sum(graph.Reshape(graph.Square(dev), bs*n, h*h), 1) // [B·N]
	real := graph.Reshape(queryMask, bs*n)
	return graph.Div(graph.Sum(graph.Mul(perQuery, real)), graph.Sum(real))
}

// DiversityKernel is a kernel that also records the head-diversity
// regulariser of its weights (HeadDiversity) as the penalty
// <name>.diversity, in training graphs only: an evaluation graph is the
// inner kernel's alone. Its readout is the inner kernel's, node for node.
// The penalty is unweighted; the objective multiplies it by λ
// (AttentionConfig.HeadDiversity). NewKernel and SelfAttentionKernel
// return one when λ > 0.
//
// The weights are those of Inner.Weights: for the Bayesian kernels the
// mean weights φ, not the sample that forms a training readout. EM and
// ScoredAttention build readout and weights in one pass; the fused
// ScaledDotProduct, whose Weights have no gradient, is paired with the
// weights of ScoredAttention's scaled_dot, composed from graph ops.
type DiversityKernel struct {
	Inner WeightsKernel
}

// Attend implements Kernel.
func (k DiversityKernel) Attend(b *graph.Builder, name string, q, key, v *graph.Node, heads int, mask Mask) *graph.Node {
	if !b.Training() {
		return k.Inner.Attend(b, name, q, key, v, heads, mask)
	}
	var out, weights *graph.Node
	if both, ok := k.Inner.(weightedAttender); ok {
		out, weights = both.attendWeighted(b, name, q, key, v, heads, mask)
	} else {
		out = k.Inner.Attend(b, name, q, key, v, heads, mask)
		weights = k.Inner.Weights(b, name, q, key, v, heads, mask)
	}
	b.AddPenaltyKind(graph.PenaltyDiversity, name+".diversity", HeadDiversity(b, name, weights, mask.Queries))
	return out
}

// Weights implements WeightsKernel: the inner kernel's weights.
func (k DiversityKernel) Weights(b *graph.Builder, name string, q, key, v *graph.Node, heads int, mask Mask) *graph.Node {
	return k.Inner.Weights(b, name, q, key, v, heads, mask)
}

// weightedAttender is a kernel that builds its readout [B, N, H·dv] and
// weights [B, H, N, M] in one pass, equal to Attend's readout and Weights'
// weights (up to rounding) that have a gradient. EM needs it, since its
// Attend and Weights add equally named constants, so one graph cannot
// hold both; ScaledDotProduct, since graph.AttentionWeights has no
// gradient; ScoredAttention uses it to build its scores once.
type weightedAttender interface {
	attendWeighted(b *graph.Builder, name string, q, k, v *graph.Node, heads int, mask Mask) (out, weights *graph.Node)
}

// withDiversity wraps kernel in a DiversityKernel if cfg.HeadDiversity is
// positive, and checks it.
func withDiversity(cfg AttentionConfig, kernel Kernel) (Kernel, error) {
	lambda := cfg.HeadDiversity
	switch {
	case math.IsNaN(lambda) || math.IsInf(lambda, 0) || lambda < 0:
		return nil, fmt.Errorf("head_diversity must be a finite number ≥ 0, is %v", lambda)
	case lambda == 0:
		return kernel, nil
	}
	wk, ok := kernel.(WeightsKernel)
	if !ok {
		return nil, fmt.Errorf("head_diversity needs the attention weights, which kernel %T does not expose", kernel)
	}
	return DiversityKernel{Inner: wk}, nil
}
