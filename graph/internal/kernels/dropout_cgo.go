//go:build cgo && !purego

package kernels

// #cgo CFLAGS: -I${SRCDIR}
// #include <kernels.h>
import "C"

import "unsafe"

// FillMask sets m [n] to units first … first+n−1 of the mask stream of
// seed (see DrawDropout) with dropout.c: AVX2 where the CPU has it,
// portable C otherwise. The values are those of FillMaskGo.
func FillMask[T Float](m []T, seed uint64, first int, thr uint64, scale T) {
	fillMaskC(-1, m, seed, first, thr, scale)
}

// fillMaskC runs dropout.c's kernel: 0 the portable loop, 1 AVX2 (on a
// CPU that has it), −1 chosen by the CPU.
func fillMaskC[T Float](kernel int, m []T, seed uint64, first int, thr uint64, scale T) {
	if len(m) == 0 {
		return
	}
	switch ms := any(m).(type) {
	case []float32:
		C.pf_dropout_f32(C.int(kernel), (*C.float)(unsafe.Pointer(&ms[0])), C.size_t(len(ms)),
			C.uint64_t(seed), C.uint64_t(first), C.uint64_t(thr), C.float(any(scale).(float32)))
	case []float64:
		C.pf_dropout_f64(C.int(kernel), (*C.double)(unsafe.Pointer(&ms[0])), C.size_t(len(ms)),
			C.uint64_t(seed), C.uint64_t(first), C.uint64_t(thr), C.double(any(scale).(float64)))
	}
}

// maskKernels lists dropout.c's kernels that this CPU runs.
func maskKernels() []maskKernel {
	kernel := func(name string, k int) maskKernel {
		return maskKernel{
			name: name,
			f32: func(m []float32, seed uint64, first int, thr uint64, scale float32) {
				fillMaskC(k, m, seed, first, thr, scale)
			},
			f64: func(m []float64, seed uint64, first int, thr uint64, scale float64) {
				fillMaskC(k, m, seed, first, thr, scale)
			},
		}
	}
	ks := []maskKernel{kernel("portable C", 0)}
	if C.pf_dropout_has_avx2() != 0 {
		ks = append(ks, kernel("AVX2", 1))
	}
	return ks
}
