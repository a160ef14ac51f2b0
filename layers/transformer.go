package layers

import (
	"fmt"
	"math"

	"github.com/probformer/probformer/graph"
)

// Transformer encoder and decoder (Vaswani et al. 2017 §3.1). Every
// sub-layer F (self-attention, cross-attention, feed-forward) is wrapped
// in a residual connection with dropout on F's output, either post-LN as
// in the paper or pre-LN (Xiong et al. 2020):
//
//	post-LN: x ← LN(x + Dropout(F(x)))
//	pre-LN:  x ← x + Dropout(F(LN(x))),  with a final LN after the stack
//
// Pre-LN trains without learning-rate warm-up; post-LN is the original.

// feedForward is the position-wise network of §3.3:
//
//	FFN(x) = Dropout(ReLU(x W₁ + b₁)) W₂ + b₂,  W₁ [Dim, FF], W₂ [FF, Dim]
//
// with dropout p on the hidden units, as PyTorch's nn.Transformer layers
// and tensor2tensor have it (the paper leaves it out).
//
// Parameters: name.ff1, name.ff2 (each .w and .b); dropout mask name.ff1.drop.
func feedForward(b *graph.Builder, name string, x *graph.Node, ff int, p float64) *graph.Node {
	s := graph.Shape(x)
	w, bias := denseParams(b, name+".ff1", x, ff)
	hidden := b.LinearReLUDropout(name+".ff1.drop", x, w, bias, p) // dropout fused into the ReLU's pass
	return dense(b, name+".ff2", hidden, s[len(s)-1])
}

// sublayer wraps f in the residual connection and dropout, post-LN or
// pre-LN, with LayerNorm parameters ln and the dropout mask called drop.
func sublayer(b *graph.Builder, x *graph.Node, preLN bool, ln, drop string, p float64,
	f func(h *graph.Node) *graph.Node) *graph.Node {
	if preLN {
		return graph.Add(x, b.Dropout(drop, f(layerNorm(b, ln, x)), p))
	}
	return addLayerNorm(b, ln, x, f(x), drop, p)
}

// EncoderLayer is one Transformer encoder layer: self-attention over the
// source with padded keys and queries masked, then the feed-forward
// network, each a residual sub-layer.
//
// Parameters: name.self (q, k, v, o), name.ff1, name.ff2, name.ln1,
// name.ln2. Dropout masks (training graphs): name.self.drop, name.ff1.drop,
// name.ff.drop.
type EncoderLayer struct {
	Name    string
	Dim     int     // model width d_model
	Heads   int     // must divide Dim
	FF      int     // hidden width of the feed-forward network
	Dropout float64 // on each sub-layer's output; 0 turns it off
	PreLN   bool    // LayerNorm before each sub-layer instead of after
	Kernel  Kernel
}

// Forward: x [B, S, Dim], mask [B, S] (1 real, 0 padding) or nil →
// [B, S, Dim].
func (l EncoderLayer) Forward(b *graph.Builder, x, mask *graph.Node) *graph.Node {
	self := MultiHeadAttention{Name: l.Name + ".self", Dim: l.Dim, Heads: l.Heads, Kernel: l.Kernel}
	x = sublayer(b, x, l.PreLN, l.Name+".ln1", l.Name+".self.drop", l.Dropout, func(h *graph.Node) *graph.Node {
		return self.Forward(b, h, h, Mask{Keys: mask, Queries: mask})
	})
	return sublayer(b, x, l.PreLN, l.Name+".ln2", l.Name+".ff.drop", l.Dropout, func(h *graph.Node) *graph.Node {
		return feedForward(b, l.Name, h, l.FF, l.Dropout)
	})
}

// DecoderLayer is one Transformer decoder layer: masked self-attention over
// the target prefix, attention over the encoder's memory, then the
// feed-forward network, each a residual sub-layer.
//
// Parameters: name.self, name.cross (q, k, v, o), name.ff1, name.ff2,
// name.ln1, name.ln2, name.ln3. Dropout masks: name.self.drop,
// name.cross.drop, name.ff1.drop, name.ff.drop.
type DecoderLayer struct {
	Name    string
	Dim     int
	Heads   int
	FF      int
	Dropout float64
	PreLN   bool
	Kernel  Kernel // cross-attention
	// SelfKernel is the causal self-attention's kernel; nil means Kernel.
	// Seq2Seq gives a kernel without a causal form (EMKernel) softmax
	// here.
	SelfKernel Kernel
}

