package graph

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"

	"gorgonia.org/tensor"

	"github.com/probformer/probformer/graph/graphtest"
	"github.com/probformer/probformer/graph/internal/kernels"
)

// TestLinearConcatIsLinears: LinearConcat's output and gradients are
// those of Concat of the Linears, to 1e-12 in float64 and 1e-5 in
// float32 (the GEMM's paths depend on the output's width, and x's
// gradient sums the parts in one product), with and without biases, for
// a 3-D x.
func TestLinearConcatIsLinears(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ din, rows, t int }{{5, 3, 2}, {64, 64, 16}, {8, 32, 32}} {
		ds := []int{c.din, 7, 16}
		total := c.din + 7 + 16
		r := Normal(1)(rand.New(rand.NewPCG(5, 5)), []int{c.rows * c.t * total})
		for _, bias := range []bool{true, false} {
			for _, dt := range []DType{Float64, Float32} {
				run := func(fused bool) graphtest.Result {
					p, err := Compile(NewParams(dt, 3), func(b *Builder) error {
						x := b.Param("x", []int{c.rows, c.t, c.din}, Normal(1))
						var ws, bs []*Node
						for i, d := range ds {
							ws = append(ws, b.Param(fmt.Sprintf("w%d", i), []int{c.din, d}, Normal(1)))
							if bias {
								bs = append(bs, b.Param(fmt.Sprintf("b%d", i), []int{d}, Normal(1)))
							}
						}
						var y *Node
						if fused {
							y = LinearConcat(x, ws, bs)
						} else {
							parts := make([]*Node, len(ws))
							for i := range ws {
								var bi *Node
								if bias {
									bi = bs[i]
								}
								parts[i] = Linear(x, ws[i], bi)
							}
							y = Concat(2, parts...)
						}
						b.Output("y", y)
						b.SetLoss(Sum(Mul(y, b.Constant("r", []int{c.rows, c.t, total}, r))))
						return nil
					}, true)
					if err != nil {
						t.Fatal(err)
					}
					return graphtest.Run(t, p, "y")
				}
				got, want := run(true), run(false)
				what := fmt.Sprintf("%v din=%d bias=%v", dt, c.din, bias)
				tol := 1e-12
				if dt == Float32 {
					tol = 1e-5
				}
				graphtest.ExpectRunsClose(t, what, got, want, tol, nil)
			}
		}
	}
}

// TestLinearConcatGradients: float64 finite differences.
func TestLinearConcatGradients(t *testing.T) {
	t.Parallel()
	for i, bias := range []bool{true, false} {
		fn := func(b *Builder) *Node {
			x := randParam(b, "x", 2, 3, 4)
			ws := []*Node{randParam(b, "w0", 4, 3), randParam(b, "w1", 4, 5)}
			var bs []*Node
			if bias {
				bs = []*Node{randParam(b, "b0", 3), randParam(b, "b1", 5)}
			}
			return Tanh(LinearConcat(x, ws, bs))
		}
		if _, err := CheckGradients(NewParams(Float64, uint64(i+40)), fn, GradCheckOptions{Seed: uint64(i)}); err != nil {
			t.Fatalf("bias=%v: %v", bias, err)
		}
	}
}

// packedCase is one configuration of TestAttentionPackedIsAttention.
type packedCase struct {
	b, n, m, heads, d int
	self, causal      bool // self: q, k and v from one x (packQKV), else packKV
	masked, dropout   bool
}

