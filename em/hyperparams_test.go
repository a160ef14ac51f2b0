package em

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestSoftplus compares with log(1 + eˣ) computed at 40 digits (mpmath).
func TestSoftplus(t *testing.T) {
	for _, tc := range []struct{ x, want float64 }{
		{-40, 4.248354255291589e-18},
		{-5, 0.0067153484891180686},
		{-1, 0.31326168751822283},
		{0, 0.69314718055994531},
		{0.5, 0.97407698418010668},
		{1, 1.3132616875182228},
		{5, 5.0067153484891181},
		{40, 40.0},
		{800, 800}, // log(1 + e⁸⁰⁰) overflows if computed naively
	} {
		if got := Softplus(tc.x); math.Abs(got-tc.want) > 1e-15*tc.want {
			t.Errorf("Softplus(%v) = %.17g, want %.17g", tc.x, got, tc.want)
		}
	}
}

// TestInverseSoftplus compares with log(eʸ − 1) at 40 digits and checks the
// round trip and the rejection of y ≤ 0.
func TestInverseSoftplus(t *testing.T) {
	for _, tc := range []struct{ y, want float64 }{
		{1e-10, -23.025850929890457},
		{0.1, -2.2521684610440908},
		{1, 0.54132485461291811},
		{3, 2.9489308190572984},
		{50, 50.0},
	} {
		got, err := InverseSoftplus(tc.y)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(got-tc.want) > 1e-15*math.Abs(tc.want) {
			t.Errorf("InverseSoftplus(%v) = %.17g, want %.17g", tc.y, got, tc.want)
		}
	}
	rng := rand.New(rand.NewPCG(1, 1))
	for range 1000 {
		y := math.Exp(10 * rng.NormFloat64() / 3)
		x, err := InverseSoftplus(y)
		if err != nil {
			t.Fatal(err)
		}
		// x carries a rounding error of about ε·|x|, which Softplus turns
		// into a relative error of about ε·|x| when y is small.
		if back := Softplus(x); math.Abs(back-y) > 4e-16*(1+math.Abs(x))*y {
			t.Errorf("Softplus(InverseSoftplus(%.17g)) = %.17g", y, back)
		}
	}
	for _, y := range []float64{0, -1, math.NaN(), math.Inf(1)} {
		if _, err := InverseSoftplus(y); err == nil {
			t.Errorf("InverseSoftplus(%v): no error", y)
		}
	}
}

// TestRawParamsStayInRange checks the ranges of MATH.md §6 (a_α, a_β,
// θ_π ≥ 1, everything else > 0) for raw values of every size, and the
// transform at raw = 0.
func TestRawParamsStayInRange(t *testing.T) {
	for _, raw := range []float64{-700, -40, -3, 0, 2, 40, 700} {
		r := RawParams{raw, raw, raw, raw, raw, raw, raw, raw, raw}
		h := r.Hyperparams()
		if err := h.validateKeys(); err != nil {
			t.Errorf("raw %v: %v", raw, err)
		}
		if err := h.validateValues(); err != nil {
			t.Errorf("raw %v: %v", raw, err)
		}
		alpha0, beta0 := r.Precisions()
		if !(alpha0 > 0 && beta0 > 0) {
			t.Errorf("raw %v: precisions %v, %v, want > 0", raw, alpha0, beta0)
		}
	}
	const ln2 = 0.69314718055994531
	got := RawParams{}.Hyperparams()
	want := Hyperparams{ThetaXi: ln2, AAlpha: 1 + ln2, BAlpha: ln2, ThetaMu: ln2, ABeta: 1 + ln2, BBeta: ln2, ThetaPi: 1 + ln2}
	if got != want {
		t.Errorf("RawParams{}.Hyperparams() = %+v, want %+v", got, want)
	}
}
