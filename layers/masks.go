package layers

import (
	"fmt"

	"probformer/graph"
)

// Attention masks are 0/1 tensors, 1 where a query may attend to a key:
//
//   - a key mask [B, M] hides padded keys from every query;
//   - a query-key mask [B, N, M] decides per query, as the causal mask of a
//     decoder does.
//
// Kernel.Attend takes either. ScaledDotProduct honours both through
// MaskScores; a kernel that can only mask keys (em.Kernel, whose memory is
// shared by all queries) must fail the build on a query-key mask rather
// than ignore it.

// MaskScores returns attention scores [B, H, N, M] with the masked entries
// lowered by 1e9 (graph.MaskNegInf), so that a softmax over the last axis
// gives them weight exactly 0 next to any unmasked score:
//
//	s'[b, h, n, m] = s[b, h, n, m] + (mask[b, (n,) m] − 1)·1e9
//
// mask is [B, M], [B, N, M] or nil (scores returned unchanged).
func MaskScores(scores, mask *graph.Node) *graph.Node {
	if mask == nil {
		return scores
	}
	s, ms := graph.Shape(scores), graph.Shape(mask)
	if len(s) != 4 {
		panic(fmt.Errorf("mask scores: scores have shape %v, want [B, H, N, M]", s))
	}
	additive := graph.Scale(graph.AddScalar(mask, -1), -graph.MaskNegInf)
	switch {
	case len(ms) == 2 && ms[0] == s[0] && ms[1] == s[3]:
		return graph.BroadcastAdd(scores, additive, 1, 2)
	case len(ms) == 3 && ms[0] == s[0] && ms[1] == s[2] && ms[2] == s[3]:
		return graph.BroadcastAdd(scores, additive, 1)
	}
	panic(fmt.Errorf("mask scores: mask %v does not fit scores %v (want [B, M] or [B, N, M])", ms, s))
}

// CausalMask returns the self-attention mask [B, T, T] of a decoder, in
// which position n sees positions j ≤ n that are not padding:
//
//	m[b, n, j] = [j ≤ n] · keyMask[b, j]
//
// keyMask [B, T] (1 real, 0 padding) may be nil. name names the constant
// lower-triangular part.
func CausalMask(b *graph.Builder, name string, batch, t int, keyMask *graph.Node) *graph.Node {
	tri := make([]float64, batch*t*t)
	for i := range batch {
		for n := range t {
			for j := 0; j <= n; j++ {
				tri[(i*t+n)*t+j] = 1
			}
		}
	}
	causal := b.Constant(name, []int{batch, t, t}, tri)
	if keyMask == nil {
		return causal
	}
	if ks := graph.Shape(keyMask); len(ks) != 2 || ks[0] != batch || ks[1] != t {
		panic(fmt.Errorf("causal mask %s: key mask %v, want [%d, %d]", name, ks, batch, t))
	}
	return graph.BroadcastMul(causal, keyMask, 1)
}
