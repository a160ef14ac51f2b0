package graph

import "github.com/probformer/probformer/graph/internal/kernels"

// The names adam.go calls from before the kernels moved to
// graph/internal/kernels: adam.go is edited elsewhere for now, and these
// two forward to the kernels until it calls them itself.

// parallelFor is kernels.ParallelFor.
func parallelFor(n int, f func(worker, i int)) { kernels.ParallelFor(n, f) }

// adam32 is kernels.Adam32, vec.c's Adam update on float32 weights.
func adam32(w, g []float32, m, v []float64, c *[10]float64) bool {
	return kernels.Adam32(w, g, m, v, c)
}
