package layers

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/probformer/probformer/graph"
)

// Padding is exact: a batch of sets or sentences padded with extra masked
// elements gives, for every attention kind and every block, the same
// outputs for its real elements and the same gradients of a loss on those
// outputs (penalties such as the Bayesian KL included) with respect to
// the real rows of the inputs and to every parameter, to 1e-12 in float64.
//
// The reference has sets of length padRef with the real lengths of a
// layout; the padded problem appends padTo − padRef more masked elements
// filled with random numbers, and every parameter that depends on the
// length (the free EM prior's logits, the inputs) gets random values in
// its extra entries.

const (
	padBatch = 2
	padRef   = 5 // length of the reference sets and sentences
	padTo    = 7 // length of the padded ones
	padTol   = 1e-12
	padDim   = 4 // model width
	padDimIn = 3 // width of a set element
)

// padLayouts are the real lengths of the batch's examples. "full" has a
// reference without any mask; "ragged" one whose second example is
// padded already.
var padLayouts = []struct {
	name string
	lens []int
}{
	{"full", []int{5, 5}},
	{"ragged", []int{5, 3}},
}

// padKinds are the attention kinds under test.
var padKinds = []struct {
	name string
	att  AttentionConfig
}{
	{"scaled_dot", AttentionConfig{Kind: "softmax"}},
	{"dot", AttentionConfig{Kind: "softmax", Score: ScoreDot}},
	{"bilinear", AttentionConfig{Kind: "softmax", Score: ScoreBilinear}},
	{"additive", AttentionConfig{Kind: "softmax", Score: ScoreAdditive}},
	{"relative", AttentionConfig{Kind: "softmax", RelativePositions: 2}}, // self-attention of the Transformer blocks
	{"em-k0", AttentionConfig{Kind: "em"}},
	{"em-k1", AttentionConfig{Kind: "em", KeyIters: 1}},
	{"em-k2-alpha-v1", AttentionConfig{Kind: "em", KeyIters: 2, AdaptAlpha: true, ValueIters: 1}},
	// The free prior's logits [H, M] are per memory size; the padded
	// problem's extra columns are random and must not matter.
	{"em-free-k1", AttentionConfig{Kind: "em", KeyIters: 1, Prior: "free"}},
	{"bayes-weibull", AttentionConfig{Kind: KindBayesWeibull}},
	{"bayes-lognormal", AttentionConfig{Kind: KindBayesLogNormal}},
	{"bayes-weibull-constant", AttentionConfig{Kind: KindBayesWeibull, Prior: PriorConstant}},
	// The head-diversity penalty leaves padded query rows out.
	{"scaled_dot-diversity", AttentionConfig{Kind: "softmax", HeadDiversity: 0.5}},
	{"em-k1-diversity", AttentionConfig{Kind: "em", KeyIters: 1, HeadDiversity: 0.5}},
}

// padNet is what a block's build function gets: the kernels of its kind,
// and the sequences' length n and masks.
type padNet struct {
	att    AttentionConfig
	kernel Kernel // NewKernel(att), its Bayesian noise held fixed
	self   Kernel // SelfAttentionKernel(att), likewise
	n      int
	mask   func(name string) *graph.Node // [B, n] input, or nil for a reference without padding
}

