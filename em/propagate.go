package em

import (
	"fmt"
	"math"
)

// Propagate runs iters iterations of value propagation from the annotated
// query units, MATH.md §5, from mix and returns the adapted mixture (mix
// itself is not modified). Each iteration is one EM step on the pairs
// (q_i, v_i), i ∈ S:
//
//	w_ij = softmax_j s_ij(q_i, v_i)                 (E-step, i ∈ S only)
//	n_j  = Σ_{i∈S} w_ij
//	μ_j ← (θ_μ μ_j⁰ + β_j Σ_{i∈S} w_ij v_i) / (θ_μ + β_j n_j)
//	β_j ← (a_β − 1 + (m/2) n_j) / (b_β + ½ Σ_{i∈S} w_ij ‖v_i − μ_j‖²)   (if adaptBeta; new μ_j)
//	π_j ← (n_j + θ_π − 1) / (|S| + M (θ_π − 1))                        (if adaptPi)
//
// M counts the real memory units (padded ones keep π_j = 0 and their
// parameters), and π is shared by all query units. The μ update uses the
// current β_j, so, in exact arithmetic, an iteration never lowers
// PropagationLogPosterior (see sqDist for the float64 limit). ξ and α are
// not changed. When S is empty the phase is skipped and mix is returned
// unchanged, as §5 requires.
//
// The E-step evaluates the value likelihood, so a unit with β_j = 0 gets
// weight 0; if every real unit has weight 0 for some i ∈ S, Propagate
// returns an error.
func Propagate(h Hyperparams, in Inputs, mix Mixture, iters int, adaptBeta, adaptPi bool) (Mixture, error) {
	p, err := newProblem(in)
	if err == nil {
		err = p.checkMixture(mix)
	}
	if err == nil {
		err = h.validateValues()
	}
	if err == nil && iters < 0 {
		err = fmt.Errorf("negative iteration count %d", iters)
	}
	if err != nil {
		return Mixture{}, fmt.Errorf("em: value propagation: %w", err)
	}
	mix = mix.clone()
	if p.nInS == 0 {
		return mix, nil
	}
	for t := 0; t < iters; t++ {
		if err := p.propagateOnce(h, &mix, adaptBeta, adaptPi); err != nil {
			return Mixture{}, fmt.Errorf("em: value propagation iteration %d: %w", t, err)
		}
	}
	return mix, nil
}

// propagateOnce performs one iteration of Propagate in place; S is not empty.
func (p *problem) propagateOnce(h Hyperparams, mix *Mixture, adaptBeta, adaptPi bool) error {
	q, v := p.in.Q, p.in.V
	w := make([][]float64, p.nQuery) // w_ij: [N, M], nil rows outside S
	for i := range q {
		if !p.annotated[i] {
			continue
		}
		var err error
		if w[i], err = softmax(jointScores(mix, p.memoryReal, q[i], v[i])); err != nil {
			return fmt.Errorf("annotated query unit %d: %w", i, err)
		}
	}
	m := float64(p.valueDim)
	nS := float64(p.nInS)
	piDenominator := math.Log(nS + float64(p.nRealMemory)*(h.ThetaPi-1))
	weightedSum := make([]float64, p.valueDim) // Σ_{i∈S} w_ij v_i
	for j := range mix.Mu {
		if !p.memoryReal[j] {
			continue
		}
		var n float64
		clear(weightedSum)
		for i := range q {
			if !p.annotated[i] {
				continue
			}
			n += w[i][j]
			for k, x := range v[i] {
				weightedSum[k] += w[i][j] * x
			}
		}
		beta := mix.Beta[j]
		for k := range mix.Mu[j] {
			mix.Mu[j][k] = (h.ThetaMu*p.in.Mu0[j][k] + beta*weightedSum[k]) / (h.ThetaMu + beta*n)
		}
		if adaptBeta {
			var spread float64 // Σ_{i∈S} w_ij ‖v_i − μ_j‖², with the new μ_j
			for i := range q {
				if p.annotated[i] {
					spread += w[i][j] * sqDist(v[i], mix.Mu[j])
				}
			}
			mix.Beta[j] = (h.ABeta - 1 + m/2*n) / (h.BBeta + spread/2)
		}
		if adaptPi {
			mix.LogPi[j] = math.Log(n+h.ThetaPi-1) - piDenominator
		}
	}
	return nil
}
