package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// naiveGemm is the definition: c ← α·op(a)·op(b) + β·c.
func naiveGemm(tA, tB bool, m, n, k int, alpha float64, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int) {
	for i := range m {
		for j := range n {
			var s float64
			for p := range k {
				var av, bv float64
				if tA {
					av = a[p*lda+i]
				} else {
					av = a[i*lda+p]
				}
				if tB {
					bv = b[j*ldb+p]
				} else {
					bv = b[p*ldb+j]
				}
				s += av * bv
			}
			c[i*ldc+j] = alpha*s + beta*c[i*ldc+j]
		}
	}
}

// TestGemm covers every transpose case, edge sizes around the kernels'
// 4×16 and 6×16 blocks, k beyond one 128-deep pass, n beyond one
// 1024-wide block of packed B, strided views and the row-split path, in
// both dtypes.
func TestGemm(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	sizes := [][3]int{{1, 1, 1}, {3, 5, 7}, {4, 16, 8}, {5, 17, 3}, {7, 9, 33}, {8, 24, 1}, {13, 31, 20}, {64, 64, 64}, {100, 70, 90}, {2, 3, 0},
		{6, 16, 32}, {37, 45, 300}, {13, 17, 129}, {5, 1030, 33}, {70, 33, 40}}
	for _, sz := range sizes {
		m, n, k := sz[0], sz[1], sz[2]
		for _, tA := range []bool{false, true} {
			for _, tB := range []bool{false, true} {
				lda, ldb, ldc := k+2, n+3, n+1
				if tA {
					lda = m + 2
				}
				if tB {
					ldb = k + 3
				}
				rowsA, rowsB := m, k
				if tA {
					rowsA = k
				}
				if tB {
					rowsB = n
				}
				a, b := normal(1)(rng, []int{max(rowsA, 1) * lda}), normal(1)(rng, []int{max(rowsB, 1) * ldb})
				c0 := normal(1)(rng, []int{m * ldc})
				want := append([]float64(nil), c0...)
				naiveGemm(tA, tB, m, n, k, 0.7, a, lda, b, ldb, 0.3, want, ldc)
				got := append([]float64(nil), c0...)
				Gemm(tA, tB, m, n, k, 0.7, a, lda, b, ldb, 0.3, got, ldc)
				a32, b32, c32 := to32(a), to32(b), to32(c0)
				Gemm(tA, tB, m, n, k, float32(0.7), a32, lda, b32, ldb, float32(0.3), c32, ldc)
				for i := range m {
					for j := range n {
						w := want[i*ldc+j]
						if d := math.Abs(got[i*ldc+j] - w); d > 1e-12*math.Max(1, math.Abs(w))*float64(k+1) {
							t.Fatalf("float64 %v tA=%v tB=%v: c[%d,%d] = %v, want %v", sz, tA, tB, i, j, got[i*ldc+j], w)
						}
						if d := math.Abs(float64(c32[i*ldc+j]) - w); d > 1e-5*math.Max(1, math.Abs(w))*float64(k+1) {
							t.Fatalf("float32 %v tA=%v tB=%v: c[%d,%d] = %v, want %v", sz, tA, tB, i, j, c32[i*ldc+j], w)
						}
					}
					// Padding between rows is untouched.
					for j := n; j < ldc && i*ldc+j < len(got); j++ {
						if got[i*ldc+j] != c0[i*ldc+j] {
							t.Fatalf("%v: wrote outside the matrix at row %d col %d", sz, i, j)
						}
					}
				}
			}
		}
	}
}

func to32(v []float64) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}

