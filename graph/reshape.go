package graph

import (
	"hash"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// copyOp is the identity with a fresh output buffer. Gorgonia's Reshape
// output shares its input's backing but gets its own register, so a later
// in-place op writes into the source and corrupts gradients
// (GORGONIA.md, Known bugs); copying after it breaks the alias.
type copyOp struct{}

func (copyOp) Arity() int { return 1 }
func (copyOp) Type() hm.Type {
	a := hm.TypeVariable('a')
	return hm.NewFnType(a, a)
}
func (copyOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	return in[0].(tensor.Shape).Clone(), nil
}
func (copyOp) ReturnsPtr() bool      { return false }
func (copyOp) CallsExtern() bool     { return false }
func (copyOp) OverwritesInput() int  { return -1 }
func (copyOp) WriteHash(h hash.Hash) { h.Write([]byte("probformer.copy")) }
func (copyOp) Hashcode() uint32      { return 0xC0FFEE }
func (copyOp) String() string        { return "Copy" }
func (copyOp) Do(in ...G.Value) (G.Value, error) {
	return G.CloneValue(in[0])
}
func (copyOp) DiffWRT(int) []bool { return []bool{true} }
func (copyOp) SymDiff(_ G.Nodes, _, grad *G.Node) (G.Nodes, error) {
	return G.Nodes{grad}, nil
}

func copyNode(x *Node) *Node { return must(G.ApplyOp(copyOp{}, x)) }

// Reshape returns x with a new shape of the same size, in a fresh buffer.
func Reshape(x *Node, shape ...int) *Node {
	if shapeSize(shape) != x.Shape().TotalSize() {
		fail("reshape %v to %v: sizes differ", x.Shape(), shape)
	}
	return copyNode(must(G.Reshape(x, tensor.Shape(shape))))
}
