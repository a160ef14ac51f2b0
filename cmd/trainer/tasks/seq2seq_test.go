package tasks

import (
	"testing"

	"github.com/probformer/probformer/graph"
	"github.com/probformer/probformer/layers"
	"github.com/probformer/probformer/losses"
)

// TestSeq2SeqLossGradients checks the gradients of the seq2seq training
// loss as buildModel wires it, the decoder's output fed to the fused
// projection and loss, for a tied output layer (the transposed target
// embedding table, also read by the embedding) and an untied one, with
// padded target positions skipped. CheckGradients draws no dropout
// masks, so dropout is 0.
func TestSeq2SeqLossGradients(t *testing.T) {
	for i, tie := range []bool{true, false} {
		cfg := layers.Seq2SeqConfig{DModel: 4, Heads: 2, FF: 6, EncLayers: 1, DecLayers: 1, FinalNorm: true,
			TieOutput: tie, SrcVocab: 7, TgtVocab: 6, MaxLen: 8}
		res, err := graph.CheckGradients(graph.NewParams(graph.Float64, uint64(i+1)), func(b *graph.Builder) *graph.Node {
			h, w, bias := layers.Seq2Seq{Config: cfg}.Decode(b,
				b.IndexConstant("src", []int{2, 4}, []int{4, 5, 6, 4, 5, 4, 0, 0}),
				b.Constant("src_mask", []int{2, 4}, []float64{1, 1, 1, 1, 1, 1, 0, 0}),
				b.IndexConstant("tgt_in", []int{2, 3}, []int{2, 4, 0, 2, 5, 4}),
				b.Constant("tgt_mask", []int{2, 3}, []float64{1, 1, 0, 1, 1, 1}))
			loss, err := losses.ProjectedTokenCrossEntropy(b, h, w, bias,
				b.IndexConstant("tgt_out", []int{2, 3}, []int{4, 3, 0, 5, 4, 3}),
				b.Constant("loss_mask", []int{2, 3}, []float64{1, 1, 0, 1, 1, 1}), 0.1)
			if err != nil {
				t.Fatal(err)
			}
			return loss
		}, graph.GradCheckOptions{Seed: uint64(i), MaxPerParam: 6})
		if err != nil {
			t.Fatalf("tie_output %v: %v", tie, err)
		}
		checked := map[string]bool{}
		for _, r := range res {
			checked[r.Param] = true
		}
		if !checked["tgt_emb.table"] || !checked["out.b"] || checked["out.w"] == tie {
			t.Errorf("tie_output %v: checked parameters %v", tie, checked)
		}
	}
}
