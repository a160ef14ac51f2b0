package layers

import (
	"fmt"

	"github.com/probformer/probformer/graph"
)

// MaskedLMConfig is the architecture of an encoder-only masked language
// model. Its encoder fields mean what Seq2SeqConfig's do.
type MaskedLMConfig struct {
	DModel  int
	Heads   int
	FF      int
	Layers  int // encoder layers
	Dropout float64
	PreLN   bool
	// Vocab counts the ids of the vocabulary, the special tokens
	// included. The embedding has one more row, id Vocab, for [MASK]
	// (datasets.MaskOptions.MaskID); the model predicts the Vocab ids.
	Vocab int
	// MaxLen bounds the length of a graph's sentences.
	MaxLen    int
	Attention AttentionConfig
}

// encoder is c as the Seq2SeqConfig whose encoder it shares.
func (c MaskedLMConfig) encoder() Seq2SeqConfig {
	return Seq2SeqConfig{DModel: c.DModel, Heads: c.Heads, FF: c.FF, EncLayers: c.Layers, DecLayers: 1,
		Dropout: c.Dropout, PreLN: c.PreLN, SrcVocab: c.Vocab + 1, TgtVocab: c.Vocab, MaxLen: c.MaxLen, Attention: c.Attention}
}

// Validate reports the first inconsistent field.
func (c MaskedLMConfig) Validate() error {
	if c.Layers <= 0 {
		return fmt.Errorf("layers must be positive, is %d", c.Layers)
	}
	if c.Vocab <= 0 {
		return fmt.Errorf("vocab must be positive, is %d", c.Vocab)
	}
	return c.encoder().Validate()
}

// MaskedLM is BERT's masked language model (Devlin et al. 2019, §3.1)
// on the Transformer encoder of Seq2Seq:
//
//	h      = Encoder(Dropout(√d·E_src[ids] + PE))
//	logits = h W_mlm + b_mlm
//
// Its encoder parameters are named as Seq2Seq's, so a trained MaskedLM
// starts a Seq2Seq's encoder: src_emb.table [Vocab+1, DModel] (row Vocab
// is [MASK], which Seq2Seq's [Vocab, DModel] table leaves out), enc.<i>.*
// and with pre-LN enc.ln. The prediction head is its own: mlm.out
// (w [DModel, Vocab], b). Dropout masks: src_emb.drop and the layers'.
type MaskedLM struct {
	Config MaskedLMConfig
}

// Forward: ids [B, S] in [0, Vocab] (Vocab is [MASK]), mask [B, S] (1
// real, 0 padding) → logits [B, S, Vocab]. S must not exceed MaxLen.
func (m MaskedLM) Forward(b *graph.Builder, ids, mask *graph.Node) *graph.Node {
	h, w, bias := m.Encode(b, ids, mask)
	return graph.Linear(h, w, bias)
}

// Encode is Forward up to the prediction head, for losses that fuse the
// head with the loss (losses.ProjectedTokenCrossEntropy, which then
// scores the masked positions only): it returns the encoder's output h
// [B, S, DModel] and the head's weight w [DModel, Vocab] and bias [Vocab],
// logits = h w + bias.
func (m MaskedLM) Encode(b *graph.Builder, ids, mask *graph.Node) (h, w, bias *graph.Node) {
	c := m.Config
	if err := c.Validate(); err != nil {
		b.Fail(fmt.Errorf("masked LM: %w", err))
	}
	s := graph.Shape(ids)
	if len(s) != 2 {
		b.Fail(fmt.Errorf("masked LM: ids %v must be [B, S]", s))
	}
	if s[1] > c.MaxLen {
		b.Fail(fmt.Errorf("masked LM: length %d exceeds max_len %d", s[1], c.MaxLen))
	}
	h = encodeSource(b, c.encoder(), c.Vocab+1, ids, mask)
	w, bias = denseParams(b, "mlm.out", h, c.Vocab)
	return h, w, bias
}
