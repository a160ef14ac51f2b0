package layers

import (
	"fmt"

	"probformer/graph"
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

// Forward attends from x [B, N, dx] to y [B, M, dy] with keys masked by
// yMask [B, M] or [B, N, M] (nil: no mask; see masks.go) and returns
// [B, N, Dim] and the weights [B, H, N, M].
func (m MultiHeadAttention) Forward(b *graph.Builder, x, y, yMask *graph.Node) (out, weights *graph.Node) {
	if m.Heads <= 0 || m.Dim%m.Heads != 0 {
		panic(fmt.Errorf("%s: width %d does not split into %d heads", m.Name, m.Dim, m.Heads))
	}
	q := splitHeads(dense(b, m.Name+".q", x, m.Dim), m.Heads)
	k := splitHeads(dense(b, m.Name+".k", y, m.Dim), m.Heads)
	v := splitHeads(dense(b, m.Name+".v", y, m.Dim), m.Heads)
	o, w := m.Kernel.Attend(b, m.Name, q, k, v, yMask)
	return dense(b, m.Name+".o", mergeHeads(o), m.Dim), w
}
