package em

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

// TestSqDistIsClampedExpansion checks the expanded distance of MATH.md
// §1 against hand values, and that the clamp keeps it ≥ 0 where the
// expansion rounds below 0.
func TestSqDistIsClampedExpansion(t *testing.T) {
	for _, tc := range []struct {
		a, b []float64
		want float64
	}{
		{[]float64{1, 2}, []float64{4, 6}, 25},
		{[]float64{-0.5}, []float64{0.25}, 0.5625},
		{[]float64{3, 0, -1}, []float64{3, 0, -1}, 0},
	} {
		if got := sqDist(tc.a, tc.b); got != tc.want {
			t.Errorf("sqDist(%v, %v) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
	rng := rand.New(rand.NewPCG(6, 1))
	var negative int // how often the unclamped expansion is < 0
	for range 2000 {
		a := randomMatrix(rng, 1, 5, 10)[0]
		b := append([]float64(nil), a...)
		b[rng.IntN(5)] += 1e-9 * rng.NormFloat64()
		if dot(a, a)-2*dot(a, b)+dot(b, b) < 0 {
			negative++
		}
		if got := sqDist(a, b); got < 0 || got > 1e-12 {
			t.Fatalf("sqDist of nearby points = %v", got)
		}
	}
	if negative == 0 {
		t.Error("no case exercised the clamp")
	}
}

// TestScoresMatchDefinition compares keyScores and jointScores with
// MATH.md §1 written out on a 2-unit case, the second unit padded.
func TestScoresMatchDefinition(t *testing.T) {
	mix := Mixture{
		Xi: [][]float64{{1, -1}, {math.NaN(), 0}}, Alpha: []float64{2, math.NaN()},
		Mu: [][]float64{{0.5}, {1}}, Beta: []float64{3, 1},
		LogPi: []float64{math.Log(0.25), 0},
	}
	isReal := []bool{true, false}
	q, v := []float64{0.5, 0.5}, []float64{-0.5}
	// log π + (d/2) log α − (α/2)‖q − ξ‖² = log 0.25 + log 2 − (0.25 + 2.25)
	wantKey := math.Log(0.25) + math.Log(2) - 2.5
	// + (m/2) log β − (β/2)‖v − μ‖² = ½ log 3 − 1.5
	wantJoint := wantKey + 0.5*math.Log(3) - 1.5
	ks := keyScores(&mix, isReal, q)
	js := jointScores(&mix, isReal, q, v)
	if math.Abs(ks[0]-wantKey) > 1e-15 || math.Abs(js[0]-wantJoint) > 1e-15 {
		t.Errorf("scores %v, %v, want %v, %v", ks[0], js[0], wantKey, wantJoint)
	}
	if !math.IsInf(ks[1], -1) || !math.IsInf(js[1], -1) {
		t.Errorf("padded unit scores %v, %v, want −Inf", ks[1], js[1])
	}
}

// TestSoftmaxIsStable checks that softmax subtracts the max (no overflow
// at ±1000), gives −Inf exactly weight 0, and refuses all −Inf.
func TestSoftmaxIsStable(t *testing.T) {
	inf := math.Inf(-1)
	for _, tc := range []struct {
		s, want []float64
		lse     float64
	}{
		{[]float64{1000, 1000}, []float64{0.5, 0.5}, 1000 + math.Ln2},
		{[]float64{-1000, -1000, inf}, []float64{0.5, 0.5, 0}, -1000 + math.Ln2},
		{[]float64{0, math.Log(3)}, []float64{0.25, 0.75}, math.Log(4)},
		{[]float64{inf, 7}, []float64{0, 1}, 7},
	} {
		w, err := softmax(tc.s)
		if err != nil {
			t.Fatal(err)
		}
		for j := range w {
			if math.Abs(w[j]-tc.want[j]) > 1e-15 {
				t.Errorf("softmax(%v) = %v, want %v", tc.s, w, tc.want)
			}
		}
		if got := logSumExp(tc.s); math.Abs(got-tc.lse) > 1e-15*math.Max(1, math.Abs(tc.lse)) {
			t.Errorf("logSumExp(%v) = %.17g, want %.17g", tc.s, got, tc.lse)
		}
	}
	if _, err := softmax([]float64{inf, inf}); !errors.Is(err, errNoWeight) {
		t.Errorf("softmax of all −Inf: error %v, want errNoWeight", err)
	}
}
