package graph

import (
	"fmt"
	"github.com/probformer/probformer/graph/graphtest"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// fixedDropMask returns n Bernoulli(1−p)/(1−p) values from a seeded
// generator: a dropout mask fed as a constant.
func fixedDropMask(seed uint64, n int, p float64) []float64 {
	rng := rand.New(rand.NewPCG(seed, seed))
	d := make([]float64, n)
	for i := range d {
		if rng.Float64() >= p {
			d[i] = 1 / (1 - p)
		}
	}
	return d
}

// TestAttentionDropoutGradients: float64 finite differences agree with the
// analytic gradients of q, k and v through out_h = (P_h ⊙ D_h) v_h for a
// fixed mask D, with a key mask, and with the causal mask where a query
// sees no key.
func TestAttentionDropoutGradients(t *testing.T) {
	t.Parallel()
	keys := []float64{1, 1, 0, 1, 0, 1, 1, 1} // [2, 4]; example 1's key 0 is padding
	cases := []struct {
		name string
		fn   func(drop []float64) func(b *Builder) *Node
		drop int // mask size B·H·N·M
	}{
		{"plain", func(drop []float64) func(b *Builder) *Node {
			return func(b *Builder) *Node {
				return attentionDropped(randParam(b, "q", 2, 3, 6), randParam(b, "k", 2, 4, 6), randParam(b, "v", 2, 4, 4), nil,
					b.Constant("drop", []int{2, 2, 3, 4}, drop), 2, false)
			}
		}, 2 * 2 * 3 * 4},
		{"key-masked", func(drop []float64) func(b *Builder) *Node {
			return func(b *Builder) *Node {
				return attentionDropped(randParam(b, "q", 2, 3, 6), randParam(b, "k", 2, 4, 6), randParam(b, "v", 2, 4, 4),
					b.Constant("mask", []int{2, 4}, keys), b.Constant("drop", []int{2, 2, 3, 4}, drop), 2, false)
			}
		}, 2 * 2 * 3 * 4},
		{"causal-masked", func(drop []float64) func(b *Builder) *Node {
			return func(b *Builder) *Node {
				x := randParam(b, "x", 2, 4, 6)
				return attentionDropped(Tanh(x), x, randParam(b, "v", 2, 4, 3), b.Constant("mask", []int{2, 4}, keys),
					b.Constant("drop", []int{2, 3, 4, 4}, drop), 3, true)
			}
		}, 2 * 3 * 4 * 4},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			drop := fixedDropMask(uint64(i+1), c.drop, 0.3)
			if _, err := CheckGradients(NewParams(Float64, uint64(i+30)), c.fn(drop), GradCheckOptions{Seed: uint64(i)}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestAttentionDropoutOfOnesIsAttention: with a mask of ones (keep all,
// scale 1) the readout and every gradient are bit-identical to
// Attention's, in float64 and in float32, at translation sizes.
func TestAttentionDropoutOfOnesIsAttention(t *testing.T) {
	t.Parallel()
	const batch, n, dim, heads = 2, 11, 64, 4
	for _, causal := range []bool{false, true} {
		m := 10
		if causal {
			m = n
		}
		keys := make([]float64, batch*m)
		for i := range keys {
			keys[i] = float64(min(1, i%4))
		}
		r := Normal(1)(rand.New(rand.NewPCG(2, 2)), []int{batch * n * dim})
		for _, dt := range []DType{Float64, Float32} {
			run := func(dropped bool) ([]float64, map[string][]float64) {
				p, err := Compile(NewParams(dt, 7), func(b *Builder) error {
					q, k, v := b.Param("q", []int{batch, n, dim}, Normal(1)), b.Param("k", []int{batch, m, dim}, Normal(1)), b.Param("v", []int{batch, m, dim}, Normal(1))
					mask := b.Constant("mask", []int{batch, m}, keys)
					y := Attention(q, k, v, mask, heads, causal)
					if dropped {
						ones := make([]float64, batch*heads*n*m)
						for i := range ones {
							ones[i] = 1
						}
						y = attentionDropped(q, k, v, mask, b.Constant("drop", []int{batch, heads, n, m}, ones), heads, causal)
					}
					b.Output("y", y)
					b.SetLoss(Sum(Mul(y, b.Constant("r", []int{batch, n, dim}, r))))
					return nil
				}, true)
				if err != nil {
					t.Fatal(err)
				}
				if err := p.Run(); err != nil {
					t.Fatal(err)
				}
				y, _, _ := p.Output("y")
				g, err := p.Gradients()
				if err != nil {
					t.Fatal(err)
				}
				return y, g
			}
			y, g := run(true)
			wantY, wantG := run(false)
			if !slices.Equal(y, wantY) {
				t.Fatalf("causal=%v %v: readout with a mask of ones differs from Attention", causal, dt)
			}
			for name, w := range wantG {
				if !slices.Equal(g[name], w) {
					t.Fatalf("causal=%v %v: gradient of %s with a mask of ones differs from Attention", causal, dt, name)
				}
			}
		}
	}
}

// TestAttentionDropoutTraining: in a training graph AttentionDropout
// declares a mask input [B, H, N, M] that DrawDropout fills with
// Bernoulli(1−p)/(1−p) values, and its readout is the definition with
// that mask (masked keys and hidden future keys still weigh 0), in
// float64 and float32; a new draw changes the readout.
func TestAttentionDropoutTraining(t *testing.T) {
	t.Parallel()
	const batch, n, m, dim, heads, p = 3, 11, 11, 32, 2, 0.25
	c := attnCase{b: batch, h: heads, n: n, m: m, d: dim / heads, dv: dim / heads, causal: true, masked: true, dropout: true}
	x := newAttnData(rand.New(rand.NewPCG(3, 3)), c)
	for _, dt := range []DType{Float64, Float32} {
		prog, err := Compile(NewParams(dt, 9), func(b *Builder) error {
			q, k, v := b.Input("q", batch, n, dim), b.Param("k", []int{batch, m, dim}, Normal(1)), b.Input("v", batch, m, dim)
			y := b.AttentionDropout("dec.0.attn.drop", q, k, v, b.Input("mask", batch, m), heads, true, p)
			b.Output("y", y)
			b.SetLoss(Sum(y))
			return nil
		}, true)
		if err != nil {
			t.Fatal(err)
		}
		if s := prog.InputShape("dec.0.attn.drop"); !slices.Equal(s, []int{batch, heads, n, m}) {
			t.Fatalf("%v: dropout mask shape %v, want [%d %d %d %d]", dt, s, batch, heads, n, m)
		}
		for name, v := range map[string][]float64{"q": x.q, "v": x.v, "mask": x.mask} {
			if err := prog.Feed(name, v); err != nil {
				t.Fatal(err)
			}
		}
		x.k = prog.Params()[0].Values()
		rng := rand.New(rand.NewPCG(4, 4))
		var prev []float64
		for draw := range 2 {
			prog.DrawDropout(rng)
			if err := prog.Run(); err != nil {
				t.Fatal(err)
			}
			x.drop = toFloat64(prog.inputs["dec.0.attn.drop"].value.Data())
			dropped := 0
			for _, d := range x.drop {
				switch {
				case d == 0:
					dropped++
				case math.Abs(d-1/(1-p)) > 1e-6:
					t.Fatalf("%v: mask value %v, want 0 or %v", dt, d, 1/(1-p))
				}
			}
			if f := float64(dropped) / float64(len(x.drop)); math.Abs(f-p) > 0.05 {
				t.Fatalf("%v: dropped fraction %v, want %v", dt, f, p)
			}
			y, _, _ := prog.Output("y")
			tol := 1e-13
			if dt == Float32 {
				tol = 1e-5
			}
			if e := graphtest.RelDiff(y, refAttention(c, x)); e > tol {
				t.Fatalf("%v draw %d: readout rel diff %g from the definition", dt, draw, e)
			}
			if slices.Equal(y, prev) {
				t.Fatalf("%v: a new draw left the readout unchanged", dt)
			}
			prev = y
		}
	}
}

// TestAttentionDropoutFloat32MatchesFloat64: with the same fed dropout
// mask, float32 (attention.c where the build has it) agrees with float64
// in value and every gradient at m = 10 and 11, with key masks, the
// causal mask and queries that see no key.
func TestAttentionDropoutFloat32MatchesFloat64(t *testing.T) {
	t.Parallel()
	const batch, dim, heads = 3, 64, 4
	for _, c := range []struct {
		name      string
		n, m      int
		causal    bool
		emptyLast bool // the last example's keys are all padding
	}{{"cross-m10", 11, 10, false, true}, {"self-causal-m11", 11, 11, true, false}} {
		fn := func(b *Builder) error {
			x := b.Input("x", batch, c.n, dim)
			mem := b.Input("mem", batch, c.m, dim)
			if c.causal {
				mem = x
			}
			q := Linear(x, b.Param("wq", []int{dim, dim}, Glorot), nil)
			k := Linear(mem, b.Param("wk", []int{dim, dim}, Glorot), nil)
			v := Linear(mem, b.Param("wv", []int{dim, dim}, Glorot), nil)
			y := b.AttentionDropout("drop", q, k, v, b.Input("mask", batch, c.m), heads, c.causal, 0.1)
			b.Output("y", y)
			b.SetLoss(Mean(Square(Sub(y, b.Input("t", batch, c.n, dim)))))
			return nil
		}
		progs := compileBothDTypes(t, fn, 4)
		rng := rand.New(rand.NewPCG(6, 6))
		mask := make([]float64, batch*c.m)
		for i := range mask {
			mask[i] = float64(min(1, rng.IntN(4)))
		}
		mask[c.m] = 0 // the second example's first key is padding
		if c.emptyLast {
			clear(mask[(batch-1)*c.m:])
		}
		feeds := map[string][]float64{
			"x": Normal(1.5)(rng, []int{batch * c.n * dim}), "mem": Normal(1.5)(rng, []int{batch * c.m * dim}),
			"t": Normal(1.5)(rng, []int{batch * c.n * dim}), "mask": mask,
			"drop": fixedDropMask(7, batch*heads*c.n*c.m, 0.1),
		}
		expectFloat32MatchesFloat64(t, progs, feeds, c.name)
	}
}

// TestAttentionDropoutOff: in an evaluation graph, or with p = 0, the op
// is exactly Attention and declares no mask; p ≥ 1 is refused, naming the
// mask.
func TestAttentionDropoutOff(t *testing.T) {
	t.Parallel()
	const batch, n, m, dim, heads = 2, 5, 11, 16, 2
	build := func(p float64, plain bool) BuildFunc {
		return func(b *Builder) error {
			q, k, v := b.Param("q", []int{batch, n, dim}, Normal(1)), b.Param("k", []int{batch, m, dim}, Normal(1)), b.Param("v", []int{batch, m, dim}, Normal(1))
			mask := b.Constant("mask", []int{batch, m}, []float64{1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1})
			y := Attention(q, k, v, mask, heads, false)
			if !plain {
				y = b.AttentionDropout("drop", q, k, v, mask, heads, false, p)
			}
			b.Output("y", y)
			b.SetLoss(Sum(y))
			return nil
		}
	}
	for _, dt := range []DType{Float64, Float32} {
		want, err := Evaluate(NewParams(dt, 3), build(0, true), "y")
		if err != nil {
			t.Fatal(err)
		}
		got, err := Evaluate(NewParams(dt, 3), build(0.1, false), "y")
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got[0], want[0]) {
			t.Fatalf("%v: evaluation graph with p = 0.1 differs from Attention", dt)
		}
		train, err := Compile(NewParams(dt, 3), build(0, false), true)
		if err != nil {
			t.Fatal(err)
		}
		if train.HasInput("drop") {
			t.Fatalf("%v: p = 0 declares a dropout mask", dt)
		}
		if err := train.Run(); err != nil {
			t.Fatal(err)
		}
		if y, _, _ := train.Output("y"); !slices.Equal(y, want[0]) {
			t.Fatalf("%v: training graph with p = 0 differs from Attention", dt)
		}
	}
	_, err := Compile(NewParams(Float32, 1), build(1, false), true)
	if err == nil || !strings.Contains(err.Error(), "drop") {
		t.Fatalf("p = 1: error %v, want one naming the mask", err)
	}
}

// TestAttentionDropoutMaskedKeysStayZero: with a dropout mask, a padding
// key's value never reaches the readout (a huge v there changes no bit)
// and the padding key gets no gradient, in float64 and float32.
func TestAttentionDropoutMaskedKeysStayZero(t *testing.T) {
	t.Parallel()
	c := attnCase{b: 3, h: 2, n: 11, m: 10, d: 16, dv: 16, masked: true, dropout: true}
	x := newAttnData(rand.New(rand.NewPCG(10, 10)), c)
	huge := x
	huge.v = slices.Clone(x.v)
	hv := c.h * c.dv
	for bi := range c.b {
		for j := range c.m {
			if x.mask[bi*c.m+j] == 0 {
				for e := range hv {
					huge.v[(bi*c.m+j)*hv+e] = 1e6
				}
			}
		}
	}
	for dt, run := range map[string]func(x attnData) attnResult{
		"float64": func(x attnData) attnResult { return runAttentionKernel[float64](t, c, x) },
		"float32": func(x attnData) attnResult { return runAttentionKernel[float32](t, c, x) },
	} {
		r := run(x)
		expectExactZeros(t, c, x, r, fmt.Sprintf("%s with dropout", dt))
		if !slices.Equal(run(huge).out, r.out) {
			t.Fatalf("%s: values at padding keys reach the readout", dt)
		}
	}
}
