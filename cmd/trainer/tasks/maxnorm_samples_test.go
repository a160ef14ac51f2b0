package tasks

import (
	"math"
	"testing"
)

func TestCorrelation(t *testing.T) {
	x := []float64{1, 2, 3, 4}
	if r := correlation(x, []float64{2, 4, 6, 8}); math.Abs(r-1) > 1e-15 {
		t.Fatalf("r = %v, want 1", r)
	}
	if r := correlation(x, []float64{4, 3, 2, 1}); math.Abs(r+1) > 1e-15 {
		t.Fatalf("r = %v, want −1", r)
	}
	if r := correlation(x, []float64{5, 5, 5, 5}); r != 0 {
		t.Fatalf("r = %v for a constant, want 0", r)
	}
}
