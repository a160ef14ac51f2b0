package graph

import (
	"fmt"
	"sync/atomic"

	"gorgonia.org/tensor"

	"github.com/probformer/probformer/graph/internal/kernels"
)

// AddLayerNorm returns LayerNorm(x + f, γ, β, eps), a residual connection
// and the layer norm after it (post-LN Transformers, Set Transformer's
// MAB) as one op: x, f [..., d], γ, β [d] → [..., d]. The sum is formed
// row by row just before its row is normalised and kept for the backward
// pass, whose one output holds the gradients of x and f (the same
// values), γ and β. Its values are those of Add then LayerNorm.
func AddLayerNorm(x, f, gamma, beta *Node, eps float64) *Node {
	return apply(newAddLayerNorm(eps, false), x, f, gamma, beta)
}

// DropoutAddLayerNorm returns LayerNorm(x + Dropout(f)) as one op: the
// dropout mask is an input called name, drawn as Builder.Dropout's
// masks are (it is Dropout's mask at the same place in the order of
// masks), and multiplies f as the sum is formed. In an evaluation graph,
// or with p = 0, it is AddLayerNorm.
func (b *Builder) DropoutAddLayerNorm(name string, x, f *Node, p float64, gamma, beta *Node, eps float64) *Node {
	if !b.train || p <= 0 {
		return AddLayerNorm(x, f, gamma, beta, eps)
	}
	if p >= 1 {
		fail("dropout %s: p = %g, want < 1", name, p)
	}
	mask := b.Input(name, Shape(f)...)
	b.dropouts = append(b.dropouts, dropoutMask{name: name, p: p})
	return apply(newAddLayerNorm(eps, true), x, f, mask, gamma, beta)
}

// addLayerNormKernel is LayerNorm(x + f ⊙ D) (D, the dropout mask, when
// dropout is set): inputs x, f, [D], γ, β.
type addLayerNormKernel struct {
	ln      layerNormKernel // its saved statistics serve the backward
	dropout bool
	sum     *savedSum
}

// savedSum keeps the sum x + f ⊙ D of the last forward run for the
// backward pass (fresh as savedWeights' is).
type savedSum struct {
	s     any // []float32 or []float64
	fresh bool
}

func newAddLayerNorm(eps float64, dropout bool) addLayerNormKernel {
	return addLayerNormKernel{ln: layerNormKernel{eps: eps, saved: &savedStats{}}, dropout: dropout, sum: &savedSum{}}
}

func (k addLayerNormKernel) name() string {
	return fmt.Sprintf("add-layernorm(%g,dropout=%v)", k.ln.eps, k.dropout)
}

// params returns the inputs γ, β follow x and f (and D).
func (k addLayerNormKernel) params() int {
	if k.dropout {
		return 3
	}
	return 2
}

func (k addLayerNormKernel) outShape(in []tensor.Shape) (tensor.Shape, error) {
	if len(in) != k.params()+2 {
		return nil, fmt.Errorf("add-layernorm: %d inputs, want %d", len(in), k.params()+2)
	}
	for _, s := range in[1:k.params()] {
		if !s.Eq(in[0]) {
			return nil, fmt.Errorf("add-layernorm: x %v and %v differ", in[0], s)
		}
	}
	return k.ln.outShape(append([]tensor.Shape{in[0]}, in[k.params():]...))
}

func (k addLayerNormKernel) do(in []*tensor.Dense, out *tensor.Dense) error {
	if !k.dropout && k.fused32(in, out) {
		return nil
	}
	s := k.sumOf(in)
	k.sum.fresh = true
	return k.ln.do([]*tensor.Dense{s, in[k.params()], in[k.params()+1]}, out)
}