// padBlocks are the blocks under test. Each builds its output [B, R, D]
// from parameters x [B, n, ·] (and y, memory) or index inputs src,
// tgt_in [B, n]; R is n, or a number of seeds if pooled.
var padBlocks = []struct {
	name   string
	pooled bool
	// noise names the Bayesian layers of a model that builds its own
	// kernel, whose noise inputs the test fills.
	noise []string
	build func(b *graph.Builder, p padNet) *graph.Node
}{
	{"sab", false, nil, func(b *graph.Builder, p padNet) *graph.Node {
		return SAB{MAB: padMAB("sab", p.kernel)}.Forward(b, padInput(b, "x", p.n, padDimIn), p.mask("mask"))
	}},
	{"isab", false, nil, func(b *graph.Builder, p padNet) *graph.Node {
		return ISAB{Name: "isab", Inducing: 3, MAB: padMAB("", p.kernel)}.Forward(b, padInput(b, "x", p.n, padDimIn), p.mask("mask"))
	}},
	{"pma", true, nil, func(b *graph.Builder, p padNet) *graph.Node {
		return PMA{Name: "pma", Seeds: 2, MAB: padMAB("", p.kernel)}.Forward(b, padInput(b, "x", p.n, padDimIn), p.mask("mask"))
	}},
	{"set-transformer-isab", true, []string{"enc.0.mab0", "enc.0.mab1", "dec.pma.mab", "dec.sab.mab"},
		func(b *graph.Builder, p padNet) *graph.Node {
			return padSetTransformer(b, p, "isab")
		}},
	{"set-transformer-sab", true, []string{"enc.0.mab", "dec.pma.mab", "dec.sab.mab"},
		func(b *graph.Builder, p padNet) *graph.Node {
			return padSetTransformer(b, p, "sab")
		}},
	{"encoder-layer", false, nil, func(b *graph.Builder, p padNet) *graph.Node {
		l := EncoderLayer{Name: "enc", Dim: padDim, Heads: 2, FF: 6, Kernel: p.self}
		return l.Forward(b, padInput(b, "x", p.n, padDim), p.mask("mask"))
	}},
	{"decoder-layer", false, nil, func(b *graph.Builder, p padNet) *graph.Node {
		l := DecoderLayer{Name: "dec", Dim: padDim, Heads: 2, FF: 6, PreLN: true, Kernel: p.kernel, SelfKernel: causalKernel(p.self)}
		return l.Forward(b, padInput(b, "y", p.n, padDim), p.mask("tgt_mask"), padInput(b, "memory", p.n, padDim), p.mask("src_mask"))
	}},
	{"masked-lm", false, []string{"enc.0.self", "enc.1.self"}, func(b *graph.Builder, p padNet) *graph.Node {
		cfg := MaskedLMConfig{DModel: padDim, Heads: 2, FF: 6, Layers: 2, Vocab: 6, MaxLen: padTo, Attention: p.att}
		return MaskedLM{Config: cfg}.Forward(b, b.IndexInput("src", padBatch, p.n), p.mask("mask"))
	}},
	{"seq2seq", false, []string{"enc.0.self", "enc.1.self", "dec.0.self", "dec.0.cross"}, func(b *graph.Builder, p padNet) *graph.Node {
		cfg := Seq2SeqConfig{DModel: padDim, Heads: 2, FF: 6, EncLayers: 2, DecLayers: 1, SrcVocab: 7, TgtVocab: 6,
			MaxLen: padTo, Attention: p.att}
		return Seq2Seq{Config: cfg}.Forward(b, b.IndexInput("src", padBatch, p.n), p.mask("src_mask"),
			b.IndexInput("tgt_in", padBatch, p.n), p.mask("tgt_mask"))
	}},
}

// padSetTransformer is a SetTransformer with one encoder block, PMA and
// the decoder's SAB.
func padSetTransformer(b *graph.Builder, p padNet, encoder string) *graph.Node {
	cfg := SetTransformerConfig{DimIn: padDimIn, Dim: padDim, Heads: 2, DimOut: 2, Encoder: encoder, Blocks: 1,
		Inducing: 3, Seeds: 2, DecoderSAB: true, LayerNorm: true, Attention: p.att}
	return SetTransformer{Config: cfg}.Forward(b, padInput(b, "x", p.n, padDimIn), p.mask("mask"))
}

func padMAB(name string, k Kernel) MAB {
	return MAB{Name: name, Dim: padDim, Heads: 2, LayerNorm: true, Kernel: k}
}

// padInput is a model input x [B, n, d] held as a parameter, so that the
// training graph has its gradient.
func padInput(b *graph.Builder, name string, n, d int) *graph.Node {
	return b.Param(name, []int{padBatch, n, d}, graph.Normal(1))
}

// padInputs are the parameters that stand for inputs: only their real
// rows (axis 1) are compared.
var padInputs = []string{"x", "y", "memory"}

// fixedPositionalNoise is a Bayesian kernel whose noise is held fixed at
// values that depend only on the layer, example, head, query and key
// (positionalNoise), so that a padded problem's noise agrees with the
// unpadded one's on the real (i, j).
type fixedPositionalNoise struct{ BayesAttention }

// Attend implements Kernel.
func (k fixedPositionalNoise) Attend(b *graph.Builder, name string, q, key, v *graph.Node, heads int, mask Mask) *graph.Node {
	a := k.BayesAttention
	noise := positionalNoise(a.Kind, name, []int{graph.Shape(q)[0], heads, graph.Shape(q)[1], graph.Shape(key)[1]})
	a.fixed = &noise
	return a.Attend(b, name, q, key, v, heads, mask)
}

// positionalNoise is the noise [B, H, N, M] of layer name: uniform in
// (0.02, 0.98) for the Weibull kernel, standard normal for the log-normal,
// each entry drawn from its own (layer, b, h, i, j) stream.
func positionalNoise(kind, name string, shape []int) []float64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	layer := h.Sum64()
	out := make([]float64, 0, shape[0]*shape[1]*shape[2]*shape[3])
	for bi := range shape[0] {
		for hi := range shape[1] {
			for i := range shape[2] {
				for j := range shape[3] {
					rng := rand.New(rand.NewPCG(layer, uint64(bi)<<48|uint64(hi)<<32|uint64(i)<<16|uint64(j)))
					if kind == KindBayesLogNormal {
						out = append(out, rng.NormFloat64())
					} else {
						out = append(out, 0.02+0.96*rng.Float64())
					}
				}
			}
		}
	}
	return out
}

