package kernels

import "math"

// finite32 is Finite32 in Go: a value is finite when its exponent bits
// are not all set (NaN and ±Inf have them all set).
func finite32(x []float32) bool {
	for _, v := range x {
		if math.Float32bits(v)&0x7f800000 == 0x7f800000 {
			return false
		}
	}
	return true
}
