package layers

import (
	"fmt"

	"github.com/probformer/probformer/graph"
)

// BERT is the pretraining model of Devlin et al. (2019) on the Transformer
// encoder of MaskedLM, with the lecture's two heads. Its input is a
// sentence pair, [CLS] S [SEP] S′ [SEP] padded (datasets.EncodePair), with
// a segment (token type) id per position, 0 for [CLS] S [SEP] and 1 for
// S′ [SEP]:
//
//	x   = Dropout(√d·E_tok[ids] + √d·E_seg[segments] + PE)
//	z   = Encoder(x)                              [B, S, d]
//	MLM: logits = z W_mlm + b_mlm                 [B, S, Vocab]
//	NSP: p(y | S, S′) = SoftMax_y(W_y tanh(W_s z_0 + b_s) + b_y)   y ∈ {0, 1}
//
// z_0 is the contextual embedding of [CLS] (position 0). Parameters: as
// MaskedLM's (src_emb.table [Vocab+1, d], row Vocab is [MASK]; enc.*;
// mlm.out), plus seg_emb.table [2, d], the pooler nsp.pool (W_s [d, d],
// b_s) and the classifier nsp.out (W_y [d, 2], b_y). [CLS] and [SEP] are
// ids of the vocabulary (a task uses <bos> and <eos>). Padding is masked in
// the attention as everywhere else, so no padded position changes a real
// one's output, and position 0 is always real.
type BERT struct {
	Config MaskedLMConfig
}

// NSPClasses is the number of next-sentence classes: 0 is "S′ is a random
// sentence", 1 "S′ follows S".
const NSPClasses = 2

// Encode: ids [B, S] in [0, Vocab] (Vocab is [MASK]), segments [B, S] in
// {0, 1}, mask [B, S] (1 real, 0 padding) → z [B, S, DModel], for the
// heads: MLMHead's parameters (to fuse with a loss,
// losses.ProjectedTokenCrossEntropy) and NSPHead.
func (m BERT) Encode(b *graph.Builder, ids, segments, mask *graph.Node) *graph.Node {
	c := m.Config
	if err := c.Validate(); err != nil {
		b.Fail(fmt.Errorf("BERT: %w", err))
	}
	s := graph.Shape(ids)
	if len(s) != 2 {
		b.Fail(fmt.Errorf("BERT: ids %v must be [B, S]", s))
	}
	if ss := graph.Shape(segments); len(ss) != 2 || ss[0] != s[0] || ss[1] != s[1] {
		b.Fail(fmt.Errorf("BERT: segments %v, want %v", ss, s))
	}
	if s[1] > c.MaxLen {
		b.Fail(fmt.Errorf("BERT: length %d exceeds max_len %d", s[1], c.MaxLen))
	}
	ec := c.encoder()
	x := graph.Add(TokenEmbedding{Name: "src_emb", Vocab: c.Vocab + 1, Dim: c.DModel}.Forward(b, ids),
		TokenEmbedding{Name: "seg_emb", Vocab: 2, Dim: c.DModel}.Forward(b, segments))
	x = PositionalEncoding{Name: "src_emb.pos"}.Forward(b, x)
	x = b.Dropout("src_emb.drop", x, c.Dropout)
	selfKernel, _ := SelfAttentionKernel(ec.Attention)
	enc := Encoder{Name: "enc", Layers: ec.EncLayers, Layer: EncoderLayer{
		Dim: ec.DModel, Heads: ec.Heads, FF: ec.FF, Dropout: ec.Dropout, PreLN: ec.PreLN, Kernel: selfKernel}}
	return enc.Forward(b, x, mask)
}

// MLMHead returns the masked-LM head's weight [DModel, Vocab] and bias
// [Vocab] (parameter mlm.out): logits = z w + bias.
func (m BERT) MLMHead(b *graph.Builder, z *graph.Node) (w, bias *graph.Node) {
	return denseParams(b, "mlm.out", z, m.Config.Vocab)
}

// Forward returns the MLM logits [B, S, Vocab] and the NSP logits [B, 2]
// (W_y tanh(W_s z_0 + b_s) + b_y; a softmax makes them p(y | S, S′)).
func (m BERT) Forward(b *graph.Builder, ids, segments, mask *graph.Node) (mlm, nsp *graph.Node) {
	z := m.Encode(b, ids, segments, mask)
	w, bias := m.MLMHead(b, z)
	return graph.Linear(z, w, bias), NSPHead(b, z)
}

// NSPHead is the next-sentence head on the encoder's output z [B, S, d]:
// the tanh pooler on [CLS]'s z_0 and the 2-way classifier, → logits
// [B, 2] (parameters nsp.pool and nsp.out).
func NSPHead(b *graph.Builder, z *graph.Node) *graph.Node {
	s := graph.Shape(z)
	z0 := graph.Reshape(graph.SliceAxis(z, 1, 0, 1), s[0], s[2])
	ws, bs := denseParams(b, "nsp.pool", z0, s[2])
	pooled := graph.Tanh(graph.Linear(z0, ws, bs))
	wy, by := denseParams(b, "nsp.out", pooled, NSPClasses)
	return graph.Linear(pooled, wy, by)
}
