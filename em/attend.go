package em

import (
	"fmt"

	"github.com/probformer/probformer/graph"
)

// Attend builds probabilistic attention, MATH.md §1–§6, batched over
// examples and heads: the graph form of Run, equation for equation and
// choice for choice (see Run, InitialMixture, AdaptKeys, Propagate and
// InferValues), with the cfg.KeyIters + cfg.PropagateIters +
// cfg.ValueIters iterations unrolled. It runs as one fused op,
// graph.EMAttention, whose backward pass is the analytic adjoint of every
// step; the same graph composed from generic ops (attendComposed) is the
// reference its tests compare it with.
//
//	q:       the queries q_i: [B, H, N, d]
//	k:       the initial keys ξ_j⁰: [B, H, M, d]
//	v:       the initial values μ_j⁰: [B, H, M, m]
//	keyMask: the real memory units: [B, M], or nil if none is padded;
//	         every example needs at least one real memory unit
//	ex:      optional query mask, annotations and free-prior logits
//
// The per-head prior hyperparameters are learned parameters
// "<name>.em.<field>" of shape [H] (see ParamName), created only if cfg
// uses them, transformed as LayerHyperparams says and initialised from
// DefaultRawParams(d). Value propagation is skipped, per example, when
// that example annotates no real query unit.
//
// Gorgonia cannot differentiate with respect to a parameter the loss does
// not reach, so Attend creates only the parameters that reach the readout,
// and leaves out the one update that cannot: the β update of the last
// propagation iteration when cfg.ValueIters = 0 (the readout then does
// not read β), so with PropagateIters = 1 and ValueIters = 0, AdaptBeta
// has no effect. Everything else equals Run. Mixture.Beta is nil when
// nothing reads β (free prior, no propagation, no value iterations).
//
// Scores use the expanded, clamped distance of §1, and every softmax
// subtracts its max; padded memory units get the additive score
// graph.MaskNegInf, so their weight is exactly 0 unless real scores fall
// below about −1e9. Attend returns an error for a bad cfg or mismatched
// shapes.
func Attend(b *graph.Builder, name string, cfg Config, q, k, v, keyMask *graph.Node, ex *Extras) (AttendResult, error) {
	res, err := attend(b, name, cfg, q, k, v, keyMask, ex, graph.EMReadout|graph.EMWeights|graph.EMMixture, layout{split: true})
	if err != nil {
		return AttendResult{}, err
	}
	out := AttendResult{Readout: res.Readout, Weights: res.Weights, Mixture: MixtureNodes{
		Xi: res.Xi, Alpha: res.Alpha, Mu: res.Mu, Beta: res.Beta, LogPi: res.LogPi}}
	if !usesBeta(cfg, ex) {
		out.Mixture.Beta = nil // nothing read β, which is then meaningless
	}
	return out, nil
}

// AttendHeads is Attend on heads that are not split, the layout of
// multi-head attention's projections, so that no transposes are made:
//
//	q:       [B, N, H·d]
//	k:       [B, M, H·d]
//	v:       [B, M, H·m]
//	keyMask: [B, M] or nil
//	ex:      as for Attend; its Values are [B, N, H·m]
//
// It builds only what want asks for (graph.EMReadout, graph.EMWeights):
// the readout [B, N, H·m] and the weights [B, H, N, M].
func AttendHeads(b *graph.Builder, name string, cfg Config, heads int, q, k, v, keyMask *graph.Node, ex *Extras, want graph.EMOutput) (readout, weights *graph.Node, err error) {
	if heads < 1 {
		return nil, nil, fmt.Errorf("em: attend %s: %d heads", name, heads)
	}
	if want&^(graph.EMReadout|graph.EMWeights) != 0 || want == 0 {
		return nil, nil, fmt.Errorf("em: attend %s: AttendHeads builds the readout and the weights only", name)
	}
	res, err := attend(b, name, cfg, q, k, v, keyMask, ex, want, layout{heads: heads})
	return res.Readout, res.Weights, err
}

// AttendHeadsPacked is AttendHeads' readout with the keys and values
// packed side by side in one kv [B, M, 2·H·d] (the keys of every head,
// then the values: graph.LinearConcat of the two projections), which the
// op reads in place, so the projections are one product and their
// gradient needs no copy. With residual the readout is q + AttendHeads'
// readout (graph.EMSpec.Residual), the residual connection in the same
// op. Values are as wide as keys (m = d):
//
//	q:       [B, N, H·d]
//	kv:      [B, M, 2·H·d]
//	keyMask: [B, M] or nil
//	ex:      as for AttendHeads
//
// → the readout [B, N, H·d], the values of AttendHeads on kv's two
// halves (and of Add(q, readout) with residual) bit for bit.
func AttendHeadsPacked(b *graph.Builder, name string, cfg Config, heads int, q, kv, keyMask *graph.Node, ex *Extras, residual bool) (*graph.Node, error) {
	if heads < 1 {
		return nil, fmt.Errorf("em: attend %s: %d heads", name, heads)
	}
	if q == nil || kv == nil {
		return nil, fmt.Errorf("em: attend %s: nil q or kv", name)
	}
	qs, kvs := graph.Shape(q), graph.Shape(kv)
	if len(qs) != 3 || len(kvs) != 3 || kvs[2] != 2*qs[2] {
		return nil, fmt.Errorf("em: attend %s: q %v, kv %v do not fit [B, N, H·d], [B, M, 2·H·d]", name, qs, kvs)
	}
	res, err := attend(b, name, cfg, q, kv, nil, keyMask, ex, graph.EMReadout, layout{heads: heads, residual: residual})
	return res.Readout, err
}

