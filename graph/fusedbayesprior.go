package graph

import (
	"fmt"
	"runtime"

	"gorgonia.org/tensor"

	"github.com/probformer/probformer/graph/internal/kernels"
)

// BayesPriorLogits is the contextual prior network of Bayesian attention
// (layers/BAYES.md §2) as one op: per head h and key j,
//
//	c_hj = w₂_h · ReLU(W₁_hᵀ k_hj + b₁_h) + b₂_h
//
// k: [B, M, H·d] (heads not split), w1: [H, d, R], b1: [H, R],
// w2: [H, R, 1], b2: [H] → c: [B, H, M], the logits whose softmax over the
// keys a query sees is the prior mean p (BayesAttentionKL's priorLogits).
// Composed from graph ops it costs transposes of k and of c and a
// broadcast per bias, several times its arithmetic. The backward pass is
// analytic, to every input; each head's parameter gradients are summed
// over examples and keys in a fixed order by one goroutine, so they do
// not depend on the core count.
func BayesPriorLogits(k, w1, b1, w2, b2 *Node, heads int) *Node {
	return apply(priorKernel{heads: heads}, k, w1, b1, w2, b2)
}

type priorKernel struct{ heads int }

func (p priorKernel) name() string { return fmt.Sprintf("bayes-prior(h=%d)", p.heads) }

// dims checks the shapes and returns B, M, d and R.
func (p priorKernel) dims(in []tensor.Shape) (b, m, d, r int, err error) {
	h := p.heads
	k, w1, b1, w2, b2 := in[0], in[1], in[2], in[3], in[4]
	if h < 1 || len(k) != 3 || k[2]%h != 0 {
		return 0, 0, 0, 0, fmt.Errorf("k %v does not split into %d heads", k, h)
	}
	b, m, d = k[0], k[1], k[2]/h
	if len(w1) != 3 || w1[0] != h || w1[1] != d {
		return 0, 0, 0, 0, fmt.Errorf("w1 %v, want [%d %d R]", w1, h, d)
	}
	r = w1[2]
	if !b1.Eq(tensor.Shape{h, r}) || !w2.Eq(tensor.Shape{h, r, 1}) || !(b2.Eq(tensor.Shape{h})) {
		return 0, 0, 0, 0, fmt.Errorf("b1 %v, w2 %v, b2 %v, want [%d %d], [%d %d 1], [%d]", b1, w2, b2, h, r, h, r, h)
	}
	return b, m, d, r, nil
}

func (p priorKernel) outShape(in []tensor.Shape) (tensor.Shape, error) {
	b, m, _, _, err := p.dims(in)
	if err != nil {
		return nil, err
	}
	return tensor.Shape{b, p.heads, m}, nil
}

func (p priorKernel) do(in []*tensor.Dense, out *tensor.Dense) error {
	switch o := out.Data().(type) {
	case []float32:
		priorRun(p, in, o, nil, nil)
	case []float64:
		priorRun(p, in, o, nil, nil)
	default:
		return fmt.Errorf("unsupported dtype %v", out.Dtype())
	}
	return nil
}

// grads packs dk, dw1, db1, dw2, db2 from one backward pass and unpacks
// them.
func (p priorKernel) grads(in []*Node, _, g *Node) []*Node {
	packed := apply(priorGradKernel{p}, append(append([]*Node{}, in...), g)...)
	s := make([]tensor.Shape, len(in))
	for i, x := range in {
		s[i] = x.Shape()
	}
	return unpack(packed, s...)
}

// priorGradKernel computes, per head with the hidden units
// u = W₁ᵀ k + b₁ recomputed and G = ∂L/∂c:
//
//	db₂ = Σ G,  dw₂_r = Σ G ReLU(u_r),  du_r = G w₂_r [u_r > 0],
//	db₁ = Σ du,  dW₁ = kᵀ du,  dk = du W₁ᵀ
//
// packed as [dk | dw1 | db1 | dw2 | db2].
type priorGradKernel struct{ p priorKernel }

func (g priorGradKernel) name() string { return "grad-" + g.p.name() }
func (g priorGradKernel) outShape(in []tensor.Shape) (tensor.Shape, error) {
	n := 0
	for _, s := range in[:5] {
		n += s.TotalSize()
	}
	return tensor.Shape{n}, nil
}
func (g priorGradKernel) do(in []*tensor.Dense, out *tensor.Dense) error {
	switch o := out.Data().(type) {
	case []float32:
		priorRun(g.p, in[:5], nil, in[5].Data().([]float32), o)
	case []float64:
		priorRun(g.p, in[:5], nil, in[5].Data().([]float64), o)
	default:
		return fmt.Errorf("unsupported dtype %v", out.Dtype())
	}
	return nil
}

