package graph

import (
	"fmt"
	"hash"
	"hash/fnv"
	"slices"
	"unsafe"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/probformer/probformer/graph/internal/kernels"
)

// kernel is the plain-Go part of a custom op: a name that identifies it
// (with its settings) for Gorgonia's hash-consing, the output shape, and
// the forward computation on float32 or float64 slices.
type kernel interface {
	name() string
	outShape(in []tensor.Shape) (tensor.Shape, error)
	do(in []*tensor.Dense, out *tensor.Dense) error
}

// differentiable kernels also build their backward graph: one gradient
// node per input, nil for the inputs that constInputs names.
type differentiable interface {
	kernel
	grads(inputs []*Node, output, grad *Node) []*Node
}

// constInputs is implemented by kernels some of whose inputs (masks,
// token ids) take no gradient.
type constInputs interface {
	constInput(i int) bool
}

// maxArity is the most inputs a custom op takes (EMAttention takes up to
// 17: its tensors, masks and nine hyperparameters).
const maxArity = 24

// customOp adapts a kernel to Gorgonia's Op and SDOp interfaces. It
// records the ranks of its inputs and output, which its type needs.
type customOp struct {
	k         kernel
	arity     int
	inDims    [maxArity]int
	intInputs uint32 // bit i: input i holds integers (token ids)
	outDims   int
	out       *outBuffer // this node's output backing, kept between runs
}

func (op customOp) Arity() int { return op.arity }

// Type: every input and the output are tensors of one element type, each
// of its own rank.
func (op customOp) Type() hm.Type {
	elem := hm.TypeVariable('a')
	types := make([]hm.Type, op.arity+1)
	for i := range op.arity {
		if op.intInputs&(1<<i) != 0 {
			types[i] = G.TensorType{Dims: op.inDims[i], Of: tensor.Int}
			continue
		}
		types[i] = G.TensorType{Dims: op.inDims[i], Of: elem}
	}
	types[op.arity] = G.TensorType{Dims: op.outDims, Of: elem}
	return hm.NewFnType(types...)
}

func (op customOp) InferShape(in ...G.DimSizer) (tensor.Shape, error) {
	shapes := make([]tensor.Shape, len(in))
	for i, d := range in {
		s, ok := d.(tensor.Shape)
		if !ok {
			return nil, fmt.Errorf("%s: input %d has no static shape", op.k.name(), i)
		}
		shapes[i] = s
	}
	return op.k.outShape(shapes)
}

func (op customOp) Do(in ...G.Value) (G.Value, error) {
	if vk, ok := op.k.(viewKernel); ok {
		return viewDo(vk, in, op.out)
	}
	ds, err := op.out.inputs(op.k, in)
	if err != nil {
		return nil, err
	}
	s, err := op.out.shapeOf(op.k, ds)
	if err != nil {
		return nil, err
	}
	out := op.out.take(floatDtype(ds), s, ds)
	if err := op.k.do(ds, out); err != nil {
		return nil, fmt.Errorf("%s: %w", op.k.name(), err)
	}
	return out, nil
}

// UsePreallocDo writes into the buffer the tape machine kept from the
// previous run, saving an allocation and its zeroing per op per step. A
// buffer of another shape or dtype (registers are shared between nodes),
// or one that overlaps an input, is not used.
func (op customOp) UsePreallocDo(prealloc G.Value, in ...G.Value) (G.Value, error) {
	out, ok := prealloc.(*tensor.Dense)
	if _, view := op.k.(viewKernel); view || !ok || len(in) == 0 {
		return op.Do(in...)
	}
	ds, err := op.out.inputs(op.k, in)
	if err != nil {
		return op.Do(in...)
	}
	for _, d := range ds {
		if overlaps(d, out) {
			return op.Do(in...)
		}
	}
	s, err := op.out.shapeOf(op.k, ds)
	if err != nil {
		return nil, err
	}
	if out.Dtype() != floatDtype(ds) || !out.Shape().Eq(s) || !out.IsNativelyAccessible() {
		return op.Do(in...)
	}
	if err := op.k.do(ds, out); err != nil {
		return nil, fmt.Errorf("%s: %w", op.k.name(), err)
	}
	return out, nil
}