// layout is how attend's inputs are laid out: split heads [B, H, ·, ·],
// or unsplit [B, ·, H·w] with heads given (and then v nil when k packs
// the keys and values); residual asks for q + the readout.
type layout struct {
	split    bool
	heads    int
	residual bool
}

// usesBeta reports whether anything reads β: the linked prior, value
// propagation or value iterations.
func usesBeta(cfg Config, ex *Extras) bool {
	return cfg.Prior == LinkedPrior || (cfg.PropagateIters > 0 && ex != nil && ex.Annotated != nil) || cfg.ValueIters > 0
}

// attend checks the inputs, binds the layer's parameters (the same names,
// shapes and order as attendComposed) and builds graph.EMAttention.
func attend(b *graph.Builder, name string, cfg Config, q, k, v, keyMask *graph.Node, ex *Extras, want graph.EMOutput, lay layout) (graph.EMResult, error) {
	if ex == nil {
		ex = &Extras{}
	}
	var z sizes
	var err error
	if lay.split {
		z, err = checkInputs(cfg, q, k, v, keyMask, ex)
	} else {
		if q == nil || k == nil {
			return graph.EMResult{}, fmt.Errorf("em: attend %s: nil q or k", name)
		}
		ks, vs := graph.Shape(k), []int(nil)
		if v != nil {
			vs = graph.Shape(v)
		} else if len(ks) == 3 { // packed: two halves of the queries' width
			ks = []int{ks[0], ks[1], ks[2] / 2}
			vs = ks
		}
		z, err = checkUnsplit(cfg, lay.heads, graph.Shape(q), ks, vs, keyMask, ex)
	}
	if err != nil {
		return graph.EMResult{}, fmt.Errorf("em: attend %s: %w", name, err)
	}
	propagate := cfg.PropagateIters > 0 && ex.Annotated != nil
	spec := graph.EMSpec{KeyIters: cfg.KeyIters, PropagateIters: cfg.PropagateIters, ValueIters: cfg.ValueIters,
		AdaptAlpha: cfg.AdaptAlpha, AdaptBeta: cfg.AdaptBeta, AdaptPi: cfg.AdaptPi,
		FreePrior: cfg.Prior == FreePrior, Heads: z.heads, SplitHeads: lay.split, PackedKV: !lay.split && v == nil,
		Residual: lay.residual}
	p := newHeadParams(b, name, z.heads, z.keyDim, paramUse{
		keys:   cfg.KeyIters > 0,
		alpha:  cfg.KeyIters > 0 && cfg.AdaptAlpha,
		values: propagate,
		beta:   propagate && spec.UpdatesBeta(0),
		pi:     propagate && cfg.AdaptPi,
		beta0:  usesBeta(cfg, ex),
	}, nil) // raw: the op transforms them (HyperShift)
	in := graph.EMInputs{Q: q, K: k, V: v, KeyMask: keyMask, QueryMask: ex.QueryMask, PiLogits: ex.PiLogits,
		Alpha0: p.alpha0, Beta0: p.beta0, ThetaXi: p.thetaXi, AAlphaExtra: p.aAlphaExtra, BAlpha: p.bAlpha,
		ThetaMu: p.thetaMu, ABetaExtra: p.aBetaExtra, BBeta: p.bBeta, PiExtra: p.piExtra, HyperShift: hyperShifts()}
	if propagate {
		in.Annotated, in.Values = ex.Annotated, ex.Values
	}
	if cfg.Prior == FreePrior && in.PiLogits == nil {
		in.PiLogits = b.Param(ParamName(name, paramPiLogits), []int{z.heads, z.nMemory}, graph.Zeros)
	}
	return graph.EMAttention(spec, in, want), nil
}

// checkUnsplit is checkInputs for AttendHeads's layout.
// It takes the shapes of q, k and v (a packed kv's halves).
func checkUnsplit(cfg Config, heads int, qs, ks, vs []int, keyMask *graph.Node, ex *Extras) (sizes, error) {
	if err := validateConfig(cfg); err != nil {
		return sizes{}, err
	}
	if len(qs) != 3 || len(ks) != 3 || len(vs) != 3 || qs[2]%heads != 0 || vs[2]%heads != 0 ||
		ks[0] != qs[0] || ks[2] != qs[2] || vs[0] != qs[0] || vs[1] != ks[1] {
		return sizes{}, fmt.Errorf("q %v, k %v, v %v do not fit [B, N, H·d], [B, M, H·d], [B, M, H·m] with H = %d", qs, ks, vs, heads)
	}
	z := sizes{batch: qs[0], heads: heads, nQuery: qs[1], keyDim: qs[2] / heads, nMemory: ks[1], valueDim: vs[2] / heads}
	for _, c := range []struct {
		what  string
		x     *graph.Node
		shape []int
	}{
		{"key mask", keyMask, []int{z.batch, z.nMemory}},
		{"query mask", ex.QueryMask, []int{z.batch, z.nQuery}},
		{"annotation mask", ex.Annotated, []int{z.batch, z.nQuery}},
		{"annotated values", ex.Values, []int{z.batch, z.nQuery, heads * z.valueDim}},
		{"prior logits", ex.PiLogits, []int{z.batch, heads, z.nMemory}},
	} {
		if err := checkShape(c.what, c.x, c.shape...); err != nil {
			return sizes{}, err
		}
	}
	if (ex.Annotated == nil) != (ex.Values == nil) {
		return sizes{}, fmt.Errorf("annotation mask and annotated values must come together")
	}
	if ex.PiLogits != nil && cfg.Prior != FreePrior {
		return sizes{}, fmt.Errorf("prior logits given to the %v prior", cfg.Prior)
	}
	return z, nil
}
