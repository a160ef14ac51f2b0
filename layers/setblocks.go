package layers

import (
	"fmt"

	"github.com/probformer/probformer/graph"
)

// MAB is the Multihead Attention Block of Set Transformer (Lee et al. 2019,
// eq. 6–7), as in the authors' code:
//
//	Q' = X W_q,  H = LN(Q' + MultiHead(Q', Y W_k, Y W_v))
//	MAB(X, Y) = LN(H + ReLU(H W_o))
//
// with scaling 1/√d per head and no projection after the heads (the
// residual needs Q' and the heads' concatenation in the same space).
// Parameters: name.q, name.k, name.v, name.o, and with LayerNorm name.ln0,
// name.ln1.
type MAB struct {
	Name      string
	Dim       int
	Heads     int
	LayerNorm bool
	Kernel    Kernel
}

// Forward: x [B, N, dx], xMask [B, N] or nil, y [B, M, dy], yMask [B, M]
// or nil → [B, N, Dim]. The masks hold 1 for a real element and 0 for
// padding. yMask hides padded keys; xMask is the kernel's query mask,
// which kernels that sum over queries (EM's key adaptation, the Bayesian
// KL) need so that padded rows of x change nothing for the real ones.
// Rows of padded queries are computed but meaningless.
func (m MAB) Forward(b *graph.Builder, x, xMask, y, yMask *graph.Node) *graph.Node {
	return m.forward(b, x, xMask, y, yMask, nil)
}

// forwardTiled is Forward with x = b.Tile(tile, seeds, batch) and no
// query mask: seeds [k, dx] (inducing points, PMA's seeds) query every
// example. The seeds' query projection, the same for every example, is
// computed once and tiled: the values of projecting the tiled seeds, at
// 1/batch of that product's cost, but the projection's weights take
// their gradient summed over the batch first (another order of the
// same sums).
func (m MAB) forwardTiled(b *graph.Builder, tile string, seeds *graph.Node, batch int, y, yMask *graph.Node) *graph.Node {
	return m.forward(b, seeds, nil, y, yMask, &tiling{name: tile, n: batch})
}

// forward is Forward, with x the seeds of forwardTiled when tile is set.
func (m MAB) forward(b *graph.Builder, x, xMask, y, yMask *graph.Node, tile *tiling) *graph.Node {
	if m.Heads <= 0 || m.Dim%m.Heads != 0 {
		b.Fail(fmt.Errorf("%s: width %d does not split into %d heads", m.Name, m.Dim, m.Heads))
	}
	mask := Mask{Keys: yMask, Queries: xMask}
	var h *graph.Node
	if p, ok := m.Kernel.(projector); ok {
		// the key and value projections fused and read in place, the
		// residual connection in the attention op
		h = p.projectAttend(b, m.Name, x, y, m.Dim, m.Heads, mask, true, tile)
		if m.LayerNorm {
			h = layerNorm(b, m.Name+".ln0", h)
		}
	} else {
		qp := dense(b, m.Name+".q", x, m.Dim)
		if tile != nil {
			qp = b.Tile(tile.name, qp, tile.n)
		}
		k := dense(b, m.Name+".k", y, m.Dim)
		v := dense(b, m.Name+".v", y, m.Dim)
		h = m.residual(b, m.Name+".ln0", qp, m.Kernel.Attend(b, m.Name, qp, k, v, m.Heads, mask))
	}
	return m.residual(b, m.Name+".ln1", h, denseReLU(b, m.Name+".o", h, m.Dim))
}

// projector is a kernel that makes its own projections and residual
// connection, fused with its attention op (ScaledDotProduct, EMKernel):
// projectAttend's parameters are dense's name.q, name.k and name.v, in
// that order, so checkpoints do not depend on which path built a block.
type projector interface {
	projectAttend(b *graph.Builder, name string, x, y *graph.Node, dim, heads int, mask Mask, residual bool, tile *tiling) *graph.Node
}

// residual is x + f, then with LayerNorm the layer norm ln of it, as one
// op (graph.AddLayerNorm).
func (m MAB) residual(b *graph.Builder, ln string, x, f *graph.Node) *graph.Node {
	if !m.LayerNorm {
		return graph.Add(x, f)
	}
	return addLayerNorm(b, ln, x, f, "", 0)
}

// SAB is the Set Attention Block: SAB(X) = MAB(X, X). It is permutation
// equivariant. The set's mask is both the query and the key mask.
type SAB struct{ MAB MAB }

// Forward: x [B, N, dx], mask [B, N] or nil → [B, N, Dim].
func (s SAB) Forward(b *graph.Builder, x, mask *graph.Node) *graph.Node {
	return s.MAB.Forward(b, x, mask, x, mask)
}

// ISAB is the Induced Set Attention Block: with m learned inducing points
// I [m, Dim],
//
//	ISAB(X) = MAB₁(X, H),  H = MAB₀(I, X)
//
// costs O(N·m) instead of O(N²). In MAB₀ the inducing points query the
// set (no query mask, the set's key mask); in MAB₁ the set queries H
// (the set's query mask, no key mask). Parameters: name.inducing,
// name.mab0, name.mab1.
type ISAB struct {
	Name     string
	Inducing int
	MAB      MAB // Dim, Heads, LayerNorm and Kernel of both inner blocks
}

// Forward: x [B, N, dx], mask [B, N] or nil → [B, N, Dim].
func (s ISAB) Forward(b *graph.Builder, x, mask *graph.Node) *graph.Node {
	batch := graph.Shape(x)[0]
	ind := b.Param(s.Name+".inducing", []int{s.Inducing, s.MAB.Dim}, graph.Glorot)
	m0, m1 := s.MAB, s.MAB
	m0.Name, m1.Name = s.Name+".mab0", s.Name+".mab1"
	h := m0.forwardTiled(b, s.Name+".tile", ind, batch, x, mask)
	return m1.Forward(b, x, mask, h, nil)
}

// PMA is Pooling by Multihead Attention: with k learned seed vectors
// S [k, Dim], PMA(X) = MAB(S, X). It is permutation invariant. The seeds
// are queries with no mask; the set's mask masks the keys.
// Parameters: name.seeds, name.mab.
type PMA struct {
	Name  string
	Seeds int
	MAB   MAB
}

// Forward: x [B, N, dx], mask [B, N] or nil → [B, Seeds, Dim].
func (p PMA) Forward(b *graph.Builder, x, mask *graph.Node) *graph.Node {
	batch := graph.Shape(x)[0]
	seeds := b.Param(p.Name+".seeds", []int{p.Seeds, p.MAB.Dim}, graph.Glorot)
	m := p.MAB
	m.Name = p.Name + ".mab"
	return m.forwardTiled(b, p.Name+".tile", seeds, batch, x, mask)
}