// packedAttentionGraph builds attention over projections of x [B, N, Dim]
// and y [B, M, Dim] (y is x for self-attention): the reference projects
// q, k and v with three Linears and runs Attention (attentionDropped with
// dropout); the packed one projects with LinearConcat and runs the
// packed kernel on the same masks.
func packedAttentionGraph(b *Builder, c packedCase, packed bool, keys, drop []float64) *Node {
	dim := c.heads * c.d
	x := b.Param("x", []int{c.b, c.n, dim}, Normal(1))
	y := x
	if !c.self {
		y = b.Param("y", []int{c.b, c.m, dim}, Normal(1))
	}
	var ws, bs []*Node
	for _, p := range []string{"q", "k", "v"} {
		ws = append(ws, b.Param(p+".w", []int{dim, dim}, Normal(0.3)))
		bs = append(bs, b.Param(p+".b", []int{dim}, Normal(1)))
	}
	var mask, dropN *Node
	if c.masked {
		mask = b.Constant("mask", []int{c.b, c.m}, keys)
	}
	if c.dropout {
		dropN = b.Constant("drop", []int{c.b, c.heads, c.n, c.m}, drop)
	}
	var out *Node
	switch {
	case !packed:
		q, k, v := Linear(x, ws[0], bs[0]), Linear(y, ws[1], bs[1]), Linear(y, ws[2], bs[2])
		if c.dropout {
			out = attentionDropped(q, k, v, mask, dropN, c.heads, c.causal)
		} else {
			out = Attention(q, k, v, mask, c.heads, c.causal)
		}
	default:
		a := attentionKernel{heads: c.heads, causal: c.causal, masked: c.masked, dropout: c.dropout, saved: &savedWeights{}}
		var in []*Node
		if c.self {
			a.packed, in = packQKV, []*Node{LinearConcat(x, ws, bs)}
		} else {
			a.packed, in = packKV, []*Node{Linear(x, ws[0], bs[0]), LinearConcat(y, ws[1:], bs[1:])}
		}
		if c.masked {
			in = append(in, mask)
		}
		if c.dropout {
			in = append(in, dropN)
		}
		out = apply(a, in...)
	}
	return out
}

func packedCases() []packedCase {
	var cs []packedCase
	for _, self := range []bool{true, false} {
		for _, causal := range []bool{false, true} {
			for _, dropout := range []bool{false, true} {
				// d 3: the Go loops; d 16 with M ≤ 64: attention.c in float32
				for _, d := range []int{3, 16} {
					m := 5
					if self || causal {
						m = 4
					}
					if d == 16 {
						m = 16
						if !self && !causal {
							m = 11
						}
					}
					n := 4
					if d == 16 {
						n = 16
					}
					if self || causal {
						n = m
					}
					cs = append(cs, packedCase{b: 2, n: n, m: m, heads: 2, d: d, self: self, causal: causal, masked: true, dropout: dropout})
				}
			}
		}
	}
	return append(cs, packedCase{b: 3, n: 5, m: 7, heads: 4, d: 8})
}

func packedData(c packedCase) (keys, drop, r []float64) {
	rng := rand.New(rand.NewPCG(uint64(c.n), uint64(c.m)))
	keys = make([]float64, c.b*c.m)
	for i := range keys {
		if i%c.m < c.m-1-i/c.m { // example i/m has i/m padded keys at the end
			keys[i] = 1
		}
	}
	drop = make([]float64, c.b*c.heads*c.n*c.m)
	for i := range drop {
		if rng.Float64() > 0.3 {
			drop[i] = 1 / 0.7
		}
	}
	r = Normal(1)(rng, []int{c.b * c.n * c.heads * c.d})
	return keys, drop, r
}

func runPacked(t *testing.T, c packedCase, dt DType, packed bool) graphtest.Result {
	t.Helper()
	return runPackedModel(t, c, dt, 11, func(b *Builder, keys, drop []float64) *Node {
		return packedAttentionGraph(b, c, packed, keys, drop)
	})
}

// runPackedModel runs model on c's data (parameters drawn from seed) with
// the loss Σ out·r, and returns its readout and gradients.
func runPackedModel(t *testing.T, c packedCase, dt DType, seed uint64, model func(b *Builder, keys, drop []float64) *Node) graphtest.Result {
	t.Helper()
	keys, drop, r := packedData(c)
	p, err := Compile(NewParams(dt, seed), func(b *Builder) error {
		out := model(b, keys, drop)
		b.Output("out", out)
		b.SetLoss(Sum(Mul(out, b.Constant("r", []int{c.b, c.n, c.heads * c.d}, r))))
		return nil
	}, true)
	if err != nil {
		t.Fatal(err)
	}
	return graphtest.Run(t, p, "out")
}

// TestAttentionPackedIsAttention: attention on packed projections ([q k
// v] of one LinearConcat for self-attention, or q and [k v]) gives
// Attention's readout on the separately projected q, k and v and the
// same gradients of every parameter and input, to 1e-12 in float64 and
// 2e-5 in float32, with key masks, causal masks and dropout, in the Go
// loops and attention.c.
func TestAttentionPackedIsAttention(t *testing.T) {
	t.Parallel()
	for _, c := range packedCases() {
		for _, dt := range []DType{Float64, Float32} {
			what := fmt.Sprintf("%+v %v", c, dt)
			got, want := runPacked(t, c, dt, true), runPacked(t, c, dt, false)
			tol := 1e-12
			if dt == Float32 {
				tol = 2e-5
			}
			graphtest.ExpectRunsClose(t, what, got, want, tol, nil)
		}
	}
}

