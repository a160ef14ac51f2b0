package layers

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/probformer/probformer/graph"
)

// crossAttentionBuild adds Seq2Seq.CrossAttention of the given layer over
// the inputs of seq2seqBuild, as output "weights".
func crossAttentionBuild(cfg Seq2SeqConfig, batch, srcLen, tgtLen, layer int) graph.BuildFunc {
	return func(b *graph.Builder) error {
		w := Seq2Seq{Config: cfg}.CrossAttention(b,
			b.IndexInput("src", batch, srcLen), b.Input("src_mask", batch, srcLen),
			b.IndexInput("tgt_in", batch, tgtLen), b.Input("tgt_mask", batch, tgtLen), layer)
		b.Output("weights", w)
		return nil
	}
}

// crossReferenceBuild spells out, from the building blocks, the query side
// of decoder layer `layer`'s cross-attention as the residual sub-layer
// equations of transformer.go state it, and outputs its weights:
//
//	post-LN: u = LN1(y + Self(y)),       q from u
//	pre-LN:  u = y + Self(LN1(y)),       q from LN2(u)
func crossReferenceBuild(cfg Seq2SeqConfig, batch, srcLen, tgtLen, layer int) graph.BuildFunc {
	return func(b *graph.Builder) error {
		src, srcMask := b.IndexInput("src", batch, srcLen), b.Input("src_mask", batch, srcLen)
		tgtIn, tgtMask := b.IndexInput("tgt_in", batch, tgtLen), b.Input("tgt_mask", batch, tgtLen)
		kernel, err := NewKernel(cfg.Attention)
		if err != nil {
			return err
		}
		var selfKernel Kernel = ScaledDotProduct{}
		embed := func(name string, vocab int, ids *graph.Node) *graph.Node {
			x := TokenEmbedding{Name: name, Vocab: vocab, Dim: cfg.DModel}.Forward(b, ids)
			return PositionalEncoding{Name: name + ".pos"}.Forward(b, x)
		}
		memory := Encoder{Name: "enc", Layers: cfg.EncLayers, Layer: EncoderLayer{
			Dim: cfg.DModel, Heads: cfg.Heads, FF: cfg.FF, PreLN: cfg.PreLN, Kernel: kernel}}.Forward(b, embed("src_emb", cfg.SrcVocab, src), srcMask)
		y := embed("tgt_emb", cfg.TgtVocab, tgtIn)
		for i := range layer {
			y = DecoderLayer{Name: fmt.Sprintf("dec.%d", i), Dim: cfg.DModel, Heads: cfg.Heads, FF: cfg.FF,
				PreLN: cfg.PreLN, Kernel: kernel, SelfKernel: selfKernel}.Forward(b, y, tgtMask, memory, srcMask)
		}
		name := fmt.Sprintf("dec.%d", layer)
		self := MultiHeadAttention{Name: name + ".self", Dim: cfg.DModel, Heads: cfg.Heads, Kernel: selfKernel}
		causal := Mask{Keys: tgtMask, Queries: tgtMask, Causal: true}
		var q *graph.Node
		if cfg.PreLN {
			h := layerNorm(b, name+".ln1", y)
			q = layerNorm(b, name+".ln2", graph.Add(y, self.Forward(b, h, h, causal)))
		} else {
			q = layerNorm(b, name+".ln1", graph.Add(y, self.Forward(b, y, y, causal)))
		}
		cross := MultiHeadAttention{Name: name + ".cross", Dim: cfg.DModel, Heads: cfg.Heads, Kernel: kernel}
		b.Output("weights", cross.Weights(b, q, memory, Mask{Keys: srcMask, Queries: tgtMask}))
		return nil
	}
}