// Forward: y [B, T, Dim], tgtMask [B, T] or nil, memory [B, S, Dim],
// srcMask [B, S] or nil → [B, T, Dim]. Self-attention is causal: position
// t sees target positions ≤ t only. tgtMask masks the queries of both
// attentions and the keys of self-attention, srcMask the keys of
// cross-attention.
func (l DecoderLayer) Forward(b *graph.Builder, y, tgtMask, memory, srcMask *graph.Node) *graph.Node {
	y = l.selfSublayer(b, y, tgtMask)
	y = sublayer(b, y, l.PreLN, l.Name+".ln2", l.Name+".cross.drop", l.Dropout, func(h *graph.Node) *graph.Node {
		return l.cross().Forward(b, h, memory, l.crossMask(tgtMask, srcMask))
	})
	return sublayer(b, y, l.PreLN, l.Name+".ln3", l.Name+".ff.drop", l.Dropout, func(h *graph.Node) *graph.Node {
		return feedForward(b, l.Name, h, l.FF, l.Dropout)
	})
}

// selfSublayer is Forward's first sub-layer, causal self-attention:
// y [B, T, Dim], tgtMask [B, T] or nil → [B, T, Dim], the input of the
// cross-attention sub-layer.
func (l DecoderLayer) selfSublayer(b *graph.Builder, y, tgtMask *graph.Node) *graph.Node {
	selfKernel := l.SelfKernel
	if selfKernel == nil {
		selfKernel = l.Kernel
	}
	self := MultiHeadAttention{Name: l.Name + ".self", Dim: l.Dim, Heads: l.Heads, Kernel: selfKernel}
	return sublayer(b, y, l.PreLN, l.Name+".ln1", l.Name+".self.drop", l.Dropout, func(h *graph.Node) *graph.Node {
		return self.Forward(b, h, h, Mask{Keys: tgtMask, Queries: tgtMask, Causal: true})
	})
}

// crossMask is the mask of the cross-attention: target queries over
// source keys, tgtMask [B, T] and srcMask [B, S], each nil if unpadded.
func (DecoderLayer) crossMask(tgtMask, srcMask *graph.Node) Mask {
	return Mask{Keys: srcMask, Queries: tgtMask}
}

// cross is the attention over the encoder's memory.
func (l DecoderLayer) cross() MultiHeadAttention {
	return MultiHeadAttention{Name: l.Name + ".cross", Dim: l.Dim, Heads: l.Heads, Kernel: l.Kernel}
}

// Encoder is a stack of Layers encoder layers named Name.0, Name.1, …,
// followed with pre-LN, or with FinalNorm, by a final LayerNorm Name.ln.
type Encoder struct {
	Name   string
	Layers int
	Layer  EncoderLayer // every field but Name is used for each layer
	// FinalNorm adds the final LayerNorm with post-LN layers too, as
	// PyTorch's nn.Transformer does.
	FinalNorm bool
}

// Forward: x [B, S, Dim], mask [B, S] or nil → [B, S, Dim].
func (e Encoder) Forward(b *graph.Builder, x, mask *graph.Node) *graph.Node {
	for i := range e.Layers {
		l := e.Layer
		l.Name = fmt.Sprintf("%s.%d", e.Name, i)
		x = l.Forward(b, x, mask)
	}
	if e.Layer.PreLN || e.FinalNorm {
		x = layerNorm(b, e.Name+".ln", x)
	}
	return x
}

// Decoder is a stack of Layers decoder layers named Name.0, Name.1, …,
// followed with pre-LN, or with FinalNorm, by a final LayerNorm Name.ln.
type Decoder struct {
	Name      string
	Layers    int
	Layer     DecoderLayer
	FinalNorm bool // as Encoder's
}

// Forward: y [B, T, Dim], tgtMask [B, T] or nil, memory [B, S, Dim],
// srcMask [B, S] or nil → [B, T, Dim]. Position t sees target positions
// ≤ t only, so its output does not depend on later target tokens.
func (d Decoder) Forward(b *graph.Builder, y, tgtMask, memory, srcMask *graph.Node) *graph.Node {
	for i := range d.Layers {
		y = d.layer(i).Forward(b, y, tgtMask, memory, srcMask)
	}
	if d.Layer.PreLN || d.FinalNorm {
		y = layerNorm(b, d.Name+".ln", y)
	}
	return y
}

// layer is the i-th layer of the stack, 0-based.
func (d Decoder) layer(i int) DecoderLayer {
	l := d.Layer
	l.Name = fmt.Sprintf("%s.%d", d.Name, i)
	return l
}

