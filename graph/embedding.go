package graph

import (
	"fmt"
	"hash"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Embedding looks up rows of table by id:
//
//	out[i, t, :] = table[ids[i, t], :]
//
// table [V, d], ids [B, T] (an IndexInput or IndexConstant; any rank
// works) → [B, T, d]. The gradient with respect to the table is the
// scatter-add of the output gradient into the rows that were read, so an id
// used twice collects both contributions (Gorgonia's ByIndices on the
// flattened ids; GORGONIA.md, Op table). An id outside [0, V) fails
// the run with an error: ByIndices alone reads past the table for id V and
// crashes the process for a negative id.
func Embedding(table, ids *Node) *Node {
	ts, is := Shape(table), Shape(ids)
	if len(ts) != 2 {
		fail("embedding: table has shape %v, want [V, d]", ts)
	}
	if ids.Dtype() != tensor.Int {
		fail("embedding: ids have dtype %v, want int", ids.Dtype())
	}
	n := shapeSize(is)
	flat := ids
	if len(is) != 1 {
		flat = Reshape(ids, n)
	}
	rows := must(G.ByIndices(table, CheckIndices(flat, ts[0]), 0)) // [n, d]
	if len(is) == 1 {
		return rows
	}
	return Reshape(rows, append(is[:len(is):len(is)], ts[1])...)
}

// IndexConstant returns an integer node with fixed ids (row-major), such as
// the token ids of a gradient check, which feeds no inputs.
func (b *Builder) IndexConstant(name string, shape []int, ids []int) *Node {
	b.claim(name)
	if len(ids) != shapeSize(shape) {
		fail("index constant %s: %d ids for shape %v", name, len(ids), shape)
	}
	v := tensor.New(tensor.WithShape(shape...), tensor.WithBacking(append([]int(nil), ids...)))
	n := G.NewTensor(b.g, tensor.Int, len(shape), G.WithShape(shape...), G.WithName(name), G.WithValue(v))
	b.nodes[name] = n
	return n
}

// CheckIndices returns the integer node ids unchanged (in a fresh buffer),
// and makes the run fail with an error if any id is outside [0, n).
func CheckIndices(ids *Node, n int) *Node {
	if ids.Dtype() != tensor.Int {
		fail("check indices: dtype %v, want int", ids.Dtype())
	}
	return must(G.ApplyOp(indexCheckOp{n: n}, ids))
}

// indexCheckOp is the identity on integer tensors that rejects ids
// outside [0, n). Ids get no gradient (ByIndices does not differentiate
// with respect to them), but Gorgonia's differentiation analysis rejects a
// graph with a non-differentiable op between the ids' Reshape and
// ByIndices, so it declares the identity's.
type indexCheckOp struct{ n int }

func (indexCheckOp) Arity() int { return 1 }
func (indexCheckOp) Type() hm.Type {
	a := hm.TypeVariable('a')
	return hm.NewFnType(a, a)
}
func (indexCheckOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	return in[0].(tensor.Shape).Clone(), nil
}
func (indexCheckOp) ReturnsPtr() bool         { return false }
func (indexCheckOp) CallsExtern() bool        { return false }
func (indexCheckOp) OverwritesInput() int     { return -1 }
func (op indexCheckOp) WriteHash(h hash.Hash) { fmt.Fprintf(h, "probformer.checkIndices(%d)", op.n) }
func (op indexCheckOp) Hashcode() uint32      { return 0x1D5C0000 ^ uint32(op.n) }
func (op indexCheckOp) String() string        { return fmt.Sprintf("CheckIndices(<%d)", op.n) }
func (op indexCheckOp) Do(in ...G.Value) (G.Value, error) {
	ids, ok := in[0].Data().([]int)
	if !ok {
		return nil, fmt.Errorf("check indices: input holds %T, want []int", in[0].Data())
	}
	for i, id := range ids {
		if id < 0 || id >= op.n {
			return nil, fmt.Errorf("index %d at position %d outside [0, %d)", id, i, op.n)
		}
	}
	return G.CloneValue(in[0])
}
func (indexCheckOp) DiffWRT(int) []bool { return []bool{true} }
func (indexCheckOp) SymDiff(_ G.Nodes, _, grad *G.Node) (G.Nodes, error) {
	return G.Nodes{grad}, nil
}
