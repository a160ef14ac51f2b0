package graph

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"

	"gorgonia.org/tensor"

	"github.com/probformer/probformer/graph/graphtest"
	"github.com/probformer/probformer/graph/internal/kernels"
)

// sampleLoss is what the loss of a BayesAttentionSample test graph takes.
type sampleLoss int

const (
	lossBoth    sampleLoss = iota // Σ out ⊙ R + 0.7·KL̄
	lossReadout                   // Σ out ⊙ R
	lossKL                        // KL̄
)

func (l sampleLoss) String() string { return [...]string{"both", "readout", "kl"}[l] }

// sampleData is a case's KL data with the values v [B, M, H·dv], the
// noise [B, H, N, M] (u for the Weibull kernel, ε for the log-normal),
// the readout's loss weights R [B, N, H·dv], and a prior network of
// hidden width R = 5: w1 [H, d, R], b1 [H, R], w2 [H, R, 1], b2 [H].
type sampleData struct {
	klData
	v, noise, r    []float64
	w1, b1, w2, b2 []float64
	dv             int
}

// samplePriorWidth is the hidden width of the tests' prior networks.
const samplePriorWidth = 5

func newSampleData(rng *rand.Rand, c klCase, dv int) sampleData {
	x := sampleData{klData: newKLData(rng, c), dv: dv}
	const r = samplePriorWidth
	x.w1, x.b1 = Normal(0.5)(rng, []int{c.h * c.d * r}), Normal(0.5)(rng, []int{c.h * r})
	x.w2, x.b2 = Normal(1)(rng, []int{c.h * r}), Normal(1)(rng, []int{c.h})
	x.v = Normal(1)(rng, []int{c.b * c.m * c.h * dv})
	x.r = Normal(1)(rng, []int{c.b * c.n * c.h * dv})
	x.noise = Normal(1)(rng, []int{c.b * c.h * c.n * c.m})
	if c.post == BayesWeibull {
		for i, e := range x.noise {
			x.noise[i] = 0.02 + 0.96*math.Abs(math.Tanh(e))
		}
	}
	return x
}

// sampleGraph builds the loss l of c on x with q, k, v and the prior
// logits as parameters, from BayesAttentionSample when fused, else from
// its parts: BiasedAttention with the noise term as bias, and
// BayesAttentionKL, and returns the readout, KL̄ and the loss.
func sampleGraph(b *Builder, c klCase, x sampleData, fused bool, l sampleLoss) (out, kl, y *Node) {
	param := func(name string, shape []int, v []float64) *Node {
		return b.Param(name, shape, func(*rand.Rand, []int) []float64 { return slices.Clone(v) })
	}
	q := param("q", []int{c.b, c.n, c.h * c.d}, x.q)
	k := param("k", []int{c.b, c.m, c.h * c.d}, x.k)
	var v *Node
	if l == lossKL { // the values reach only the readout
		v = b.Constant("v", []int{c.b, c.m, c.h * x.dv}, x.v)
	} else {
		v = param("v", []int{c.b, c.m, c.h * x.dv}, x.v)
	}
	var km, qm *Node
	if c.keyMasked {
		km = b.Constant("keymask", []int{c.b, c.m}, x.keyMask)
	}
	if c.queryMasked {
		qm = b.Constant("querymask", []int{c.b, c.n}, x.queryMask)
	}
	var net *BayesPriorNet
	if c.contextual {
		const r = samplePriorWidth
		pr := param
		if l == lossReadout { // the prior reaches only KL̄
			pr = func(name string, shape []int, v []float64) *Node { return b.Constant(name, shape, v) }
		}
		net = &BayesPriorNet{W1: pr("w1", []int{c.h, c.d, r}, x.w1), B1: pr("b1", []int{c.h, r}, x.b1),
			W2: pr("w2", []int{c.h, r, 1}, x.w2), B2: pr("b2", []int{c.h}, x.b2)}
	}
	noise := b.Constant("noise", []int{c.b, c.h, c.n, c.m}, x.noise)
	if fused {
		out, kl = BayesAttentionSample(q, k, v, km, qm, noise, net, c.cfg())
	} else {
		var cl *Node
		if net != nil {
			cl = BayesPriorLogits(k, net.W1, net.B1, net.W2, net.B2, c.h)
		}
		bias := WeibullLogNoise(noise, c.k)
		if c.post == BayesLogNormal {
			bias = Scale(noise, c.sigma)
		}
		out = BiasedAttention(q, k, v, km, bias, c.h, c.causal)
		kl = BayesAttentionKL(q, k, km, qm, cl, c.cfg())
	}
	read := Sum(Mul(out, b.Constant("r", []int{c.b, c.n, c.h * x.dv}, x.r)))
	return out, kl, map[sampleLoss]*Node{lossBoth: Add(read, Scale(kl, 0.7)), lossReadout: read, lossKL: kl}[l]
}

