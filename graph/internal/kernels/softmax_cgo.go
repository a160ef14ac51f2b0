//go:build cgo && !purego

package kernels

// #cgo CFLAGS: -I${SRCDIR}
// #include <kernels.h>
import "C"

import "unsafe"

// SoftmaxRows32 runs softmax.c's AVX2 row softmax over p [n×m] (see
// weights) and reports whether it did; without AVX2 and FMA the caller
// uses the Go loop.
func SoftmaxRows32(p []float32, n, m int, mask []float32, causal bool) bool {
	return softmaxRows32At(simdLevel(), p, n, m, mask, causal)
}

// softmaxRows32At is SoftmaxRows32 at the given simdLevel (≥ 1; the tests
// run both levels of a CPU with AVX-512).
func softmaxRows32At(level int, p []float32, n, m int, mask []float32, causal bool) bool {
	if hasAVX2() == 0 || len(p) < n*m || n*m == 0 {
		return false
	}
	var mp *C.float
	if mask != nil {
		mp = (*C.float)(unsafe.Pointer(&mask[0]))
	}
	if level >= 2 {
		C.pf_softmax_rows512((*C.float)(unsafe.Pointer(&p[0])), C.int(n), C.int(m), mp, cbool(causal))
		return true
	}
	C.pf_softmax_rows((*C.float)(unsafe.Pointer(&p[0])), C.int(n), C.int(m), mp, cbool(causal))
	return true
}

// expRow32C runs softmax.c's vectorised exponentials of a row (see
// ExpRow) and reports whether it did.
func expRow32C(dst, src []float32, shift float32) (float64, bool) {
	if hasAVX2() == 0 || len(src) == 0 || len(dst) < len(src) {
		return 0, false
	}
	return float64(C.pf_exp_row((*C.float)(&src[0]), (*C.float)(&dst[0]), C.int(len(src)), C.float(shift))), true
}

// MaxSum32 runs softmax.c's max and sum of a row, and reports whether it
// did.
func MaxSum32(x []float32) (mx float32, sum float64, ok bool) {
	if hasAVX2() == 0 || len(x) == 0 {
		return 0, 0, false
	}
	var m C.float
	var s C.double
	C.pf_max_sum((*C.float)(&x[0]), C.int(len(x)), &m, &s)
	return float32(m), float64(s), true
}

// ScaleShift32 runs softmax.c's d ← d·scale − off, and reports whether
// it did.
func ScaleShift32(d []float32, scale, off float32) bool {
	if hasAVX2() == 0 || len(d) == 0 {
		return false
	}
	C.pf_scale_shift((*C.float)(&d[0]), C.int(len(d)), C.float(scale), C.float(off))
	return true
}
