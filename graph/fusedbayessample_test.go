package graph

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
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
// noise [B, H, N, M] (u for the Weibull kernel, ε for the log-normal) and
// the readout's loss weights R [B, N, H·dv].
type sampleData struct {
	klData
	v, noise, r []float64
	dv          int
}

func newSampleData(rng *rand.Rand, c klCase, dv int) sampleData {
	x := sampleData{klData: newKLData(rng, c), dv: dv}
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
	var km, qm, cl *Node
	if c.keyMasked {
		km = b.Constant("keymask", []int{c.b, c.m}, x.keyMask)
	}
	if c.queryMasked {
		qm = b.Constant("querymask", []int{c.b, c.n}, x.queryMask)
	}
	if c.contextual && l == lossReadout { // the prior reaches only KL̄
		cl = Tanh(b.Constant("c", []int{c.b, c.h, c.m}, x.c))
	} else if c.contextual {
		cl = Tanh(param("c", []int{c.b, c.h, c.m}, x.c))
	}
	noise := b.Constant("noise", []int{c.b, c.h, c.n, c.m}, x.noise)
	if fused {
		out, kl = BayesAttentionSample(q, k, v, km, qm, noise, cl, c.cfg())
	} else {
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

// sampleResult is one run: the readout, KL̄ and the gradients.
type sampleResult struct {
	out, kl []float64
	grads   map[string][]float64
}

func runSampleGraph(t *testing.T, dt DType, c klCase, x sampleData, fused bool, l sampleLoss) sampleResult {
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
	if err := p.Run(); err != nil {
		t.Fatal(err)
	}
	var r sampleResult
	r.out, _, _ = p.Output("out")
	r.kl, _, _ = p.Output("kl")
	r.out, r.kl = slices.Clone(r.out), slices.Clone(r.kl)
	if r.grads, err = p.Gradients(); err != nil {
		t.Fatal(err)
	}
	return r
}

// expectSampleRuns fails unless got and want agree to tol: each result's
// largest difference relative to max(1, its largest value).
func expectSampleRuns(t *testing.T, what string, got, want sampleResult, tol float64) {
	t.Helper()
	check := func(name string, a, b []float64) {
		if len(a) != len(b) {
			t.Fatalf("%s: %s has %d values, want %d", what, name, len(a), len(b))
		}
		scale := 1.0
		for _, x := range b {
			scale = math.Max(scale, math.Abs(x))
		}
		for i := range a {
			if d := math.Abs(a[i] - b[i]); !(d <= tol*scale) {
				t.Fatalf("%s: %s[%d] = %.10g, want %.10g (tol %g, scale %g)", what, name, i, a[i], b[i], tol, scale)
			}
		}
	}
	check("readout", got.out, want.out)
	check("KL̄", got.kl, want.kl)
	if len(got.grads) != len(want.grads) {
		t.Fatalf("%s: gradients of %d parameters, want %d", what, len(got.grads), len(want.grads))
	}
	for name, g := range want.grads {
		check("gradient of "+name, got.grads[name], g)
	}
}

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
			var runs []sampleResult
			for _, procs := range []int{2, 1} {
				runtime.GOMAXPROCS(procs)
				runs = append(runs, runSampleGraph(t, dt, c.klCase, x, true, lossBoth))
			}
			what := fmt.Sprintf("%v %v", c.klCase, dt)
			tol := 1e-12
			if dt == Float32 {
				tol = 2e-5
			}
			expectSampleRuns(t, what, runs[0], want, tol)
			expectSampleRuns(t, what+" (1 core)", runs[1], runs[0], 0)
		}
	}
}

// TestBayesAttentionSampleLosses: with a loss that takes only the readout
// or only KL̄, the fused op's gradients equal its parts', in float64 and
// float32.
func TestBayesAttentionSampleLosses(t *testing.T) {
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
				expectSampleRuns(t, fmt.Sprintf("%v %v loss %v", c.klCase, dt, l), got, want, tol)
			}
		}
	}
}

// TestBayesAttentionSampleGradients: float64 central differences agree
// with the fused op's analytic gradients of q, k, v and the prior logits,
// for every small KL case and each loss.
func TestBayesAttentionSampleGradients(t *testing.T) {
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
	if !sampleHeadFits(16, 50, 16, 16) {
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
		expectSampleRuns(t, fmt.Sprintf("%v", c.klCase), cRun, goRun, 2e-5)
	}
}
