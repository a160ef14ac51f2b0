//go:build !cgo || purego

package kernels

// Without cgo, the Weibull noise runs in Go (graph/fusedbayes.go).

func WeibullLogNoise32([]float32, []float32, float32) bool { return false }

func WeibullBiasFast32([]float32, []float32, float32) bool { return false }

// UniformNoise32 has no pure-Go fast path: graph fills its noise in Go.
func UniformNoise32([]float32, uint64, int, int, int) bool { return false }

// NormalNoise32 has no pure-Go fast path either.
func NormalNoise32([]float32, uint64, int, int, int, []float64, []uint32, []float64, []int32) (int, bool) {
	return 0, false
}

// SumParts64 has no pure-Go fast path: graph sums the parts in Go.
func SumParts64([]float64, int, int, int, []float64) bool { return false }
