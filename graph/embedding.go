package graph

import (
	"fmt"
	"hash"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/probformer/probformer/graph/internal/kernels"
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

// EmbedTokens is a Transformer's input layer as one op: the embedding of
// ids scaled, plus a positional encoding, with dropout,
//
//	out[i, t, :] = (scale · table[ids[i, t], :] + pos[t, :]) ⊙ D[i, t, :]
//
// table [V, d], ids [B, T], pos [T, d] or nil → [B, T, d]. D is a dropout
// mask input called name, drawn as Builder.Dropout's masks are, in a
// training graph with p > 0; otherwise there is none. Each value is
// rounded after each step, as Embedding, Scale, BroadcastAdd and Dropout
// round it, so the values are theirs bit for bit; the table's gradient is
// their scatter-add, in the order of the positions. It replaces those
// four ops, ByIndices' allocation and Reshape's copy with one pass. An id
// outside [0, V) fails the run with an error.
func (b *Builder) EmbedTokens(name string, table, ids *Node, scale float64, pos *Node, p float64) *Node {
	if !(p >= 0 && p < 1) { // NaN too
		fail("dropout %s: p = %g, want in [0, 1)", name, p)
	}
	ts, is := Shape(table), Shape(ids)
	if len(ts) != 2 || len(is) != 2 || ids.Dtype() != tensor.Int {
		fail("embed tokens: table %v and ids %v (%v), want [V, d] and int [B, T]", ts, is, ids.Dtype())
	}
	k := tokenEmbedKernel{scale: scale, pos: pos != nil}
	in := []*Node{table, ids}
	if pos != nil {
		in = append(in, pos)
	}
	if b.train && p > 0 {
		in = append(in, b.Input(name, is[0], is[1], ts[1]))
		b.dropouts = append(b.dropouts, dropoutMask{name: name, p: p})
		k.dropout = true
	}
	return apply(k, in...)
}

// tokenEmbedKernel is EmbedTokens: inputs table, ids, [pos], [D].
type tokenEmbedKernel struct {
	scale        float64
	pos, dropout bool
}

func (k tokenEmbedKernel) name() string {
	return fmt.Sprintf("embed-tokens(%g,pos=%v,dropout=%v)", k.scale, k.pos, k.dropout)
}

func (k tokenEmbedKernel) outShape(in []tensor.Shape) (tensor.Shape, error) {
	t, ids := in[0], in[1]
	if len(t) != 2 || len(ids) != 2 {
		return nil, fmt.Errorf("embed tokens: table %v, ids %v", t, ids)
	}
	out := tensor.Shape{ids[0], ids[1], t[1]}
	i := 2
	if k.pos {
		if !in[i].Eq(tensor.Shape{ids[1], t[1]}) {
			return nil, fmt.Errorf("embed tokens: positional encoding %v, want [%d %d]", in[i], ids[1], t[1])
		}
		i++
	}
	if k.dropout && !in[i].Eq(out) {
		return nil, fmt.Errorf("embed tokens: dropout mask %v, want %v", in[i], out)
	}
	return out, nil
}

// operands returns the table, ids, positional encoding and mask of a
// node's inputs (nil where k has none).
func tokenOperands[T float](k tokenEmbedKernel, in []*tensor.Dense) (table []T, ids []int, pos, drop []T) {
	table, ids = floats[T](in[0]), in[1].Data().([]int)
	i := 2
	if k.pos {
		pos, i = floats[T](in[i]), i+1
	}
	if k.dropout {
		drop = floats[T](in[i])
	}
	return table, ids, pos, drop
}

func (k tokenEmbedKernel) do(in []*tensor.Dense, out *tensor.Dense) error {
	v, d := in[0].Shape()[0], in[0].Shape()[1]
	for i, id := range in[1].Data().([]int) {
		if id < 0 || id >= v {
			return fmt.Errorf("index %d at position %d outside [0, %d)", id, i, v)
		}
	}
	switch o := data(out).(type) {
	case []float32:
		tokenEmbedForward(k, in, d, o)
	case []float64:
		tokenEmbedForward(k, in, d, o)
	}
	return nil
}

func tokenEmbedForward[T float](k tokenEmbedKernel, in []*tensor.Dense, d int, out []T) {
	table, ids, pos, drop := tokenOperands[T](k, in)
	t := in[1].Shape()[1]
	sc := T(k.scale)
	kernels.SplitRange(len(out), d, func(lo, hi int) {
		for r := lo / d; r < hi/d; r++ {
			row, o := table[ids[r]*d:(ids[r]+1)*d], out[r*d:(r+1)*d]
			for j, x := range row {
				o[j] = T(x * sc)
			}
			if pos != nil {
				p := pos[(r%t)*d : (r%t+1)*d]
				for j := range o {
					o[j] = T(o[j] + p[j])
				}
			}
			if drop != nil {
				dr := drop[r*d : (r+1)*d]
				for j := range o {
					o[j] = T(o[j] * dr[j])
				}
			}
		}
	})
}

// constInput: only the table takes a gradient.
func (k tokenEmbedKernel) constInput(i int) bool { return i > 0 }

// grads: dtable[id] = Σ over the positions reading row id, in order, of
// scale·(g ⊙ D).
func (k tokenEmbedKernel) grads(in []*Node, _, g *Node) []*Node {
	gin := []*Node{in[1], g}
	if k.dropout {
		gin = append(gin, in[len(in)-1])
	}
	out := []*Node{apply(tokenEmbedGradKernel{k: k, table: fix(in[0].Shape())}, gin...)}
	for range in[1:] {
		out = append(out, nil)
	}
	return out
}

// tokenEmbedGradKernel: ids, G, [D] → dtable.
type tokenEmbedGradKernel struct {
	k     tokenEmbedKernel
	table fixedShape
}

func (g tokenEmbedGradKernel) name() string { return "grad-" + g.k.name() + fmt.Sprint(g.table.get()) }
func (g tokenEmbedGradKernel) outShape([]tensor.Shape) (tensor.Shape, error) {
	return g.table.get(), nil
}
func (g tokenEmbedGradKernel) do(in []*tensor.Dense, out *tensor.Dense) error {
	switch o := data(out).(type) {
	case []float32:
		tokenEmbedBackward(g, in, o)
	case []float64:
		tokenEmbedBackward(g, in, o)
	}
	return nil
}

func tokenEmbedBackward[T float](g tokenEmbedGradKernel, in []*tensor.Dense, dt []T) {
	ids, gOut := in[0].Data().([]int), floats[T](in[1])
	var drop []T
	if g.k.dropout {
		drop = floats[T](in[2])
	}
	d := g.table.get()[1]
	sc := T(g.k.scale)
	clear(dt)
	for r, id := range ids {
		gr, row := gOut[r*d:(r+1)*d], dt[id*d:(id+1)*d]
		if drop != nil {
			dr := drop[r*d : (r+1)*d]
			for j, x := range gr {
				row[j] += T(T(x*dr[j]) * sc)
			}
			continue
		}
		for j, x := range gr {
			row[j] += T(x * sc)
		}
	}
}
