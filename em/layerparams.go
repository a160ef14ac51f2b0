package em

import (
	"math"

	"github.com/probformer/probformer/graph"
)

// Floors of the graph layer's positivity transforms. MATH.md §6 asks
// only for positivity (softplus); the graph layer adds a small constant so
// that no learned value can reach the boundary of its range, where the
// unrolled updates produce 0/0, log 0 or precisions without bound:
//
//   - a rate b → 0 lets a precision grow towards (a−1 + (d/2) n)/b as a
//     component collapses onto one point, and the expanded distance of §1
//     then loses every digit (see sqDist); b ≥ PriorFloor caps it;
//   - θ_ξ → 0 or θ_μ → 0 gives 0/0 in the ξ or μ update of a unit that no
//     query unit weighs (n_j = 0, which is every padded unit);
//   - a − 1 → 0 gives α_j = 0 or β_j = 0 for such a unit, and θ_π − 1 → 0
//     gives π_j = 0; the next scores then take log 0 = −∞, whose gradient
//     times a zero weight is NaN.
//
// The floor is added, not taken as a maximum, so the transforms stay
// smooth and every raw value keeps a nonzero gradient.
const (
	// PriorFloor is added to θ_ξ, a_α − 1, b_α, θ_μ, a_β − 1, b_β and
	// θ_π − 1.
	PriorFloor = 1e-4
	// PrecisionFloor is added to the initial precisions α⁰ and β⁰, which
	// only need log α⁰, log β⁰ finite. It is far below PriorFloor so that
	// β⁰ can approach the β → 0 limit of MATH.md §2 (a readout term of
	// (β⁰/2)‖μ_j‖² ≤ 5e-9 ‖μ_j‖²).
	PrecisionFloor = 1e-8
)

// LayerHyperparams returns the hyperparameters and initial precisions that
// the graph layer (Attend) derives from one head's raw parameters:
//
//	θ_ξ = ε + softplus(r),  a_α = 1 + ε + softplus(r),  b_α = ε + softplus(r),
//	θ_μ = ε + softplus(r),  a_β = 1 + ε + softplus(r),  b_β = ε + softplus(r),
//	θ_π = 1 + ε + softplus(r),
//	α⁰ = ε₀ + softplus(r),  β⁰ = ε₀ + softplus(r),
//
// with ε = PriorFloor and ε₀ = PrecisionFloor: the transforms of MATH.md
// §6 (RawParams.Hyperparams, RawParams.Precisions) plus the floors. It is
// the plain-Go mirror of the graph's parameterisation, for tests and for
// reading a trained layer's priors. The graph computes softplus as
// Gorgonia's Softplus does (graph.SoftplusShift in the composed layer;
// the fused op itself, given graph.EMInputs.HyperShift), which returns r
// itself for r > 16 (float64; 14 in float32), an absolute difference
// below 1.2e-7 from this exact softplus.
func (r RawParams) LayerHyperparams() (h Hyperparams, alpha0, beta0 float64) {
	floored := func(x float64) float64 { return PriorFloor + Softplus(x) }
	h = Hyperparams{
		ThetaXi: floored(r.ThetaXi),
		AAlpha:  1 + floored(r.AAlpha),
		BAlpha:  floored(r.BAlpha),
		ThetaMu: floored(r.ThetaMu),
		ABeta:   1 + floored(r.ABeta),
		BBeta:   floored(r.BBeta),
		ThetaPi: 1 + floored(r.ThetaPi),
	}
	return h, PrecisionFloor + Softplus(r.Alpha0), PrecisionFloor + Softplus(r.Beta0)
}

// Initial values of the graph layer's priors (DefaultRawParams).
const (
	initialBeta0      = 0.01 // β⁰: the value likelihood starts weak
	initialTheta      = 10   // θ_ξ, θ_μ: keys and values start tied to their projections
	initialShapeExtra = 1    // a_α − 1, a_β − 1
	initialPiExtra    = 1    // θ_π − 1: one pseudo-count per memory unit
)

// DefaultRawParams returns the raw parameters a head of the graph layer
// starts from when its key dimension is d. They put the layer near
// softmax attention (MATH.md §2) and keep every EM step mild:
//
//	α⁰ = 1/√d        the scale of scaled dot-product attention;
//	β⁰ = 0.01        the value likelihood, and the (β⁰/2)‖μ_j‖² term of
//	                 the linked prior, start weak;
//	θ_ξ = θ_μ = 10   a unit's key or value moves by α n_j/(θ + α n_j) of
//	                 the way to its queries' mean: a few percent at the
//	                 start when n_j ≈ 1;
//	a_α = a_β = 2    with b_α = √d and b_β = 1/β⁰, so that each Gamma
//	                 prior's mode (a − 1)/b equals the initial precision;
//	θ_π = 2          one pseudo-count per memory unit.
//
// With no iterations the layer with these values is softmax attention
// with its logits shifted by (β⁰/2)‖μ_j‖² (linked prior).
func DefaultRawParams(d int) RawParams {
	alpha0 := 1 / math.Sqrt(float64(max(d, 1)))
	return RawParams{
		ThetaXi: rawFor(initialTheta, PriorFloor),
		AAlpha:  rawFor(initialShapeExtra, PriorFloor),
		BAlpha:  rawFor(1/alpha0, PriorFloor),
		ThetaMu: rawFor(initialTheta, PriorFloor),
		ABeta:   rawFor(initialShapeExtra, PriorFloor),
		BBeta:   rawFor(1/initialBeta0, PriorFloor),
		ThetaPi: rawFor(initialPiExtra, PriorFloor),
		Alpha0:  rawFor(alpha0, PrecisionFloor),
		Beta0:   rawFor(initialBeta0, PrecisionFloor),
	}
}

