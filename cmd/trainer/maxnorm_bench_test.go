package main

import (
	"math/rand/v2"
	"testing"

	"probformer/configs"
	"probformer/graph"
)

// BenchmarkMaxNormStep times one training step (forward, backward, Adam)
// of the maxnorm preset as shipped (batch 64 sets of 50 points in the
// plane; ISAB(64, 4 heads, 16 inducing points) ×2 → PMA → Linear; MSE;
// float32) with softmax attention, next to maxnorm-em with growing EM
// iteration counts: T_k key adaptation iterations (em/MATH.md §4) and T_v
// value inference iterations (§3). Differences between neighbouring rows
// give the cost of one iteration of each kind; em-k2-v1 is the maxnorm-em
// preset. Drawing the batch is not timed.
func BenchmarkMaxNormStep(b *testing.B) {
	iters := func(k, v string) []string {
		return []string{"model.attention.key_iters=" + k, "model.attention.value_iters=" + v}
	}
	for _, c := range []struct {
		name, preset string
		sets         []string
	}{
		{"softmax", "maxnorm", nil},
		{"em-k0-v0", "maxnorm-em", iters("0", "0")},
		{"em-k1-v0", "maxnorm-em", iters("1", "0")},
		{"em-k2-v0", "maxnorm-em", iters("2", "0")},
		{"em-k2-v1", "maxnorm-em", nil},
	} {
		b.Run(c.name, func(b *testing.B) {
			cfg, err := configs.Load(c.preset, c.sets)
			if err != nil {
				b.Fatal(err)
			}
			task, err := newMaxNormTask(cfg)
			if err != nil {
				b.Fatal(err)
			}
			dt, err := graph.ParseDType(cfg.DType)
			if err != nil {
				b.Fatal(err)
			}
			prog, err := graph.Compile(graph.NewParams(dt, cfg.Seed), task.build(cfg.Training.Batch), true)
			if err != nil {
				b.Fatal(err)
			}
			if err := task.feedTrain(rand.New(rand.NewPCG(1, 1)), prog, 1); err != nil {
				b.Fatal(err)
			}
			opt := graph.NewAdam(cfg.Optimizer.LR)
			b.ResetTimer()
			for range b.N {
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