// runSampleGraph compiles and runs the sample graph once: outputs "out"
// (the readout) and "kl" (KL̄), and the gradients.
func runSampleGraph(t *testing.T, dt DType, c klCase, x sampleData, fused bool, l sampleLoss) graphtest.Result {
	t.Helper()
	p, err := Compile(NewParams(dt, 1), func(b *Builder) error {
		out, kl, y := sampleGraph(b, c, x, fused, l)
		b.Output("out", out)
		b.Output("kl", kl)
		b.SetLoss(y)
		return nil
	}, true)
	if err != nil {
		t.Fatal(err)
	}
	return graphtest.Run(t, p, "out", "kl")
}

// sampleNames names the outputs of runSampleGraph in failures.
var sampleNames = map[string]string{"out": "readout", "kl": "KL̄"}

// sampleCases are klCases with a value width: 2 for the small cases, 16
// for the maxnorm-sized ones, which float32 runs in attention.c.
func sampleCases() []struct {
	klCase
	dv int
} {
	var cs []struct {
		klCase
		dv int
	}
	for _, c := range klCases() {
		dv := 2
		if c.d == 16 {
			dv = 16
		}
		cs = append(cs, struct {
			klCase
			dv int
		}{c, dv})
	}
	return cs
}

// TestBayesAttentionSampleMatchesParts: the fused op equals its parts —
// BiasedAttention with the noise term as score bias and BayesAttentionKL
// — in readout, KL̄ and the gradients of q, k, v and the prior logits,
// for every KL case (both posteriors, both priors, key, query and causal
// masks): to 1e-12 in float64, and in float32 (attention.c where it
// applies) to float32 rounding of the float64 parts; the results are the
// same bits with GOMAXPROCS 1 and 2.
func TestBayesAttentionSampleMatchesParts(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	rng := rand.New(rand.NewPCG(31, 31))
	for _, c := range sampleCases() {
		x := newSampleData(rng, c.klCase, c.dv)
		want := runSampleGraph(t, Float64, c.klCase, x, false, lossBoth)
		for _, dt := range []DType{Float64, Float32} {
			var runs []graphtest.Result
			for _, procs := range []int{2, 1} {
				runtime.GOMAXPROCS(procs)
				runs = append(runs, runSampleGraph(t, dt, c.klCase, x, true, lossBoth))
			}
			what := fmt.Sprintf("%v %v", c.klCase, dt)
			tol := 1e-12
			if dt == Float32 {
				tol = 2e-5
			}
			graphtest.ExpectRunsClose(t, what, runs[0], want, tol, sampleNames)
			graphtest.ExpectRunsClose(t, what+" (1 core)", runs[1], runs[0], 0, sampleNames)
		}
	}
}

// TestBayesAttentionSampleLosses: with a loss that takes only the readout
// or only KL̄, the fused op's gradients equal its parts', in float64 and
// float32.
func TestBayesAttentionSampleLosses(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(32, 32))
	for _, c := range sampleCases() {
		if !c.contextual || !c.keyMasked || !c.queryMasked {
			continue
		}
		x := newSampleData(rng, c.klCase, c.dv)
		for _, l := range []sampleLoss{lossReadout, lossKL} {
			want := runSampleGraph(t, Float64, c.klCase, x, false, l)
			for _, dt := range []DType{Float64, Float32} {
				tol := 1e-12
				if dt == Float32 {
					tol = 2e-5
				}
				got := runSampleGraph(t, dt, c.klCase, x, true, l)
				graphtest.ExpectRunsClose(t, fmt.Sprintf("%v %v loss %v", c.klCase, dt, l), got, want, tol, sampleNames)
			}
		}
	}
}

