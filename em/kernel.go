package em

import (
	"errors"
	"fmt"
	"slices"

	"github.com/probformer/probformer/graph"
)

// Extras holds the optional graph inputs of Attend. Every field may be nil.
// Masks hold 1 for a real (or annotated) unit and 0 otherwise.
//
// Entries of padded or unannotated units are multiplied by zero weights
// rather than skipped, so, unlike in the plain-Go reference, they must be
// finite; zeros are the natural filling.
type Extras struct {
	// QueryMask marks the real query units: [B, N]. Padded query units are
	// left out of every sum over i, and their readout and weights rows are 0.
	QueryMask *graph.Node
	// Annotated marks the query units whose value is known, S of
	// MATH.md §5: [B, N]. A padded query unit is never in S. With
	// Annotated nil, S is empty and value propagation is skipped.
	Annotated *graph.Node
	// Values holds the known values v_i: [B, H, N, m]; required with
	// Annotated. Only the rows of S count.
	Values *graph.Node
	// PiLogits holds the free prior's logits: [B, H, M]; log π⁰ is their
	// log-softmax over the real memory units. Only the FreePrior reads it;
	// when it is nil, the free prior's logits are a learned parameter
	// "<name>.em.pi_logits" [H, M], initially 0 (uniform π⁰), which ties the
	// layer to one memory size M.
	PiLogits *graph.Node
}

// MixtureNodes is the graph form of Mixture: the adapted parameters of
// every example's and head's memory units. Padded memory units hold
// finite stand-ins (their LogPi is about MaskNegInf instead of −Inf), not
// the reference's initial values. Beta is nil when nothing uses β (free
// prior, no propagation, no value iterations), and, when cfg.ValueIters
// is 0, it leaves out the β update of the last propagation iteration,
// which nothing downstream reads (see Attend).
type MixtureNodes struct {
	Xi    *graph.Node // ξ: [B, H, M, d]
	Alpha *graph.Node // α: [B, H, M]
	Mu    *graph.Node // μ: [B, H, M, m]
	Beta  *graph.Node // β: [B, H, M]
	LogPi *graph.Node // log π: [B, H, M]
}

// AttendResult is what Attend builds.
type AttendResult struct {
	// Readout holds the inferred values v_i: [B, H, N, m]; zero rows at
	// padded query units.
	Readout *graph.Node
	// Weights holds the weights that formed each readout, as in
	// InferValues: [B, H, N, M]; zero rows at padded query units.
	Weights *graph.Node
	// Mixture holds the adapted memory.
	Mixture MixtureNodes
}

// attendComposed is Attend built from Gorgonia's generic ops, one node
// per step of every phase: the graph form of Run, equation for equation.
// It is the reference the fused op of Attend (graph.EMAttention) is
// tested against, and many times slower; it takes the same inputs and
// creates the same parameters.
func attendComposed(b *graph.Builder, name string, cfg Config, q, k, v, keyMask *graph.Node, ex *Extras) (AttendResult, error) {
	if ex == nil {
		ex = &Extras{}
	}
	l, err := newLayer(b, name, cfg, q, k, v, keyMask, ex)
	if err != nil {
		return AttendResult{}, fmt.Errorf("em: attend %s: %w", name, err)
	}
	return l.build(), nil
}

// Kernel is probabilistic attention with a fixed configuration and no
// query mask or annotations, in the form of the layers.Kernel interface
// (em does not import layers, so that layers may import em).
type Kernel struct {
	Config Config
}

// NewKernel returns the kernel that runs cfg, or an error if cfg is not
// valid, so that a bad configuration is reported before any graph is built.
func NewKernel(cfg Config) (Kernel, error) {
	if err := validateConfig(cfg); err != nil {
		return Kernel{}, fmt.Errorf("em: kernel: %w", err)
	}
	return Kernel{Config: cfg}, nil
}

// Attend implements layers.Kernel with Attend(b, name, k.Config, q, key,
// v, keyMask, nil): q [B, H, N, d], key [B, H, M, d], v [B, H, M, dv],
// keyMask [B, M] or nil → out [B, H, N, dv], weights [B, H, N, M].
// The interface has no error result, so an error (mismatched shapes, or a
// Config that NewKernel would reject) fails the build (graph.Builder.Fail),
// and graph.Compile returns it as its error.
func (k Kernel) Attend(b *graph.Builder, name string, q, key, v, keyMask *graph.Node) (out, weights *graph.Node) {
	res, err := Attend(b, name, k.Config, q, key, v, keyMask, nil)
	if err != nil {
		b.Fail(err)
	}
	return res.Readout, res.Weights
}

