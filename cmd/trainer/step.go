package main

import (
	"fmt"
	"math"
)

// divergence is a step whose loss or gradient is not finite.
type divergence struct{ why string }

func (d *divergence) Error() string { return d.why }

// trainStep runs training step next (1-based): the learning rate of the
// schedule, a batch, fresh dropout masks and noise, the step-dependent
// inputs, forward and backward, the Adam update and the weight average. It returns the loss
// and the gradient norm before clipping; a non-finite loss or gradient is
// a *divergence, and the parameters are then left as they were.
func (t *trainer) trainStep(next int) (loss, norm float64, err error) {
	tr := t.cfg.Training
	t.opt.LR = learningRate(t.cfg.Optimizer, next, tr.Steps)
	if err := t.task.feedTrain(t.data, t.train, next); err != nil {
		return 0, 0, fmt.Errorf("step %d: %w", next, err)
	}
	t.train.DrawDropout(t.drop)
	t.train.DrawNoise(t.drop)
	if st, ok := t.task.(stepAware); ok {
		if err := st.atStep(t.train, next, tr.Steps); err != nil {
			return 0, 0, fmt.Errorf("step %d: %w", next, err)
		}
	}
	if err := t.train.Run(); err != nil {
		return 0, 0, fmt.Errorf("step %d: %w", next, err)
	}
	loss = t.train.Loss()
	if math.IsNaN(loss) || math.IsInf(loss, 0) {
		return loss, 0, &divergence{fmt.Sprintf("loss is %v", loss)}
	}
	if norm, err = t.opt.Step(t.train); err != nil {
		return loss, 0, &divergence{err.Error()}
	}
	if t.avg != nil {
		t.avg.update(next)
	}
	return loss, norm, nil
}