// BenchmarkGemm times float32 Gemm (both threads, the kernel this CPU
// runs: GemmKernelName; PROBFORMER_GEMM=avx2 keeps it on AVX2) at the
// models' shapes. Each is named as gemm_ref.py (../shared/bench) takes
// it, MxKxN with a trailing t for a transposed A (stored K×M, as a
// weight gradient reads its input), so OpenBLAS can be timed at the same
// shapes: gemm_ref.py 1024x64x256 64x1024x256t ... It reports the mean
// rate and, as gemm_ref.py does, the rate of the fastest run.
func BenchmarkGemm(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	b.Logf("kernel %s", GemmKernelName())
	for _, c := range []struct {
		kind    string
		tA      bool
		m, k, n int
	}{
		{"linear", false, 1024, 64, 256}, // a 64→256 feed-forward layer over 1024 tokens
		{"linear", false, 1024, 256, 64}, // its 256→64 return
		{"linear", false, 2048, 64, 64},  // a 64→64 projection over 2048 tokens
		{"linear", false, 512, 64, 64},   // the same over 512
		{"dW", true, 64, 1024, 256},      // the weight gradient of the first, over 1024 tokens
		{"dW", true, 256, 1024, 64},      // of the second
		{"dW", true, 64, 2048, 64},       // of the projection
		{"square", false, 256, 256, 256}, // gemm_ref.py's square shape
		// The Set Transformer step's (64 sets of 32, dim 64): its ISAB
		// projections and their weight gradients, and the direct path's
		// k = 8 input layer and n = 8 products.
		{"linear", false, 2048, 64, 128}, // a [k v] projection over 2048 rows
		{"dW", true, 64, 1024, 64},       // a projection's weight gradient over 1024 rows
		{"direct", false, 2048, 8, 128},  // the k = 8 input layer's [k v] projection
		{"direct", false, 2048, 8, 64},   // its q projection
		{"direct", false, 2048, 128, 8},  // n = 8: a product into the 8 inputs
		{"direct", false, 2048, 64, 8},
	} {
		a := to32(normal(1)(rng, []int{c.m * c.k}))
		bb := to32(normal(1)(rng, []int{c.k * c.n}))
		cc := make([]float32, c.m*c.n)
		lda, t := c.k, ""
		if c.tA {
			lda, t = c.m, "t"
		}
		b.Run(fmt.Sprintf("%s-%dx%dx%d%s", c.kind, c.m, c.k, c.n, t), func(b *testing.B) {
			runs := make([]time.Duration, b.N)
			// Three untimed products first, as gemm_ref.py runs: the
			// testing package collects garbage before the timed loop,
			// long enough for the helper to go to sleep in pool.c, and a
			// product shorter than its wake-up (512x64x64: ~25 µs on one
			// thread) then finishes alone and leaves it asleep for the
			// next, so that a whole run of 50 could time one thread.
			for range 3 {
				Gemm(c.tA, false, c.m, c.n, c.k, 1, a, lda, bb, c.n, 0, cc, c.n)
			}
			b.ResetTimer()
			for i := range b.N {
				t0 := time.Now()
				Gemm(c.tA, false, c.m, c.n, c.k, 1, a, lda, bb, c.n, 0, cc, c.n)
				runs[i] = time.Since(t0)
			}
			flop := float64(2 * c.m * c.n * c.k)
			b.ReportMetric(flop*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			// gemm_ref.py reports its best run: so does this, with the median
			// run, for a like comparison on a shared machine.
			slices.Sort(runs)
			b.ReportMetric(flop/runs[len(runs)/2].Seconds()/1e9, "median-GFLOP/s")
			b.ReportMetric(flop/runs[0].Seconds()/1e9, "best-GFLOP/s")
		})
	}
}

// TestGemmRowSplitIsExact: an element of C is computed the same way
// whatever rows it is computed with, so sharing C's rows between
// goroutines (or tiling them differently) cannot change a bit; nor does
// sharing its columns, for the few-row products gemm shares that way
// ({64, 600, 100}, and the weight-gradient shapes {64, 64, 1024} and
// {48, 48, 512}), bias included.
func TestGemmRowSplitIsExact(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 3))
	for _, sz := range [][3]int{{64, 256, 300}, {100, 20, 64}, {37, 64, 16}, {64, 600, 100}, {64, 64, 1024}, {48, 48, 512}} {
		m, n, k := sz[0], sz[1], sz[2]
		for _, tA := range []bool{false, true} {
			for _, tB := range []bool{false, true} {
				a := to32(normal(1)(rng, []int{m * k}))
				b := to32(normal(1)(rng, []int{k * n}))
				lda, ldb := k, n
				if tA {
					lda = m
				}
				if tB {
					ldb = k
				}
				whole := make([]float32, m*n)
				gemmKernel(tA, tB, m, n, k, float32(0.5), a, lda, b, ldb, 0, whole, n, nil)
				split := make([]float32, m*n)
				Gemm(tA, tB, m, n, k, float32(0.5), a, lda, b, ldb, 0, split, n)
				rows := make([]float32, m*n)
				for i0 := 0; i0 < m; i0 += 7 {
					h := min(7, m-i0)
					off := i0 * lda
					if tA {
						off = i0
					}
					gemmKernel(tA, tB, h, n, k, float32(0.5), a[off:], lda, b, ldb, 0, rows[i0*n:], n, nil)
				}
				for i := range whole {
					if whole[i] != split[i] || whole[i] != rows[i] {
						t.Fatalf("%v tA=%v tB=%v: element %d is %v whole, %v split, %v by 7 rows", sz, tA, tB, i, whole[i], split[i], rows[i])
					}
				}
				bias := to32(normal(1)(rng, []int{n}))
				gemmKernel(tA, tB, m, n, k, float32(0.5), a, lda, b, ldb, 0, whole, n, bias)
				GemmBias(tA, tB, m, n, k, float32(0.5), a, lda, b, ldb, 0, split, n, bias)
				for i := range whole {
					if whole[i] != split[i] {
						t.Fatalf("%v tA=%v tB=%v with bias: element %d is %v whole, %v split", sz, tA, tB, i, whole[i], split[i])
					}
				}
			}
		}
	}
}

