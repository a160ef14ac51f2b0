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

// diversityReference is HeadDiversity by a direct loop: the mean over b, n
// of Σ_{h,h'} (Σ_m w[b,h,n,m] w[b,h',n,m] − δ_hh')², weights [B, H, N, M].
func diversityReference(w []float64, bs, heads, n, m int) float64 {
	var total float64
	for b := range bs {
		for j := range n {
			for h1 := range heads {
				for h2 := range heads {
					var g float64
					for i := range m {
						g += w[((b*heads+h1)*n+j)*m+i] * w[((b*heads+h2)*n+j)*m+i]
					}
					if h1 == h2 {
						g--
					}
					total += g * g
				}
			}
		}
	}
	return total / float64(bs*n)
}

// rowsOf fills weights [B, H, N, M] with row(b, h, n) for each row.
func rowsOf(shape []int, row func(b, h, n int) []float64) []float64 {
	var w []float64
	for b := range shape[0] {
		for h := range shape[1] {
			for n := range shape[2] {
				w = append(w, row(b, h, n)...)
			}
		}
	}
	return w
}

// randomRows are softmax-normalised random rows of width m whose keys
// with mask 0 (if mask is not nil) get weight 0.
func randomRows(rng *rand.Rand, m int, mask []float64) func(b, h, n int) []float64 {
	return func(b, _, _ int) []float64 {
		r := make([]float64, m)
		var z float64
		for i := range r {
			if mask != nil && mask[b*m+i] == 0 {
				continue
			}
			r[i] = math.Exp(2 * rng.NormFloat64())
			z += r[i]
		}
		for i := range r {
			r[i] /= z
		}
		return r
	}
}

func oneHot(m, at int) []float64 {
	r := make([]float64, m)
	r[at] = 1
	return r
}

func TestHeadDiversityReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 11))
	const h, m = 3, 4
	cases := []struct {
		name  string
		shape []int // [B, H, N, M]
		row   func(b, h, n int) []float64
		want  float64 // exact value, or NaN to use the reference loop only
	}{
		{"random", []int{2, h, 3, m}, randomRows(rng, m, nil), math.NaN()},
		{"random-masked-keys", []int{2, h, 3, m}, randomRows(rng, m, []float64{1, 1, 1, 0, 1, 0, 1, 0}), math.NaN()},
		{"one-head", []int{2, 1, 3, m}, randomRows(rng, m, nil), math.NaN()},
		// Heads attend to different single keys: A Aᵀ = I.
		{"orthogonal-one-hot", []int{2, h, 3, m}, func(b, hd, n int) []float64 { return oneHot(m, (b+hd+n)%m) }, 0},
		// All heads uniform: A Aᵀ = (1/M) 11ᵀ, so ‖A Aᵀ − I‖² = H(1/M − 1)² + (H² − H)/M².
		{"identical-uniform", []int{2, h, 3, m}, func(int, int, int) []float64 { return []float64{.25, .25, .25, .25} },
			h*(0.25-1)*(0.25-1) + (h*h-h)*0.25*0.25},
		// All heads on one key: A Aᵀ = 11ᵀ, so H² − H.
		{"identical-one-hot", []int{2, h, 3, m}, func(b, _, n int) []float64 { return oneHot(m, (b+n)%m) }, h*h - h},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := rowsOf(c.shape, c.row)
			got := evalScalar(t, func(b *graph.Builder) *graph.Node {
				return HeadDiversity(b, "att", b.Constant("w", c.shape, w), nil)
			})
			want := diversityReference(w, c.shape[0], c.shape[1], c.shape[2], c.shape[3])
			if !math.IsNaN(c.want) && math.Abs(want-c.want) > 1e-15 {
				t.Fatalf("reference loop gives %.17g, want %.17g", want, c.want)
			}
			if math.Abs(got-want) > 1e-15*math.Max(1, math.Abs(want)) {
				t.Fatalf("P = %.17g, want %.17g", got, want)
			}
			if c.want == 0 && got != 0 {
				t.Fatalf("P = %.17g, want exactly 0", got)
			}
		})
	}
}

