package em

import (
	"github.com/probformer/probformer/graph/graphtest"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/probformer/probformer/graph"
)

// fusedCases are the configurations on which the fused op is compared
// with the composed graph: every phase at T = 0…3, masks, annotated
// units (with an empty S), the free prior (learned and fed) and every
// optional update.
var fusedCases = []struct {
	name                     string
	cfg                      Config
	masks, annotate, piInput bool
	emptyS                   bool
}{
	{name: "readout only", cfg: Config{}, masks: true},
	{name: "readout only, no masks", cfg: Config{}},
	{name: "keys T=1", cfg: Config{KeyIters: 1}, masks: true},
	{name: "keys T=2 α", cfg: Config{KeyIters: 2, AdaptAlpha: true}, masks: true},
	{name: "keys T=3 α free prior", cfg: Config{KeyIters: 3, AdaptAlpha: true, Prior: FreePrior}, masks: true},
	{name: "propagate T=1", cfg: Config{PropagateIters: 1}, masks: true, annotate: true},
	{name: "propagate T=3 β⁰ throughout", cfg: Config{PropagateIters: 3}, masks: true, annotate: true},
	{name: "propagate T=1 β unread", cfg: Config{PropagateIters: 1, AdaptBeta: true}, masks: true, annotate: true},
	{name: "propagate T=2 β π", cfg: Config{PropagateIters: 2, AdaptBeta: true, AdaptPi: true}, masks: true, annotate: true},
	{name: "propagate T=3 β π, value T=1", cfg: Config{PropagateIters: 3, ValueIters: 1, AdaptBeta: true, AdaptPi: true}, masks: true, annotate: true},
	{name: "propagate T=2 π free prior input", cfg: Config{PropagateIters: 2, AdaptPi: true, Prior: FreePrior}, masks: true, annotate: true, piInput: true},
	{name: "propagate T=2 β π empty S", cfg: Config{PropagateIters: 2, ValueIters: 1, AdaptBeta: true, AdaptPi: true}, masks: true, annotate: true, emptyS: true},
	{name: "values T=1", cfg: Config{ValueIters: 1}, masks: true},
	{name: "values T=3 free prior", cfg: Config{ValueIters: 3, Prior: FreePrior}, masks: true},
	{name: "all T=1", cfg: Config{KeyIters: 1, PropagateIters: 1, ValueIters: 1, AdaptAlpha: true, AdaptBeta: true, AdaptPi: true}, masks: true, annotate: true},
	{name: "all T=2 no masks", cfg: Config{KeyIters: 2, PropagateIters: 2, ValueIters: 2, AdaptAlpha: true, AdaptBeta: true, AdaptPi: true}, annotate: true},
	{name: "all T=3 free prior", cfg: Config{KeyIters: 3, PropagateIters: 3, ValueIters: 3, AdaptAlpha: true, AdaptBeta: true, AdaptPi: true, Prior: FreePrior}, masks: true, annotate: true},
}

// attendFunc is Attend or attendComposed.
type attendFunc func(b *graph.Builder, name string, cfg Config, q, k, v, keyMask *graph.Node, ex *Extras) (AttendResult, error)

