package layers

import "github.com/probformer/probformer/graph"

// relativeTables are the relative position representations of one
// self-attention layer (Shaw et al. 2018 §3): learned w^k [2δ+1, d] and
// w^v [2δ+1, dv], row r holding the clipped distance r − δ, shared by the
// heads, and the constant gather [N, 2δ+1, M] that maps each (query n,
// key m) pair to its row: gather[n, r, m] = 1 iff clip(m − n, δ) = r − δ.
type relativeTables struct {
	k, v   *graph.Node
	gather *graph.Node
	n, m   int
	rows   int
}

// newRelativeTables adds the parameters <name>.rel.k and <name>.rel.v and
// the gather constant <consts>.rel for n queries and m keys.
func newRelativeTables(b *graph.Builder, name, consts string, clip, d, dv, n, m int) *relativeTables {
	rows := 2*clip + 1
	return &relativeTables{
		k:      b.Param(name+".rel.k", []int{rows, d}, graph.Glorot),
		v:      b.Param(name+".rel.v", []int{rows, dv}, graph.Glorot),
		gather: b.Constant(consts+".rel", []int{n, rows, m}, relativeGather(clip, n, m)),
		n:      n, m: m, rows: rows,
	}
}

// relativeGather is the one-hot [N, 2δ+1, M] (row-major) of the clipped
// distance m − n of each pair.
func relativeGather(clip, n, m int) []float64 {
	rows := 2*clip + 1
	g := make([]float64, n*rows*m)
	for i := range n {
		for j := range m {
			r := max(min(j-i, clip), -clip) + clip
			g[(i*rows+r)*m+j] = 1
		}
	}
	return g
}

// scores: q̃ [G, N, d] (G = H·B, a(q, k) = q̃ᵀk) → q̃_nᵀ w^k_{m⊟n} [G, N, M].
func (r *relativeTables) scores(qt *graph.Node, g int) *graph.Node {
	d := graph.Shape(qt)[2]
	byRow := graph.MatMul(graph.Reshape(qt, g*r.n, d), graph.Transpose(r.k, 1, 0)) // [G·N, 2δ+1]
	byRow = graph.Transpose(graph.Reshape(byRow, g, r.n, r.rows), 1, 0, 2)         // [N, G, 2δ+1]
	return graph.Transpose(graph.BatchedMatMul(byRow, r.gather, false, false), 1, 0, 2)
}

// values: weights p [B, H, N, M] → Σ_m p_nm w^v_{m⊟n} [B, H, N, dv].
func (r *relativeTables) values(p *graph.Node) *graph.Node {
	s := graph.Shape(p)
	g := s[0] * s[1]
	byKey := graph.Transpose(graph.Reshape(p, g, r.n, r.m), 1, 0, 2)                     // [N, G, M]
	byRow := graph.Transpose(graph.BatchedMatMul(byKey, r.gather, false, true), 1, 0, 2) // [G, N, 2δ+1]
	out := graph.MatMul(graph.Reshape(byRow, g*r.n, r.rows), r.v)                        // [G·N, dv]
	return graph.Reshape(out, s[0], s[1], r.n, graph.Shape(r.v)[1])
}

// additiveKeys: V [H, d, d_a] of the additive score → the relative key
// term V_h w^k_{m⊟n} of every head and (query n, key m) pair, laid out
// [H, N·M·d_a] (row-major over n, m, d_a).
func (r *relativeTables) additiveKeys(v *graph.Node) *graph.Node {
	s := graph.Shape(v)
	h, d, da := s[0], s[1], s[2]
	perHead := graph.Reshape(graph.Transpose(v, 1, 0, 2), d, h*da)              // [d, H·d_a]
	byRow := graph.MatMul(r.k, perHead)                                         // [2δ+1, H·d_a]: V_h w^k_r
	pairs := graph.Reshape(graph.Transpose(r.gather, 0, 2, 1), r.n*r.m, r.rows) // [N·M, 2δ+1] one-hot
	byPair := graph.Reshape(graph.MatMul(pairs, byRow), r.n, r.m, h, da)        // [N, M, H, d_a]
	return graph.Reshape(graph.Transpose(byPair, 2, 0, 1, 3), h, r.n*r.m*da)
}
