//go:build cgo && !purego

package kernels

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestGemmAVX512IsAVX2: on a CPU with AVX-512, the AVX-512 packed kernel
// gives the AVX2 kernel's float32 values bit for bit, over sizes around
// both kernels' blocks (rows 1, 4, 8, 12 and the 6-row AVX2 block;
// columns around 16 and 32; k around the 32 that selects the packed path
// and the 128-deep passes), every transpose, padded leading dimensions,
// β of 0, 1 and 0.3, with and without a bias; and both are within
// float32 rounding of the definition. Gemm's thread splits on the AVX-512
// kernel give the AVX2 kernel's values too.
func TestGemmAVX512IsAVX2(t *testing.T) {
	if !hasAVX512() {
		t.Skip("no AVX-512 on this CPU")
	}
	t.Parallel()
	t.Logf("Gemm runs %s", GemmKernelName())
	rng := rand.New(rand.NewPCG(7, 11))
	ms := []int{1, 2, 3, 4, 5, 7, 8, 11, 12, 13, 15, 16, 17, 24, 33, 64, 65, 1003}
	ns := []int{1, 7, 15, 16, 17, 31, 32, 33, 48, 64, 65, 100, 1030}
	ks := []int{1, 7, 15, 16, 17, 31, 32, 33, 64, 65, 127, 128, 129, 300, 1000}
	checked := 0
	for _, m := range ms {
		for _, n := range ns {
			for _, k := range ks {
				if m*n*k > 1<<23 {
					continue
				}
				for _, tA := range []bool{false, true} {
					for _, tB := range []bool{false, true} {
						cs := (m*131 + n*17 + k) % 3 // vary β and the bias over the shapes
						compareLevels(t, rng, m, n, k, tA, tB, cs, m*n*k <= 1<<20)
						checked++
					}
				}
			}
		}
	}
	// Large products, against each other only, through Gemm's row and
	// column splits as well.
	for _, sz := range [][3]int{{1003, 1030, 300}, {1024, 256, 64}, {64, 256, 1024}, {64, 1030, 1000}, {2048, 64, 64}, {256, 256, 256}} {
		for _, tA := range []bool{false, true} {
			for _, tB := range []bool{false, true} {
				for cs := range 3 {
					compareLevels(t, rng, sz[0], sz[1], sz[2], tA, tB, cs, false)
					checked++
				}
			}
		}
	}
	t.Logf("%d products bit-identical", checked)
}

// compareLevels runs one float32 product on the AVX2 kernel (level 1),
// the AVX-512 kernel (level 2) and Gemm (both threads, the default
// level), and fails unless all three agree bit for bit; with ref, it also
// checks them against naiveGemm. cs picks β = 0, β = 0.3 or a bias.
func compareLevels(t *testing.T, rng *rand.Rand, m, n, k int, tA, tB bool, cs int, ref bool) {
	t.Helper()
	lda, ldb, ldc := k+3, n+5, n+2
	rowsA, rowsB := m, k
	if tA {
		lda, rowsA = m+1, k
	}
	if tB {
		ldb, rowsB = k+2, n
	}
	a := normal(1)(rng, []int{rowsA * lda})
	b := normal(1)(rng, []int{rowsB * ldb})
	c0 := normal(1)(rng, []int{m * ldc})
	a32, b32 := to32(a), to32(b)
	alpha, beta := float32(0.7), float32(0)
	var bias []float32
	switch cs {
	case 1:
		beta = 0.3
	case 2:
		bias = to32(normal(1)(rng, []int{n}))
	}
	avx2, avx512, split := to32(c0), to32(c0), to32(c0)
	gemmKernelAt(1, tA, tB, m, n, k, alpha, a32, lda, b32, ldb, beta, avx2, ldc, bias)
	gemmKernelAt(2, tA, tB, m, n, k, alpha, a32, lda, b32, ldb, beta, avx512, ldc, bias)
	GemmBias(tA, tB, m, n, k, alpha, a32, lda, b32, ldb, beta, split, ldc, bias)
	for i := range avx2 {
		x, y, z := math.Float32bits(avx2[i]), math.Float32bits(avx512[i]), math.Float32bits(split[i])
		if x != y || x != z {
			t.Fatalf("m=%d n=%d k=%d tA=%v tB=%v case %d: element %d (row %d col %d) is %v on AVX2, %v on AVX-512, %v through Gemm",
				m, n, k, tA, tB, cs, i, i/ldc, i%ldc, avx2[i], avx512[i], split[i])
		}
	}
	if !ref {
		return
	}
	want := to64(to32(c0))
	if bias != nil {
		for i := range m {
			for j := range n {
				want[i*ldc+j] = float64(bias[j])
			}
		}
		beta = 1
	}
	naiveGemm(tA, tB, m, n, k, float64(alpha), to64(a32), lda, to64(b32), ldb, float64(beta), want, ldc)
	for i := range m {
		for j := range ldc {
			w, g := want[i*ldc+j], float64(avx512[i*ldc+j])
			if j >= n {
				if avx512[i*ldc+j] != float32(c0[i*ldc+j]) {
					t.Fatalf("m=%d n=%d k=%d: wrote outside the matrix at row %d col %d", m, n, k, i, j)
				}
				continue
			}
			if math.Abs(g-w) > 1e-6*math.Max(1, math.Abs(w))*float64(k+1) {
				t.Fatalf("m=%d n=%d k=%d tA=%v tB=%v case %d: c[%d,%d] = %v, want %v", m, n, k, tA, tB, cs, i, j, g, w)
			}
		}
	}
}

func to64(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}
