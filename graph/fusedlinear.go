package graph

import (
	"fmt"

	"gorgonia.org/tensor"

	"github.com/probformer/probformer/graph/internal/kernels"
)

// linearKernel is y = x·W (+ b) over the last axis of x, for any rank:
// x [..., din], W [din, dout], b [dout] → [..., dout]. One gemm on the
// folded rows, with no reshape and no broadcast of the bias.
// With relu set, the output is max(x·W + b, 0), in the same pass; with
// dropout too, max(x·W + b, 0) ⊙ D for a dropout mask D of the output's
// shape, the last input.
type linearKernel struct{ bias, relu, dropout bool }

func (k linearKernel) name() string {
	return fmt.Sprintf("linear(bias=%v,relu=%v,dropout=%v)", k.bias, k.relu, k.dropout)
}

// constInput: the dropout mask takes no gradient.
func (k linearKernel) constInput(i int) bool { return k.dropout && i == k.maskInput() }

// maskInput is the index of the dropout mask among the inputs.
func (k linearKernel) maskInput() int {
	if k.bias {
		return 3
	}
	return 2
}

func (k linearKernel) outShape(in []tensor.Shape) (tensor.Shape, error) {
	x, w := in[0], in[1]
	if len(w) != 2 || len(x) < 1 || x[len(x)-1] != w[0] {
		return nil, fmt.Errorf("linear: x %v and w %v do not fit", x, w)
	}
	if k.bias && (len(in[2]) != 1 || in[2][0] != w[1]) {
		return nil, fmt.Errorf("linear: bias %v, want [%d]", in[2], w[1])
	}
	out := x.Clone()
	out[len(out)-1] = w[1]
	if k.dropout && (len(in) <= k.maskInput() || !in[k.maskInput()].Eq(out)) {
		return nil, fmt.Errorf("linear: dropout mask, want %v", out)
	}
	return out, nil
}

func (k linearKernel) do(in []*tensor.Dense, out *tensor.Dense) error {
	switch y := data(out).(type) {
	case []float32:
		linearForward(k.bias, in, y)
		activate(k, in, y)
	case []float64:
		linearForward(k.bias, in, y)
		activate(k, in, y)
	}
	return nil
}

// activate applies k's ReLU, and the dropout mask, to y in place: both in
// one part of y at a time, on both cores, while the part is in cache.
func activate[T float](k linearKernel, in []*tensor.Dense, y []T) {
	if !k.relu {
		return
	}
	if !k.dropout {
		relu(y, nil, y)
		return
	}
	d := floats[T](in[k.maskInput()])
	kernels.SplitRange(len(y), 8, func(lo, hi int) {
		y, d := y[lo:hi], d[lo:hi]
		reluPart(y, nil, y)
		if y32, ok := any(y).([]float32); ok && kernels.Mul32(y32, any(d).([]float32), y32) {
			return
		}
		mulIntoGo(y, d, y)
	})
}

func linearForward[T float](bias bool, in []*tensor.Dense, y []T) {
	x, w := floats[T](in[0]), floats[T](in[1])
	din, dout := in[1].Shape()[0], in[1].Shape()[1]
	rows := len(x) / din
	if bias {
		kernels.GemmBias(false, false, rows, dout, din, 1, x, din, w, dout, 0, y, dout, floats[T](in[2]))
		return
	}
	kernels.Gemm(false, false, rows, dout, din, 1, x, din, w, dout, 0, y, dout)
}

// grads: dx = g·Wᵀ, dW = xᵀ·g, db = Σ_rows g; after a ReLU, g is first
// masked by [y > 0] (y > 0 exactly where x·W + b > 0), and with dropout
// also multiplied by D (where D = 0, y = 0 and the gradient is +0).
func (k linearKernel) grads(in []*Node, y, g *Node) []*Node {
	switch {
	case k.dropout:
		g = apply(reluDropGradKernel{}, y, g, in[k.maskInput()])
		in = in[:k.maskInput()]
	case k.relu:
		g = apply(reluGradKernel{}, y, g)
	}
	out := []*Node{
		apply(matmulKernel{transB: true, shape: fix(in[0].Shape())}, g, in[1]),
		apply(matmulKernel{transA: true, shape: fix(in[1].Shape())}, in[0], g),
	}
	if k.bias {
		out = append(out, apply(colSumKernel{}, g))
	}
	if k.dropout {
		out = append(out, nil)
	}
	return out
}

