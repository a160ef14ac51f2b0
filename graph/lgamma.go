package graph

import (
	"fmt"
	"math"

	"gorgonia.org/tensor"
)

// Lgamma returns log Γ(x) element-wise, for x > 0; any shape. Its gradient
// is g ⊙ ψ(x), with ψ the digamma function. The Weibull–Gamma KL of
// Bayesian attention (layers/BAYES.md §3) needs lgamma(α) of an α that
// the prior network learns, and Gorgonia has neither op. Running the graph
// fails with an error if an element is not > 0 (or is NaN): Γ has poles at
// 0 and at the negative integers, so such an input is a bug upstream, such
// as a masked key's prior mean of 0.
func Lgamma(x *Node) *Node { return apply(lgammaKernel{}, x) }

// Digamma returns ψ(x) = d/dx log Γ(x) element-wise, for x > 0; any shape.
// It has no gradient. Values are accurate to about 1e-15 absolute (gonum's
// mathext.Digamma is off by 5e-11 at x = 1). Elements that are not > 0 give
// NaN.
func Digamma(x *Node) *Node { return apply(digammaKernel{}, x) }

type lgammaKernel struct{}

func (lgammaKernel) name() string                                     { return "lgamma" }
func (lgammaKernel) outShape(in []tensor.Shape) (tensor.Shape, error) { return in[0].Clone(), nil }
func (lgammaKernel) do(in []*tensor.Dense, out *tensor.Dense) error {
	switch y := data(out).(type) {
	case []float32:
		return lgammaSlice(floats[float32](in[0]), y)
	case []float64:
		return lgammaSlice(floats[float64](in[0]), y)
	}
	return fmt.Errorf("unsupported dtype %v", out.Dtype())
}
func (lgammaKernel) grads(in []*Node, _, g *Node) []*Node {
	return []*Node{apply(lgammaGradKernel{}, in[0], g)}
}

func lgammaSlice[T float](x, y []T) error {
	for i, v := range x {
		if !(v > 0) {
			return fmt.Errorf("element %d is %v; lgamma is defined here for x > 0", i, v)
		}
		// For x > 0, Γ(x) > 0, so the sign math.Lgamma returns is +1.
		l, _ := math.Lgamma(float64(v))
		y[i] = T(l)
	}
	return nil
}

// lgammaGradKernel is the backward of lgamma: inputs x and the upstream
// gradient g, output g ⊙ ψ(x).
type lgammaGradKernel struct{}

func (lgammaGradKernel) name() string                                     { return "grad-lgamma" }
func (lgammaGradKernel) outShape(in []tensor.Shape) (tensor.Shape, error) { return in[0].Clone(), nil }
func (lgammaGradKernel) do(in []*tensor.Dense, out *tensor.Dense) error {
	switch y := data(out).(type) {
	case []float32:
		digammaSlice(floats[float32](in[0]), floats[float32](in[1]), y)
	case []float64:
		digammaSlice(floats[float64](in[0]), floats[float64](in[1]), y)
	default:
		return fmt.Errorf("unsupported dtype %v", out.Dtype())
	}
	return nil
}

type digammaKernel struct{}

func (digammaKernel) name() string                                     { return "digamma" }
func (digammaKernel) outShape(in []tensor.Shape) (tensor.Shape, error) { return in[0].Clone(), nil }
func (digammaKernel) do(in []*tensor.Dense, out *tensor.Dense) error {
	switch y := data(out).(type) {
	case []float32:
		digammaSlice(floats[float32](in[0]), nil, y)
	case []float64:
		digammaSlice(floats[float64](in[0]), nil, y)
	default:
		return fmt.Errorf("unsupported dtype %v", out.Dtype())
	}
	return nil
}

// digammaSlice writes ψ(x) to y, or, with g, g ⊙ ψ(x).
func digammaSlice[T float](x, g, y []T) {
	for i, v := range x {
		d := digamma(float64(v))
		if g != nil {
			d *= float64(g[i])
		}
		y[i] = T(d)
	}
}

// digammaShift is where the asymptotic series takes over: its first
// omitted term, 3617/(8160 x¹⁶), is 4e-17 at x = 10.
const digammaShift = 10

// digamma is ψ(x) for x > 0 (NaN otherwise): the recurrence
// ψ(x) = ψ(x+1) − 1/x moves x to at least digammaShift, where
//
//	ψ(x) ≈ ln x − 1/(2x) − Σ_{n=1..7} B_{2n} / (2n x^{2n})
//	     = ln x − 1/(2x) − 1/(12x²) + 1/(120x⁴) − 1/(252x⁶) + 1/(240x⁸)
//	       − 1/(132x¹⁰) + 691/(32760x¹²) − 1/(12x¹⁴).
func digamma(x float64) float64 {
	switch {
	case !(x > 0):
		return math.NaN()
	case math.IsInf(x, 1):
		return x
	}
	var shift float64 // Σ 1/(x+j) over the recurrence steps
	for x < digammaShift {
		shift += 1 / x
		x++
	}
	inv2 := 1 / (x * x)
	series := inv2 * (1.0/12 - inv2*(1.0/120-inv2*(1.0/252-inv2*(1.0/240-inv2*(1.0/132-inv2*(691.0/32760-inv2/12))))))
	return math.Log(x) - 0.5/x - series - shift
}