// Seq2SeqConfig is the architecture of an encoder-decoder Transformer.
type Seq2SeqConfig struct {
	DModel    int     `yaml:"d_model" json:"d_model"`
	Heads     int     `yaml:"heads" json:"heads"`
	FF        int     `yaml:"ff" json:"ff"`
	EncLayers int     `yaml:"enc_layers" json:"enc_layers"`
	DecLayers int     `yaml:"dec_layers" json:"dec_layers"`
	Dropout   float64 `yaml:"dropout" json:"dropout"`
	// PreLN puts LayerNorm before each sub-layer; false is the paper's
	// post-LN.
	PreLN bool `yaml:"pre_ln" json:"pre_ln"`
	// FinalNorm ends the encoder and decoder stacks with a LayerNorm with
	// post-LN too, as nn.Transformer does; pre-LN stacks always end so.
	FinalNorm bool `yaml:"final_norm" json:"final_norm"`
	// TieOutput makes the output projection the transposed target
	// embedding table, logits = h E_tgtᵀ + b_out (Press & Wolf 2017;
	// Vaswani et al. 2017 §3.4), instead of a weight of its own.
	TieOutput bool `yaml:"tie_output" json:"tie_output"`
	// SrcVocab and TgtVocab count the ids, the special tokens included.
	SrcVocab int `yaml:"src_vocab" json:"src_vocab"`
	TgtVocab int `yaml:"tgt_vocab" json:"tgt_vocab"`
	// MaxLen bounds the source and target lengths a graph may have.
	MaxLen    int             `yaml:"max_len" json:"max_len"`
	Attention AttentionConfig `yaml:"attention" json:"attention"`
}

// Validate reports the first inconsistent field.
func (c Seq2SeqConfig) Validate() error {
	switch {
	case c.DModel <= 0:
		return fmt.Errorf("d_model must be positive, is %d", c.DModel)
	case c.Heads <= 0 || c.DModel%c.Heads != 0:
		return fmt.Errorf("heads = %d must divide d_model = %d", c.Heads, c.DModel)
	case c.FF <= 0:
		return fmt.Errorf("ff must be positive, is %d", c.FF)
	case c.EncLayers <= 0:
		return fmt.Errorf("enc_layers must be positive, is %d", c.EncLayers)
	case c.DecLayers <= 0:
		return fmt.Errorf("dec_layers must be positive, is %d", c.DecLayers)
	case c.Dropout < 0 || c.Dropout >= 1:
		return fmt.Errorf("dropout must be in [0, 1), is %g", c.Dropout)
	case c.SrcVocab <= 0:
		return fmt.Errorf("src_vocab must be positive, is %d", c.SrcVocab)
	case c.TgtVocab <= 0:
		return fmt.Errorf("tgt_vocab must be positive, is %d", c.TgtVocab)
	case c.MaxLen <= 0:
		return fmt.Errorf("max_len must be positive, is %d", c.MaxLen)
	}
	_, err := NewKernel(c.Attention)
	return err
}

// Seq2Seq is the encoder-decoder Transformer of Vaswani et al. (2017):
//
//	memory = Encoder(Dropout(√d·E_src[src] + PE))
//	logits = Decoder(Dropout(√d·E_tgt[tgtIn] + PE), memory) W_out + b_out
//
// Parameters: src_emb.table, tgt_emb.table, enc.<i>.*, dec.<i>.*, with
// enc.ln and dec.ln with pre-LN or FinalNorm, and out (w [DModel, TgtVocab]
// unless TieOutput, and b). Dropout masks: src_emb.drop, tgt_emb.drop and
// the layers'.
type Seq2Seq struct {
	Config Seq2SeqConfig
}

// Forward: src [B, S] ids, srcMask [B, S] (1 real, 0 padding), tgtIn
// [B, T] ids (<bos> y1 … as datasets.Batch.DecIn), tgtMask [B, T] or nil →
// logits [B, T, TgtVocab]; position t scores the token after tgtIn[:, t]
// and depends on tgtIn[:, :t+1] only. S and T must not exceed MaxLen.
func (m Seq2Seq) Forward(b *graph.Builder, src, srcMask, tgtIn, tgtMask *graph.Node) *graph.Node {
	h, w, bias := m.Decode(b, src, srcMask, tgtIn, tgtMask)
	return graph.Linear(h, w, bias)
}

