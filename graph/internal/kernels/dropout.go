package kernels

// MaskGamma is SplitMix64's increment γ, ⌊2⁶⁴/φ⌋ made odd.
const MaskGamma = 0x9E3779B97F4A7C15

// SplitMix64 is SplitMix64's output function (its finaliser).
func SplitMix64(z uint64) uint64 {
	z = (z ^ z>>30) * 0xBF58476D1CE4E5B9
	z = (z ^ z>>27) * 0x94D049BB133111EB
	return z ^ z>>31
}

// FillMaskGo sets m [n] to units first … first+n−1 of the mask stream of
// seed (see DrawDropout): scale where the unit's 32-bit uniform is below
// thr, 0 elsewhere, without branches (the outcome is random). It is the
// reference for dropout.c and the filler of pure-Go builds.
func FillMaskGo[T Float](m []T, seed uint64, first int, thr uint64, scale T) {
	pick := func(u uint64) T {
		return scale * T(int64((u-thr)>>63)) // 1 when u < thr ≤ 2³²
	}
	if len(m) == 0 {
		return
	}
	s := seed + uint64(first/2+1)*MaskGamma
	i := 0
	if first%2 == 1 { // starts on the high half of a pair
		m[0] = pick(SplitMix64(s) >> 32)
		s += MaskGamma
		i = 1
	}
	for ; i+1 < len(m); i += 2 {
		h := SplitMix64(s)
		s += MaskGamma
		m[i], m[i+1] = pick(h&0xFFFFFFFF), pick(h>>32)
	}
	if i < len(m) {
		m[i] = pick(SplitMix64(s) & 0xFFFFFFFF)
	}
}

// maskKernel is one implementation of FillMask, for tests to compare with
// FillMaskGo.
type maskKernel struct {
	name string
	f32  func(m []float32, seed uint64, first int, thr uint64, scale float32)
	f64  func(m []float64, seed uint64, first int, thr uint64, scale float64)
}