// validateConfig checks what Run checks about a Config, before any node is
// built.
func validateConfig(cfg Config) error {
	if cfg.KeyIters < 0 || cfg.PropagateIters < 0 || cfg.ValueIters < 0 {
		return fmt.Errorf("negative iteration count in %+v", cfg)
	}
	if cfg.Prior != LinkedPrior && cfg.Prior != FreePrior {
		return fmt.Errorf("unknown prior %v", cfg.Prior)
	}
	return nil
}

// layer is one Attend call being built: its inputs, sizes, masks and
// parameters. Internally every example-and-head pair is one of G = B·H
// independent problems, and nodes are 3-D, [G, ·, ·]: Gorgonia v0.9.18
// reduces axis 2 of a 4-D tensor wrongly (tensor's ReduceDefault treats
// the axes before it as one axis of stride strides[0]), which silently
// corrupts Sum(x, 2) and the gradient of every broadcast along axis 2 of
// [B, H, N, M] (all the per-unit terms of the scores), while 3-D
// reductions and broadcasts along any axis are right.
type layer struct {
	b    *graph.Builder
	name string
	cfg  Config

	batch, heads, nQuery, nMemory, keyDim, valueDim int // B, H, N, M, d, m
	groups                                          int // G = B·H

	q, xi0, mu0 *graph.Node // [G, N, d], [G, M, d], [G, M, m]
	keyMask     *graph.Node // [G, M] or nil
	maskAdd     *graph.Node // [G, M]: 0 real, MaskNegInf padded; nil without keyMask
	realMemory  *graph.Node // [G]: number of real memory units; nil without keyMask
	queryMask   *graph.Node // [G, N] or nil
	annotated   *graph.Node // [G, N]: S (annotated and real); nil if propagation is skipped
	values      *graph.Node // [G, N, m] with annotated
	piLogits    *graph.Node // [G, M] or nil
	params      headParams  // each [G]
	updateBeta  func(t int) bool
}

// sizes holds the dimensions of one Attend call.
type sizes struct {
	batch, heads, nQuery, nMemory, keyDim, valueDim int // B, H, N, M, d, m
}

// checkInputs checks Attend's configuration and the shapes of its inputs,
// and returns its sizes.
func checkInputs(cfg Config, q, k, v, keyMask *graph.Node, ex *Extras) (sizes, error) {
	if err := validateConfig(cfg); err != nil {
		return sizes{}, err
	}
	if q == nil || k == nil || v == nil {
		return sizes{}, errors.New("nil q, k or v")
	}
	qs, ks, vs := graph.Shape(q), graph.Shape(k), graph.Shape(v)
	if len(qs) != 4 || len(ks) != 4 || len(vs) != 4 {
		return sizes{}, fmt.Errorf("q %v, k %v, v %v: want 4-D [B, H, ·, ·]", qs, ks, vs)
	}
	z := sizes{batch: qs[0], heads: qs[1], nQuery: qs[2], keyDim: qs[3], nMemory: ks[2], valueDim: vs[3]}
	if !slices.Equal(ks, []int{z.batch, z.heads, z.nMemory, z.keyDim}) || !slices.Equal(vs[:3], ks[:3]) {
		return sizes{}, fmt.Errorf("q %v, k %v, v %v do not fit [B, H, N, d], [B, H, M, d], [B, H, M, m]", qs, ks, vs)
	}
	if err := checkShape("key mask", keyMask, z.batch, z.nMemory); err != nil {
		return sizes{}, err
	}
	if err := checkShape("query mask", ex.QueryMask, z.batch, z.nQuery); err != nil {
		return sizes{}, err
	}
	if (ex.Annotated == nil) != (ex.Values == nil) {
		return sizes{}, errors.New("annotation mask and annotated values must come together")
	}
	if err := checkShape("annotation mask", ex.Annotated, z.batch, z.nQuery); err != nil {
		return sizes{}, err
	}
	if err := checkShape("annotated values", ex.Values, z.batch, z.heads, z.nQuery, z.valueDim); err != nil {
		return sizes{}, err
	}
	if err := checkShape("prior logits", ex.PiLogits, z.batch, z.heads, z.nMemory); err != nil {
		return sizes{}, err
	}
	if ex.PiLogits != nil && cfg.Prior != FreePrior {
		return sizes{}, fmt.Errorf("prior logits given to the %v prior", cfg.Prior)
	}
	return z, nil
}

