//go:build !cgo || purego

package graph

import (
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// gemmKernel is gonum's pure-Go BLAS: used without cgo or with -tags
// purego.
// A non-nil bias [n] makes it c ← bias + α·op(a)·op(b) on every row, with
// beta ignored.
func gemmKernel[T float](tA, tB bool, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int, bias []T) {
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

// softmaxRows32 has no pure-Go fast path: weights runs its Go loop.
func softmaxRows32([]float32, int, int, []float32, bool) bool { return false }

// layerNormFwd32 and layerNormBwd32 have no pure-Go fast path: the layer
// norm kernels run their Go loops.
func layerNormFwd32(_, _, _, _ []float32, _ float64, _, _ []float32) bool { return false }
func layerNormBwd32(_, _, _, _, _, _, _, _ []float32) bool                { return false }

// colSum32 and adam32 have no pure-Go fast path: callers run their Go
// loops.
func colSum32(_, _ []float32) bool                               { return false }
func adam32(_, _ []float32, _, _ []float64, _ *[10]float64) bool { return false }

// attnHeadFwd32 and attnHeadBwd32 have no pure-Go fast path: attention
// runs its matrix products.
func attnHeadFwd32([]float32, int, []float32, int, []float32, int, int, int, int, int,
	float32, []float32, bool, []float32, []float32, []float32, int) bool {
	return false
}
func attnHeadBwd32([]float32, int, []float32, int, []float32, int, []float32, int,
	[]float32, []float32, int, int, int, int, float32, []float32, []float32, []float32) bool {
	return false
}

// mul32, addRepeat32 and reluGrad32C have no pure-Go fast path.
func mul32(_, _, _ []float32) bool       { return false }
func addRepeat32(_, _, _ []float32) bool { return false }
func reluGrad32C(_, _, _ []float32) bool { return false }

// relu32 has no pure-Go fast path.
func relu32(_, _ []float32) bool { return false }

// expRow32C has no pure-Go fast path.
func expRow32C(_, _ []float32, _ float32) (float64, bool) { return 0, false }

// maxSum32C and scaleShift32C have no pure-Go fast path.
func maxSum32C([]float32) (float32, float64, bool)   { return 0, 0, false }
func scaleShift32C([]float32, float32, float32) bool { return false }

// packedGemm: gonum's kernel makes no promise about column splits.
func packedGemm() bool { return false }
