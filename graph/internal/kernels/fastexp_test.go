package kernels

import (
	"math"
	"testing"
)

func TestExpNonPositive(t *testing.T) {
	t.Parallel()
	worst := 0.0
	for i := 0; i <= 200000; i++ {
		x := float64(float32(-90 * float64(i) / 200000))
		got := float64(Exp32(float32(x)))
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
	if Exp32(0) != 1 {
		t.Fatal("exp(0) ≠ 1")
	}
	d := make([]float64, 2)
	if z := ExpRow(d, []float64{-0.5, 0}, 0); d[0] != math.Exp(-0.5) || z != 1+math.Exp(-0.5) {
		t.Fatal("float64 rows do not use math.Exp")
	}
}

// TestExpRow32 checks the float32 row exponentials, vectorised where the
// CPU allows, against math.Exp: every length around the vector width (so
// the masked tail is covered), a vocabulary-sized row, values from 0 to
// below float32's range.
func TestExpRow32(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 2, 7, 8, 9, 15, 16, 17, 31, 4459} {
		src := make([]float32, n)
		for i := range src {
			src[i] = float32(-100*float64(i)/float64(n)) + 3
		}
		dst := make([]float32, n+3)
		for i := range dst {
			dst[i] = -1
		}
		z := expRow32(dst, src, 3)
		var want float64
		for i, x := range src {
			e := math.Exp(float64(x) - 3)
			want += float64(float32(e))
			if e < 1e-36 {
				if dst[i] > 1e-36 {
					t.Fatalf("n=%d: exp(%v) = %v, want about %v", n, x-3, dst[i], e)
				}
				continue
			}
			if math.Abs(float64(dst[i])-e) > 3e-7*e {
				t.Fatalf("n=%d: exp(%v) = %v, want %v", n, x-3, dst[i], e)
			}
		}
		if math.Abs(z-want) > 1e-6*want {
			t.Errorf("n=%d: sum %v, want %v", n, z, want)
		}
		for _, v := range dst[n:] {
			if v != -1 {
				t.Fatalf("n=%d: wrote past the row", n)
			}
		}
	}
}
