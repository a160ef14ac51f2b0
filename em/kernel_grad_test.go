package em

import (
	"math/rand/v2"
	"slices"
	"testing"

	"probformer/graph"
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
	}{
		{"every update, linked prior, masks", all, true, false, append(layer(headFields...), "q", "k", "v", "values")},
		{"every update, learned free prior", freeAll, true, false, layer(append(slices.Clone(headFields), paramPiLogits)...)},
		{"every update, free prior input, no masks", freeAll, false, true, append(layer(headFields...), "pi_logits")},
		{"no optional update", Config{KeyIters: 2, PropagateIters: 2, ValueIters: 2}, true, false,
			layer(paramThetaXi, paramThetaMu, paramAlpha0, paramBeta0)},
	}
	rng := rand.New(rand.NewPCG(21, 1))
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := randomBatch(rng, 2, 2, 3, 3, 2, 2, tc.masks, true)
			p.piInput = tc.piInput
			for b := range p.B {
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
