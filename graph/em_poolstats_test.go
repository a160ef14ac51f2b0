package graph_test

import (
	"os"
	"runtime"
	"testing"

	"github.com/probformer/probformer/graph/optim"
	"github.com/probformer/probformer/layers"
)

// TestEMStepPoolStats logs what the parallel sections of a training step
// of layers' BenchmarkEMAttentionRatioDim32 models cost (the
// maxnorm-em-k1v0 model: width 32, 4 heads of 8, batch 32 sets of 50, EM
// with T_k = 1, and its softmax twin), per step over 100 steps of each,
// twice in turn: the EM op runs its problems as Go jobs (RunShares), the
// twin's heads as pool.c jobs, so the Go jobs' counts (taken back: the
// helper had not started when the caller had run every example) say
// how much of the EM passes the helper missed. A measurement, not a
// check: skipped unless PROBFORMER_POOLSTATS is set.
//
//	PROBFORMER_POOLSTATS=1 go test ./graph -run EMStepPoolStats -count 1 -v
func TestEMStepPoolStats(t *testing.T) {
	if os.Getenv("PROBFORMER_POOLSTATS") == "" {
		t.Skip("set PROBFORMER_POOLSTATS to measure the parallel sections")
	}
	for _, kind := range []string{"softmax", "em", "softmax", "em"} {
		step := emRatioStep(t, kind)
		for range 30 {
			step()
		}
		const steps = 100
		s, wall := countSteps(step, steps)
		if s.Sections+s.GoJobs == 0 && runtime.GOMAXPROCS(0) > 1 {
			t.Fatal("no parallel section counted: CountPool(true) counted nothing")
		}
		per := func(v int64) float64 { return float64(v) / steps }
		us := func(v int64) float64 { return float64(v) / steps / 1e3 }
		par := s.SectionNs + s.WaitNs + s.GoSectionNs
		t.Logf("%s, per step (%v a step): %.1f C sections, %.1f wake-ups, %.1f taken back, in C sections %.0f µs; %.1f Go jobs, %.1f taken back, caller wait %.0f µs, in Go sections %.0f µs; serial %.0f µs",
			kind, wall/steps, per(s.Sections), per(s.Wakes), per(s.TakenBack), us(s.SectionNs+s.WaitNs),
			per(s.GoJobs), per(s.GoTakenBack), us(s.GoWaitNs), us(s.GoSectionNs), us(int64(wall)-par))
	}
}

// emRatioStep returns one training step (forward, backward, Adam) of the
// maxnorm model at width 32 on batch 32 sets of 50, with attention kind
// ("em": EM with T_k = 1; "softmax"), as layers' benchmarkRatioSized
// builds it.
func emRatioStep(t *testing.T, kind string) func() {
	const n, dim, batch = 50, 32, 32
	att := layers.AttentionConfig{Kind: kind}
	if kind == "em" {
		att.KeyIters = 1
	}
	cfg := layers.SetTransformerConfig{DimIn: 2, Dim: dim, Heads: 4, DimOut: 2, Encoder: "isab", Blocks: 2,
		Inducing: 16, Seeds: 1, LayerNorm: true, Attention: att}
	prog := setTransformerProgram(t, cfg, batch, n)
	opt := optim.NewAdam(1e-3)
	return func() {
		if err := prog.Run(); err != nil {
			t.Fatal(err)
		}
		if _, err := opt.Step(prog); err != nil {
			t.Fatal(err)
		}
	}
}
