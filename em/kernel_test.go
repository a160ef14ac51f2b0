package em

import (
	"fmt"
	"github.com/probformer/probformer/graph/graphtest"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/probformer/probformer/graph"
)

// batch is a batched problem for Attend and its per-example, per-head
// slices for the reference: B examples, H heads, N query units, M memory
// units, key dimension d, value dimension m. Slices are row-major; nil
// masks mean no mask.
type batch struct {
	B, H, N, M, d, m int

	q, k, v   []float64 // [B, H, N, d], [B, H, M, d], [B, H, M, m]
	keyMask   []float64 // [B, M]
	queryMask []float64 // [B, N]
	annotated []float64 // [B, N]
	values    []float64 // [B, H, N, m]
	piLogits  []float64 // [B, H, M], fed as Extras.PiLogits when piInput
	piInput   bool

	raw []RawParams // per head
}

func normals(rng *rand.Rand, n int, scale float64) []float64 {
	x := make([]float64, n)
	for i := range x {
		x[i] = scale * rng.NormFloat64()
	}
	return x
}

// flags returns B·n 0/1 entries, each 0 with probability zeroProb, with at
// least one 1 per example when needOne.
func flags(rng *rand.Rand, bsz, n int, zeroProb float64, needOne bool) []float64 {
	f := make([]float64, bsz*n)
	for b := range bsz {
		for i := range n {
			if rng.Float64() >= zeroProb {
				f[b*n+i] = 1
			}
		}
		if needOne {
			f[b*n+rng.IntN(n)] = 1
		}
	}
	return f
}

// randomRaw draws every raw parameter from N(0, 1) clipped to [−3, 3]:
// b_α, b_β ≥ 0.049, away from the precisions where the expanded distance
// loses its digits (see sqDist).
func randomRaw(rng *rand.Rand) RawParams {
	var r RawParams
	for _, f := range []*float64{&r.ThetaXi, &r.AAlpha, &r.BAlpha, &r.ThetaMu, &r.ABeta, &r.BBeta, &r.ThetaPi, &r.Alpha0, &r.Beta0} {
		*f = math.Max(-3, math.Min(3, rng.NormFloat64()))
	}
	return r
}

// randomBatch returns a random problem; with masks, about a quarter of the
// units are padded (at least one memory unit of each example is real), and
// about half of the query units are annotated when annotate is set.
func randomBatch(rng *rand.Rand, bsz, heads, n, mem, d, m int, masks, annotate bool) *batch {
	p := &batch{
		B: bsz, H: heads, N: n, M: mem, d: d, m: m,
		q:        normals(rng, bsz*heads*n*d, 1),
		k:        normals(rng, bsz*heads*mem*d, 1),
		v:        normals(rng, bsz*heads*mem*m, 1.5),
		piLogits: normals(rng, bsz*heads*mem, 1),
	}
	if masks {
		p.keyMask = flags(rng, bsz, mem, 0.25, true)
		p.queryMask = flags(rng, bsz, n, 0.25, false)
	}
	if annotate {
		p.annotated = flags(rng, bsz, n, 0.5, false)
		p.values = normals(rng, bsz*heads*n*m, 1.5)
	}
	for range heads {
		p.raw = append(p.raw, randomRaw(rng))
	}
	return p
}

// rawField returns the raw values [H] of one parameter field.
func (p *batch) rawField(field string) []float64 {
	out := make([]float64, p.H)
	for h, r := range p.raw {
		out[h] = map[string]float64{
			paramThetaXi: r.ThetaXi, paramAAlpha: r.AAlpha, paramBAlpha: r.BAlpha,
			paramThetaMu: r.ThetaMu, paramABeta: r.ABeta, paramBBeta: r.BBeta, paramThetaPi: r.ThetaPi,
			paramAlpha0: r.Alpha0, paramBeta0: r.Beta0,
		}[field]
	}
	return out
}

var headFields = []string{paramThetaXi, paramAAlpha, paramBAlpha, paramThetaMu, paramABeta, paramBBeta, paramThetaPi, paramAlpha0, paramBeta0}

