package graph

import (
	"fmt"
	"math"
	"sync/atomic"

	"gorgonia.org/tensor"

	"github.com/probformer/probformer/graph/internal/kernels"
)

// layerNormKernel normalises the rows of x [..., d] and applies γ, β [d]:
//
//	x̂ = (x − μ) / √(σ² + ε),  y = γ ⊙ x̂ + β
//
// with the biased variance σ², as PyTorch does.
type layerNormKernel struct {
	eps   float64
	saved *savedStats // nil: the backward recomputes the row statistics
}

// savedStats holds each row's mean and 1/√(σ² + ε) from a layer-norm
// node's last forward run, for its backward pass later in the same run
// (as savedWeights does for attention).
// The float32 fast path (layernorm.c) keeps them in mean32, rstd32.
type savedStats struct {
	mean, rstd     []float64
	mean32, rstd32 []float32
	fresh, fast    bool
}

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
	rows := out.Shape().TotalSize() / in[1].Shape().TotalSize()
	s := k.saved
	if s == nil {
		s = &savedStats{} // statistics of this run only
	}
	s.fresh = false
	switch y := data(out).(type) {
	case []float32:
		if len(s.mean32) != rows {
			s.mean32, s.rstd32 = make([]float32, rows), make([]float32, rows)
		}
		x, g, b := floats[float32](in[0]), floats[float32](in[1]), floats[float32](in[2])
		if layerNormFwdRows32(x, g, b, y, k.eps, s.mean32, s.rstd32) {
			s.fresh, s.fast = true, true
			return nil
		}
		mean, rstd := s.stats64(rows)
		layerNormForward(k.eps, x, g, b, y, mean, rstd)
	case []float64:
		mean, rstd := s.stats64(rows)
		layerNormForward(k.eps, floats[float64](in[0]), floats[float64](in[1]), floats[float64](in[2]), y, mean, rstd)
	}
	s.fresh, s.fast = true, false
	return nil
}

// layerNormFwdRows32 is kernels.LayerNormFwd32 with the rows split between the
// cores (each row's values do not depend on the split).
func layerNormFwdRows32(x, g, b, y []float32, eps float64, mean, rstd []float32) bool {
	d := len(g)
	if d == 0 || len(x)%d != 0 || len(mean) != len(x)/d {
		return false
	}
	if kernels.LayerNormFwdShared32(x, g, b, y, eps, mean, rstd) {
		return true // the same chunks and kernel calls in one cgo call
	}
	var failed atomic.Bool
	kernels.SplitRange(len(x), d, func(lo, hi int) {
		if !kernels.LayerNormFwd32(x[lo:hi], g, b, y[lo:hi], eps, mean[lo/d:hi/d], rstd[lo/d:hi/d]) {
			failed.Store(true)
		}
	})
	return !failed.Load()
}

// layerNormBwdRows32 is kernels.LayerNormBwd32 over two halves of the rows, on
// both cores when there are two: dgamma and dbeta are the first half's
// sums plus the second's. The halves are the same with any number of
// cores, so the values are too. The output gradient is gOut, or gOut +
// gOut2 when gOut2 is not nil.
func layerNormBwdRows32(x, g, gOut, gOut2, mean, rstd, dx, dgamma, dbeta []float32) bool {
	d := len(g)
	if d == 0 || len(x)%d != 0 || len(mean) != len(x)/d {
		return false
	}
	rows := len(x) / d
	if len(x) < 2*kernels.MinPart || rows < 2 {
		return kernels.LayerNormBwd32(x, g, gOut, gOut2, mean, rstd, dx, dgamma, dbeta)
	}
	h := rows / 2 * d
	part := make([]float32, 2*d) // the second half's dgamma, dbeta
	// Both halves in one cgo call, the helper's without a Go hand-over;
	// the same halves, the same sums.
	if kernels.LayerNormBwdHalves32(x, g, gOut, gOut2, mean, rstd, dx, dgamma, dbeta, part) {
		for j := range d {
			dgamma[j] += part[j]
			dbeta[j] += part[d+j]
		}
		return true
	}
	half := func(g2 []float32, lo, hi int) []float32 {
		if g2 == nil {
			return nil
		}
		return g2[lo:hi]
	}
	var failed atomic.Bool
	kernels.RunShares(2, func(w int) {
		ok := false
		if w == 0 {
			ok = kernels.LayerNormBwd32(x[:h], g, gOut[:h], half(gOut2, 0, h), mean[:h/d], rstd[:h/d], dx[:h], dgamma, dbeta)
		} else {
			ok = kernels.LayerNormBwd32(x[h:], g, gOut[h:], half(gOut2, h, len(x)), mean[h/d:], rstd[h/d:], dx[h:],
				part[:d], part[d:])
		}
		if !ok {
			failed.Store(true)
		}
	})
	if failed.Load() {
		return false
	}
	for j := range d {
		dgamma[j] += part[j]
		dbeta[j] += part[d+j]
	}
	return true
}

