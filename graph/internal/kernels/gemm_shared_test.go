//go:build cgo && !purego

package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"
)

// gemmLevels returns the GEMM kernels a bit test runs on this CPU (1 the
// AVX2 one, 2 the AVX-512 one), and skips the test without AVX2.
func gemmLevels(t *testing.T) []int {
	t.Helper()
	if hasAVX2() == 0 {
		t.Skip("no AVX2 on this CPU")
	}
	levels := []int{1}
	if hasAVX512() {
		levels = append(levels, 2)
	}
	return levels
}

// TestGemmSharedIsOneThread: a product the threads share (gemm.c's
// pf_sgemm_par) gives the values of the same kernel on one thread, bit for
// bit, whatever blocks the threads take: in both modes (rows of packed B
// shared; columns each thread packs), with blocks of several heights and
// widths, on 1, 2 and 3 workers (so the blocks fall differently on the
// threads each run), on the AVX2 and AVX-512 kernels, every transpose, β
// of 0 and 0.3 and a bias, over sizes with edges in every direction,
// several passes over k and more than one 1024-wide block of columns.
func TestGemmSharedIsOneThread(t *testing.T) {
	levels := gemmLevels(t)
	t.Parallel()
	rng := rand.New(rand.NewPCG(13, 17))
	checked := 0
	for _, sz := range [][3]int{{24, 16, 32}, {37, 45, 300}, {64, 256, 1024}, {100, 70, 129}, {13, 100, 64}, {1003, 1030, 33}, {256, 64, 200}} {
		m, n, k := sz[0], sz[1], sz[2]
		for _, level := range levels {
			nr := 16 * level
			// {mode, rb, cw}: mode 1 with rb > 0 cuts tiles of rows too.
			for _, split := range [][3]int{{0, 12, 0}, {0, 24, 0}, {0, 96, 0}, {1, 0, nr}, {1, 0, 2 * nr}, {1, 0, 3 * nr}, {1, 12, nr}, {1, 24, 2 * nr}} {
				for _, workers := range []int{1, 2, 3} {
					for _, tA := range []bool{false, true} {
						for _, tB := range []bool{false, true} {
							cs := (m + n + k + workers + split[1] + split[2]) % 3
							compareShared(t, rng, level, workers, split[0], split[1], split[2], m, n, k, tA, tB, cs)
							checked++
						}
					}
				}
			}
		}
	}
	t.Logf("%d shared products bit-identical to one thread", checked)
}

// paddedOperands draws a product's float32 operands, in this order: A
// [m×k] (or its transpose), B [k×n] (or its transpose) and C [m×n], each
// with leading dimensions past its width so that padding is exercised.
func paddedOperands(rng *rand.Rand, m, n, k int, tA, tB bool) (a, b, c0 []float32, lda, ldb, ldc int) {
	lda, ldb, ldc = k+3, n+5, n+2
	rowsA, rowsB := m, k
	if tA {
		lda, rowsA = m+1, k
	}
	if tB {
		ldb, rowsB = k+2, n
	}
	a = to32(normal(1)(rng, []int{rowsA * lda}))
	b = to32(normal(1)(rng, []int{rowsB * ldb}))
	c0 = to32(normal(1)(rng, []int{m * ldc}))
	return a, b, c0, lda, ldb, ldc
}