// TestAttentionPackedGradients: float64 finite differences through the
// packed kernels and LinearConcat.
func TestAttentionPackedGradients(t *testing.T) {
	t.Parallel()
	for i, c := range []packedCase{
		{b: 2, n: 4, m: 4, heads: 2, d: 3, self: true, causal: true, masked: true},
		{b: 2, n: 3, m: 5, heads: 2, d: 2, masked: true, dropout: true},
		{b: 1, n: 3, m: 4, heads: 1, d: 2},
	} {
		keys, drop, _ := packedData(c)
		fn := func(b *Builder) *Node { return packedAttentionGraph(b, c, true, keys, drop) }
		if _, err := CheckGradients(NewParams(Float64, uint64(i+50)), fn, GradCheckOptions{Seed: uint64(i)}); err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
	}
}

// TestAttentionPackedThreads: float32 readout and gradients are
// bit-identical with GOMAXPROCS 1 and 2, and from run to run. (With
// -tags purego only from run to run: gonum's Sgemm blocks sums over more
// than 64 terms when a product is large, so Gemm's split of the rows
// between threads changes the rounding of x's gradient there, as it
// does for the feed-forward layers'.)
func TestAttentionPackedThreads(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, c := range []packedCase{
		{b: 8, n: 16, m: 16, heads: 4, d: 16, self: true, causal: true, masked: true, dropout: true},
		{b: 8, n: 16, m: 32, heads: 4, d: 16, masked: true},
	} {
		if kernels.GemmKernelName() != "purego" {
			runtime.GOMAXPROCS(1)
		}
		one := runPacked(t, c, Float32, true)
		runtime.GOMAXPROCS(2)
		two, again := runPacked(t, c, Float32, true), runPacked(t, c, Float32, true)
		for _, r := range []graphtest.Result{two, again} {
			if !slices.Equal(one.Out["out"], r.Out["out"]) {
				t.Fatalf("%+v: readout depends on GOMAXPROCS or the run", c)
			}
			for name, g := range one.Grads {
				if !slices.Equal(g, r.Grads[name]) {
					t.Fatalf("%+v: gradient of %s depends on GOMAXPROCS or the run", c, name)
				}
			}
		}
	}
}

