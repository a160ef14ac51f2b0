package layers

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/probformer/probformer/graph"
	"github.com/probformer/probformer/losses"
)

// bayesNoiseSize is B·H·N·M of attendShapes with 2 heads.
const bayesNoiseSize = 2 * 2 * 3 * 3

// fixedNoise returns draws for a kernel's noise of size n: uniform in
// (0, 1) for Weibull, standard normal for log-normal.
func fixedNoise(kind string, seed uint64, n int) *[]float64 {
	rng := rand.New(rand.NewPCG(seed, 3))
	v := make([]float64, n)
	for i := range v {
		if kind == KindBayesLogNormal {
			v[i] = rng.NormFloat64()
		} else {
			v[i] = 0.02 + 0.96*rng.Float64()
		}
	}
	return &v
}

func bayesKernel(t *testing.T, cfg AttentionConfig) BayesAttention {
	t.Helper()
	k, err := NewKernel(cfg)
	if err != nil {
		t.Fatal(err)
	}
	a, ok := k.(BayesAttention)
	if !ok {
		t.Fatalf("NewKernel(%+v) is %T, want BayesAttention", cfg, k)
	}
	return a
}

func TestBayesConfig(t *testing.T) {
	a := bayesKernel(t, AttentionConfig{Kind: KindBayesWeibull})
	want := BayesAttention{Kind: KindBayesWeibull, K: 10, Sigma: 1, Prior: PriorContextual, PriorRate: 1, PriorSigma: 1}
	if a != want {
		t.Fatalf("defaults %+v, want %+v", a, want)
	}
	for _, c := range []struct {
		cfg  AttentionConfig
		want string
	}{
		{AttentionConfig{Kind: KindBayesWeibull, K: -1}, "k must be"},
		{AttentionConfig{Kind: KindBayesLogNormal, Sigma: -1}, "sigma must be"},
		{AttentionConfig{Kind: KindBayesWeibull, PriorRate: -2}, "prior_rate must be"},
		{AttentionConfig{Kind: KindBayesLogNormal, PriorSigma: math.Inf(1)}, "prior_sigma must be"},
		{AttentionConfig{Kind: KindBayesWeibull, Prior: "linked"}, "unknown prior"},
		{AttentionConfig{Kind: KindBayesWeibull, Score: ScoreAdditive}, "needs kind softmax"},
		{AttentionConfig{Kind: KindBayesLogNormal, RelativePositions: 2}, "relative positions"},
	} {
		if _, err := NewKernel(c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NewKernel(%+v): error %v, want one with %q", c.cfg, err, c.want)
		}
	}
}