// fused32 runs the float32 residual and layer norm without dropout as
// one pass over the rows (layernorm.c's pf_add_layernorm_fwd), in row
// chunks on both cores: each row of the sum is normalised while it is
// in cache, where sumOf then LayerNorm write it out and read it back.
// Its values are theirs: the same float32 sums, then the same row
// arithmetic. It reports false, having set nothing fresh, where the C
// kernel does not run (no AVX2, d not a multiple of 8).
func (k addLayerNormKernel) fused32(in []*tensor.Dense, out *tensor.Dense) bool {
	x, ok := data(in[0]).([]float32)
	y, ok2 := data(out).([]float32)
	if !ok || !ok2 {
		return false
	}
	f, g, b := floats[float32](in[1]), floats[float32](in[2]), floats[float32](in[3])
	d := len(g)
	if d == 0 || len(x)%d != 0 || len(f) != len(x) || len(y) != len(x) {
		return false
	}
	st := k.ln.saved
	st.fresh, k.sum.fresh = false, false
	rows := len(x) / d
	if len(st.mean32) != rows {
		st.mean32, st.rstd32 = make([]float32, rows), make([]float32, rows)
	}
	s := keep[float32](&k.sum.s, len(x))
	if kernels.AddLayerNormFwdShared32(x, f, g, b, s, y, k.ln.eps, st.mean32, st.rstd32) {
		// The same chunks and kernel calls in one cgo call, the helper's
		// without a Go hand-over.
		st.fresh, st.fast = true, true
		k.sum.fresh = true
		return true
	}
	var failed atomic.Bool
	kernels.SplitRange(len(x), d, func(lo, hi int) {
		if !kernels.AddLayerNormFwd32(x[lo:hi], f[lo:hi], g, b, s[lo:hi], y[lo:hi], k.ln.eps, st.mean32[lo/d:hi/d], st.rstd32[lo/d:hi/d]) {
			failed.Store(true)
		}
	})
	if failed.Load() {
		return false
	}
	st.fresh, st.fast = true, true
	k.sum.fresh = true
	return true
}

// sumOf forms x + f ⊙ D from the node's inputs in the kept buffer, as a
// tensor of x's shape.
func (k addLayerNormKernel) sumOf(in []*tensor.Dense) *tensor.Dense {
	k.sum.fresh = false
	switch x := data(in[0]).(type) {
	case []float32:
		s := keep[float32](&k.sum.s, len(x))
		addDropped(x, floats[float32](in[1]), dropMask[float32](k, in), s)
		return tensor.New(tensor.WithShape(in[0].Shape()...), tensor.WithBacking(s))
	case []float64:
		s := keep[float64](&k.sum.s, len(x))
		addDropped(x, floats[float64](in[1]), dropMask[float64](k, in), s)
		return tensor.New(tensor.WithShape(in[0].Shape()...), tensor.WithBacking(s))
	}
	return nil
}

func dropMask[T float](k addLayerNormKernel, in []*tensor.Dense) []T {
	if !k.dropout {
		return nil
	}
	return floats[T](in[2])
}

// keep returns the buffer of n values kept in *p, made anew when it is
// missing or of another size.
func keep[T float](p *any, n int) []T {
	b, ok := (*p).([]T)
	if !ok || len(b) != n {
		b = make([]T, n)
		*p = b
	}
	return b
}

// addDropped sets s = x + f ⊙ d (d nil: x + f), the product rounded
// before the sum as Dropout then Add round it, on both cores when large.
func addDropped[T float](x, f, d, s []T) {
	kernels.SplitRange(len(x), 16, func(lo, hi int) {
		x, f, s := x[lo:hi], f[lo:hi], s[lo:hi]
		if d != nil {
			// mulInto's own split would nest in this one
			if f32, ok := any(f).([]float32); !ok || !kernels.Mul32(f32, any(d[lo:hi]).([]float32), any(s).([]float32)) {
				mulIntoGo(f, d[lo:hi], s)
			}
			f = s
		}
		if x32, ok := any(x).([]float32); ok && kernels.AddRepeat32(x32, any(f).([]float32), any(s).([]float32)) {
			return
		}
		addRepeatGo(x, f, s)
	})
}