// TestUnpackViewIsCopy: the view an unpack returns holds the values its
// copying reference (do) writes, for both dtypes.
func TestUnpackViewIsCopy(t *testing.T) {
	t.Parallel()
	src := Normal(1)(rand.New(rand.NewPCG(1, 2)), []int{30})
	for _, dt := range []DType{Float64, Float32} {
		p, err := Compile(NewParams(dt, 1), func(b *Builder) error {
			packed := b.Constant("packed", []int{30}, src)
			parts := unpack(packed, []int{2, 3}, []int{4}, []int{5, 4})
			for i, n := range parts {
				b.Output(fmt.Sprint(i), n)
			}
			return nil
		}, false)
		if err != nil {
			t.Fatal(err)
		}
		r := graphtest.Forward(t, p, "0", "1", "2")
		got := append(append(slices.Clone(r.Out["0"]), r.Out["1"]...), r.Out["2"]...)
		want := src
		if dt == Float32 {
			want = make([]float64, len(src))
			for i, v := range src {
				want[i] = float64(float32(v))
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%v: unpacked views %v, want %v", dt, got, want)
		}
	}
}

// TestResidualAttentionPacked: q + attention in one op gives Add's
// readout and every gradient bit for bit (each value is the same one
// addition), in float64 and float32, in the Go loops (d 3) and
// attention.c (d 16), with masks and dropout; and float64 finite
// differences agree.
func TestResidualAttentionPacked(t *testing.T) {
	t.Parallel()
	for _, c := range []packedCase{
		{b: 2, n: 4, m: 5, heads: 2, d: 3, masked: true, dropout: true},
		{b: 3, n: 16, m: 11, heads: 2, d: 16, masked: true},
		{b: 2, n: 16, m: 16, heads: 4, d: 16, dropout: true},
	} {
		expectResidualAttentionIsAdd(t, "", c)
		if c.d == 3 {
			keys, drop, _ := packedData(c)
			fn := func(b *Builder) *Node { return residualAttention(b, c, true, keys, drop) }
			if _, err := CheckGradients(NewParams(Float64, 80), fn, GradCheckOptions{Seed: 3}); err != nil {
				t.Fatalf("%+v: %v", c, err)
			}
		}
	}
}

// residualAttention is q + attention of c's shape: one op with the
// residual inside (fused), or Add on the plain op.
func residualAttention(b *Builder, c packedCase, fused bool, keys, drop []float64) *Node {
	dim := c.heads * c.d
	x, y := b.Param("x", []int{c.b, c.n, dim}, Normal(1)), b.Param("y", []int{c.b, c.m, dim}, Normal(1))
	q := Linear(x, b.Param("q.w", []int{dim, dim}, Normal(0.3)), b.Param("q.b", []int{dim}, Normal(1)))
	kv := LinearConcat(y, []*Node{b.Param("k.w", []int{dim, dim}, Normal(0.3)), b.Param("v.w", []int{dim, dim}, Normal(0.3))}, nil)
	a := attentionKernel{heads: c.heads, causal: c.causal, masked: c.masked, dropout: c.dropout, packed: packKV, residual: fused, saved: &savedWeights{}}
	in := []*Node{q, kv}
	if c.masked {
		in = append(in, b.Constant("mask", []int{c.b, c.m}, keys))
	}
	if c.dropout {
		in = append(in, b.Constant("drop", []int{c.b, c.heads, c.n, c.m}, drop))
	}
	if fused {
		return apply(a, in...)
	}
	return Add(q, apply(a, in...))
}

// expectResidualAttentionIsAdd fails unless residualAttention's fused
// readout and gradients equal Add's on the plain op bit for bit, in
// float64 and float32.
func expectResidualAttentionIsAdd(t *testing.T, label string, c packedCase) {
	t.Helper()
	for _, dt := range []DType{Float64, Float32} {
		run := func(fused bool) graphtest.Result {
			return runPackedModel(t, c, dt, 12, func(b *Builder, keys, drop []float64) *Node {
				return residualAttention(b, c, fused, keys, drop)
			})
		}
		graphtest.ExpectRunsClose(t, fmt.Sprintf("%s%+v %v", label, c, dt), run(true), run(false), 0, nil)
	}
}

// TestLinearConcatDxReadsForwardPacking: dx reads the weights its forward
// packed only when they were packed from the very backings it is given;
// from other backings (the same values or not) it packs its own, and
// either way its values are those of a packing of its own inputs.
func TestLinearConcatDxReadsForwardPacking(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 4))
	vals := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return v
	}
	const rows, din = 5, 4
	dense := func(v []float32, s ...int) *tensor.Dense {
		return tensor.New(tensor.WithShape(s...), tensor.WithBacking(v))
	}
	w1, w2, x := dense(vals(din*3), din, 3), dense(vals(din*2), din, 2), dense(vals(rows*din), rows, din)
	fwd := linearConcatKernel{parts: 2, packed: &packedWeights{}}
	if err := fwd.do([]*tensor.Dense{x, w1, w2}, dense(make([]float32, rows*5), rows, 5)); err != nil {
		t.Fatal(err)
	}
	g := dense(vals(rows*5), rows, 5)
	dx := func(k linearConcatDxKernel, ws ...*tensor.Dense) []float32 {
		out := dense(make([]float32, rows*din), rows, din)
		if err := k.do(append([]*tensor.Dense{g}, ws...), out); err != nil {
			t.Fatal(err)
		}
		return floats[float32](out)
	}
	alone := linearConcatDxKernel{parts: 2, shape: fix(tensor.Shape{rows, din}), packed: &packedWeights{}}
	shared := alone
	shared.packed, shared.fwd = &packedWeights{}, fwd.packed
	want := dx(alone, w1, w2)
	if got := dx(shared, w1, w2); !slices.Equal(got, want) {
		t.Fatalf("dx on the forward's packing %v, want %v", got, want)
	}
	if shared.packed.w != nil {
		t.Fatal("dx packed the weights its forward had packed")
	}
	// other backings: new weights, then copies of the packed ones
	v1, v2 := dense(vals(din*3), din, 3), dense(vals(din*2), din, 2)
	if got, want := dx(shared, v1, v2), dx(alone, v1, v2); !slices.Equal(got, want) {
		t.Fatalf("dx of other weights %v, want %v", got, want)
	}
	c1 := dense(slices.Clone(floats[float32](w1)), din, 3)
	if got := dx(shared, c1, w2); !slices.Equal(got, want) || shared.packed.w == nil {
		t.Fatalf("dx of a copy: %v, want %v (packed its own: %v)", got, want, shared.packed.w != nil)
	}
}
