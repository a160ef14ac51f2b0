package train

import (
	"math"
	"strings"
	"testing"
)

// TestSchedule: warm-up, then constant, cosine to min_lr at the last
// step, or the inverse square root; bad kinds and warm-ups are errors.
func TestSchedule(t *testing.T) {
	for _, c := range []struct {
		kind        string
		step, steps int
		want        float64
	}{
		{Constant, 5, 100, 0.5}, {Constant, 10, 100, 1}, {Constant, 80, 100, 1},
		{Cosine, 10, 100, 1}, {Cosine, 55, 100, 0.55}, {Cosine, 100, 100, 0.1},
		{InverseSqrt, 40, 100, 0.5},
	} {
		s, err := NewSchedule(c.kind, 1, 0.1, 10)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.At(c.step, c.steps); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("%s at step %d of %d: %v, want %v", c.kind, c.step, c.steps, got, c.want)
		}
	}
	for _, bad := range []struct {
		kind   string
		warmup int
	}{{"linear", 0}, {Constant, -1}, {InverseSqrt, 0}} {
		if _, err := NewSchedule(bad.kind, 1, 0, bad.warmup); err == nil {
			t.Errorf("%s with warm-up %d: no error", bad.kind, bad.warmup)
		}
	}
}

// TestScheduleResized: a run resumed at step `at` with another length
// never jumps: its learning rate goes on from the one it had at `at`,
// never rises after the warm-up, and ends at min_lr on the new last step.
// Schedules that do not depend on the length are left as they are.
func TestScheduleResized(t *testing.T) {
	for _, c := range []struct {
		name                 string
		kind                 string
		warmup               int
		at, planned, steps   int
		wantAnchor, wantSame bool
	}{
		// The case: a finished 400-step maxnorm run resumed to 1200
		// stayed at 1e-5 until step 400 and went back to 8.6e-4 at 450.
		{"finished run lengthened", Cosine, 200, 400, 400, 1200, true, false},
		{"lengthened mid-decay", Cosine, 200, 300, 400, 1200, true, false},
		{"shortened mid-decay", Cosine, 200, 300, 1200, 400, true, false},
		{"lengthened in the warm-up", Cosine, 200, 150, 400, 1200, false, true},
		{"same length", Cosine, 200, 300, 400, 400, false, true},
		{"constant lengthened", Constant, 200, 300, 400, 1200, false, true},
		{"inverse sqrt lengthened", InverseSqrt, 200, 300, 400, 1200, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := NewSchedule(c.kind, 1e-3, 1e-5, c.warmup)
			if err != nil {
				t.Fatal(err)
			}
			r := s.Resized(c.at, c.planned, c.steps)
			if (r.Anchor != nil) != c.wantAnchor {
				t.Fatalf("anchor %+v, want one: %v", r.Anchor, c.wantAnchor)
			}
			if c.wantSame && r != s {
				t.Errorf("schedule changed, want it as it was")
			}
			prev := s.At(c.at, c.planned)
			for step := c.at + 1; step <= c.steps; step++ {
				lr := r.At(step, c.steps)
				if step <= c.warmup {
					if want := s.At(step, c.steps); lr != want {
						t.Fatalf("warm-up step %d: lr %v, want %v", step, lr, want)
					}
				} else if c.kind != InverseSqrt && lr > prev {
					t.Fatalf("step %d: lr rises from %v to %v", step, prev, lr)
				}
				prev = lr
			}
			if c.kind == Cosine && prev != 1e-5 {
				t.Errorf("last step %d: lr %v, want min_lr 1e-5", c.steps, prev)
			}
			if c.wantAnchor {
				if got, want := r.At(c.at, c.steps), s.At(c.at, c.planned); got != want {
					t.Errorf("at the resume step: lr %v, want the run's %v", got, want)
				}
				// A second resume to the same length keeps the anchor; to
				// another length it re-anchors from where the first left.
				if again := r.Resized(c.at+10, c.steps, c.steps); again != r {
					t.Errorf("resumed again at the same length: schedule changed")
				}
				third := r.Resized(c.at+10, c.steps, c.steps+100)
				if got, want := third.At(c.at+10, c.steps+100), r.At(c.at+10, c.steps); got != want {
					t.Errorf("re-anchored again: lr %v at the resume step, want %v", got, want)
				}
			}
		})
	}
}

// TestWarmupWarning: a warm-up over a tenth of the run is named, with the
// step the rate peaks at; a shorter one is not.
func TestWarmupWarning(t *testing.T) {
	for _, c := range []struct {
		warmup, steps int
		want          string
	}{
		{200, 3000, ""},
		{100, 1000, ""},
		{200, 800, "warmup_steps = 200 is more than a tenth of training.steps = 800: the learning rate peaks at step 200"},
		{800, 800, "reaches optimizer.lr only at step 800, the last"},
		{200, 100, "never reaches optimizer.lr"},
	} {
		s, err := NewSchedule(Cosine, 1e-3, 0, c.warmup)
		if err != nil {
			t.Fatal(err)
		}
		got := s.WarmupWarning(c.steps)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("warm-up %d of %d steps: %q, want %q", c.warmup, c.steps, got, c.want)
		}
	}
}
