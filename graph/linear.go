package graph

// Linear returns x·w + bias over the last axis of x, for x of any rank ≥ 2:
// x [..., din], w [din, dout], bias [dout] or nil → [..., dout].
// Gorgonia's Mul takes only 2-D operands, so the leading axes are folded
// into one and unfolded after, with copying reshapes.
func Linear(x, w, bias *Node) *Node {
	xs, ws := Shape(x), Shape(w)
	din := xs[len(xs)-1]
	if len(ws) != 2 || ws[0] != din {
		fail("linear: x %v and w %v do not fit", xs, ws)
	}
	rows := shapeSize(xs[:len(xs)-1])
	var y *Node
	if len(xs) == 2 {
		y = MatMul(x, w)
	} else {
		y = Reshape(MatMul(Reshape(x, rows, din), w), append(xs[:len(xs)-1:len(xs)-1], ws[1])...)
	}
	if bias == nil {
		return y
	}
	axes := make([]byte, len(xs)-1)
	for i := range axes {
		axes[i] = byte(i)
	}
	return BroadcastAdd(y, bias, axes...)
}

// LayerNorm normalises x over its last axis and applies the gain and bias:
// y = γ ⊙ (x − mean) / √(var + eps) + β, with the biased variance as in
// PyTorch. x [..., d], γ [d], β [d].
func LayerNorm(x, gamma, beta *Node, eps float64) *Node {
	last := x.Dims() - 1
	mu := Mean(x, last)
	xc := BroadcastSub(x, mu, byte(last))
	sd := Sqrt(AddScalar(Mean(Square(xc), last), eps))
	y := BroadcastDiv(xc, sd, byte(last))
	axes := make([]byte, last)
	for i := range axes {
		axes[i] = byte(i)
	}
	return BroadcastAdd(BroadcastMul(y, gamma, axes...), beta, axes...)
}