// TestBayesSampleMean: E[S] = φ (layers/BAYES.md §3, §4), checked on
// R copies of one row of logits, each with its own noise, within 4
// standard errors; the normalised weights W get closer to φ as k grows or
// σ shrinks.
func TestBayesSampleMean(t *testing.T) {
	const reps = 20000
	logits := []float64{0.3, -1.2, 2.0, 0.0, -0.4}
	m := len(logits)
	phi := make([]float64, m)
	var z float64
	for j, s := range logits {
		phi[j] = math.Exp(s)
		z += phi[j]
	}
	for j := range phi {
		phi[j] /= z
	}
	run := func(a BayesAttention) (sMean, sSE, wErr []float64) {
		prog, err := graph.Compile(graph.NewParams(graph.Float64, 1), func(b *graph.Builder) error {
			row := make([]float64, reps*m)
			for r := range reps {
				copy(row[r*m:], logits)
			}
			logPhi := graph.LogSoftmax(b.Constant("s", []int{reps, 1, 1, m}, row), 3)
			dist := graph.UniformNoise
			if a.Kind == KindBayesLogNormal {
				dist = graph.NormalNoise
			}
			logS := a.logSample(logPhi, b.Noise("noise", dist, reps, 1, 1, m))
			b.Output("s", graph.Exp(logS))
			b.Output("w", graph.Softmax(logS, 3))
			return nil
		}, false)
		if err != nil {
			t.Fatal(err)
		}
		prog.DrawNoise(rand.New(rand.NewPCG(11, 12)))
		if err := prog.Run(); err != nil {
			t.Fatal(err)
		}
		s, _, _ := prog.Output("s")
		w, _, _ := prog.Output("w")
		sMean, sSE, wErr = make([]float64, m), make([]float64, m), make([]float64, m)
		sq := make([]float64, m)
		for r := range reps {
			for j := range m {
				sMean[j] += s[r*m+j] / reps
				sq[j] += s[r*m+j] * s[r*m+j] / reps
				wErr[j] += w[r*m+j] / reps
			}
		}
		for j := range m {
			sSE[j] = math.Sqrt((sq[j] - sMean[j]*sMean[j]) / reps)
			wErr[j] = math.Abs(wErr[j] - phi[j])
		}
		return sMean, sSE, wErr
	}
	maxOf := func(v []float64) float64 { return slices.Max(v) }
	for _, series := range []struct {
		kind    string
		kernels []BayesAttention
	}{
		{KindBayesWeibull, []BayesAttention{{Kind: KindBayesWeibull, K: 2}, {Kind: KindBayesWeibull, K: 10}, {Kind: KindBayesWeibull, K: 100}}},
		{KindBayesLogNormal, []BayesAttention{{Kind: KindBayesLogNormal, Sigma: 1}, {Kind: KindBayesLogNormal, Sigma: 0.3}, {Kind: KindBayesLogNormal, Sigma: 0.03}}},
	} {
		prevErr := math.Inf(1)
		for _, a := range series.kernels {
			sMean, sSE, wErr := run(a)
			for j := range m {
				if d := math.Abs(sMean[j] - phi[j]); d > 4*sSE[j] {
					t.Errorf("%+v: mean S_%d = %.6g, want φ = %.6g (SE %.3g)", a, j, sMean[j], phi[j], sSE[j])
				}
			}
			if e := maxOf(wErr); !(e < prevErr) {
				t.Errorf("%+v: max |E[W] − φ| = %.3g, not below %.3g of the noisier kernel", a, e, prevErr)
			} else {
				prevErr = e
			}
		}
		if prevErr > 2e-3 {
			t.Errorf("%s: least noisy kernel's max |E[W] − φ| = %.3g, want ≤ 2e-3", series.kind, prevErr)
		}
	}
}

// TestBayesLimitIsSoftmax: with k → ∞ or σ → 0 one sample is softmax
// attention, causal or not; and an evaluation graph's mean weights are
// softmax attention exactly.
func TestBayesLimitIsSoftmax(t *testing.T) {
	for _, causal := range []bool{false, true} {
		ps := graph.NewParams(graph.Float64, 5)
		softmax := attendOnce(t, ps, ScaledDotProduct{}, 1, causal)
		for _, cfg := range []AttentionConfig{
			{Kind: KindBayesWeibull, K: 1e6},
			{Kind: KindBayesLogNormal, Sigma: 1e-6},
			{Kind: KindBayesWeibull, K: 1e6, Prior: PriorConstant},
		} {
			a := bayesKernel(t, cfg)
			mean := attendOnce(t, ps, a, 1, causal)
			assertClose(t, fmt.Sprintf("%s mean (causal %v)", cfg.Kind, causal), mean, softmax, 1e-12)
			a.fixed = fixedNoise(a.Kind, 9, bayesNoiseSize)
			sample := attendOnce(t, ps, a, 1, causal)
			assertClose(t, fmt.Sprintf("%s sample (causal %v)", cfg.Kind, causal), sample, softmax, 1e-5)
			a.K, a.Sigma = 2, 1 // a noisy sample differs
			if d := maxAbsDiff(attendOnce(t, ps, a, 1, causal), softmax); d < 1e-3 {
				t.Errorf("%s with k = 2 or σ = 1: sample within %.3g of softmax attention", cfg.Kind, d)
			}
		}
	}
}