// TestBayesAttentionSampleGradients: float64 central differences agree
// with the fused op's analytic gradients of q, k, v and the prior logits,
// for every small KL case and each loss.
func TestBayesAttentionSampleGradients(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(33, 33))
	for i, c := range sampleCases() {
		if c.d > 3 {
			continue
		}
		for _, l := range []sampleLoss{lossBoth, lossReadout, lossKL} {
			if l != lossBoth && !c.contextual {
				continue
			}
			t.Run(fmt.Sprintf("%v/%v", c.klCase, l), func(t *testing.T) {
				x := newSampleData(rng, c.klCase, c.dv)
				res, err := CheckGradients(NewParams(Float64, uint64(i)), func(b *Builder) *Node {
					_, _, y := sampleGraph(b, c.klCase, x, true, l)
					return y
				}, GradCheckOptions{Seed: uint64(i), Tol: 1e-6})
				if err != nil {
					t.Fatal(err)
				}
				if len(res) == 0 {
					t.Fatal("no parameter checked")
				}
			})
		}
	}
}

// TestBayesAttentionSampleCMatchesGo: in float32, the heads attention.c
// runs (pf_bayes_head and its backward) agree with the Go loop on the
// same heads, in readout, KL̄ and every gradient, for both posteriors and
// priors, with and without masks, at the maxnorm model's head sizes.
func TestBayesAttentionSampleCMatchesGo(t *testing.T) {
	if !kernels.SampleHeadFits(16, 50, 16, 16) {
		t.Skip("no attention.c")
	}
	defer func() { bayesSampleGoOnly = false }()
	rng := rand.New(rand.NewPCG(34, 34))
	for _, c := range sampleCases() {
		if c.d != 16 {
			continue
		}
		x := newSampleData(rng, c.klCase, c.dv)
		bayesSampleGoOnly = false
		cRun := runSampleGraph(t, Float32, c.klCase, x, true, lossBoth)
		bayesSampleGoOnly = true
		goRun := runSampleGraph(t, Float32, c.klCase, x, true, lossBoth)
		graphtest.ExpectRunsClose(t, fmt.Sprintf("%v", c.klCase), cRun, goRun, 2e-5, sampleNames)
	}
}

// TestWeibullBiasFast: the Weibull noise term as attention.c's Bayesian
// heads compute it (weibull_bias_fast: its own logarithms, without the
// special cases a noise draw does not need) agrees with float64 to
// float32 rounding over the whole range the generator draws from, its
// ends included, near 1 above all, and u = 1 gives −∞.
func TestWeibullBiasFast(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(9, 9))
	u := make([]float32, 0, 1<<16)
	for range 1 << 15 {
		u = append(u, float32((float64(rng.Uint32()>>9)+0.5)/(1<<23))) // as DrawNoise draws
	}
	for j := range 1 << 10 { // the ends of the range
		u = append(u, float32((float64(j)+0.5)/(1<<23)), float32(1-(float64(j)+0.5)/(1<<23)))
	}
	u = append(u, 1, 0.5, 0.25, float32(math.Sqrt(0.5)), math.Nextafter32(float32(math.Sqrt(0.5)), 1))
	b := make([]float32, len(u))
	for _, k := range []float64{0.5, 10} {
		if !kernels.WeibullBiasFast32(u, b, float32(1/k)) {
			t.Skip("no AVX2")
		}
		for i, x := range u {
			want := math.Log(-math.Log(float64(x))) / k
			if x == 1 {
				if !math.IsInf(float64(b[i]), -1) {
					t.Fatalf("b(1) = %v, want −∞", b[i])
				}
				continue
			}
			if d := math.Abs(float64(b[i]) - want); d > 1e-6*math.Max(1, math.Abs(want)) {
				t.Fatalf("k=%g: b(%v) = %v, want %v", k, x, b[i], want)
			}
		}
	}
}

