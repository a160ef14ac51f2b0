package graph

import (
	"fmt"
	"slices"
	"unsafe"

	"gorgonia.org/tensor"

	"github.com/probformer/probformer/graph/internal/kernels"
)

// LinearConcat returns [x·w₁ + b₁ | x·w₂ + b₂ | …], the affine maps of x
// side by side over the last axis, as one op:
// x [..., din], ws[i] [din, dᵢ], bs[i] [dᵢ] (bs nil: no biases) →
// [..., Σdᵢ]. It is Concat(Linear(x, wᵢ, bᵢ)…) computed as one GEMM
// against the weights packed side by side at each run, so that the
// query, key and value projections of attention (which read the same
// input) cost one product instead of three, and their gradient with
// respect to x one product and no sum of three. The values are Linear's
// dot products, rounded as the GEMM rounds a product of the wider shape
// (TestLinearConcatIsLinears). The parameters stay separate nodes:
// checkpoints and names do not change.
func LinearConcat(x *Node, ws, bs []*Node) *Node {
	if len(ws) == 0 || (bs != nil && len(bs) != len(ws)) {
		fail("linear concat: %d weights and %d biases", len(ws), len(bs))
	}
	in := append([]*Node{x}, ws...)
	in = append(in, bs...)
	return apply(linearConcatKernel{parts: len(ws), bias: bs != nil, packed: &packedWeights{}}, in...)
}

// packedWeights is a kernel's scratch for the weights [din, Σdᵢ] (and the
// biases [Σdᵢ]) packed side by side, refilled at every run. src records
// the weights' backings w was packed from (first element, length), so that
// the backward's dx, which runs later in the same run on the same weights
// (parameters change only between runs), reads the forward's packing
// rather than copying the same values again (packedBy).
type packedWeights struct {
	w, b any
	src  []uintptr // the weights' first element and length, in turn
}

// packedBy returns the weights the forward packed (p.w) when ws are the
// very backings it packed, else nil.
func packedBy[T float](p *packedWeights, ws [][]T) []T {
	w, ok := p.w.([]T)
	if !ok || len(p.src) != 2*len(ws) {
		return nil
	}
	for i, x := range ws {
		if len(x) == 0 || p.src[2*i] != uintptr(unsafe.Pointer(&x[0])) || p.src[2*i+1] != uintptr(len(x)) {
			return nil
		}
	}
	return w
}

// packFrom records in p which backings ws its w was packed from.
func packFrom[T float](p *packedWeights, ws [][]T) {
	p.src = p.src[:0]
	for _, x := range ws {
		if len(x) == 0 {
			p.src = p.src[:0]
			return
		}
		p.src = append(p.src, uintptr(unsafe.Pointer(&x[0])), uintptr(len(x)))
	}
}

// pack copies ws (each [din, dᵢ]) side by side into a [din, Σdᵢ] buffer
// kept in *keep, and returns it.
func pack[T float](keep *any, din int, ws [][]T) []T {
	total := 0
	for _, w := range ws {
		total += len(w) / din
	}
	buf, ok := (*keep).([]T)
	if !ok || len(buf) != din*total {
		buf = make([]T, din*total)
		*keep = buf
	}
	off := 0
	for _, w := range ws {
		d := len(w) / din
		for r := range din {
			copy(buf[r*total+off:r*total+off+d], w[r*d:(r+1)*d])
		}
		off += d
	}
	return buf
}

// linearConcatKernel is LinearConcat: inputs x, w₁…wₙ, then b₁…bₙ with
// bias.
type linearConcatKernel struct {
	parts  int
	bias   bool
	packed *packedWeights
}

func (k linearConcatKernel) name() string {
	return fmt.Sprintf("linear-concat(parts=%d,bias=%v)", k.parts, k.bias)
}

