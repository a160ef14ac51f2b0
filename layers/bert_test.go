package layers

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/probformer/probformer/graph"
)

// bertPair: two pairs of length 6, [CLS] a [SEP] b [SEP] (ids 2 and 3),
// the second ending in padding; id 7 is [MASK].
var (
	bertIDs  = []int{2, 4, 7, 3, 5, 3, 2, 6, 3, 7, 3, 0}
	bertSegs = []int{0, 0, 0, 0, 1, 1, 0, 0, 0, 1, 1, 0}
	bertMask = []float64{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0}
)

func bertInputs(b *graph.Builder) (_ *graph.Builder, ids, segs, mask *graph.Node) {
	return b, b.IndexConstant("ids", []int{2, 6}, bertIDs), b.IndexConstant("segs", []int{2, 6}, bertSegs),
		b.Constant("mask", []int{2, 6}, bertMask)
}

// checkBERTGradients runs the float64 finite-difference check on out and
// requires the named parameters among those checked.
func checkBERTGradients(t *testing.T, name string, seed uint64, out func(b *graph.Builder) *graph.Node, want ...string) {
	t.Helper()
	res, err := graph.CheckGradients(graph.NewParams(graph.Float64, seed), out, graph.GradCheckOptions{Seed: seed})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var names []string
	for _, r := range res {
		names = append(names, r.Param)
	}
	for _, w := range want {
		if !slices.Contains(names, w) {
			t.Errorf("%s: %s not checked (checked %v)", name, w, names)
		}
	}
}

// TestBERTGradients: finite differences in float64 agree with the analytic
// gradients of the segment embeddings (through the MLM logits), of the
// pooler and the NSP classifier (through the NSP logits and through the
// NSP cross-entropy on y), with post-LN and pre-LN encoders.
func TestBERTGradients(t *testing.T) {
	for i, preLN := range []bool{false, true} {
		m := BERT{Config: tinyMLMConfig(preLN)}
		checkBERTGradients(t, "MLM logits", uint64(i+1), func(b *graph.Builder) *graph.Node {
			z := m.Encode(bertInputs(b))
			w, bias := m.MLMHead(b, z)
			return graph.Linear(z, w, bias)
		}, "seg_emb.table", "src_emb.table", "enc.1.ff2.w", "mlm.out.w")
		checkBERTGradients(t, "NSP logits", uint64(i+3), func(b *graph.Builder) *graph.Node {
			return NSPHead(b, m.Encode(bertInputs(b)))
		}, "seg_emb.table", "nsp.pool.w", "nsp.pool.b", "nsp.out.w", "nsp.out.b", "enc.0.ff1.w")
		checkBERTGradients(t, "NSP cross-entropy", uint64(i+5), func(b *graph.Builder) *graph.Node {
			nsp := NSPHead(b, m.Encode(bertInputs(b)))
			y := b.IndexConstant("y", []int{2, 1}, []int{1, 0})
			return graph.SoftmaxCrossEntropy(graph.Reshape(nsp, 2, 1, NSPClasses), y, 0)
		}, "seg_emb.table", "nsp.pool.w", "nsp.pool.b", "nsp.out.w", "nsp.out.b")
	}
}

