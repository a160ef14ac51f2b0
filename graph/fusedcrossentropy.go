package graph

import (
	"fmt"
	"math"
	"runtime"

	"gorgonia.org/tensor"

	"github.com/probformer/probformer/graph/internal/kernels"
)

// SoftmaxCrossEntropy returns the per-token cross-entropy [...] of logits
// [..., V] against integer targets [...], with label smoothing ε as PyTorch
// defines it:
//
//	loss = −(1−ε)·log p_y − ε·mean_c log p_c,   p = softmax(logits)
//
// One fused op: the log-softmax is never materialised, and the backward
// pass is g·(p − (1−ε)·onehot(y) − ε/V). A target outside [0, V) fails the
// run with an error.
func SoftmaxCrossEntropy(logits, targets *Node, smoothing float64) *Node {
	return apply(crossEntropyKernel{smoothing: smoothing}, logits, targets)
}

type crossEntropyKernel struct{ smoothing float64 }

func (k crossEntropyKernel) name() string { return fmt.Sprintf("softmax-xent(%g)", k.smoothing) }

func (k crossEntropyKernel) outShape(in []tensor.Shape) (tensor.Shape, error) {
	l, t := in[0], in[1]
	if len(l) != len(t)+1 || !l[:len(t)].Eq(t) {
		return nil, fmt.Errorf("cross-entropy: logits %v and targets %v, want [..., V] and [...]", l, t)
	}
	return t.Clone(), nil
}

func (k crossEntropyKernel) constInput(i int) bool { return i == 1 }

func (k crossEntropyKernel) do(in []*tensor.Dense, out *tensor.Dense) error {
	switch o := data(out).(type) {
	case []float32:
		return crossEntropy(k.smoothing, floats[float32](in[0]), in[1].Data().([]int), nil, o)
	case []float64:
		return crossEntropy(k.smoothing, floats[float64](in[0]), in[1].Data().([]int), nil, o)
	}
	return nil
}

func (k crossEntropyKernel) grads(in []*Node, _, g *Node) []*Node {
	return []*Node{apply(crossEntropyGradKernel{k}, in[0], in[1], g), nil}
}

type crossEntropyGradKernel struct{ k crossEntropyKernel }

func (g crossEntropyGradKernel) name() string { return "grad-" + g.k.name() }
func (g crossEntropyGradKernel) outShape(in []tensor.Shape) (tensor.Shape, error) {
	return in[0].Clone(), nil
}
func (g crossEntropyGradKernel) do(in []*tensor.Dense, out *tensor.Dense) error {
	switch o := data(out).(type) {
	case []float32:
		return crossEntropy(g.k.smoothing, floats[float32](in[0]), in[1].Data().([]int), floats[float32](in[2]), o)
	case []float64:
		return crossEntropy(g.k.smoothing, floats[float64](in[0]), in[1].Data().([]int), floats[float64](in[2]), o)
	}
	return nil
}

// crossEntropy writes the per-token losses to out, or, given the loss
// gradient g, the logits' gradient. Rows are independent, so they are
// shared among the cores.
func crossEntropy[T float](eps float64, logits []T, targets []int, g, out []T) error {
	rows := len(targets)
	v := len(logits) / rows
	for _, y := range targets {
		if y < 0 || y >= v {
			return fmt.Errorf("target %d outside [0, %d)", y, v)
		}
	}
	const chunk = 64
	scratchRows := make([][]T, runtime.GOMAXPROCS(0))
	scratch := func(w, n int) []T {
		if scratchRows[w] == nil {
			scratchRows[w] = make([]T, n)
		}
		return scratchRows[w]
	}
	kernels.ParallelFor((rows+chunk-1)/chunk, func(w, c int) {
		for r := c * chunk; r < min((c+1)*chunk, rows); r++ {
			x := logits[r*v : (r+1)*v]
			m, sum := rowMaxSum(x)
			y := targets[r]
			if g == nil {
				lse := float64(m) + math.Log(kernels.ExpRow(scratch(w, v), x, m))
				meanLogP := sum/float64(v) - lse
				out[r] = T(-(1-eps)*(float64(x[y])-lse) - eps*meanLogP)
				continue
			}
			// d = g·(softmax(x) − ε/V − (1−ε)·onehot(y))
			d := out[r*v : (r+1)*v]
			z := kernels.ExpRow(d, x, m)
			scale, off := T(float64(g[r])/z), T(float64(g[r])*eps/float64(v))
			scaleShift(d, scale, off)
			d[y] -= T(float64(g[r]) * (1 - eps))
		}
	})
	return nil
}

// rowMaxSum returns the largest value of a row and the sum of its values.
func rowMaxSum[T float](x []T) (T, float64) {
	if x32, ok := any(x).([]float32); ok {
		if m, sum, ok := kernels.MaxSum32(x32); ok {
			return T(m), sum
		}
	}
	m := x[0]
	var sum float64
	for _, e := range x {
		m = max(m, e)
		sum += float64(e)
	}
	return m, sum
}

// scaleShift sets d[c] = d[c]·scale − off.
func scaleShift[T float](d []T, scale, off T) {
	if d32, ok := any(d).([]float32); ok && kernels.ScaleShift32(d32, float32(scale), float32(off)) {
		return
	}
	for c := range d {
		d[c] = d[c]*scale - off
	}
}
