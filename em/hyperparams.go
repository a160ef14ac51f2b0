package em

import (
	"fmt"
	"math"
)

// Hyperparams holds one head's prior hyperparameters of MATH.md §4 and §5,
// already constrained (see RawParams for the unconstrained, learned form).
type Hyperparams struct {
	// ThetaXi is θ_ξ > 0, the precision of the key prior ξ_j ~ N(ξ_j⁰, θ_ξ⁻¹ I_d).
	ThetaXi float64
	// AAlpha ≥ 1 and BAlpha > 0 are the shape a_α and rate b_α of the key
	// precision prior α_j ~ Gamma(a_α, b_α).
	AAlpha, BAlpha float64
	// ThetaMu is θ_μ > 0, the precision of the value prior μ_j ~ N(μ_j⁰, θ_μ⁻¹ I_m).
	ThetaMu float64
	// ABeta ≥ 1 and BBeta > 0 are the shape a_β and rate b_β of the value
	// precision prior β_j ~ Gamma(a_β, b_β).
	ABeta, BBeta float64
	// ThetaPi ≥ 1 is the concentration θ_π of the mixing prior
	// π ~ Dirichlet(θ_π, …, θ_π).
	ThetaPi float64
}

// validateKeys checks the hyperparameters that §4 and its objective use.
func (h Hyperparams) validateKeys() error {
	switch {
	case !(h.ThetaXi > 0) || math.IsInf(h.ThetaXi, 0):
		return fmt.Errorf("θ_ξ = %v, want finite and > 0", h.ThetaXi)
	case !(h.AAlpha >= 1) || math.IsInf(h.AAlpha, 0):
		return fmt.Errorf("a_α = %v, want finite and ≥ 1", h.AAlpha)
	case !(h.BAlpha > 0) || math.IsInf(h.BAlpha, 0):
		return fmt.Errorf("b_α = %v, want finite and > 0", h.BAlpha)
	}
	return nil
}

// validateValues checks the hyperparameters that §5 and its objective use.
func (h Hyperparams) validateValues() error {
	switch {
	case !(h.ThetaMu > 0) || math.IsInf(h.ThetaMu, 0):
		return fmt.Errorf("θ_μ = %v, want finite and > 0", h.ThetaMu)
	case !(h.ABeta >= 1) || math.IsInf(h.ABeta, 0):
		return fmt.Errorf("a_β = %v, want finite and ≥ 1", h.ABeta)
	case !(h.BBeta > 0) || math.IsInf(h.BBeta, 0):
		return fmt.Errorf("b_β = %v, want finite and > 0", h.BBeta)
	case !(h.ThetaPi >= 1) || math.IsInf(h.ThetaPi, 0):
		return fmt.Errorf("θ_π = %v, want finite and ≥ 1", h.ThetaPi)
	}
	return nil
}

// RawParams holds one head's learned parameters of MATH.md §6 before the
// positivity transforms: any real value is valid, and Hyperparams and
// Precisions map them into the constrained ranges.
type RawParams struct {
	ThetaXi, AAlpha, BAlpha float64
	ThetaMu, ABeta, BBeta   float64
	ThetaPi                 float64
	// Alpha0 and Beta0 give the initial precisions α⁰, β⁰ shared by the
	// head's memory units.
	Alpha0, Beta0 float64
}

// Hyperparams applies the positivity transforms of MATH.md §6:
//
//	θ_ξ = softplus(r),  a_α = 1 + softplus(r),  b_α = softplus(r),
//	θ_μ = softplus(r),  a_β = 1 + softplus(r),  b_β = softplus(r),
//	θ_π = 1 + softplus(r).
//
// θ_π gets 1 + softplus because §5 requires θ_π ≥ 1.
func (r RawParams) Hyperparams() Hyperparams {
	return Hyperparams{
		ThetaXi: Softplus(r.ThetaXi),
		AAlpha:  1 + Softplus(r.AAlpha),
		BAlpha:  Softplus(r.BAlpha),
		ThetaMu: Softplus(r.ThetaMu),
		ABeta:   1 + Softplus(r.ABeta),
		BBeta:   Softplus(r.BBeta),
		ThetaPi: 1 + Softplus(r.ThetaPi),
	}
}

// Precisions returns the initial precisions α⁰ = softplus(r.Alpha0) and
// β⁰ = softplus(r.Beta0) of MATH.md §6.
func (r RawParams) Precisions() (alpha0, beta0 float64) {
	return Softplus(r.Alpha0), Softplus(r.Beta0)
}

// Softplus returns log(1 + eˣ), computed as max(x, 0) + log1p(e^−|x|) so that
// it neither overflows for large x nor loses precision for very negative x.
func Softplus(x float64) float64 {
	return math.Max(x, 0) + math.Log1p(math.Exp(-math.Abs(x)))
}

// InverseSoftplus returns the x with Softplus(x) = y, that is log(eʸ − 1),
// computed as y + log(−expm1(−y)). It is for initialising a RawParams field
// to a wanted constrained value; y must be finite and > 0.
func InverseSoftplus(y float64) (float64, error) {
	if !(y > 0) || math.IsInf(y, 0) {
		return 0, fmt.Errorf("em: inverse softplus of %v: want finite and > 0", y)
	}
	return y + math.Log(-math.Expm1(-y)), nil
}