// rawFor returns the raw value r with floor + softplus(r) = y, for the
// constants above (all y > floor): InverseSoftplus(y − floor).
func rawFor(y, floor float64) float64 {
	x := y - floor
	return x + math.Log(-math.Expm1(-x))
}

// headParams holds one layer's prior hyperparameters as graph nodes,
// already transformed by LayerHyperparams's rules and repeated for every
// example: [G] = [B·H]; or, for the fused op (attend), the raw
// parameters [H], which the op transforms itself. The shapes are kept as a − 1 and θ_π − 1, the
// only forms the updates use. Fields of parameters the configuration does
// not use are nil: a created parameter that the loss cannot reach would
// make Gorgonia's Grad fail.
type headParams struct {
	thetaXi, aAlphaExtra, bAlpha        *graph.Node
	thetaMu, aBetaExtra, bBeta, piExtra *graph.Node
	alpha0, beta0                       *graph.Node
}

// Parameter names, appended to "<layer name>.em.".
const (
	paramThetaXi  = "theta_xi"
	paramAAlpha   = "a_alpha"
	paramBAlpha   = "b_alpha"
	paramThetaMu  = "theta_mu"
	paramABeta    = "a_beta"
	paramBBeta    = "b_beta"
	paramThetaPi  = "theta_pi"
	paramAlpha0   = "alpha0"
	paramBeta0    = "beta0"
	paramPiLogits = "pi_logits"
)

// ParamName returns the full name of the layer parameter called field
// (theta_xi, a_alpha, b_alpha, theta_mu, a_beta, b_beta, theta_pi, alpha0,
// beta0 or pi_logits) in the layer called name: "<name>.em.<field>".
func ParamName(name, field string) string { return name + ".em." + field }

// newHeadParams creates (or binds) the raw parameters [heads] that uses
// marks and returns them transformed and passed through expand (which
// repeats them for every example), or, with expand nil, raw, for an op
// that transforms them itself (hyperShifts).
func newHeadParams(b *graph.Builder, name string, heads, d int, uses paramUse, expand func(field string, p *graph.Node) *graph.Node) headParams {
	init := DefaultRawParams(d)
	param := func(field string, raw, floor float64) *graph.Node {
		p := b.Param(ParamName(name, field), []int{heads}, graph.Constant(raw))
		if expand == nil {
			return p
		}
		return expand(field, graph.SoftplusShift(p, floor))
	}
	var p headParams
	p.alpha0 = param(paramAlpha0, init.Alpha0, PrecisionFloor)
	if uses.beta0 {
		p.beta0 = param(paramBeta0, init.Beta0, PrecisionFloor)
	}
	if uses.keys {
		p.thetaXi = param(paramThetaXi, init.ThetaXi, PriorFloor)
	}
	if uses.alpha {
		p.aAlphaExtra = param(paramAAlpha, init.AAlpha, PriorFloor)
		p.bAlpha = param(paramBAlpha, init.BAlpha, PriorFloor)
	}
	if uses.values {
		p.thetaMu = param(paramThetaMu, init.ThetaMu, PriorFloor)
	}
	if uses.beta {
		p.aBetaExtra = param(paramABeta, init.ABeta, PriorFloor)
		p.bBeta = param(paramBBeta, init.BBeta, PriorFloor)
	}
	if uses.pi {
		p.piExtra = param(paramThetaPi, init.ThetaPi, PriorFloor)
	}
	return p
}

// hyperShifts is the floor each of the nine hyperparameters takes after
// its softplus, in graph.EMInputs' order (α⁰, β⁰, θ_ξ, a_α − 1, b_α, θ_μ,
// a_β − 1, b_β, θ_π − 1): newHeadParams's transforms, for the fused op
// to apply to the raw parameters (graph.EMInputs.HyperShift).
func hyperShifts() *[9]float64 {
	return &[9]float64{PrecisionFloor, PrecisionFloor, PriorFloor, PriorFloor, PriorFloor, PriorFloor, PriorFloor,
		PriorFloor, PriorFloor}
}

// paramUse says which parameters a layer's configuration reaches.
type paramUse struct {
	keys, alpha      bool // θ_ξ; a_α, b_α
	values, beta, pi bool // θ_μ; a_β, b_β; θ_π
	beta0            bool
}
