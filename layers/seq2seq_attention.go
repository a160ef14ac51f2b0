package layers

import (
	"fmt"

	"github.com/probformer/probformer/graph"
)

// CrossWeights returns the weights [B, H, T, S] with which the layer's
// cross-attention reads memory when Forward runs with the same arguments:
// y [B, T, Dim], tgtMask [B, T] or nil, memory [B, S, Dim], srcMask [B, S]
// or nil. Row t of head h is
//
//	softmax(q_h(t) k_h(s)ᵀ / √d + mask)  over source positions s
//
// for softmax attention, where q is computed from the output of the
// self-attention sub-layer (after its LayerNorm ln2 when PreLN). Padded
// source positions get weight 0. It is nil if the kernel does not expose
// its weights (see WeightsKernel).
func (l DecoderLayer) CrossWeights(b *graph.Builder, y, tgtMask, memory, srcMask *graph.Node) *graph.Node {
	h := l.selfSublayer(b, y, tgtMask)
	if l.PreLN {
		// As sublayer does: pre-LN normalises the sub-layer's input.
		h = layerNorm(b, l.Name+".ln2", h)
	}
	return l.cross().Weights(b, h, memory, l.crossMask(tgtMask, srcMask))
}

// CrossAttention returns the weights [B, H, T, S] with which decoder
// layer `layer` (0-based) attends to the source in Forward with the same
// arguments: src [B, S] ids, srcMask [B, S], tgtIn [B, T] ids, tgtMask
// [B, T] or nil. Row t belongs to decoder position t, the one that reads
// tgtIn[:, t] and predicts the next token, so with tgtIn = <bos> y1 … yn
// the rows are the weights behind y1 … yn <eos>.
//
// It builds the encoder and the decoder up to that layer's cross-attention
// only, from the parameters Forward uses (src_emb, enc.*, tgt_emb,
// dec.<i>.* for i ≤ layer), so it creates none of its own when compiled
// over a model's parameters. It names its positional-encoding constants as
// Forward does, so a graph holds one of the two, not both. It is nil if
// the attention kernel does not expose its weights.
func (m Seq2Seq) CrossAttention(b *graph.Builder, src, srcMask, tgtIn, tgtMask *graph.Node, layer int) *graph.Node {
	memory, y, dec := m.encode(b, src, srcMask, tgtIn)
	if layer < 0 || layer >= dec.Layers {
		b.Fail(fmt.Errorf("seq2seq: decoder layer %d out of range [0, %d)", layer, dec.Layers))
	}
	for i := range layer {
		y = dec.layer(i).Forward(b, y, tgtMask, memory, srcMask)
	}
	return dec.layer(layer).CrossWeights(b, y, tgtMask, memory, srcMask)
}