// entryValue is a value in [−1, 1) that depends only on (stream, idx...),
// for loss weights and token ids that must agree between the reference
// and the padded problem.
func entryValue(stream uint64, idx ...int) float64 {
	var key uint64
	for _, i := range idx {
		key = key<<16 | uint64(i)
	}
	return 2*rand.New(rand.NewPCG(stream, key)).Float64() - 1
}

// padRun is one compiled and run training program of the test.
type padRun struct {
	ps    *graph.Params
	prog  *graph.Program
	out   []float64
	shape []int // of out: [B, R, D]
	grads map[string][]float64
}

// TestPaddingExact: for every attention kind, block and layout, the
// padded problem agrees with the reference to padTol on the real
// elements' outputs and on the gradients, and the padded rows of the
// inputs get no gradient.
func TestPaddingExact(t *testing.T) {
	for _, kind := range padKinds {
		for _, block := range padBlocks {
			for _, layout := range padLayouts {
				t.Run(fmt.Sprintf("%s/%s/%s", kind.name, block.name, layout.name), func(t *testing.T) {
					checkPadding(t, kind.att, block.pooled, block.noise, block.build, layout.lens)
				})
			}
		}
	}
}

func checkPadding(t *testing.T, att AttentionConfig, pooled bool, noiseLayers []string,
	build func(b *graph.Builder, p padNet) *graph.Node, lens []int) {
	rng := rand.New(rand.NewPCG(31, 7))
	ref := padCompile(t, att, pooled, build, padRef, lens)
	// Move every parameter off its initial value (LayerNorm gains of 1,
	// zero biases, em's default priors), so that none hides a mistake.
	for _, p := range ref.ps.List() {
		v := p.Values()
		for i := range v {
			v[i] += 0.3 * rng.NormFloat64()
		}
		if err := p.SetValues(v); err != nil {
			t.Fatal(err)
		}
	}
	pad := padCompile(t, att, pooled, build, padTo, lens)
	if len(pad.ps.List()) != len(ref.ps.List()) {
		t.Fatalf("padded model has %d parameters, reference %d", len(pad.ps.List()), len(ref.ps.List()))
	}
	for _, p := range pad.ps.List() {
		r := ref.ps.Lookup(p.Name)
		if r == nil {
			t.Fatalf("parameter %s only in the padded model", p.Name)
		}
		// The padded entries (rows of inputs, columns of per-size
		// parameters) get random values; the rest the reference's.
		v := p.Values()
		for i := range v {
			v[i] = 3 * rng.NormFloat64()
		}
		rv := r.Values()
		for i := range rv {
			v[embedIndex(i, r.Shape, p.Shape)] = rv[i]
		}
		if err := p.SetValues(v); err != nil {
			t.Fatal(err)
		}
	}
	for _, run := range []*padRun{ref, pad} {
		padFeed(t, run, att.Kind, noiseLayers, lens, rng)
		if err := run.prog.Run(); err != nil {
			t.Fatal(err)
		}
		run.out, run.shape, _ = run.prog.Output("out")
		var err error
		if run.grads, err = run.prog.Gradients(); err != nil {
			t.Fatal(err)
		}
	}

	// Outputs of the real elements.
	rows, d := ref.shape[1], ref.shape[2]
	bad := 0
	for bi := range padBatch {
		for r := range rows {
			if !pooled && r >= lens[bi] {
				continue
			}
			for c := range d {
				want := ref.out[(bi*rows+r)*d+c]
				got := pad.out[(bi*pad.shape[1]+r)*d+c]
				if !padClose(got, want) && bad < 3 {
					bad++
					t.Errorf("output [%d, %d, %d] is %v padded, %v unpadded", bi, r, c, got, want)
				}
			}
		}
	}

	// Gradients of every parameter, and of the real rows of the inputs.
	for _, p := range ref.ps.List() {
		isInput := slices.Contains(padInputs, p.Name)
		pp := pad.ps.Lookup(p.Name)
		refG, padG := ref.grads[p.Name], pad.grads[p.Name]
		if refG == nil || padG == nil {
			t.Errorf("no gradient of %s", p.Name)
			continue
		}
		worst, at := 0.0, -1 // the largest difference beyond padTol
		for i, want := range refG {
			if isInput && !realRow(i, p.Shape, lens) {
				continue
			}
			got := padG[embedIndex(i, p.Shape, pp.Shape)]
			if diff := math.Abs(got - want); !padClose(got, want) && (at < 0 || !(diff <= worst)) {
				worst, at = diff, i
			}
		}
		if at >= 0 {
			t.Errorf("gradient of %s differs by up to %.3g (entry %d: %v padded, %v unpadded)",
				p.Name, worst, at, padG[embedIndex(at, p.Shape, pp.Shape)], refG[at])
		}
		if isInput {
			// Padded rows change nothing, so their gradient is 0.
			for i, g := range padG {
				if !realRow(i, pp.Shape, lens) && !(math.Abs(g) <= padTol) {
					t.Errorf("gradient of %s at padded entry %d is %v, want 0", p.Name, i, g)
					break
				}
			}
		}
	}
}

