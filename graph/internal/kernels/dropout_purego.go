//go:build !cgo || purego

package kernels

// FillMask sets m [n] to units first … first+n−1 of the mask stream of
// seed (see DrawDropout); without cgo it is FillMaskGo.
func FillMask[T Float](m []T, seed uint64, first int, thr uint64, scale T) {
	FillMaskGo(m, seed, first, thr, scale)
}

// maskKernels lists the fillers other than FillMaskGo: none without cgo.
func maskKernels() []maskKernel { return nil }
