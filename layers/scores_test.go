package layers

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/probformer/probformer/graph"
)

// attendShapes are q [2, 3, 4], k [2, 3, 4], v [2, 3, 6] for H = 2 heads
// of widths d = 2, dv = 3.
var attendShapes = struct{ q, k, v []int }{[]int{2, 3, 4}, []int{2, 3, 4}, []int{2, 3, 6}}

func TestScoredAttentionGradients(t *testing.T) {
	cases := []struct {
		kernel ScoredAttention
		causal bool
	}{
		{ScoredAttention{Score: ScoreDot}, false},
		{ScoredAttention{Score: ScoreDot}, true},
		{ScoredAttention{Score: ScoreBilinear}, false},
		{ScoredAttention{Score: ScoreBilinear}, true},
		{ScoredAttention{Score: ScoreAdditive}, false},
		{ScoredAttention{Score: ScoreAdditive}, true},
		{ScoredAttention{Score: ScoreScaledDot, Relative: 1}, false},
		{ScoredAttention{Score: ScoreScaledDot, Relative: 1}, true},
		{ScoredAttention{Score: ScoreBilinear, Relative: 2}, true},
		{ScoredAttention{Score: ScoreAdditive, Relative: 1}, false},
		{ScoredAttention{Score: ScoreAdditive, Relative: 1}, true},
		{ScoredAttention{Score: ScoreAdditive, Relative: 2}, true},
	}
	for i, c := range cases {
		name := c.kernel.Score
		if c.kernel.Relative > 0 {
			name += fmt.Sprintf("-relative%d", c.kernel.Relative)
		}
		if c.causal {
			name += "-causal"
		}
		t.Run(name, func(t *testing.T) {
			res, err := graph.CheckGradients(graph.NewParams(graph.Float64, uint64(i+1)), func(b *graph.Builder) *graph.Node {
				q := b.Param("q", attendShapes.q, graph.Normal(1))
				k := b.Param("k", attendShapes.k, graph.Normal(1))
				v := b.Param("v", attendShapes.v, graph.Normal(1))
				mask := Mask{Keys: b.Constant("mask", []int{2, 3}, maskBN), Causal: c.causal}
				return c.kernel.Attend(b, "att", q, k, v, 2, mask)
			}, graph.GradCheckOptions{Seed: uint64(i), MaxPerParam: 24})
			if err != nil {
				t.Fatal(err)
			}
			var own []string
			for _, r := range res {
				if strings.HasPrefix(r.Param, "att.") {
					own = append(own, r.Param)
				}
			}
			slices.Sort(own)
			var want []string
			switch c.kernel.Score {
			case ScoreBilinear:
				want = []string{"att.score.w"}
			case ScoreAdditive:
				want = []string{"att.score.u", "att.score.v", "att.score.w"}
			}
			if c.kernel.Relative > 0 {
				want = append(want, "att.rel.k", "att.rel.v")
			}
			slices.Sort(want)
			if !slices.Equal(own, want) {
				t.Fatalf("checked kernel parameters %v, want %v", own, want)
			}
		})
	}
}

// attendOnce runs kernel on fixed q, k, v (q scaled by qScale) with the
// key mask maskBN and returns the readout.
func attendOnce(t *testing.T, ps *graph.Params, kernel Kernel, qScale float64, causal bool) []float64 {
	t.Helper()
	rng := rand.New(rand.NewPCG(7, 7))
	q, k, v := randn(rng, 24), randn(rng, 24), randn(rng, 36)
	for i := range q {
		q[i] *= qScale
	}
	return evaluate(t, ps, func(b *graph.Builder) error {
		mask := Mask{Keys: b.Constant("mask", []int{2, 3}, maskBN), Causal: causal}
		b.Output("out", kernel.Attend(b, "att",
			b.Constant("q", attendShapes.q, q), b.Constant("k", attendShapes.k, k),
			b.Constant("v", attendShapes.v, v), 2, mask))
		return nil
	}, "out")[0]
}

func assertClose(t *testing.T, what string, got, want []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range got {
		if math.Abs(got[i]-want[i]) > tol {
			t.Fatalf("%s: value %d is %.17g, want %.17g", what, i, got[i], want[i])
		}
	}
}