// nodes declares the problem's inputs in b, as constants or, with learn,
// as parameters (initialised to the problem's values) so that gradients
// reach them.
func (p *batch) nodes(b *graph.Builder, learn bool) (q, k, v, keyMask *graph.Node, ex *Extras) {
	node := func(name string, shape []int, values []float64) *graph.Node {
		if values == nil {
			return nil
		}
		if learn {
			return b.Param(name, shape, func(*rand.Rand, []int) []float64 { return append([]float64(nil), values...) })
		}
		return b.Constant(name, shape, values)
	}
	constant := func(name string, shape []int, values []float64) *graph.Node {
		if values == nil {
			return nil
		}
		return b.Constant(name, shape, values)
	}
	q = node("q", []int{p.B, p.H, p.N, p.d}, p.q)
	k = node("k", []int{p.B, p.H, p.M, p.d}, p.k)
	v = node("v", []int{p.B, p.H, p.M, p.m}, p.v)
	keyMask = constant("key_mask", []int{p.B, p.M}, p.keyMask)
	ex = &Extras{
		QueryMask: constant("query_mask", []int{p.B, p.N}, p.queryMask),
		Annotated: constant("annotated", []int{p.B, p.N}, p.annotated),
		Values:    node("values", []int{p.B, p.H, p.N, p.m}, p.values),
	}
	if p.piInput {
		ex.PiLogits = node("pi_logits", []int{p.B, p.H, p.M}, p.piLogits)
	}
	return q, k, v, keyMask, ex
}