// inputs returns in as tensors, in a slice b keeps for the op's next run
// (a node runs once a run, and its kernel reads the slice only while it
// runs), or a new one where b is nil.
func (b *outBuffer) inputs(k kernel, in []G.Value) ([]*tensor.Dense, error) {
	var ds []*tensor.Dense
	switch {
	case b == nil:
		ds = make([]*tensor.Dense, len(in))
	case cap(b.ins) >= len(in):
		ds = b.ins[:len(in)]
	default:
		ds = make([]*tensor.Dense, len(in))
		b.ins = ds
	}
	for i, v := range in {
		d, ok := v.(*tensor.Dense)
		if !ok {
			return nil, fmt.Errorf("%s: input %d is %T", k.name(), i, v)
		}
		ds[i] = d
	}
	return ds, nil
}

// shapeOf returns k's output shape for the inputs ds: the one outShape
// gave last run when every input has the shape it had then (outShape is
// a function of the shapes alone; its checks and slices cost a few
// allocations an op a run), else outShape's, then kept with the inputs'
// shapes. The shape returned is not to be changed.
func (b *outBuffer) shapeOf(k kernel, ds []*tensor.Dense) (tensor.Shape, error) {
	if b != nil && b.outS != nil && b.sameShapes(ds) {
		return b.outS, nil
	}
	shapes := make([]tensor.Shape, len(ds))
	for i, d := range ds {
		shapes[i] = d.Shape()
	}
	s, err := k.outShape(shapes)
	if err != nil || b == nil {
		return s, err
	}
	b.inS = b.inS[:0]
	for _, sh := range shapes {
		b.inS = append(append(b.inS, len(sh)), sh...)
	}
	b.outS = s.Clone()
	return b.outS, nil
}

// sameShapes reports whether ds have the shapes recorded in b.inS (each
// its rank, then its sizes), exactly.
func (b *outBuffer) sameShapes(ds []*tensor.Dense) bool {
	r := b.inS
	for _, d := range ds {
		sh := d.Shape()
		if len(r) < 1+len(sh) || r[0] != len(sh) || !slices.Equal(r[1:1+len(sh)], []int(sh)) {
			return false
		}
		r = r[1+len(sh):]
	}
	return len(r) == 0
}

// outBuffer keeps the backing of a node's output from one run to the next.
// The tape machine drops every value at Reset, so without it each op
// allocates (and the runtime zeroes and later collects) its output every
// step: several MB per training step, and fresh pages the kernel must
// fault in. Reuse is safe because a node runs once per run, before every
// op that reads its value, and values from an earlier run are read only
// between runs (outputs, loss and gradients are copied or consumed by
// then). Each kernel overwrites all of its output.
//
// It keeps the header too (hdr): tensor.New cost a few µs and
// allocations an op, a step's largest serial Go cost after the executor.
// A reader may have changed the header it was given (Gorgonia's Reshape
// reshapes in place, a transpose or a mask changes it), so the kept
// header is handed out again only while it is still what take made.
type outBuffer struct {
	data any // []float32 or []float64
	hdr  keptHeader
	ins  []*tensor.Dense // the op's inputs, the slice kept (inputs)
	inS  []int           // the inputs' shapes at the last outShape (shapeOf)
	outS tensor.Shape    // what outShape gave for them
}

// take returns a tensor of dtype dt and shape s on the kept backing when
// it fits and overlaps no input, or on a new one that is then kept. The
// header is the kept one while no reader has changed it (keptHeader.get),
// else new, so nothing an earlier reader did to the previous header
// (views, transposes) carries over.
func (b *outBuffer) take(dt tensor.Dtype, s tensor.Shape, in []*tensor.Dense) *tensor.Dense {
	if b == nil {
		return tensor.New(tensor.Of(dt), tensor.WithShape(s...))
	}
	n := s.TotalSize()
	switch dt {
	case tensor.Float32:
		if d, ok := b.data.([]float32); ok && len(d) == n && !overlapsAny(d, in) {
			if t := keptOn(&b.hdr, dt, s, d); t != nil {
				return t
			}
			return b.hdr.keep(tensor.New(tensor.WithShape(s...), tensor.WithBacking(d)))
		}
		d := make([]float32, n)
		b.data = d
		return b.hdr.keep(tensor.New(tensor.WithShape(s...), tensor.WithBacking(d)))
	case tensor.Float64:
		if d, ok := b.data.([]float64); ok && len(d) == n && !overlapsAny(d, in) {
			if t := keptOn(&b.hdr, dt, s, d); t != nil {
				return t
			}
			return b.hdr.keep(tensor.New(tensor.WithShape(s...), tensor.WithBacking(d)))
		}
		d := make([]float64, n)
		b.data = d
		return b.hdr.keep(tensor.New(tensor.WithShape(s...), tensor.WithBacking(d)))
	}
	return tensor.New(tensor.Of(dt), tensor.WithShape(s...))
}

