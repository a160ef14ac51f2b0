package losses

import (
	"fmt"
	exprand "golang.org/x/exp/rand"
	"gonum.org/v1/gonum/stat/distuv"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/probformer/probformer/graph"
)

// weibullGammaCases are (k, λ) posteriors against Gamma(α, rate β) priors.
// want is the KL from mpmath at 40 digits, both from the closed form and
// by quadrature of ∫ q log(q/p) (the two agree to 1e-36).
var weibullGammaCases = []struct {
	name                   string
	k, lambda, alpha, beta float64
	want                   float64
}{
	{"typical k=10, α<1", 10, 0.3, 0.25, 1, 2.6142207764546746},
	{"q = p: Weibull(1) = Exponential = Gamma(1)", 1, 2, 1, 0.5, 0},
	{"small k", 0.5, 1, 2, 1, 2.0384998141446533},
	{"k<1, large β", 0.8, 0.05, 5, 100, 2.6031184391930129},
	{"large k", 100, 0.1, 0.1, 1, 5.6109354829042211},
	{"large β, means matched", 10, 0.2, 200, 1000, 0.81003321574790755},
	{"very large β and k", 50, 0.1, 1000, 1e4, 0.18846812951469842},
	{"λ far above the prior mean, tiny α", 10, 0.9, 0.01, 1, 6.1826958198362002},
	{"α = 1e-3", 5, 0.5, 1e-3, 1, 7.3992940944298417},
	{"k=2, α>1", 2, 3, 4, 2, 0.21244599049386125},
	{"λ far below the prior mean", 20, 1e-3, 0.5, 10, 4.31763207884937},
	{"large λ, small β", 3, 10, 0.2, 0.1, 1.9769210020933794},
}

// logNormalCases are LogNormal(μ, σ²) posteriors against LogNormal(μ₀, σ₀²)
// priors, with want from mpmath as above.
var logNormalCases = []struct {
	name                 string
	mu, sigma, mu0, sig0 float64
	want                 float64
}{
	{"typical σ = σ₀", -1.7, 1, -1.9, 1, 0.019999999999999991},
	{"q = p", -1, 1, -1, 1, 0},
	{"μ = μ₀, σ < σ₀", -1, 0.5, -1, 1, 0.31814718055994531},
	{"tiny σ", -2, 1e-3, -1.5, 1, 6.532755778982137},
	{"tiny σ and σ₀", -2, 1e-3, -2.001, 2e-3, 0.44314718055991777},
	{"σ > σ₀", 0.5, 2, 0, 0.5, 6.6137056388801094},
	{"μ far from μ₀", 0, 1, -10, 1, 50},
	{"wide prior", -3, 0.1, 0, 10, 4.1502201859880913},
	{"σ = σ₀ small, μ ≠ μ₀", -1, 0.3, -3, 0.3, 22.222222222222224},
	{"σ₀ = 2σ", -0.6, 1, -6.6, 2, 4.8181471805599448},
	{"large σ = σ₀", 1, 5, 0.9, 5, 0.00019999999999999991},
	{"σ = 2σ₀", -1, 2, -1.2, 1, 0.82685281944005468},
}

// weibullGammaScale is the largest term of the Weibull–Gamma KL, or 1: the
// sum cancels terms of that size (α log β ≈ 9210 and lgamma(α) ≈ 5905 for a
// KL of 0.19 at α = 1000, β = 1e4), so float64 evaluations in different
// orders agree to about 1e-16 of it, not of the KL.
func weibullGammaScale(k, lambda, alpha, beta float64) float64 {
	lg, _ := math.Lgamma(alpha)
	return max(1, math.Abs(alpha*math.Log(beta)), math.Abs(lg), math.Abs(alpha*math.Log(lambda)), beta*lambda*math.Gamma(1+1/k))
}

