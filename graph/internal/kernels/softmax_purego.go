//go:build !cgo || purego

package kernels

// SoftmaxRows32 has no pure-Go fast path: weights runs its Go loop.
func SoftmaxRows32([]float32, int, int, []float32, bool) bool { return false }

// expRow32C has no pure-Go fast path.
func expRow32C(_, _ []float32, _ float32) (float64, bool) { return 0, false }

// MaxSum32 and ScaleShift32 have no pure-Go fast path.
func MaxSum32([]float32) (float32, float64, bool)   { return 0, 0, false }
func ScaleShift32([]float32, float32, float32) bool { return false }
