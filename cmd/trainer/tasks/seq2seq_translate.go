package tasks

import (
	"fmt"
	"strings"

	"github.com/probformer/probformer/datasets"
	"github.com/probformer/probformer/graph"
	"github.com/probformer/probformer/layers"
)

// MaxLen is the most source words the model reads (data.max_len); longer
// sentences are cut.
func (t *Seq2Seq) MaxLen() int { return t.srcLen }

// ModelConfig is the Transformer's configuration.
func (t *Seq2Seq) ModelConfig() layers.Seq2SeqConfig { return t.model.Config }

// SourceTokens splits a line of input as the training data was: on
// whitespace, lowercased first if data.lowercase is set.
func (t *Seq2Seq) SourceTokens(line string) []string {
	if t.dataCfg.Lowercase {
		line = strings.ToLower(line)
	}
	return strings.Fields(line)
}

// UnknownWords returns the words of a tokenized sentence (SourceTokens)
// that the source vocabulary does not hold, which the model reads as
// <unk>: in order, a word as often as it occurs.
func (t *Seq2Seq) UnknownWords(words []string) []string {
	var out []string
	for _, w := range words {
		if t.src.ID(w) == datasets.UnkID {
			out = append(out, w)
		}
	}
	return out
}

// Translate translates tokenized sentences (SourceTokens) with greedy
// decoding (beam 1) or beam search ranked with training.length_penalty,
// on the weights in params. A sentence is cut to MaxLen words; an empty
// one has no source to attend to, so it is not decoded and its
// translation is empty.
func (t *Seq2Seq) Translate(params *graph.Params, srcs [][]string, beam int) ([][]string, error) {
	out := make([][]string, len(srcs))
	var nonEmpty [][]string
	var at []int
	for i, s := range srcs {
		if len(s) > 0 {
			nonEmpty, at = append(nonEmpty, s), append(at, i)
		}
	}
	if len(nonEmpty) == 0 {
		return out, nil
	}
	hyps, err := t.decode(params, nonEmpty, beam)
	if err != nil {
		return nil, err
	}
	for j, i := range at {
		out[i] = hyps[j]
	}
	return out, nil
}

// Alignment is the cross-attention of one decoder layer behind a greedy
// translation.
type Alignment struct {
	// Source holds the source words as the model reads them: <unk> for a
	// word outside its vocabulary.
	Source []string
	// Output holds the generated tokens, <eos> last if the translation
	// ended; Translation is its words.
	Output, Translation []string
	// Weights[h][i][j] is head h's weight on source word j while the
	// decoder generated output token i.
	Weights [][][]float64
}

// CrossAttention translates words (one sentence of 1 to MaxLen words)
// greedily and returns the cross-attention weights of decoder layer
// layer (0-based) behind the translation.
func (t *Seq2Seq) CrossAttention(params *graph.Params, words []string, layer int) (Alignment, error) {
	if len(words) == 0 || len(words) > t.srcLen {
		return Alignment{}, fmt.Errorf("cross-attention of %d words: want 1 to %d", len(words), t.srcLen)
	}
	if layer < 0 || layer >= t.model.Config.DecLayers {
		return Alignment{}, fmt.Errorf("cross-attention of decoder layer %d: the decoder has layers 0 to %d", layer, t.model.Config.DecLayers-1)
	}
	src := t.src.Encode(words)
	out, weights, err := t.crossAttention(params, src, layer)
	if err != nil {
		return Alignment{}, err
	}
	a := Alignment{Translation: t.tgt.Decode(out), Weights: weights}
	for _, id := range src {
		a.Source = append(a.Source, t.src.Word(id))
	}
	for _, id := range out {
		a.Output = append(a.Output, t.tgt.Word(id))
	}
	return a, nil
}

// crossAttention decodes src (ids, no padding) greedily and returns the
// generated ids, <eos> included if the translation ended, and the
// cross-attention weights of decoder layer `layer` behind them:
// weights[h][i][j] is head h's weight on source word j while generating
// token i.
//
// Decoder position i reads <bos> y1 … y_i and predicts token i + 1, so
// the weights come from one teacher-forced pass over <bos> and the
// generated tokens but the last, at the sentence's own lengths; without
// padding there is nothing to mask.
func (t *Seq2Seq) crossAttention(params *graph.Params, src []int, layer int) ([]int, [][][]float64, error) {
	tr, err := t.decoder(params, 1)
	if err != nil {
		return nil, nil, err
	}
	hyps, err := layers.Greedy(tr, [][]int{src}, t.tgtLen)
	if err != nil {
		return nil, nil, err
	}
	out := hyps[0].Tokens
	if hyps[0].Finished {
		out = append(out, datasets.EOSID)
	}
	tgtIn := append([]int{datasets.BOSID}, out[:len(out)-1]...)
	S, T := len(src), len(tgtIn)
	prog, err := graph.Compile(params, func(b *graph.Builder) error {
		w := t.model.CrossAttention(b, b.IndexInput("src", 1, S), b.Input("src_mask", 1, S),
			b.IndexInput("tgt_in", 1, T), b.Input("tgt_mask", 1, T), layer)
		if w == nil {
			return fmt.Errorf("attention kind %q does not expose its weights", t.modelCfg.Attention.Kind)
		}
		b.Output("weights", w)
		return nil
	}, false)
	if err != nil {
		return nil, nil, fmt.Errorf("build cross-attention graph: %w", err)
	}
	feeds := []error{prog.FeedIndices("src", src), prog.Feed("src_mask", onesSlice(S)),
		prog.FeedIndices("tgt_in", tgtIn), prog.Feed("tgt_mask", onesSlice(T))}
	for _, err := range feeds {
		if err != nil {
			return nil, nil, err
		}
	}
	if err := prog.Run(); err != nil {
		return nil, nil, fmt.Errorf("cross-attention: %w", err)
	}
	flat, shape, err := prog.Output("weights") // [1, H, T, S]
	if err != nil {
		return nil, nil, fmt.Errorf("cross-attention: %w", err)
	}
	if len(shape) != 4 || shape[0] != 1 || shape[2] != T || shape[3] != S {
		return nil, nil, fmt.Errorf("cross-attention: weights of shape %v, want [1 H %d %d]", shape, T, S)
	}
	weights := make([][][]float64, shape[1])
	for h := range weights {
		weights[h] = make([][]float64, T)
		for i := range T {
			at := (h*T + i) * S
			weights[h][i] = flat[at : at+S : at+S]
		}
	}
	return out, weights, nil
}

func onesSlice(n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = 1
	}
	return v
}
