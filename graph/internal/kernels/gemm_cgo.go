//go:build cgo && !purego

package kernels

// #cgo CFLAGS: -O3
// #cgo LDFLAGS: -lm
// #include "kernels.h"
import "C"

import (
	"os"
	"sync"
	"unsafe"
)

// hasAVX2 is whether this CPU runs the AVX2/FMA kernel of gemm.c; it is
// asked once.
var hasAVX2 = sync.OnceValue(func() C.int { return C.pf_has_avx2() })

// hasAVX512 is whether this CPU and its OS run gemm.c's AVX-512 kernel.
var hasAVX512 = sync.OnceValue(func() bool { return hasAVX2() != 0 && C.pf_has_avx512() != 0 })

// GemmEnv is the environment variable that, set to "avx2" when the
// process starts, keeps float32 products on gemm.c's AVX2 kernel on a CPU
// with AVX-512 (to time one against the other: their values are the same
// bit for bit).
const GemmEnv = "PROBFORMER_GEMM"

// gemmLevel is the float32 kernel gemm.c runs: 2 for the AVX-512 packed
// kernel (a CPU with AVX-512 F/VL/BW/DQ whose OS saves the zmm state), 1
// for AVX2/FMA, 0 for portable C. It is decided once.
var gemmLevel = sync.OnceValue(func() C.int {
	if hasAVX2() == 0 {
		return 0
	}
	if hasAVX512() && os.Getenv(GemmEnv) != "avx2" {
		return 2
	}
	return 1
})

// GemmKernelName names the float32 kernel Gemm runs: "avx512", "avx2" or
// "portable".
func GemmKernelName() string {
	return [...]string{"portable", "avx2", "avx512"}[gemmLevel()]
}

// gemmKernel runs gemm.c's kernel: AVX2 and FMA where the CPU has them,
// portable C otherwise. Build with -tags purego for gonum's pure-Go BLAS.
// A non-nil bias [n] makes it c ← bias + α·op(a)·op(b) on every row, with
// beta ignored.
func gemmKernel[T Float](tA, tB bool, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int, bias []T) {
	gemmKernelAt(gemmLevel(), tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, bias)
}

// gemmKernelAt is gemmKernel on float32 kernel level (see gemmLevel; the
// tests run both levels of a CPU with AVX-512). float64 runs AVX2 at
// level ≥ 1.
func gemmKernelAt[T Float](level C.int, tA, tB bool, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int, bias []T) {
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
		C.pf_sgemm(level, cbool(tA), cbool(tB), C.int(m), C.int(n), C.int(k), C.float(alpha),
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
		C.pf_dgemm(min(level, 1), cbool(tA), cbool(tB), C.int(m), C.int(n), C.int(k), C.double(alpha),
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
