package graph

import (
	"runtime"
	"sync"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// float is the element type of a graph's values.
type float interface{ float32 | float64 }

func trans(t bool) blas.Transpose {
	if t {
		return blas.Trans
	}
	return blas.NoTrans
}

// gemm computes c ← α·op(a)·op(b) + β·c on row-major matrices with leading
// dimensions lda, ldb, ldc, so heads can be strided views of [B, N, H·d].
func gemm[T float](tA, tB bool, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int) {
	var impl gonum.Implementation
	switch a := any(a).(type) {
	case []float32:
		impl.Sgemm(trans(tA), trans(tB), m, n, k, float32(alpha), a, lda, any(b).([]float32), ldb, float32(beta), any(c).([]float32), ldc)
	case []float64:
		impl.Dgemm(trans(tA), trans(tB), m, n, k, float64(alpha), a, lda, any(b).([]float64), ldb, float64(beta), any(c).([]float64), ldc)
	}
}

// parallelFor runs f(i) for i in [0, n) on up to GOMAXPROCS goroutines,
// each with its own worker index for scratch space. Gorgonia's tape
// machine runs one op at a time, so this is how a step uses both cores.
func parallelFor(n int, f func(worker, i int)) {
	workers := min(runtime.GOMAXPROCS(0), n)
	if workers <= 1 {
		for i := range n {
			f(0, i)
		}
		return
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += workers {
				f(w, i)
			}
		}()
	}
	wg.Wait()
}
