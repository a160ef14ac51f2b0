package train

import (
	"errors"
	"fmt"
	"path/filepath"
)

// EarlyStop ends a run whose validation has stopped improving
// (Settings.EarlyStop), as Keras's EarlyStopping and PyTorch Lightning's
// EarlyStopping callback do.
//
// The selection metric of every validation (Task.Selection, in its
// direction) is compared with a reference score: the first validation's,
// then the newest that beat the reference by more than MinDelta. A
// validation that does not counts one; at Patience in a row the run
// stops after that validation (early stopping never ends the run at its
// last step: that run is done anyway). best.ckpt is kept as ever: the
// best score's checkpoint, whatever MinDelta says. The stop writes a
// step checkpoint at its step, whose loop state says it stopped and
// holds the count, a metrics line
//
//	{"step":N,"early_stop":true,"metric":"valid_mse","best":B,"best_step":M,"patience":P,"min_delta":D}
//
// and a line on the progress display (EarlyStopper) and on Out, naming
// the best checkpoint. Resuming a run early stopping ended is an
// ErrStoppedEarly, unless the resumed run's Patience is 0 (off) or
// larger than the count: then it trains on, the count kept.
type EarlyStop struct {
	// Patience is the number of validations in a row without an
	// improvement that ends the run; 0 is off.
	Patience int
	// MinDelta is by how much (absolute, in the metric's units) a score
	// must beat the reference to count as an improvement; 0 is any.
	MinDelta float64
}

// ErrStoppedEarly is the error (errors.Is) of resuming, or running on, a
// run that early stopping ended (EarlyStop).
var ErrStoppedEarly = errors.New("the run was stopped early")

// EarlyStopper is a Progress that shows an early stop: the Loop calls
// EarlyStop with the stop's reason (the metric, its best and the
// patience) after the step's validation and before Finish.
type EarlyStopper interface {
	EarlyStop(step int, why string)
}

// StoppedEarly returns the step early stopping ended the run at, and
// whether it did.
func (l *Loop) StoppedEarly() (step int, ok bool) {
	return l.loop.StoppedAt, l.loop.StoppedAt > 0
}

// improves reports whether sel beats ref by more than delta.
func improves(sel, ref, delta float64, maximize bool) bool {
	if maximize {
		return sel > ref+delta
	}
	return sel < ref-delta
}

// watchEarlyStop counts a validation's selection score sel towards early
// stopping, and reports whether the run is to stop now.
func (l *Loop) watchEarlyStop(sel float64, maximize bool) bool {
	es := l.set.EarlyStop
	if es.Patience <= 0 {
		return false
	}
	if l.loop.StopBestStep == 0 || improves(sel, l.loop.StopBest, es.MinDelta, maximize) {
		l.loop.StopBest, l.loop.StopBestStep, l.loop.StopWait = sel, l.step, 0
		return false
	}
	l.loop.StopWait++
	return l.loop.StopWait >= es.Patience && l.step < l.set.Steps
}

// stopReason says why early stopping ended a run, from its loop state.
func (l *Loop) stopReason(loop loopState) string {
	name, _ := l.task.Selection()
	return fmt.Sprintf("%s has not improved by more than %g in %d %s (since step %d); best %s = %.6g at step %d",
		name, l.set.EarlyStop.MinDelta, loop.StopWait, plural(loop.StopWait, "validation"), loop.StopBestStep,
		name, loop.Best, loop.BestStep)
}

// stopEarly ends the run at this step: it logs the stop, saves a step
// checkpoint that records it, and tells the display and Out.
func (l *Loop) stopEarly(p Progress) error {
	l.loop.StoppedAt = l.step
	why := l.stopReason(l.loop)
	if l.lead() {
		name, _ := l.task.Selection()
		if err := l.record(map[string]any{"early_stop": true, "metric": name, "best": l.loop.Best,
			"best_step": l.loop.BestStep, "patience": l.set.EarlyStop.Patience,
			"min_delta": l.set.EarlyStop.MinDelta, "wall_sec": l.wallSec()}); err != nil {
			return err
		}
	}
	path, err := l.save()
	if err != nil {
		return fmt.Errorf("step %d: early stop: %w", l.step, err)
	}
	if path != "" {
		l.lastGood = path
	}
	if es, ok := p.(EarlyStopper); ok {
		es.EarlyStop(l.step, why)
	}
	p.Finish(l.step)
	fmt.Fprintf(l.set.Out, "stopped early at step %d of %d: %s\nbest checkpoint: %s\n",
		l.step, l.set.Steps, why, filepath.Join(l.set.Dir, BestCheckpoint))
	return nil
}

// checkStoppedEarly refuses to go on with a run early stopping ended at
// step, as loop (a checkpoint's loop state) says, unless this loop's
// EarlyStop lets it: off, or a patience above the count.
func (l *Loop) checkStoppedEarly(loop loopState, step int) error {
	if loop.StoppedAt == 0 {
		return nil
	}
	es := l.set.EarlyStop
	if es.Patience == 0 || es.Patience > loop.StopWait {
		return nil
	}
	return fmt.Errorf("%w at step %d: %s; its best checkpoint is %s. To train on, raise training.early_stop.patience above %d, or set it to 0 (off)",
		ErrStoppedEarly, step, l.stopReason(loop), filepath.Join(l.set.Dir, BestCheckpoint), loop.StopWait)
}