// setRaw writes the problem's raw hyperparameters (and, for a learned
// free prior, its logits) into the layer "att"'s parameters that exist.
func (p *batch) setRaw(t *testing.T, ps *graph.Params) {
	t.Helper()
	for _, f := range headFields {
		if prm := ps.Lookup(ParamName("att", f)); prm != nil {
			if err := prm.SetValues(p.rawField(f)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if prm := ps.Lookup(ParamName("att", paramPiLogits)); prm != nil {
		// The learned logits are shared by the examples: take example 0's.
		if err := prm.SetValues(p.piLogits[:p.H*p.M]); err != nil {
			t.Fatal(err)
		}
	}
}

// graphRun is the outputs of one run of Attend.
type graphRun struct {
	readout, weights, xi, alpha, mu, beta, logPi []float64
}

// run builds Attend over p in a forward program of dtype dt, with the
// problem's raw hyperparameters, and returns its outputs.
func (p *batch) run(t *testing.T, dt graph.DType, cfg Config) graphRun {
	t.Helper()
	ps := graph.NewParams(dt, 1)
	prog, err := graph.Compile(ps, func(b *graph.Builder) error {
		q, k, v, keyMask, ex := p.nodes(b, false)
		res, err := Attend(b, "att", cfg, q, k, v, keyMask, ex)
		if err != nil {
			return err
		}
		b.Output("readout", res.Readout)
		b.Output("weights", res.Weights)
		b.Output("xi", res.Mixture.Xi)
		b.Output("alpha", res.Mixture.Alpha)
		b.Output("mu", res.Mixture.Mu)
		if res.Mixture.Beta != nil {
			b.Output("beta", res.Mixture.Beta)
		}
		b.Output("log_pi", res.Mixture.LogPi)
		return nil
	}, false)
	if err != nil {
		t.Fatal(err)
	}
	p.setRaw(t, ps)
	run := graphtest.Forward(t, prog, "readout", "weights", "xi", "alpha", "mu", "beta", "log_pi")
	o := run.Out
	out := graphRun{readout: o["readout"], weights: o["weights"], xi: o["xi"], alpha: o["alpha"], mu: o["mu"],
		beta: o["beta"], logPi: o["log_pi"]}
	return out
}

// rows returns the [n, width] block of x [B, H, n, width] at (b, h).
func rows(x []float64, p *batch, b, h, n, width int) [][]float64 {
	start := (b*p.H + h) * n * width
	out := make([][]float64, n)
	for i := range out {
		out[i] = x[start+i*width : start+(i+1)*width]
	}
	return out
}

func bools(f []float64, b, n int) []bool {
	if f == nil {
		return nil
	}
	out := make([]bool, n)
	for i := range out {
		out[i] = f[b*n+i] == 1
	}
	return out
}

// reference returns the plain-Go Run of example b, head h.
func (p *batch) reference(cfg Config, b, h int) (Result, error) {
	hyper, alpha0, beta0 := p.raw[h].LayerHyperparams()
	in := Inputs{
		Q:          rows(p.q, p, b, h, p.N, p.d),
		QueryMask:  bools(p.queryMask, b, p.N),
		Xi0:        rows(p.k, p, b, h, p.M, p.d),
		Mu0:        rows(p.v, p, b, h, p.M, p.m),
		Alpha0:     make([]float64, p.M),
		Beta0:      make([]float64, p.M),
		PiLogits:   p.piLogits[h*p.M : (h+1)*p.M], // the learned logits
		MemoryMask: bools(p.keyMask, b, p.M),
		Annotated:  bools(p.annotated, b, p.N),
	}
	if p.piInput {
		in.PiLogits = rows(p.piLogits, p, b, h, 1, p.M)[0]
	}
	if p.values != nil {
		in.V = rows(p.values, p, b, h, p.N, p.m)
	}
	for j := range in.Alpha0 {
		in.Alpha0[j], in.Beta0[j] = alpha0, beta0
	}
	return Run(cfg, hyper, in)
}

// isReal reports whether unit i of example b is real under mask [B, n].
func isReal(mask []float64, b, n, i int) bool { return mask == nil || mask[b*n+i] == 1 }

// compare checks the graph's outputs against the reference for every
// example and head: readout and weights of real query units to tol, those
// of padded ones exactly 0, and the adapted mixture of real memory units
// to tol.
func (p *batch) compare(t *testing.T, cfg Config, got graphRun, tol float64) {
	t.Helper()
	for b := range p.B {
		for h := range p.H {
			want, err := p.reference(cfg, b, h)
			if err != nil {
				t.Fatalf("reference of example %d, head %d: %v", b, h, err)
			}
			at := fmt.Sprintf("example %d, head %d", b, h)
			readout := rows(got.readout, p, b, h, p.N, p.m)
			weights := rows(got.weights, p, b, h, p.N, p.M)
			for i := range p.N {
				if !isReal(p.queryMask, b, p.N, i) {
					for _, x := range append(append([]float64(nil), readout[i]...), weights[i]...) {
						if x != 0 {
							t.Errorf("%s: padded query unit %d has readout or weight %v, want 0", at, i, x)
						}
					}
					continue
				}
				assertClose(t, at+" readout", readout[i], want.Readout[i], tol)
				assertClose(t, at+" weights", weights[i], want.Weights[i], tol)
			}
			xi := rows(got.xi, p, b, h, p.M, p.d)
			mu := rows(got.mu, p, b, h, p.M, p.m)
			alpha := rows(got.alpha, p, b, h, 1, p.M)[0]
			logPi := rows(got.logPi, p, b, h, 1, p.M)[0]
			var beta []float64
			if got.beta != nil {
				beta = rows(got.beta, p, b, h, 1, p.M)[0]
			}
			wantBeta := want.Beta
			if cfg.ValueIters == 0 && cfg.AdaptBeta && cfg.PropagateIters > 0 {
				// The graph leaves out the last β update, which the readout
				// does not read (see Attend).
				short := cfg
				short.PropagateIters--
				shortWant, err := p.reference(short, b, h)
				if err != nil {
					t.Fatal(err)
				}
				wantBeta = shortWant.Beta
			}
			for j := range p.M {
				if !isReal(p.keyMask, b, p.M, j) {
					if weights[0][j] != 0 || logPi[j] > graph.MaskNegInf/2 {
						t.Errorf("%s: padded memory unit %d has weight %v, log π %v", at, j, weights[0][j], logPi[j])
					}
					continue
				}
				assertClose(t, at+" ξ", xi[j], want.Xi[j], tol)
				assertClose(t, at+" μ", mu[j], want.Mu[j], tol)
				assertClose(t, at+" α", alpha[j:j+1], want.Alpha[j:j+1], tol)
				assertClose(t, at+" log π", logPi[j:j+1], want.LogPi[j:j+1], tol)
				if beta != nil {
					assertClose(t, at+" β", beta[j:j+1], wantBeta[j:j+1], tol)
				}
			}
		}
	}
}

// assertClose checks got against want with closeTo (relative to |want|
// above 1, absolute below), reporting at most the first mismatch.
func assertClose(t *testing.T, name string, got, want []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: length %d, want %d", name, len(got), len(want))
	}
	for k := range want {
		if !closeTo(got[k], want[k], tol) {
			t.Errorf("%s[%d] = %.17g, want %.17g", name, k, got[k], want[k])
			return
		}
	}
}

// TestAttendEqualsScaledDotProductAttention checks MATH.md §2 on the
// graph: equal precisions, the linked prior, β⁰ → 0 (PrecisionFloor +
// softplus(−40) ≈ 1e-8), α⁰ = 1/√d and no iterations give
// softmax_j(q_i·k_j/√d) v_j, computed here in plain Go, to 1e-6; padded
// keys get weight 0.
func TestAttendEqualsScaledDotProductAttention(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 1))
	for trial := range 6 {
		p := randomBatch(rng, 2, 2, 1+rng.IntN(5), 1+rng.IntN(6), 1+rng.IntN(12), 1+rng.IntN(4), trial%2 == 1, false)
		p.queryMask = nil // plain attention reads out every query unit
		alpha := 1 / math.Sqrt(float64(p.d))
		for h := range p.raw {
			p.raw[h].Alpha0 = rawFor(alpha, PrecisionFloor)
			p.raw[h].Beta0 = -40
		}
		got := p.run(t, graph.Float64, Config{Prior: LinkedPrior})
		for b := range p.B {
			for h := range p.H {
				keys, values := rows(p.k, p, b, h, p.M, p.d), rows(p.v, p, b, h, p.M, p.m)
				readout := rows(got.readout, p, b, h, p.N, p.m)
				for i, q := range rows(p.q, p, b, h, p.N, p.d) {
					want := attention(q, keys, values, bools(p.keyMask, b, p.M), func(j int) float64 {
						return dot(q, keys[j]) / math.Sqrt(float64(p.d))
					})
					assertClose(t, fmt.Sprintf("trial %d readout", trial), readout[i], want, 1e-6)
				}
			}
		}
	}
}

