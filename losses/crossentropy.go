package losses

import (
	"fmt"
	"math"

	"github.com/probformer/probformer/graph"
)

// TokenCrossEntropy returns the label-smoothed cross-entropy of target
// tokens under logits, averaged over the real tokens, as a scalar node:
//
//	log p_bt = log softmax(logits[b, t, :])
//	ℓ_bt = (1 − ε)·(−log p_bt[y_bt]) + ε·(1/V) Σ_v −log p_bt[v]
//	L = Σ_bt m_bt ℓ_bt / Σ_bt m_bt
//
// which is PyTorch's CrossEntropyLoss(label_smoothing=ε) with padding
// ignored: the target distribution (1 − ε)·onehot(y) + ε/V. ε = 0 is the
// plain negative log-likelihood.
//
// logits: [B, T, V]; targets: [B, T] target ids, an index node
// (Builder.IndexInput fed with datasets.Batch.DecOut through
// Program.FeedIndices) — no one-hot tensor is built: the per-token loss is
// graph.SoftmaxCrossEntropy, one fused op; mask: [B, T] (1 real, 0 padding;
// datasets.Batch.TgtMask) or nil (every token counts). A target id
// outside [0, V), even at a masked position, fails the run. name is kept
// for callers that name the loss's nodes. With a mask, the count of real
// tokens is the graph's loss weight (graph.Builder.SetLossWeight).
func TokenCrossEntropy(b *graph.Builder, name string, logits, targets, mask *graph.Node, smoothing float64) (*graph.Node, error) {
	ls, ts := graph.Shape(logits), graph.Shape(targets)
	if len(ls) != 3 || len(ts) != 2 || ls[0] != ts[0] || ls[1] != ts[1] {
		return nil, fmt.Errorf("cross-entropy: logits %v and targets %v, want [B, T, V] and [B, T]", ls, ts)
	}
	if mask != nil {
		if ms := graph.Shape(mask); len(ms) != 2 || ms[0] != ts[0] || ms[1] != ts[1] {
			return nil, fmt.Errorf("cross-entropy: mask %v, want %v", ms, ts)
		}
	}
	if smoothing < 0 || smoothing >= 1 {
		return nil, fmt.Errorf("cross-entropy: label smoothing %g, want in [0, 1)", smoothing)
	}
	// One fused op: the [B, T, V] log-probabilities are never built.
	perToken := graph.SoftmaxCrossEntropy(logits, targets, smoothing) // [B, T]
	if mask == nil {
		return graph.Mean(perToken), nil
	}
	real := graph.Sum(mask)
	// A mean over real tokens: data-parallel shards weigh by their counts.
	b.SetLossWeight(real)
	return graph.Div(graph.Sum(graph.Mul(perToken, mask)), real), nil
}

// TokenCrossEntropyValue computes TokenCrossEntropy on plain values, for
// evaluation from a program's logits: logits [rows, v] row-major, targets
// [rows], mask [rows] or nil.
func TokenCrossEntropyValue(logits []float64, targets []int, mask []float64, v int, smoothing float64) (float64, error) {
	if v <= 0 || len(logits) != len(targets)*v {
		return 0, fmt.Errorf("cross-entropy of %d logits and %d targets over %d classes", len(logits), len(targets), v)
	}
	if mask != nil && len(mask) != len(targets) {
		return 0, fmt.Errorf("cross-entropy: mask has %d rows, want %d", len(mask), len(targets))
	}
	if smoothing < 0 || smoothing >= 1 {
		return 0, fmt.Errorf("cross-entropy: label smoothing %g, want in [0, 1)", smoothing)
	}
	var total, weight float64
	for r, y := range targets {
		m := 1.0
		if mask != nil {
			m = mask[r]
		}
		if m == 0 {
			continue
		}
		if y < 0 || y >= v {
			return 0, fmt.Errorf("cross-entropy: target %d at row %d outside [0, %d)", y, r, v)
		}
		row := logits[r*v : (r+1)*v]
		mx := math.Inf(-1)
		for _, x := range row {
			mx = math.Max(mx, x)
		}
		var z, sum float64
		for _, x := range row {
			z += math.Exp(x - mx)
			sum += x
		}
		lz := mx + math.Log(z)
		nll := lz - row[y]
		uniform := lz - sum/float64(v)
		total += m * ((1-smoothing)*nll + smoothing*uniform)
		weight += m
	}
	if weight == 0 {
		return 0, fmt.Errorf("cross-entropy: every token is masked")
	}
	return total / weight, nil
}
