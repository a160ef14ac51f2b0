package graph

import (
	"fmt"
	"math"

	"gorgonia.org/tensor"
)

// layerNormKernel normalises the rows of x [..., d] and applies γ, β [d]:
//
//	x̂ = (x − μ) / √(σ² + ε),  y = γ ⊙ x̂ + β
//
// with the biased variance σ², as PyTorch does.
type layerNormKernel struct{ eps float64 }

func (k layerNormKernel) name() string { return fmt.Sprintf("layernorm(%g)", k.eps) }

func (k layerNormKernel) outShape(in []tensor.Shape) (tensor.Shape, error) {
	x := in[0]
	d := x[len(x)-1]
	for _, p := range in[1:] {
		if len(p) != 1 || p[0] != d {
			return nil, fmt.Errorf("layernorm: x %v, gain or bias %v", x, p)
		}
	}
	return x.Clone(), nil
}

func (k layerNormKernel) do(in []*tensor.Dense, out *tensor.Dense) error {
	switch y := out.Data().(type) {
	case []float32:
		layerNormForward(k.eps, in[0].Data().([]float32), in[1].Data().([]float32), in[2].Data().([]float32), y)
	case []float64:
		layerNormForward(k.eps, in[0].Data().([]float64), in[1].Data().([]float64), in[2].Data().([]float64), y)
	}
	return nil
}

// rowStats returns the mean and 1/√(σ² + ε) of a row, in float64.
func rowStats[T float](row []T, eps float64) (mean, rstd float64) {
	for _, v := range row {
		mean += float64(v)
	}
	mean /= float64(len(row))
	var variance float64
	for _, v := range row {
		c := float64(v) - mean
		variance += c * c
	}
	variance /= float64(len(row))
	return mean, 1 / math.Sqrt(variance+eps)
}

func layerNormForward[T float](eps float64, x, gamma, beta, y []T) {
	d := len(gamma)
	for r := 0; r < len(x); r += d {
		mean, rstd := rowStats(x[r:r+d], eps)
		for j := range d {
			y[r+j] = T((float64(x[r+j])-mean)*rstd)*gamma[j] + beta[j]
		}
	}
}

// grads: with ĝ = g ⊙ γ,
//
//	dx = (ĝ − mean(ĝ) − x̂ · mean(ĝ ⊙ x̂)) / √(σ² + ε),
//	dγ = Σ_rows g ⊙ x̂,  dβ = Σ_rows g,
//
// packed as [dx | dγ | dβ].
func (k layerNormKernel) grads(in []*Node, _, g *Node) []*Node {
	packed := apply(layerNormGradKernel{k}, in[0], in[1], g)
	return unpack(packed, in[0].Shape(), in[1].Shape(), in[1].Shape())
}

type layerNormGradKernel struct{ k layerNormKernel }

func (g layerNormGradKernel) name() string { return "grad-" + g.k.name() }
func (g layerNormGradKernel) outShape(in []tensor.Shape) (tensor.Shape, error) {
	return tensor.Shape{in[0].TotalSize() + 2*in[1].TotalSize()}, nil
}
func (g layerNormGradKernel) do(in []*tensor.Dense, out *tensor.Dense) error {
	switch o := out.Data().(type) {
	case []float32:
		layerNormBackward(g.k.eps, in[0].Data().([]float32), in[1].Data().([]float32), in[2].Data().([]float32), o)
	case []float64:
		layerNormBackward(g.k.eps, in[0].Data().([]float64), in[1].Data().([]float64), in[2].Data().([]float64), o)
	}
	return nil
}

func layerNormBackward[T float](eps float64, x, gamma, gOut, packed []T) {
	d := len(gamma)
	dx, dgamma, dbeta := packed[:len(x)], packed[len(x):len(x)+d], packed[len(x)+d:]
	clear(dgamma)
	clear(dbeta)
	xhat := make([]float64, d)
	gh := make([]float64, d)
	for r := 0; r < len(x); r += d {
		mean, rstd := rowStats(x[r:r+d], eps)
		var mg, mgx float64
		for j := range d {
			xhat[j] = (float64(x[r+j]) - mean) * rstd
			gh[j] = float64(gOut[r+j]) * float64(gamma[j])
			mg += gh[j]
			mgx += gh[j] * xhat[j]
			dgamma[j] += gOut[r+j] * T(xhat[j])
			dbeta[j] += gOut[r+j]
		}
		mg /= float64(d)
		mgx /= float64(d)
		for j := range d {
			dx[r+j] = T((gh[j] - mg - xhat[j]*mgx) * rstd)
		}
	}
}