// compareShared runs one float32 product through gemmSharedAt, in mode
// with blocks of rb rows and cw columns, and through gemmKernelAt
// (pf_sgemm on one thread) at the same level, and fails unless they agree
// bit for bit, padding between C's rows untouched. cs picks β = 0, β =
// 0.3 or a bias.
func compareShared(t *testing.T, rng *rand.Rand, level, workers, mode, rb, cw, m, n, k int, tA, tB bool, cs int) {
	t.Helper()
	a, b, c0, lda, ldb, ldc := paddedOperands(rng, m, n, k, tA, tB)
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
	gemmSharedAt(cInt(level), workers, mode, rb, cw, tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, shared, ldc, bias)
	for i := range one {
		if math.Float32bits(one[i]) != math.Float32bits(shared[i]) {
			t.Fatalf("level %d, %d workers, mode %d blocks of %d rows, %d columns: m=%d n=%d k=%d tA=%v tB=%v case %d: element %d (row %d col %d) is %v on one thread, %v shared",
				level, workers, mode, rb, cw, m, n, k, tA, tB, cs, i, i/ldc, i%ldc, one[i], shared[i])
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

// BenchmarkGemmShared times, at BenchmarkGemm's shapes, a product shared
// by blocks from a counter (Gemm) against the same product halved between
// the two threads (rows, or columns for few rows: the split Gemm made
// before), alternating the two every iteration so that the machine's
// drift and other processes fall on both alike. It reports each one's
// median and best rate and the ratio of their medians (shared over halved).
func BenchmarkGemmShared(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range []struct {
		tA      bool
		m, k, n int
	}{
		{false, 1024, 64, 256}, {false, 1024, 256, 64}, {false, 2048, 64, 64}, {false, 512, 64, 64},
		{true, 64, 1024, 256}, {true, 256, 1024, 64}, {true, 64, 2048, 64}, {false, 256, 256, 256},
		// The direct path's (n < 16 or k < 32): blocks of rows in C
		// (pf_sgemm_par's mode 2) against halving them through RunShares.
		{false, 2048, 8, 128}, {false, 2048, 128, 8}, {false, 2048, 64, 8},
	} {
		a := to32(normal(1)(rng, []int{c.m * c.k}))
		bb := to32(normal(1)(rng, []int{c.k * c.n}))
		cc := make([]float32, c.m*c.n)
		lda, t := c.k, ""
		if c.tA {
			lda, t = c.m, "t"
		}
		halved := func() {
			m, n, k := c.m, c.n, c.k
			if m <= 128 { // columns, at a multiple of 32
				h := n / 64 * 32
				RunShares(2, func(w int) {
					if w == 0 {
						gemmKernel(c.tA, false, m, h, k, 1, a, lda, bb, n, 0, cc, n, nil)
					} else {
						gemmKernel(c.tA, false, m, n-h, k, 1, a, lda, bb[h:], n, 0, cc[h:], n, nil)
					}
				})
				return
			}
			h := m / 2
			off := h * lda
			if c.tA {
				off = h
			}
			RunShares(2, func(w int) {
				if w == 0 {
					gemmKernel(c.tA, false, h, n, k, 1, a, lda, bb, n, 0, cc, n, nil)
				} else {
					gemmKernel(c.tA, false, m-h, n, k, 1, a[off:], lda, bb, n, 0, cc[h*n:], n, nil)
				}
			})
		}
		b.Run(fmt.Sprintf("%dx%dx%d%s", c.m, c.k, c.n, t), func(b *testing.B) {
			var shared, half []time.Duration
			for i := range b.N {
				t0 := time.Now()
				if i%2 == 0 {
					Gemm(c.tA, false, c.m, c.n, c.k, 1, a, lda, bb, c.n, 0, cc, c.n)
					shared = append(shared, time.Since(t0))
				} else {
					halved()
					half = append(half, time.Since(t0))
				}
			}
			if len(half) == 0 {
				return
			}
			flop := float64(2 * c.m * c.n * c.k)
			slices.Sort(shared)
			slices.Sort(half)
			ms, mh := shared[len(shared)/2].Seconds(), half[len(half)/2].Seconds()
			b.ReportMetric(flop/ms/1e9, "shared-median-GFLOP/s")
			b.ReportMetric(flop/shared[0].Seconds()/1e9, "shared-best-GFLOP/s")
			b.ReportMetric(flop/mh/1e9, "halved-median-GFLOP/s")
			b.ReportMetric(flop/half[0].Seconds()/1e9, "halved-best-GFLOP/s")
			b.ReportMetric(mh/ms, "median-speedup")
		})
	}
}

// TestGemmSharesMeetAnywhere: a product shared by rows (modes 0 and 2)
// gives pf_sgemm's bits on one thread wherever the caller's rows from the
// front and a helper's from the back meet, the helper's first block
// holding the rows past the last multiple of the unit: the two shares are
// run one after the other, the helper's first, meeting at rows that do
// and do not fall on a block's edge.
func TestGemmSharesMeetAnywhere(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 43))
	checked := 0
	for _, level := range gemmLevels(t) {
		for _, c := range []struct{ mode, rb, m, n, k int }{{0, 24, 97, 40, 64}, {0, 36, 145, 33, 140}, {0, 96, 301, 64, 200},
			{2, 24, 97, 8, 40}, {2, 48, 145, 40, 20}} {
			for _, x := range []int{0, 1, 11, 12, 13, c.m / 2, c.m - 13, c.m - 1, c.m} {
				for _, tA := range []bool{false, true} {
					for _, tB := range []bool{false, true} {
						a, b, c0, lda, ldb, ldc := paddedOperands(rng, c.m, c.n, c.k, tA, tB)
						var bias []float32
						beta := float32(0.3)
						if x%2 == 1 {
							bias, beta = to32(normal(1)(rng, []int{c.n})), 0
						}
						one, met := append([]float32(nil), c0...), append([]float32(nil), c0...)
						gemmKernelAt(cInt(level), tA, tB, c.m, c.n, c.k, 0.7, a, lda, b, ldb, beta, one, ldc, bias)
						gemmSharesMeetAt(cInt(level), c.mode, c.rb, tA, tB, c.m, c.n, c.k, 0.7, a, lda, b, ldb, beta, met, ldc, bias, x)
						for i := range one {
							if math.Float32bits(one[i]) != math.Float32bits(met[i]) {
								t.Fatalf("level %d, %+v, meeting at row %d, tA=%v tB=%v: element %d (row %d) is %v on one thread, %v shared",
									level, c, x, tA, tB, i, i/ldc, one[i], met[i])
							}
						}
						checked++
					}
				}
			}
		}
	}
	t.Logf("%d products bit-identical to one thread", checked)
}
