package graph

import (
	"fmt"
	"github.com/probformer/probformer/graph/graphtest"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"

	"gorgonia.org/tensor"
)

// TestBiasedAttentionAnyKeyCount: with an additive score bias, for key
// counts that are and are not multiples of 8 (50 is the maxnorm set
// size), with and without key mask, causal mask and dropout, the float64
// op equals the definition, float32 (attention.c where the build has it)
// agrees with float64 in readout, weights and gradients, masking gives
// exact zeros, no buffer is written past its end, and the results are
// bit-identical with GOMAXPROCS 1 and 2.
func TestBiasedAttentionAnyKeyCount(t *testing.T) {
	checkAttentionAnyKeyCount(t, rand.New(rand.NewPCG(18, 18)), []int{1, 5, 8, 11, 16, 50}, true)
}

// TestBiasedAttentionBackwardRecomputes: a backward pass that finds no
// saved weights recomputes them with the bias, and gives the same
// gradients as one that uses the saved ones.
func TestBiasedAttentionBackwardRecomputes(t *testing.T) {
	t.Parallel()
	c := attnCase{b: 2, h: 2, n: 4, m: 6, d: 4, dv: 4, masked: true, biased: true}
	x := newAttnData(rand.New(rand.NewPCG(3, 9)), c)
	want := runAttentionKernel[float64](t, c, x)
	dense := func(v []float64, shape ...int) *tensor.Dense {
		return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(slices.Clone(v)))
	}
	in := []*tensor.Dense{dense(x.q, c.b, c.n, c.h*c.d), dense(x.k, c.b, c.m, c.h*c.d), dense(x.v, c.b, c.m, c.h*c.dv),
		dense(x.mask, c.b, c.m), dense(x.bias, c.b, c.h, c.n, c.m), dense(x.g, c.b, c.n, c.h*c.dv)}
	a := attentionKernel{heads: c.h, masked: true, biased: true}
	packed := make([]float64, len(x.q)+len(x.k)+len(x.v))
	attentionBackward(a, in, packed)
	nq, nk := len(x.q), len(x.k)
	for _, f := range []struct {
		name      string
		got, want []float64
	}{{"dq", packed[:nq], want.dq}, {"dk", packed[nq : nq+nk], want.dk}, {"dv", packed[nq+nk:], want.dv}} {
		if e := graphtest.RelDiff(f.got, f.want); e > 1e-14 {
			t.Fatalf("recomputed %s rel diff %g", f.name, e)
		}
	}
}