// TestHeadDiversityGradients checks P of softmax-normalised weights
// against finite differences of the logits, with a masked key.
func TestHeadDiversityGradients(t *testing.T) {
	_, err := graph.CheckGradients(graph.NewParams(graph.Float64, 3), func(b *graph.Builder) *graph.Node {
		logits := b.Param("logits", []int{2, 3, 2, 3}, graph.Normal(1))
		w := graph.MaskedSoftmax(logits, b.Constant("mask", []int{2, 3}, maskBN))
		return HeadDiversity(b, "att", w, nil)
	}, graph.GradCheckOptions{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
}

// diversityKernels are inner kernels for the wrapper tests, on x [2, 3, 4]
// with 2 heads: fused and composed softmax attention (the latter with
// relative positions), EM, and Bayesian attention with fixed noise.
func diversityKernels(t *testing.T) []struct {
	name   string
	inner  WeightsKernel
	causal bool
} {
	bayes := bayesKernel(t, AttentionConfig{Kind: KindBayesWeibull, Prior: PriorConstant})
	bayes.fixed = fixedNoise(KindBayesWeibull, 5, bayesNoiseSize)
	em, err := NewKernel(AttentionConfig{Kind: "em", KeyIters: 1, ValueIters: 1})
	if err != nil {
		t.Fatal(err)
	}
	return []struct {
		name   string
		inner  WeightsKernel
		causal bool
	}{
		{"scaled_dot", ScaledDotProduct{}, false},
		{"scaled_dot-causal", ScaledDotProduct{}, true},
		{"additive-relative-causal", ScoredAttention{Score: ScoreAdditive, Relative: 1}, true},
		{"em", em.(WeightsKernel), false},
		{"bayes-weibull-causal", bayes, true},
	}
}

// penaltyNamed returns the penalty called name, or panics (which Compile
// reports).
func penaltyNamed(b *graph.Builder, name string) *graph.Node {
	for i, n := range b.PenaltyNames() {
		if n == name {
			return b.Penalties()[i]
		}
	}
	panic(fmt.Errorf("no penalty %s among %v", name, b.PenaltyNames()))
}

// diversityLoss is Σ out + P of MultiHeadAttention "att" on x [2, 3, 4]
// (key mask maskBN) without the wrapper: the projections, kernel and
// weights composed by hand. EM builds readout and weights in one pass,
// since its Attend and Weights cannot share a graph.
func diversityLoss(b *graph.Builder, inner WeightsKernel, x *graph.Node, mask Mask) *graph.Node {
	mha := MultiHeadAttention{Name: "att", Dim: 4, Heads: 2, Kernel: inner}
	var out, w *graph.Node
	if em, ok := inner.(EMKernel); ok {
		q, k, v := dense(b, "att.q", x, 4), dense(b, "att.k", x, 4), dense(b, "att.v", x, 4)
		read, weights := em.attend(b, "att", q, k, v, 2, mask, graph.EMReadout|graph.EMWeights)
		out, w = dense(b, "att.o", read, 4), weights
	} else {
		out, w = mha.Forward(b, x, x, mask), mha.Weights(b, x, x, mask)
	}
	return graph.Add(graph.Sum(out), HeadDiversity(b, "att", w, mask.Queries))
}

// TestDiversityKernelGradients checks the gradient of Σ out + P for a
// MultiHeadAttention whose kernel is wrapped, P being the wrapper's
// penalty att.diversity. Forward-only graphs have no penalty, so their
// loss (the finite differences and the forward value the check compares
// with) is composed by hand.
func TestDiversityKernelGradients(t *testing.T) {
	for i, c := range diversityKernels(t) {
		t.Run(c.name, func(t *testing.T) {
			res, err := graph.CheckGradients(graph.NewParams(graph.Float64, uint64(i+20)), func(b *graph.Builder) *graph.Node {
				x := b.Param("x", []int{2, 3, 4}, graph.Normal(1))
				mask := Mask{Keys: b.Constant("mask", []int{2, 3}, maskBN), Causal: c.causal}
				if !b.Training() {
					return diversityLoss(b, c.inner, x, mask)
				}
				mha := MultiHeadAttention{Name: "att", Dim: 4, Heads: 2, Kernel: DiversityKernel{Inner: c.inner}}
				return graph.Add(graph.Sum(mha.Forward(b, x, x, mask)), penaltyNamed(b, "att.diversity"))
			}, graph.GradCheckOptions{Seed: uint64(i), MaxPerParam: 12})
			if err != nil {
				t.Fatal(err)
			}
			checked := map[string]bool{}
			for _, r := range res {
				checked[r.Param] = true
			}
			for _, p := range []string{"x", "att.q.w", "att.k.w", "att.v.w", "att.o.w"} {
				if !checked[p] {
					t.Errorf("parameter %s not checked (checked %v)", p, res)
				}
			}
		})
	}
}

// TestDiversityPenaltyOnlyInTraining: an evaluation graph of a wrapped
// kernel has no penalty and the readout of the unwrapped kernel, bit for
// bit; a training graph has the readout too and the penalty
// att.diversity, equal to the reference loop on the kernel's weights.
func TestDiversityPenaltyOnlyInTraining(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	q, k, v := randn(rng, 24), randn(rng, 24), randn(rng, 36)
	type run struct {
		out, weights []float64
		penalties    map[string]float64
		names        []string
	}
	// attend runs kernel in a training or evaluation graph over ps. A
	// training graph's loss is Σ out plus the penalties.
	attend := func(t *testing.T, ps *graph.Params, kernel Kernel, causal, train bool) run {
		t.Helper()
		var names []string
		prog, err := graph.Compile(ps, func(b *graph.Builder) error {
			mask := Mask{Keys: b.Constant("mask", []int{2, 3}, maskBN), Causal: causal}
			// q is a parameter so that a training graph has one.
			qn := b.Param("q", attendShapes.q, func(*rand.Rand, []int) []float64 { return q })
			kn, vn := b.Constant("k", attendShapes.k, k), b.Constant("v", attendShapes.v, v)
			out := kernel.Attend(b, "att", qn, kn, vn, 2, mask)
			b.Output("out", out)
			names = setLossWithPenalties(b, out)
			return nil
		}, train)
		if err != nil {
			t.Fatal(err)
		}
		if err := prog.Run(); err != nil {
			t.Fatal(err)
		}
		out, _, _ := prog.Output("out")
		return run{out: slices.Clone(out), penalties: prog.PenaltyValues(), names: names}
	}
	for _, c := range diversityKernels(t) {
		t.Run(c.name, func(t *testing.T) {
			ps := graph.NewParams(graph.Float64, 2)
			wrapped := DiversityKernel{Inner: c.inner}
			for _, train := range []bool{false, true} {
				plain := attend(t, ps, c.inner, c.causal, train)
				got := attend(t, ps, wrapped, c.causal, train)
				if !slices.Equal(got.out, plain.out) {
					t.Fatalf("training %v: wrapped readout %v, unwrapped %v", train, got.out, plain.out)
				}
				if slices.ContainsFunc(plain.names, func(n string) bool { return strings.HasSuffix(n, ".diversity") }) {
					t.Fatalf("unwrapped kernel records %v", plain.names)
				}
				// The wrapper adds att.diversity to the inner kernel's penalties.
				want := plain.names
				if train {
					want = append(slices.Clone(want), "att.diversity")
				}
				if !slices.Equal(got.names, want) {
					t.Fatalf("training %v: penalties %v, want %v", train, got.names, want)
				}
			}
			// The penalty's value against the reference on the weights.
			weights := evalWeights(t, ps, c.inner, q, k, v, c.causal)
			want := diversityReference(weights, 2, 2, 3, 3)
			got := attend(t, ps, wrapped, c.causal, true).penalties["att.diversity"]
			if math.Abs(got-want) > 1e-13 {
				t.Fatalf("att.diversity = %.17g, want %.17g", got, want)
			}
		})
	}
}

// evalWeights runs kernel.Weights on q, k, v in an evaluation graph over
// ps, q bound as the parameter "q".
func evalWeights(t *testing.T, ps *graph.Params, kernel WeightsKernel, q, k, v []float64, causal bool) []float64 {
	t.Helper()
	return evaluate(t, ps, func(b *graph.Builder) error {
		mask := Mask{Keys: b.Constant("mask", []int{2, 3}, maskBN), Causal: causal}
		qn := b.Param("q", attendShapes.q, func(*rand.Rand, []int) []float64 { return q })
		b.Output("w", kernel.Weights(b, "att", qn, b.Constant("k", attendShapes.k, k), b.Constant("v", attendShapes.v, v), 2, mask))
		return nil
	}, "w")[0]
}

func TestNewKernelDiversity(t *testing.T) {
	em, err := newEMKernel(AttentionConfig{Kind: "em"})
	if err != nil {
		t.Fatal(err)
	}
	bayes, err := newBayesKernel(AttentionConfig{Kind: KindBayesLogNormal})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		cfg      AttentionConfig
		kernel   Kernel // of NewKernel
		self     Kernel // of SelfAttentionKernel
		causal   Kernel // causalKernel(self)
		errorful bool
	}{
		{cfg: AttentionConfig{HeadDiversity: 0}, kernel: ScaledDotProduct{}, self: ScaledDotProduct{}, causal: ScaledDotProduct{}},
		{cfg: AttentionConfig{Kind: "em"}, kernel: em, self: em, causal: ScaledDotProduct{}},
		{cfg: AttentionConfig{HeadDiversity: 0.1}, kernel: DiversityKernel{ScaledDotProduct{}},
			self: DiversityKernel{ScaledDotProduct{}}, causal: DiversityKernel{ScaledDotProduct{}}},
		{cfg: AttentionConfig{Score: ScoreAdditive, RelativePositions: 2, HeadDiversity: 1},
			kernel: DiversityKernel{ScoredAttention{Score: ScoreAdditive}},
			self:   DiversityKernel{ScoredAttention{Score: ScoreAdditive, Relative: 2}},
			causal: DiversityKernel{ScoredAttention{Score: ScoreAdditive, Relative: 2}}},
		{cfg: AttentionConfig{RelativePositions: 3, HeadDiversity: 1}, kernel: DiversityKernel{ScaledDotProduct{}},
			self:   DiversityKernel{ScoredAttention{Score: ScoreScaledDot, Relative: 3}},
			causal: DiversityKernel{ScoredAttention{Score: ScoreScaledDot, Relative: 3}}},
		// EM has no causal form: the decoder's self-attention is softmax,
		// still with the penalty.
		{cfg: AttentionConfig{Kind: "em", HeadDiversity: 0.5}, kernel: DiversityKernel{em}, self: DiversityKernel{em},
			causal: DiversityKernel{ScaledDotProduct{}}},
		{cfg: AttentionConfig{Kind: KindBayesLogNormal, HeadDiversity: 0.5}, kernel: DiversityKernel{bayes},
			self: DiversityKernel{bayes}, causal: DiversityKernel{bayes}},
		{cfg: AttentionConfig{HeadDiversity: -0.1}, errorful: true},
		{cfg: AttentionConfig{HeadDiversity: math.NaN()}, errorful: true},
		{cfg: AttentionConfig{HeadDiversity: math.Inf(1)}, errorful: true},
		{cfg: AttentionConfig{Kind: "em", HeadDiversity: -1}, errorful: true},
		{cfg: AttentionConfig{Score: "cosine", HeadDiversity: 1}, errorful: true},
	}
	for _, c := range cases {
		kernel, err := NewKernel(c.cfg)
		self, selfErr := SelfAttentionKernel(c.cfg)
		if c.errorful {
			if err == nil || selfErr == nil {
				t.Errorf("%+v accepted", c.cfg)
			} else if c.cfg.HeadDiversity < 0 && !strings.Contains(err.Error(), "head_diversity") {
				t.Errorf("%+v: error %q does not name head_diversity", c.cfg, err)
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
		if got := causalKernel(self); got != c.causal {
			t.Errorf("%+v: causal kernel %#v, want %#v", c.cfg, got, c.causal)
		}
	}
}

// TestSeq2SeqDiversity: with head_diversity > 0, a training graph of the
// Seq2Seq model has one penalty per attention layer, self and cross, and
// an evaluation graph none; with 0 the training graph has none.
func TestSeq2SeqDiversity(t *testing.T) {
	layers := []string{"enc.0.self", "dec.0.self", "dec.0.cross", "dec.1.self", "dec.1.cross"}
	for _, att := range []AttentionConfig{{HeadDiversity: 0.5}, {Score: ScoreAdditive, RelativePositions: 1, HeadDiversity: 0.5},
		{Kind: "em", HeadDiversity: 0.5}, {HeadDiversity: 0}} {
		cfg := tinyConfig(true)
		cfg.Dropout = 0
		cfg.Attention = att
		for _, train := range []bool{false, true} {
			var names []string
			prog, err := graph.Compile(graph.NewParams(graph.Float64, 1), func(b *graph.Builder) error {
				logits := Seq2Seq{Config: cfg}.Forward(b,
					b.IndexInput("src", 2, 4), b.Input("src_mask", 2, 4),
					b.IndexInput("tgt_in", 2, 3), b.Input("tgt_mask", 2, 3))
				b.Output("logits", logits)
				names = setLossWithPenalties(b, logits)
				return nil
			}, train)
			if err != nil {
				t.Fatalf("%+v: %v", att, err)
			}
			var want []string
			if train && att.HeadDiversity > 0 {
				for _, l := range layers {
					want = append(want, l+".diversity")
				}
			}
			slices.Sort(names)
			slices.Sort(want)
			if !slices.Equal(names, want) {
				t.Errorf("%+v training %v: penalties %v, want %v", att, train, names, want)
			}
			logits := runSeq2Seq(t, prog, []int{4, 5, 6, 4, 5, 4, 0, 0}, srcMaskBS, []int{2, 4, 0, 2, 5, 4}, tgtMaskBT)
			for _, p := range want {
				if v, ok := prog.PenaltyValues()[p]; !ok || !(v >= 0) || math.IsInf(v, 0) {
					t.Errorf("%+v: %s = %v (present %v), want finite and ≥ 0", att, p, v, ok)
				}
			}
			if slices.ContainsFunc(logits, func(v float64) bool { return math.IsNaN(v) || math.IsInf(v, 0) }) {
				t.Errorf("%+v: non-finite logits", att)
			}
		}
	}
}

// setLossWithPenalties sets the loss to Σx plus every recorded penalty and
// returns the penalties' names.
func setLossWithPenalties(b *graph.Builder, x *graph.Node) []string {
	loss := graph.Sum(x)
	for _, p := range b.Penalties() {
		loss = graph.Add(loss, p)
	}
	b.SetLoss(loss)
	return b.PenaltyNames()
}