func TestKLClosedFormValues(t *testing.T) {
	for _, c := range weibullGammaCases {
		if got := KLWeibullGamma(c.k, c.lambda, c.alpha, c.beta); math.Abs(got-c.want) > 1e-13*weibullGammaScale(c.k, c.lambda, c.alpha, c.beta) {
			t.Errorf("Weibull–Gamma %s: %.17g, want %.17g", c.name, got, c.want)
		}
	}
	for _, c := range logNormalCases {
		if got := KLLogNormal(c.mu, c.sigma, c.mu0, c.sig0); !closeTo(got, c.want, 1e-14) {
			t.Errorf("log-normal %s: %.17g, want %.17g", c.name, got, c.want)
		}
	}
}

// monteCarlo estimates E[f] from n draws of f and its standard error from
// the sample variance (Welford's update).
func monteCarlo(n int, f func() float64) (mean, se float64) {
	var m2 float64
	for i := 1; i <= n; i++ {
		v := f()
		d := v - mean
		mean += d / float64(i)
		m2 += d * (v - mean)
	}
	return mean, math.Sqrt(m2 / float64(n-1) / float64(n))
}

// within3SE accepts |closed − mc| ≤ 3 SE; the 1e-12 floor covers q = p,
// where every draw of log q − log p is 0 up to rounding.
func within3SE(closed, mc, se float64) bool {
	return math.Abs(closed-mc) <= 3*se+1e-12*math.Max(1, math.Abs(closed))
}

const mcDraws = 1_000_000

// klWeibullGammaMC estimates E_q[log q(x) − log p(x)] with x drawn from
// gonum's distuv.Weibull and the densities from distuv (Gamma's Beta is its
// rate).
func klWeibullGammaMC(seed uint64, n int, k, lambda, alpha, beta float64) (mean, se float64) {
	q := distuv.Weibull{K: k, Lambda: lambda, Src: exprand.NewSource(seed)}
	p := distuv.Gamma{Alpha: alpha, Beta: beta}
	return monteCarlo(n, func() float64 {
		x := q.Rand()
		return q.LogProb(x) - p.LogProb(x)
	})
}

// klLogNormalMC estimates E_q[log q(x) − log p(x)] with x drawn from
// gonum's distuv.LogNormal.
func klLogNormalMC(seed uint64, n int, mu, sigma, mu0, sigma0 float64) (mean, se float64) {
	q := distuv.LogNormal{Mu: mu, Sigma: sigma, Src: exprand.NewSource(seed)}
	p := distuv.LogNormal{Mu: mu0, Sigma: sigma0}
	return monteCarlo(n, func() float64 {
		x := q.Rand()
		return q.LogProb(x) - p.LogProb(x)
	})
}

func TestKLWeibullGammaMonteCarlo(t *testing.T) {
	for i, c := range weibullGammaCases {
		closed := KLWeibullGamma(c.k, c.lambda, c.alpha, c.beta)
		mc, se := klWeibullGammaMC(uint64(2020+i), mcDraws, c.k, c.lambda, c.alpha, c.beta)
		if !within3SE(closed, mc, se) {
			t.Errorf("%s: closed form %.6g, Monte Carlo %.6g ± %.2g (%.1f SE)", c.name, closed, mc, se, (closed-mc)/se)
		}
		t.Logf("%-45s closed %.6f  MC %.6f ± %.1e", c.name, closed, mc, se)
	}
}

func TestKLLogNormalMonteCarlo(t *testing.T) {
	for i, c := range logNormalCases {
		closed := KLLogNormal(c.mu, c.sigma, c.mu0, c.sig0)
		mc, se := klLogNormalMC(uint64(2020+i), mcDraws, c.mu, c.sigma, c.mu0, c.sig0)
		if !within3SE(closed, mc, se) {
			t.Errorf("%s: closed form %.6g, Monte Carlo %.6g ± %.2g (%.1f SE)", c.name, closed, mc, se, (closed-mc)/se)
		}
		t.Logf("%-45s closed %.6f  MC %.6f ± %.1e", c.name, closed, mc, se)
	}
}

