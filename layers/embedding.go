package layers

import (
	"math"

	"github.com/probformer/probformer/graph"
)

// TokenEmbedding maps token ids to vectors scaled by √Dim (Vaswani et al.
// 2017 §3.4):
//
//	out[b, t] = √Dim · E[ids[b, t]]
//
// The table E [Vocab, Dim] (parameter name.table) starts N(0, 1/Dim), as
// in fairseq, so that the scaled embeddings have unit variance, the scale
// of the positional encoding added to them.
type TokenEmbedding struct {
	Name  string
	Vocab int
	Dim   int
}

// Forward: ids [B, T] (an index node) → [B, T, Dim].
func (e TokenEmbedding) Forward(b *graph.Builder, ids *graph.Node) *graph.Node {
	scale := math.Sqrt(float64(e.Dim))
	table := b.Param(e.Name+".table", []int{e.Vocab, e.Dim}, graph.Normal(1/scale))
	return graph.Scale(graph.Embedding(table, ids), scale)
}

// SinusoidalEncoding returns the positional encoding of positions 0..n−1
// in width d (Vaswani et al. 2017 §3.5), row-major [n, d]:
//
//	PE(pos, 2i)   = sin(pos / 10000^(2i/d))
//	PE(pos, 2i+1) = cos(pos / 10000^(2i/d))
func SinusoidalEncoding(n, d int) []float64 {
	pe := make([]float64, n*d)
	for pos := range n {
		for j := range d {
			angle := float64(pos) / math.Pow(10000, float64(j-j%2)/float64(d))
			if j%2 == 0 {
				pe[pos*d+j] = math.Sin(angle)
			} else {
				pe[pos*d+j] = math.Cos(angle)
			}
		}
	}
	return pe
}

// PositionalEncoding adds the fixed sinusoidal encoding to a sequence of
// vectors: out[b, t] = x[b, t] + PE(t). The encoding is a constant named
// Name, so it has no parameters.
type PositionalEncoding struct {
	Name string
}

// Forward: x [B, T, d] → [B, T, d].
func (p PositionalEncoding) Forward(b *graph.Builder, x *graph.Node) *graph.Node {
	s := graph.Shape(x)
	pe := b.Constant(p.Name, []int{s[1], s[2]}, SinusoidalEncoding(s[1], s[2]))
	return graph.BroadcastAdd(x, pe, 0)
}