// TestDefaultLayerIsShiftedAttention checks what DefaultRawParams claims:
// a fresh layer with no iterations is softmax attention with logits
// q·k/√d + (β⁰/2)‖v‖², β⁰ = 0.01 (the linked prior's value term, §2).
func TestDefaultLayerIsShiftedAttention(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 2))
	p := randomBatch(rng, 2, 3, 4, 5, 6, 3, true, false)
	p.queryMask = nil
	for h := range p.raw {
		p.raw[h] = DefaultRawParams(p.d)
	}
	got := p.run(t, graph.Float64, Config{Prior: LinkedPrior})
	for b := range p.B {
		for h := range p.H {
			keys, values := rows(p.k, p, b, h, p.M, p.d), rows(p.v, p, b, h, p.M, p.m)
			readout := rows(got.readout, p, b, h, p.N, p.m)
			for i, q := range rows(p.q, p, b, h, p.N, p.d) {
				want := attention(q, keys, values, bools(p.keyMask, b, p.M), func(j int) float64 {
					return dot(q, keys[j])/math.Sqrt(float64(p.d)) + initialBeta0/2*dot(values[j], values[j])
				})
				assertClose(t, "readout", readout[i], want, 1e-12)
			}
		}
	}
}

// TestAttendEqualsReference compares the graph with the plain-Go reference
// (Run, example by example and head by head) to 1e-9 in float64, for 1, 2
// and 3 iterations of each phase with and without its optional updates,
// both priors, with and without masks, and an example whose annotated
// units are all padded or absent (S empty: propagation skipped there only).
func TestAttendEqualsReference(t *testing.T) {
	cases := []struct {
		name     string
		cfg      Config
		masks    bool
		annotate bool
		piInput  bool
		emptyS   bool // example 0 annotates no real query unit
	}{
		{name: "readout only", cfg: Config{}, masks: true},
		{name: "keys T=1", cfg: Config{KeyIters: 1}, masks: true},
		{name: "keys T=2 α", cfg: Config{KeyIters: 2, AdaptAlpha: true}, masks: true},
		{name: "keys T=3 α free prior", cfg: Config{KeyIters: 3, AdaptAlpha: true, Prior: FreePrior}, masks: true},
		{name: "keys T=2 α no masks", cfg: Config{KeyIters: 2, AdaptAlpha: true}},
		{name: "propagate T=1", cfg: Config{PropagateIters: 1}, masks: true, annotate: true},
		{name: "propagate T=1 β unread", cfg: Config{PropagateIters: 1, AdaptBeta: true}, masks: true, annotate: true},
		{name: "propagate T=1 β read", cfg: Config{PropagateIters: 1, ValueIters: 1, AdaptBeta: true}, masks: true, annotate: true},
		{name: "propagate T=2 β", cfg: Config{PropagateIters: 2, AdaptBeta: true}, masks: true, annotate: true},
		{name: "propagate T=3 β π", cfg: Config{PropagateIters: 3, AdaptBeta: true, AdaptPi: true}, masks: true, annotate: true},
		{name: "propagate T=2 π free prior input", cfg: Config{PropagateIters: 2, AdaptPi: true, Prior: FreePrior}, masks: true, annotate: true, piInput: true},
		{name: "propagate T=2 β π empty S", cfg: Config{PropagateIters: 2, AdaptBeta: true, AdaptPi: true}, masks: true, annotate: true, emptyS: true},
		{name: "propagate T=2 β π no masks", cfg: Config{PropagateIters: 2, AdaptBeta: true, AdaptPi: true}, annotate: true},
		{name: "values T=1", cfg: Config{ValueIters: 1}, masks: true},
		{name: "values T=2 free prior", cfg: Config{ValueIters: 2, Prior: FreePrior}, masks: true},
		{name: "values T=3", cfg: Config{ValueIters: 3}, masks: true, annotate: true},
		{name: "all T=1", cfg: Config{KeyIters: 1, PropagateIters: 1, ValueIters: 1, AdaptAlpha: true, AdaptBeta: true, AdaptPi: true}, masks: true, annotate: true},
		{name: "all T=2", cfg: Config{KeyIters: 2, PropagateIters: 2, ValueIters: 2, AdaptAlpha: true, AdaptBeta: true, AdaptPi: true}, masks: true, annotate: true, emptyS: true},
		{name: "all T=3 free prior", cfg: Config{KeyIters: 3, PropagateIters: 3, ValueIters: 3, AdaptAlpha: true, AdaptBeta: true, AdaptPi: true, Prior: FreePrior}, masks: true, annotate: true},
		{name: "all T=3 no masks", cfg: Config{KeyIters: 3, PropagateIters: 3, ValueIters: 3, AdaptAlpha: true, AdaptBeta: true, AdaptPi: true}, annotate: true},
	}
	rng := rand.New(rand.NewPCG(12, 1))
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := randomBatch(rng, 3, 2, 2+rng.IntN(4), 2+rng.IntN(4), 1+rng.IntN(4), 1+rng.IntN(3), tc.masks, tc.annotate)
			p.piInput = tc.piInput
			if tc.emptyS {
				for i := range p.N {
					// Example 0 annotates only padded units, if any.
					p.annotated[i] = 0
					if p.queryMask != nil && p.queryMask[i] == 0 {
						p.annotated[i] = 1
					}
				}
			}
			p.compare(t, tc.cfg, p.run(t, graph.Float64, tc.cfg), 1e-9)
		})
	}
}