// TestKLLogNormalWriteUpFormulaIsWrong shows why the widely copied
//
//	σ/σ₀ + (μ − μ₀)²/(2σ₀²) − ½ + log(σ₀/σ)
//
// is wrong (layers/BAYES.md §4): it exceeds the true KL by r − r²/2
// with r = σ/σ₀, because E_q[(log x − μ₀)²] = σ² + (μ − μ₀)². At q = p it
// gives ½ where every draw of log q − log p is 0, and it fails the
// Monte-Carlo check by tens to thousands of standard errors whenever σ is
// not much smaller than σ₀; only as r → 0 (the error is then ≈ r) and at
// r = 2 (by coincidence) can it pass.
func TestKLLogNormalWriteUpFormulaIsWrong(t *testing.T) {
	writeUp := func(mu, sigma, mu0, sigma0 float64) float64 {
		d := mu - mu0
		return sigma/sigma0 + d*d/(2*sigma0*sigma0) - 0.5 + math.Log(sigma0/sigma)
	}
	failed := 0
	for i, c := range logNormalCases {
		mc, se := klLogNormalMC(uint64(7+i), 100_000, c.mu, c.sigma, c.mu0, c.sig0)
		wrong := writeUp(c.mu, c.sigma, c.mu0, c.sig0)
		r := c.sigma / c.sig0
		bias := r - r*r/2
		if d := wrong - KLLogNormal(c.mu, c.sigma, c.mu0, c.sig0); !closeTo(d, bias, 1e-12) {
			t.Errorf("%s: write-up − KL = %v, want r − r²/2 = %v", c.name, d, bias)
		}
		passes := within3SE(wrong, mc, se)
		if !passes {
			failed++
		}
		switch {
		case bias == 0 && !passes:
			t.Errorf("%s: at σ = 2σ₀ the write-up equals the KL, yet failed: %v vs %v ± %v", c.name, wrong, mc, se)
		case math.Abs(bias) > 10*se && passes:
			t.Errorf("%s: the write-up formula %v, %.0f SE off the KL, passed the Monte-Carlo check %v ± %v", c.name, wrong, bias/se, mc, se)
		}
		t.Logf("%-25s write-up %.6f  MC %.6f ± %.1e  passes: %v", c.name, wrong, mc, se, passes)
		if c.mu == c.mu0 && c.sigma == c.sig0 && (mc != 0 || wrong != 0.5) {
			t.Errorf("%s: q = p gives Monte Carlo %v and write-up %v, want 0 and ½", c.name, mc, wrong)
		}
	}
	if failed < len(logNormalCases)-3 {
		t.Errorf("the write-up formula failed only %d of %d settings", failed, len(logNormalCases))
	}
}

// runKLGraph evaluates a KL node on the given inputs in float64.
func runKLGraph(t *testing.T, a, b []float64, kl func(a, b *graph.Node) (*graph.Node, error)) []float64 {
	t.Helper()
	return runKLGraphAs(t, graph.Float64, a, b, kl)
}

func runKLGraphAs(t *testing.T, dt graph.DType, a, b []float64, kl func(a, b *graph.Node) (*graph.Node, error)) []float64 {
	t.Helper()
	outs, err := graph.Evaluate(graph.NewParams(dt, 1), func(bl *graph.Builder) error {
		n := []int{len(a)}
		out, err := kl(bl.Constant("a", n, a), bl.Constant("b", n, b))
		if err != nil {
			return err
		}
		bl.Output("kl", out)
		return nil
	}, "kl")
	if err != nil {
		t.Fatal(err)
	}
	return outs[0]
}

