//go:build !cgo || purego

package kernels

// SIMDEnv is the cgo build's switch to the AVX2 kernels; without cgo
// there are no C kernels and it is not read.
const SIMDEnv = "PROBFORMER_SIMD"

// SIMDName is "none" without cgo: the callers run their Go loops.
func SIMDName() string { return "none" }