// BenchmarkBayesHead times one float32 head of the fused forward pass
// (pf_bayes_head, Weibull and log-normal, contextual prior) and of its
// backward pass beside softmax attention's (pf_attn_head_fwd,
// pf_attn_head_bwd), at the maxnorm model's head sizes. The variants
// alternate call by call, so that the load of a shared machine hits all
// alike; each reports its mean time per call (ns-…).
func BenchmarkBayesHead(b *testing.B) {
	for _, sz := range [][2]int{{16, 50}, {50, 16}} {
		n, m := sz[0], sz[1]
		const d, h = 16, 4
		if !kernels.SampleHeadFits(n, m, d, d) {
			b.Skip("no attention.c")
		}
		rng := rand.New(rand.NewPCG(1, 2))
		f := func(k int) []float32 { return to32(Normal(1)(rng, []int{k})) }
		q, k, v, g := f(n*h*d), f(m*h*d), f(m*h*d), f(n*h*d)
		u := make([]float32, n*m)
		for i := range u {
			u[i] = float32(0.02 + 0.96*rng.Float64())
		}
		net := &kernels.PriorNet32{W1: make([]float32, 16*d), W1t: make([]float32, 16*d), B1: f(16), W2: f(16), B2: 0.3}
		for e := range d {
			for t := range 10 {
				w := float32(rng.NormFloat64())
				net.W1[e*16+t], net.W1t[t*d+e] = w, w
			}
		}
		for t := 10; t < 16; t++ {
			net.B1[t], net.W2[t] = 0, 0
		}
		pg := make([]float32, 16*d+33)
		p, x, out, dc := make([]float32, n*m), make([]float32, n*m), make([]float32, n*h*d), make([]float32, m)
		dq, dk, dv := make([]float32, n*h*d), make([]float32, m*h*d), make([]float32, m*h*d)
		cs := BayesKL{Posterior: BayesWeibull, K: 10, PriorRate: 1, Heads: h}.consts()
		kw := [7]float64{0, 0.1, 1, cs.a, cs.c0, cs.shift, cs.inv2s02}
		cl := BayesKL{Posterior: BayesLogNormal, Sigma: 1, PriorSigma: 1, Heads: h}.consts()
		kl := [7]float64{1, 1, 1, cl.a, cl.c0, cl.shift, cl.inv2s02}
		const scale = 0.25
		variants := []struct {
			name string
			f    func()
		}{
			{"softmax-fwd", func() { kernels.AttnHeadFwd32(q, h*d, k, h*d, v, h*d, n, m, d, d, scale, nil, false, nil, p, out, h*d) }},
			{"weibull-fwd", func() {
				kernels.BayesHead32(q, h*d, k, v, h*d, n, m, d, d, scale, nil, nil, u, net, &kw, p, x, out, dc)
			}},
			{"lognormal-fwd", func() {
				kernels.BayesHead32(q, h*d, k, v, h*d, n, m, d, d, scale, nil, nil, u, net, &kl, p, x, out, dc)
			}},
			{"softmax-bwd", func() { kernels.AttnHeadBwd32(q, h*d, k, h*d, v, h*d, g, h*d, p, nil, n, m, d, d, scale, dq, dk, dv) }},
			{"bayes-bwd", func() {
				kernels.BayesHeadBwd32(q, h*d, k, v, h*d, g, p, x, n, m, d, d, scale, 0.01, dq, dk, dv, net, dc, pg)
			}},
		}
		b.Run(fmt.Sprintf("n%d-m%d", n, m), func(b *testing.B) {
			ts := make([]time.Duration, len(variants))
			for range b.N {
				for i, vr := range variants {
					t0 := time.Now()
					for range 10 {
						vr.f()
					}
					ts[i] += time.Since(t0)
				}
			}
			for i, vr := range variants {
				b.ReportMetric(float64(ts[i].Nanoseconds())/float64(10*b.N), "ns-"+vr.name)
			}
		})
	}
}

