//go:build !cgo || purego

package kernels

import (
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// gemmKernel is gonum's pure-Go BLAS: used without cgo or with -tags
// purego.
// A non-nil bias [n] makes it c ← bias + α·op(a)·op(b) on every row, with
// beta ignored.
func gemmKernel[T Float](tA, tB bool, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int, bias []T) {
	if bias != nil {
		for i := range m {
			copy(c[i*ldc:i*ldc+n], bias[:n])
		}
		beta = 1
	}
	if k == 0 || len(a) == 0 || len(b) == 0 {
		scaleRows(m, n, beta, c, ldc)
		return
	}
	var impl gonum.Implementation
	switch cs := any(c).(type) {
	case []float32:
		impl.Sgemm(trans(tA), trans(tB), m, n, k, float32(alpha), any(a).([]float32), lda, any(b).([]float32), ldb, float32(beta), cs, ldc)
	case []float64:
		impl.Dgemm(trans(tA), trans(tB), m, n, k, float64(alpha), any(a).([]float64), lda, any(b).([]float64), ldb, float64(beta), cs, ldc)
	}
}

func trans(t bool) blas.Transpose {
	if t {
		return blas.Trans
	}
	return blas.NoTrans
}

// GemmKernelName names the kernel Gemm runs: gonum's pure Go here.
func GemmKernelName() string { return "purego" }

// gemmShared32: gonum's kernel is split by gemm's rows instead.
func gemmShared32(tA, tB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int, bias []float32) bool {
	return false
}

// GemmParts32: without cgo the caller runs a Gemm a part and colSum.
func GemmParts32(m, k, parts, d int, x, g, dw, db []float32) bool { return false }
