package graph

import (
	"fmt"
	"runtime/debug"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Node is a value in a computation graph. Build nodes with a Builder and the
// functions of this package, never with Gorgonia directly.
type Node = G.Node

// buildError carries an op's error through a panic to Compile, which turns
// it back into an error. Graph construction reads better as expressions
// than as a chain of error checks.
type buildError struct{ err error }

// recovered turns a panic value r, recovered while doing what, into an
// error. The project's own failures (buildError) are clean one-line
// errors; any other panic — a nil dereference or an index out of range
// in layer code, say — is a bug, and its error carries the stack where
// it happened, so that it can be found (as gonum's mat.Maybe keeps
// foreign panics).
func recovered(what string, r any) error {
	if be, ok := r.(buildError); ok {
		return be.err
	}
	return fmt.Errorf("%s: %v (a bug; where it happened:)\n%s", what, r, debug.Stack())
}

func must(n *Node, err error) *Node {
	if err != nil {
		panic(buildError{err})
	}
	return n
}

func fail(format string, args ...any) {
	panic(buildError{fmt.Errorf(format, args...)})
}

// scalarLike returns a constant scalar of x's dtype.
func scalarLike(x *Node, c float64) *Node {
	if x.Dtype() == Float64.tensorType() {
		return G.NewConstant(c)
	}
	return G.NewConstant(float32(c))
}

// Add returns a + b (same shapes).
func Add(a, b *Node) *Node {
	if elementwise(a, b) && a.Shape().Eq(b.Shape()) {
		return apply(addKernel{}, a, b)
	}
	return must(G.Add(a, b))
}

// Sub returns a − b (same shapes).
func Sub(a, b *Node) *Node { return must(G.Sub(a, b)) }

// Mul returns the element-wise product a ⊙ b (same shapes).
func Mul(a, b *Node) *Node {
	if elementwise(a, b) && a.Shape().Eq(b.Shape()) {
		return apply(mulKernel{}, a, b)
	}
	return must(G.HadamardProd(a, b))
}

// elementwise reports whether a and b are float tensors (not scalars) of
// one dtype, which the custom element-wise kernels take.
func elementwise(a, b *Node) bool {
	dt := a.Dtype()
	return dt == b.Dtype() && (dt == tensor.Float32 || dt == tensor.Float64) &&
		!a.IsScalar() && !b.IsScalar() && a.Dims() > 0 && b.Dims() > 0
}

// Div returns the element-wise quotient a ⊘ b (same shapes).
func Div(a, b *Node) *Node { return must(G.HadamardDiv(a, b)) }

// Scale returns c·x.
func Scale(x *Node, c float64) *Node {
	if elementwise(x, x) {
		return apply(scaleKernel{c: c}, x)
	}
	return must(G.Mul(x, scalarLike(x, c)))
}

// AddScalar returns x + c.
func AddScalar(x *Node, c float64) *Node { return must(G.Add(x, scalarLike(x, c))) }

// BroadcastAdd returns a + b where b is repeated along axes of a that b
// omits: b [4] onto a [B, T, 4] takes axes {0, 1}. An axis 2 ≤ a ≤ rank−2
// is refused: Gorgonia's backward pass reduces over it with the wrong-axis
// bug that Sum works around.
func BroadcastAdd(a, b *Node, axes ...byte) *Node {
	if leading(a, b, axes) {
		return apply(addKernel{}, a, b)
	}
	checkBroadcast(a, axes)
	return must(G.BroadcastAdd(a, b, nil, axes))
}

// BroadcastSub returns a − b with b repeated along axes.
func BroadcastSub(a, b *Node, axes ...byte) *Node {
	checkBroadcast(a, axes)
	return must(G.BroadcastSub(a, b, nil, axes))
}

// BroadcastMul returns a ⊙ b with b repeated along axes.
func BroadcastMul(a, b *Node, axes ...byte) *Node {
	checkBroadcast(a, axes)
	return must(G.BroadcastHadamardProd(a, b, nil, axes))
}

// BroadcastDiv returns a ⊘ b with b repeated along axes.
func BroadcastDiv(a, b *Node, axes ...byte) *Node {
	checkBroadcast(a, axes)
	return must(G.BroadcastHadamardDiv(a, b, nil, axes))
}

// leading reports whether b is repeated exactly along a's leading axes
// (axes = 0, 1, …, and b's shape is the rest of a's), the pattern of a
// bias or a positional encoding, which addKernel adds without a copy.
func leading(a, b *Node, axes []byte) bool {
	k := a.Dims() - b.Dims()
	if !elementwise(a, b) || k <= 0 || len(axes) != k {
		return false
	}
	for i, ax := range axes {
		if int(ax) != i {
			return false
		}
	}
	return isSuffix(b.Shape(), a.Shape())
}

func checkBroadcast(a *Node, axes []byte) {
	for _, ax := range axes {
		if int(ax) >= 2 && int(ax) <= a.Dims()-2 {
			fail("broadcast over axis %d of a rank-%d tensor: Gorgonia's gradient is wrong there; fold the axes with Reshape first", ax, a.Dims())
		}
	}
}

// MatMul returns the matrix product of two 2-D nodes.
func MatMul(a, b *Node) *Node { return must(G.Mul(a, b)) }

// BatchedMatMul multiplies the last two axes of 3-D or 4-D nodes, batching
// over the leading ones, with optional transposes:
// a [.., n, k] × b [.., k, m] → [.., n, m].
func BatchedMatMul(a, b *Node, transA, transB bool) *Node {
	return apply(bmmKernel{transA, transB}, a, b)
}

// Transpose permutes the axes of x.
func Transpose(x *Node, perm ...int) *Node { return must(G.Transpose(x, perm...)) }

// Exp is e^x.
func Exp(x *Node) *Node { return must(G.Exp(x)) }

// Log is ln x.
func Log(x *Node) *Node { return must(G.Log(x)) }

// Log1p is ln(1+x).
func Log1p(x *Node) *Node { return must(G.Log1p(x)) }

// Sqrt is √x.
func Sqrt(x *Node) *Node { return must(G.Sqrt(x)) }

// InvSqrt is 1/√x. Gorgonia's InverseSqrt has a wrong gradient.
func InvSqrt(x *Node) *Node { return must(G.Inverse(must(G.Sqrt(x)))) }

// Square is x².
func Square(x *Node) *Node { return must(G.Square(x)) }

// Pow is x^c for a constant c.
func Pow(x *Node, c float64) *Node { return must(G.Pow(x, scalarLike(x, c))) }

// Neg is −x.
func Neg(x *Node) *Node { return must(G.Neg(x)) }

// Abs is |x|.
func Abs(x *Node) *Node { return must(G.Abs(x)) }

// Tanh is tanh x.
func Tanh(x *Node) *Node { return must(G.Tanh(x)) }

// Sigmoid is 1/(1+e^−x).
func Sigmoid(x *Node) *Node { return must(G.Sigmoid(x)) }

// Softplus is ln(1+e^x).
func Softplus(x *Node) *Node { return must(G.Softplus(x)) }

// ReLU is max(x, 0).
func ReLU(x *Node) *Node { return apply(reluKernel{}, x) }

// Maximum is the element-wise max(a, b).
func Maximum(a, b *Node) *Node { return must(G.MaxBetween(a, b)) }

// Sum adds x over the given axes (all axes if none), dropping them.
func Sum(x *Node, axes ...int) *Node {
	x, axes = reducible(x, axes)
	return must(G.Sum(x, axes...))
}

// Mean averages x over the given axes (all axes if none), dropping them.
func Mean(x *Node, axes ...int) *Node {
	x, axes = reducible(x, axes)
	return must(G.Mean(x, axes...))
}

// Max takes the maximum of x over one axis, dropping it.
func Max(x *Node, axis int) *Node {
	x, axes := reducible(x, []int{axis})
	return must(G.Max(x, axes[0]))
}

// reducible returns x and axes rearranged so that Gorgonia reduces them
// correctly. Its reductions over an axis a with 2 ≤ a ≤ rank−2 silently
// return wrong values (tensor's ReduceDefault folds the axes before a
// into one of the wrong stride); axes 0, 1 and the last are right. Such
// axes are moved to the end and folded into one last axis.
func reducible(x *Node, axes []int) (*Node, []int) {
	rank := x.Dims()
	middle := false
	for _, a := range axes {
		if a >= 2 && a <= rank-2 {
			middle = true
		}
	}
	if !middle {
		return x, axes
	}
	reduced := map[int]bool{}
	for _, a := range axes {
		reduced[a] = true
	}
	var perm, kept []int
	for a := range rank {
		if !reduced[a] {
			perm = append(perm, a)
			kept = append(kept, x.Shape()[a])
		}
	}
	n := 1
	for a := range rank {
		if reduced[a] {
			perm = append(perm, a)
			n *= x.Shape()[a]
		}
	}
	t := Transpose(x, perm...)
	return Reshape(t, append(kept, n)...), []int{len(kept)}
}

// Concat joins nodes along axis. A single node is copied, since Gorgonia's
// one-input Concat aliases like Reshape.
func Concat(axis int, xs ...*Node) *Node {
	if len(xs) == 1 {
		return copyNode(xs[0])
	}
	return must(G.Concat(axis, xs...))
}

// SliceAxis returns x[..., from:to, ...] along axis, keeping the axis.
func SliceAxis(x *Node, axis, from, to int) *Node {
	ss := make([]tensor.Slice, x.Dims())
	ss[axis] = G.S(from, to)
	return must(G.Slice(x, ss...))
}

// Shape returns the static shape of x.
func Shape(x *Node) []int { return []int(x.Shape().Clone()) }