// TestBiasedAttentionGradients: float64 finite differences agree with the
// analytic gradients of q, k and v through softmax(q kᵀ/√d + bias) v for a
// fixed bias, with a key mask, the causal mask and dropout.
func TestBiasedAttentionGradients(t *testing.T) {
	t.Parallel()
	keys := []float64{1, 1, 0, 1, 0, 1, 1, 1} // [2, 4]
	bias := Normal(2)(rand.New(rand.NewPCG(4, 4)), []int{2 * 3 * 4 * 4})
	cases := []struct {
		name string
		fn   func(b *Builder) *Node
	}{
		{"plain", func(b *Builder) *Node {
			return BiasedAttention(randParam(b, "q", 2, 3, 6), randParam(b, "k", 2, 4, 6), randParam(b, "v", 2, 4, 4), nil,
				b.Constant("bias", []int{2, 2, 3, 4}, bias[:48]), 2, false)
		}},
		{"key-masked", func(b *Builder) *Node {
			return BiasedAttention(randParam(b, "q", 2, 3, 6), randParam(b, "k", 2, 4, 6), randParam(b, "v", 2, 4, 4),
				b.Constant("mask", []int{2, 4}, keys), b.Constant("bias", []int{2, 2, 3, 4}, bias[:48]), 2, false)
		}},
		{"causal-masked", func(b *Builder) *Node {
			x := randParam(b, "x", 2, 4, 6)
			return BiasedAttention(Tanh(x), x, randParam(b, "v", 2, 4, 3), b.Constant("mask", []int{2, 4}, keys),
				b.Constant("bias", []int{2, 3, 4, 4}, bias), 3, true)
		}},
		{"then-inplace", func(b *Builder) *Node {
			o := BiasedAttention(randParam(b, "q", 1, 2, 2), randParam(b, "k", 1, 3, 2), randParam(b, "v", 1, 3, 2), nil,
				b.Constant("bias", []int{1, 1, 2, 3}, bias[:6]), 1, false)
			return Add(Square(AddScalar(o, 1)), o)
		}},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := CheckGradients(NewParams(Float64, uint64(i+40)), c.fn, GradCheckOptions{Seed: uint64(i)}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestBiasedAttentionInfiniteBias: a bias of −∞ at a visible key (the
// Weibull noise of a uniform draw of 1) gives that key weight 0 and
// leaves the readout finite, in float32 and float64; with a zero bias the
// op is Attention bit for bit.
func TestBiasedAttentionInfiniteBias(t *testing.T) {
	t.Parallel()
	for _, dt := range []DType{Float32, Float64} {
		rng := rand.New(rand.NewPCG(2, 7))
		q, k, v := Normal(1)(rng, []int{2 * 3 * 16}), Normal(1)(rng, []int{2 * 5 * 16}), Normal(1)(rng, []int{2 * 5 * 16})
		bias := make([]float64, 2*2*3*5)
		bias[0], bias[7] = math.Inf(-1), math.Inf(-1)
		outs, err := Evaluate(NewParams(dt, 1), func(b *Builder) error {
			qn, kn, vn := b.Constant("q", []int{2, 3, 16}, q), b.Constant("k", []int{2, 5, 16}, k), b.Constant("v", []int{2, 5, 16}, v)
			zero := b.Constant("zero", []int{2, 2, 3, 5}, make([]float64, len(bias)))
			b.Output("inf", BiasedAttention(qn, kn, vn, nil, b.Constant("bias", []int{2, 2, 3, 5}, bias), 2, false))
			b.Output("zero", BiasedAttention(qn, kn, vn, nil, zero, 2, false))
			b.Output("plain", Attention(qn, kn, vn, nil, 2, false))
			b.Output("w", AttentionWeights(qn, kn, nil, 2, false))
			return nil
		}, "inf", "zero", "plain", "w")
		if err != nil {
			t.Fatal(err)
		}
		for i, x := range outs[0] {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				t.Fatalf("%v: readout %d is %v", dt, i, x)
			}
		}
		if !slices.Equal(outs[1], outs[2]) {
			t.Fatalf("%v: a zero bias changes the readout", dt)
		}
		// query 0 of head 0 without key 0: its readout is the weights
		// renormalised over keys 1–4
		w := outs[3][:5]
		for e := range 8 {
			var want float64
			for j := 1; j < 5; j++ {
				want += w[j] / (1 - w[0]) * v[j*16+e]
			}
			if d := math.Abs(outs[0][e] - want); d > 1e-5 {
				t.Fatalf("%v: readout %d = %v, want %v", dt, e, outs[0][e], want)
			}
		}
	}
}

// TestWeibullLogNoise: (1/k)·log(−log u) in float32 (bayes.c where the
// build has it) agrees with float64 to float32 rounding over the whole
// range the generator draws from, its ends included, at every offset of
// the vector tail; u = 1 gives −∞.
func TestWeibullLogNoise(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 5))
	for _, n := range []int{1, 7, 8, 13, 1000} {
		u := make([]float64, n)
		for i := range u {
			u[i] = (float64(rng.Uint32()>>9) + 0.5) / (1 << 23) // as DrawNoise draws
		}
		u[0] = 0.5 / (1 << 23)   // the smallest draw
		u[n-1] = 1 - 0.5/(1<<23) // the largest
		u[n/2] = float64(float32(u[n/2]))
		for _, k := range []float64{0.5, 10} {
			var got, want []float64
			for _, dt := range []DType{Float32, Float64} {
				outs, err := Evaluate(NewParams(dt, 1), func(b *Builder) error {
					b.Output("b", WeibullLogNoise(b.Constant("u", []int{n}, u), k))
					return nil
				}, "b")
				if err != nil {
					t.Fatal(err)
				}
				if dt == Float32 {
					got = outs[0]
				} else {
					want = outs[0]
				}
			}
			for i := range u {
				u32 := float64(float32(u[i]))
				ref := math.Log(-math.Log(u32)) / k
				if math.Abs(want[i]-math.Log(-math.Log(u[i]))/k) > 1e-15*math.Max(1, math.Abs(want[i])) {
					t.Fatalf("float64 b(%v) = %v", u[i], want[i])
				}
				if d := math.Abs(got[i] - ref); d > 1e-6*math.Max(1, math.Abs(ref)) {
					t.Fatalf("n=%d k=%g: float32 b(%v) = %v, want %v", n, k, u32, got[i], ref)
				}
			}
		}
	}
	for _, dt := range []DType{Float32, Float64} {
		outs, err := Evaluate(NewParams(dt, 1), func(b *Builder) error {
			b.Output("b", WeibullLogNoise(b.Constant("u", []int{9}, []float64{1, 0.5, 1, 1, 1, 1, 1, 1, 1}), 10))
			return nil
		}, "b")
		if err != nil {
			t.Fatal(err)
		}
		for i, x := range outs[0] {
			if (i != 1) != math.IsInf(x, -1) {
				t.Fatalf("%v: b[%d] = %v", dt, i, x)
			}
		}
	}
}

// klCase is one layout for the KL tests: B examples, H heads of width d,
// N queries, M keys, and which masks and prior it has.
type klCase struct {
	b, h, n, m, d                  int
	causal, keyMasked, queryMasked bool
	contextual                     bool
	post                           BayesPosterior
	k, rate, sigma, sigma0         float64
	qScale                         float64 // spread of q and k
}

func (c klCase) String() string {
	return fmt.Sprintf("post=%d causal=%v keys=%v queries=%v ctx=%v n=%d m=%d", c.post, c.causal, c.keyMasked, c.queryMasked, c.contextual, c.n, c.m)
}

func (c klCase) cfg() BayesKL {
	return BayesKL{Posterior: c.post, K: c.k, PriorRate: c.rate, Sigma: c.sigma, PriorSigma: c.sigma0, Heads: c.h, Causal: c.causal}
}

// klData holds a case's q [B, N, H·d], k [B, M, H·d], key mask [B, M],
// query mask [B, N] and prior logits [B, H, M].
type klData struct{ q, k, keyMask, queryMask, c []float64 }

// newKLData draws a case's data: example 0's key 0 and query 1 are
// padding, and with B ≥ 3, example 2's queries are all padding.
func newKLData(rng *rand.Rand, c klCase) klData {
	x := klData{q: Normal(c.qScale)(rng, []int{c.b * c.n * c.h * c.d}), k: Normal(c.qScale)(rng, []int{c.b * c.m * c.h * c.d}),
		c: Normal(1)(rng, []int{c.b * c.h * c.m})}
	if c.keyMasked {
		x.keyMask = make([]float64, c.b*c.m)
		for i := range x.keyMask {
			x.keyMask[i] = float64(min(1, rng.IntN(4)))
		}
		x.keyMask[0] = 0
		x.keyMask[c.m-1] = 1
	}
	if c.queryMasked {
		x.queryMask = make([]float64, c.b*c.n)
		for i := range x.queryMask {
			x.queryMask[i] = float64(min(1, rng.IntN(4)))
		}
		x.queryMask[min(1, c.n-1)] = 0
		x.queryMask[c.n-1] = 1
		if c.b >= 3 {
			clear(x.queryMask[2*c.n : 3*c.n])
		}
	}
	return x
}

// refBayesKL is KL̄ by the definition (layers/BAYES.md §3–§5) in plain
// float64 loops, one weight at a time.
func refBayesKL(c klCase, x klData) float64 {
	hd := c.h * c.d
	var sum float64
	var count int
	lg, _ := math.Lgamma(1 + 1/c.k)
	for bi := range c.b {
		for h := range c.h {
			for i := range c.n {
				if x.queryMask != nil && x.queryMask[bi*c.n+i] == 0 {
					continue
				}
				var vis []int
				for j := range c.m {
					if (x.keyMask == nil || x.keyMask[bi*c.m+j] != 0) && (!c.causal || j <= i) {
						vis = append(vis, j)
					}
				}
				if len(vis) == 0 {
					continue
				}
				s, cl := make([]float64, len(vis)), make([]float64, len(vis))
				var zs, zc float64
				for t, j := range vis {
					for e := range c.d {
						s[t] += x.q[(bi*c.n+i)*hd+h*c.d+e] * x.k[(bi*c.m+j)*hd+h*c.d+e]
					}
					s[t] = math.Exp(s[t] / math.Sqrt(float64(c.d)))
					zs += s[t]
					if c.contextual {
						cl[t] = math.Exp(x.c[(bi*c.h+h)*c.m+j])
					} else {
						cl[t] = 1
					}
					zc += cl[t]
				}
				for t := range vis {
					phi, p := s[t]/zs, cl[t]/zc
					if c.post == BayesWeibull {
						lambda := phi / math.Exp(lg)
						alpha := c.rate * math.Max(p, BayesAlphaFloor)
						lga, _ := math.Lgamma(alpha)
						sum += eulerGamma*alpha/c.k - alpha*math.Log(lambda) + math.Log(c.k) + c.rate*lambda*math.Gamma(1+1/c.k) -
							eulerGamma - 1 - alpha*math.Log(c.rate) + lga
					} else {
						mu, mu0 := math.Log(phi)-c.sigma*c.sigma/2, math.Log(p)-c.sigma0*c.sigma0/2
						sum += math.Log(c.sigma0/c.sigma) + (c.sigma*c.sigma+(mu-mu0)*(mu-mu0))/(2*c.sigma0*c.sigma0) - 0.5
					}
					count++
				}
			}
		}
	}
	if count == 0 {
		return 0
	}
	return sum / float64(count)
}

// klCases are the layouts the KL tests run: both posteriors, both priors,
// and each mask alone and together.
func klCases() []klCase {
	var cs []klCase
	for _, post := range []BayesPosterior{BayesWeibull, BayesLogNormal} {
		for _, ctx := range []bool{true, false} {
			for _, masks := range [][3]bool{{false, false, false}, {false, true, false}, {false, false, true}, {true, false, false}, {true, true, true}} {
				c := klCase{b: 3, h: 2, n: 4, m: 5, d: 3, causal: masks[0], keyMasked: masks[1], queryMasked: masks[2],
					contextual: ctx, post: post, k: 3, rate: 2, sigma: 0.7, sigma0: 1.3, qScale: 1}
				if c.causal {
					c.n = c.m
				}
				cs = append(cs, c)
			}
			// the maxnorm model's head sizes, which float32 runs in
			// attention.c, with scores spread wide enough that every term
			// of the KL matters
			for _, nm := range [][2]int{{16, 50}, {50, 16}, {3, 64}} {
				for _, masks := range [][2]bool{{false, false}, {true, true}} {
					cs = append(cs, klCase{b: 3, h: 2, n: nm[0], m: nm[1], d: 16, keyMasked: masks[0], queryMasked: masks[1],
						contextual: ctx, post: post, k: 10, rate: 1, sigma: 1, sigma0: 1, qScale: 1.5})
				}
			}
		}
	}
	return cs
}

// klGraph builds BayesAttentionKL for c from x, with q, k and the prior
// logits as parameters where params is set, constants otherwise.
func klGraph(b *Builder, c klCase, x klData, params bool) *Node {
	node := func(name string, shape []int, v []float64) *Node {
		if params {
			return b.Param(name, shape, func(*rand.Rand, []int) []float64 { return slices.Clone(v) })
		}
		return b.Constant(name, shape, v)
	}
	q := node("q", []int{c.b, c.n, c.h * c.d}, x.q)
	k := node("k", []int{c.b, c.m, c.h * c.d}, x.k)
	var km, qm, cl *Node
	if c.keyMasked {
		km = b.Constant("keymask", []int{c.b, c.m}, x.keyMask)
	}
	if c.queryMasked {
		qm = b.Constant("querymask", []int{c.b, c.n}, x.queryMask)
	}
	if c.contextual {
		cl = node("c", []int{c.b, c.h, c.m}, x.c)
	}
	return BayesAttentionKL(q, k, km, qm, cl, c.cfg())
}

// TestBayesAttentionKLMatchesDefinition: the fused KL̄ equals the
// definition to 1e-12 in float64 for every case, and in float32 to
// float32 rounding; with GOMAXPROCS 1 and 2 the values are the same bits.
func TestBayesAttentionKLMatchesDefinition(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	rng := rand.New(rand.NewPCG(12, 12))
	for _, c := range klCases() {
		x := newKLData(rng, c)
		want := refBayesKL(c, x)
		for _, dt := range []DType{Float64, Float32} {
			var vals []float64
			for _, procs := range []int{2, 1} {
				runtime.GOMAXPROCS(procs)
				outs, err := Evaluate(NewParams(dt, 1), func(b *Builder) error {
					b.Output("kl", klGraph(b, c, x, false))
					return nil
				}, "kl")
				if err != nil {
					t.Fatal(err)
				}
				vals = append(vals, outs[0][0])
			}
			tol := 1e-12
			if dt == Float32 {
				tol = 5e-7
			}
			if d := math.Abs(vals[0] - want); d > tol*math.Max(1, math.Abs(want)) {
				t.Fatalf("%v %v: KL̄ = %.15g, definition %.15g", c, dt, vals[0], want)
			}
			if vals[0] != vals[1] {
				t.Fatalf("%v %v: KL̄ %v with 2 cores, %v with 1", c, dt, vals[0], vals[1])
			}
		}
	}
}

// TestBayesAttentionKLGradients: float64 central differences agree with
// the analytic gradients of KL̄ with respect to q, k and the prior logits,
// for every case.
func TestBayesAttentionKLGradients(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(13, 13))
	for i, c := range klCases() {
		if c.d > 3 {
			continue // the small cases check every element quickly
		}
		t.Run(c.String(), func(t *testing.T) {
			x := newKLData(rng, c)
			res, err := CheckGradients(NewParams(Float64, uint64(i)), func(b *Builder) *Node {
				return klGraph(b, c, x, true)
			}, GradCheckOptions{Seed: uint64(i), Tol: 1e-6})
			if err != nil {
				t.Fatal(err)
			}
			want := 2
			if c.contextual {
				want = 3
			}
			if len(res) != want {
				t.Fatalf("checked %v, want %d parameters", res, want)
			}
		})
	}
}

