//go:build !cgo || purego

package kernels

// Without cgo, the Weibull noise runs in Go (graph/fusedbayes.go).

func WeibullLogNoise32([]float32, []float32, float32) bool { return false }

func WeibullBiasFast32([]float32, []float32, float32) bool { return false }

// UniformNoise32 has no pure-Go fast path: graph fills its noise in Go.
func UniformNoise32([]float32, uint64, int, int, int) bool { return false }
