package losses

import (
	"fmt"
	"math"

	"github.com/probformer/probformer/graph"
)

// eulerGamma is the Euler–Mascheroni constant γ = −ψ(1). It is written out
// rather than taken from gonum's mathext.Digamma(1), which is off by 5e-11.
const eulerGamma = 0.5772156649015329

// KLWeibullGamma is the KL divergence of a Weibull(k, λ) posterior from a
// Gamma(α, β) prior, β being the rate (layers/BAYES.md §3):
//
//	KL(Weibull(k,λ) ‖ Gamma(α,β)) = γα/k − α log λ + log k + β λ Γ(1+1/k)
//	                                − γ − 1 − α log β + lgamma(α)
//
// with γ the Euler–Mascheroni constant. Every argument must be > 0; the
// result is NaN or ±Inf otherwise.
func KLWeibullGamma(k, lambda, alpha, beta float64) float64 {
	lgA, _ := math.Lgamma(alpha)
	return eulerGamma*alpha/k - alpha*math.Log(lambda) + math.Log(k) + beta*lambda*math.Gamma(1+1/k) -
		eulerGamma - 1 - alpha*math.Log(beta) + lgA
}

// KLLogNormal is the KL divergence of a LogNormal(μ, σ²) posterior from a
// LogNormal(μ₀, σ₀²) prior, which is that of the underlying normals
// (layers/BAYES.md §4):
//
//	KL = log(σ₀/σ) + (σ² + (μ − μ₀)²) / (2σ₀²) − ½
//
// σ and σ₀ must be > 0. (A widely copied write-up has σ/σ₀ for the first
// term of the fraction; the expectation E_q[(log x − μ₀)²] = σ² + (μ − μ₀)²
// gives σ²/(2σ₀²).)
func KLLogNormal(mu, sigma, mu0, sigma0 float64) float64 {
	d := mu - mu0
	return math.Log(sigma0/sigma) + (sigma*sigma+d*d)/(2*sigma0*sigma0) - 0.5
}

// KLWeibullGammaNode is KLWeibullGamma element-wise on graph values, with
// the shape k and the prior rate β fixed hyperparameters and the posterior
// scale λ (as log λ) and the prior shape α graph values:
//
//	KL = α (γ/k − log λ − log β) + β Γ(1+1/k) e^{log λ} + lgamma(α) + log k − γ − 1
//
// logLambda and alpha have the same shape, e.g. [B, H, N, M]; so has the
// result. For the Weibull kernel (§3), with φ the softmax weights and p the
// prior mean (broadcast over queries), log λ = log φ − lgamma(1+1/k) and
// α = β p; then β Γ(1+1/k) λ = β φ. α must be > 0 everywhere, masked
// entries included (running the graph fails otherwise): keep masked keys'
// α positive and mask the KL afterwards.
func KLWeibullGammaNode(k float64, logLambda, alpha *graph.Node, beta float64) (*graph.Node, error) {
	if !(k > 0) || !(beta > 0) || math.IsInf(k, 0) || math.IsInf(beta, 0) {
		return nil, fmt.Errorf("Weibull–Gamma KL needs finite k > 0 and β > 0, have k = %v, β = %v", k, beta)
	}
	linear := graph.Mul(alpha, graph.AddScalar(graph.Neg(logLambda), eulerGamma/k-math.Log(beta)))
	mean := graph.Scale(graph.Exp(logLambda), beta*math.Gamma(1+1/k))
	kl := graph.Add(graph.Add(linear, mean), graph.Lgamma(alpha))
	return graph.AddScalar(kl, math.Log(k)-eulerGamma-1), nil
}

// KLLogNormalNode is KLLogNormal element-wise on graph values, with the
// posterior and prior locations μ and μ₀ graph values and the scales σ and
// σ₀ fixed hyperparameters:
//
//	KL = (μ − μ₀)² / (2σ₀²) + log(σ₀/σ) + σ²/(2σ₀²) − ½
//
// mu and mu0 have the same shape, e.g. [B, H, N, M]; so has the result. For
// the log-normal kernel (§4), μ = log φ − σ²/2 and μ₀ = log p − σ₀²/2 with
// p the prior mean broadcast over queries.
func KLLogNormalNode(mu, mu0 *graph.Node, sigma, sigma0 float64) (*graph.Node, error) {
	if !(sigma > 0) || !(sigma0 > 0) || math.IsInf(sigma, 0) || math.IsInf(sigma0, 0) {
		return nil, fmt.Errorf("log-normal KL needs finite σ > 0 and σ₀ > 0, have σ = %v, σ₀ = %v", sigma, sigma0)
	}
	sq := graph.Scale(graph.Square(graph.Sub(mu, mu0)), 1/(2*sigma0*sigma0))
	return graph.AddScalar(sq, math.Log(sigma0/sigma)+sigma*sigma/(2*sigma0*sigma0)-0.5), nil
}
