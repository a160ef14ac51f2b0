package em

import (
	"fmt"
	"math"
)

// KeyLogPosterior returns the objective that key adaptation (AdaptKeys)
// ascends, MATH.md §7:
//
//	Σ_i log Σ_j π_j N(q_i; ξ_j, α_j⁻¹ I_d) − (θ_ξ/2) Σ_j ‖ξ_j − ξ_j⁰‖²
//	  + Σ_j [(a_α − 1) log α_j − b_α α_j]
//
// over the real query units i and real memory units j, up to an additive
// constant that does not depend on mix (the priors' normalising constants).
// The α prior term is included even when α is not adapted; it is then
// constant. (a_α − 1) log α_j is taken as 0 when a_α = 1, its limit, so that
// α_j = 0 stays finite.
//
// Distances here are computed as ‖a − b‖² directly, not in the expanded
// form of §1, so that the objective is an independent check of the updates.
func KeyLogPosterior(h Hyperparams, in Inputs, mix Mixture) (float64, error) {
	p, err := newProblem(in)
	if err == nil {
		err = p.checkMixture(mix)
	}
	if err == nil {
		err = h.validateKeys()
	}
	if err != nil {
		return 0, fmt.Errorf("em: key log posterior: %w", err)
	}
	var total float64
	terms := make([]float64, p.nMemory)
	for i, q := range in.Q {
		if !p.queryReal[i] {
			continue
		}
		for j := range terms {
			terms[j] = math.Inf(-1)
			if p.memoryReal[j] {
				terms[j] = mix.LogPi[j] + logNormal(q, mix.Xi[j], mix.Alpha[j])
			}
		}
		total += logSumExp(terms)
	}
	for j := range mix.Xi {
		if p.memoryReal[j] {
			total += -h.ThetaXi/2*directSqDist(mix.Xi[j], in.Xi0[j]) + gammaLogKernel(h.AAlpha, h.BAlpha, mix.Alpha[j])
		}
	}
	return total, nil
}

// PropagationLogPosterior returns the objective that value propagation
// (Propagate) ascends, MATH.md §7:
//
//	Σ_{i∈S} log Σ_j π_j N(q_i; ξ_j, α_j⁻¹ I_d) N(v_i; μ_j, β_j⁻¹ I_m)
//	  − (θ_μ/2) Σ_j ‖μ_j − μ_j⁰‖² + Σ_j [(a_β − 1) log β_j − b_β β_j]
//	  + (θ_π − 1) Σ_j log π_j
//
// over the annotated real query units and the real memory units, up to an
// additive constant that does not depend on mix. As in KeyLogPosterior,
// (a − 1) log x is 0 when a = 1, and (θ_π − 1) log π_j is 0 when θ_π = 1.
// With S empty the likelihood term is 0.
func PropagationLogPosterior(h Hyperparams, in Inputs, mix Mixture) (float64, error) {
	p, err := newProblem(in)
	if err == nil {
		err = p.checkMixture(mix)
	}
	if err == nil {
		err = h.validateValues()
	}
	if err != nil {
		return 0, fmt.Errorf("em: propagation log posterior: %w", err)
	}
	var total float64
	terms := make([]float64, p.nMemory)
	for i, q := range in.Q {
		if !p.annotated[i] {
			continue
		}
		for j := range terms {
			terms[j] = math.Inf(-1)
			if p.memoryReal[j] {
				terms[j] = mix.LogPi[j] + logNormal(q, mix.Xi[j], mix.Alpha[j]) + logNormal(in.V[i], mix.Mu[j], mix.Beta[j])
			}
		}
		total += logSumExp(terms)
	}
	for j := range mix.Mu {
		if !p.memoryReal[j] {
			continue
		}
		total += -h.ThetaMu/2*directSqDist(mix.Mu[j], in.Mu0[j]) + gammaLogKernel(h.ABeta, h.BBeta, mix.Beta[j])
		if h.ThetaPi != 1 {
			total += (h.ThetaPi - 1) * mix.LogPi[j]
		}
	}
	return total, nil
}

// logNormal returns log N(x; mean, precision⁻¹ I):
// (n/2) log(precision/2π) − (precision/2) ‖x − mean‖², −Inf at precision 0.
func logNormal(x, mean []float64, precision float64) float64 {
	n := float64(len(x))
	return n/2*math.Log(precision/(2*math.Pi)) - precision/2*directSqDist(x, mean)
}

// gammaLogKernel returns (a − 1) log x − b x, the log Gamma(a, b) density
// without its normalising constant, with (a − 1) log x = 0 at a = 1.
func gammaLogKernel(a, b, x float64) float64 {
	if a == 1 {
		return -b * x
	}
	return (a-1)*math.Log(x) - b*x
}

// directSqDist returns ‖a − b‖² = Σ_k (a_k − b_k)².
func directSqDist(a, b []float64) float64 {
	var s float64
	for k := range a {
		s += (a[k] - b[k]) * (a[k] - b[k])
	}
	return s
}
