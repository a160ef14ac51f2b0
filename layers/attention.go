package layers

import (
	"fmt"
	"math"

	"probformer/graph"
)

// AttentionConfig selects the attention kernel of a layer. Kind "softmax"
// is scaled dot-product attention; later kinds plug in without changing the
// blocks that call them.
type AttentionConfig struct {
	Kind string `yaml:"kind" json:"kind"`
}

// Kernel turns split heads into a readout.
type Kernel interface {
	// Attend returns the readout [B, H, N, dv] and the attention weights
	// [B, H, N, M] of queries q [B, H, N, d] over keys k [B, H, M, d] and
	// values v [B, H, M, dv]. keyMask, 1 where a query may attend, is a
	// key mask [B, M] (0 on padding), a query-key mask [B, N, M] such as
	// CausalMask, or nil (see masks.go). name prefixes any parameter the
	// kernel owns.
	Attend(b *graph.Builder, name string, q, k, v, keyMask *graph.Node) (out, weights *graph.Node)
}

// NewKernel returns the kernel that cfg names.
func NewKernel(cfg AttentionConfig) (Kernel, error) {
	switch cfg.Kind {
	case "", "softmax":
		return ScaledDotProduct{}, nil
	}
	return nil, fmt.Errorf("unknown attention kind %q (want softmax)", cfg.Kind)
}

// ScaledDotProduct is softmax attention (Vaswani et al. 2017):
//
//	out = softmax(q kᵀ / √d + mask) v
//
// with padded keys given weight 0.
type ScaledDotProduct struct{}

// Attend implements Kernel.
func (ScaledDotProduct) Attend(_ *graph.Builder, _ string, q, k, v, keyMask *graph.Node) (out, weights *graph.Node) {
	d := graph.Shape(q)[3]
	scores := graph.Scale(graph.BatchedMatMul(q, k, false, true), 1/math.Sqrt(float64(d)))
	weights = graph.Softmax(MaskScores(scores, keyMask), 3)
	return graph.BatchedMatMul(weights, v, false, false), weights
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
	s := graph.Shape(x)
	w := b.Param(name+".w", []int{s[len(s)-1], dout}, graph.Glorot)
	bias := b.Param(name+".b", []int{dout}, graph.Zeros)
	return graph.Linear(x, w, bias)
}

// layerNorm is LayerNorm over the last axis with learned gain and bias.
func layerNorm(b *graph.Builder, name string, x *graph.Node) *graph.Node {
	s := graph.Shape(x)
	d := s[len(s)-1]
	return graph.LayerNorm(x, b.Param(name+".g", []int{d}, graph.Ones), b.Param(name+".b", []int{d}, graph.Zeros), 1e-5)
}
