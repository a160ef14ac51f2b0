package graph

import (
	"fmt"
	"github.com/probformer/probformer/graph/graphtest"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"

	"gorgonia.org/tensor"

	"github.com/probformer/probformer/graph/internal/kernels"
)

// composedAttention is the same attention written with Gorgonia's own ops
// (4-D batched matmuls and the composed masked softmax), as a reference
// for the fused op. q [B, N, H·d] etc.
func composedAttention(b *Builder, q, k, v, mask *Node, heads int, causal bool) *Node {
	split := func(x *Node) *Node {
		s := Shape(x)
		return Transpose(Reshape(x, s[0], s[1], heads, s[2]/heads), 0, 2, 1, 3)
	}
	qs, ks, vs := split(q), split(k), split(v)
	d := Shape(qs)[3]
	scores := Scale(BatchedMatMul(qs, ks, false, true), 1/math.Sqrt(float64(d)))
	if causal {
		n := Shape(q)[1]
		c := make([]float64, n*n)
		for i := range n {
			for j := i + 1; j < n; j++ {
				c[i*n+j] = MaskNegInf
			}
		}
		scores = BroadcastAdd(scores, b.Constant("causal", []int{n, n}, c), 0, 1)
	}
	w := MaskedSoftmax(scores, mask)
	o := Transpose(BatchedMatMul(w, vs, false, false), 0, 2, 1, 3)
	s := Shape(o)
	return Reshape(o, s[0], s[1], s[2]*s[3])
}

func TestFusedAttentionMatchesComposed(t *testing.T) {
	t.Parallel()
	mask := []float64{1, 1, 0, 1, 1, 1, 1, 1}
	for _, c := range []struct {
		name   string
		masked bool
		causal bool
		n      int
	}{{"plain", false, false, 3}, {"masked", true, false, 3}, {"causal", false, true, 4}, {"causal-masked", true, true, 4}} {
		for _, dt := range []DType{Float64, Float32} {
			rng := rand.New(rand.NewPCG(1, 1))
			q, k, v := Normal(1)(rng, []int{2, c.n, 6}), Normal(1)(rng, []int{2, 4, 6}), Normal(1)(rng, []int{2, 4, 4})
			run := func(fused bool) []float64 {
				out, _ := runForward(t, dt, func(b *Builder) *Node {
					qn, kn, vn := b.Constant("q", []int{2, c.n, 6}, q), b.Constant("k", []int{2, 4, 6}, k), b.Constant("v", []int{2, 4, 4}, v)
					var m *Node
					if c.masked {
						m = b.Constant("mask", []int{2, 4}, mask)
					}
					if fused {
						return Attention(qn, kn, vn, m, 2, c.causal)
					}
					return composedAttention(b, qn, kn, vn, m, 2, c.causal)
				})
				return out
			}
			a, want := run(true), run(false)
			tol := 1e-13
			if dt == Float32 {
				tol = 1e-5
			}
			for i := range want {
				if math.Abs(a[i]-want[i]) > tol {
					t.Fatalf("%s %v: out[%d] = %v, composed %v", c.name, dt, i, a[i], want[i])
				}
			}
		}
	}
}

