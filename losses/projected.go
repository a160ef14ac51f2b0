package losses

import (
	"fmt"

	"github.com/probformer/probformer/graph"
)

// ProjectedTokenCrossEntropy is TokenCrossEntropy of the output layer's
// logits, with the output projection fused into the loss and the padding
// rows never projected:
//
//	z_bt = hidden[b, t, :]·W + bias
//	log p_bt = log softmax(z_bt)
//	ℓ_bt = (1 − ε)·(−log p_bt[y_bt]) + ε·(1/V) Σ_v −log p_bt[v]
//	L = Σ_bt m_bt ℓ_bt / Σ_bt m_bt
//
// the value of TokenCrossEntropy(b, name, Linear(hidden, w, bias), targets,
// mask, ε) (PyTorch's CrossEntropyLoss(label_smoothing=ε) over the real
// tokens) without building the [B, T, V] logits of the padding
// (graph.ProjectedCrossEntropy: one op, one matrix product over the rows
// with m_bt ≠ 0, and a backward pass over those rows only).
//
// hidden: [B, T, d], the decoder's last hidden states; w: [d, V]; bias:
// [V]; targets: [B, T] target ids, an index node (Builder.IndexInput fed
// through Program.FeedIndices); mask: [B, T] (1 real, 0 padding;
// datasets.Batch.TgtMask) or nil (every token counts). A target id outside
// [0, V) at a real token fails the run; at a padding position it is never
// read (where TokenCrossEntropy fails on it). A batch with no real token
// fails the run (where TokenCrossEntropy gives NaN). With a mask, the
// count of real tokens is the graph's loss weight (b.SetLossWeight).
func ProjectedTokenCrossEntropy(b *graph.Builder, hidden, w, bias, targets, mask *graph.Node, smoothing float64) (*graph.Node, error) {
	if hidden == nil || w == nil || bias == nil || targets == nil {
		return nil, fmt.Errorf("projected cross-entropy: hidden, w, bias and targets are required")
	}
	hs, ws, bs, ts := graph.Shape(hidden), graph.Shape(w), graph.Shape(bias), graph.Shape(targets)
	if len(hs) != 3 || len(ts) != 2 || hs[0] != ts[0] || hs[1] != ts[1] {
		return nil, fmt.Errorf("projected cross-entropy: hidden %v and targets %v, want [B, T, d] and [B, T]", hs, ts)
	}
	if len(ws) != 2 || ws[0] != hs[2] {
		return nil, fmt.Errorf("projected cross-entropy: w %v, want [%d, V]", ws, hs[2])
	}
	if len(bs) != 1 || bs[0] != ws[1] {
		return nil, fmt.Errorf("projected cross-entropy: bias %v, want [%d]", bs, ws[1])
	}
	if mask != nil {
		if ms := graph.Shape(mask); len(ms) != 2 || ms[0] != ts[0] || ms[1] != ts[1] {
			return nil, fmt.Errorf("projected cross-entropy: mask %v, want %v", ms, ts)
		}
	}
	if smoothing < 0 || smoothing >= 1 {
		return nil, fmt.Errorf("projected cross-entropy: label smoothing %g, want in [0, 1)", smoothing)
	}
	if mask != nil {
		// A mean over real tokens: data-parallel shards weigh by their counts.
		b.SetLossWeight(graph.Sum(mask))
	}
	return graph.ProjectedCrossEntropy(hidden, w, bias, targets, mask, smoothing), nil
}
