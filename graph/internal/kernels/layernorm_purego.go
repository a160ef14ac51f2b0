//go:build !cgo || purego

package kernels

// LayerNormFwd32, AddLayerNormFwd32 and LayerNormBwd32 have no pure-Go
// fast path: the layer norm kernels run their Go loops.
func LayerNormFwd32(_, _, _, _ []float32, _ float64, _, _ []float32) bool          { return false }
func AddLayerNormFwd32(_, _, _, _, _, _ []float32, _ float64, _, _ []float32) bool { return false }
func LayerNormBwd32(_, _, _, _, _, _, _, _, _ []float32) bool                      { return false }

// The shared layer norm rows (pool.c's range jobs) have no pure-Go twin.
func LayerNormFwdShared32(_, _, _, _ []float32, _ float64, _, _ []float32) bool { return false }
func AddLayerNormFwdShared32(_, _, _, _, _, _ []float32, _ float64, _, _ []float32) bool {
	return false
}
func LayerNormBwdHalves32(_, _, _, _, _, _, _, _, _, _ []float32) bool { return false }