// keptHeader is a tensor header handed out by an earlier run (an op's
// output, an unpack's view), with our own copies of the shape, strides
// and order it was made with: a reader that changes the header in place
// changes its slices, not these.
type keptHeader struct {
	t       *tensor.Dense
	shape   tensor.Shape
	strides []int
	order   tensor.DataOrder
}

// keep records t, as made, and returns it.
func (k *keptHeader) keep(t *tensor.Dense) *tensor.Dense {
	k.t, k.shape, k.strides, k.order = t, t.Shape().Clone(), append(k.strides[:0], t.Strides()...), t.DataOrder()
	return t
}

// keptOn returns k's header if it is a plain tensor of dtype dt and
// shape s over exactly the values d (same first element, same length)
// and nothing has changed it since keep: the same shape (exactly: Eq
// takes (1, n) for (n)), strides and
// order, not a view, not transposed (no backed-up access pattern), no
// mask, Go's memory. Otherwise nil, and the caller makes a new one.
func keptOn[T float](k *keptHeader, dt tensor.Dtype, s tensor.Shape, d []T) *tensor.Dense {
	t := k.t
	if t == nil || len(d) == 0 {
		return nil
	}
	if t.Dtype() != dt || t.Uintptr() != uintptr(unsafe.Pointer(&d[0])) || t.DataSize() != len(d) ||
		!slices.Equal(s, k.shape) || !slices.Equal(t.Shape(), k.shape) || !slices.Equal(t.Strides(), k.strides) ||
		t.DataOrder() != k.order || t.IsMaterializable() || t.IsMasked() ||
		!t.IsNativelyAccessible() || t.IsManuallyManaged() {
		return nil
	}
	return t
}

// overlapsAny reports whether the backing d shares memory with an input.
func overlapsAny[T float](d []T, in []*tensor.Dense) bool {
	if len(d) == 0 {
		return false
	}
	lo := uintptr(unsafe.Pointer(&d[0]))
	hi := lo + uintptr(len(d))*unsafe.Sizeof(d[0])
	for _, t := range in {
		a := t.Uintptr()
		if a < hi && lo < a+t.MemSize() {
			return true
		}
	}
	return false
}

func overlaps(a, b *tensor.Dense) bool {
	a0, b0 := a.Uintptr(), b.Uintptr()
	return a0 < b0+b.MemSize() && b0 < a0+a.MemSize()
}

func (op customOp) ReturnsPtr() bool      { return false }
func (op customOp) CallsExtern() bool     { return false }
func (op customOp) OverwritesInput() int  { return -1 }
func (op customOp) WriteHash(h hash.Hash) { h.Write([]byte("probformer." + op.k.name())) }
func (op customOp) Hashcode() uint32 {
	h := fnv.New32a()
	op.WriteHash(h)
	return h.Sum32()
}
func (op customOp) String() string { return op.k.name() }

// DiffWRT marks the float inputs of an op without a gradient as
// differentiable too, so that a loss that depends on parameters through
// such an op fails to compile (SymDiff says why) instead of training them
// with a silent zero gradient.
func (op customOp) DiffWRT(n int) []bool {
	c, partial := op.k.(constInputs)
	out := make([]bool, n)
	for i := range out {
		out[i] = !(partial && c.constInput(i)) && op.intInputs&(1<<i) == 0
	}
	return out
}

