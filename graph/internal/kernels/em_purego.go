//go:build !cgo || purego

package kernels

// Without cgo, EM attention's problems run in Go (emgroup.go,
// emgroupback.go) in both dtypes.

var EMUseC = false

func EMCAvailable() bool { return false }

var EMUseAVX512 = false

func EMAVX512() bool { return false }

func EMRunsC[T Float]() bool { return false }

func EMForwardC[T Float](EMSpec, *EMProblem[T], *EMTrace[T]) bool { return false }

func EMBackwardC[T Float](EMSpec, *EMProblem[T], *EMTrace[T], *EMSeeds[T], *EMGrads[T]) bool {
	return false
}

func EMForwardPass32(*EMPass32, int) bool  { return false }
func EMBackwardPass32(*EMPass32, int) bool { return false }