// widths checks the shapes x [..., din], wᵢ [din, dᵢ], bᵢ [dᵢ] and returns
// din and the dᵢ.
func (k linearConcatKernel) widths(in []tensor.Shape) (din int, ds []int, err error) {
	want := 1 + k.parts
	if k.bias {
		want += k.parts
	}
	if len(in) != want {
		return 0, nil, fmt.Errorf("linear concat: %d inputs, want %d", len(in), want)
	}
	x := in[0]
	if len(x) < 1 {
		return 0, nil, fmt.Errorf("linear concat: x %v", x)
	}
	din = x[len(x)-1]
	for i, w := range in[1 : 1+k.parts] {
		if len(w) != 2 || w[0] != din {
			return 0, nil, fmt.Errorf("linear concat: x %v and w%d %v do not fit", x, i, w)
		}
		if k.bias {
			if b := in[1+k.parts+i]; len(b) != 1 || b[0] != w[1] {
				return 0, nil, fmt.Errorf("linear concat: bias %d %v, want [%d]", i, b, w[1])
			}
		}
		ds = append(ds, w[1])
	}
	return din, ds, nil
}

func (k linearConcatKernel) outShape(in []tensor.Shape) (tensor.Shape, error) {
	_, ds, err := k.widths(in)
	if err != nil {
		return nil, err
	}
	out := in[0].Clone()
	out[len(out)-1] = sum(ds)
	return out, nil
}

func sum(ds []int) int {
	s := 0
	for _, d := range ds {
		s += d
	}
	return s
}

func (k linearConcatKernel) do(in []*tensor.Dense, out *tensor.Dense) error {
	switch y := data(out).(type) {
	case []float32:
		linearConcatForward(k, in, y)
	case []float64:
		linearConcatForward(k, in, y)
	}
	return nil
}

// datas returns the values of ts.
func datas[T float](ts []*tensor.Dense) [][]T {
	d := make([][]T, len(ts))
	for i, t := range ts {
		d[i] = floats[T](t)
	}
	return d
}

func linearConcatForward[T float](k linearConcatKernel, in []*tensor.Dense, y []T) {
	x := floats[T](in[0])
	din := in[1].Shape()[0]
	ws := datas[T](in[1 : 1+k.parts])
	k.packed.src = k.packed.src[:0] // a packing half made records no weights
	w := pack(&k.packed.w, din, ws)
	packFrom(k.packed, ws)
	total := len(w) / din
	rows := len(x) / din
	if !k.bias {
		kernels.Gemm(false, false, rows, total, din, 1, x, din, w, total, 0, y, total)
		return
	}
	// the biases side by side are a [1, Σdᵢ] packing
	b := pack(&k.packed.b, 1, datas[T](in[1+k.parts:]))
	kernels.GemmBias(false, false, rows, total, din, 1, x, din, w, total, 0, y, total, b)
}

// grads: dx = g·[w₁ … wₙ]ᵀ (one product), and the weight and bias
// gradients packed by one op and read as views: dwᵢ = xᵀ·gᵢ, dbᵢ =
// Σ_rows gᵢ, with gᵢ the columns of g that part i wrote.
func (k linearConcatKernel) grads(in []*Node, _, g *Node) []*Node {
	dx := apply(linearConcatDxKernel{parts: k.parts, shape: fix(in[0].Shape()), packed: &packedWeights{}, fwd: k.packed},
		append([]*Node{g}, in[1:1+k.parts]...)...)
	shapes := make([]tensor.Shape, 0, len(in)-1)
	for _, n := range in[1:] {
		shapes = append(shapes, n.Shape())
	}
	dw := apply(linearConcatDwKernel{bias: k.bias, shapes: fixAll(shapes)}, in[0], g)
	return append([]*Node{dx}, unpack(dw, shapes...)...)
}

// linearConcatDxKernel is g [..., Σdᵢ], w₁…wₙ → g·[w₁ … wₙ]ᵀ of x's shape.
// It reads the weights its forward op packed this run (fwd) when they are
// packed from the same backings, else packs its own (packed).
type linearConcatDxKernel struct {
	parts  int
	shape  fixedShape
	packed *packedWeights
	fwd    *packedWeights // the forward op's packing; nil: none
}

func (k linearConcatDxKernel) name() string {
	return fmt.Sprintf("linear-concat-dx(%d,%v)", k.parts, k.shape.get())
}
func (k linearConcatDxKernel) outShape([]tensor.Shape) (tensor.Shape, error) {
	return k.shape.get(), nil
}
func (k linearConcatDxKernel) do(in []*tensor.Dense, out *tensor.Dense) error {
	switch dx := data(out).(type) {
	case []float32:
		linearConcatDx(k, in, dx)
	case []float64:
		linearConcatDx(k, in, dx)
	}
	return nil
}