func maxAbsDiff(a, b []float64) float64 {
	var d float64
	for i := range a {
		d = math.Max(d, math.Abs(a[i]-b[i]))
	}
	return d
}

// TestBayesTrainingGraph: a training graph declares the noise and records
// the finite, positive penalty att.kl; an evaluation graph has neither.
func TestBayesTrainingGraph(t *testing.T) {
	for _, kind := range []string{KindBayesWeibull, KindBayesLogNormal} {
		a := bayesKernel(t, AttentionConfig{Kind: kind})
		build := func(b *graph.Builder) error {
			q := b.Param("q", attendShapes.q, graph.Normal(1))
			k := b.Param("k", attendShapes.k, graph.Normal(1))
			v := b.Param("v", attendShapes.v, graph.Normal(1))
			out := a.Attend(b, "att", q, k, v, 2, Mask{Keys: b.Constant("mask", []int{2, 3}, maskBN)})
			b.Output("out", out)
			if got := len(setLossWithPenalties(b, out)); got != map[bool]int{true: 1, false: 0}[b.Training()] {
				return fmt.Errorf("training %v: %d penalties", b.Training(), got)
			}
			return nil
		}
		ps := graph.NewParams(graph.Float64, 4)
		train, err := graph.Compile(ps, build, true)
		if err != nil {
			t.Fatal(err)
		}
		eval, err := graph.Compile(ps, build, false)
		if err != nil {
			t.Fatal(err)
		}
		if !train.HasNoise() || eval.HasNoise() {
			t.Fatalf("%s: noise in training graph %v, in evaluation graph %v", kind, train.HasNoise(), eval.HasNoise())
		}
		var outs [][]float64
		for seed := range uint64(2) {
			train.DrawNoise(rand.New(rand.NewPCG(seed, 1)))
			if err := train.Run(); err != nil {
				t.Fatal(err)
			}
			kl, ok := train.PenaltyValues()["att.kl"]
			if !ok || !(kl > 0) || math.IsInf(kl, 0) {
				t.Fatalf("%s: penalty att.kl = %v (present %v), want finite and > 0", kind, kl, ok)
			}
			out, _, _ := train.Output("out")
			outs = append(outs, slices.Clone(out))
		}
		if slices.Equal(outs[0], outs[1]) {
			t.Errorf("%s: two noise draws gave the same readout", kind)
		}
	}
}

