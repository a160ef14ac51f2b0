//go:build !cgo || purego

package kernels

// Without cgo, the Weibull noise runs in Go (graph/fusedbayes.go).

func WeibullLogNoise32([]float32, []float32, float32) bool { return false }

func WeibullBiasFast32([]float32, []float32, float32) bool { return false }
