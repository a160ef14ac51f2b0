package em

import (
	"errors"
	"fmt"
	"math"
)

// Prior selects how the initial mixing prior π⁰ is formed (MATH.md §6).
type Prior int

const (
	// LinkedPrior is the norm-linked prior of MATH.md §2,
	// log π_j⁰ = (α_j⁰/2) ‖ξ_j⁰‖² + (β_j⁰/2) ‖μ_j⁰‖² − log Z.
	LinkedPrior Prior = iota
	// FreePrior takes log π⁰ as the log-softmax of Inputs.PiLogits.
	FreePrior
)

// String returns "linked" or "free".
func (p Prior) String() string {
	switch p {
	case LinkedPrior:
		return "linked"
	case FreePrior:
		return "free"
	}
	return fmt.Sprintf("Prior(%d)", int(p))
}

// InitialMixture returns the mixture EM starts from: ξ⁰, α⁰, μ⁰, β⁰ copied
// from in and log π⁰ from the chosen prior, normalised over the real memory
// units (−Inf at padded ones). For LinkedPrior (MATH.md §2)
//
//	log π_j⁰ = (α_j⁰/2) ‖ξ_j⁰‖² + (β_j⁰/2) ‖μ_j⁰‖² − log Z;
//
// §2 writes it for equal precisions, and per-unit precisions α_j⁰, β_j⁰
// are its natural reading when they differ. It is computed once, from the
// initial parameters, and does not follow ξ or μ as they adapt (§ Order of
// the phases). For FreePrior log π_j⁰ = ℓ_j − log Σ_k exp ℓ_k with
// ℓ = in.PiLogits.
func InitialMixture(prior Prior, in Inputs) (Mixture, error) {
	p, err := newProblem(in)
	if err != nil {
		return Mixture{}, fmt.Errorf("em: initial mixture: %w", err)
	}
	logits := make([]float64, p.nMemory)
	switch prior {
	case LinkedPrior:
		for j := range logits {
			if p.memoryReal[j] {
				logits[j] = in.Alpha0[j]/2*dot(in.Xi0[j], in.Xi0[j]) + in.Beta0[j]/2*dot(in.Mu0[j], in.Mu0[j])
			}
		}
	case FreePrior:
		if in.PiLogits == nil {
			return Mixture{}, errors.New("em: initial mixture: free prior without PiLogits")
		}
		copy(logits, in.PiLogits)
	default:
		return Mixture{}, fmt.Errorf("em: initial mixture: unknown prior %v", prior)
	}
	for j := range logits {
		if !p.memoryReal[j] {
			logits[j] = math.Inf(-1)
		} else if math.IsInf(logits[j], 0) {
			return Mixture{}, fmt.Errorf("em: initial mixture: %v prior logit %d overflows", prior, j)
		}
	}
	logZ := logSumExp(logits)
	for j := range logits {
		logits[j] -= logZ
	}
	mix := Mixture{
		Xi:    cloneMatrix(in.Xi0),
		Alpha: append([]float64(nil), in.Alpha0...),
		Mu:    cloneMatrix(in.Mu0),
		Beta:  append([]float64(nil), in.Beta0...),
		LogPi: logits,
	}
	return mix, nil
}