// lossAndGradients builds attend over p in a float64 training program
// whose loss weighs every output (readout, weights and the adapted
// mixture) by fixed random coefficients, and returns the outputs and the
// gradient of every parameter.
func lossAndGradients(t *testing.T, attend attendFunc, p *batch, cfg Config, seed uint64) (map[string][]float64, map[string][]float64) {
	t.Helper()
	ps := graph.NewParams(graph.Float64, 1)
	names := []string{"readout", "weights", "xi", "alpha", "mu", "beta", "log_pi"}
	build := func(b *graph.Builder) error {
		q, k, v, keyMask, ex := p.nodes(b, true)
		res, err := attend(b, "att", cfg, q, k, v, keyMask, ex)
		if err != nil {
			return err
		}
		rng := rand.New(rand.NewPCG(seed, 7))
		var loss *graph.Node
		for i, x := range []*graph.Node{res.Readout, res.Weights, res.Mixture.Xi, res.Mixture.Alpha, res.Mixture.Mu, res.Mixture.Beta, res.Mixture.LogPi} {
			if x == nil {
				continue
			}
			if i < 2 {
				b.Output(names[i], x)
			}
			if names[i] == "log_pi" {
				continue // −1e9 at padded units: no use as a loss term
			}
			coef := normals(rng, shapeSize(graph.Shape(x)), 1)
			if i >= 2 {
				// The mixture of padded memory units carries no meaning.
				width := len(coef) / (p.B * p.H * p.M)
				for at := range coef {
					unit := at / width
					if !isReal(p.keyMask, unit/(p.H*p.M), p.M, unit%p.M) {
						coef[at] = 0
					}
				}
				x = graph.Mul(x, b.Constant("mask."+names[i], graph.Shape(x), unitMask(p, width)))
				b.Output(names[i], x)
			}
			c := b.Constant("coef."+names[i], graph.Shape(x), coef)
			term := graph.Sum(graph.Mul(x, c))
			if loss == nil {
				loss = term
			} else {
				loss = graph.Add(loss, term)
			}
		}
		b.SetLoss(loss)
		return nil
	}
	if _, err := graph.Compile(ps, build, false); err != nil {
		t.Fatal(err)
	}
	p.setRaw(t, ps)
	prog, err := graph.Compile(ps, build, true)
	if err != nil {
		t.Fatal(err)
	}
	run := graphtest.Run(t, prog, names...)
	return run.Out, run.Grads
}

// unitMask is 1 at the entries [B, H, M, width] of real memory units.
func unitMask(p *batch, width int) []float64 {
	m := make([]float64, p.B*p.H*p.M*width)
	for at := range m {
		unit := at / width
		if isReal(p.keyMask, unit/(p.H*p.M), p.M, unit%p.M) {
			m[at] = 1
		}
	}
	return m
}

func shapeSize(s []int) int {
	n := 1
	for _, x := range s {
		n *= x
	}
	return n
}

// TestFusedEqualsComposed checks that the fused op (Attend) computes what
// the composed graph computes, outputs and the gradients of every
// parameter and input, to 1e-9 in float64, on every case of fusedCases.
func TestFusedEqualsComposed(t *testing.T) {
	rng := rand.New(rand.NewPCG(33, 4))
	for i, tc := range fusedCases {
		t.Run(tc.name, func(t *testing.T) {
			p := randomBatch(rng, 3, 2, 5, 4, 3, 2, tc.masks, tc.annotate)
			p.piInput = tc.piInput
			if tc.annotate {
				for b := range p.B {
					p.annotated[b*p.N] = 1
					if p.queryMask != nil {
						p.queryMask[b*p.N] = 1
					}
				}
				if tc.emptyS {
					for n := range p.N {
						p.annotated[n] = 0 // example 0 annotates nothing
					}
				}
			}
			wantOut, wantGrad := lossAndGradients(t, attendComposed, p, tc.cfg, uint64(i))
			gotOut, gotGrad := lossAndGradients(t, Attend, p, tc.cfg, uint64(i))
			compareMaps(t, "output", gotOut, wantOut, 1e-9)
			compareMaps(t, "gradient", gotGrad, wantGrad, 1e-9)
		})
	}
}

// compareMaps checks that got and want hold the same keys and values
// equal to tol (relative above 1); log π below −1e8 (padded units) only
// needs to be below −1e8 in both.
func compareMaps(t *testing.T, what string, got, want map[string][]float64, tol float64) {
	t.Helper()
	keys := func(m map[string][]float64) []string {
		var k []string
		for n := range m {
			k = append(k, n)
		}
		slices.Sort(k)
		return k
	}
	if !slices.Equal(keys(got), keys(want)) {
		t.Fatalf("%ss %v, want %v", what, keys(got), keys(want))
	}
	for name, w := range want {
		g := got[name]
		for i := range w {
			if w[i] < -1e8 && g[i] < -1e8 {
				continue
			}
			if !closeTo(g[i], w[i], tol) {
				t.Errorf("%s %s[%d] = %.15g, want %.15g", what, name, i, g[i], w[i])
				break
			}
		}
	}
}
