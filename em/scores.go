package em

import (
	"errors"
	"math"
)

// errNoWeight reports a softmax whose scores are all −∞: no memory unit can
// explain the query unit (every real unit has π_j = 0 or a zero precision).
var errNoWeight = errors.New("every memory unit has score −∞ (π_j = 0 or zero precision)")

// errNaNScore reports a score that overflowed, from inputs too large to
// square in float64.
var errNaNScore = errors.New("a component score is NaN (inputs overflow)")

// sqDist returns ‖a − b‖² in the expanded form of MATH.md §1,
//
//	‖a‖² − 2 a·b + ‖b‖²,  clamped at 0,
//
// because the graph version computes it with a batched matmul; the clamp
// absorbs the rounding that can make the expansion slightly negative.
//
// The expansion's absolute error is about ε·(‖a‖² + ‖b‖²), and scores
// multiply it by a precision. When a component collapses onto one point
// and its precision grows towards 1/b (b_α or b_β near 0), precisions near
// 1e15 make that error larger than an EM step's gain, and the steps of §4
// and §5 can then lower their objective; the direct form Σ_k (a_k − b_k)²
// does not. The graph version in float32 (ε ≈ 6e-8) meets this at far
// smaller precisions.
func sqDist(a, b []float64) float64 {
	return math.Max(dot(a, a)-2*dot(a, b)+dot(b, b), 0)
}

func dot(a, b []float64) float64 {
	var s float64
	for k := range a {
		s += a[k] * b[k]
	}
	return s
}

// keyScores returns the component scores of one query, MATH.md §1:
//
//	s_ij(q) = log π_j + (d/2) log α_j − (α_j/2) ‖q − ξ_j‖²
//
// with −Inf at padded memory units. q: [d]; result: [M].
func keyScores(mix *Mixture, memoryReal []bool, q []float64) []float64 {
	d := float64(len(q))
	s := make([]float64, len(mix.Xi))
	for j := range s {
		if !memoryReal[j] {
			s[j] = math.Inf(-1)
			continue
		}
		s[j] = mix.LogPi[j] + d/2*math.Log(mix.Alpha[j]) - mix.Alpha[j]/2*sqDist(q, mix.Xi[j])
	}
	return s
}

// jointScores returns the component scores of one (query, value) pair,
// MATH.md §1:
//
//	s_ij(q, v) = s_ij(q) + (m/2) log β_j − (β_j/2) ‖v − μ_j‖²
//
// with −Inf at padded memory units. q: [d]; v: [m]; result: [M].
// ‖v − μ_j‖² is expanded and clamped like ‖q − ξ_j‖² (the doc states the
// rule for keys; the graph computes both the same way).
func jointScores(mix *Mixture, memoryReal []bool, q, v []float64) []float64 {
	m := float64(len(v))
	s := keyScores(mix, memoryReal, q)
	for j := range s {
		if !memoryReal[j] {
			continue
		}
		s[j] += m/2*math.Log(mix.Beta[j]) - mix.Beta[j]/2*sqDist(v, mix.Mu[j])
	}
	return s
}

// softmax returns exp(s_j − max) / Σ_k exp(s_k − max), the max subtracted
// as MATH.md §1 requires. Entries of −Inf get weight exactly 0; if every
// entry is −Inf there is no distribution and softmax returns errNoWeight.
func softmax(s []float64) ([]float64, error) {
	top := math.Inf(-1)
	for _, x := range s {
		top = math.Max(top, x) // NaN if any x is NaN
	}
	if math.IsNaN(top) {
		return nil, errNaNScore
	}
	if math.IsInf(top, -1) {
		return nil, errNoWeight
	}
	w := make([]float64, len(s))
	var total float64
	for j, x := range s {
		w[j] = math.Exp(x - top)
		total += w[j]
	}
	for j := range w {
		w[j] /= total
	}
	return w, nil
}

// logSumExp returns log Σ_j exp(s_j) with the max subtracted; −Inf when
// every entry is −Inf.
func logSumExp(s []float64) float64 {
	top := math.Inf(-1)
	for _, x := range s {
		top = math.Max(top, x)
	}
	if math.IsInf(top, -1) {
		return top
	}
	var total float64
	for _, x := range s {
		total += math.Exp(x - top)
	}
	return top + math.Log(total)
}