// priorRun computes the logits into c, or with gc (∂L/∂c [B, H, M]) the
// gradients into packed. One head per task.
func priorRun[T float](p priorKernel, in []*tensor.Dense, c, gc, packed []T) {
	b, m, d, r, _ := p.dims(shapes(in))
	h := p.heads
	hd := h * d
	k, w1, b1, w2, b2 := in[0].Data().([]T), in[1].Data().([]T), in[2].Data().([]T), in[3].Data().([]T), in[4].Data().([]T)
	rows := b * m
	var dk, dw1, db1, dw2, db2 []T
	if packed != nil {
		off := 0
		next := func(n int) []T {
			s := packed[off : off+n]
			off += n
			return s
		}
		dk, dw1, db1, dw2, db2 = next(len(k)), next(len(w1)), next(len(b1)), next(len(w2)), next(len(b2))
	}
	// one buffer per worker: the hidden units [B·M, R], or attention.c's
	// [B·M, 16]
	hidden := make([][]T, runtime.GOMAXPROCS(0))
	kernels.ParallelFor(h, func(w, hh int) {
		if hidden[w] == nil {
			hidden[w] = make([]T, rows*max(r, 16))
		}
		if priorHeadC(p, k, w1, b1, w2, b2, c, gc, dk, dw1, db1, dw2, db2, hh, b, m, d, r, hidden[w]) {
			return
		}
		u := hidden[w] // [B·M, R]: W₁ᵀ k + b₁
		w1h, b1h, w2h := w1[hh*d*r:(hh+1)*d*r], b1[hh*r:(hh+1)*r], w2[hh*r:(hh+1)*r]
		kernels.GemmBias(false, false, rows, r, d, 1, k[hh*d:], hd, w1h, r, 0, u, r, b1h)
		if packed == nil {
			for row := range rows {
				ur := u[row*r : (row+1)*r]
				s := b2[hh]
				for t, x := range ur {
					if x > 0 {
						s += x * w2h[t]
					}
				}
				bi, j := row/m, row%m
				c[(bi*h+hh)*m+j] = s
			}
			return
		}
		// u becomes du in place, row by row, after its terms are summed
		var sb2 float64
		sw2, sb1 := make([]float64, r), make([]float64, r)
		for row := range rows {
			bi, j := row/m, row%m
			g := gc[(bi*h+hh)*m+j]
			sb2 += float64(g)
			ur := u[row*r : (row+1)*r]
			for t, x := range ur {
				if x > 0 {
					sw2[t] += float64(g * x)
					ur[t] = g * w2h[t]
					sb1[t] += float64(ur[t])
				} else {
					ur[t] = 0
				}
			}
		}
		db2[hh] = T(sb2)
		for t := range r {
			dw2[hh*r+t], db1[hh*r+t] = T(sw2[t]), T(sb1[t])
		}
		kernels.Gemm(true, false, d, r, rows, 1, k[hh*d:], hd, u, r, 0, dw1[hh*d*r:(hh+1)*d*r], r)
		kernels.Gemm(false, true, rows, d, r, 1, u, r, w1h, r, 0, dk[hh*d:], hd)
	})
}

// priorHeadC runs head hh of priorRun in attention.c (float32, hidden
// width R ≤ 16 padded to 16), with buf [B·M·16] as its scratch, and
// reports whether it did.
func priorHeadC[T float](p priorKernel, k, w1, b1, w2, b2, c, gc, dk, dw1, db1, dw2, db2 []T, hh, b, m, d, r int, buf []T) bool {
	k32, ok := any(k).([]float32)
	if !ok || r > 16 {
		return false
	}
	h := p.heads
	w1p, w1t, b1p, w2p := make([]float32, d*16), make([]float32, 16*d), make([]float32, 16), make([]float32, 16)
	for e := range d {
		for t := range r {
			x := float32(w1[(hh*d+e)*r+t])
			w1p[e*16+t], w1t[t*d+e] = x, x
		}
	}
	for t := range r {
		b1p[t], w2p[t] = float32(b1[hh*r+t]), float32(w2[hh*r+t])
	}
	scratch := any(buf).([]float32)
	if gc == nil {
		return kernels.PriorHead32(k32[hh*d:], h*d, b*m, m, d, w1p, w1t, b1p, w2p, float32(b2[hh]), any(c).([]float32)[hh*m:],
			nil, h*m, scratch, nil, nil, nil, nil, nil)
	}
	dw1p, db1p, dw2p, db2p := make([]float32, d*16), make([]float32, 16), make([]float32, 16), make([]float32, 1)
	if !kernels.PriorHead32(k32[hh*d:], h*d, b*m, m, d, w1p, w1t, b1p, w2p, float32(b2[hh]), nil, any(gc).([]float32)[hh*m:],
		h*m, scratch, any(dk).([]float32)[hh*d:], dw1p, db1p, dw2p, db2p) {
		return false
	}
	for e := range d {
		for t := range r {
			dw1[(hh*d+e)*r+t] = T(dw1p[e*16+t])
		}
	}
	for t := range r {
		db1[hh*r+t], dw2[hh*r+t] = T(db1p[t]), T(dw2p[t])
	}
	db2[hh] = T(db2p[0])
	return true
}