// stats64 returns float64 buffers for rows' statistics.
func (s *savedStats) stats64(rows int) ([]float64, []float64) {
	if len(s.mean) != rows {
		s.mean, s.rstd = make([]float64, rows), make([]float64, rows)
	}
	return s.mean, s.rstd
}

// rowStats returns the mean and 1/√(σ² + ε) of a row, in float64. Four
// partial sums keep the additions from waiting on each other.
func rowStats[T float](row []T, eps float64) (mean, rstd float64) {
	var s [4]float64
	j := 0
	for ; j+4 <= len(row); j += 4 {
		s[0] += float64(row[j])
		s[1] += float64(row[j+1])
		s[2] += float64(row[j+2])
		s[3] += float64(row[j+3])
	}
	for ; j < len(row); j++ {
		s[0] += float64(row[j])
	}
	mean = ((s[0] + s[1]) + (s[2] + s[3])) / float64(len(row))
	s = [4]float64{}
	j = 0
	for ; j+4 <= len(row); j += 4 {
		c0, c1 := float64(row[j])-mean, float64(row[j+1])-mean
		c2, c3 := float64(row[j+2])-mean, float64(row[j+3])-mean
		s[0] += c0 * c0
		s[1] += c1 * c1
		s[2] += c2 * c2
		s[3] += c3 * c3
	}
	for ; j < len(row); j++ {
		c := float64(row[j]) - mean
		s[0] += c * c
	}
	variance := ((s[0] + s[1]) + (s[2] + s[3])) / float64(len(row))
	return mean, 1 / math.Sqrt(variance+eps)
}

// layerNormForward normalises the rows of x into y, and records each
// row's statistics in means and rstds when they are given.
func layerNormForward[T float](eps float64, x, gamma, beta, y []T, means, rstds []float64) {
	d := len(gamma)
	for r := 0; r < len(x); r += d {
		mean, rstd := rowStats(x[r:r+d], eps)
		if means != nil {
			means[r/d], rstds[r/d] = mean, rstd
		}
		xr, yr := x[r:r+d], y[r:r+d]
		for j, g := range gamma {
			yr[j] = T((float64(xr[j])-mean)*rstd)*g + beta[j]
		}
	}
}

// grads: with ĝ = g ⊙ γ,
//
//	dx = (ĝ − mean(ĝ) − x̂ · mean(ĝ ⊙ x̂)) / √(σ² + ε),
//	dγ = Σ_rows g ⊙ x̂,  dβ = Σ_rows g,
//
// packed as [dx | dγ | dβ]. Where g is the sum of two gradients (a
// grad-sum, as where a residual stream reaches the norm's output), the
// backward takes both and adds them as it reads them (splitGradSum).
func (k layerNormKernel) grads(in []*Node, _, g *Node) []*Node {
	var packed *Node
	if a, b, ok := splitGradSum(g); ok {
		packed = apply(layerNormGradKernel{k: k, sum: true}, in[0], in[1], a, b)
	} else {
		packed = apply(layerNormGradKernel{k: k}, in[0], in[1], g)
	}
	return unpack(packed, in[0].Shape(), in[1].Shape(), in[1].Shape())
}

