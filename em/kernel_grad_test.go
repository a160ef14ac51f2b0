package em

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/probformer/probformer/graph"
)

// TestAttendGradients checks MATH.md §7 on the graph: the gradient of a
// scalar of the readout through two unrolled iterations of every phase,
// with respect to every prior hyperparameter, the free prior's logits and
// q, k, v and the annotated values, matches central finite differences in
// float64 (graph.CheckGradients, relative error ≤ 1e-6).
func TestAttendGradients(t *testing.T) {
	all := Config{KeyIters: 2, PropagateIters: 2, ValueIters: 2, AdaptAlpha: true, AdaptBeta: true, AdaptPi: true}
	freeAll := all
	freeAll.Prior = FreePrior
	layer := func(fields ...string) []string {
		names := make([]string, len(fields))
		for i, f := range fields {
			names[i] = ParamName("att", f)
		}
		return names
	}
	cases := []struct {
		name    string
		cfg     Config
		masks   bool
		piInput bool
		want    []string // parameters that must be checked
		noS     bool     // no annotated units
	}{
		{"every update, linked prior, masks", all, true, false, append(layer(headFields...), "q", "k", "v", "values"), false},
		{"every update, learned free prior", freeAll, true, false, layer(append(slices.Clone(headFields), paramPiLogits)...), false},
		{"every update, free prior input, no masks", freeAll, false, true, append(layer(headFields...), "pi_logits"), false},
		{"no optional update", Config{KeyIters: 2, PropagateIters: 2, ValueIters: 2}, true, false,
			layer(paramThetaXi, paramThetaMu, paramAlpha0, paramBeta0), false},
		// β⁰ reaches two propagation iterations unchanged while π adapts:
		// the case where the composed graph's gradient of β⁰ was wrong.
		{"π without β, T=2", Config{PropagateIters: 2, AdaptPi: true}, true, false,
			layer(paramThetaMu, paramThetaPi, paramAlpha0, paramBeta0), false},
		{"π without β, T=2, free prior input", Config{PropagateIters: 2, AdaptPi: true, Prior: FreePrior}, true, true,
			append(layer(paramThetaMu, paramThetaPi, paramAlpha0, paramBeta0), "pi_logits"), false},
		{"no iterations", Config{}, true, false, layer(paramAlpha0, paramBeta0), true},
		{"keys T=1", Config{KeyIters: 1}, true, false, layer(paramThetaXi, paramAlpha0, paramBeta0), true},
		{"keys T=3 α", Config{KeyIters: 3, AdaptAlpha: true}, true, false,
			layer(paramThetaXi, paramAAlpha, paramBAlpha, paramAlpha0, paramBeta0), true},
		{"propagation T=1 β π, values T=1", Config{PropagateIters: 1, ValueIters: 1, AdaptBeta: true, AdaptPi: true}, true, false,
			layer(paramThetaMu, paramABeta, paramBBeta, paramThetaPi, paramAlpha0, paramBeta0), false},
		{"propagation T=3 β π, no masks", Config{PropagateIters: 3, ValueIters: 1, AdaptBeta: true, AdaptPi: true}, false, false,
			layer(paramThetaMu, paramABeta, paramBBeta, paramThetaPi, paramAlpha0, paramBeta0), false},
		{"values T=1", Config{ValueIters: 1}, true, false, layer(paramAlpha0, paramBeta0), true},
		{"values T=3, free prior input", Config{ValueIters: 3, Prior: FreePrior}, true, true,
			append(layer(paramAlpha0, paramBeta0), "pi_logits"), true},
	}
	rng := rand.New(rand.NewPCG(21, 1))
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := randomBatch(rng, 2, 2, 3, 3, 2, 2, tc.masks, !tc.noS)
			p.piInput = tc.piInput
			for b := range p.B {
				if tc.noS {
					break
				}
				p.annotated[b*p.N] = 1 // every example propagates
				if p.queryMask != nil {
					p.queryMask[b*p.N] = 1
				}
			}
			fn := func(b *graph.Builder) *graph.Node {
				q, k, v, keyMask, ex := p.nodes(b, true)
				res, err := Attend(b, "att", tc.cfg, q, k, v, keyMask, ex)
				if err != nil {
					panic(err) // graph.Compile reports it
				}
				return res.Readout
			}
			ps := graph.NewParams(graph.Float64, 1)
			// A first compile creates the parameters, so that the problem's
			// raw hyperparameters can be written into them.
			if _, err := graph.Compile(ps, func(b *graph.Builder) error { b.Output("out", fn(b)); return nil }, false); err != nil {
				t.Fatal(err)
			}
			p.setRaw(t, ps)
			res, err := graph.CheckGradients(ps, fn, graph.GradCheckOptions{Seed: uint64(i), MaxPerParam: 6})
			if err != nil {
				t.Fatal(err)
			}
			checked := map[string]bool{}
			for _, r := range res {
				checked[r.Param] = true
			}
			for _, name := range tc.want {
				if !checked[name] {
					t.Errorf("parameter %s was not checked (checked: %v)", name, res)
				}
			}
			if len(res) != len(ps.List()) {
				t.Errorf("%d of %d parameters checked", len(res), len(ps.List()))
			}
		})
	}
}
