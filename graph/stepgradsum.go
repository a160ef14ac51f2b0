package graph

import (
	"fmt"
	"slices"
	"sync"

	"gonum.org/v1/gonum/graph"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/probformer/probformer/graph/internal/kernels"
)

// Where a node feeds several ops, Gorgonia's backward pass sums the
// gradients that reach it with its own Add (ReduceAdd): a loop in Go
// over the whole tensor, on one core, while the other waits. In a Set
// Transformer step there are six such sums of 64K–128K values. When the
// gradient handed to a custom op's SymDiff is such a sum, ownGradSum
// builds the same sum as a gradSumKernel, split between the cores, and
// leaves Gorgonia's node out of the program it compiles (liveGraph), so
// the tape machine never runs it. Each element is the same float addition a + b (commutative, so
// operand order does not matter), so the values are Gorgonia's bit for
// bit.

// gorgoniaGradSums, set by tests, keeps Gorgonia's sums, to compare.
var gorgoniaGradSums bool

// ownGradSum returns grad, or, when grad is Gorgonia's sum of gradients
// (ReduceAdd's Add of two tensors of one shape and float dtype) that no
// node reads yet, a gradSumKernel node over the same two tensors, with
// grad left for liveGraph to drop. Chains (three or more gradients, summed
// pairwise in order) are rebuilt pair by pair in the same order.
func ownGradSum(grad *Node) *Node {
	if gorgoniaGradSums {
		return grad
	}
	return ownSum(grad, nil)
}

// ownSum is ownGradSum on a sum whose one reader, if any, is the sum
// reader (the next link of a chain, which ownSum replaces too).
func ownSum(grad, reader *Node) *Node {
	a, b, ok := gradientAdd(grad, reader)
	if !ok {
		return grad
	}
	a, b = ownSum(a, grad), ownSum(b, grad)
	sum := must(G.ApplyOp(gradSumOp(a, b), a, b))
	deadSums.add(grad)
	return sum
}

// deadSums holds, by graph, Gorgonia's sums that ownSum replaced, until
// the program is compiled: they stay in the graph (Gorgonia's
// RemoveNode leaves its index of node ids pointing at the wrong nodes)
// but read by no node, and Program.finish compiles only what the other
// roots reach (liveGraph).
var deadSums = deadSet{m: map[*G.ExprGraph][]*Node{}}

type deadSet struct {
	mu sync.Mutex
	m  map[*G.ExprGraph][]*Node
}

func (d *deadSet) add(n *Node) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.m[n.Graph()] = append(d.m[n.Graph()], n)
}

// take returns and forgets the sums replaced in g.
func (d *deadSet) take(g *G.ExprGraph) []*Node {
	d.mu.Lock()
	defer d.mu.Unlock()
	ns := d.m[g]
	delete(d.m, g)
	return ns
}

// liveGraph returns g, or, when ownSum replaced sums in it, the subgraph
// every node reads from that no node reads (the outputs' and loss's
// reads, the parameters' gradients) but the replaced sums, which holds
// every node but those sums. A replaced sum that is also a gradient in
// keep (a Gorgonia op that passes its gradient through, as Add does, can
// make one sum both a custom op's incoming gradient and a parameter's
// gradient) stays: the program computes it as well as the op's own sum.
func liveGraph(g *G.ExprGraph, keep []*Node) *G.ExprGraph {
	dead := slices.DeleteFunc(deadSums.take(g), func(n *Node) bool { return slices.Contains(keep, n) })
	if len(dead) == 0 {
		return g
	}
	var roots []*Node
	for _, n := range g.AllNodes() {
		if g.To(n.ID()).Len() == 0 && !slices.Contains(dead, n) {
			roots = append(roots, n)
		}
	}
	return g.SubgraphRoots(roots...)
}

// gradientAdd reports whether n is Gorgonia's Add of two float tensors
// of n's shape, in the graph and read by no node but reader, and
// returns its operands. Handed to SymDiff as a gradient, it is ReduceAdd's sum (or a
// Gorgonia op's gradient that is a plain sum): a value that only this
// op's backward reads, unless a Gorgonia op passed it through unchanged
// as a parameter's gradient too, which liveGraph then keeps.
func gradientAdd(n, reader *Node) (a, b *Node, ok bool) {
	g := n.Graph()
	if g == nil || n.Op() == nil || n.Op().String() != "+ false" || fmt.Sprintf("%T", n.Op()) != "gorgonia.elemBinOp" {
		return nil, nil, false
	}
	if !g.Has(n.ID()) || !onlyReader(g.To(n.ID()), reader) {
		return nil, nil, false
	}
	ch, ok := operands2(g, n)
	if !ok {
		return nil, nil, false
	}
	for _, c := range ch {
		if (c.Dtype() != tensor.Float32 && c.Dtype() != tensor.Float64) || c.Dtype() != n.Dtype() ||
			len(c.Shape()) == 0 || !c.Shape().Eq(n.Shape()) {
			return nil, nil, false
		}
	}
	return ch[0], ch[1], true
}

