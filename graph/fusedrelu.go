package graph

import (
	"math"

	"gorgonia.org/tensor"

	"github.com/probformer/probformer/graph/internal/kernels"
)

// reluKernel is max(x, 0), and its backward g ⊙ [x > 0], each in one pass:
// Gorgonia's Rectify differentiates through a comparison tensor and a
// product.
type reluKernel struct{}

func (reluKernel) name() string                                     { return "relu" }
func (reluKernel) outShape(in []tensor.Shape) (tensor.Shape, error) { return in[0].Clone(), nil }
func (reluKernel) do(in []*tensor.Dense, out *tensor.Dense) error {
	switch y := data(out).(type) {
	case []float32:
		relu(floats[float32](in[0]), nil, y)
	case []float64:
		relu(floats[float64](in[0]), nil, y)
	}
	return nil
}
func (reluKernel) grads(in []*Node, _, g *Node) []*Node {
	return []*Node{apply(reluGradKernel{}, in[0], g)}
}

type reluGradKernel struct{}

func (reluGradKernel) name() string                                     { return "grad-relu" }
func (reluGradKernel) outShape(in []tensor.Shape) (tensor.Shape, error) { return in[0].Clone(), nil }
func (reluGradKernel) do(in []*tensor.Dense, out *tensor.Dense) error {
	switch y := data(out).(type) {
	case []float32:
		relu(floats[float32](in[0]), floats[float32](in[1]), y)
	case []float64:
		relu(floats[float64](in[0]), floats[float64](in[1]), y)
	}
	return nil
}

// relu writes max(x, 0) to y, or, with g, the gradient g ⊙ [x > 0]. The
// gradient selects without branches: the sign of a pre-activation is a
// coin flip, and mispredicted branches cost 3× the arithmetic.
func relu[T float](x, g, y []T) {
	// float32 with AVX2: the same chunks and kernel calls in one cgo call,
	// so the helper runs its chunks without a Go hand-over.
	if x32, ok := any(x).([]float32); ok {
		y32 := any(y).([]float32)
		if g == nil && kernels.ReluShared32(x32, y32) || g != nil && kernels.ReluGradShared32(x32, any(g).([]float32), y32) {
			return
		}
	}
	kernels.SplitRange(len(x), 8, func(lo, hi int) {
		var gp []T
		if g != nil {
			gp = g[lo:hi]
		}
		reluPart(x[lo:hi], gp, y[lo:hi])
	})
}

// reluPart is relu on one part of the values.
func reluPart[T float](x, g, y []T) {
	y = y[:len(x)]
	if g == nil {
		if x32, ok := any(x).([]float32); ok && kernels.Relu32(x32, any(y).([]float32)) {
			return
		}
		for i, v := range x {
			y[i] = max(v, 0)
		}
		return
	}
	switch xs := any(x).(type) {
	case []float32:
		reluGrad32(xs, any(g).([]float32), any(y).([]float32))
	case []float64:
		reluGrad64(xs, any(g).([]float64), any(y).([]float64))
	}
}

// reluGrad32 keeps g[i] where x[i] > 0 and writes +0 elsewhere, by masking
// bits: for the int32 b of x's bits, −b & ^b has its sign bit set exactly
// when b > 0, that is when x > 0 (or x is a NaN with the sign bit clear).
func reluGrad32(x, g, y []float32) {
	if kernels.ReluGrad32(x, g, y) {
		return
	}
	reluGrad32Go(x, g, y)
}

// reluGrad32Go is reluGrad32 in Go.
func reluGrad32Go(x, g, y []float32) {
	g, y = g[:len(x)], y[:len(x)]
	for i, v := range x {
		b := int32(math.Float32bits(v))
		m := uint32((-b & ^b) >> 31)
		y[i] = math.Float32frombits(math.Float32bits(g[i]) & m)
	}
}

// reluGrad64 is reluGrad32 for float64.
func reluGrad64(x, g, y []float64) {
	g, y = g[:len(x)], y[:len(x)]
	for i, v := range x {
		b := int64(math.Float64bits(v))
		m := uint64((-b & ^b) >> 63)
		y[i] = math.Float64frombits(math.Float64bits(g[i]) & m)
	}
}