func TestFusedOpGradients(t *testing.T) {
	t.Parallel()
	mask := []float64{1, 1, 0, 1, 0, 1, 1, 1}
	cases := []struct {
		name string
		fn   func(b *Builder) *Node
	}{
		{"attention", func(b *Builder) *Node {
			return Attention(randParam(b, "q", 2, 3, 6), randParam(b, "k", 2, 4, 6), randParam(b, "v", 2, 4, 4), nil, 2, false)
		}},
		{"attention-masked", func(b *Builder) *Node {
			return Attention(randParam(b, "q", 2, 3, 6), randParam(b, "k", 2, 4, 6), randParam(b, "v", 2, 4, 4),
				b.Constant("mask", []int{2, 4}, mask), 2, false)
		}},
		{"attention-causal-masked", func(b *Builder) *Node {
			x := randParam(b, "x", 2, 4, 6)
			return Attention(Tanh(x), x, randParam(b, "v", 2, 4, 3), b.Constant("mask", []int{2, 4}, mask), 3, true)
		}},
		{"attention-then-inplace", func(b *Builder) *Node {
			o := Attention(randParam(b, "q", 1, 2, 2), randParam(b, "k", 1, 3, 2), randParam(b, "v", 1, 3, 2), nil, 1, false)
			return Add(Square(AddScalar(o, 1)), o)
		}},
		{"linear-nobias-4d", func(b *Builder) *Node {
			return Linear(randParam(b, "x", 2, 2, 3, 4), randParam(b, "w", 4, 5), nil)
		}},
		{"layernorm-2d", func(b *Builder) *Node {
			return LayerNorm(randParam(b, "x", 5, 3), randParam(b, "g", 3), randParam(b, "b", 3), 1e-5)
		}},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := CheckGradients(NewParams(Float64, uint64(i+10)), c.fn, GradCheckOptions{Seed: uint64(i)}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestAttentionWeights(t *testing.T) {
	t.Parallel()
	w, shape := runForward(t, Float64, func(b *Builder) *Node {
		q := b.Constant("q", []int{1, 2, 2}, []float64{1, 0, 0, 1})
		k := b.Constant("k", []int{1, 3, 2}, []float64{1, 0, 0, 1, 5, 5})
		return AttentionWeights(q, k, b.Constant("m", []int{1, 3}, []float64{1, 1, 0}), 1, false)
	})
	if len(shape) != 4 || shape[1] != 1 || shape[2] != 2 || shape[3] != 3 {
		t.Fatalf("shape %v", shape)
	}
	e := math.Exp(1 / math.Sqrt2)
	want := []float64{e / (e + 1), 1 / (e + 1), 0, 1 / (e + 1), e / (e + 1), 0}
	for i := range want {
		if math.Abs(w[i]-want[i]) > 1e-15 {
			t.Fatalf("weights %v, want %v", w, want)
		}
	}
}

func TestCustomOpShapeErrors(t *testing.T) {
	t.Parallel()
	_, err := Compile(NewParams(Float32, 1), func(b *Builder) error {
		Attention(b.Input("q", 2, 3, 6), b.Input("k", 2, 4, 4), b.Input("v", 2, 4, 4), nil, 2, false)
		return nil
	}, false)
	if err == nil {
		t.Fatal("q and k of different widths accepted")
	}
	_, err = Compile(NewParams(Float32, 1), func(b *Builder) error {
		Attention(b.Input("q", 2, 3, 4), b.Input("k", 2, 4, 4), b.Input("v", 2, 4, 4), nil, 2, true)
		return nil
	}, false)
	if err == nil {
		t.Fatal("causal attention with N ≠ M accepted")
	}
}

func TestBatchedMatMulGradients(t *testing.T) {
	t.Parallel()
	for i, tr := range [][2]bool{{false, false}, {false, true}, {true, false}, {true, true}} {
		_, err := CheckGradients(NewParams(Float64, uint64(i+20)), func(b *Builder) *Node {
			as, bs := []int{2, 3, 4, 5}, []int{2, 3, 5, 6}
			if tr[0] {
				as = []int{2, 3, 5, 4}
			}
			if tr[1] {
				bs = []int{2, 3, 6, 5}
			}
			return Tanh(BatchedMatMul(randParam(b, "a", as...), randParam(b, "c", bs...), tr[0], tr[1]))
		}, GradCheckOptions{Seed: uint64(i)})
		if err != nil {
			t.Fatalf("transposes %v: %v", tr, err)
		}
	}
}

func TestSoftmaxCrossEntropy(t *testing.T) {
	t.Parallel()
	logits := []float64{1, 2, 3, 0, 800, -800, 0.5, 0.25, 0.125}
	targets := []int{2, 0, 1}
	for _, eps := range []float64{0, 0.1} {
		got, _ := runForward(t, Float64, func(b *Builder) *Node {
			return SoftmaxCrossEntropy(b.Constant("l", []int{3, 3}, logits), b.IndexConstant("y", []int{3}, targets), eps)
		})
		for r := range 3 {
			x := logits[r*3 : r*3+3]
			m := math.Max(x[0], math.Max(x[1], x[2]))
			lse := m + math.Log(math.Exp(x[0]-m)+math.Exp(x[1]-m)+math.Exp(x[2]-m))
			want := -(1-eps)*(x[targets[r]]-lse) - eps*((x[0]+x[1]+x[2])/3-lse)
			if math.Abs(got[r]-want) > 1e-12*math.Max(1, math.Abs(want)) {
				t.Fatalf("ε=%v row %d: %v, want %v", eps, r, got[r], want)
			}
		}
		if _, err := CheckGradients(NewParams(Float64, 5), func(b *Builder) *Node {
			return SoftmaxCrossEntropy(randParam(b, "l", 2, 3, 5), b.IndexConstant("y", []int{2, 3}, []int{0, 4, 2, 2, 1, 3}), eps)
		}, GradCheckOptions{}); err != nil {
			t.Fatalf("ε=%v: %v", eps, err)
		}
	}
	prog, err := Compile(NewParams(Float64, 1), func(b *Builder) error {
		b.Output("l", SoftmaxCrossEntropy(b.Constant("l", []int{1, 3}, []float64{1, 2, 3}), b.IndexConstant("y", []int{1}, []int{3}), 0))
		return nil
	}, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := prog.Run(); err == nil {
		t.Fatal("a target outside the vocabulary ran")
	}
}

// TestSoftmaxRowsFastPathMatchesGo: the AVX2 row softmax (where the CPU
// and build have it) agrees with the Go loop to float32 rounding, with
// and without a key mask and the causal mask, for row lengths around the
// vector width, including rows with no visible key, and on which rows
// are NaN: the last row has NaN scores at keys 0 (padding when masked)
// and m−1.
func TestSoftmaxRowsFastPathMatchesGo(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(4, 4))
	for _, m := range []int{1, 5, 8, 13, 16, 33} {
		for _, causal := range []bool{false, true} {
			for _, masked := range []bool{false, true} {
				n := m
				if !causal {
					n = 3
				}
				p := make([]float32, n*m)
				for i := range p {
					p[i] = float32(rng.NormFloat64() * 10)
				}
				var mask []float32
				if masked {
					mask = make([]float32, m)
					for j := range mask {
						mask[j] = float32(rng.IntN(3) % 2)
					}
					mask[0] = 0 // causal row 0 sees no key
				}
				p[(n-1)*m] = float32(math.NaN())
				p[n*m-1] = float32(math.NaN())
				want := append([]float32(nil), p...)
				softmaxRowsGo(want, n, m, mask, causal)
				got := append([]float32(nil), p...)
				if !kernels.SoftmaxRows32(got, n, m, mask, causal) {
					t.Skip("no fast path in this build")
				}
				for i := range got {
					nan := math.IsNaN(float64(want[i]))
					if d := math.Abs(float64(got[i] - want[i])); d > 2e-6 || (want[i] == 0) != (got[i] == 0) || nan != math.IsNaN(float64(got[i])) {
						t.Fatalf("m=%d causal=%v masked=%v: p[%d] = %v, Go loop %v", m, causal, masked, i, got[i], want[i])
					}
				}
			}
		}
	}
}

// TestAttentionFloat32MatchesFloat64: float32 attention (attention.c per
// head where the build and CPU have it: head widths that are multiples of
// 8 and up to 64 keys; matrix products otherwise) agrees with float64 in
// value and in every gradient, with key masks and the causal mask, over
// two runs of one program. The m = 10 and 11 cases are translation
// batches; there the second example's first query sees no key (causal),
// or the third example is all padding (cross).
func TestAttentionFloat32MatchesFloat64(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name           string
		n, m, dim, hds int
		causal, masked bool
		emptyExample   bool // the last example's keys are all padding
	}{
		{"cross", 5, 16, 16, 2, false, false, false},
		{"cross-masked", 7, 8, 32, 4, false, true, false},
		{"self-causal-masked", 8, 8, 16, 2, true, true, false},
		{"odd-sizes", 3, 5, 12, 2, false, true, false},
		{"cross-m10-masked", 11, 10, 64, 4, false, true, true},
		{"cross-m11", 10, 11, 64, 4, false, false, false},
		{"self-causal-m11", 11, 11, 64, 4, true, false, false},
		{"self-causal-masked-m11", 11, 11, 64, 4, true, true, false},
	}
	for _, c := range cases {
		const batch = 3
		fn := func(b *Builder) error {
			x := b.Input("x", batch, c.n, c.dim)
			mem := b.Input("mem", batch, c.m, c.dim)
			if c.causal {
				mem = x
			}
			var mask *Node
			if c.masked {
				mask = b.Input("mask", batch, c.m)
			}
			q := Linear(x, b.Param("wq", []int{c.dim, c.dim}, Glorot), nil)
			k := Linear(mem, b.Param("wk", []int{c.dim, c.dim}, Glorot), nil)
			v := Linear(mem, b.Param("wv", []int{c.dim, c.dim}, Glorot), nil)
			y := Attention(q, k, v, mask, c.hds, c.causal)
			b.Output("y", y)
			b.SetLoss(Mean(Square(Sub(y, b.Input("t", batch, c.n, c.dim)))))
			return nil
		}
		progs := compileBothDTypes(t, fn, 4)
		rng := rand.New(rand.NewPCG(6, 6))
		for run := range 2 {
			feeds := map[string][]float64{}
			for _, in := range []struct {
				name string
				size int
			}{{"x", batch * c.n * c.dim}, {"mem", batch * c.m * c.dim}, {"t", batch * c.n * c.dim}} {
				feeds[in.name] = Normal(1.5)(rng, []int{in.size})
			}
			mask := make([]float64, batch*c.m)
			for i := range mask {
				mask[i] = float64(rng.IntN(4) % 3 % 2)
			}
			mask[c.m] = 0 // the second example's first key is padding
			if c.emptyExample {
				clear(mask[(batch-1)*c.m:])
			}
			feeds["mask"] = mask
			expectFloat32MatchesFloat64(t, progs, feeds, fmt.Sprintf("%s run %d", c.name, run))
		}
	}
}

// TestAttentionWeightsHaveNoGradient: a loss that reaches parameters only
// through AttentionWeights fails to compile, naming the op, instead of
// training them with a zero gradient.
func TestAttentionWeightsHaveNoGradient(t *testing.T) {
	t.Parallel()
	_, err := Compile(NewParams(Float64, 1), func(b *Builder) error {
		q := b.Param("q", []int{1, 2, 4}, Normal(1))
		b.SetLoss(Sum(AttentionWeights(q, q, nil, 2, false)))
		return nil
	}, true)
	if err == nil || !strings.Contains(err.Error(), "has no gradient") {
		t.Fatalf("error %v, want one saying the weights have no gradient", err)
	}
}

// BenchmarkAttention times one fused attention op, forward then backward,
// at translation sizes: B = 64, H = 4, d = 16, float32, a key mask, and
// N = M = 11 (not a multiple of 8); without and with the causal mask, and
// with a dropout mask on the weights.
func BenchmarkAttention(b *testing.B) {
	const batch, heads, n, m, d = 64, 4, 11, 11, 16
	rng := rand.New(rand.NewPCG(9, 9))
	dense := func(shape ...int) *tensor.Dense {
		return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(to32(Normal(1)(rng, []int{shapeSize(shape)}))))
	}
	q, k, v, g := dense(batch, n, heads*d), dense(batch, m, heads*d), dense(batch, m, heads*d), dense(batch, n, heads*d)
	mask := make([]float32, batch*m)
	for i := range mask {
		mask[i] = float32(min(1, (i%m+i/m)%7)) // some padding keys
	}
	drop := to32(fixedDropMask(1, batch*heads*n*m, 0.1))
	in := []*tensor.Dense{q, k, v, tensor.New(tensor.WithShape(batch, m), tensor.WithBacking(mask))}
	for _, c := range []struct{ causal, dropout bool }{{false, false}, {true, false}, {true, true}} {
		a := attentionKernel{heads: heads, causal: c.causal, masked: true, dropout: c.dropout, saved: &savedWeights{}}
		in := in
		name := fmt.Sprintf("B64-H4-N11-M11-d16-causal=%v", c.causal)
		if c.dropout {
			in = append(slices.Clip(in), tensor.New(tensor.WithShape(batch, heads, n, m), tensor.WithBacking(drop)))
			name += "-dropout"
		}
		out := make([]float32, batch*n*heads*d)
		packed := make([]float32, 3*batch*m*heads*d)
		b.Run(name, func(b *testing.B) {
			for range b.N {
				attentionForward(a, in, out, nil)
				attentionBackward(a, append(slices.Clip(in), g), packed)
			}
		})
	}
}

// attnCase is one attention layout for the kernel-level tests: B
// examples, H heads of widths d and dv, N queries and M keys.
type attnCase struct {
	b, h, n, m, d, dv       int
	causal, masked, dropout bool
	biased                  bool // an additive score bias [B, H, N, M]
}

// attnData holds a case's operands: q [B, N, H·d], k [B, M, H·d],
// v [B, M, H·dv], the key mask [B, M] (nil unless masked), the dropout
// mask [B, H, N, M] (nil unless dropout), the score bias [B, H, N, M]
// (nil unless biased) and the output gradient g [B, N, H·dv].
type attnData struct{ q, k, v, mask, drop, bias, g []float64 }

// newAttnData draws a case's operands. With a key mask, the first
// example's key 0 is padding (so with the causal mask its query 0 sees no
// key) and the second example is all padding (none of its queries sees a
// key). Dropout keeps a unit with probability 0.7, scaled by 1/0.7.
func newAttnData(rng *rand.Rand, c attnCase) attnData {
	x := attnData{
		q: Normal(1)(rng, []int{c.b * c.n * c.h * c.d}),
		k: Normal(1)(rng, []int{c.b * c.m * c.h * c.d}),
		v: Normal(1)(rng, []int{c.b * c.m * c.h * c.dv}),
		g: Normal(1)(rng, []int{c.b * c.n * c.h * c.dv}),
	}
	if c.masked {
		x.mask = make([]float64, c.b*c.m)
		for i := range x.mask {
			x.mask[i] = float64(min(1, rng.IntN(4)))
		}
		x.mask[0] = 0
		clear(x.mask[c.m : 2*c.m])
	}
	if c.dropout {
		x.drop = make([]float64, c.b*c.h*c.n*c.m)
		for i := range x.drop {
			if rng.Float64() < 0.7 {
				x.drop[i] = 1 / 0.7
			}
		}
	}
	if c.biased {
		// log-normal noise of σ = 1.5, as a Bayesian sample adds
		x.bias = Normal(1.5)(rng, []int{c.b * c.h * c.n * c.m})
	}
	return x
}

// visible reports whether query i of example bi sees key j.
func (c attnCase) visible(x attnData, bi, i, j int) bool {
	return (x.mask == nil || x.mask[bi*c.m+j] != 0) && (!c.causal || j <= i)
}

// refAttention is the definition, in plain float64 loops: per example,
// head and query, the softmax of the scaled scores (plus the bias, if
// any) over the visible keys
// (0 elsewhere; all 0 if none is visible), times the dropout mask, times
// v.
func refAttention(c attnCase, x attnData) []float64 {
	out := make([]float64, c.b*c.n*c.h*c.dv)
	hd, hv := c.h*c.d, c.h*c.dv
	for bi := range c.b {
		for h := range c.h {
			for i := range c.n {
				w := make([]float64, c.m)
				mx := math.Inf(-1)
				for j := range c.m {
					if !c.visible(x, bi, i, j) {
						continue
					}
					for e := range c.d {
						w[j] += x.q[(bi*c.n+i)*hd+h*c.d+e] * x.k[(bi*c.m+j)*hd+h*c.d+e]
					}
					w[j] /= math.Sqrt(float64(c.d))
					if x.bias != nil {
						w[j] += x.bias[((bi*c.h+h)*c.n+i)*c.m+j]
					}
					mx = math.Max(mx, w[j])
				}
				var z float64
				for j := range c.m {
					if c.visible(x, bi, i, j) {
						w[j] = math.Exp(w[j] - mx)
						z += w[j]
					}
				}
				for j := range c.m {
					if !c.visible(x, bi, i, j) {
						continue
					}
					w[j] /= z
					if x.drop != nil {
						w[j] *= x.drop[((bi*c.h+h)*c.n+i)*c.m+j]
					}
					for e := range c.dv {
						out[(bi*c.n+i)*hv+h*c.dv+e] += w[j] * x.v[(bi*c.m+j)*hv+h*c.dv+e]
					}
				}
			}
		}
	}
	return out
}

// attnResult is one forward and backward pass: the readout, the saved
// weights [B, H, N, M] (before dropout) and the gradients of q, k, v.
type attnResult struct{ out, p, dq, dk, dv []float64 }

// convert returns v in T.
func convert[T float](v []float64) []T {
	out := make([]T, len(v))
	for i, x := range v {
		out[i] = T(x)
	}
	return out
}

// runAttentionKernel runs attentionForward and attentionBackward in T on
// x. Every buffer they write is followed by sentinels that must survive.
func runAttentionKernel[T float](t *testing.T, c attnCase, x attnData) attnResult {
	t.Helper()
	dense := func(v []float64, shape ...int) *tensor.Dense {
		return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(convert[T](v)))
	}
	in := []*tensor.Dense{dense(x.q, c.b, c.n, c.h*c.d), dense(x.k, c.b, c.m, c.h*c.d), dense(x.v, c.b, c.m, c.h*c.dv)}
	if c.masked {
		in = append(in, dense(x.mask, c.b, c.m))
	}
	if c.biased {
		in = append(in, dense(x.bias, c.b, c.h, c.n, c.m))
	}
	if c.dropout {
		in = append(in, dense(x.drop, c.b, c.h, c.n, c.m))
	}
	const guard, sentinel = 16, -12345.5
	buf := func(n int) []T {
		s := make([]T, n+guard)
		for i := n; i < len(s); i++ {
			s[i] = sentinel
		}
		return s[:n]
	}
	a := attentionKernel{heads: c.h, causal: c.causal, masked: c.masked, biased: c.biased, dropout: c.dropout, saved: &savedWeights{}}
	p, out, packed := buf(c.b*c.h*c.n*c.m), buf(len(x.g)), buf(len(x.q)+len(x.k)+len(x.v))
	a.saved.p = p
	attentionForward(a, in, out, nil)
	attentionBackward(a, append(in, dense(x.g, c.b, c.n, c.h*c.dv)), packed)
	for name, s := range map[string][]T{"weights": p, "out": out, "gradients": packed} {
		for _, v := range s[len(s) : len(s)+guard] {
			if v != sentinel {
				t.Fatalf("%+v: %s written past their end", c, name)
			}
		}
	}
	nq, nk := len(x.q), len(x.k)
	return attnResult{out: toFloat64(out), p: toFloat64(p), dq: toFloat64(packed[:nq]),
		dk: toFloat64(packed[nq : nq+nk]), dv: toFloat64(packed[nq+nk:])}
}