// TestAttendPaddingChangesNothing checks MATH.md §1 and §7 on the graph:
// inserting padded query and memory units, holding arbitrary finite
// values (and annotated padded query units), leaves every output of the
// real units unchanged, gives the padded memory units weight exactly 0 and
// the padded query units zero rows.
func TestAttendPaddingChangesNothing(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 1))
	cfg := Config{KeyIters: 2, PropagateIters: 2, ValueIters: 2, AdaptAlpha: true, AdaptBeta: true, AdaptPi: true}
	for trial := range 4 {
		cfg.Prior = Prior(trial % 2)
		plain := randomBatch(rng, 2, 2, 2+rng.IntN(3), 2+rng.IntN(3), 1+rng.IntN(3), 1+rng.IntN(3), false, true)
		plain.piInput = cfg.Prior == FreePrior
		queryAt := interleave(rng, plain.N, 1+rng.IntN(3))
		memoryAt := interleave(rng, plain.M, 1+rng.IntN(3))
		padded := pad(rng, plain, queryAt, memoryAt)
		want := plain.run(t, graph.Float64, cfg)
		got := padded.run(t, graph.Float64, cfg)
		for b := range plain.B {
			for h := range plain.H {
				for pi, i := range queryAt {
					gotW := rows(got.weights, padded, b, h, padded.N, padded.M)[pi]
					gotV := rows(got.readout, padded, b, h, padded.N, padded.m)[pi]
					if i < 0 {
						assertClose(t, "padded query unit's weights", gotW, make([]float64, padded.M), 0)
						assertClose(t, "padded query unit's readout", gotV, make([]float64, padded.m), 0)
						continue
					}
					wantW := rows(want.weights, plain, b, h, plain.N, plain.M)[i]
					for pj, j := range memoryAt {
						switch {
						case j < 0 && gotW[pj] != 0:
							t.Errorf("trial %d: padded memory unit %d has weight %v", trial, pj, gotW[pj])
						case j >= 0 && !closeTo(gotW[pj], wantW[j], 1e-13):
							t.Errorf("trial %d: weight [%d][%d] = %.17g, want %.17g", trial, pi, pj, gotW[pj], wantW[j])
						}
					}
					assertClose(t, "readout", gotV, rows(want.readout, plain, b, h, plain.N, plain.m)[i], 1e-13)
				}
				for pj, j := range memoryAt {
					if j < 0 {
						continue
					}
					assertClose(t, "ξ", rows(got.xi, padded, b, h, padded.M, padded.d)[pj], rows(want.xi, plain, b, h, plain.M, plain.d)[j], 1e-13)
					assertClose(t, "μ", rows(got.mu, padded, b, h, padded.M, padded.m)[pj], rows(want.mu, plain, b, h, plain.M, plain.m)[j], 1e-13)
					for _, f := range []struct {
						name      string
						got, want []float64
					}{{"α", got.alpha, want.alpha}, {"β", got.beta, want.beta}, {"log π", got.logPi, want.logPi}} {
						assertClose(t, f.name, rows(f.got, padded, b, h, 1, padded.M)[0][pj:pj+1], rows(f.want, plain, b, h, 1, plain.M)[0][j:j+1], 1e-13)
					}
				}
			}
		}
	}
}

