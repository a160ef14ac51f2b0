package layers

import (
	"fmt"

	"github.com/probformer/probformer/graph"
)

// MultiHeadAttention is multi-head attention with an output projection
// (Vaswani et al. 2017 §3.2.2):
//
//	MultiHead(X, Y) = Concat_h(Attend(X W_q^h, Y W_k^h, Y W_v^h)) W_o
//
// Parameters: name.q, name.k, name.v, name.o (each .w and .b).
type MultiHeadAttention struct {
	Name   string
	Dim    int // model width, split evenly over Heads
	Heads  int
	Kernel Kernel
}

// Forward attends from x [B, N, dx] to y [B, M, dy] under mask and
// returns [B, N, Dim]. mask.Keys [B, M] masks y's padding and
// mask.Queries [B, N] x's (see Mask); rows of padded queries are
// computed but meaningless.
func (m MultiHeadAttention) Forward(b *graph.Builder, x, y *graph.Node, mask Mask) *graph.Node {
	m.check(b)
	if s, ok := m.Kernel.(ScaledDotProduct); ok {
		// the projections fused and read in place by the attention op
		return dense(b, m.Name+".o", s.projectAttend(b, m.Name, x, y, m.Dim, m.Heads, mask, false, nil), m.Dim)
	}
	q := dense(b, m.Name+".q", x, m.Dim)
	k := dense(b, m.Name+".k", y, m.Dim)
	v := dense(b, m.Name+".v", y, m.Dim)
	return dense(b, m.Name+".o", m.Kernel.Attend(b, m.Name, q, k, v, m.Heads, mask), m.Dim)
}

// Weights returns the attention weights [B, H, N, M] of Forward with the
// same arguments, if the kernel exposes them (nil otherwise). The
// projections are the same nodes as Forward's.
func (m MultiHeadAttention) Weights(b *graph.Builder, x, y *graph.Node, mask Mask) *graph.Node {
	m.check(b)
	wk, ok := m.Kernel.(WeightsKernel)
	if !ok {
		return nil
	}
	q, k, v := dense(b, m.Name+".q", x, m.Dim), dense(b, m.Name+".k", y, m.Dim), dense(b, m.Name+".v", y, m.Dim)
	return wk.Weights(b, m.Name, q, k, v, m.Heads, mask)
}

func (m MultiHeadAttention) check(b *graph.Builder) {
	if m.Heads <= 0 || m.Dim%m.Heads != 0 {
		b.Fail(fmt.Errorf("%s: width %d does not split into %d heads", m.Name, m.Dim, m.Heads))
	}
}
