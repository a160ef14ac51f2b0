package graph

// AttentionDropout is Attention with dropout on the attention weights, as
// PyTorch's nn.MultiheadAttention applies it (its dropout argument:
// "Dropout probability on attn_output_weights"; nn.Transformer passes its
// dropout, 0.1 by default), per head h:
//
//	P_h = softmax(q_h k_hᵀ / √d + mask),   out_h = (P_h ⊙ D_h) v_h
//
// q: [B, N, H·d], k: [B, M, H·d], v: [B, M, H·dv], keyMask: [B, M] or nil
// → [B, N, H·dv]. D: [B, H, N, M] is a dropout mask input called name,
// holding Bernoulli(1−p)/(1−p) values that Program.DrawDropout draws from
// the run's generator before each run, as for Builder.Dropout. Masked
// keys keep weight exactly 0, and a query with no visible key still reads
// out 0. In an evaluation graph, or with p = 0, it is exactly
// Attention(q, k, v, keyMask, heads, causal).
func (b *Builder) AttentionDropout(name string, q, k, v, keyMask *Node, heads int, causal bool, p float64) *Node {
	if !(p >= 0 && p < 1) { // NaN too
		fail("attention dropout %s: p = %g, want in [0, 1)", name, p)
	}
	if !b.train || p == 0 {
		return Attention(q, k, v, keyMask, heads, causal)
	}
	qs, ks := Shape(q), Shape(k)
	if len(qs) != 3 || len(ks) != 3 || heads < 1 {
		fail("attention dropout %s: q %v, k %v and %d heads, want 3-D q and k and at least 1 head", name, qs, ks, heads)
	}
	drop := b.Input(name, qs[0], heads, qs[1], ks[1])
	b.dropouts = append(b.dropouts, dropoutMask{name: name, p: p})
	return attentionDropped(q, k, v, keyMask, drop, heads, causal)
}

// attentionDropped is Attention with the weights multiplied by drop
// [B, H, N, M] before the readout: out_h = (P_h ⊙ D_h) v_h. drop takes no
// gradient.
func attentionDropped(q, k, v, keyMask, drop *Node, heads int, causal bool) *Node {
	a := attentionKernel{heads: heads, causal: causal, masked: keyMask != nil, dropout: true, saved: &savedWeights{}}
	return apply(a, append(attentionInputs(q, k, v, keyMask), drop)...)
}

// AttentionPacked is AttentionDropout on packed projections, as
// LinearConcat makes them, read as strided heads without a copy: with q
// given, q [B, N, H·d] and kv [B, M, H·d + H·dv] holding k then v; with q
// nil, kv [B, N, 3·H·d] holding q, k and v (self-attention). The result
// [B, N, H·dv] is AttentionDropout's on the unpacked q, k and v, and the
// backward pass writes the gradient of kv in kv's layout: of [q k v] one
// tensor, with no unpack and no sum of three.
func (b *Builder) AttentionPacked(name string, q, kv, keyMask *Node, heads int, causal bool, p float64) *Node {
	return b.attentionPacked(name, q, kv, keyMask, heads, causal, p, false)
}

// ResidualAttentionPacked is q + AttentionPacked(name, q, kv, ...), q
// [B, N, H·d] and kv [B, M, 2·H·d]: Set Transformer's residual
// connection around attention from the projected queries, in the same
// op. Each head adds its queries to its readout, and in the backward pass
// the readout's gradient to the queries', while the head is in cache;
// the values are those of Add on AttentionPacked, and no gradient sum is
// left to Gorgonia.
func (b *Builder) ResidualAttentionPacked(name string, q, kv, keyMask *Node, heads int, causal bool, p float64) *Node {
	if q == nil {
		fail("residual attention %s: no queries", name)
	}
	return b.attentionPacked(name, q, kv, keyMask, heads, causal, p, true)
}

func (b *Builder) attentionPacked(name string, q, kv, keyMask *Node, heads int, causal bool, p float64, residual bool) *Node {
	if !(p >= 0 && p < 1) { // NaN too
		fail("attention dropout %s: p = %g, want in [0, 1)", name, p)
	}
	a := attentionKernel{heads: heads, causal: causal, masked: keyMask != nil, packed: packKV, residual: residual, saved: &savedWeights{}}
	in := []*Node{q, kv}
	if q == nil {
		a.packed, in = packQKV, []*Node{kv}
	}
	if keyMask != nil {
		in = append(in, keyMask)
	}
	if b.train && p > 0 {
		qs, ks := Shape(in[0]), Shape(kv)
		if len(qs) != 3 || len(ks) != 3 || heads < 1 {
			fail("attention dropout %s: q %v, kv %v and %d heads, want 3-D q and kv and at least 1 head", name, qs, ks, heads)
		}
		in = append(in, b.Input(name, qs[0], heads, qs[1], ks[1]))
		b.dropouts = append(b.dropouts, dropoutMask{name: name, p: p})
		a.dropout = true
	}
	return apply(a, in...)
}