// TestBayesAttentionKLFloat32MatchesFloat64: in a training graph with
// learned projections, float32 agrees with float64 in KL̄ and in every
// gradient, over two runs, and float64 gradients are the same bits with
// GOMAXPROCS 1 and 2. The sizes are the maxnorm model's (d = 16, 50 keys).
func TestBayesAttentionKLFloat32MatchesFloat64(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, c := range []klCase{
		{b: 3, h: 4, n: 16, m: 50, d: 16, keyMasked: true, queryMasked: true, contextual: true, post: BayesWeibull, k: 10, rate: 1},
		{b: 3, h: 4, n: 50, m: 16, d: 16, contextual: false, post: BayesWeibull, k: 10, rate: 1},
		{b: 3, h: 4, n: 16, m: 50, d: 16, keyMasked: true, queryMasked: true, contextual: true, post: BayesLogNormal, sigma: 1, sigma0: 1},
		{b: 2, h: 2, n: 11, m: 11, d: 8, causal: true, keyMasked: true, contextual: true, post: BayesWeibull, k: 5, rate: 2},
		{b: 2, h: 2, n: 11, m: 11, d: 8, causal: true, queryMasked: true, contextual: true, post: BayesLogNormal, sigma: 0.5, sigma0: 2},
	} {
		fn := func(b *Builder) error {
			x := b.Input("x", c.b, c.n, 8)
			mem := b.Input("mem", c.b, c.m, 8)
			if c.causal {
				mem = x
			}
			q := Linear(x, b.Param("wq", []int{8, c.h * c.d}, Glorot), nil)
			k := Linear(mem, b.Param("wk", []int{8, c.h * c.d}, Glorot), nil)
			var km, qm, cl *Node
			if c.keyMasked {
				km = b.Input("keymask", c.b, c.m)
			}
			if c.queryMasked {
				qm = b.Input("querymask", c.b, c.n)
			}
			if c.contextual {
				cl = Tanh(b.Param("c", []int{c.b, c.h, c.m}, Normal(2)))
			}
			y := BayesAttentionKL(q, k, km, qm, cl, c.cfg())
			b.Output("y", y)
			b.SetLoss(y)
			return nil
		}
		progs := compileBothDTypes(t, fn, 4)
		rng := rand.New(rand.NewPCG(6, 6))
		for run := range 2 {
			c.qScale = 2
			x := newKLData(rng, c)
			feeds := map[string][]float64{"x": Normal(2)(rng, []int{c.b * c.n * 8}), "mem": Normal(2)(rng, []int{c.b * c.m * 8}),
				"keymask": x.keyMask, "querymask": x.queryMask}
			expectFloat32MatchesFloat64(t, progs, feeds, fmt.Sprintf("%v run %d", c, run))
			p := progs[Float64]
			var grads []map[string][]float64
			for _, procs := range []int{1, 2} {
				runtime.GOMAXPROCS(procs)
				if err := p.Run(); err != nil {
					t.Fatal(err)
				}
				g, err := p.Gradients()
				if err != nil {
					t.Fatal(err)
				}
				grads = append(grads, g)
			}
			for name, g := range grads[0] {
				if !slices.Equal(g, grads[1][name]) {
					t.Fatalf("%v: gradient of %s differs between GOMAXPROCS 1 and 2", c, name)
				}
			}
		}
	}
}