// TestScoresAgree: the composed scaled_dot path equals the fused
// graph.Attention; dot is scaled_dot without the 1/√d (d = 2); bilinear
// starts at W = I/√d, which is scaled_dot; and zero relative tables add
// nothing.
func TestScoresAgree(t *testing.T) {
	for _, causal := range []bool{false, true} {
		ps := graph.NewParams(graph.Float64, 5)
		fused := attendOnce(t, ps, ScaledDotProduct{}, 1, causal)
		composed := attendOnce(t, ps, ScoredAttention{Score: ScoreScaledDot}, 1, causal)
		assertClose(t, "composed scaled_dot vs graph.Attention", composed, fused, 1e-12)
		dot := attendOnce(t, ps, ScoredAttention{Score: ScoreDot}, 1/math.Sqrt2, causal)
		assertClose(t, "dot(q/√d) vs scaled_dot(q)", dot, fused, 1e-12)
		scaled := attendOnce(t, ps, ScaledDotProduct{}, math.Sqrt2, causal)
		unscaled := attendOnce(t, ps, ScoredAttention{Score: ScoreDot}, 1, causal)
		assertClose(t, "dot(q) vs scaled_dot(√d·q)", unscaled, scaled, 1e-12)
		bilinear := attendOnce(t, ps, ScoredAttention{Score: ScoreBilinear}, 1, causal)
		assertClose(t, "bilinear at W = I/√d vs scaled_dot", bilinear, fused, 1e-12)
		if slices.Equal(dot, attendOnce(t, ps, ScoredAttention{Score: ScoreDot}, 1, causal)) {
			t.Fatal("dot does not depend on the scale of q")
		}

		rel := ScoredAttention{Score: ScoreScaledDot, Relative: 2}
		zeroTables(t, ps, rel, causal)
		assertClose(t, "relative positions with zero tables vs graph.Attention", attendOnce(t, ps, rel, 1, causal), fused, 1e-12)

		// Additive's score.w [H, d] is not bilinear's [H, d, d].
		ps = graph.NewParams(graph.Float64, 6)
		additive := attendOnce(t, ps, ScoredAttention{Score: ScoreAdditive}, 1, causal)
		rel = ScoredAttention{Score: ScoreAdditive, Relative: 2}
		zeroTables(t, ps, rel, causal)
		assertClose(t, "additive with zero relative tables vs additive", attendOnce(t, ps, rel, 1, causal), additive, 1e-12)
		if nonzero := attendOnce(t, graph.NewParams(graph.Float64, 6), rel, 1, causal); slices.Equal(nonzero, additive) {
			t.Fatal("additive relative tables change nothing")
		}
	}
}

