package layers

import (
	"fmt"
	"github.com/probformer/probformer/graph/graphtest"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/probformer/probformer/graph"
)

// bayesMaskCase is a masking layout of the fused-versus-composed tests.
type bayesMaskCase struct {
	name                  string
	keys, queries, causal bool
}

var bayesMaskCases = []bayesMaskCase{
	{"none", false, false, false},
	{"keys", true, false, false},
	{"queries", false, true, false},
	{"causal", false, false, true},
	{"all", true, true, true},
}

// runBayesLayer builds a training graph of one Bayesian attention layer on
// ps, with q, k, v parameters of the given values, fixed noise and the
// given masks (nil: none), on the fused path or the composed reference,
// runs it once and returns what it computed.
func runBayesLayer(t *testing.T, ps *graph.Params, a BayesAttention, composed, causal bool, bs, n, m, heads, d, dv int,
	q, k, v, noise, keyMask, queryMask, r []float64) graphtest.Result {
	t.Helper()
	init := func(x []float64) graph.Init {
		return func(*rand.Rand, []int) []float64 { return slices.Clone(x) }
	}
	prog, err := graph.Compile(ps, func(b *graph.Builder) error {
		qn := b.Param("q", []int{bs, n, heads * d}, init(q))
		kn := b.Param("k", []int{bs, m, heads * d}, init(k))
		vn := b.Param("v", []int{bs, m, heads * dv}, init(v))
		var mask Mask
		if keyMask != nil {
			mask.Keys = b.Constant("keys", []int{bs, m}, keyMask)
		}
		if queryMask != nil {
			mask.Queries = b.Constant("queries", []int{bs, n}, queryMask)
		}
		mask.Causal = causal
		nz := b.Constant("noise", []int{bs, heads, n, m}, noise)
		var out, kl *graph.Node
		if composed {
			out, _, kl = a.attendComposed(b, "att", "att.bayes", qn, kn, vn, heads, mask, nz, true)
		} else {
			out, kl = a.attend(b, "att", qn, kn, vn, heads, mask, nz, true)
		}
		b.Output("out", out)
		b.Output("kl", kl)
		b.SetLoss(graph.Add(graph.Sum(graph.Mul(out, b.Constant("r", []int{bs, n, heads * dv}, r))), graph.Scale(kl, 0.7)))
		return nil
	}, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := prog.Run(); err != nil {
		t.Fatal(err)
	}
	return graphtest.Run(t, prog, "out", "kl")
}

// bayesNames names the outputs of runBayesLayer in failures.
var bayesNames = map[string]string{"out": "readout", "kl": "KL̄"}

// TestBayesFusedMatchesComposed: the fused path (bayes.go) equals the
// composed reference (bayes_reference.go) to 1e-9 in float64 — readout,
// KL̄ and the gradients of q, k, v and the prior network — for both kinds,
// the contextual and the constant prior, and key, query and causal masks
// alone and together. Every query sees at least one key.
func TestBayesFusedMatchesComposed(t *testing.T) {
	const bs, heads, d, dv = 3, 2, 3, 2
	for _, kind := range []string{KindBayesWeibull, KindBayesLogNormal} {
		for _, prior := range []string{PriorContextual, PriorConstant} {
			for ci, mc := range bayesMaskCases {
				n, m := 4, 5
				if mc.causal {
					n = m
				}
				what := fmt.Sprintf("%s %s %s", kind, prior, mc.name)
				rng := rand.New(rand.NewPCG(uint64(ci), 31))
				q, k, v := randn(rng, bs*n*heads*d), randn(rng, bs*m*heads*d), randn(rng, bs*m*heads*dv)
				for i := range q {
					q[i] *= 1.5
				}
				r := randn(rng, bs*n*heads*dv)
				noise := *fixedNoise(kind, uint64(ci+1), bs*heads*n*m)
				var keyMask, queryMask []float64
				if mc.keys {
					keyMask = []float64{1, 1, 0, 1, 0, 1, 0, 0, 1, 1, 1, 1, 1, 1, 0} // key 0 real
				}
				if mc.queries {
					queryMask = make([]float64, bs*n)
					for i := range queryMask {
						queryMask[i] = float64(min(1, i%3))
					}
				}
				a := bayesKernel(t, AttentionConfig{Kind: kind, K: 3, Sigma: 0.7, Prior: prior, PriorRate: 2, PriorSigma: 1.3})
				run := func(composed bool) graphtest.Result {
					return runBayesLayer(t, graph.NewParams(graph.Float64, 5), a, composed, mc.causal, bs, n, m, heads, d, dv,
						q, k, v, noise, keyMask, queryMask, r)
				}
				fused, ref := run(false), run(true)
				graphtest.ExpectRunsClose(t, what, fused, ref, 1e-9, bayesNames)
				want := 3
				if prior == PriorContextual {
					want += 4
				}
				if len(fused.Grads) != want {
					t.Fatalf("%s: gradients of %d parameters, want %d", what, len(fused.Grads), want)
				}
			}
		}
	}
}

// TestBayesPaddingChangesNothing: padding a batch of sets with masked
// elements (key and query mask, as Set Transformer blocks pass them)
// changes neither KL̄ nor the real elements' readouts nor any gradient,
// on the fused path and on the composed reference, for both kinds.
func TestBayesPaddingChangesNothing(t *testing.T) {
	const bs, real, padded, heads, d, dv = 2, 3, 5, 2, 4, 2
	for _, kind := range []string{KindBayesWeibull, KindBayesLogNormal} {
		for _, composed := range []bool{false, true} {
			what := fmt.Sprintf("%s composed=%v", kind, composed)
			rng := rand.New(rand.NewPCG(8, 8))
			a := bayesKernel(t, AttentionConfig{Kind: kind, K: 4, Sigma: 0.8})
			// the real sets, then the padded copies: rows real… hold
			// random values that the masks must hide
			q, k, v := randn(rng, bs*real*heads*d), randn(rng, bs*real*heads*d), randn(rng, bs*real*heads*dv)
			r := randn(rng, bs*real*heads*dv)
			noise := *fixedNoise(kind, 3, bs*heads*real*real)
			pad := func(x []float64, width int) []float64 {
				out := randn(rng, bs*padded*width)
				for bi := range bs {
					copy(out[bi*padded*width:], x[bi*real*width:(bi+1)*real*width])
				}
				return out
			}
			rPad := make([]float64, bs*padded*heads*dv) // the loss sees the real rows only
			for bi := range bs {
				copy(rPad[bi*padded*heads*dv:], r[bi*real*heads*dv:(bi+1)*real*heads*dv])
			}
			noisePad := randn(rng, bs*heads*padded*padded)
			for i := range noisePad {
				noisePad[i] = 0.02 + 0.96*math.Abs(math.Tanh(noisePad[i])) // a valid u or ε
			}
			for bh := range bs * heads {
				for i := range real {
					copy(noisePad[(bh*padded+i)*padded:], noise[(bh*real+i)*real:(bh*real+i+1)*real])
				}
			}
			mask := make([]float64, bs*padded)
			for bi := range bs {
				for i := range real {
					mask[bi*padded+i] = 1
				}
			}
			want := runBayesLayer(t, graph.NewParams(graph.Float64, 6), a, composed, false, bs, real, real, heads, d, dv,
				q, k, v, noise, nil, nil, r)
			got := runBayesLayer(t, graph.NewParams(graph.Float64, 6), a, composed, false, bs, padded, padded, heads, d, dv,
				pad(q, heads*d), pad(k, heads*d), pad(v, heads*dv), noisePad, mask, mask, rPad)
			// compare the real rows only
			unpad := func(x []float64, width int) []float64 {
				out := make([]float64, 0, bs*real*width)
				for bi := range bs {
					out = append(out, x[bi*padded*width:(bi*padded+real)*width]...)
				}
				return out
			}
			got.Out["out"] = unpad(got.Out["out"], heads*dv)
			for name, width := range map[string]int{"q": heads * d, "k": heads * d, "v": heads * dv} {
				got.Grads[name] = unpad(got.Grads[name], width)
			}
			graphtest.ExpectRunsClose(t, what, got, want, 1e-12, bayesNames)
		}
	}
}
