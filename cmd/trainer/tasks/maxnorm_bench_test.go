package tasks

import (
	"math/rand/v2"
	"testing"

	"github.com/probformer/probformer/configs"
	"github.com/probformer/probformer/graph"
	"github.com/probformer/probformer/graph/optim"
)

// BenchmarkMaxNormStep times one training step (forward, backward, Adam;
// drawing the batch is not timed, drawing the attention noise is) of the
// maxnorm preset's model (batch 64 sets of 50 points in the plane;
// ISAB(64, 4 heads, 16 inducing points) ×2 → PMA → Linear; LayerNorm;
// MSE; float32) with each attention kind, so that every probabilistic
// kernel has a softmax twin of the same size in the same run. A row's
// name says what it runs: em-kK-vV is EM attention with T_k = K key
// adaptation iterations (em/MATH.md §4; "alpha" adapts α too) and
// T_v = V value iterations (§3), linked prior; em-k1-v0 is the maxnorm-em
// preset. The -dim32-batch32 rows are the size of the PyTorch reference
// script's maxnorm-em-k1v0 model (width 32, batch 32; README,
// Performance).
func BenchmarkMaxNormStep(b *testing.B) {
	em := func(k, v string, alpha bool, more ...string) []string {
		a := "false"
		if alpha {
			a = "true"
		}
		return append([]string{"model.attention.kind=em", "model.attention.key_iters=" + k,
			"model.attention.value_iters=" + v, "model.attention.adapt_alpha=" + a}, more...)
	}
	small := []string{"model.dim=32", "training.batch=32"}
	for _, c := range []struct {
		name string
		sets []string
	}{
		{"softmax", nil},
		{"em-k1-v0", em("1", "0", false)},
		{"em-k2-alpha-v1", em("2", "1", true)},
		{"bayes-weibull", []string{"model.attention.kind=bayes-weibull"}},
		{"bayes-lognormal", []string{"model.attention.kind=bayes-lognormal"}},
		{"softmax-dim32-batch32", small},
		{"em-k1-v0-dim32-batch32", em("1", "0", false, small...)},
	} {
		b.Run(c.name, func(b *testing.B) {
			cfg, err := configs.Load("maxnorm", c.sets)
			if err != nil {
				b.Fatal(err)
			}
			task, err := newMaxNormTask(cfg, cfg.Data.(*MaxNormData), cfg.Model.(*MaxNormModel))
			if err != nil {
				b.Fatal(err)
			}
			dt, err := graph.ParseDType(cfg.DType)
			if err != nil {
				b.Fatal(err)
			}
			prog, err := graph.Compile(graph.NewParams(dt, cfg.Seed), task.Build(cfg.Training.Batch), true)
			if err != nil {
				b.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(1, 1))
			if err := task.Feed(rng, prog, 1); err != nil {
				b.Fatal(err)
			}
			opt := optim.NewAdam(cfg.Optimizer.LR)
			b.ResetTimer()
			for range b.N {
				prog.DrawNoise(rng)
				if err := prog.Run(); err != nil {
					b.Fatal(err)
				}
				if _, err := opt.Step(prog); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
