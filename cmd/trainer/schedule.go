package main

import (
	"math"

	"probformer/configs"
)

// learningRate is the rate at step (1-based): linear warm-up from 0 over
// warmup_steps, then constant, a cosine from lr down to min_lr at the last
// step, or lr·√(warmup/step) (the inverse square root of Vaswani et al.).
func learningRate(o configs.Optimizer, step, steps int) float64 {
	if step <= o.WarmupSteps {
		return o.LR * float64(step) / float64(o.WarmupSteps)
	}
	if o.Schedule == "inverse_sqrt" {
		return o.LR * math.Sqrt(float64(o.WarmupSteps)/float64(step))
	}
	if o.Schedule != "cosine" || steps <= o.WarmupSteps {
		return o.LR
	}
	progress := float64(step-o.WarmupSteps) / float64(steps-o.WarmupSteps)
	return o.MinLR + (o.LR-o.MinLR)*0.5*(1+math.Cos(math.Pi*progress))
}
