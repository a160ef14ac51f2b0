//go:build cgo && !purego

package kernels

import (
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
)

// TestGemmSharedIsOneThread: a product the threads share (gemm.c's
// pf_sgemm_par) gives the values of the same kernel on one thread, bit for
// bit, whatever blocks the threads take: in both modes (rows of packed B
// shared; columns each thread packs), with blocks of several heights and
// widths, on 1, 2 and 3 workers (so the blocks fall differently on the
// threads each run), on the AVX2 and AVX-512 kernels, every transpose, β
// of 0 and 0.3 and a bias, over sizes with edges in every direction,
// several passes over k and more than one 1024-wide block of columns.
func TestGemmSharedIsOneThread(t *testing.T) {
	if hasAVX2() == 0 {
		t.Skip("no AVX2 on this CPU")
	}
	t.Parallel()
	levels := []int{1}
	if hasAVX512() {
		levels = append(levels, 2)
	}
	rng := rand.New(rand.NewPCG(13, 17))
	checked := 0
	for _, sz := range [][3]int{{24, 16, 32}, {37, 45, 300}, {64, 256, 1024}, {100, 70, 129}, {13, 100, 64}, {1003, 1030, 33}, {256, 64, 200}} {
		m, n, k := sz[0], sz[1], sz[2]
		for _, level := range levels {
			nr := 16 * level
			for _, split := range [][2]int{{0, 12}, {0, 24}, {0, 96}, {1, nr}, {1, 2 * nr}, {1, 3 * nr}} {
				for _, workers := range []int{1, 2, 3} {
					for _, tA := range []bool{false, true} {
						for _, tB := range []bool{false, true} {
							cs := (m + n + k + workers + split[1]) % 3
							compareShared(t, rng, level, workers, split[0], split[1], m, n, k, tA, tB, cs)
							checked++
						}
					}
				}
			}
		}
	}
	t.Logf("%d shared products bit-identical to one thread", checked)
}

// compareShared runs one float32 product through gemmSharedAt and through
// gemmKernelAt (pf_sgemm on one thread) at the same level, and fails
// unless they agree bit for bit, padding between C's rows untouched. cs
// picks β = 0, β = 0.3 or a bias.
func compareShared(t *testing.T, rng *rand.Rand, level, workers, mode, blk, m, n, k int, tA, tB bool, cs int) {
	t.Helper()
	lda, ldb, ldc := k+3, n+5, n+2
	rowsA, rowsB := m, k
	if tA {
		lda, rowsA = m+1, k
	}
	if tB {
		ldb, rowsB = k+2, n
	}
	a := to32(normal(1)(rng, []int{rowsA * lda}))
	b := to32(normal(1)(rng, []int{rowsB * ldb}))
	c0 := to32(normal(1)(rng, []int{m * ldc}))
	alpha, beta := float32(0.7), float32(0)
	var bias []float32
	switch cs {
	case 1:
		beta = 0.3
	case 2:
		bias = to32(normal(1)(rng, []int{n}))
	}
	one, shared := append([]float32(nil), c0...), append([]float32(nil), c0...)
	gemmKernelAt(cInt(level), tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, one, ldc, bias)
	rb, cw := blk, blk
	gemmSharedAt(cInt(level), workers, mode, rb, cw, tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, shared, ldc, bias)
	for i := range one {
		if math.Float32bits(one[i]) != math.Float32bits(shared[i]) {
			t.Fatalf("level %d, %d workers, mode %d blocks of %d: m=%d n=%d k=%d tA=%v tB=%v case %d: element %d (row %d col %d) is %v on one thread, %v shared",
				level, workers, mode, blk, m, n, k, tA, tB, cs, i, i/ldc, i%ldc, one[i], shared[i])
		}
	}
}

// TestGemmThreadsSameBits: Gemm gives the same bits on GOMAXPROCS 1 and
// 2 at the benchmark's shapes (which take the shared path on two) and at
// small ones (which do not).
func TestGemmThreadsSameBits(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 23))
	for _, sz := range [][4]int{{1024, 256, 64, 0}, {1024, 64, 256, 0}, {64, 256, 1024, 1}, {256, 64, 1024, 1}, {64, 64, 2048, 1}, {256, 256, 256, 0}, {20, 40, 600, 0}, {16, 48, 400, 1}, {5, 7, 9, 0}} {
		m, n, k, tA := sz[0], sz[1], sz[2], sz[3] == 1
		a := to32(normal(1)(rng, []int{m * k}))
		b := to32(normal(1)(rng, []int{k * n}))
		lda := k
		if tA {
			lda = m
		}
		var got [2][]float32
		for i, procs := range []int{1, 2} {
			prev := runtime.GOMAXPROCS(procs)
			got[i] = make([]float32, m*n)
			Gemm(tA, false, m, n, k, 1, a, lda, b, n, 0, got[i], n)
			runtime.GOMAXPROCS(prev)
		}
		for i := range got[0] {
			if math.Float32bits(got[0][i]) != math.Float32bits(got[1][i]) {
				t.Fatalf("%v: element %d is %v on one thread, %v on two", sz, i, got[0][i], got[1][i])
			}
		}
	}
}