// constInput: the dropout mask takes no gradient.
func (k addLayerNormKernel) constInput(i int) bool { return k.dropout && i == 2 }

// grads: with dz the layer norm's input gradient (layerNormKernel's
// grads), dx = dz, df = dz ⊙ D (dz without dropout), dγ and dβ as
// LayerNorm's; packed as [dz | dγ | dβ | df] and read as views. A G that
// is the sum of two gradients is taken as both (splitGradSum).
func (k addLayerNormKernel) grads(in []*Node, _, g *Node) []*Node {
	p := k.params()
	var packed *Node
	if a, b, ok := splitGradSum(g); ok {
		packed = apply(addLayerNormGradKernel{k: k, sum: true}, append(append([]*Node{}, in...), a, b)...)
	} else {
		packed = apply(addLayerNormGradKernel{k: k}, append(append([]*Node{}, in...), g)...)
	}
	xs, ds := in[0].Shape(), in[p].Shape()
	if !k.dropout {
		parts := unpack(packed, xs, ds, ds)
		return []*Node{parts[0], parts[0], parts[1], parts[2]}
	}
	parts := unpack(packed, xs, ds, ds, xs)
	return []*Node{parts[0], parts[3], nil, parts[1], parts[2]}
}

// addLayerNormGradKernel: inputs those of the forward node, then G, or
// with sum set the two gradients whose sum G is.
type addLayerNormGradKernel struct {
	k   addLayerNormKernel
	sum bool
}

func (g addLayerNormGradKernel) name() string { return gradName(g.k.name(), g.sum) }
func (g addLayerNormGradKernel) outShape(in []tensor.Shape) (tensor.Shape, error) {
	n := in[0].TotalSize() + 2*in[g.k.params()].TotalSize()
	if g.k.dropout {
		n += in[0].TotalSize()
	}
	return tensor.Shape{n}, nil
}

func (g addLayerNormGradKernel) do(in []*tensor.Dense, out *tensor.Dense) error {
	k := g.k
	fwd, grads := in[:k.params()+2], in[k.params()+2:]
	var s *tensor.Dense
	if sum, ok := k.sum.s.([]float32); ok && k.sum.fresh && len(sum) == in[0].Shape().TotalSize() && in[0].Dtype() == tensor.Float32 {
		s = tensor.New(tensor.WithShape(in[0].Shape()...), tensor.WithBacking(sum))
	} else if sum, ok := k.sum.s.([]float64); ok && k.sum.fresh && len(sum) == in[0].Shape().TotalSize() && in[0].Dtype() == tensor.Float64 {
		s = tensor.New(tensor.WithShape(in[0].Shape()...), tensor.WithBacking(sum))
	} else {
		s = k.sumOf(fwd)
	}
	k.sum.fresh = false
	n, d := in[0].Shape().TotalSize(), in[k.params()].Shape().TotalSize()
	lnOut := out
	if k.dropout {
		lnOut = sliceDense(out, n+2*d)
	}
	if err := (layerNormGradKernel{k: k.ln, sum: g.sum}).do(append([]*tensor.Dense{s, in[k.params()]}, grads...), lnOut); err != nil {
		return err
	}
	if k.dropout {
		switch o := data(out).(type) {
		case []float32:
			mulInto(o[:n], floats[float32](in[2]), o[n+2*d:])
		case []float64:
			mulInto(o[:n], floats[float64](in[2]), o[n+2*d:])
		}
	}
	return nil
}

// sliceDense returns a 1-D view of t's first n values.
func sliceDense(t *tensor.Dense, n int) *tensor.Dense {
	switch d := data(t).(type) {
	case []float32:
		return tensor.New(tensor.WithShape(n), tensor.WithBacking(d[:n:n]))
	case []float64:
		return tensor.New(tensor.WithShape(n), tensor.WithBacking(d[:n:n]))
	}
	return t
}
