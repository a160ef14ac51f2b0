package kernels

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSplitMix64 pins the stream's hash to SplitMix64's published outputs
// for seed 1234567: h_j = SplitMix64(s + (j+1)·γ) is its (j+1)-th output.
func TestSplitMix64(t *testing.T) {
	t.Parallel()
	want := []uint64{6457827717110365317, 3203168211198807973, 9817491932198370423, 4593380528125082431, 16408922859458223821}
	for j, w := range want {
		if got := SplitMix64(1234567 + uint64(j+1)*MaskGamma); got != w {
			t.Fatalf("output %d: %d, want %d", j+1, got, w)
		}
	}
	// Units 0 and 1 of the stream are the halves of the first output.
	m := make([]float64, 2)
	FillMaskGo(m, 1234567, 0, 1<<31, 1)
	kept := func(u uint64) float64 {
		if u < 1<<31 {
			return 1
		}
		return 0
	}
	if h := want[0]; m[0] != kept(h&0xFFFFFFFF) || m[1] != kept(h>>32) {
		t.Fatalf("units %v from output %#x", m, h)
	}
}

// TestMaskKernelsMatchGo: dropout.c's kernels (portable and AVX2) give
// exactly FillMaskGo's masks, for odd and even starts, lengths off the
// 8-unit groups, and thresholds up to 2³² (p → 0).
func TestMaskKernelsMatchGo(t *testing.T) {
	t.Parallel()
	kernels := append(maskKernels(), maskKernel{"FillMask",
		FillMask[float32], FillMask[float64]})
	const seed = 0xDEADBEEFCAFEF00D
	for _, k := range kernels {
		for _, thr := range []uint64{0, 1, 1 << 31, uint64(math.Round(0.9 * (1 << 32))), 1<<32 - 1, 1 << 32} {
			for _, first := range []int{0, 1, 2, 7, 8, 12345} {
				for _, n := range []int{0, 1, 2, 3, 7, 8, 9, 15, 16, 17, 1001} {
					w32, g32 := make([]float32, n), make([]float32, n)
					FillMaskGo(w32, seed, first, thr, float32(1/0.9))
					k.f32(g32, seed, first, thr, float32(1/0.9))
					w64, g64 := make([]float64, n), make([]float64, n)
					FillMaskGo(w64, seed, first, thr, 1/0.9)
					k.f64(g64, seed, first, thr, 1/0.9)
					for i := range n {
						if math.Float32bits(g32[i]) != math.Float32bits(w32[i]) || math.Float64bits(g64[i]) != math.Float64bits(w64[i]) {
							t.Fatalf("%s thr %d first %d n %d: unit %d is %v/%v, Go %v/%v",
								k.name, thr, first, n, i, g32[i], g64[i], w32[i], w64[i])
						}
					}
				}
			}
		}
	}
}

// TestMaskStreamSplits: filling a mask piece by piece, at any cut points,
// gives the mask filled whole — what lets DrawDropout split it over cores.
func TestMaskStreamSplits(t *testing.T) {
	t.Parallel()
	const n, seed, thr = 5000, 42, 1 << 31
	whole := make([]float32, n)
	FillMask(whole, seed, 0, thr, 2)
	rng := rand.New(rand.NewPCG(3, 4))
	for range 20 {
		pieces := make([]float32, n)
		for a := 0; a < n; {
			b := min(n, a+1+rng.IntN(700))
			FillMask(pieces[a:b], seed, a, thr, 2)
			a = b
		}
		if !slices.Equal(pieces, whole) {
			t.Fatal("piecewise fill differs from the whole")
		}
	}
}