// padCompile compiles the training program of build on sequences of
// length n with real lengths lens: the loss is Σ w·out over the real
// elements' outputs, w fixed per (example, row, column), plus every
// penalty.
func padCompile(t *testing.T, att AttentionConfig, pooled bool, build func(b *graph.Builder, p padNet) *graph.Node,
	n int, lens []int) *padRun {
	t.Helper()
	kernel, err := NewKernel(att)
	if err != nil {
		t.Fatal(err)
	}
	self, err := SelfAttentionKernel(att)
	if err != nil {
		t.Fatal(err)
	}
	if a, ok := kernel.(BayesAttention); ok {
		kernel, self = fixedPositionalNoise{a}, fixedPositionalNoise{a}
	}
	masked := n > slices.Min(lens)
	ps := graph.NewParams(graph.Float64, 5)
	prog, err := graph.Compile(ps, func(b *graph.Builder) error {
		net := padNet{att: att, kernel: kernel, self: self, n: n, mask: func(name string) *graph.Node {
			if !masked {
				return nil
			}
			return b.Input(name, padBatch, n)
		}}
		out := build(b, net)
		s := graph.Shape(out)
		w := make([]float64, 0, s[0]*s[1]*s[2])
		for bi := range s[0] {
			for r := range s[1] {
				for c := range s[2] {
					if pooled || r < lens[bi] {
						w = append(w, entryValue(11, bi, r, c))
					} else {
						w = append(w, 0)
					}
				}
			}
		}
		loss := graph.Sum(graph.Mul(out, b.Constant("loss_weights", s, w)))
		for _, p := range b.Penalties() {
			loss = graph.Add(loss, p)
		}
		b.Output("out", out)
		b.SetLoss(loss)
		return nil
	}, true)
	if err != nil {
		t.Fatal(err)
	}
	return &padRun{ps: ps, prog: prog}
}

// padFeed feeds the masks, token ids and Bayesian noise of run.
func padFeed(t *testing.T, run *padRun, kind string, noiseLayers []string, lens []int, rng *rand.Rand) {
	t.Helper()
	prog := run.prog
	for _, name := range []string{"mask", "src_mask", "tgt_mask"} {
		s := prog.InputShape(name)
		if s == nil {
			continue
		}
		m := make([]float64, s[0]*s[1])
		for bi := range s[0] {
			for i := range lens[bi] {
				m[bi*s[1]+i] = 1
			}
		}
		if err := prog.Feed(name, m); err != nil {
			t.Fatal(err)
		}
	}
	for stream, name := range []string{"src", "tgt_in"} {
		s := prog.InputShape(name)
		if s == nil {
			continue
		}
		ids := make([]int, s[0]*s[1])
		for bi := range s[0] {
			for i := range s[1] {
				if i < lens[bi] {
					ids[bi*s[1]+i] = int(3 * (1 + entryValue(uint64(stream), bi, i))) // in [0, 6)
				} else {
					ids[bi*s[1]+i] = rng.IntN(6)
				}
			}
		}
		if err := prog.FeedIndices(name, ids); err != nil {
			t.Fatal(err)
		}
	}
	if kind != KindBayesWeibull && kind != KindBayesLogNormal {
		return
	}
	for _, layer := range noiseLayers {
		name := layer + ".noise"
		s := prog.InputShape(name)
		if s == nil {
			t.Fatalf("no noise input %s", name)
		}
		if err := prog.Feed(name, positionalNoise(kind, layer, s)); err != nil {
			t.Fatal(err)
		}
	}
}

// embedIndex maps flat index i of a tensor of shape from to the entry
// with the same multi-index in the tensor of shape to (to ≥ from on every
// axis).
func embedIndex(i int, from, to []int) int {
	j, stride := 0, 1
	for a := len(from) - 1; a >= 0; a-- {
		j += (i % from[a]) * stride
		i /= from[a]
		stride *= to[a]
	}
	return j
}

// realRow reports whether flat index i of an input [B, n, d] lies in a
// real row.
func realRow(i int, shape, lens []int) bool {
	bi, r := i/(shape[1]*shape[2]), i/shape[2]%shape[1]
	return r < lens[bi]
}

func padClose(got, want float64) bool {
	return math.Abs(got-want) <= padTol*math.Max(1, math.Abs(want))
}