// TestKLNodesMatchPlain: each table setting, and λ, α or μ moved away from
// it, gives the same KL in the graph as in plain Go.
func TestKLNodesMatchPlain(t *testing.T) {
	lambdaScale, alphaScale := []float64{1, 0.5, 3, 1e-2}, []float64{1, 3, 0.3, 10}
	var worstW, worstL float64 // largest |graph − plain| / max(1, scale)
	for _, c := range weibullGammaCases {
		logLambda, alpha := make([]float64, 4), make([]float64, 4)
		for i := range logLambda {
			logLambda[i] = math.Log(c.lambda * lambdaScale[i])
			alpha[i] = c.alpha * alphaScale[i]
		}
		got := runKLGraph(t, logLambda, alpha, func(l, a *graph.Node) (*graph.Node, error) {
			return KLWeibullGammaNode(c.k, l, a, c.beta)
		})
		for i := range got {
			lambda := math.Exp(logLambda[i])
			want := KLWeibullGamma(c.k, lambda, alpha[i], c.beta)
			rel := math.Abs(got[i]-want) / weibullGammaScale(c.k, lambda, alpha[i], c.beta)
			worstW = max(worstW, rel)
			if rel > 1e-12 {
				t.Errorf("Weibull–Gamma %s, λ×%v α×%v: graph %.17g, plain %.17g", c.name, lambdaScale[i], alphaScale[i], got[i], want)
			}
		}
	}
	shift := []float64{0, -0.5, 2, -7}
	for _, c := range logNormalCases {
		mu, mu0 := make([]float64, 4), make([]float64, 4)
		for i := range mu {
			mu[i], mu0[i] = c.mu+shift[i], c.mu0
		}
		got := runKLGraph(t, mu, mu0, func(m, m0 *graph.Node) (*graph.Node, error) {
			return KLLogNormalNode(m, m0, c.sigma, c.sig0)
		})
		for i := range got {
			want := KLLogNormal(mu[i], c.sigma, mu0[i], c.sig0)
			worstL = max(worstL, math.Abs(got[i]-want)/math.Max(1, math.Abs(want)))
			if !closeTo(got[i], want, 1e-12) {
				t.Errorf("log-normal %s, μ%+v: graph %.17g, plain %.17g", c.name, shift[i], got[i], want)
			}
		}
	}
	t.Logf("largest |graph − plain|: Weibull–Gamma %.2g × its largest term, log-normal %.2g × max(1, |KL|)", worstW, worstL)
}

// TestKLWeibullGammaNodeMeanParameterisation: fed log φ − lgamma(1+1/k)
// and α = β p, as the Weibull kernel does, the node is the KL of the
// posterior with mean φ from the prior with mean p.
func TestKLWeibullGammaNodeMeanParameterisation(t *testing.T) {
	const k, beta = 10.0, 2.0
	phi, p := []float64{0.7, 0.2, 0.1}, []float64{0.5, 0.3, 0.2}
	lgK, _ := math.Lgamma(1 + 1/k)
	logLambda, alpha := make([]float64, 3), make([]float64, 3)
	for i := range phi {
		logLambda[i], alpha[i] = math.Log(phi[i])-lgK, beta*p[i]
	}
	got := runKLGraph(t, logLambda, alpha, func(l, a *graph.Node) (*graph.Node, error) {
		return KLWeibullGammaNode(k, l, a, beta)
	})
	for i := range phi {
		lambda := phi[i] / math.Gamma(1+1/k)
		if mean := lambda * math.Gamma(1+1/k); !closeTo(mean, phi[i], 1e-15) {
			t.Fatalf("Weibull mean %v, want φ = %v", mean, phi[i])
		}
		if want := KLWeibullGamma(k, lambda, beta*p[i], beta); !closeTo(got[i], want, 1e-12) {
			t.Errorf("φ = %v, p = %v: graph %.17g, plain %.17g", phi[i], p[i], got[i], want)
		}
	}
}

// TestKLNodesFloat32 runs both nodes in float32, the training dtype.
func TestKLNodesFloat32(t *testing.T) {
	logLambda, alpha := []float64{-1, -3, 0.5}, []float64{0.2, 2, 0.01}
	got := runKLGraphAs(t, graph.Float32, logLambda, alpha, func(l, a *graph.Node) (*graph.Node, error) {
		return KLWeibullGammaNode(10, l, a, 1)
	})
	for i := range got {
		// Compare at the float32-rounded inputs.
		l, a := float64(float32(logLambda[i])), float64(float32(alpha[i]))
		if want := KLWeibullGamma(10, math.Exp(l), a, 1); !closeTo(got[i], want, 1e-5) {
			t.Errorf("float32 Weibull–Gamma at log λ = %v, α = %v: %v, want %v", l, a, got[i], want)
		}
	}
	mu, mu0 := []float64{-1, -3, 0.5}, []float64{-1.2, 0, 0.5}
	got = runKLGraphAs(t, graph.Float32, mu, mu0, func(m, m0 *graph.Node) (*graph.Node, error) {
		return KLLogNormalNode(m, m0, 1, 0.5)
	})
	for i := range got {
		m, m0 := float64(float32(mu[i])), float64(float32(mu0[i]))
		if want := KLLogNormal(m, 1, m0, 0.5); !closeTo(got[i], want, 1e-6) {
			t.Errorf("float32 log-normal at μ = %v, μ₀ = %v: %v, want %v", m, m0, got[i], want)
		}
	}
}

