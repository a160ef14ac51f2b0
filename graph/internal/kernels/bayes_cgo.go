//go:build cgo && !purego

package kernels

// #cgo CFLAGS: -I${SRCDIR}
// #include <kernels.h>
import "C"

// WeibullLogNoise32 runs bayes.c's b = scale·log(−log u) and reports
// whether it did (it needs AVX2 and FMA).
func WeibullLogNoise32(u, b []float32, scale float32) bool {
	if hasAVX2() == 0 || len(u) == 0 || len(b) < len(u) {
		return false
	}
	C.pf_weibull_log_noise((*C.float)(&u[0]), (*C.float)(&b[0]), C.int(len(u)), C.float(scale))
	return true
}

// WeibullBiasFast32 runs bayes.c's pf_weibull_bias_fast (the Weibull
// noise term as attention.c's Bayesian heads compute it) and reports
// whether it did.
func WeibullBiasFast32(u, b []float32, scale float32) bool {
	if hasAVX2() == 0 || len(u) == 0 || len(b) < len(u) {
		return false
	}
	C.pf_weibull_bias_fast((*C.float)(&u[0]), (*C.float)(&b[0]), C.int(len(u)), C.float(scale))
	return true
}
