//go:build cgo && !purego

package kernels

import (
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
)

// TestGemmDirect512IsAVX2: the AVX-512 direct path (gemm.c's
// sgemm_direct512, the products with n < 16 or k < 32) gives the AVX2
// direct path's float32 values bit for bit, at its edges: k of 1, 7, 8,
// 9 and 31 and past one 128-deep pass, n around 8 (the columns sgemm_avx2
// leaves to its scalar tail), 16, 64 (the 64-column blocks) and beyond,
// rows around the 12-, 8-, 6- and 4-row blocks, every transpose, padded
// leading dimensions, β of 0 (over NaN and -0 in C), 1 and 0.3, and a
// bias; padding between C's rows stays untouched.
func TestGemmDirect512IsAVX2(t *testing.T) {
	if !hasAVX512() {
		t.Skip("no AVX-512 on this CPU")
	}
	t.Parallel()
	rng := rand.New(rand.NewPCG(29, 31))
	ms := []int{1, 3, 4, 5, 6, 7, 8, 11, 12, 13, 17, 24, 37, 100}
	ns := []int{1, 2, 7, 8, 9, 15, 16, 17, 24, 31, 33, 48, 63, 64, 65, 100, 128, 130}
	ks := []int{1, 7, 8, 9, 31}
	checked := 0
	for _, m := range ms {
		for _, n := range ns {
			for _, k := range ks {
				for _, tA := range []bool{false, true} {
					for _, tB := range []bool{false, true} {
						for cs := range 4 {
							compareDirect(t, rng, m, n, k, tA, tB, cs)
							checked++
						}
					}
				}
			}
		}
	}
	// Several passes over k, where n < 16 keeps the product direct.
	for _, sz := range [][3]int{{37, 8, 129}, {13, 15, 300}, {100, 1, 256}, {2048, 8, 128}, {2048, 128, 8}, {2048, 64, 8}, {2048, 8, 64}} {
		for _, tA := range []bool{false, true} {
			for _, tB := range []bool{false, true} {
				for cs := range 4 {
					compareDirect(t, rng, sz[0], sz[1], sz[2], tA, tB, cs)
					checked++
				}
			}
		}
	}
	t.Logf("%d direct products bit-identical", checked)
}

// compareDirect runs one float32 product at level 1 (AVX2) and level 2
// (AVX-512) and fails unless they agree bit for bit. cs picks β = 0 (C
// holding NaN, ±Inf and -0), β = 1, β = 0.3 or a bias.
func compareDirect(t *testing.T, rng *rand.Rand, m, n, k int, tA, tB bool, cs int) {
	t.Helper()
	a, b, c0, lda, ldb, ldc := paddedOperands(rng, m, n, k, tA, tB)
	alpha, beta := float32(0.7), float32(0)
	var bias []float32
	switch cs {
	case 0:
		garbage := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Copysign(0, -1)), 3e38}
		for i := range c0 {
			c0[i] = garbage[i%len(garbage)]
		}
	case 1:
		beta = 1
	case 2:
		beta = 0.3
	case 3:
		bias = to32(normal(1)(rng, []int{n}))
	}
	avx2, avx512 := append([]float32(nil), c0...), append([]float32(nil), c0...)
	gemmKernelAt(1, tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, avx2, ldc, bias)
	gemmKernelAt(2, tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, avx512, ldc, bias)
	for i := range avx2 {
		if math.Float32bits(avx2[i]) != math.Float32bits(avx512[i]) {
			t.Fatalf("m=%d n=%d k=%d tA=%v tB=%v case %d: element %d (row %d col %d) is %v on AVX2, %v on AVX-512",
				m, n, k, tA, tB, cs, i, i/ldc, i%ldc, avx2[i], avx512[i])
		}
		if i%ldc >= n && math.Float32bits(avx512[i]) != math.Float32bits(c0[i]) {
			t.Fatalf("m=%d n=%d k=%d: wrote outside the matrix at row %d col %d", m, n, k, i/ldc, i%ldc)
		}
	}
}

// TestGemmDirectSharedIsOneThread: a direct-path product shared by blocks
// of rows (pf_sgemm_par's mode 2) gives pf_sgemm's values on one thread
// bit for bit, on the AVX2 and AVX-512 levels, 1–3 workers, blocks of
// 24, 48 and 96 rows, every transpose, β of 0, 1 and 0.3 and a bias.
func TestGemmDirectSharedIsOneThread(t *testing.T) {
	levels := gemmLevels(t)
	t.Parallel()
	rng := rand.New(rand.NewPCG(37, 41))
	checked := 0
	for _, sz := range [][3]int{{48, 8, 128}, {100, 7, 33}, {2048, 8, 128}, {2048, 128, 8}, {300, 65, 9}, {97, 15, 300}} {
		m, n, k := sz[0], sz[1], sz[2]
		for _, level := range levels {
			for _, rb := range []int{24, 48, 96} {
				for _, workers := range []int{1, 2, 3} {
					for _, tA := range []bool{false, true} {
						for _, tB := range []bool{false, true} {
							cs := (m + n + k + workers + rb) % 3
							compareShared(t, rng, level, workers, 2, rb, 0, m, n, k, tA, tB, cs)
							checked++
						}
					}
				}
			}
		}
	}
	t.Logf("%d shared direct products bit-identical to one thread", checked)
}

// TestGemmDirectThreadsSameBits: Gemm gives the same bits on GOMAXPROCS
// 1 and 2 at the step's direct-path shapes (the k = 8 input layers, the
// n = 8 output layers and their gradients), with and without a bias.
func TestGemmDirectThreadsSameBits(t *testing.T) {
	rng := rand.New(rand.NewPCG(43, 47))
	for _, sz := range [][5]int{{2048, 128, 8, 0, 0}, {2048, 64, 8, 0, 0}, {2048, 8, 128, 0, 1}, {2048, 8, 64, 0, 1}, {1000, 9, 70, 1, 0}} {
		m, n, k, tA, tB := sz[0], sz[1], sz[2], sz[3] == 1, sz[4] == 1
		a := to32(normal(1)(rng, []int{m * k}))
		b := to32(normal(1)(rng, []int{k * n}))
		bias := to32(normal(1)(rng, []int{n}))
		lda, ldb := k, n
		if tA {
			lda = m
		}
		if tB {
			ldb = k
		}
		for _, bs := range [][]float32{nil, bias} {
			var got [2][]float32
			for i, procs := range []int{1, 2} {
				prev := runtime.GOMAXPROCS(procs)
				got[i] = make([]float32, m*n)
				GemmBias(tA, tB, m, n, k, 1, a, lda, b, ldb, 0, got[i], n, bs)
				runtime.GOMAXPROCS(prev)
			}
			for i := range got[0] {
				if math.Float32bits(got[0][i]) != math.Float32bits(got[1][i]) {
					t.Fatalf("%v bias %v: element %d is %v on one thread, %v on two", sz, bs != nil, i, got[0][i], got[1][i])
				}
			}
		}
	}
}
