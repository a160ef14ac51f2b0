//go:build cgo && !purego

package kernels

// #cgo CFLAGS: -O3
// #cgo LDFLAGS: -lm
// #include "kernels.h"
import "C"

import (
	"sync"
	"unsafe"
)

// hasAVX2 is whether this CPU runs the AVX2/FMA kernel of gemm.c; it is
// asked once.
var hasAVX2 = sync.OnceValue(func() C.int { return C.pf_has_avx2() })

// gemmKernel runs gemm.c's kernel: AVX2 and FMA where the CPU has them,
// portable C otherwise. Build with -tags purego for gonum's pure-Go BLAS.
// A non-nil bias [n] makes it c ← bias + α·op(a)·op(b) on every row, with
// beta ignored.
func gemmKernel[T Float](tA, tB bool, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int, bias []T) {
	if k == 0 || len(a) == 0 || len(b) == 0 {
		if bias != nil {
			for i := range m {
				copy(c[i*ldc:i*ldc+n], bias[:n])
			}
			return
		}
		scaleRows(m, n, beta, c, ldc)
		return
	}
	switch cs := any(c).(type) {
	case []float32:
		as, bs := any(a).([]float32), any(b).([]float32)
		var bp *C.float
		if bias != nil {
			bp = (*C.float)(unsafe.Pointer(&any(bias).([]float32)[0]))
		}
		C.pf_sgemm(hasAVX2(), cbool(tA), cbool(tB), C.int(m), C.int(n), C.int(k), C.float(alpha),
			(*C.float)(unsafe.Pointer(&as[0])), C.int(lda), (*C.float)(unsafe.Pointer(&bs[0])), C.int(ldb),
			C.float(beta), (*C.float)(unsafe.Pointer(&cs[0])), C.int(ldc), bp)
	case []float64:
		if bias != nil {
			for i := range m {
				copy(c[i*ldc:i*ldc+n], bias[:n])
			}
			beta = 1
		}
		as, bs := any(a).([]float64), any(b).([]float64)
		C.pf_dgemm(hasAVX2(), cbool(tA), cbool(tB), C.int(m), C.int(n), C.int(k), C.double(alpha),
			(*C.double)(unsafe.Pointer(&as[0])), C.int(lda), (*C.double)(unsafe.Pointer(&bs[0])), C.int(ldb),
			C.double(beta), (*C.double)(unsafe.Pointer(&cs[0])), C.int(ldc))
	}
}

func cbool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

// packedGemm reports whether float32 products with n ≥ 16 and k ≥ 32 run
// on gemm.c's packed kernel, whose values do not depend on the columns it
// is given (see splitColumns).
func packedGemm() bool { return hasAVX2() != 0 }