func newLayer(b *graph.Builder, name string, cfg Config, q, k, v, keyMask *graph.Node, ex *Extras) (*layer, error) {
	z, err := checkInputs(cfg, q, k, v, keyMask, ex)
	if err != nil {
		return nil, err
	}
	l := &layer{
		b: b, name: name, cfg: cfg,
		batch: z.batch, heads: z.heads, nQuery: z.nQuery, keyDim: z.keyDim, nMemory: z.nMemory, valueDim: z.valueDim,
		groups: z.batch * z.heads,
	}

	l.q = l.flatten(q)
	l.xi0 = l.flatten(k)
	l.mu0 = l.flatten(v)
	if ex.PiLogits != nil {
		l.piLogits = graph.Reshape(ex.PiLogits, l.groups, l.nMemory)
	}
	if keyMask != nil {
		l.keyMask = l.perHead("key_mask", keyMask)
		// (mask − 1)·1e9: 0 for real units, MaskNegInf for padded ones.
		l.maskAdd = graph.Scale(graph.AddScalar(l.keyMask, -1), -graph.MaskNegInf)
		l.realMemory = graph.Sum(l.keyMask, 1)
	}
	if ex.QueryMask != nil {
		l.queryMask = l.perHead("query_mask", ex.QueryMask)
	}
	propagate := cfg.PropagateIters > 0 && ex.Annotated != nil
	if propagate {
		l.annotated = l.perHead("annotated", ex.Annotated)
		if l.queryMask != nil {
			l.annotated = graph.Mul(l.annotated, l.queryMask)
		}
		l.values = l.flatten(ex.Values)
	}
	// The β update of the last propagation iteration reaches the readout
	// only through value inference; without it, a_β and b_β would be
	// parameters the loss cannot reach, which Gorgonia cannot
	// differentiate with respect to, so that update is left out.
	l.updateBeta = func(t int) bool {
		return cfg.AdaptBeta && (t < cfg.PropagateIters-1 || cfg.ValueIters > 0)
	}
	l.params = newHeadParams(b, name, l.heads, l.keyDim, paramUse{
		keys:   cfg.KeyIters > 0,
		alpha:  cfg.KeyIters > 0 && cfg.AdaptAlpha,
		values: propagate,
		beta:   propagate && l.updateBeta(0),
		pi:     propagate && cfg.AdaptPi,
		beta0:  cfg.Prior == LinkedPrior || propagate || cfg.ValueIters > 0,
	}, l.perGroup)
	return l, nil
}

// flatten merges the example and head axes of a 4-D node:
// [B, H, a, c] → [G, a, c].
func (l *layer) flatten(x *graph.Node) *graph.Node {
	s := graph.Shape(x)
	return graph.Reshape(x, l.groups, s[2], s[3])
}

// unflatten splits them again: [G, a, c...] → [B, H, a, c...].
func (l *layer) unflatten(x *graph.Node) *graph.Node {
	s := graph.Shape(x)
	return graph.Reshape(x, append([]int{l.batch, l.heads}, s[1:]...)...)
}

// perHead repeats a per-example mask [B, n] for every head: [G, n]. Masks
// are not differentiated.
func (l *layer) perHead(what string, mask *graph.Node) *graph.Node {
	n := graph.Shape(mask)[1]
	zeros := l.b.Constant(ParamName(l.name, what+".per_head"), []int{l.batch, l.heads, n}, make([]float64, l.groups*n))
	return graph.Reshape(graph.BroadcastAdd(zeros, mask, 1), l.groups, n)
}

// perGroup repeats a per-head value p [H, c...] for every example:
// [G, c...].
func (l *layer) perGroup(field string, p *graph.Node) *graph.Node {
	s := graph.Shape(p)
	tiled := l.b.Tile(ParamName(l.name, field+".per_example"), p, l.batch)
	return graph.Reshape(tiled, append([]int{l.groups}, s[1:]...)...)
}

// checkShape checks that x, if not nil, has the given shape.
func checkShape(what string, x *graph.Node, shape ...int) error {
	if x == nil {
		return nil
	}
	if s := graph.Shape(x); !slices.Equal(s, shape) {
		return fmt.Errorf("%s has shape %v, want %v", what, s, shape)
	}
	return nil
}

// build adds the phases in MATH.md's order (see Run).
func (l *layer) build() AttendResult {
	mix := l.initialMixture()
	var keyTerm *graph.Node
	mix, keyTerm = l.adaptKeys(mix)
	if l.annotated != nil {
		mix = l.propagate(mix, keyTerm)
	}
	readout, weights := l.inferValues(mix, keyTerm)
	res := AttendResult{
		Readout: l.unflatten(readout),
		Weights: l.unflatten(weights),
		Mixture: MixtureNodes{
			Xi:    l.unflatten(mix.Xi),
			Alpha: l.unflatten(mix.Alpha),
			Mu:    l.unflatten(mix.Mu),
			LogPi: l.unflatten(mix.LogPi),
		},
	}
	if mix.Beta != nil {
		res.Mixture.Beta = l.unflatten(mix.Beta)
	}
	return res
}
