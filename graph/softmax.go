package graph

import "github.com/probformer/probformer/graph/internal/kernels"

// Softmax returns exp(x − max) / Σ exp(x − max) over axis. Subtracting the
// row's own max keeps it finite for any input, including rows masked with
// −1e9 (which come out uniform instead of NaN). Gorgonia's SoftMax starts
// every row's max at the tensor's first element and overflows.
func Softmax(x *Node, axis int) *Node {
	ax := byte(axis)
	e := Exp(BroadcastSub(x, Max(x, axis), ax))
	return BroadcastDiv(e, Sum(e, axis), ax)
}

// LogSoftmax returns x − logsumexp(x) over axis, computed stably.
func LogSoftmax(x *Node, axis int) *Node {
	ax := byte(axis)
	z := BroadcastSub(x, Max(x, axis), ax)
	return BroadcastSub(z, Log(Sum(Exp(z), axis)), ax)
}

// LogSumExp returns log Σ exp(x) over axis, dropping it:
// m + log Σ exp(x − m) with m the max over axis.
func LogSumExp(x *Node, axis int) *Node {
	m := Max(x, axis)
	return Add(m, Log(Sum(Exp(BroadcastSub(x, m, byte(axis))), axis)))
}

// MaskNegInf is the additive score that masks a key: large enough that
// exp underflows to exactly 0 next to any real score, small enough to stay
// finite in float32.
const MaskNegInf = kernels.MaskNegInf

// MaskedSoftmax is Softmax over the last axis of scores [B, H, N, M] with
// keys masked by keyMask [B, M] (1 = real, 0 = padding): padded keys get
// weight 0. A row whose keys are all padding stays finite (its values
// are then meaningless, and callers must not use them).
func MaskedSoftmax(scores, keyMask *Node) *Node {
	last := scores.Dims() - 1
	if keyMask == nil {
		return Softmax(scores, last)
	}
	// (mask − 1)·1e9 is 0 for real keys and −1e9 for padding. The middle
	// axes are folded into one, so the broadcast is over axis 1 only.
	additive := Scale(AddScalar(keyMask, -1), -MaskNegInf)
	s := Shape(scores)
	folded := Reshape(scores, s[0], shapeSize(s[1:last]), s[last])
	return Reshape(Softmax(BroadcastAdd(folded, additive, 1), 2), s...)
}
