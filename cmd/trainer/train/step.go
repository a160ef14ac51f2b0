package train

import (
	"fmt"
	"math"
)

// Divergence is the error of a step whose loss or gradient is not finite.
// The Loop stops with it, wrapped with the step and the last good
// checkpoint, and leaves the parameters as they were before the step.
type Divergence struct {
	// Why says what was not finite.
	Why string
}

func (d *Divergence) Error() string { return d.Why }

// TrainStep runs training step next (1-based): the learning rate of the
// schedule, a batch, fresh dropout masks and noise, the step-dependent
// inputs, forward and backward (over every micro-batch, with
// Settings.Accumulate), the Adam update and the weight average.
// It returns the loss and the gradient norm before clipping; a non-finite
// loss or gradient is a *Divergence. TrainStep logs, validates and saves
// nothing, and does not advance Step: Run does that around it. Called
// alone, it times or benchmarks a step.
func (l *Loop) TrainStep(next int) (loss, norm float64, err error) {
	if l.sched != nil {
		l.opt.LR = l.sched.At(next, l.set.Steps)
	}
	if l.accum > 1 {
		if loss, err = l.accumulateStep(next); err != nil {
			return 0, 0, fmt.Errorf("step %d: %w", next, err)
		}
	} else {
		if err := l.forwardBackward(next); err != nil {
			return 0, 0, err
		}
		loss, l.tracked = l.train.Loss(), l.train.PenaltyValues()
		if l.parallel() {
			if loss, l.tracked, err = l.reduceStep(loss, l.tracked); err != nil {
				return 0, 0, fmt.Errorf("step %d: %w", next, err)
			}
		}
	}
	if math.IsNaN(loss) || math.IsInf(loss, 0) {
		return loss, 0, &Divergence{fmt.Sprintf("loss is %v", loss)}
	}
	if norm, err = l.opt.Step(l.train); err != nil {
		return loss, 0, &Divergence{err.Error()}
	}
	if l.avg != nil {
		l.avg.Update(next)
	}
	return loss, norm, nil
}

// forwardBackward feeds the training program the batch of step next,
// with fresh dropout masks and noise and the step-dependent inputs, and
// runs it forward and backward.
func (l *Loop) forwardBackward(next int) error {
	if err := l.task.Feed(l.data, l.train, next); err != nil {
		return fmt.Errorf("step %d: %w", next, err)
	}
	l.train.DrawDropout(l.drop)
	l.train.DrawNoise(l.drop)
	if st, ok := l.task.(StepAware); ok {
		if err := st.AtStep(l.train, next, l.set.Steps); err != nil {
			return fmt.Errorf("step %d: %w", next, err)
		}
	}
	if err := l.train.Run(); err != nil {
		return fmt.Errorf("step %d: %w", next, err)
	}
	return nil
}
