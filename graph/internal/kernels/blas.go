package kernels

import (
	"runtime"
)

// Float is the element type of the kernels' values: a graph's dtypes.
type Float interface{ float32 | float64 }

// Gemm computes c ← α·op(a)·op(b) + β·c on row-major matrices with leading
// dimensions lda, ldb, ldc, so heads can be strided views of [B, N, H·d].
// op(a) is [m×k] and op(b) [k×n]. Large products are shared between the
// cores: float32 ones on gemm.c's packed kernels in blocks the threads
// take from a shared counter, others by halving the rows.
func Gemm[T Float](tA, tB bool, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int) {
	GemmBias(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, nil)
}

// GemmBias is Gemm, or with a non-nil bias [n], c ← bias + α·op(a)·op(b)
// on every row (beta ignored): the values of copying bias into c's rows
// and taking β = 1, without the copy pass where the kernel can fuse it.
func GemmBias[T Float](tA, tB bool, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int, bias []T) {
	if m == 0 || n == 0 {
		return
	}
	AddMatMulFlops(2 * m * n * k)
	if cs, ok := any(c).([]float32); ok && runtime.GOMAXPROCS(0) > 1 {
		// gemm.c's packed float32 products: the threads take blocks of
		// rows or columns from a shared counter (gemmShared32).
		var bs []float32
		if bias != nil {
			bs = any(bias).([]float32)
		}
		if gemmShared32(tA, tB, m, n, k, any(alpha).(float32), any(a).([]float32), lda, any(b).([]float32), ldb, any(beta).(float32), cs, ldc, bs) {
			return
		}
	}
	// Otherwise (float64, gonum's kernel, small products) halve the rows.
	if m >= 16 && m*n*k >= 1<<18 && runtime.GOMAXPROCS(0) > 1 {
		half := m / 2
		aOff := half * lda
		if tA {
			aOff = half
		}
		RunShares(2, func(w int) {
			if w == 0 {
				gemmKernel(tA, tB, half, n, k, alpha, a, lda, b, ldb, beta, c, ldc, bias)
				return
			}
			gemmKernel(tA, tB, m-half, n, k, alpha, a[aOff:], lda, b, ldb, beta, c[half*ldc:], ldc, bias)
		})
		return
	}
	gemmKernel(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, bias)
}

// ParallelFor runs f(i) for i in [0, n) on up to GOMAXPROCS goroutines
// (the caller and workers.go's helpers), each with its own worker index
// for scratch space: worker w takes i ≡ w (mod workers). Gorgonia's tape
// machine runs one op at a time, so this is how a step uses both cores.
func ParallelFor(n int, f func(worker, i int)) {
	workers := min(runtime.GOMAXPROCS(0), n)
	if workers <= 1 {
		for i := range n {
			f(0, i)
		}
		return
	}
	RunShares(workers, func(w int) {
		for i := w; i < n; i += workers {
			f(w, i)
		}
	})
}

// scaleRows sets c ← β·c on an m×n block, the whole of gemm when k = 0.
// β = 0 sets +0 without reading c, as BLAS does (0·NaN would keep a NaN).
func scaleRows[T Float](m, n int, beta T, c []T, ldc int) {
	for i := range m {
		row := c[i*ldc : i*ldc+n]
		if beta == 0 {
			clear(row)
			continue
		}
		for j := range row {
			row[j] *= beta
		}
	}
}