// layerNormGradKernel: inputs x, γ and the output gradient G, or with
// sum set the two gradients whose sum G is.
type layerNormGradKernel struct {
	k   layerNormKernel
	sum bool
}

func (g layerNormGradKernel) name() string { return gradName(g.k.name(), g.sum) }
func (g layerNormGradKernel) outShape(in []tensor.Shape) (tensor.Shape, error) {
	return tensor.Shape{in[0].TotalSize() + 2*in[1].TotalSize()}, nil
}
func (g layerNormGradKernel) do(in []*tensor.Dense, out *tensor.Dense) error {
	rows := in[0].Shape().TotalSize() / in[1].Shape().TotalSize()
	s := g.k.saved
	fresh := s != nil && s.fresh
	if s != nil {
		s.fresh = false
	}
	switch o := data(out).(type) {
	case []float32:
		x, gam, gOut := floats[float32](in[0]), floats[float32](in[1]), floats[float32](in[2])
		var gOut2 []float32
		if g.sum {
			gOut2 = floats[float32](in[3])
		}
		n, d := len(x), len(gam)
		dx, dgamma, dbeta := o[:n], o[n:n+d], o[n+d:]
		if fresh && s.fast && len(s.mean32) == rows {
			clear(dgamma)
			clear(dbeta)
			if layerNormBwdRows32(x, gam, gOut, gOut2, s.mean32, s.rstd32, dx, dgamma, dbeta) {
				return nil
			}
		}
		var mean, rstd []float64
		if fresh && !s.fast && len(s.mean) == rows {
			mean, rstd = s.mean, s.rstd
		}
		layerNormBackward(g.k.eps, x, gam, summed(gOut, gOut2), o, mean, rstd)
	case []float64:
		var mean, rstd []float64
		if fresh && !s.fast && len(s.mean) == rows {
			mean, rstd = s.mean, s.rstd
		}
		gOut := floats[float64](in[2])
		if g.sum {
			gOut = summed(gOut, floats[float64](in[3]))
		}
		layerNormBackward(g.k.eps, floats[float64](in[0]), floats[float64](in[1]), gOut, o, mean, rstd)
	}
	return nil
}

// gradName names the backward of the op called fwd, "+sum" marking one
// that takes the two gradients of a grad-sum (splitGradSum).
func gradName(fwd string, sum bool) string {
	if sum {
		return "grad-" + fwd + "+sum"
	}
	return "grad-" + fwd
}

// summed is a, or a + b in a new slice when b is not nil: the values
// grad-sum would have handed on.
func summed[T float](a, b []T) []T {
	if b == nil {
		return a
	}
	s := make([]T, len(a))
	for i := range s {
		s[i] = a[i] + b[i]
	}
	return s
}

// layerNormBackward computes the packed gradients, with each row's
// statistics taken from means and rstds when given (the forward pass's)
// or recomputed.
func layerNormBackward[T float](eps float64, x, gamma, gOut, packed []T, means, rstds []float64) {
	d := len(gamma)
	dx, dgamma, dbeta := packed[:len(x)], packed[len(x):len(x)+d], packed[len(x)+d:]
	clear(dgamma)
	clear(dbeta)
	xhat := make([]float64, d)
	gh := make([]float64, d)
	for r := 0; r < len(x); r += d {
		var mean, rstd float64
		if means != nil {
			mean, rstd = means[r/d], rstds[r/d]
		} else {
			mean, rstd = rowStats(x[r:r+d], eps)
		}
		xr, gr, dxr := x[r:r+d], gOut[r:r+d], dx[r:r+d]
		var mg, mgx [2]float64
		for j, gam := range gamma {
			xh := (float64(xr[j]) - mean) * rstd
			g := gr[j]
			h := float64(g) * float64(gam)
			xhat[j], gh[j] = xh, h
			mg[j&1] += h
			mgx[j&1] += h * xh
			dgamma[j] += g * T(xh)
			dbeta[j] += g
		}
		m1 := (mg[0] + mg[1]) / float64(d)
		m2 := (mgx[0] + mgx[1]) / float64(d)
		for j := range dxr {
			dxr[j] = T((gh[j] - m1 - xhat[j]*m2) * rstd)
		}
	}
}
