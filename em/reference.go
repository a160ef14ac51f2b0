package em

import "fmt"

// Config sets what one layer's EM does (MATH.md §6: iteration counts are
// configuration, not parameters).
type Config struct {
	// KeyIters is T_k, the key adaptation iterations (§4).
	KeyIters int
	// PropagateIters is T_p, the value propagation iterations (§5).
	PropagateIters int
	// ValueIters is T_v, the value inference iterations (§3); 0 gives the
	// plain readout.
	ValueIters int
	// AdaptAlpha adds the α update to key adaptation.
	AdaptAlpha bool
	// AdaptBeta and AdaptPi add the β and π updates to value propagation.
	AdaptBeta, AdaptPi bool
	// Prior selects the initial mixing prior π⁰.
	Prior Prior
}

// Result is the outcome of one layer's EM for one example and head.
type Result struct {
	// Readout holds the inferred values v_i: [N, m]; zero rows at padded
	// query units.
	Readout [][]float64
	// Weights holds the weights that formed each readout (see InferValues):
	// [N, M]; zero rows at padded query units.
	Weights [][]float64
	// Mixture holds the adapted ξ, α, μ, β and log π. Padded memory units
	// keep their initial parameters and log π = −Inf.
	Mixture
}

// Run runs one layer's EM in the order MATH.md prescribes ("Order of the
// phases"):
//
//  1. π⁰ from cfg.Prior, once, from ξ⁰, μ⁰, α⁰, β⁰ (InitialMixture, §2, §6);
//  2. cfg.KeyIters iterations of key adaptation from all real query units
//     (AdaptKeys, §4);
//  3. cfg.PropagateIters iterations of value propagation from the annotated
//     units with the adapted keys, skipped when none is annotated
//     (Propagate, §5);
//  4. every real query unit, annotated or not, read out with the adapted
//     parameters and cfg.ValueIters iterations (InferValues, §3).
//
// The hyperparameters of a phase are checked only if its iteration count
// is positive. Errors come from the phase that failed and say which.
func Run(cfg Config, h Hyperparams, in Inputs) (Result, error) {
	if cfg.KeyIters < 0 || cfg.PropagateIters < 0 || cfg.ValueIters < 0 {
		return Result{}, fmt.Errorf("em: layer: negative iteration count in %+v", cfg)
	}
	mix, err := InitialMixture(cfg.Prior, in)
	if err != nil {
		return Result{}, err
	}
	if cfg.KeyIters > 0 {
		if mix, err = AdaptKeys(h, in, mix, cfg.KeyIters, cfg.AdaptAlpha); err != nil {
			return Result{}, err
		}
	}
	if cfg.PropagateIters > 0 {
		if mix, err = Propagate(h, in, mix, cfg.PropagateIters, cfg.AdaptBeta, cfg.AdaptPi); err != nil {
			return Result{}, err
		}
	}
	readout, weights, err := InferValues(in, mix, cfg.ValueIters)
	if err != nil {
		return Result{}, err
	}
	return Result{Readout: readout, Weights: weights, Mixture: mix}, nil
}
