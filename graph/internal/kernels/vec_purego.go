//go:build !cgo || purego

package kernels

// ColSum32 and Adam32 have no pure-Go fast path: callers run their Go
// loops.
func ColSum32(_, _ []float32) bool                               { return false }
func Adam32(_, _ []float32, _, _ []float64, _ *[10]float64) bool { return false }

// Finite32 reports whether every value of x is finite (no NaN or ±Inf),
// with finite32's Go loop.
func Finite32(x []float32) bool { return finite32(x) }

// Mul32, AddRepeat32 and ReluGrad32 have no pure-Go fast path.
func Mul32(_, _, _ []float32) bool       { return false }
func AddRepeat32(_, _, _ []float32) bool { return false }
func ReluGrad32(_, _, _ []float32) bool  { return false }

// Relu32 has no pure-Go fast path.
func Relu32(_, _ []float32) bool { return false }

// The shared loops (pool.c's range jobs) have no pure-Go twin: callers
// split their loops with SplitRange.
func AddRepeatShared32(_, _, _ []float32) bool { return false }
func AddShared32(_, _, _ []float32) bool       { return false }
func MulShared32(_, _, _ []float32) bool       { return false }
func ReluShared32(_, _ []float32) bool         { return false }
func ReluGradShared32(_, _, _ []float32) bool  { return false }