// expectZeroRow fails, with the message format and args and the first
// value that is not, unless every value of row is exactly 0.
func expectZeroRow(t *testing.T, row []float64, format string, args ...any) {
	t.Helper()
	for _, v := range row {
		if v != 0 {
			t.Fatalf(format+" %v", append(args, v)...)
		}
	}
}

// expectExactZeros checks what masking promises exactly: weight 0 on keys
// a query does not see, readout and dq 0 for a query that sees no key, and
// dk and dv 0 for a padding key.
func expectExactZeros(t *testing.T, c attnCase, x attnData, r attnResult, what string) {
	t.Helper()
	hd, hv := c.h*c.d, c.h*c.dv
	for bi := range c.b {
		for i := range c.n {
			seen := false
			for h := range c.h {
				for j := range c.m {
					if w := r.p[((bi*c.h+h)*c.n+i)*c.m+j]; !c.visible(x, bi, i, j) && w != 0 {
						t.Fatalf("%s: example %d head %d query %d has weight %v on hidden key %d", what, bi, h, i, w, j)
					}
					seen = seen || c.visible(x, bi, i, j)
				}
			}
			if seen {
				continue
			}
			at := bi*c.n + i
			expectZeroRow(t, r.out[at*hv:(at+1)*hv], "%s: example %d query %d sees no key, reads out", what, bi, i)
			expectZeroRow(t, r.dq[at*hd:(at+1)*hd], "%s: example %d query %d sees no key, has dq", what, bi, i)
		}
		for j := range c.m {
			if x.mask == nil || x.mask[bi*c.m+j] != 0 {
				continue
			}
			at := bi*c.m + j
			expectZeroRow(t, r.dk[at*hd:(at+1)*hd], "%s: example %d padding key %d has dk", what, bi, j)
			expectZeroRow(t, r.dv[at*hv:(at+1)*hv], "%s: example %d padding key %d has dv", what, bi, j)
		}
	}
}