// pad returns p with padded units inserted where queryAt and memoryAt
// hold −1 (see interleave), filled with finite junk; padded query units
// are marked annotated, which must not count.
func pad(rng *rand.Rand, p *batch, queryAt, memoryAt []int) *batch {
	junk := func() float64 { return []float64{0, 3, -7, 1e3}[rng.IntN(4)] * rng.Float64() }
	out := &batch{B: p.B, H: p.H, N: len(queryAt), M: len(memoryAt), d: p.d, m: p.m, raw: p.raw, piInput: p.piInput}
	for b := range p.B {
		for _, src := range queryAt {
			out.queryMask = append(out.queryMask, boolFloat(src >= 0))
			if src < 0 {
				out.annotated = append(out.annotated, 1)
				continue
			}
			out.annotated = append(out.annotated, p.annotated[b*p.N+src])
		}
		for _, src := range memoryAt {
			out.keyMask = append(out.keyMask, boolFloat(src >= 0))
		}
		for h := range p.H {
			for _, src := range queryAt {
				out.q = appendRow(out.q, p.q, ((b*p.H+h)*p.N+src)*p.d, p.d, src, junk)
				out.values = appendRow(out.values, p.values, ((b*p.H+h)*p.N+src)*p.m, p.m, src, junk)
			}
			for _, src := range memoryAt {
				out.k = appendRow(out.k, p.k, ((b*p.H+h)*p.M+src)*p.d, p.d, src, junk)
				out.v = appendRow(out.v, p.v, ((b*p.H+h)*p.M+src)*p.m, p.m, src, junk)
				out.piLogits = appendRow(out.piLogits, p.piLogits, (b*p.H+h)*p.M+src, 1, src, junk)
			}
		}
	}
	return out
}

