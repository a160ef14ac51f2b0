package graph

import (
	"fmt"

	"gorgonia.org/tensor"

	"github.com/probformer/probformer/graph/internal/kernels"
)

// bmmKernel multiplies the last two axes of a and b, batching over the
// leading ones: op(a) [.., m, k] · op(b) [.., k, n] → [.., m, n], with op a
// transpose where asked. Gorgonia's BatchedMatMul slices every batch
// element into a new tensor first; this runs gemm on offsets.
type bmmKernel struct{ transA, transB bool }

func (k bmmKernel) name() string { return fmt.Sprintf("bmm(%v,%v)", k.transA, k.transB) }

// dims returns the batch count and m, n, k, checking the shapes.
func (k bmmKernel) dims(a, b tensor.Shape) (batch, m, n, kk int, err error) {
	if len(a) < 3 || len(a) != len(b) {
		return 0, 0, 0, 0, fmt.Errorf("batched matmul of shapes %v and %v: want equal ranks ≥ 3", a, b)
	}
	r := len(a)
	if !a[:r-2].Eq(b[:r-2]) {
		return 0, 0, 0, 0, fmt.Errorf("batched matmul of shapes %v and %v: batch axes differ", a, b)
	}
	m, kk = a[r-2], a[r-1]
	if k.transA {
		m, kk = kk, m
	}
	kb, n := b[r-2], b[r-1]
	if k.transB {
		kb, n = n, kb
	}
	if kb != kk {
		return 0, 0, 0, 0, fmt.Errorf("batched matmul of shapes %v and %v (transposed %v, %v): inner sizes %d and %d", a, b, k.transA, k.transB, kk, kb)
	}
	return a[:r-2].TotalSize(), m, n, kk, nil
}

func (k bmmKernel) outShape(in []tensor.Shape) (tensor.Shape, error) {
	_, m, n, _, err := k.dims(in[0], in[1])
	if err != nil {
		return nil, err
	}
	out := in[0].Clone()
	out[len(out)-2], out[len(out)-1] = m, n
	return out, nil
}

func (k bmmKernel) do(in []*tensor.Dense, out *tensor.Dense) error {
	switch c := data(out).(type) {
	case []float32:
		bmm(k, in[0], in[1], c)
	case []float64:
		bmm(k, in[0], in[1], c)
	}
	return nil
}

func bmm[T float](k bmmKernel, ad, bd *tensor.Dense, c []T) {
	batch, m, n, kk, _ := k.dims(ad.Shape(), bd.Shape())
	a, b := floats[T](ad), floats[T](bd)
	sa, sb := ad.Shape(), bd.Shape()
	lda, ldb := sa[len(sa)-1], sb[len(sb)-1]
	kernels.ParallelFor(batch, func(_, i int) {
		kernels.Gemm(k.transA, k.transB, m, n, kk, 1, a[i*m*kk:], lda, b[i*kk*n:], ldb, 0, c[i*m*n:], n)
	})
}

// grads, with G the output gradient:
//
//	d op(a) = G · op(b)ᵀ,  d op(b) = op(a)ᵀ · G,
//
// each transposed back where a or b was transposed, as more bmm nodes.
func (k bmmKernel) grads(in []*Node, _, g *Node) []*Node {
	a, b := in[0], in[1]
	var da, db *Node
	if !k.transA {
		da = apply(bmmKernel{false, !k.transB}, g, b)
	} else {
		da = apply(bmmKernel{k.transB, true}, b, g)
	}
	if !k.transB {
		db = apply(bmmKernel{!k.transA, false}, a, g)
	} else {
		db = apply(bmmKernel{true, k.transA}, g, a)
	}
	return []*Node{da, db}
}