// onlyReader reports whether the readers of a node are none, or reader
// alone.
func onlyReader(readers graph.Nodes, reader *Node) bool {
	switch readers.Len() {
	case 0:
		return true
	case 1:
		readers.Next()
		return reader != nil && readers.Node() == graph.Node(reader)
	}
	return false
}

// splitGradSum reports whether g is a grad-sum node that ownGradSum
// built and no node reads yet, and returns the two gradients it adds,
// with g left for liveGraph to drop: an op whose backward reads its
// output gradient once a row (the layer norms') takes both and adds each
// pair as it reads it, the same float addition, where the grad-sum wrote
// the whole sum out for it to read back.
func splitGradSum(g *Node) (a, b *Node, ok bool) {
	op, isOp := g.Op().(customOp)
	if !isOp {
		return nil, nil, false
	}
	if _, isSum := op.k.(gradSumKernel); !isSum {
		return nil, nil, false
	}
	gr := g.Graph()
	if gr == nil || !gr.Has(g.ID()) || gr.To(g.ID()).Len() != 0 {
		return nil, nil, false
	}
	ch, ok := operands2(gr, g)
	if !ok {
		return nil, nil, false
	}
	deadSums.add(g)
	return ch[0], ch[1], true
}

// operands2 returns the two nodes that n, a node of g, reads, with ok
// false unless it reads two.
func operands2(g *G.ExprGraph, n *Node) (ch [2]*Node, ok bool) {
	from := g.From(n.ID())
	if from.Len() != 2 {
		return ch, false
	}
	for i := 0; from.Next(); i++ {
		c, isNode := from.Node().(*Node)
		if !isNode {
			return ch, false
		}
		ch[i] = c
	}
	return ch, true
}

// gradSumOp is the custom op of gradSumKernel on a and b.
func gradSumOp(a, b *Node) customOp {
	op := customOp{k: gradSumKernel{}, arity: 2, out: &outBuffer{}, outDims: a.Dims()}
	op.inDims[0], op.inDims[1] = a.Dims(), b.Dims()
	return op
}

// gradSumKernel is a + b of two tensors of one shape, element by
// element, in parts on both cores: a [s...], b [s...] → [s...].
type gradSumKernel struct{}

func (gradSumKernel) name() string { return "grad-sum" }

func (gradSumKernel) outShape(in []tensor.Shape) (tensor.Shape, error) {
	if len(in) != 2 || !in[0].Eq(in[1]) {
		return nil, fmt.Errorf("grad-sum: shapes %v", in)
	}
	return in[0].Clone(), nil
}

func (gradSumKernel) do(in []*tensor.Dense, out *tensor.Dense) error {
	switch y := data(out).(type) {
	case []float32:
		addSame(floats[float32](in[0]), floats[float32](in[1]), y)
	case []float64:
		addSame(floats[float64](in[0]), floats[float64](in[1]), y)
	default:
		return fmt.Errorf("unsupported dtype %v", out.Dtype())
	}
	return nil
}

// addSame sets y = a + b (equal lengths), in chunks on both cores.
func addSame[T float](a, b, y []T) {
	// float32 with AVX2: the same chunks and kernel calls in one cgo call,
	// so the helper runs its chunks without a Go hand-over.
	if a32, ok := any(a).([]float32); ok && kernels.AddShared32(a32, any(b).([]float32), any(y).([]float32)) {
		return
	}
	kernels.SplitRange(len(a), 8, func(lo, hi int) {
		a, b, y := a[lo:hi], b[lo:hi], y[lo:hi]
		if a32, ok := any(a).([]float32); ok && kernels.AddRepeat32(a32, any(b).([]float32), any(y).([]float32)) {
			return
		}
		addRepeatGo(a, b, y)
	})
}

// grads: da = db = g. Built only if a gradient of a gradient is taken.
func (gradSumKernel) grads(_ []*Node, _, g *Node) []*Node { return []*Node{g, g} }
