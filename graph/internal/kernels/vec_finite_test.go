package kernels

import (
	"math"
	"testing"
)

// TestFinite32 checks Finite32 (vec.c's eight-lane test where the CPU has
// AVX2) and its Go loop against math.IsNaN and math.IsInf, with one
// special value at every position of lengths around the eight-lane
// blocks, so the vector part and the tail are both covered.
func TestFinite32(t *testing.T) {
	specials := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)),
		math.MaxFloat32, -math.MaxFloat32, math.SmallestNonzeroFloat32, 0, float32(math.Copysign(0, -1))}
	want := func(x []float32) bool {
		for _, v := range x {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return false
			}
		}
		return true
	}
	for _, n := range []int{0, 1, 7, 8, 9, 15, 16, 17, 31, 33, 100, 1027} {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(i%13) - 6.5
		}
		if got := Finite32(x); got != true || finite32(x) != true {
			t.Fatalf("n %d, all finite: Finite32 %v, finite32 %v", n, got, finite32(x))
		}
		for i := range x {
			for _, s := range specials {
				old := x[i]
				x[i] = s
				if w, got, gogot := want(x), Finite32(x), finite32(x); got != w || gogot != w {
					t.Fatalf("n %d, %v at %d: Finite32 %v, finite32 %v, want %v", n, s, i, got, gogot, w)
				}
				x[i] = old
			}
		}
	}
}
