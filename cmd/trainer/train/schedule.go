package train

import (
	"fmt"
	"math"
)

// Schedule gives the learning rate of every step: a linear warm-up from 0
// to LR over Warmup steps, then, by Kind, Constant LR; Cosine from LR down
// to MinLR at the last step; or InverseSqrt, LR·√(Warmup/step) (Vaswani et
// al. 2017).
//
// A resumed run whose length changed (--set training.steps=N) does not
// restart its schedule: a Cosine decay is re-anchored at the resume step
// (Anchor), continuing from the learning rate the run had there down to
// MinLR at the new last step, so the rate never jumps. A run resumed after
// its decay ended thus stays at MinLR. Constant and InverseSqrt do not
// depend on the run's length and are left as they are, as is a run resumed
// during its warm-up (the warm-up does not depend on the length either; the
// decay after it ends at the new last step). The Loop keeps the anchor in
// its checkpoints, so a later resume with the same length continues
// exactly, and one with yet another length re-anchors again.
type Schedule struct {
	Kind      string
	LR, MinLR float64
	Warmup    int
	// Anchor, if set, replaces the Cosine decay from Anchor.Step on.
	Anchor *Anchor
}

// Anchor is where a Cosine decay was restarted: from LR at Step, down to
// MinLR at the run's last step.
type Anchor struct {
	Step int     `json:"step"`
	LR   float64 `json:"lr"`
}

// Schedule kinds of NewSchedule.
const (
	Constant    = "constant"
	Cosine      = "cosine"
	InverseSqrt = "inverse_sqrt"
)

// NewSchedule returns the Schedule of a kind (Constant, Cosine or
// InverseSqrt, which needs warmup > 0).
func NewSchedule(kind string, lr, minLR float64, warmup int) (*Schedule, error) {
	switch {
	case kind != Constant && kind != Cosine && kind != InverseSqrt:
		return nil, fmt.Errorf("schedule %q: want %s, %s or %s", kind, Constant, Cosine, InverseSqrt)
	case warmup < 0:
		return nil, fmt.Errorf("schedule: %d warm-up steps", warmup)
	case kind == InverseSqrt && warmup == 0:
		return nil, fmt.Errorf("schedule %s: want warm-up steps > 0", kind)
	}
	return &Schedule{Kind: kind, LR: lr, MinLR: minLR, Warmup: warmup}, nil
}

// At returns the learning rate of step (1-based) of a run of steps.
func (s *Schedule) At(step, steps int) float64 {
	if a := s.Anchor; a != nil && s.Kind == Cosine && step >= a.Step {
		if step == a.Step {
			return a.LR
		}
		if steps <= a.Step {
			return s.MinLR
		}
		progress := float64(step-a.Step) / float64(steps-a.Step)
		return s.MinLR + (a.LR-s.MinLR)*0.5*(1+math.Cos(math.Pi*progress))
	}
	if step <= s.Warmup {
		return s.LR * float64(step) / float64(s.Warmup)
	}
	if s.Kind == InverseSqrt {
		return s.LR * math.Sqrt(float64(s.Warmup)/float64(step))
	}
	if s.Kind != Cosine || steps <= s.Warmup {
		return s.LR
	}
	progress := float64(step-s.Warmup) / float64(steps-s.Warmup)
	return s.MinLR + (s.LR-s.MinLR)*0.5*(1+math.Cos(math.Pi*progress))
}

// Resized returns the schedule of a run at step whose length changes from
// planned to steps steps: s itself when nothing changes, else a copy whose
// Cosine decay is re-anchored at step (see Schedule).
func (s *Schedule) Resized(step, planned, steps int) *Schedule {
	if s.Kind != Cosine || planned == steps || step <= s.Warmup && s.Anchor == nil {
		return s
	}
	c := *s
	c.Anchor = &Anchor{Step: step, LR: s.At(step, planned)}
	return &c
}

// WarmupWarning is a warning when the warm-up takes more than a tenth of a
// run of steps steps (the peak rate then comes late, or never: a warm-up
// is not shortened with the run), or "" when it does not. It is the
// warning of a run from step 0: WarmupWarningFrom(0, steps).
func (s *Schedule) WarmupWarning(steps int) string {
	return s.WarmupWarningFrom(0, steps)
}

// WarmupWarningFrom is WarmupWarning for a session that starts at step
// from (a resumed run): "" once the warm-up is over by then (from ≥
// Warmup), as nothing is left of it to warn about.
func (s *Schedule) WarmupWarningFrom(from, steps int) string {
	if s.Warmup*10 <= steps || from >= s.Warmup {
		return ""
	}
	peak := fmt.Sprintf("the learning rate peaks at step %d", s.Warmup)
	if s.Warmup >= steps {
		peak = fmt.Sprintf("the learning rate reaches optimizer.lr only at step %d, the last", s.Warmup)
		if s.Warmup > steps {
			peak = "the learning rate never reaches optimizer.lr"
		}
	}
	return fmt.Sprintf("warning: optimizer.warmup_steps = %d is more than a tenth of training.steps = %d: %s",
		s.Warmup, steps, peak)
}
