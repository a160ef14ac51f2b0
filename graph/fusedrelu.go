package graph

import "gorgonia.org/tensor"

// reluKernel is max(x, 0), and its backward g ⊙ [x > 0], each in one pass:
// Gorgonia's Rectify differentiates through a comparison tensor and a
// product.
type reluKernel struct{}

func (reluKernel) name() string                                     { return "relu" }
func (reluKernel) outShape(in []tensor.Shape) (tensor.Shape, error) { return in[0].Clone(), nil }
func (reluKernel) do(in []*tensor.Dense, out *tensor.Dense) error {
	switch y := out.Data().(type) {
	case []float32:
		relu(in[0].Data().([]float32), nil, y)
	case []float64:
		relu(in[0].Data().([]float64), nil, y)
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
	switch y := out.Data().(type) {
	case []float32:
		relu(in[0].Data().([]float32), in[1].Data().([]float32), y)
	case []float64:
		relu(in[0].Data().([]float64), in[1].Data().([]float64), y)
	}
	return nil
}

// relu writes max(x, 0) to y, or, with g, the gradient g ⊙ [x > 0].
func relu[T float](x, g, y []T) {
	for i, v := range x {
		switch {
		case v <= 0:
			y[i] = 0
		case g != nil:
			y[i] = g[i]
		default:
			y[i] = v
		}
	}
}