// reluDropGradKernel is y, g, D → g ⊙ [y > 0] ⊙ D, the gradient through
// ReLU then dropout from their output y, in one pass over parts of the
// values on both cores.
type reluDropGradKernel struct{}

func (reluDropGradKernel) name() string { return "grad-relu-dropout" }
func (reluDropGradKernel) outShape(in []tensor.Shape) (tensor.Shape, error) {
	return in[0].Clone(), nil
}
func (reluDropGradKernel) do(in []*tensor.Dense, out *tensor.Dense) error {
	switch o := data(out).(type) {
	case []float32:
		reluDropGrad(floats[float32](in[0]), floats[float32](in[1]), floats[float32](in[2]), o)
	case []float64:
		reluDropGrad(floats[float64](in[0]), floats[float64](in[1]), floats[float64](in[2]), o)
	}
	return nil
}

func reluDropGrad[T float](y, g, d, o []T) {
	kernels.SplitRange(len(y), 8, func(lo, hi int) {
		o, d := o[lo:hi], d[lo:hi]
		reluPart(y[lo:hi], g[lo:hi], o)
		if o32, ok := any(o).([]float32); ok && kernels.Mul32(o32, any(d).([]float32), o32) {
			return
		}
		mulIntoGo(o, d, o)
	})
}

// matmulKernel multiplies two operands whose leading axes fold into rows:
// op(a) [m, k] · op(b) [k, n], with the result given the stated shape.
type matmulKernel struct {
	transA, transB bool
	shape          fixedShape
}

func (k matmulKernel) name() string {
	return fmt.Sprintf("matmul(%v,%v,%v)", k.transA, k.transB, k.shape.get())
}
func (k matmulKernel) outShape([]tensor.Shape) (tensor.Shape, error) { return k.shape.get(), nil }

func (k matmulKernel) do(in []*tensor.Dense, out *tensor.Dense) error {
	a, b := in[0].Shape(), in[1].Shape()
	aCols, bCols := a[len(a)-1], b[len(b)-1]
	aRows, bRows := a.TotalSize()/aCols, b.TotalSize()/bCols
	m, kk, n := aRows, aCols, bCols
	if k.transA {
		m, kk = aCols, aRows
	}
	if k.transB {
		n = bRows
	}
	inner := bRows
	if k.transB {
		inner = bCols
	}
	if kk != inner || m*n != out.Shape().TotalSize() {
		return fmt.Errorf("shapes %v and %v give %d values, want %v", a, b, m*n, out.Shape())
	}
	switch c := data(out).(type) {
	case []float32:
		kernels.Gemm(k.transA, k.transB, m, n, kk, 1, floats[float32](in[0]), aCols, floats[float32](in[1]), bCols, 0, c, n)
	case []float64:
		kernels.Gemm(k.transA, k.transB, m, n, kk, 1, floats[float64](in[0]), aCols, floats[float64](in[1]), bCols, 0, c, n)
	}
	return nil
}

// colSumKernel sums [..., d] over every axis but the last: [d].
type colSumKernel struct{}

func (colSumKernel) name() string { return "colsum" }
func (colSumKernel) outShape(in []tensor.Shape) (tensor.Shape, error) {
	return tensor.Shape{in[0][len(in[0])-1]}, nil
}
func (colSumKernel) do(in []*tensor.Dense, out *tensor.Dense) error {
	switch s := data(out).(type) {
	case []float32:
		colSum(floats[float32](in[0]), s)
	case []float64:
		colSum(floats[float64](in[0]), s)
	}
	return nil
}

func colSum[T float](x, s []T) {
	if s32, ok := any(s).([]float32); ok && kernels.ColSum32(any(x).([]float32), s32) {
		return
	}
	colSumGo(x, s)
}

// colSumGo is colSum in Go: row after row into s.
func colSumGo[T float](x, s []T) {
	d := len(s)
	for i := range s {
		s[i] = 0
	}
	for r := 0; r < len(x); r += d {
		for j, v := range x[r : r+d] {
			s[j] += v
		}
	}
}
