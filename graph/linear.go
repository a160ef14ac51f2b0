package graph

// Linear returns x·w + bias over the last axis of x, for x of any rank:
// x [..., din], w [din, dout], bias [dout] or nil → [..., dout].
// It is one fused op (one gemm over the folded rows, the bias added in
// place); Gorgonia's Mul takes only 2-D operands and its broadcasts copy.
func Linear(x, w, bias *Node) *Node {
	if bias == nil {
		return apply(linearKernel{}, x, w)
	}
	return apply(linearKernel{bias: true}, x, w, bias)
}

// LinearReLU returns max(x·w + bias, 0), Linear followed by ReLU in one
// op: the activation is applied as the product is written, and the
// backward masks the gradient by the output's sign.
func LinearReLU(x, w, bias *Node) *Node {
	if bias == nil {
		return apply(linearKernel{relu: true}, x, w)
	}
	return apply(linearKernel{bias: true, relu: true}, x, w, bias)
}

// LayerNorm normalises x over its last axis and applies the gain and bias:
// y = γ ⊙ (x − mean) / √(var + eps) + β, with the biased variance as in
// PyTorch. x [..., d], γ [d], β [d]. One fused op with an analytic
// backward.
func LayerNorm(x, gamma, beta *Node, eps float64) *Node {
	return apply(layerNormKernel{eps: eps, saved: &savedStats{}}, x, gamma, beta)
}