// TestBERTNSPHeadIsTheLecturesFormula: the NSP logits are W_y tanh(W_s z_0
// + b_s) + b_y on [CLS]'s contextual embedding, computed by hand here.
func TestBERTNSPHeadIsTheLecturesFormula(t *testing.T) {
	params := graph.NewParams(graph.Float64, 9)
	m := BERT{Config: tinyMLMConfig(false)}
	prog, err := graph.Compile(params, func(b *graph.Builder) error {
		z := m.Encode(bertInputs(b))
		b.Output("z", z)
		b.Output("nsp", NSPHead(b, z))
		return nil
	}, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := prog.Run(); err != nil {
		t.Fatal(err)
	}
	z, _, _ := prog.Output("z")
	nsp, _, _ := prog.Output("nsp")
	d := m.Config.DModel
	val := func(name string) []float64 { return params.Lookup(name).Values() }
	ws, bs, wy, by := val("nsp.pool.w"), val("nsp.pool.b"), val("nsp.out.w"), val("nsp.out.b")
	for row := range 2 {
		z0 := z[row*6*d : row*6*d+d]
		pooled := make([]float64, d)
		for j := range d {
			pooled[j] = bs[j]
			for i := range d {
				pooled[j] += z0[i] * ws[i*d+j]
			}
			pooled[j] = math.Tanh(pooled[j])
		}
		for y := range NSPClasses {
			want := by[y]
			for j := range d {
				want += pooled[j] * wy[j*NSPClasses+y]
			}
			if got := nsp[row*NSPClasses+y]; math.Abs(got-want) > 1e-12 {
				t.Errorf("row %d class %d: logit %g, formula %g", row, y, got, want)
			}
		}
	}
}

// TestBERTPaddingExact: pairs padded further, with random ids and segments
// at the extra positions, give the same MLM logits at the real positions,
// the same NSP logits and the same gradients of a loss on those outputs
// for every parameter, to 1e-12 in float64.
func TestBERTPaddingExact(t *testing.T) {
	const ref, padded = 6, 9
	for i, preLN := range []bool{false, true} {
		m := BERT{Config: MaskedLMConfig{DModel: 4, Heads: 2, FF: 6, Layers: 2, PreLN: preLN, Vocab: 7, MaxLen: padded}}
		rng := rand.New(rand.NewPCG(uint64(i), 11))
		ids, segs, mask := bertIDs, bertSegs, bertMask
		// The loss weighs every real MLM logit and the NSP logits.
		wMLM := make([]float64, 2*ref*7)
		for j := range wMLM {
			if bertMask[j/7] == 1 {
				wMLM[j] = rng.NormFloat64()
			}
		}
		wNSP := []float64{rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64()}
		run := func(n int, ids, segs []int, mask, wMLM []float64) (mlm, nsp []float64, grads map[string][]float64) {
			prog, err := graph.Compile(graph.NewParams(graph.Float64, 5), func(b *graph.Builder) error {
				lm, ns := m.Forward(b, b.IndexConstant("ids", []int{2, n}, ids), b.IndexConstant("segs", []int{2, n}, segs),
					b.Constant("mask", []int{2, n}, mask))
				b.Output("mlm", lm)
				b.Output("nsp", ns)
				b.SetLoss(graph.Add(graph.Sum(graph.Mul(lm, b.Constant("wm", []int{2, n, 7}, wMLM))),
					graph.Sum(graph.Mul(ns, b.Constant("wn", []int{2, 2}, wNSP)))))
				return nil
			}, true)
			if err != nil {
				t.Fatal(err)
			}
			if err := prog.Run(); err != nil {
				t.Fatal(err)
			}
			mlm, _, _ = prog.Output("mlm")
			nsp, _, _ = prog.Output("nsp")
			grads, err = prog.Gradients()
			if err != nil {
				t.Fatal(err)
			}
			return mlm, nsp, grads
		}
		mlmRef, nspRef, gRef := run(ref, ids, segs, mask, wMLM)
		// Pad each row from ref to padded positions with junk.
		var pIDs, pSegs []int
		var pMask, pW []float64
		for r := range 2 {
			pIDs = append(pIDs, ids[r*ref:(r+1)*ref]...)
			pSegs = append(pSegs, segs[r*ref:(r+1)*ref]...)
			pMask = append(pMask, mask[r*ref:(r+1)*ref]...)
			pW = append(pW, wMLM[r*ref*7:(r+1)*ref*7]...)
			for range padded - ref {
				pIDs, pSegs = append(pIDs, rng.IntN(8)), append(pSegs, rng.IntN(2))
				pMask = append(pMask, 0)
				pW = append(pW, make([]float64, 7)...)
			}
		}
		mlmPad, nspPad, gPad := run(padded, pIDs, pSegs, pMask, pW)
		for r := range 2 {
			for p := range ref {
				if mask[r*ref+p] == 0 {
					continue
				}
				for v := range 7 {
					a, b := mlmRef[(r*ref+p)*7+v], mlmPad[(r*padded+p)*7+v]
					if math.Abs(a-b) > 1e-12 {
						t.Fatalf("pre-LN %v: MLM logit (%d, %d, %d): %g, padded %g", preLN, r, p, v, a, b)
					}
				}
			}
		}
		for j := range nspRef {
			if math.Abs(nspRef[j]-nspPad[j]) > 1e-12 {
				t.Fatalf("pre-LN %v: NSP logit %d: %g, padded %g", preLN, j, nspRef[j], nspPad[j])
			}
		}
		if len(gRef) != len(gPad) {
			t.Fatalf("%d gradients, padded %d", len(gRef), len(gPad))
		}
		for name, g := range gRef {
			for j := range g {
				if math.Abs(g[j]-gPad[name][j]) > 1e-12 {
					t.Fatalf("pre-LN %v: gradient of %s[%d]: %g, padded %g", preLN, name, j, g[j], gPad[name][j])
				}
			}
		}
		if slices.Equal(nspRef, make([]float64, len(nspRef))) {
			t.Fatal("NSP logits are all zero")
		}
	}
}
