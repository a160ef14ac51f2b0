package tasks

import (
	"math/rand/v2"
	"testing"

	"github.com/probformer/probformer/graph"
	"github.com/probformer/probformer/graph/graphtest"
	"github.com/probformer/probformer/graph/optim"
	"github.com/probformer/probformer/layers"
	"github.com/probformer/probformer/losses"
)

// BenchmarkSeq2SeqStep times one training step (forward, backward, Adam)
// of ../shared/bench/torch_quick.py seq2seq's Transformer, to time beside
// it: batch 64, source and target length 16, vocabularies of 64, d_model
// 64, 4 heads, feed-forward 256, 2 encoder and 2 decoder layers, dropout
// 0, cross-entropy; float32. The loss is built as the trainer builds it
// (Seq2Seq.buildModel): Seq2Seq.Decode and the fused
// ProjectedTokenCrossEntropy.
func BenchmarkSeq2SeqStep(b *testing.B) { benchmarkSeq2SeqStep(b, 0, 0) }

// BenchmarkSeq2SeqStepDropout is BenchmarkSeq2SeqStep with the
// seq2seq-toy preset's dropout 0.1 and label smoothing 0.1, which
// PyTorch's reference model leaves out.
func BenchmarkSeq2SeqStepDropout(b *testing.B) { benchmarkSeq2SeqStep(b, 0.1, 0.1) }

func benchmarkSeq2SeqStep(b *testing.B, dropout, smoothing float64) {
	const batch, n, vocab = 64, 16, 64
	cfg := layers.Seq2SeqConfig{DModel: 64, Heads: 4, FF: 256, EncLayers: 2, DecLayers: 2, Dropout: dropout,
		SrcVocab: vocab, TgtVocab: vocab, MaxLen: n}
	prog, err := graph.Compile(graph.NewParams(graph.Float32, 1), func(bd *graph.Builder) error {
		h, w, bias := layers.Seq2Seq{Config: cfg}.Decode(bd, bd.IndexInput("src", batch, n), bd.Input("src_mask", batch, n),
			bd.IndexInput("tgt_in", batch, n), bd.Input("tgt_mask", batch, n))
		loss, err := losses.ProjectedTokenCrossEntropy(bd, h, w, bias, bd.IndexInput("tgt_out", batch, n), bd.Input("loss_mask", batch, n), smoothing)
		bd.SetLoss(loss)
		return err
	}, true)
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 1))
	ids := make([]int, batch*n)
	ones := make([]float64, batch*n)
	for i := range ids {
		ids[i] = 4 + rng.IntN(vocab-4)
		ones[i] = 1
	}
	for _, in := range []string{"src", "tgt_in", "tgt_out"} {
		if err := prog.FeedIndices(in, ids); err != nil {
			b.Fatal(err)
		}
	}
	for _, in := range []string{"src_mask", "tgt_mask", "loss_mask"} {
		if err := prog.Feed(in, ones); err != nil {
			b.Fatal(err)
		}
	}
	opt := optim.NewAdam(1e-3)
	b.ResetTimer()
	flops := graph.MatMulFlops()
	for range b.N {
		prog.DrawDropout(rng)
		if err := prog.Run(); err != nil {
			b.Fatal(err)
		}
		if _, err := opt.Step(prog); err != nil {
			b.Fatal(err)
		}
	}
	graphtest.ReportFlops(b, graph.MatMulFlops()-flops)
}
