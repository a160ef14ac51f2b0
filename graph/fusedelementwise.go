package graph

import (
	"fmt"

	"gorgonia.org/tensor"

	"github.com/probformer/probformer/graph/internal/kernels"
)

// Element-wise sums and products as custom ops. Gorgonia's Add and
// HadamardProd clone an operand and run through its generic engine each
// step; these write straight into a kept output buffer (customop.go).

// addKernel is a + b where b's shape is a suffix of a's: the same shape,
// or b repeated over a's leading axes. a [..., s...], b [s...] → a's shape:
//
//	out[i·|b| + j] = a[i·|b| + j] + b[j]
type addKernel struct{}

func (addKernel) name() string { return "add" }

func (addKernel) outShape(in []tensor.Shape) (tensor.Shape, error) {
	if !isSuffix(in[1], in[0]) {
		return nil, fmt.Errorf("add: shape %v is not a trailing part of %v", in[1], in[0])
	}
	return in[0].Clone(), nil
}

// isSuffix reports whether s is a non-empty trailing part of t.
func isSuffix(s, t tensor.Shape) bool {
	if len(s) == 0 || len(s) > len(t) {
		return false
	}
	return s.Eq(t[len(t)-len(s):])
}

func (addKernel) do(in []*tensor.Dense, out *tensor.Dense) error {
	switch y := data(out).(type) {
	case []float32:
		addRepeat(floats[float32](in[0]), floats[float32](in[1]), y)
	case []float64:
		addRepeat(floats[float64](in[0]), floats[float64](in[1]), y)
	}
	return nil
}

func addRepeat[T float](a, b, y []T) {
	// float32 with AVX2: the same chunks and kernel calls in one cgo call,
	// so the helper runs its chunks without a Go hand-over.
	if a32, ok := any(a).([]float32); ok && kernels.AddRepeatShared32(a32, any(b).([]float32), any(y).([]float32)) {
		return
	}
	kernels.SplitRange(len(a), len(b), func(lo, hi int) {
		a, y := a[lo:hi], y[lo:hi]
		if a32, ok := any(a).([]float32); ok && kernels.AddRepeat32(a32, any(b).([]float32), any(y).([]float32)) {
			return
		}
		addRepeatGo(a, b, y)
	})
}

// addRepeatGo is addRepeat in Go.
func addRepeatGo[T float](a, b, y []T) {
	d := len(b)
	y = y[:len(a)]
	for r := 0; r < len(a); r += d {
		ar, yr := a[r:r+d], y[r:r+d]
		for j, v := range b {
			yr[j] = ar[j] + v
		}
	}
}

// grads: da = g; db = g, or g summed over the leading axes b was repeated
// along.
func (addKernel) grads(in []*Node, _, g *Node) []*Node {
	if in[0].Shape().Eq(in[1].Shape()) {
		return []*Node{g, g}
	}
	return []*Node{g, apply(sumLeadingKernel{shape: fix(in[1].Shape())}, g)}
}

// sumLeadingKernel sums x [..., s...] over its leading axes into [s...],
// row after row in order.
type sumLeadingKernel struct{ shape fixedShape }

func (k sumLeadingKernel) name() string { return fmt.Sprintf("sum-leading(%v)", k.shape.get()) }
func (k sumLeadingKernel) outShape(in []tensor.Shape) (tensor.Shape, error) {
	s := k.shape.get()
	if !isSuffix(s, in[0]) {
		return nil, fmt.Errorf("sum over leading axes: %v does not end in %v", in[0], s)
	}
	return s, nil
}
func (sumLeadingKernel) do(in []*tensor.Dense, out *tensor.Dense) error {
	switch s := data(out).(type) {
	case []float32:
		colSum(floats[float32](in[0]), s)
	case []float64:
		colSum(floats[float64](in[0]), s)
	}
	return nil
}

// mulKernel is the element-wise product a ⊙ b of equal shapes. With
// constB, b (a dropout mask, say) takes no gradient, and none is built.
type mulKernel struct{ constB bool }

func (k mulKernel) name() string { return fmt.Sprintf("mul(constB=%v)", k.constB) }
func (mulKernel) outShape(in []tensor.Shape) (tensor.Shape, error) {
	if !in[0].Eq(in[1]) {
		return nil, fmt.Errorf("element-wise product of shapes %v and %v", in[0], in[1])
	}
	return in[0].Clone(), nil
}
func (mulKernel) do(in []*tensor.Dense, out *tensor.Dense) error {
	switch y := data(out).(type) {
	case []float32:
		mulInto(floats[float32](in[0]), floats[float32](in[1]), y)
	case []float64:
		mulInto(floats[float64](in[0]), floats[float64](in[1]), y)
	}
	return nil
}

func mulInto[T float](a, b, y []T) {
	if a32, ok := any(a).([]float32); ok && kernels.MulShared32(a32, any(b).([]float32), any(y).([]float32)) {
		return // SplitRange's chunks and Mul32 calls in one cgo call
	}
	kernels.SplitRange(len(a), 8, func(lo, hi int) {
		a, b, y := a[lo:hi], b[lo:hi], y[lo:hi]
		if a32, ok := any(a).([]float32); ok && kernels.Mul32(a32, any(b).([]float32), any(y).([]float32)) {
			return
		}
		mulIntoGo(a, b, y)
	})
}

// mulIntoGo is mulInto in Go.
func mulIntoGo[T float](a, b, y []T) {
	b, y = b[:len(a)], y[:len(a)]
	for i, v := range a {
		y[i] = v * b[i]
	}
}

func (k mulKernel) constInput(i int) bool { return k.constB && i == 1 }

// grads: da = g ⊙ b, db = g ⊙ a.
func (k mulKernel) grads(in []*Node, _, g *Node) []*Node {
	da := apply(mulKernel{constB: true}, g, in[1])
	if k.constB {
		return []*Node{da, nil}
	}
	return []*Node{da, apply(mulKernel{constB: true}, g, in[0])}
}

// scaleKernel is c·x for a constant c, rounded to x's dtype first as
// Gorgonia's product with a constant scalar does.
type scaleKernel struct{ c float64 }

func (k scaleKernel) name() string                                   { return fmt.Sprintf("scale(%g)", k.c) }
func (scaleKernel) outShape(in []tensor.Shape) (tensor.Shape, error) { return in[0].Clone(), nil }
func (k scaleKernel) do(in []*tensor.Dense, out *tensor.Dense) error {
	switch y := data(out).(type) {
	case []float32:
		scaleInto(floats[float32](in[0]), float32(k.c), y)
	case []float64:
		scaleInto(floats[float64](in[0]), k.c, y)
	}
	return nil
}

func scaleInto[T float](x []T, c T, y []T) {
	kernels.SplitRange(len(x), 8, func(lo, hi int) {
		x, y := x[lo:hi], y[lo:hi]
		for i, v := range x {
			y[i] = v * c
		}
	})
}

// grads: dx = c·g.
func (k scaleKernel) grads(_ []*Node, _, g *Node) []*Node { return []*Node{apply(k, g)} }
