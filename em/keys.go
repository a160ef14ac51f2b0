package em

import "fmt"

// AdaptKeys runs iters iterations of online key adaptation, MATH.md §4,
// from mix and returns the adapted mixture (mix itself is not modified).
// Each iteration is one EM step on the real query units' queries:
//
//	w_ij = softmax_j s_ij(q_i)                      (E-step, every real query unit i)
//	n_j  = Σ_i w_ij
//	ξ_j ← (θ_ξ ξ_j⁰ + α_j Σ_i w_ij q_i) / (θ_ξ + α_j n_j)
//	α_j ← (a_α − 1 + (d/2) n_j) / (b_α + ½ Σ_i w_ij ‖q_i − ξ_j‖²)   (if adaptAlpha; new ξ_j)
//
// The ξ update uses the current α_j, so an iteration is a coordinate ascent
// of the EM surrogate (ξ given α, then α given the new ξ) and, in exact
// arithmetic, never lowers KeyLogPosterior (see sqDist for the float64
// limit). π stays fixed, and μ and β are not read. Padded memory units keep
// their parameters. ‖q_i − ξ_j‖² is the expanded, clamped form of §1. With
// a_α = 1 a unit whose n_j underflows to 0 gets α_j = 0, the mode of its
// posterior, and weight 0 from then on.
func AdaptKeys(h Hyperparams, in Inputs, mix Mixture, iters int, adaptAlpha bool) (Mixture, error) {
	p, err := newProblem(in)
	if err == nil {
		err = p.checkMixture(mix)
	}
	if err == nil {
		err = h.validateKeys()
	}
	if err == nil && iters < 0 {
		err = fmt.Errorf("negative iteration count %d", iters)
	}
	if err != nil {
		return Mixture{}, fmt.Errorf("em: key adaptation: %w", err)
	}
	mix = mix.clone()
	for t := 0; t < iters; t++ {
		if err := p.adaptKeysOnce(h, &mix, adaptAlpha); err != nil {
			return Mixture{}, fmt.Errorf("em: key adaptation iteration %d: %w", t, err)
		}
	}
	return mix, nil
}

// adaptKeysOnce performs one iteration of AdaptKeys in place.
func (p *problem) adaptKeysOnce(h Hyperparams, mix *Mixture, adaptAlpha bool) error {
	q := p.in.Q
	w := make([][]float64, p.nQuery) // w_ij: [N, M], nil rows at padded i
	for i := range q {
		if !p.queryReal[i] {
			continue
		}
		var err error
		if w[i], err = softmax(keyScores(mix, p.memoryReal, q[i])); err != nil {
			return fmt.Errorf("query unit %d: %w", i, err)
		}
	}
	d := float64(p.keyDim)
	weightedSum := make([]float64, p.keyDim) // Σ_i w_ij q_i
	for j := range mix.Xi {
		if !p.memoryReal[j] {
			continue
		}
		var n float64
		clear(weightedSum)
		for i := range q {
			if !p.queryReal[i] {
				continue
			}
			n += w[i][j]
			for k, x := range q[i] {
				weightedSum[k] += w[i][j] * x
			}
		}
		alpha := mix.Alpha[j]
		for k := range mix.Xi[j] {
			mix.Xi[j][k] = (h.ThetaXi*p.in.Xi0[j][k] + alpha*weightedSum[k]) / (h.ThetaXi + alpha*n)
		}
		if !adaptAlpha {
			continue
		}
		var spread float64 // Σ_i w_ij ‖q_i − ξ_j‖², with the new ξ_j
		for i := range q {
			if p.queryReal[i] {
				spread += w[i][j] * sqDist(q[i], mix.Xi[j])
			}
		}
		mix.Alpha[j] = (h.AAlpha - 1 + d/2*n) / (h.BAlpha + spread/2)
	}
	return nil
}
