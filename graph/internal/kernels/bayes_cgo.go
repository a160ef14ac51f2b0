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

// UniformNoise32 fills pairs j ∈ [lo, hi) of d with graph's uniform noise
// (graph/noise.go's fillNoise: pairs first+j of the SplitMix64 stream of
// seed) with bayes.c's pf_uniform_noise512, the same values bit for bit,
// and reports whether it did (it needs AVX-512, and PROBFORMER_SIMD not
// avx2).
func UniformNoise32(d []float32, seed uint64, lo, hi, first int) bool {
	if simdLevel() < 2 || lo < 0 || hi < lo || 2*hi > len(d)+1 || first < 0 {
		return false
	}
	if lo == hi {
		return true
	}
	C.pf_uniform_noise512((*C.float)(&d[0]), C.long(len(d)), C.ulonglong(seed), C.long(lo), C.long(hi), C.long(first))
	return true
}

// NormalNoise32 fills pairs j ∈ [lo, hi) of d with graph's normal noise
// (bayes.c's pf_normal_noise512; w, k and f are graph's ziggurat tables
// [128]), the Go loop's values bit for bit, but for the few entries it
// leaves to the Go loop (the base layer's tail, near-ties of the
// rejection test): it puts their indices into rej [≥ 2·(hi − lo)] and
// returns how many; ok is false (nothing done) where it does not run (no
// AVX-512, PROBFORMER_SIMD=avx2, or operands too short).
func NormalNoise32(d []float32, seed uint64, lo, hi, first int, w []float64, k []uint32, f []float64, rej []int32) (n int, ok bool) {
	if simdLevel() < 2 || lo < 0 || hi < lo || 2*hi > len(d)+1 || first < 0 || len(w) < 128 || len(k) < 128 ||
		len(f) < 128 || len(rej) < 2*(hi-lo) {
		return 0, false
	}
	if lo == hi {
		return 0, true
	}
	r := C.pf_normal_noise512((*C.float)(&d[0]), C.long(len(d)), C.ulonglong(seed), C.long(lo), C.long(hi),
		C.long(first), (*C.double)(&w[0]), (*C.unsigned)(&k[0]), (*C.double)(&f[0]), (*C.int)(&rej[0]))
	return int(r), true
}

// expNeg64 sets out [len(y)] to bayes.c's e^y (exp_neg8, which
// pf_normal_noise512's retries compare against) for y in [−7, 0], and
// reports whether it ran (it needs AVX-512), for the tests of its
// accuracy.
func expNeg64(y, out []float64) bool {
	if simdLevel() < 2 || len(y) == 0 || len(out) < len(y) {
		return false
	}
	C.pf_exp_neg((*C.double)(&y[0]), (*C.double)(&out[0]), C.long(len(y)))
	return true
}

// SumParts64 sets sum [np] to the sums over rows r < rows of part[r·stride
// + i], each from +0 in the order of r (bayes.c's pf_sum_parts, Go's loop
// bit for bit), and reports whether it did (it needs AVX2, and operands
// long enough).
func SumParts64(part []float64, stride, rows, np int, sum []float64) bool {
	if hasAVX2() == 0 || rows < 1 || np < 1 || stride < np || len(sum) < np || (rows-1)*stride+np > len(part) {
		return false
	}
	C.pf_sum_parts((*C.double)(&part[0]), C.long(stride), C.int(rows), C.int(np), (*C.double)(&sum[0]))
	return true
}