// TestBayesGradients checks, with the noise held fixed, the gradients of
// the readout and of the layer's KL̄ with respect to q, k, v and the
// contextual prior network, with and without a causal mask, on the fused
// path (bayes.go) and on the composed reference (bayes_reference.go).
func TestBayesGradients(t *testing.T) {
	type output int
	const (
		readout output = iota
		klMean
	)
	seed := uint64(0)
	for _, composed := range []bool{false, true} {
		for _, kind := range []string{KindBayesWeibull, KindBayesLogNormal} {
			for _, prior := range []string{PriorContextual, PriorConstant} {
				for _, causal := range []bool{false, true} {
					for _, out := range []output{readout, klMean} {
						seed++
						name := fmt.Sprintf("%s-%s-causal=%v-%s-composed=%v", kind, prior, causal, map[output]string{readout: "readout", klMean: "kl"}[out], composed)
						t.Run(name, func(t *testing.T) {
							a := bayesKernel(t, AttentionConfig{Kind: kind, K: 3, Sigma: 0.7, Prior: prior, PriorRate: 2, PriorSigma: 1.3})
							a.fixed = fixedNoise(kind, seed, bayesNoiseSize)
							res, err := graph.CheckGradients(graph.NewParams(graph.Float64, seed), func(b *graph.Builder) *graph.Node {
								q := b.Param("q", attendShapes.q, graph.Normal(1))
								k := b.Param("k", attendShapes.k, graph.Normal(1))
								mask := Mask{Keys: b.Constant("mask", []int{2, 3}, maskBN), Causal: causal}
								noise := b.Constant("noise", []int{2, 2, 3, 3}, *a.fixed)
								attend := func(v *graph.Node, withKL bool) (out, kl *graph.Node) {
									if composed {
										out, _, kl = a.attendComposed(b, "att", "att.bayes", q, k, v, 2, mask, noise, withKL)
										return out, kl
									}
									return a.attend(b, "att", q, k, v, 2, mask, noise, withKL)
								}
								if out == readout {
									o, _ := attend(b.Param("v", attendShapes.v, graph.Normal(1)), false)
									return o
								}
								// The KL does not depend on the values.
								_, kl := attend(b.Constant("v", attendShapes.v, make([]float64, 36)), true)
								return kl
							}, graph.GradCheckOptions{Seed: seed, MaxPerParam: 16, Tol: 1e-5})
							if err != nil {
								t.Fatal(err)
							}
							var checked []string
							for _, r := range res {
								checked = append(checked, r.Param)
							}
							slices.Sort(checked)
							want := []string{"k", "q", "v"}
							if out == klMean {
								want = []string{"k", "q"}
							}
							if prior == PriorContextual && out == klMean {
								want = append(want, "att.prior.b1", "att.prior.b2", "att.prior.w1", "att.prior.w2")
							}
							slices.Sort(want)
							if !slices.Equal(checked, want) {
								t.Fatalf("checked %v, want %v", checked, want)
							}
						})
					}
				}
			}
		}
	}
}

// TestBayesKLNodes: the graph KLs equal losses' plain closed forms,
// edge settings included.
func TestBayesKLNodes(t *testing.T) {
	weibull := []struct{ k, lambda, alpha, beta float64 }{
		{10, 0.3, 0.2, 1}, {10, 1e-6, 1e-8, 1}, {1, 1, 1, 1}, {0.5, 2, 3, 0.1},
		{100, 0.05, 0.7, 10}, {1e6, 0.5, 0.5, 1}, {2, 1e-3, 50, 0.5},
	}
	lognormal := []struct{ mu, sigma, mu0, sigma0 float64 }{
		{-1, 1, -2, 1}, {0, 1e-3, 0, 1}, {-20, 0.5, -1, 3}, {1, 2, 1, 2}, {-3, 1e-6, -3, 1e-6}, {5, 1, -5, 0.1},
	}
	for _, c := range weibull {
		got := evalScalar(t, func(b *graph.Builder) *graph.Node {
			return klWeibullGamma(c.k, b.Constant("ll", []int{1}, []float64{math.Log(c.lambda)}),
				b.Constant("a", []int{1}, []float64{c.alpha}), c.beta)
		})
		want := losses.KLWeibullGamma(c.k, c.lambda, c.alpha, c.beta)
		if math.Abs(got-want) > 1e-12*math.Max(1, math.Abs(want)) {
			t.Errorf("Weibull–Gamma KL %+v = %.15g, want %.15g", c, got, want)
		}
	}
	for _, c := range lognormal {
		got := evalScalar(t, func(b *graph.Builder) *graph.Node {
			return klLogNormal(b.Constant("mu", []int{1}, []float64{c.mu}), b.Constant("mu0", []int{1}, []float64{c.mu0}), c.sigma, c.sigma0)
		})
		want := losses.KLLogNormal(c.mu, c.sigma, c.mu0, c.sigma0)
		if math.Abs(got-want) > 1e-12*math.Max(1, math.Abs(want)) {
			t.Errorf("log-normal KL %+v = %.15g, want %.15g", c, got, want)
		}
	}
}

func evalScalar(t *testing.T, fn func(b *graph.Builder) *graph.Node) float64 {
	t.Helper()
	return evaluate(t, graph.NewParams(graph.Float64, 1), func(b *graph.Builder) error {
		b.Output("x", fn(b))
		return nil
	}, "x")[0][0]
}

