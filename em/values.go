package em

import (
	"errors"
	"fmt"
)

// InferValues reads out every real query unit with the mixture mix,
// MATH.md §3, refining the plain readout by iters EM iterations towards
// the MAP value of the query unit:
//
//	v_i⁰      = Σ_j softmax_j(s_ij(q_i)) μ_j                (plain readout)
//	w_ij^t    = softmax_j s_ij(q_i, v_i^t)                  (E-step)
//	v_i^{t+1} = Σ_j w_ij^t β_j μ_j / Σ_j w_ij^t β_j         (M-step)
//
// readout: [N, m] holds v_i^iters; weights: [N, M] holds the weights that
// formed it, softmax_j s_ij(q_i) when iters = 0 and w_ij^{iters−1}
// otherwise. Rows of padded query units are zero. Annotated query units are
// read out like the others; their known values are not used here.
//
// With iters > 0 the value likelihood is evaluated, so a unit with β_j = 0
// gets weight 0, and InferValues returns an error if no unit keeps weight.
func InferValues(in Inputs, mix Mixture, iters int) (readout, weights [][]float64, err error) {
	p, err := newProblem(in)
	if err == nil {
		err = p.checkMixture(mix)
	}
	if err == nil && iters < 0 {
		err = fmt.Errorf("negative iteration count %d", iters)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("em: value inference: %w", err)
	}
	readout = make([][]float64, p.nQuery)
	weights = make([][]float64, p.nQuery)
	for i, q := range in.Q {
		if !p.queryReal[i] {
			readout[i] = make([]float64, p.valueDim)
			weights[i] = make([]float64, p.nMemory)
			continue
		}
		if readout[i], weights[i], err = p.inferValue(&mix, q, iters); err != nil {
			return nil, nil, fmt.Errorf("em: value inference of query unit %d: %w", i, err)
		}
	}
	return readout, weights, nil
}

// inferValue returns one query unit's readout v^iters and the weights that
// formed it. q: [d]; v: [m]; w: [M].
func (p *problem) inferValue(mix *Mixture, q []float64, iters int) (v, w []float64, err error) {
	w, err = softmax(keyScores(mix, p.memoryReal, q))
	if err != nil {
		return nil, nil, err
	}
	v = p.weightedValues(mix, w, nil)
	for t := 0; t < iters; t++ {
		if w, err = softmax(jointScores(mix, p.memoryReal, q, v)); err != nil {
			return nil, nil, fmt.Errorf("iteration %d: %w", t, err)
		}
		if v = p.weightedValues(mix, w, mix.Beta); v == nil {
			return nil, nil, fmt.Errorf("iteration %d: %w", t, errNoPrecision)
		}
	}
	return v, w, nil
}

// errNoPrecision reports an M-step of §3 whose weights w_ij β_j are all 0.
var errNoPrecision = errors.New("every weighted value precision w_ij β_j is 0")

// weightedValues returns Σ_j w_j μ_j over the real memory units when c is
// nil (the plain readout: the softmax already sums to 1), and otherwise
// Σ_j w_j c_j μ_j / Σ_j w_j c_j, or nil if Σ_j w_j c_j = 0. Padded units are
// skipped rather than multiplied by their zero weight, so that whatever they
// hold (NaN, ±Inf) cannot leak in.
func (p *problem) weightedValues(mix *Mixture, w, c []float64) []float64 {
	v := make([]float64, p.valueDim)
	var total float64
	for j, mu := range mix.Mu {
		if !p.memoryReal[j] {
			continue
		}
		wc := w[j]
		if c != nil {
			wc *= c[j]
		}
		total += wc
		for k, x := range mu {
			v[k] += wc * x
		}
	}
	if c == nil {
		return v
	}
	if total == 0 {
		return nil
	}
	for k := range v {
		v[k] /= total
	}
	return v
}
