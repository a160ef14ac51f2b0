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

// LinearReLUDropout returns Dropout(LinearReLU(x, w, bias)) with the
// mask called name (Builder.Dropout's mask, at the same place in the
// order of masks), the ReLU and the mask applied in one pass as the
// product's parts are written, and one backward pass for both. In an
// evaluation graph, or with p = 0, it is LinearReLU.
func (b *Builder) LinearReLUDropout(name string, x, w, bias *Node, p float64) *Node {
	if !b.train || p <= 0 {
		return LinearReLU(x, w, bias)
	}
	if p >= 1 {
		fail("dropout %s: p = %g, want < 1", name, p)
	}
	out := Shape(x)
	out[len(out)-1] = Shape(w)[len(Shape(w))-1]
	mask := b.Input(name, out...)
	b.dropouts = append(b.dropouts, dropoutMask{name: name, p: p})
	if bias == nil {
		return apply(linearKernel{relu: true, dropout: true}, x, w, mask)
	}
	return apply(linearKernel{bias: true, relu: true, dropout: true}, x, w, bias, mask)
}

// LayerNorm normalises x over its last axis and applies the gain and bias:
// y = γ ⊙ (x − mean) / √(var + eps) + β, with the biased variance as in
// PyTorch. x [..., d], γ [d], β [d]. One fused op with an analytic
// backward.
func LayerNorm(x, gamma, beta *Node, eps float64) *Node {
	return apply(layerNormKernel{eps: eps, saved: &savedStats{}}, x, gamma, beta)
}