func (op customOp) SymDiff(inputs G.Nodes, output, grad *G.Node) (G.Nodes, error) {
	d, ok := op.k.(differentiable)
	if !ok {
		return nil, fmt.Errorf("%s has no gradient", op.k.name())
	}
	var gs []*Node
	err := catch(func() { gs = d.grads(inputs, output, ownGradSum(grad)) })
	if err != nil {
		return nil, err
	}
	// Gorgonia skips the gradients of inputs that DiffWRT marks false.
	diffs := op.DiffWRT(len(inputs))
	for i, g := range gs {
		if g == nil && diffs[i] {
			return nil, fmt.Errorf("%s: no gradient for input %d", op.k.name(), i)
		}
	}
	return G.Nodes(gs), nil
}

// apply adds a custom op node, checking the shapes first so a mistake is
// reported where the graph is built.
func apply(k kernel, inputs ...*Node) *Node {
	if len(inputs) > maxArity {
		panic(buildError{fmt.Errorf("%s: %d inputs, at most %d", k.name(), len(inputs), maxArity)})
	}
	op := customOp{k: k, arity: len(inputs), out: &outBuffer{}}
	shapes := make([]tensor.Shape, len(inputs))
	for i, in := range inputs {
		shapes[i] = in.Shape()
		op.inDims[i] = in.Dims()
		if in.Dtype() == tensor.Int {
			op.intInputs |= 1 << i
		}
	}
	out, err := k.outShape(shapes)
	if err != nil {
		panic(buildError{fmt.Errorf("%s: %w", k.name(), err)})
	}
	op.outDims = len(out)
	return must(G.ApplyOp(op, inputs...))
}

// catch runs f and returns the error it panicked with through must.
func catch(f func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if be, ok := r.(buildError); ok {
				err = be.err
				return
			}
			panic(r)
		}
	}()
	f()
	return nil
}

// viewKernel is a kernel whose output is a view of its input's backing,
// not a copy: the op costs no memory pass. Its do is the copying
// reference, which tests compare the view against. view may hand out
// the header kept (nil: none kept) if it still views the range it must.
type viewKernel interface {
	kernel
	view(in *tensor.Dense, kept *keptHeader) (*tensor.Dense, error)
}

// viewDo runs a viewKernel on its one input, keeping its header in b (nil:
// none kept).
func viewDo(vk viewKernel, in []G.Value, b *outBuffer) (G.Value, error) {
	if len(in) != 1 {
		return nil, fmt.Errorf("%s: %d inputs, want 1", vk.name(), len(in))
	}
	d, ok := in[0].(*tensor.Dense)
	if !ok {
		return nil, fmt.Errorf("%s: input is %T", vk.name(), in[0])
	}
	var kept *keptHeader
	if b != nil {
		kept = &b.hdr
	}
	v, err := vk.view(d, kept)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", vk.name(), err)
	}
	return v, nil
}

// unpackKernel reads a contiguous range of a packed gradient as a tensor
// of its own shape: backward kernels compute several gradients in one
// pass and return them packed. The range is a view of the packed backing
// (copying it cost about 4% of a training step). That is safe for the
// same reason as the kept output buffers (outBuffer): the packed node
// runs once per run, before its unpacks and their readers, and nothing
// else writes its backing within the run; the tape machine gives every
// node a register of its own, so a Gorgonia op that adds in place into
// one range touches no other node's values (the ranges are disjoint).
type unpackKernel struct {
	offset int
	shape  fixedShape
}

func (u unpackKernel) name() string {
	return fmt.Sprintf("unpack(%d,%v)", u.offset, u.shape.get())
}
func (u unpackKernel) outShape([]tensor.Shape) (tensor.Shape, error) { return u.shape.get(), nil }
func (u unpackKernel) do(in []*tensor.Dense, out *tensor.Dense) error {
	n := u.shape.get().TotalSize()
	switch src := data(in[0]).(type) {
	case []float32:
		copyParallel(floats[float32](out), src[u.offset:u.offset+n])
	case []float64:
		copyParallel(floats[float64](out), src[u.offset:u.offset+n])
	default:
		return fmt.Errorf("unsupported dtype %T", src)
	}
	return nil
}

