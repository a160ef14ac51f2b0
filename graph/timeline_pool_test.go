package graph_test

import (
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/probformer/probformer/graph/internal/kernels"
	"github.com/probformer/probformer/graph/optim"
)

// TestStepPoolStats logs what the parallel sections of a Set Transformer
// step (the model of layers' BenchmarkSetTransformerStepLN) cost, per
// step over 100 steps: sections handed to the helper, its wake-ups and
// their latency, shares taken back, the caller's wait for the helper's
// last block and the helper's idle time before the caller's. A
// measurement, not a check: skipped unless PROBFORMER_POOLSTATS is set.
//
//	PROBFORMER_POOLSTATS=1 go test ./graph -run StepPoolStats -count 1 -v
func TestStepPoolStats(t *testing.T) {
	if os.Getenv("PROBFORMER_POOLSTATS") == "" {
		t.Skip("set PROBFORMER_POOLSTATS to measure the parallel sections")
	}
	prog := setTransformerStep(t)
	opt := optim.NewAdam(1e-3)
	step := func() {
		if err := prog.Run(); err != nil {
			t.Fatal(err)
		}
		if _, err := opt.Step(prog); err != nil {
			t.Fatal(err)
		}
	}
	for range 30 {
		step()
	}
	const steps = 100
	kernels.CountPool(true)
	start := time.Now()
	for range steps {
		step()
	}
	wall := time.Since(start)
	kernels.CountPool(false)
	s := kernels.ReadPoolStats()
	if s.Sections == 0 && runtime.GOMAXPROCS(0) > 1 {
		t.Fatal("no parallel section counted: CountPool(true) counted nothing")
	}
	per := func(v int64) float64 { return float64(v) / steps }
	us := func(v int64) float64 { return float64(v) / steps / 1e3 }
	avg := func(ns, n int64) float64 {
		if n == 0 {
			return 0
		}
		return float64(ns) / float64(n) / 1e3
	}
	t.Logf("per step (%d steps, %v a step): %.1f C sections, %.1f wake-ups, %.1f started polling (mean %.2f µs after the post), %.1f after a wake-up (mean %.2f µs), longest %.1f µs, %.1f later than 10 µs, %.1f taken back; caller's own time %.0f µs, its wait for the helper %.0f µs, helper idle before the caller %.0f µs; %.1f helper sleeps; %.1f Go jobs, %.1f taken back, caller wait %.0f µs",
		steps, wall/steps, per(s.Sections), per(s.Wakes), per(s.Started), avg(s.StartNs, s.Started),
		per(s.WokeStarted), avg(s.WokeStartNs, s.WokeStarted), float64(s.StartMaxNs)/1e3, per(s.StartLate),
		per(s.TakenBack), us(s.SectionNs), us(s.WaitNs), us(s.HelperIdleNs), per(s.Sleeps), per(s.GoJobs),
		per(s.GoTakenBack), us(s.GoWaitNs))
}
