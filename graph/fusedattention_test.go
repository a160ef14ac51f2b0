package graph

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
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
// vector width, including rows with no visible key.
func TestSoftmaxRowsFastPathMatchesGo(t *testing.T) {
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
				want := append([]float32(nil), p...)
				softmaxRowsGo(want, n, m, mask, causal)
				got := append([]float32(nil), p...)
				if !softmaxRows32(got, n, m, mask, causal) {
					t.Skip("no fast path in this build")
				}
				for i := range got {
					if d := math.Abs(float64(got[i] - want[i])); d > 2e-6 || (want[i] == 0) != (got[i] == 0) {
						t.Fatalf("m=%d causal=%v masked=%v: p[%d] = %v, Go loop %v", m, causal, masked, i, got[i], want[i])
					}
				}
			}
		}
	}
}

// TestAttentionFloat32MatchesFloat64: float32 attention (attention.c per
// head where the build and CPU have it: key counts and head widths that
// are multiples of 8; matrix products otherwise) agrees with float64 in
// value and in every gradient, with key masks and the causal mask, over
// two runs of one program.
func TestAttentionFloat32MatchesFloat64(t *testing.T) {
	cases := []struct {
		name           string
		n, m, dim, hds int
		causal, masked bool
	}{
		{"cross", 5, 16, 16, 2, false, false},
		{"cross-masked", 7, 8, 32, 4, false, true},
		{"self-causal-masked", 8, 8, 16, 2, true, true},
		{"odd-sizes", 3, 5, 12, 2, false, true},
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
		progs := map[DType]*Program{}
		for _, dt := range []DType{Float32, Float64} {
			p, err := Compile(NewParams(dt, 4), fn, true)
			if err != nil {
				t.Fatal(err)
			}
			progs[dt] = p
		}
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
			feeds["mask"] = mask
			expectFloat32MatchesFloat64(t, progs, feeds, fmt.Sprintf("%s run %d", c.name, run))
		}
	}
}

// TestAttentionWeightsHaveNoGradient: a loss that reaches parameters only
// through AttentionWeights fails to compile, naming the op, instead of
// training them with a zero gradient.
func TestAttentionWeightsHaveNoGradient(t *testing.T) {
	_, err := Compile(NewParams(Float64, 1), func(b *Builder) error {
		q := b.Param("q", []int{1, 2, 4}, Normal(1))
		b.SetLoss(Sum(AttentionWeights(q, q, nil, 2, false)))
		return nil
	}, true)
	if err == nil || !strings.Contains(err.Error(), "has no gradient") {
		t.Fatalf("error %v, want one saying the weights have no gradient", err)
	}
}
