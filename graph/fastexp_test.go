package graph

import (
	"math"
	"testing"
)

func TestExpNonPositive(t *testing.T) {
	worst := 0.0
	for i := 0; i <= 200000; i++ {
		x := float64(float32(-90 * float64(i) / 200000))
		got := float64(exp32(float32(x)))
		want := float64(float32(math.Exp(x)))
		if want < 1e-36 { // near float32's smallest normal: absolute error
			if math.Abs(got-want) > 1e-37 {
				t.Fatalf("exp(%v) = %v, want %v", x, got, want)
			}
			continue
		}
		worst = math.Max(worst, math.Abs(got-want)/want)
	}
	if worst > 3e-7 {
		t.Fatalf("worst relative error %v", worst)
	}
	if exp32(0) != 1 {
		t.Fatal("exp(0) ≠ 1")
	}
	d := make([]float64, 2)
	if z := expRow(d, []float64{-0.5, 0}, 0); d[0] != math.Exp(-0.5) || z != 1+math.Exp(-0.5) {
		t.Fatal("float64 rows do not use math.Exp")
	}
}
