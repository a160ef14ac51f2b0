//go:build !cgo || purego

package graph

// Without cgo, EM attention's problems run in Go (emgroup.go,
// emgroupback.go) in both dtypes.

var emUseC = false

func emCAvailable() bool { return false }

func emForwardC[T float](EMSpec, *emProblem[T], *emTrace[T]) bool { return false }

func emBackwardC[T float](EMSpec, *emProblem[T], *emTrace[T], *emSeeds[T], *emGrads[T]) bool {
	return false
}