// appendRow appends x[at : at+width], or width junk values when src < 0.
func appendRow(dst, x []float64, at, width, src int, junk func() float64) []float64 {
	if src < 0 {
		for range width {
			dst = append(dst, junk())
		}
		return dst
	}
	return append(dst, x[at:at+width]...)
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// TestAttendLargePriorPrecisionPins checks MATH.md §7 on the graph:
// θ_ξ = θ_μ = 1e12 keep ξ and μ at ξ⁰ and μ⁰ (read from the adapted
// mixture) while θ ≈ 0.007 lets them move, and the readout then equals
// that of a layer without key adaptation or propagation of μ.
func TestAttendLargePriorPrecisionPins(t *testing.T) {
	rng := rand.New(rand.NewPCG(14, 1))
	cfg := Config{KeyIters: 3, PropagateIters: 3, ValueIters: 1, AdaptAlpha: true, AdaptBeta: true, AdaptPi: true}
	for trial := range 3 {
		p := randomBatch(rng, 2, 2, 3+rng.IntN(3), 2+rng.IntN(3), 1+rng.IntN(3), 1+rng.IntN(3), true, true)
		for i := range p.annotated {
			p.annotated[i] = 1 // S is every real query unit, so μ would move
		}
		for b := range p.B {
			p.queryMask[b*p.N] = 1 // something must pull
		}
		for _, tc := range []struct {
			raw    float64
			pinned bool
		}{{raw: 1e12, pinned: true}, {raw: -5, pinned: false}} {
			for h := range p.raw {
				p.raw[h].ThetaXi, p.raw[h].ThetaMu = tc.raw, tc.raw
			}
			got := p.run(t, graph.Float64, cfg)
			xiShift := maxMaskedShift(got.xi, p.k, p.keyMask, p, p.d)
			muShift := maxMaskedShift(got.mu, p.v, p.keyMask, p, p.m)
			if tc.pinned && (xiShift > 1e-10 || muShift > 1e-10) {
				t.Errorf("trial %d, θ = softplus(%g): ξ moved %g, μ moved %g", trial, tc.raw, xiShift, muShift)
			}
			if !tc.pinned && (xiShift < 1e-3 || muShift < 1e-3) {
				t.Errorf("trial %d, θ = softplus(%g): ξ moved %g, μ moved %g, want ≥ 1e-3", trial, tc.raw, xiShift, muShift)
			}
		}
	}
}

// maxMaskedShift returns max |a − b| over the real memory units of
// [B, H, M, width] tensors.
func maxMaskedShift(a, b, keyMask []float64, p *batch, width int) float64 {
	var worst float64
	for i := range a {
		unit := i / width
		if !isReal(keyMask, unit/(p.H*p.M), p.M, unit%p.M) {
			continue
		}
		worst = math.Max(worst, math.Abs(a[i]-b[i]))
	}
	return worst
}

// TestFloat32AgreesWithFloat64 runs a moderate layer with every update on
// in a float32 graph and a float64 graph: the readouts, weights and
// adapted keys and values agree to 1e-4 of their scale, and the gradients
// with respect to the priors to 1e-3 of their norm.
func TestFloat32AgreesWithFloat64(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 1))
	cfg := Config{KeyIters: 2, PropagateIters: 2, ValueIters: 2, AdaptAlpha: true, AdaptBeta: true, AdaptPi: true}
	p := randomBatch(rng, 2, 2, 12, 8, 8, 4, true, true)
	for h := range p.raw {
		p.raw[h] = DefaultRawParams(p.d)
	}
	p.raw[1].BAlpha, p.raw[1].ThetaXi = 0.5, 0.5 // a second head with other priors
	want := p.run(t, graph.Float64, cfg)
	got := p.run(t, graph.Float32, cfg)
	for _, f := range []struct {
		name      string
		got, want []float64
	}{{"readout", got.readout, want.readout}, {"weights", got.weights, want.weights}, {"ξ", got.xi, want.xi}, {"μ", got.mu, want.mu}} {
		var scale, worst float64
		for i := range f.want {
			scale = math.Max(scale, math.Abs(f.want[i]))
			worst = math.Max(worst, math.Abs(f.got[i]-f.want[i]))
		}
		t.Logf("%s: float32 − float64 ≤ %.2g of scale %.3g", f.name, worst/scale, scale)
		if worst > 1e-4*scale {
			t.Errorf("%s: float32 differs from float64 by %g (scale %g)", f.name, worst, scale)
		}
	}

	// The gradients of Σ readout ⊙ R with respect to every prior agree
	// too, to 1e-3 of their norm.
	r := normals(rng, p.B*p.H*p.N*p.m, 1)
	grads := map[graph.DType]map[string][]float64{}
	for _, dt := range []graph.DType{graph.Float32, graph.Float64} {
		ps := graph.NewParams(dt, 1)
		prog, err := graph.Compile(ps, func(b *graph.Builder) error {
			q, k, v, keyMask, ex := p.nodes(b, false)
			res, err := Attend(b, "att", cfg, q, k, v, keyMask, ex)
			if err != nil {
				return err
			}
			b.SetLoss(graph.Sum(graph.Mul(res.Readout, b.Constant("r", []int{p.B, p.H, p.N, p.m}, r))))
			return nil
		}, true)
		if err != nil {
			t.Fatal(err)
		}
		p.setRaw(t, ps)
		if err := prog.Run(); err != nil {
			t.Fatal(err)
		}
		if grads[dt], err = prog.Gradients(); err != nil {
			t.Fatal(err)
		}
	}
	if len(grads[graph.Float64]) != len(headFields) {
		t.Fatalf("%d gradients, want %d", len(grads[graph.Float64]), len(headFields))
	}
	for name, want := range grads[graph.Float64] {
		var norm, diff float64
		for i, g := range grads[graph.Float32][name] {
			norm += want[i] * want[i]
			diff += (g - want[i]) * (g - want[i])
		}
		t.Logf("gradient of %s: float32 − float64 = %.2g of its norm", name, math.Sqrt(diff/norm))
		if math.Sqrt(diff) > 1e-3*math.Sqrt(norm) {
			t.Errorf("gradient of %s: float32 differs from float64 by %g (norm %g)", name, math.Sqrt(diff), math.Sqrt(norm))
		}
	}
}