// runWeights feeds the inputs of seq2seqBuild and returns output "weights".
func runWeights(t *testing.T, prog *graph.Program, src []int, srcMask []float64, tgtIn []int, tgtMask []float64) ([]float64, []int) {
	t.Helper()
	for _, err := range []error{prog.FeedIndices("src", src), prog.Feed("src_mask", srcMask),
		prog.FeedIndices("tgt_in", tgtIn), prog.Feed("tgt_mask", tgtMask)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := prog.Run(); err != nil {
		t.Fatal(err)
	}
	w, shape, err := prog.Output("weights")
	if err != nil {
		t.Fatal(err)
	}
	return w, shape
}

// TestCrossAttentionMatchesReference: for every decoder layer, post-LN
// and pre-LN, softmax and EM attention, the weights equal those of the
// sub-layer equations written out by hand, over the parameters Forward
// created and no others; each real row is a distribution over the real
// source positions.
func TestCrossAttentionMatchesReference(t *testing.T) {
	const B, S, T, H = 2, 4, 3, 2
	src := []int{4, 5, 6, 4, 5, 4, 0, 0}
	tgtIn := []int{2, 4, 5, 2, 5, 4}
	for _, kind := range []string{"softmax", "em"} {
		for _, preLN := range []bool{false, true} {
			cfg := tinyConfig(preLN)
			if kind == "em" {
				cfg.Attention = AttentionConfig{Kind: "em", KeyIters: 2, ValueIters: 1}
			}
			ps := graph.NewParams(graph.Float64, 31)
			if _, err := graph.Compile(ps, seq2seqBuild(cfg, B, S, T), false); err != nil {
				t.Fatal(err)
			}
			names := paramNames(ps)
			for layer := range cfg.DecLayers {
				at := fmt.Sprintf("%s preLN=%v layer %d", kind, preLN, layer)
				prog, err := graph.Compile(ps, crossAttentionBuild(cfg, B, S, T, layer), false)
				if err != nil {
					t.Fatalf("%s: %v", at, err)
				}
				ref, err := graph.Compile(ps, crossReferenceBuild(cfg, B, S, T, layer), false)
				if err != nil {
					t.Fatalf("%s: reference: %v", at, err)
				}
				if got := paramNames(ps); !slices.Equal(got, names) {
					t.Fatalf("%s: parameters changed from %v to %v", at, names, got)
				}
				for _, p := range prog.Params() {
					if layerOf(p.Name) > layer || strings.HasPrefix(p.Name, "out.") || strings.HasPrefix(p.Name, "dec.ln") {
						t.Errorf("%s: uses %s, which does not feed the layer's cross-attention", at, p.Name)
					}
				}
				got, shape := runWeights(t, prog, src, srcMaskBS, tgtIn, tgtMaskBT)
				want, _ := runWeights(t, ref, src, srcMaskBS, tgtIn, tgtMaskBT)
				if !slices.Equal(shape, []int{B, H, T, S}) {
					t.Fatalf("%s: shape %v, want [%d %d %d %d]", at, shape, B, H, T, S)
				}
				for i := range want {
					if math.Abs(got[i]-want[i]) > 1e-12 {
						t.Fatalf("%s: weight %d is %v, reference %v", at, i, got[i], want[i])
					}
				}
				for row := range B * H * T {
					bi, ti := row/(H*T), row%T
					if tgtMaskBT[bi*T+ti] == 0 {
						continue // a padded query's row is the kernel's business
					}
					var sum float64
					for s := range S {
						w := got[row*S+s]
						if srcMaskBS[bi*S+s] == 0 && w != 0 {
							t.Errorf("%s: padded source position %d has weight %v", at, s, w)
						}
						sum += w
					}
					if math.Abs(sum-1) > 1e-12 {
						t.Errorf("%s: row %d sums to %v", at, row, sum)
					}
				}
			}
		}
	}
}

// TestCrossAttentionDependsOnPrefixOnly: like the logits, the weights of
// decoder position t do not change with target tokens after t, and do
// change with the token at t.
func TestCrossAttentionDependsOnPrefixOnly(t *testing.T) {
	const S, T, H = 3, 4, 2
	cfg := tinyConfig(false)
	prog, err := graph.Compile(graph.NewParams(graph.Float64, 32), crossAttentionBuild(cfg, 1, S, T, 1), false)
	if err != nil {
		t.Fatal(err)
	}
	src, srcMask := []int{4, 5, 6}, ones(S)
	tgt := []int{2, 4, 5, 3}
	base, _ := runWeights(t, prog, src, srcMask, tgt, ones(T))
	base = slices.Clone(base)
	for k := 1; k < T; k++ {
		changed := slices.Clone(tgt)
		changed[k] = 1 + (tgt[k]+1)%(cfg.TgtVocab-1)
		got, _ := runWeights(t, prog, src, srcMask, changed, ones(T))
		for h := range H {
			for pos := range T {
				at := (h*T + pos) * S
				same := slices.Equal(base[at:at+S], got[at:at+S])
				if pos < k && !same {
					t.Fatalf("changing target position %d changed head %d's weights at position %d", k, h, pos)
				}
				if pos == k && same {
					t.Fatalf("changing target position %d left head %d's weights there unchanged", k, h)
				}
			}
		}
	}
}

func TestCrossAttentionLayerOutOfRange(t *testing.T) {
	cfg := tinyConfig(false)
	for _, layer := range []int{-1, cfg.DecLayers} {
		_, err := graph.Compile(graph.NewParams(graph.Float64, 1), crossAttentionBuild(cfg, 1, 2, 2, layer), false)
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("decoder layer %d", layer)) {
			t.Errorf("layer %d: error %v", layer, err)
		}
	}
}

func paramNames(ps *graph.Params) []string {
	var names []string
	for _, p := range ps.List() {
		names = append(names, p.Name)
	}
	slices.Sort(names)
	return names
}

// layerOf is i for a parameter dec.<i>.*, −1 for any other.
func layerOf(name string) int {
	var i int
	if _, err := fmt.Sscanf(name, "dec.%d.", &i); err != nil {
		return -1
	}
	return i
}
