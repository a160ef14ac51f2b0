package train

import (
	"fmt"
	"math"
)

// Schedule gives the learning rate of step (1-based) of a run of steps.
type Schedule func(step, steps int) float64

// Schedule kinds of NewSchedule.
const (
	Constant    = "constant"
	Cosine      = "cosine"
	InverseSqrt = "inverse_sqrt"
)

// NewSchedule returns a linear warm-up from 0 to lr over warmup steps,
// then, by kind: Constant lr; Cosine from lr down to minLR at the last
// step; or InverseSqrt, lr·√(warmup/step) (Vaswani et al. 2017), which
// needs warmup > 0.
func NewSchedule(kind string, lr, minLR float64, warmup int) (Schedule, error) {
	switch {
	case kind != Constant && kind != Cosine && kind != InverseSqrt:
		return nil, fmt.Errorf("schedule %q: want %s, %s or %s", kind, Constant, Cosine, InverseSqrt)
	case warmup < 0:
		return nil, fmt.Errorf("schedule: %d warm-up steps", warmup)
	case kind == InverseSqrt && warmup == 0:
		return nil, fmt.Errorf("schedule %s: want warm-up steps > 0", kind)
	}
	return func(step, steps int) float64 {
		if step <= warmup {
			return lr * float64(step) / float64(warmup)
		}
		if kind == InverseSqrt {
			return lr * math.Sqrt(float64(warmup)/float64(step))
		}
		if kind != Cosine || steps <= warmup {
			return lr
		}
		progress := float64(step-warmup) / float64(steps-warmup)
		return minLR + (lr-minLR)*0.5*(1+math.Cos(math.Pi*progress))
	}, nil
}
