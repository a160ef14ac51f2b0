package graph

import (
	"math"

	"gorgonia.org/tensor"
)

// SoftplusShift is softplus(x) + c, one op with one op for its backward
// pass, g ⊙ σ(x): AddScalar(Softplus(x), c) bit for bit, in its values
// and its gradient. EM attention maps each of a layer's raw
// hyperparameters through it (em's positivity transform, a floor added);
// composed, that was five Gorgonia ops a hyperparameter and a step (the
// softplus, the add, and in the backward pass the sigmoid, the product
// and a sum for the constant's unused gradient), some 75 tiny serial
// instructions a step of the maxnorm-em model. The element functions are
// Gorgonia's (softplus ln(1 + eˣ) through log1p, with its cut-offs; σ
// through 1/(1 + e⁻ˣ), with its cut-offs), evaluated in float64 and
// rounded, as Gorgonia's are for float32. x: any shape → the same shape.
func SoftplusShift(x *Node, c float64) *Node { return apply(softplusShiftKernel{c: c}, x) }

type softplusShiftKernel struct{ c float64 }

func (k softplusShiftKernel) name() string { return "softplus-shift" }
func (softplusShiftKernel) outShape(in []tensor.Shape) (tensor.Shape, error) {
	return in[0].Clone(), nil
}
func (k softplusShiftKernel) do(in []*tensor.Dense, out *tensor.Dense) error {
	switch y := data(out).(type) {
	case []float32:
		for i, v := range floats[float32](in[0])[:len(y)] {
			y[i] = softplusShift(v, k.c)
		}
	case []float64:
		for i, v := range floats[float64](in[0])[:len(y)] {
			y[i] = softplusShift(v, k.c)
		}
	}
	return nil
}

// softplusShift is one element of SoftplusShift: softplus(x) + c, c
// rounded to T first, as AddScalar adds it.
func softplusShift[T float](x T, c float64) T {
	switch v := any(x).(type) {
	case float32:
		return T(softplus32(v) + float32(c))
	case float64:
		return T(softplus64(v) + c)
	}
	panic("unreachable")
}

// sigmoidOf is σ(x) as SoftplusShift's backward pass computes it.
func sigmoidOf[T float](x T) T {
	switch v := any(x).(type) {
	case float32:
		return T(sigmoid32(v))
	case float64:
		return T(sigmoid64(v))
	}
	panic("unreachable")
}
func (softplusShiftKernel) grads(in []*Node, _, g *Node) []*Node {
	return []*Node{apply(softplusGradKernel{}, in[0], g)}
}

// softplusGradKernel is x, g → σ(x) ⊙ g.
type softplusGradKernel struct{}

func (softplusGradKernel) name() string { return "grad-softplus" }
func (softplusGradKernel) outShape(in []tensor.Shape) (tensor.Shape, error) {
	return in[0].Clone(), nil
}
func (softplusGradKernel) do(in []*tensor.Dense, out *tensor.Dense) error {
	switch y := data(out).(type) {
	case []float32:
		g := floats[float32](in[1])
		for i, v := range floats[float32](in[0])[:len(y)] {
			y[i] = sigmoidOf(v) * g[i]
		}
	case []float64:
		g := floats[float64](in[1])
		for i, v := range floats[float64](in[0])[:len(y)] {
			y[i] = sigmoidOf(v) * g[i]
		}
	}
	return nil
}

// softplus32, softplus64, sigmoid32 and sigmoid64 are Gorgonia v0.9.18's
// element functions (math.go, math_nooptim.go), cut-offs included, so
// that SoftplusShift has the composed ops' values.
func softplus32(x float32) float32 {
	if x < -103 {
		return 0
	}
	if x > 14 {
		return x
	}
	return float32(math.Log1p(math.Exp(float64(x))))
}

func softplus64(x float64) float64 {
	if x < -708 {
		return 0
	}
	if x > 16 {
		return x
	}
	return math.Log1p(math.Exp(x))
}

func sigmoid32(x float32) float32 {
	if x < -88 {
		return 0
	}
	if x > 15 {
		return 1
	}
	return float32(1.0 / (1.0 + math.Exp(float64(-x))))
}

func sigmoid64(x float64) float64 {
	if x < -709 {
		return 0
	}
	if x > 19 {
		return 1
	}
	return 1.0 / (1.0 + math.Exp(-x))
}
