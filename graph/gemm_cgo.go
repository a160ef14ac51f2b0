//go:build cgo && !purego

package graph

// #cgo CFLAGS: -O3
// #include "gemm.h"
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
func gemmKernel[T float](tA, tB bool, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int) {
	if k == 0 || len(a) == 0 || len(b) == 0 {
		scaleRows(m, n, beta, c, ldc)
		return
	}
	switch cs := any(c).(type) {
	case []float32:
		as, bs := any(a).([]float32), any(b).([]float32)
		C.pf_sgemm(hasAVX2(), cbool(tA), cbool(tB), C.int(m), C.int(n), C.int(k), C.float(alpha),
			(*C.float)(unsafe.Pointer(&as[0])), C.int(lda), (*C.float)(unsafe.Pointer(&bs[0])), C.int(ldb),
			C.float(beta), (*C.float)(unsafe.Pointer(&cs[0])), C.int(ldc))
	case []float64:
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
