//go:build !cgo || purego

package graph

// fillMask sets m [n] to units first … first+n−1 of the mask stream of
// seed (see DrawDropout); without cgo it is fillMaskGo.
func fillMask[T float](m []T, seed uint64, first int, thr uint64, scale T) {
	fillMaskGo(m, seed, first, thr, scale)
}

// maskKernels lists the fillers other than fillMaskGo: none without cgo.
func maskKernels() []maskKernel { return nil }