// TestAttentionAnyKeyCount: for key counts that are and are not multiples
// of 8, with and without key mask, causal mask and dropout mask, the
// float64 op equals the definition, float32 (attention.c where the build
// has it) agrees with float64 in the readout, weights and gradients,
// masking gives exact zeros, no buffer is written past its end, and the
// results are bit-identical with GOMAXPROCS 1 and 2.
func TestAttentionAnyKeyCount(t *testing.T) {
	checkAttentionAnyKeyCount(t, rand.New(rand.NewPCG(8, 8)), []int{1, 3, 8, 10, 11, 17, 64}, false)
}

// checkAttentionAnyKeyCount is TestAttentionAnyKeyCount over the key
// counts ms, with an additive score bias when biased (BiasedAttention).
func checkAttentionAnyKeyCount(t *testing.T, rng *rand.Rand, ms []int, biased bool) {
	t.Helper()
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, m := range ms {
		for _, causal := range []bool{false, true} {
			for _, masked := range []bool{false, true} {
				for _, dropout := range []bool{false, true} {
					c := attnCase{b: 3, h: 2, n: 5, m: m, d: 16, dv: 8, causal: causal, masked: masked, dropout: dropout, biased: biased}
					if causal {
						c.n = m
					}
					what := fmt.Sprintf("m=%d causal=%v masked=%v dropout=%v", m, causal, masked, dropout)
					x := newAttnData(rng, c)
					runtime.GOMAXPROCS(2)
					r64, r32 := runAttentionKernel[float64](t, c, x), runAttentionKernel[float32](t, c, x)
					if e := graphtest.RelDiff(r64.out, refAttention(c, x)); e > 1e-13 {
						t.Fatalf("%s: float64 readout rel diff %g from the definition", what, e)
					}
					for _, f := range []struct {
						name string
						a, b []float64
						tol  float64
					}{{"out", r32.out, r64.out, 1e-5}, {"weights", r32.p, r64.p, 1e-5},
						{"dq", r32.dq, r64.dq, 1e-4}, {"dk", r32.dk, r64.dk, 1e-4}, {"dv", r32.dv, r64.dv, 1e-4}} {
						if e := graphtest.RelDiff(f.a, f.b); e > f.tol {
							t.Fatalf("%s: float32 %s rel diff %g from float64", what, f.name, e)
						}
					}
					expectExactZeros(t, c, x, r64, what+" float64")
					expectExactZeros(t, c, x, r32, what+" float32")
					runtime.GOMAXPROCS(1)
					for dt, r := range map[string][2]attnResult{
						"float64": {r64, runAttentionKernel[float64](t, c, x)},
						"float32": {r32, runAttentionKernel[float32](t, c, x)},
					} {
						for i, pair := range [][2][]float64{{r[0].out, r[1].out}, {r[0].p, r[1].p}, {r[0].dq, r[1].dq}, {r[0].dk, r[1].dk}, {r[0].dv, r[1].dv}} {
							if !slices.Equal(pair[0], pair[1]) {
								t.Fatalf("%s %s: result %d differs between GOMAXPROCS 2 and 1", what, dt, i)
							}
						}
					}
				}
			}
		}
	}
}

