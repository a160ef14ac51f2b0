package graph

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/probformer/probformer/graph/internal/kernels"
)

// TestVectorLoopsMatchGo: the AVX2 column sums, element-wise sums and
// products and ReLU gradient (where the build and CPU have them) give bit for bit what their Go loops give, for lengths around the
// vector widths.
func TestVectorLoopsMatchGo(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(8, 8))
	for _, d := range []int{1, 7, 8, 31, 32, 45, 64, 256} {
		x := to32(Normal(1)(rng, []int{13 * d}))
		want, got := make([]float32, d), make([]float32, d)
		colSumGo(x, want)
		if !kernels.ColSum32(x, got) {
			t.Skip("no fast path in this build")
		}
		for j := range want {
			if got[j] != want[j] {
				t.Fatalf("colsum d=%d: s[%d] = %v, Go %v", d, j, got[j], want[j])
			}
		}
	}
	for _, n := range []int{1, 7, 8, 9, 64, 1000} {
		x := to32(Normal(1)(rng, []int{n}))
		y := to32(Normal(1)(rng, []int{n}))
		x[0] = float32(math.Copysign(0, -1)) // −0 passes no gradient
		for _, d := range []int{1, n} {
			b := y[:d]
			want, got := make([]float32, n), make([]float32, n)
			addRepeatGo(x, b, want)
			if !kernels.AddRepeat32(x, b, got) {
				t.Skip("no fast path in this build")
			}
			if !bitsEqual(got, want) {
				t.Fatalf("add n=%d d=%d: %v, Go %v", n, d, got, want)
			}
		}
		want, got := make([]float32, n), make([]float32, n)
		mulIntoGo(x, y, want)
		kernels.Mul32(x, y, got)
		if !bitsEqual(got, want) {
			t.Fatalf("mul n=%d: %v, Go %v", n, got, want)
		}
		x[n-1] = float32(math.NaN())
		for i, v := range x {
			want[i] = max(v, 0)
		}
		kernels.Relu32(x, got)
		if !bitsEqual(got, want) {
			t.Fatalf("relu n=%d: %v, Go %v", n, got, want)
		}
		x[n-1] = 1
		reluGrad32Go(x, y, want)
		kernels.ReluGrad32(x, y, got)
		if !bitsEqual(got, want) {
			t.Fatalf("relu grad n=%d: %v, Go %v", n, got, want)
		}
	}
}

func bitsEqual(a, b []float32) bool {
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return len(a) == len(b)
}

func to32(v []float64) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}
