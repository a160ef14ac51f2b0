package tasks

import (
	"math"
	"testing"

	"github.com/probformer/probformer/cmd/trainer/train"
	"github.com/probformer/probformer/configs"
	"github.com/probformer/probformer/graph"
	"github.com/probformer/probformer/graph/optim"
)

// TestFloat32RoundingGrowsInTraining measures how far apart two float32
// runs of the maxnorm preset drift when one starts with a single weight
// moved by one ulp (6e-8 relative): by step 150 their mean losses over 10
// steps differ by more than 1e-5, yet stay within 1e-2 of each other. Any
// two float32 computations of the same run that round differently, such
// as one process and two processes that each sum half a batch
// (cmd/trainer's TestMPIMaxNormEqualsOneProcess), can be held to 1e-5
// only over the first hundred steps or so, and to about 1e-2 beyond.
func TestFloat32RoundingGrowsInTraining(t *testing.T) {
	if testing.Short() {
		t.Skip("two runs of 150 training steps; skipped with -short")
	}
	const steps = 150
	curve := func(nudge bool) []float64 {
		cfg, err := configs.Load("maxnorm", nil)
		if err != nil {
			t.Fatal(err)
		}
		tk, err := train.NewTask(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		o := cfg.Optimizer
		opt := optim.NewAdam(o.LR)
		opt.Beta1, opt.Beta2, opt.Eps, opt.WeightDecay, opt.ClipNorm = o.Beta1, o.Beta2, o.Eps, o.WeightDecay, o.ClipNorm
		sched, err := train.NewSchedule(o.Schedule, o.LR, o.MinLR, o.WarmupSteps)
		if err != nil {
			t.Fatal(err)
		}
		s := train.Settings{Steps: steps, Batch: cfg.Training.Batch, Seed: cfg.Seed, DType: graph.Float32,
			Optimizer: opt, Schedule: sched}
		if nudge {
			s.Init = func(p *graph.Params) error {
				w := p.List()[0]
				v := w.Values()
				v[0] = float64(math.Nextafter32(float32(v[0]), float32(math.Inf(1))))
				return w.SetValues(v)
			}
		}
		loop, err := train.New(tk, s)
		if err != nil {
			t.Fatal(err)
		}
		var means []float64
		var sum float64
		for step := 1; step <= steps; step++ {
			loss, _, err := loop.TrainStep(step)
			if err != nil {
				t.Fatal(err)
			}
			if sum += loss; step%10 == 0 {
				means, sum = append(means, sum/10), 0
			}
		}
		return means
	}
	a, b := curve(false), curve(true)
	var worst float64
	for i := range a {
		d := math.Abs(a[i]-b[i]) / math.Abs(a[i])
		worst = max(worst, d)
		if d > 1e-2 {
			t.Errorf("steps %d–%d: relative difference %.2g after a one-ulp nudge, want below 1e-2", 10*i+1, 10*i+10, d)
		}
	}
	if worst <= 1e-5 {
		t.Errorf("the largest relative difference after a one-ulp nudge is %.2g: want above 1e-5 by step %d", worst, steps)
	}
	t.Logf("largest relative difference of 10-step mean losses over %d steps: %.2g", steps, worst)
}