// view returns the range as a tensor on in's backing: the header kept
// from the last run when it still views this very range with our shape
// (the packed backing is kept between runs too, outBuffer), else a new
// one, then kept. Making the header cost about 4 µs a view, some 30 views
// a Set Transformer step.
func (u unpackKernel) view(in *tensor.Dense, kept *keptHeader) (*tensor.Dense, error) {
	switch in.Dtype() {
	case tensor.Float32:
		return viewRange(u, floats[float32](in), tensor.Float32, kept)
	case tensor.Float64:
		return viewRange(u, floats[float64](in), tensor.Float64, kept)
	}
	return nil, fmt.Errorf("unsupported dtype %v", in.Dtype())
}

// viewRange is unpackKernel.view on src, the packed values of dtype dt.
func viewRange[T float](u unpackKernel, src []T, dt tensor.Dtype, kept *keptHeader) (*tensor.Dense, error) {
	n := u.shape.size()
	if u.offset+n > len(src) {
		return nil, fmt.Errorf("range [%d, %d) of %d values", u.offset, u.offset+n, len(src))
	}
	r := src[u.offset : u.offset+n : u.offset+n]
	if kept == nil {
		return tensor.New(tensor.WithShape(u.shape.get()...), tensor.WithBacking(r)), nil
	}
	if kept.t != nil && u.shape.is(kept.shape) {
		if t := keptOn(kept, dt, kept.shape, r); t != nil {
			return t, nil
		}
	}
	return kept.keep(tensor.New(tensor.WithShape(u.shape.get()...), tensor.WithBacking(r))), nil
}

// copyParallel copies src into dst (equal lengths), in parts on both
// cores when it is large.
func copyParallel[T float](dst, src []T) {
	kernels.SplitRange(len(src), 16, func(lo, hi int) { copy(dst[lo:hi], src[lo:hi]) })
}

// unpack splits a packed node into nodes of the given shapes.
func unpack(packed *Node, shapes ...tensor.Shape) []*Node {
	out := make([]*Node, len(shapes))
	off := 0
	for i, s := range shapes {
		out[i] = apply(unpackKernel{offset: off, shape: fix(s)}, packed)
		off += s.TotalSize()
	}
	return out
}

// fixedShape is a shape kernels can hold and still be comparable values,
// as Gorgonia's op interfaces may be compared.
type fixedShape struct {
	n int
	d [8]int
}

func fix(s tensor.Shape) fixedShape {
	f := fixedShape{n: len(s)}
	copy(f.d[:], s)
	return f
}

func (f fixedShape) get() tensor.Shape { return tensor.Shape(append([]int(nil), f.d[:f.n]...)) }

// size is the number of values of the shape, get().TotalSize() without
// the copy.
func (f fixedShape) size() int {
	n := 1
	for _, d := range f.d[:f.n] {
		n *= d
	}
	return n
}

// is reports whether s is the shape f holds.
func (f fixedShape) is(s tensor.Shape) bool { return slices.Equal(f.d[:f.n], []int(s)) }

// floats returns t's values as a []T, as floats[T](t) does (and panics
// as it does on a scalar or another dtype), without Data's reflection:
// Data builds the slice's type through reflect, a type-cache lookup and
// an allocation, on every call, and each op reads several a run.
func floats[T float](t *tensor.Dense) []T {
	if !t.IsScalar() {
		var z T
		switch any(z).(type) {
		case float32:
			if t.Dtype() == tensor.Float32 {
				v := t.Float32s()
				return *(*[]T)(unsafe.Pointer(&v))
			}
		case float64:
			if t.Dtype() == tensor.Float64 {
				v := t.Float64s()
				return *(*[]T)(unsafe.Pointer(&v))
			}
		}
	}
	return floats[T](t)
}

// data returns t's values as t.Data() does (the []float32 or []float64,
// or a scalar's value), without its reflection for the float slices.
func data(t *tensor.Dense) any {
	if !t.IsScalar() {
		switch t.Dtype() {
		case tensor.Float32:
			return t.Float32s()
		case tensor.Float64:
			return t.Float64s()
		}
	}
	return t.Data()
}

// floatDtype is the dtype of a kernel's output: that of its first
// non-integer input.
func floatDtype(ds []*tensor.Dense) tensor.Dtype {
	for _, d := range ds {
		if d.Dtype() != tensor.Int {
			return d.Dtype()
		}
	}
	return ds[0].Dtype()
}