// refPriorLogits is the prior network of BayesPriorLogits in plain float64
// loops: c[b, h, j] = Σ_r w2[h, r] ReLU(Σ_e k[b, j, h·d+e] w1[h, e, r] + b1[h, r]) + b2[h].
func refPriorLogits(k, w1, b1, w2, b2 []float64, bs, m, h, d, r int) []float64 {
	c := make([]float64, bs*h*m)
	for bi := range bs {
		for hh := range h {
			for j := range m {
				s := b2[hh]
				for t := range r {
					u := b1[hh*r+t]
					for e := range d {
						u += k[(bi*m+j)*h*d+hh*d+e] * w1[(hh*d+e)*r+t]
					}
					s += w2[hh*r+t] * math.Max(u, 0)
				}
				c[(bi*h+hh)*m+j] = s
			}
		}
	}
	return c
}

// TestBayesPriorLogits: the fused prior network equals the definition in
// float64, float32 agrees with float64 in value and every gradient, the
// float64 gradients are the same bits with GOMAXPROCS 1 and 2, and
// central differences agree with the analytic gradients.
func TestBayesPriorLogits(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	const bs, m, h, d, r = 3, 7, 2, 8, 5
	rng := rand.New(rand.NewPCG(21, 21))
	k, w1, b1 := Normal(1)(rng, []int{bs * m * h * d}), Normal(0.5)(rng, []int{h * d * r}), Normal(0.5)(rng, []int{h * r})
	w2, b2 := Normal(1)(rng, []int{h * r}), Normal(1)(rng, []int{h})
	got, _ := runForward(t, Float64, func(b *Builder) *Node {
		return BayesPriorLogits(b.Constant("k", []int{bs, m, h * d}, k), b.Constant("w1", []int{h, d, r}, w1),
			b.Constant("b1", []int{h, r}, b1), b.Constant("w2", []int{h, r, 1}, w2), b.Constant("b2", []int{h}, b2), h)
	})
	if e := graphtest.RelDiff(got, refPriorLogits(k, w1, b1, w2, b2, bs, m, h, d, r)); e > 1e-14 {
		t.Fatalf("logits rel diff %g from the definition", e)
	}
	build := func(b *Builder) *Node {
		kk := Tanh(randParam(b, "k", bs, m, h*d))
		c := BayesPriorLogits(kk, b.Param("w1", []int{h, d, r}, Normal(0.5)), b.Param("b1", []int{h, r}, Normal(0.5)),
			b.Param("w2", []int{h, r, 1}, Normal(1)), b.Param("b2", []int{h}, Normal(1)), h)
		return Square(c)
	}
	if _, err := CheckGradients(NewParams(Float64, 3), build, GradCheckOptions{Seed: 3}); err != nil {
		t.Fatal(err)
	}
	progs := compileBothDTypes(t, func(b *Builder) error {
		y := build(b)
		b.Output("y", y)
		b.SetLoss(Mean(Mul(y, b.Input("t", bs, h, m))))
		return nil
	}, 5)
	expectFloat32MatchesFloat64(t, progs, map[string][]float64{"t": Normal(1)(rng, []int{bs * h * m})}, "prior")
	var grads []map[string][]float64
	for _, procs := range []int{1, 2} {
		runtime.GOMAXPROCS(procs)
		if err := progs[Float64].Run(); err != nil {
			t.Fatal(err)
		}
		g, err := progs[Float64].Gradients()
		if err != nil {
			t.Fatal(err)
		}
		grads = append(grads, g)
	}
	for name, g := range grads[0] {
		if !slices.Equal(g, grads[1][name]) {
			t.Fatalf("gradient of %s differs between GOMAXPROCS 1 and 2", name)
		}
	}
}

// TestFastGammaFunctions: the float32 path's lgamma and ψ agree with
// math.Lgamma and the exact digamma to 1e-9 over the range a Gamma
// prior's shape takes, from the floor up.
func TestFastGammaFunctions(t *testing.T) {
	t.Parallel()
	for x := BayesAlphaFloor; x < 200; x *= 1.07 {
		want, _ := math.Lgamma(x)
		if d := math.Abs(lgammaFast(x) - want); d > 1e-9*math.Max(1, math.Abs(want)) {
			t.Fatalf("lgammaFast(%g) = %.15g, want %.15g", x, lgammaFast(x), want)
		}
		if d := math.Abs(digammaFast(x) - digamma(x)); d > 1e-9*math.Max(1, math.Abs(digamma(x))) {
			t.Fatalf("digammaFast(%g) = %.15g, want %.15g", x, digammaFast(x), digamma(x))
		}
	}
}