// TestGemmBiasIsCopyThenAdd: the fused bias gives bit for bit the values
// of copying the bias into every row and accumulating with β = 1, on the
// packed and direct paths, across passes over k, on the row-split path
// and with k = 0.
func TestGemmBiasIsCopyThenAdd(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(5, 5))
	for _, sz := range [][3]int{{64, 64, 64}, {37, 45, 300}, {13, 7, 20}, {1024, 64, 64}, {5, 16, 0}} {
		m, n, k := sz[0], sz[1], sz[2]
		a := to32(normal(1)(rng, []int{max(m*k, 1)}))
		b := to32(normal(1)(rng, []int{max(k*n, 1)}))
		bias := to32(normal(1)(rng, []int{n}))
		want := to32(normal(1)(rng, []int{m * n}))
		got := append([]float32(nil), want...) // stale values the fused path must ignore
		for i := range m {
			copy(want[i*n:(i+1)*n], bias)
		}
		Gemm(false, false, m, n, k, 1, a, k, b, n, 1, want, n)
		GemmBias(false, false, m, n, k, 1, a, k, b, n, 0, got, n, bias)
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("%v: element %d is %v, copy-then-add gives %v", sz, i, got[i], want[i])
			}
		}
	}
}

// normal is graph.Normal: an initialiser of N(0, std²) values.
func normal(std float64) func(rng *rand.Rand, shape []int) []float64 {
	return func(rng *rand.Rand, shape []int) []float64 {
		n := 1
		for _, s := range shape {
			n *= s
		}
		v := make([]float64, n)
		for i := range v {
			v[i] = std * rng.NormFloat64()
		}
		return v
	}
}

// TestGemmBetaZeroIgnoresC: with β = 0, as BLAS has it, C's old values
// are not read: NaN, ±Inf and -0 already in C give the bits of a C of +0
// (the packed path's first pass adds to a zero row rather than to C, the
// direct path clears C, k = 0 sets it to +0), on every path Gemm takes
// (direct, packed, several passes, shared by rows or by columns), and
// the padding between C's rows is untouched.
func TestGemmBetaZeroIgnoresC(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 11))
	nan, inf, negz := float32(math.NaN()), float32(math.Inf(1)), float32(math.Copysign(0, -1))
	garbage := []float32{nan, inf, -inf, negz, 3e38, -1}
	for _, sz := range [][3]int{{5, 7, 9}, {37, 45, 300}, {64, 64, 1024}, {1024, 64, 64}, {13, 33, 129}, {6, 16, 0}} {
		m, n, k := sz[0], sz[1], sz[2]
		for _, tA := range []bool{false, true} {
			lda := k
			if tA {
				lda = m
			}
			a := to32(normal(1)(rng, []int{max(m*k, 1)}))
			b := to32(normal(1)(rng, []int{max(k*n, 1)}))
			ldc := n + 3
			want, got := make([]float32, m*ldc), make([]float32, m*ldc)
			for i := range got {
				got[i] = garbage[i%len(garbage)]
				want[i] = got[i]
				if i%ldc < n {
					want[i] = 0
				}
			}
			Gemm(tA, false, m, n, k, 0.7, a, lda, b, n, 1, want, ldc) // β = 1 onto +0
			Gemm(tA, false, m, n, k, 0.7, a, lda, b, n, 0, got, ldc)
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("%v tA=%v: element %d (row %d col %d) is %v over garbage, %v over +0", sz, tA, i, i/ldc, i%ldc, got[i], want[i])
				}
			}
		}
	}
}
