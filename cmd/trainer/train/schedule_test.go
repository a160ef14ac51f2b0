package train

import (
	"math"
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
		if got := s(c.step, c.steps); math.Abs(got-c.want) > 1e-12 {
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