func linearConcatDx[T float](k linearConcatDxKernel, in []*tensor.Dense, dx []T) {
	g := floats[T](in[0])
	din := in[1].Shape()[0]
	ws := datas[T](in[1:])
	var w []T
	if k.fwd != nil {
		w = packedBy(k.fwd, ws)
	}
	if w == nil {
		w = pack(&k.packed.w, din, ws)
	}
	total := len(w) / din
	kernels.Gemm(false, true, len(g)/total, din, total, 1, g, total, w, total, 0, dx, din)
}

// linearConcatDwKernel is x [..., din], g [..., Σdᵢ] → [dw₁ | … | dwₙ |
// db₁ | … | dbₙ] (without bias, the dwᵢ alone), flat.
type linearConcatDwKernel struct {
	bias   bool
	shapes fixedShapes // of w₁…wₙ, then b₁…bₙ
}

func (k linearConcatDwKernel) name() string {
	return fmt.Sprintf("linear-concat-dw(bias=%v,%v)", k.bias, k.shapes.get())
}
func (k linearConcatDwKernel) outShape([]tensor.Shape) (tensor.Shape, error) {
	n := 0
	for _, s := range k.shapes.get() {
		n += s.TotalSize()
	}
	return tensor.Shape{n}, nil
}
func (k linearConcatDwKernel) do(in []*tensor.Dense, out *tensor.Dense) error {
	switch p := data(out).(type) {
	case []float32:
		linearConcatDw(k, in, p)
	case []float64:
		linearConcatDw(k, in, p)
	}
	return nil
}

func linearConcatDw[T float](k linearConcatDwKernel, in []*tensor.Dense, packed []T) {
	x, g := floats[T](in[0]), floats[T](in[1])
	shapes := k.shapes.get()
	parts := len(shapes)
	if k.bias {
		parts /= 2
	}
	din := shapes[0][0]
	total := 0
	for _, s := range shapes[:parts] {
		total += s[1]
	}
	rows := len(x) / din
	if linearConcatDw32(k.bias, x, g, din, rows, shapes[:parts], packed) {
		return
	}
	col, off := 0, 0
	for _, s := range shapes[:parts] {
		d := s[1]
		kernels.Gemm(true, false, din, d, rows, 1, x, din, g[col:], total, 0, packed[off:off+din*d], d)
		col += d
		off += din * d
	}
	if k.bias {
		// the biases' gradients lie side by side, as the columns of g
		colSum(g, packed[off:off+total])
	}
}

// linearConcatDw32 makes every dwᵢ (and with bias every dbᵢ, the column
// sums of g) in one shared float32 product that reads g once
// (kernels.GemmParts32), where the parts are float32 and of one width,
// and reports whether it did: the values of a Gemm a part and colSum,
// bit for bit. One product rather than one a part hands the two cores
// work once, with blocks enough to balance, and sums the biases' columns
// while g is in cache rather than in a second pass.
func linearConcatDw32[T float](bias bool, x, g []T, din, rows int, ws []tensor.Shape, packed []T) bool {
	x32, ok := any(x).([]float32)
	if !ok {
		return false
	}
	d := ws[0][1]
	for _, s := range ws {
		if s[1] != d {
			return false
		}
	}
	parts := len(ws)
	p32 := any(packed).([]float32)
	var db []float32
	if bias {
		db = p32[parts*din*d : parts*din*d+parts*d]
	}
	return kernels.GemmParts32(din, rows, parts, d, x32, any(g).([]float32), p32[:parts*din*d], db)
}

// fixedShapes is a list of up to 8 shapes that kernels can hold and still
// be comparable values.
type fixedShapes struct {
	n int
	s [8]fixedShape
}

func fixAll(ss []tensor.Shape) fixedShapes {
	if len(ss) > len(fixedShapes{}.s) {
		fail("%d shapes, at most %d", len(ss), len(fixedShapes{}.s))
	}
	f := fixedShapes{n: len(ss)}
	for i, s := range ss {
		f.s[i] = fix(s)
	}
	return f
}

func (f fixedShapes) get() []tensor.Shape {
	out := make([]tensor.Shape, f.n)
	for i := range out {
		out[i] = f.s[i].get()
	}
	return slices.Clip(out)
}