// TestAttentionHeadKernelTakesAnyKeyCount: where the build and CPU have
// attention.c, it takes heads of every key count up to 64 (translation
// batches have 10 or 11 keys), not only multiples of 8.
func TestAttentionHeadKernelTakesAnyKeyCount(t *testing.T) {
	t.Parallel()
	if !kernels.SoftmaxRows32(make([]float32, 1), 1, 1, nil, false) {
		t.Skip("no AVX2 kernels in this build")
	}
	const n, d = 11, 16
	q, g, out, dq := make([]float32, n*d), make([]float32, n*d), make([]float32, n*d), make([]float32, n*d)
	for m := 1; m <= 64; m++ {
		k, v, dk, dv := make([]float32, m*d), make([]float32, m*d), make([]float32, m*d), make([]float32, m*d)
		p, drop := make([]float32, n*m), make([]float32, n*m)
		if !kernels.AttnHeadFwd32(q, d, k, d, v, d, n, m, d, d, 0.25, nil, false, drop, p, out, d) ||
			!kernels.AttnHeadBwd32(q, d, k, d, v, d, g, d, p, drop, n, m, d, d, 0.25, dq, dk, dv) {
			t.Fatalf("attention.c refuses a head of %d keys", m)
		}
	}
}

// TestAttentionPropagatesNaN: a NaN score at a key a query sees makes its
// readout NaN (so the trainer's divergence check sees it), in float32 and
// float64, also when every score of the row is NaN; a NaN at a padding key
// changes nothing.
func TestAttentionPropagatesNaN(t *testing.T) {
	t.Parallel()
	c := attnCase{b: 2, h: 2, n: 11, m: 11, d: 16, dv: 8, masked: true}
	rng := rand.New(rand.NewPCG(5, 5))
	base := newAttnData(rng, c) // example 0's key 0 is padding
	hv := c.h * c.dv
	for _, tc := range []struct {
		name    string
		set     func(x *attnData)
		nanRows []int // queries of example 0 whose head-0 readout is NaN
	}{
		{"q", func(x *attnData) { x.q[3*c.h*c.d] = math.NaN() }, []int{3}},
		{"k", func(x *attnData) {
			for j := range c.m {
				if x.mask[j] != 0 {
					x.k[j*c.h*c.d] = math.NaN()
					return
				}
			}
		}, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}},
		{"padding-k", func(x *attnData) { x.k[0] = math.NaN() }, nil},
	} {
		x := base
		x.q, x.k = slices.Clone(base.q), slices.Clone(base.k)
		tc.set(&x)
		for dt, out := range map[string][]float64{
			"float64": runAttentionKernel[float64](t, c, x).out,
			"float32": runAttentionKernel[float32](t, c, x).out,
		} {
			for i := range c.n {
				for e := range hv {
					o := out[i*hv+e]
					wantNaN := e < c.dv && slices.Contains(tc.nanRows, i)
					if math.IsNaN(o) != wantNaN {
						t.Fatalf("NaN in %s, %s: example 0 query %d out[%d] = %v", tc.name, dt, i, e, o)
					}
				}
			}
		}
	}
}

// TestResidualAttentionWholeElements: with two or more batch elements a
// worker, forHeads gives each worker whole elements, all their heads in
// order; with the residual connection in the op, the readout and every
// gradient are still Add's on the plain op bit for bit, in float64 and
// float32, in the Go loops (d 3) and attention.c (d 16), at GOMAXPROCS 2
// and 1 (TestResidualAttentionPacked's batches of 2 and 3 share single
// heads at GOMAXPROCS 2).
func TestResidualAttentionWholeElements(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, procs := range []int{2, 1} {
		runtime.GOMAXPROCS(procs)
		for _, c := range []packedCase{
			{b: 4, n: 4, m: 5, heads: 2, d: 3, masked: true, dropout: true},
			{b: 5, n: 16, m: 11, heads: 4, d: 16, masked: true},
			{b: 6, n: 16, m: 32, heads: 4, d: 16, dropout: true},
		} {
			expectResidualAttentionIsAdd(t, fmt.Sprintf("GOMAXPROCS %d ", procs), c)
		}
	}
}
