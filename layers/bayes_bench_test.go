package layers

import (
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"github.com/probformer/probformer/graph"
	"github.com/probformer/probformer/graph/optim"
)

// maxnormConfig is the model of the maxnorm preset (configs/presets/
// maxnorm.yaml) at width dim: ISAB(2→dim, 4 heads, 16 inducing points)
// ×2 → PMA(1 seed) → Linear(dim→2), with LayerNorm, and the given
// attention. The preset has dim 64; the PyTorch reference's
// maxnorm-em-k1v0 model has 32 (heads of 8).
func maxnormConfig(att AttentionConfig, dim int) SetTransformerConfig {
	return SetTransformerConfig{DimIn: 2, Dim: dim, Heads: 4, DimOut: 2, Encoder: "isab", Blocks: 2,
		Inducing: 16, Seeds: 1, LayerNorm: true, Attention: att}
}

// maxnormStep is one compiled training step of the maxnorm model (batch
// sets of 50 points, float32): the loss is the MSE plus, as the
// trainer's ELBO has it (layers/BAYES.md §5), the mean of the layers'
// KL penalties with weight 1.
type maxnormStep struct {
	prog *graph.Program
	opt  *optim.Adam
	rng  *rand.Rand
}

// newMaxnormStep is the maxnorm preset's step: width 64, batch 64.
func newMaxnormStep(tb testing.TB, att AttentionConfig) *maxnormStep {
	return newMaxnormStepSized(tb, att, 64, 64)
}

// newMaxnormStepSized is the maxnorm model's step at width dim (4 heads
// of dim/4) on batch sets of 50 points.
func newMaxnormStepSized(tb testing.TB, att AttentionConfig, dim, batch int) *maxnormStep {
	const n = 50
	cfg := maxnormConfig(att, dim)
	prog, err := graph.Compile(graph.NewParams(graph.Float32, 1), func(bd *graph.Builder) error {
		x := bd.Input("x", batch, n, cfg.DimIn)
		y := bd.Input("y", batch, cfg.DimOut)
		pred := graph.Mean(SetTransformer{Config: cfg}.Forward(bd, x, nil), 1)
		loss := graph.Mean(graph.Square(graph.Sub(pred, y)))
		if ps := bd.Penalties(); len(ps) > 0 {
			kl := ps[0]
			for _, p := range ps[1:] {
				kl = graph.Add(kl, p)
			}
			loss = graph.Add(loss, graph.Scale(kl, 1/float64(len(ps))))
		}
		bd.SetLoss(loss)
		return nil
	}, true)
	if err != nil {
		tb.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 1))
	xs := make([]float64, batch*n*cfg.DimIn)
	for i := range xs {
		xs[i] = rng.NormFloat64()
	}
	if err := prog.Feed("x", xs); err != nil {
		tb.Fatal(err)
	}
	if err := prog.Feed("y", make([]float64, batch*cfg.DimOut)); err != nil {
		tb.Fatal(err)
	}
	return &maxnormStep{prog: prog, opt: optim.NewAdam(1e-3), rng: rng}
}

// run is one training step as the trainer takes it: fresh noise (if the
// model has any), forward and backward, Adam.
func (s *maxnormStep) run(tb testing.TB) {
	if s.prog.HasNoise() {
		s.prog.DrawNoise(s.rng)
	}
	if err := s.prog.Run(); err != nil {
		tb.Fatal(err)
	}
	if _, err := s.opt.Step(s.prog); err != nil {
		tb.Fatal(err)
	}
}

// bayesBenchKinds are the attention configurations the benchmarks compare:
// softmax attention and its two Bayesian twins at the maxnorm-bayes
// preset's settings.
var bayesBenchKinds = []struct {
	name string
	att  AttentionConfig
}{
	{"softmax", AttentionConfig{Kind: "softmax"}},
	{"weibull", AttentionConfig{Kind: KindBayesWeibull, K: 10, Prior: PriorContextual, PriorRate: 1}},
	{"lognormal", AttentionConfig{Kind: KindBayesLogNormal, Sigma: 1, Prior: PriorContextual, PriorSigma: 1}},
}