// TestBayesLayerKL compares a layer's KL̄ with the constant prior, fused
// and composed, against a direct loop over batch, heads, queries and the
// keys each query sees, using losses' closed forms.
func TestBayesLayerKL(t *testing.T) {
	const bs, n, heads, d = 2, 3, 2, 2
	rng := rand.New(rand.NewPCG(7, 7))
	q, k, v := randn(rng, 24), randn(rng, 24), randn(rng, 36)
	for _, kind := range []string{KindBayesWeibull, KindBayesLogNormal} {
		for _, causal := range []bool{false, true} {
			for _, composed := range []bool{false, true} {
				a := bayesKernel(t, AttentionConfig{Kind: kind, K: 4, Sigma: 0.8, Prior: PriorConstant, PriorRate: 3, PriorSigma: 1.5})
				got := evalScalar(t, func(b *graph.Builder) *graph.Node {
					mask := Mask{Keys: b.Constant("mask", []int{2, 3}, maskBN), Causal: causal}
					noise := b.Constant("noise", []int{bs, heads, n, n}, *fixedNoise(kind, 1, bayesNoiseSize))
					qn, kn, vn := b.Constant("q", attendShapes.q, q), b.Constant("k", attendShapes.k, k), b.Constant("v", attendShapes.v, v)
					if composed {
						_, _, kl := a.attendComposed(b, "att", "att.bayes", qn, kn, vn, heads, mask, noise, true)
						return kl
					}
					_, kl := a.attend(b, "att", qn, kn, vn, heads, mask, noise, true)
					return kl
				})
				var sum float64
				var count int
				lg, _ := math.Lgamma(1 + 1/a.K)
				for bi := range bs {
					for h := range heads {
						for i := range n {
							var seen []int
							for j := range n {
								if maskBN[bi*n+j] == 1 && (!causal || j <= i) {
									seen = append(seen, j)
								}
							}
							scores := make([]float64, len(seen))
							var z float64
							for s, j := range seen {
								for c := range d {
									scores[s] += q[(bi*n+i)*heads*d+h*d+c] * k[(bi*n+j)*heads*d+h*d+c]
								}
								scores[s] = math.Exp(scores[s] / math.Sqrt(d))
								z += scores[s]
							}
							p := 1 / float64(len(seen))
							for s := range seen {
								phi := scores[s] / z
								if kind == KindBayesWeibull {
									sum += losses.KLWeibullGamma(a.K, phi/math.Exp(lg), a.PriorRate*p, a.PriorRate)
								} else {
									sum += losses.KLLogNormal(math.Log(phi)-a.Sigma*a.Sigma/2, a.Sigma,
										math.Log(p)-a.PriorSigma*a.PriorSigma/2, a.PriorSigma)
								}
								count++
							}
						}
					}
				}
				want := sum / float64(count)
				if math.Abs(got-want) > 1e-12*math.Max(1, math.Abs(want)) {
					t.Errorf("%s causal %v composed %v: layer KL̄ = %.15g, want %.15g", kind, causal, composed, got, want)
				}
			}
		}
	}
}

// TestBayesWeibullNoiseAtOne: a uniform draw that float32 rounds to 1
// gives a weight of 0, not NaN.
func TestBayesWeibullNoiseAtOne(t *testing.T) {
	a := bayesKernel(t, AttentionConfig{Kind: KindBayesWeibull})
	noise := fixedNoise(a.Kind, 2, bayesNoiseSize)
	(*noise)[0], (*noise)[5] = 1, 1
	a.fixed = noise
	for _, dt := range []graph.DType{graph.Float32, graph.Float64} {
		out := attendOnce(t, graph.NewParams(dt, 1), a, 1, false)
		for i, x := range out {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				t.Fatalf("%v: readout %d is %v", dt, i, x)
			}
		}
	}
}