// zeroTables creates the relative tables of kernel in ps and sets them
// to 0.
func zeroTables(t *testing.T, ps *graph.Params, kernel ScoredAttention, causal bool) {
	t.Helper()
	attendOnce(t, ps, kernel, 1, causal)
	for _, name := range []string{"att.rel.k", "att.rel.v"} {
		p := ps.Lookup(name)
		if err := p.SetValues(make([]float64, len(p.Values()))); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRelativeMatchesReference compares relative-position attention
// (Shaw et al. 2018 eq. 3–5) with the scaled_dot and additive scores
// against a direct loop over heads, queries and keys, with the key mask
// maskBN and with and without the causal mask.
func TestRelativeMatchesReference(t *testing.T) {
	const bs, n, heads, d, dv, clip = 2, 3, 2, 2, 3, 1
	const da = d // width of the additive score's hidden layer
	rows := 2*clip + 1
	for _, score := range []string{ScoreScaledDot, ScoreAdditive} {
		for _, causal := range []bool{false, true} {
			ps := graph.NewParams(graph.Float64, 8)
			kernel := ScoredAttention{Score: score, Relative: clip}
			got := attendOnce(t, ps, kernel, 1, causal)
			wk, wv := ps.Lookup("att.rel.k").Values(), ps.Lookup("att.rel.v").Values()
			rng := rand.New(rand.NewPCG(7, 7)) // attendOnce's inputs
			q, k, v := randn(rng, 24), randn(rng, 24), randn(rng, 36)
			if len(wk) != rows*d || len(wv) != rows*dv {
				t.Fatalf("tables have %d and %d values, want %d and %d", len(wk), len(wv), rows*d, rows*dv)
			}
			// a(q, k) for head h, query (b, i) and the key vector key [d].
			a := func(h, b, i int, key []float64) float64 {
				qv := q[(b*n+i)*heads*d+h*d:][:d]
				if score == ScoreScaledDot {
					var s float64
					for c := range d {
						s += qv[c] * key[c]
					}
					return s / math.Sqrt(d)
				}
				// wᵀ tanh(U q + V key), U, V [H, d, d_a], w [H, d_a].
				u, vw, w := ps.Lookup("att.score.u").Values(), ps.Lookup("att.score.v").Values(), ps.Lookup("att.score.w").Values()
				var s float64
				for c := range da {
					var pre float64
					for e := range d {
						pre += qv[e]*u[(h*d+e)*da+c] + key[e]*vw[(h*d+e)*da+c]
					}
					s += w[h*da+c] * math.Tanh(pre)
				}
				return s
			}
			for b := range bs {
				for h := range heads {
					for i := range n {
						w := make([]float64, n)
						var z float64
						for j := range n {
							if maskBN[b*n+j] == 0 || causal && j > i {
								continue
							}
							r := max(min(j-i, clip), -clip) + clip
							key := make([]float64, d)
							for c := range d {
								key[c] = k[(b*n+j)*heads*d+h*d+c] + wk[r*d+c]
							}
							w[j] = math.Exp(a(h, b, i, key))
							z += w[j]
						}
						for c := range dv {
							var want float64
							for j := range n {
								r := max(min(j-i, clip), -clip) + clip
								want += w[j] / z * (v[(b*n+j)*heads*dv+h*dv+c] + wv[r*dv+c])
							}
							if g := got[(b*n+i)*heads*dv+h*dv+c]; math.Abs(g-want) > 1e-13 {
								t.Fatalf("%s causal=%v: out[%d, %d, head %d, %d] = %.17g, want %.17g", score, causal, b, i, h, c, g, want)
							}
						}
					}
				}
			}
		}
	}
}

func TestNewKernelScores(t *testing.T) {
	cases := []struct {
		cfg      AttentionConfig
		kernel   Kernel // of NewKernel
		self     Kernel // of SelfAttentionKernel
		errorful bool
	}{
		{cfg: AttentionConfig{}, kernel: ScaledDotProduct{}, self: ScaledDotProduct{}},
		{cfg: AttentionConfig{Kind: "softmax", Score: "scaled_dot"}, kernel: ScaledDotProduct{}, self: ScaledDotProduct{}},
		{cfg: AttentionConfig{Score: "dot"}, kernel: ScoredAttention{Score: "dot"}, self: ScoredAttention{Score: "dot"}},
		{cfg: AttentionConfig{Score: "bilinear"}, kernel: ScoredAttention{Score: "bilinear"}, self: ScoredAttention{Score: "bilinear"}},
		{cfg: AttentionConfig{Score: "additive"}, kernel: ScoredAttention{Score: "additive"}, self: ScoredAttention{Score: "additive"}},
		{cfg: AttentionConfig{RelativePositions: 4}, kernel: ScaledDotProduct{}, self: ScoredAttention{Score: "scaled_dot", Relative: 4}},
		{cfg: AttentionConfig{Score: "bilinear", RelativePositions: 2}, kernel: ScoredAttention{Score: "bilinear"},
			self: ScoredAttention{Score: "bilinear", Relative: 2}},
		{cfg: AttentionConfig{Score: "additive", RelativePositions: 2}, kernel: ScoredAttention{Score: "additive"},
			self: ScoredAttention{Score: "additive", Relative: 2}},
		{cfg: AttentionConfig{Score: "cosine"}, errorful: true},
		{cfg: AttentionConfig{RelativePositions: -1}, errorful: true},
		{cfg: AttentionConfig{Kind: "em", Score: "bilinear"}, errorful: true},
		{cfg: AttentionConfig{Kind: "em", RelativePositions: 3}, errorful: true},
	}
	for _, c := range cases {
		kernel, err := NewKernel(c.cfg)
		self, selfErr := SelfAttentionKernel(c.cfg)
		if c.errorful {
			if err == nil || selfErr == nil {
				t.Errorf("%+v accepted", c.cfg)
			}
			continue
		}
		if err != nil || selfErr != nil {
			t.Errorf("%+v: %v, %v", c.cfg, err, selfErr)
			continue
		}
		if kernel != c.kernel || self != c.self {
			t.Errorf("%+v: kernels %#v and %#v, want %#v and %#v", c.cfg, kernel, self, c.kernel, c.self)
		}
	}
}

// TestSeq2SeqScores: every score and relative positions build into the
// Seq2Seq model, with the kernel parameters in self- and cross-attention
// and the relative tables in self-attention only; a model trains through
// them (one gradient check of the relative and bilinear variant).
func TestSeq2SeqScores(t *testing.T) {
	for _, att := range []AttentionConfig{{Score: "dot"}, {Score: "bilinear", RelativePositions: 2}, {Score: "additive"},
		{Score: "additive", RelativePositions: 1}} {
		cfg := tinyConfig(true)
		cfg.DecLayers = 1
		cfg.Attention = att
		ps := graph.NewParams(graph.Float32, 1)
		prog, err := graph.Compile(ps, seq2seqBuild(cfg, 2, 4, 3), false)
		if err != nil {
			t.Fatalf("%+v: %v", att, err)
		}
		logits := runSeq2Seq(t, prog, []int{4, 5, 6, 4, 5, 4, 0, 0}, srcMaskBS, []int{2, 4, 0, 2, 5, 4}, tgtMaskBT)
		for _, v := range logits {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				t.Fatalf("%+v: non-finite logits", att)
			}
		}
		// The decoder stays causal: a new last target token leaves the
		// logits of the earlier positions [B, T = 3, V = 6] unchanged.
		changed := runSeq2Seq(t, prog, []int{4, 5, 6, 4, 5, 4, 0, 0}, srcMaskBS, []int{2, 4, 3, 2, 5, 1}, tgtMaskBT)
		for row := range 2 {
			if a, c := logits[row*18:row*18+12], changed[row*18:row*18+12]; !slices.Equal(a, c) {
				t.Errorf("%+v: changing the last target token changed earlier logits", att)
			}
			if slices.Equal(logits[row*18+12:row*18+18], changed[row*18+12:row*18+18]) {
				t.Errorf("%+v: changing the last target token left its logits unchanged", att)
			}
		}
		for _, layer := range []string{"enc.0.self", "dec.0.self", "dec.0.cross"} {
			scoreParam := ps.Lookup(layer+".score.w") != nil
			if scoreParam != (att.Score != "dot") {
				t.Errorf("%+v: %s has score parameters: %v", att, layer, scoreParam)
			}
			rel := ps.Lookup(layer+".rel.k") != nil
			if want := att.RelativePositions > 0 && layer != "dec.0.cross"; rel != want {
				t.Errorf("%+v: %s has relative tables: %v, want %v", att, layer, rel, want)
			}
		}
	}
	cfg := tinyConfig(false)
	cfg.DecLayers, cfg.Dropout = 1, 0
	cfg.Attention = AttentionConfig{Score: "bilinear", RelativePositions: 1}
	_, err := graph.CheckGradients(graph.NewParams(graph.Float64, 2), func(b *graph.Builder) *graph.Node {
		return Seq2Seq{Config: cfg}.Forward(b,
			b.IndexConstant("src", []int{2, 4}, []int{4, 5, 6, 4, 5, 4, 0, 0}),
			b.Constant("src_mask", []int{2, 4}, srcMaskBS),
			b.IndexConstant("tgt_in", []int{2, 3}, []int{2, 4, 0, 2, 5, 4}),
			b.Constant("tgt_mask", []int{2, 3}, tgtMaskBT))
	}, graph.GradCheckOptions{MaxPerParam: 4})
	if err != nil {
		t.Fatal(err)
	}
}

// TestScoredWeights: the weights of the composed scaled_dot path equal
// graph.AttentionWeights, and Seq2Seq.CrossAttention builds for a bilinear
// model with relative positions, each row summing to 1.
func TestScoredWeights(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	q, k, v := randn(rng, 24), randn(rng, 24), randn(rng, 36)
	for _, causal := range []bool{false, true} {
		var got [2][]float64
		for i, kernel := range []WeightsKernel{ScaledDotProduct{}, ScoredAttention{Score: ScoreScaledDot}} {
			var shape []int
			got[i] = evaluate(t, graph.NewParams(graph.Float64, 1), func(b *graph.Builder) error {
				mask := Mask{Keys: b.Constant("mask", []int{2, 3}, maskBN), Causal: causal}
				qn, kn, vn := b.Constant("q", attendShapes.q, q), b.Constant("k", attendShapes.k, k), b.Constant("v", attendShapes.v, v)
				b.Output("out", kernel.Attend(b, "att", qn, kn, vn, 2, mask))
				w := kernel.Weights(b, "att", qn, kn, vn, 2, mask)
				shape = graph.Shape(w)
				b.Output("weights", w)
				return nil
			}, "weights")[0]
			if !slices.Equal(shape, []int{2, 2, 3, 3}) {
				t.Fatalf("weights have shape %v, want [2 2 3 3]", shape)
			}
		}
		assertClose(t, "composed weights vs graph.AttentionWeights", got[1], got[0], 1e-12)
	}

	cfg := tinyConfig(false)
	cfg.Attention = AttentionConfig{Score: ScoreBilinear, RelativePositions: 2}
	prog, err := graph.Compile(graph.NewParams(graph.Float64, 3), crossAttentionBuild(cfg, 2, 4, 3, 1), false)
	if err != nil {
		t.Fatal(err)
	}
	for name, ids := range map[string][]int{"src": {4, 5, 6, 4, 5, 4, 0, 0}, "tgt_in": {2, 4, 0, 2, 5, 4}} {
		if err := prog.FeedIndices(name, ids); err != nil {
			t.Fatal(err)
		}
	}
	for name, mask := range map[string][]float64{"src_mask": srcMaskBS, "tgt_mask": tgtMaskBT} {
		if err := prog.Feed(name, mask); err != nil {
			t.Fatal(err)
		}
	}
	if err := prog.Run(); err != nil {
		t.Fatal(err)
	}
	w, _, _ := prog.Output("weights") // [B = 2, H = 2, T = 3, S = 4]
	for row := 0; row < len(w); row += 4 {
		if s := w[row] + w[row+1] + w[row+2] + w[row+3]; math.Abs(s-1) > 1e-12 {
			t.Fatalf("cross-attention row %d sums to %v", row/4, s)
		}
	}
}
