package kernels

import "math"

// ExpRow sets dst[i] = e^(src[i] − shift) for src[i] ≤ shift, the
// exponentials of a softmax after its max is subtracted, and returns their
// sum. float64 rows use math.Exp. float32 rows use Exp32, several times
// cheaper: softmax exponentials are a large part of a training step.
// The type is switched once per row, not per element.
func ExpRow[T Float](dst, src []T, shift T) float64 {
	switch s := any(src).(type) {
	case []float32:
		return expRow32(any(dst).([]float32), s, float32(shift))
	case []float64:
		d := any(dst).([]float64)
		var z float64
		for i, v := range s {
			d[i] = math.Exp(v - float64(shift))
			z += d[i]
		}
		return z
	}
	return 0
}

func expRow32(dst, src []float32, shift float32) float64 {
	if z, ok := expRow32C(dst, src, shift); ok {
		return z
	}
	var z float64
	for i, v := range src {
		dst[i] = Exp32(v - shift)
		z += float64(dst[i])
	}
	return z
}

// Exp32 is e^x for x ≤ 0 in float32, to a relative error below 3e-7: x =
// k·ln2 + r with |r| ≤ ln2/2 (ln2 split in two for exact reduction), a
// degree-6 Taylor polynomial for e^r, and k added to the exponent bits.
func Exp32(x float32) float32 {
	const (
		log2e = 1.44269504088896341
		ln2hi = 0.693359375
		ln2lo = -2.12194440e-4
	)
	if x < -87 {
		return 0
	}
	k := int32(x*log2e - 0.5) // rounds to nearest for x ≤ 0
	fk := float32(k)
	r := x - fk*ln2hi - fk*ln2lo
	p := 1 + r*(1+r*(1.0/2+r*(1.0/6+r*(1.0/24+r*(1.0/120+r*(1.0/720))))))
	return math.Float32frombits(math.Float32bits(p) + uint32(k)<<23)
}