// Decode is Forward up to the output projection, for losses that fuse
// the projection with the loss (losses.ProjectedTokenCrossEntropy): it
// returns the decoder's output h [B, T, DModel] and the projection's
// weight w [DModel, TgtVocab] and bias [TgtVocab], logits = h w + bias.
// With TieOutput, w is the transposed target embedding table.
func (m Seq2Seq) Decode(b *graph.Builder, src, srcMask, tgtIn, tgtMask *graph.Node) (h, w, bias *graph.Node) {
	memory, y, dec := m.encode(b, src, srcMask, tgtIn)
	h = dec.Forward(b, y, tgtMask, memory, srcMask)
	c := m.Config
	if !c.TieOutput {
		w, bias = denseParams(b, "out", h, c.TgtVocab)
		return h, w, bias
	}
	table := b.Param("tgt_emb.table", []int{c.TgtVocab, c.DModel}, nil)
	return h, graph.Transpose(table, 1, 0), b.Param("out.b", []int{c.TgtVocab}, graph.Zeros)
}

// encode checks Forward's arguments and builds what its decoder reads: the
// encoder's memory [B, S, DModel], the embedded decoder input y
// [B, T, DModel] and the decoder stack. Parameters are created in the
// order Forward has always created them (src_emb, enc, tgt_emb), since
// that order decides their initial values.
func (m Seq2Seq) encode(b *graph.Builder, src, srcMask, tgtIn *graph.Node) (memory, y *graph.Node, dec Decoder) {
	c := m.Config
	if err := c.Validate(); err != nil {
		b.Fail(fmt.Errorf("seq2seq: %w", err))
	}
	kernel, _ := NewKernel(c.Attention)
	ss, ts := graph.Shape(src), graph.Shape(tgtIn)
	if len(ss) != 2 || len(ts) != 2 || ss[0] != ts[0] {
		b.Fail(fmt.Errorf("seq2seq: source %v and target %v must be [B, S] and [B, T]", ss, ts))
	}
	if ss[1] > c.MaxLen || ts[1] > c.MaxLen {
		b.Fail(fmt.Errorf("seq2seq: source length %d or target length %d exceeds max_len %d", ss[1], ts[1], c.MaxLen))
	}
	selfKernel, _ := SelfAttentionKernel(c.Attention)
	dec = Decoder{Name: "dec", Layers: c.DecLayers, FinalNorm: c.FinalNorm, Layer: DecoderLayer{
		Dim: c.DModel, Heads: c.Heads, FF: c.FF, Dropout: c.Dropout, PreLN: c.PreLN, Kernel: kernel, SelfKernel: causalKernel(selfKernel)}}
	memory = encodeSource(b, c, c.SrcVocab, src, srcMask)
	return memory, embedTokens(b, "tgt_emb", c.TgtVocab, c.DModel, c.Dropout, tgtIn), dec
}

// embedTokens is a Transformer's input layer: token embedding name.table
// [vocab, dim], the sinusoidal encoding name.pos and dropout name.drop:
// ids [B, T] → [B, T, dim].
// It is one op (Builder.EmbedTokens), the values of TokenEmbedding,
// PositionalEncoding and Dropout bit for bit, with their names.
func embedTokens(b *graph.Builder, name string, vocab, dim int, dropout float64, ids *graph.Node) *graph.Node {
	scale := math.Sqrt(float64(dim))
	table := b.Param(name+".table", []int{vocab, dim}, graph.Normal(1/scale)) // as TokenEmbedding's
	t := graph.Shape(ids)[1]
	pos := b.Constant(name+".pos", []int{t, dim}, SinusoidalEncoding(t, dim))
	return b.EmbedTokens(name+".drop", table, ids, scale, pos, dropout)
}

// encodeSource is the source side that Seq2Seq and MaskedLM share, with
// the same parameter names so an encoder trains in one and starts the
// other: the embedding src_emb (table [vocab, DModel]) and the encoder
// stack enc (self-attention kernel SelfAttentionKernel(c.Attention)):
// src [B, S] ids, srcMask [B, S] → memory [B, S, DModel]. c's decoder and
// target fields are not read.
func encodeSource(b *graph.Builder, c Seq2SeqConfig, vocab int, src, srcMask *graph.Node) *graph.Node {
	selfKernel, _ := SelfAttentionKernel(c.Attention)
	enc := Encoder{Name: "enc", Layers: c.EncLayers, FinalNorm: c.FinalNorm, Layer: EncoderLayer{
		Dim: c.DModel, Heads: c.Heads, FF: c.FF, Dropout: c.Dropout, PreLN: c.PreLN, Kernel: selfKernel}}
	return enc.Forward(b, embedTokens(b, "src_emb", vocab, c.DModel, c.Dropout, src), srcMask)
}
