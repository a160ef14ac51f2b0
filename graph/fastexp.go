package graph

import "math"

// expNonPositive returns e^x for x ≤ 0, the arguments of a softmax after
// its max is subtracted. float64 uses math.Exp. float32 uses a degree-6
// polynomial on [−ln2/2, ln2/2] after the reduction x = k·ln2 + r, with a
// relative error below 2e-7 (float32's own rounding is 6e-8) at a fraction
// of math.Exp's cost: softmax exponentials are a tenth of a training step.
func expNonPositive[T float](x T) T {
	if _, ok := any(x).(float64); ok {
		return T(math.Exp(float64(x)))
	}
	v := float64(x)
	if v < -87 {
		return 0
	}
	k := math.Floor(v*math.Log2E + 0.5)
	r := v - k*math.Ln2
	p := 1 + r*(1+r*(1.0/2+r*(1.0/6+r*(1.0/24+r*(1.0/120+r*(1.0/720))))))
	return T(math.Float64frombits(math.Float64bits(p) + uint64(int64(k))<<52))
}
