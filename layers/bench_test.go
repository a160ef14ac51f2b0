package layers

import (
	"math/rand/v2"
	"testing"

	"github.com/probformer/probformer/graph"
	"github.com/probformer/probformer/graph/graphtest"
	"github.com/probformer/probformer/graph/optim"
)

// BenchmarkSetTransformerStep times one training step (forward, backward,
// Adam) of the fixed model: batch 64 sets of 32 elements of dim 8;
// ISAB(8→64, 4 heads, 16 inducing points) → ISAB(64→64) → PMA(1 seed) →
// Linear(64→8); MSE; float32.
func BenchmarkSetTransformerStep(b *testing.B) {
	const batch, n, dim = 64, 32, 8
	cfg := SetTransformerConfig{DimIn: dim, Dim: 64, Heads: 4, DimOut: dim, Encoder: "isab", Blocks: 2,
		Inducing: 16, Seeds: 1, LayerNorm: false}
	benchmarkSetStep(b, cfg, batch, n)
}

// BenchmarkSetTransformerStepLN is BenchmarkSetTransformerStep with both
// LayerNorms in every MAB: the model of ../shared/bench/torch_quick.py
// maxnorm, to time beside it.
func BenchmarkSetTransformerStepLN(b *testing.B) {
	const batch, n, dim = 64, 32, 8
	cfg := SetTransformerConfig{DimIn: dim, Dim: 64, Heads: 4, DimOut: dim, Encoder: "isab", Blocks: 2,
		Inducing: 16, Seeds: 1, LayerNorm: true}
	benchmarkSetStep(b, cfg, batch, n)
}

func benchmarkSetStep(b *testing.B, cfg SetTransformerConfig, batch, n int) {
	ps := graph.NewParams(graph.Float32, 1)
	prog, err := graph.Compile(ps, func(bd *graph.Builder) error {
		x := bd.Input("x", batch, n, cfg.DimIn)
		y := bd.Input("y", batch, cfg.DimOut)
		pred := graph.Mean(SetTransformer{Config: cfg}.Forward(bd, x, nil), 1)
		bd.SetLoss(graph.Mean(graph.Square(graph.Sub(pred, y))))
		return nil
	}, true)
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 1))
	xs := make([]float64, batch*n*cfg.DimIn)
	for i := range xs {
		xs[i] = rng.NormFloat64()
	}
	ys := make([]float64, batch*cfg.DimOut)
	if err := prog.Feed("x", xs); err != nil {
		b.Fatal(err)
	}
	if err := prog.Feed("y", ys); err != nil {
		b.Fatal(err)
	}
	opt := optim.NewAdam(1e-3)
	b.ResetTimer()
	flops := graph.MatMulFlops()
	for range b.N {
		if err := prog.Run(); err != nil {
			b.Fatal(err)
		}
		if _, err := opt.Step(prog); err != nil {
			b.Fatal(err)
		}
	}
	graphtest.ReportFlops(b, graph.MatMulFlops()-flops)
}

// BenchmarkSetTransformerStepEM is BenchmarkSetTransformerStep, the same
// model and size, with EM attention (em/MATH.md) in every block, one row a
// configuration named by its iterations: k2-alpha-v1 is 2 key-adaptation
// iterations with α and 1 value iteration (PyTorch's setstep-em in the
// reference script, README Performance), k1-v0 one key iteration.
// softmax is the twin, BenchmarkSetTransformerStep again in the same run.
func BenchmarkSetTransformerStepEM(b *testing.B) {
	const batch, n, dim = 64, 32, 8
	for _, c := range []struct {
		name string
		attn AttentionConfig
	}{
		{"softmax", AttentionConfig{}},
		{"k1-v0", AttentionConfig{Kind: "em", KeyIters: 1}},
		{"k2-alpha-v1", AttentionConfig{Kind: "em", KeyIters: 2, ValueIters: 1, AdaptAlpha: true}},
	} {
		b.Run(c.name, func(b *testing.B) {
			cfg := SetTransformerConfig{DimIn: dim, Dim: 64, Heads: 4, DimOut: dim, Encoder: "isab", Blocks: 2,
				Inducing: 16, Seeds: 1, LayerNorm: false, Attention: c.attn}
			benchmarkSetStep(b, cfg, batch, n)
		})
	}
}