// TestKernelIsAttend checks that Kernel has the layers.Kernel method set
// and computes Attend without extras.
func TestKernelIsAttend(t *testing.T) {
	var _ interface {
		Attend(b *graph.Builder, name string, q, k, v, keyMask *graph.Node) (out, weights *graph.Node)
	} = Kernel{}
	cfg := Config{KeyIters: 1, ValueIters: 1, AdaptAlpha: true}
	kernel, err := NewKernel(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := randomBatch(rand.New(rand.NewPCG(16, 1)), 2, 2, 3, 4, 2, 2, true, false)
	p.queryMask = nil
	want := p.run(t, graph.Float64, cfg)
	ps := graph.NewParams(graph.Float64, 1)
	prog, err := graph.Compile(ps, func(b *graph.Builder) error {
		q, k, v, keyMask, _ := p.nodes(b, false)
		out, weights := kernel.Attend(b, "att", q, k, v, keyMask)
		b.Output("readout", out)
		b.Output("weights", weights)
		return nil
	}, false)
	if err != nil {
		t.Fatal(err)
	}
	p.setRaw(t, ps)
	if err := prog.Run(); err != nil {
		t.Fatal(err)
	}
	readout, _, _ := prog.Output("readout")
	weights, _, _ := prog.Output("weights")
	assertClose(t, "readout", readout, want.readout, 0)
	assertClose(t, "weights", weights, want.weights, 0)
}

// TestAttendRejectsBadInputs checks the errors of Attend, NewKernel and a
// Kernel built without NewKernel (reported by graph.Compile).
func TestAttendRejectsBadInputs(t *testing.T) {
	for _, cfg := range []Config{{KeyIters: -1}, {ValueIters: -2}, {Prior: Prior(7)}} {
		if _, err := NewKernel(cfg); err == nil {
			t.Errorf("NewKernel(%+v): no error", cfg)
		}
	}
	cases := []struct {
		name string
		cfg  Config
		edit func(b *graph.Builder, q, k, v, keyMask **graph.Node, ex *Extras)
		want string
	}{
		{"3-D q", Config{}, func(b *graph.Builder, q, _, _, _ **graph.Node, _ *Extras) {
			*q = b.Constant("q3", []int{2, 3, 2}, make([]float64, 12))
		}, "4-D"},
		{"key dims differ", Config{}, func(b *graph.Builder, _, k, _, _ **graph.Node, _ *Extras) {
			*k = b.Constant("k3", []int{2, 2, 4, 3}, make([]float64, 48))
		}, "do not fit"},
		{"value units differ", Config{}, func(b *graph.Builder, _, _, v, _ **graph.Node, _ *Extras) {
			*v = b.Constant("v5", []int{2, 2, 5, 2}, make([]float64, 40))
		}, "do not fit"},
		{"key mask", Config{}, func(b *graph.Builder, _, _, _, keyMask **graph.Node, _ *Extras) {
			*keyMask = b.Constant("km", []int{2, 3}, make([]float64, 6))
		}, "key mask"},
		{"query mask", Config{}, func(b *graph.Builder, _, _, _, _ **graph.Node, ex *Extras) {
			ex.QueryMask = b.Constant("qm", []int{3}, make([]float64, 3))
		}, "query mask"},
		{"values without mask", Config{}, func(b *graph.Builder, _, _, _, _ **graph.Node, ex *Extras) {
			ex.Annotated = nil
		}, "together"},
		{"annotated values", Config{}, func(b *graph.Builder, _, _, _, _ **graph.Node, ex *Extras) {
			ex.Values = b.Constant("vals", []int{2, 2, 3, 3}, make([]float64, 36))
		}, "annotated values"},
		{"logits for the linked prior", Config{}, func(b *graph.Builder, _, _, _, _ **graph.Node, ex *Extras) {
			ex.PiLogits = b.Constant("logits", []int{2, 2, 4}, make([]float64, 16))
		}, "linked"},
		{"negative iterations", Config{PropagateIters: -1}, func(*graph.Builder, **graph.Node, **graph.Node, **graph.Node, **graph.Node, *Extras) {}, "negative"},
	}
	p := randomBatch(rand.New(rand.NewPCG(17, 1)), 2, 2, 3, 4, 2, 2, true, true)
	for _, tc := range cases {
		_, err := graph.Compile(graph.NewParams(graph.Float64, 1), func(b *graph.Builder) error {
			q, k, v, keyMask, ex := p.nodes(b, false)
			tc.edit(b, &q, &k, &v, &keyMask, ex)
			_, err := Attend(b, "att", tc.cfg, q, k, v, keyMask, ex)
			return err
		}, false)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
	_, err := graph.Compile(graph.NewParams(graph.Float64, 1), func(b *graph.Builder) error {
		q, k, v, keyMask, _ := p.nodes(b, false)
		Kernel{Config: Config{Prior: Prior(9)}}.Attend(b, "att", q, k, v, keyMask)
		return nil
	}, false)
	if err == nil || !strings.Contains(err.Error(), "unknown prior") {
		t.Errorf("kernel with a bad config: error %v", err)
	}
}