// BenchmarkBayesAttentionStep times one training step (noise draw,
// forward, backward, Adam) of the maxnorm model with softmax attention and
// with each Bayesian kernel, float32. Run it with -count to interleave the
// kinds; BenchmarkBayesAttentionRatio interleaves step by step.
func BenchmarkBayesAttentionStep(b *testing.B) {
	for _, k := range bayesBenchKinds {
		b.Run(k.name, func(b *testing.B) {
			s := newMaxnormStep(b, k.att)
			s.run(b) // first run allocates the buffers
			b.ResetTimer()
			for range b.N {
				s.run(b)
			}
		})
	}
}

// BenchmarkBayesAttentionRatio reports, for each Bayesian kernel, its
// training step time over that of the softmax twin, the two alternating
// step by step so that drifts in machine speed hit both alike: x-softmax
// is the wall-time ratio (1.0 = as fast as softmax attention), cpu-x the
// ratio of the process's CPU time (user + system, helpers and GC
// included), which other processes on a shared machine disturb less.
func BenchmarkBayesAttentionRatio(b *testing.B) {
	for _, k := range bayesBenchKinds[1:] {
		b.Run(k.name, func(b *testing.B) { benchmarkRatio(b, k.att) })
	}
}

// BenchmarkEMAttentionRatio is BenchmarkBayesAttentionRatio for EM
// attention at the maxnorm size: k1-v0 is the maxnorm-em preset (one key
// iteration), k2-alpha-v1 two key iterations with α and one value
// iteration.
func BenchmarkEMAttentionRatio(b *testing.B) {
	for _, k := range []struct {
		name string
		att  AttentionConfig
	}{
		{"k1-v0", AttentionConfig{Kind: "em", KeyIters: 1}},
		{"k2-alpha-v1", AttentionConfig{Kind: "em", KeyIters: 2, AdaptAlpha: true, ValueIters: 1}},
	} {
		b.Run(k.name, func(b *testing.B) { benchmarkRatio(b, k.att) })
	}
}

// BenchmarkEMAttentionRatioDim32 is BenchmarkEMAttentionRatio at the size
// of the PyTorch reference's maxnorm-em-k1v0 model (width 32, 4 heads of
// 8, batch 32 sets of 50; the reference script torch_em_bench.py), where a
// head is so narrow that EM's per-element work, not its products, sets
// its cost: EM with T_k = 1 against its softmax twin, step by step.
func BenchmarkEMAttentionRatioDim32(b *testing.B) {
	b.Run("k1-v0", func(b *testing.B) {
		benchmarkRatioSized(b, AttentionConfig{Kind: "em", KeyIters: 1}, 32, 32)
	})
}

// benchmarkRatio alternates training steps of the maxnorm model with
// softmax attention and with att, and reports their ratios (see
// BenchmarkBayesAttentionRatio).
func benchmarkRatio(b *testing.B, att AttentionConfig) { benchmarkRatioSized(b, att, 64, 64) }

// benchmarkRatioSized is benchmarkRatio at width dim on batch sets.
func benchmarkRatioSized(b *testing.B, att AttentionConfig, dim, batch int) {
	soft, other := newMaxnormStepSized(b, bayesBenchKinds[0].att, dim, batch), newMaxnormStepSized(b, att, dim, batch)
	soft.run(b)
	other.run(b)
	var ts, to, cs, co time.Duration
	b.ResetTimer()
	for i := range b.N {
		// alternate which goes first, so that neither always runs on a
		// warm cache
		first, second, t1, t2, c1, c2 := soft, other, &ts, &to, &cs, &co
		if i%2 == 1 {
			first, second, t1, t2, c1, c2 = other, soft, &to, &ts, &co, &cs
		}
		start, cpu0 := time.Now(), cpuTime()
		first.run(b)
		mid, cpu1 := time.Now(), cpuTime()
		second.run(b)
		*t1 += mid.Sub(start)
		*t2 += time.Since(mid)
		*c1 += cpu1 - cpu0
		*c2 += cpuTime() - cpu1
	}
	b.ReportMetric(float64(to)/float64(ts), "x-softmax")
	b.ReportMetric(float64(co)/float64(cs), "cpu-x")
	b.ReportMetric(float64(ts.Microseconds())/float64(b.N)/1000, "ms-softmax")
	b.ReportMetric(float64(to.Microseconds())/float64(b.N)/1000, "ms-kernel")
}

// cpuTime is the process's CPU time so far, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