// TestBayesAttentionSampleSharedElements: with batches of two or more
// elements a worker, where forBayesHeads has the workers take whole
// elements from a shared counter, the fused op's readout, KL̄ and
// gradients are the same bits at GOMAXPROCS 1, 2 and 3 (uneven batches,
// both posteriors, the contextual prior, key and query masks, the
// maxnorm model's head sizes, float32 through attention.c and float64 in
// Go).
func TestBayesAttentionSampleSharedElements(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	rng := rand.New(rand.NewPCG(37, 41))
	for _, post := range []BayesPosterior{BayesWeibull, BayesLogNormal} {
		for _, nm := range [][2]int{{16, 50}, {50, 16}, {1, 50}} {
			for _, b := range []int{7, 9} {
				c := klCase{b: b, h: 2, n: nm[0], m: nm[1], d: 16, keyMasked: true, queryMasked: nm[0] > 1,
					contextual: true, post: post, k: 10, rate: 1, sigma: 1, sigma0: 1, qScale: 1}
				x := newSampleData(rng, c, 16)
				for _, dt := range []DType{Float32, Float64} {
					var runs []graphtest.Result
					for _, procs := range []int{1, 2, 3} {
						runtime.GOMAXPROCS(procs)
						runs = append(runs, runSampleGraph(t, dt, c, x, true, lossBoth))
					}
					// the element calls as Go jobs, where float32 passes
					// run as one pool.c job each
					runtime.GOMAXPROCS(2)
					bayesPoolPasses = false
					runs = append(runs, runSampleGraph(t, dt, c, x, true, lossBoth))
					bayesPoolPasses = true
					what := fmt.Sprintf("%v b=%d %v", c, b, dt)
					graphtest.ExpectRunsClose(t, what+" (2 cores)", runs[1], runs[0], 0, sampleNames)
					graphtest.ExpectRunsClose(t, what+" (3 cores)", runs[2], runs[0], 0, sampleNames)
					graphtest.ExpectRunsClose(t, what+" (Go jobs)", runs[3], runs[0], 0, sampleNames)
				}
			}
		}
	}
}

// TestBayesReadoutViewsSaved: the readout node's value is the readout the
// op saved, without a copy: equal to do's copy, the header kept between
// runs while the buffer stays, showing the new values of the next run,
// and made anew on a new buffer (another batch size).
func TestBayesReadoutViewsSaved(t *testing.T) {
	st := &bayesSampleState{out: []float32{1, 2, 3, 4, 5, 6}}
	r := bayesReadoutKernel{st: st, shape: fix(tensor.Shape{1, 2, 3})}
	var kept keptHeader
	v, err := r.view(nil, &kept)
	if err != nil {
		t.Fatal(err)
	}
	want := tensor.New(tensor.Of(tensor.Float32), tensor.WithShape(1, 2, 3))
	if err := r.do(nil, want); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(v.Data().([]float32), want.Data().([]float32)) || !v.Shape().Eq(want.Shape()) {
		t.Fatalf("view %v %v, copy %v %v", v.Shape(), v.Data(), want.Shape(), want.Data())
	}
	st.out.([]float32)[4] = 50 // the next run's forward pass
	v2, err := r.view(nil, &kept)
	if err != nil {
		t.Fatal(err)
	}
	if v2 != v || v2.Data().([]float32)[4] != 50 {
		t.Fatalf("second run: header kept %v, value %v, want the same header showing 50", v2 == v, v2.Data())
	}
	st.out = []float32{7, 8, 9, 10, 11, 12}
	v3, err := r.view(nil, &kept)
	if err != nil {
		t.Fatal(err)
	}
	if v3 == v || v3.Data().([]float32)[0] != 7 {
		t.Fatalf("new buffer: got the old header (%v) or values %v", v3 == v, v3.Data())
	}
	st.out = []float32{1, 2}
	if _, err := r.view(nil, &kept); err == nil {
		t.Fatal("a saved readout shorter than the shape was viewed")
	}
}