// positiveIn is an initialiser U(lo, hi) for α, which must stay > 0.
func positiveIn(lo, hi float64) graph.Init {
	return func(rng *rand.Rand, shape []int) []float64 {
		n := 1
		for _, d := range shape {
			n *= d
		}
		v := make([]float64, n)
		for i := range v {
			v[i] = lo + (hi-lo)*rng.Float64()
		}
		return v
	}
}

func TestKLNodeGradients(t *testing.T) {
	for i, hyper := range []struct{ k, beta float64 }{{10, 1}, {0.7, 50}, {3, 0.2}} {
		_, err := graph.CheckGradients(graph.NewParams(graph.Float64, uint64(i+1)), func(b *graph.Builder) *graph.Node {
			logLambda := b.Param("loglambda", []int{2, 3, 4}, graph.Normal(1))
			alpha := b.Param("alpha", []int{2, 3, 4}, positiveIn(0.05, 5))
			kl, err := KLWeibullGammaNode(hyper.k, logLambda, alpha, hyper.beta)
			if err != nil {
				t.Fatal(err)
			}
			return kl
		}, graph.GradCheckOptions{Seed: uint64(i)})
		if err != nil {
			t.Errorf("Weibull–Gamma k=%v β=%v: %v", hyper.k, hyper.beta, err)
		}
	}
	for i, hyper := range []struct{ sigma, sigma0 float64 }{{1, 1}, {0.1, 2}, {3, 0.5}} {
		_, err := graph.CheckGradients(graph.NewParams(graph.Float64, uint64(i+1)), func(b *graph.Builder) *graph.Node {
			mu := b.Param("mu", []int{2, 3, 4}, graph.Normal(2))
			mu0 := b.Param("mu0", []int{2, 3, 4}, graph.Normal(2))
			kl, err := KLLogNormalNode(mu, mu0, hyper.sigma, hyper.sigma0)
			if err != nil {
				t.Fatal(err)
			}
			return kl
		}, graph.GradCheckOptions{Seed: uint64(i)})
		if err != nil {
			t.Errorf("log-normal σ=%v σ₀=%v: %v", hyper.sigma, hyper.sigma0, err)
		}
	}
}

func TestKLNodesRejectBadHyperparameters(t *testing.T) {
	bad := []struct{ a, b float64 }{{0, 1}, {1, 0}, {-1, 1}, {math.NaN(), 1}, {math.Inf(1), 1}, {1, math.Inf(1)}}
	for _, h := range bad {
		_, err := graph.Compile(graph.NewParams(graph.Float64, 1), func(b *graph.Builder) error {
			x := b.Constant("x", []int{2}, []float64{0.5, 1})
			if _, err := KLWeibullGammaNode(h.a, x, x, h.b); err == nil {
				return fmt.Errorf("Weibull–Gamma KL accepted k = %v, β = %v", h.a, h.b)
			}
			if _, err := KLLogNormalNode(x, x, h.a, h.b); err == nil {
				return fmt.Errorf("log-normal KL accepted σ = %v, σ₀ = %v", h.a, h.b)
			}
			return nil
		}, false)
		if err != nil {
			t.Error(err)
		}
	}
}

// closeTo reports |got − want| ≤ tol · max(1, |want|).
func closeTo(got, want, tol float64) bool {
	return math.Abs(got-want) <= tol*math.Max(1, math.Abs(want))
}
