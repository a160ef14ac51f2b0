package layers

import (
	"errors"
	"fmt"

	"github.com/probformer/probformer/em"
	"github.com/probformer/probformer/graph"
)

// SegmenterConfig is the architecture of a Segmenter.
type SegmenterConfig struct {
	// FeatDim is the width of a pixel's features (datasets.SegFeatDim).
	FeatDim int
	// Classes is the number of classes C. It is also the value width m of
	// every attention head: a head's values live in label space.
	Classes int
	// Dim is the width D of the pixel encoder and of the query and key
	// projections of every layer (Heads·d).
	Dim   int
	Heads int
	// Encoder is the number of hidden layers of the per-pixel MLP (≥ 1).
	Encoder int
	// Layers is the number of EM attention layers (≥ 1).
	Layers int
	// Attention must be of kind em; its PropagateIters spread the clicked
	// labels (em/MATH.md §5).
	Attention AttentionConfig
}

// Validate reports the first inconsistent field.
func (c SegmenterConfig) Validate() error {
	switch {
	case c.FeatDim <= 0:
		return fmt.Errorf("feature width must be positive, is %d", c.FeatDim)
	case c.Classes < 2:
		return fmt.Errorf("classes must be at least 2, is %d", c.Classes)
	case c.Dim <= 0:
		return fmt.Errorf("dim must be positive, is %d", c.Dim)
	case c.Heads <= 0 || c.Dim%c.Heads != 0:
		return fmt.Errorf("heads = %d must divide dim = %d", c.Heads, c.Dim)
	case c.Encoder < 1:
		return fmt.Errorf("encoder layers must be at least 1, is %d", c.Encoder)
	case c.Layers < 1:
		return fmt.Errorf("attention layers must be at least 1, is %d", c.Layers)
	case c.Attention.Kind != "em":
		return fmt.Errorf("attention kind must be em (clicks are annotated units of em/MATH.md §5), is %q", c.Attention.Kind)
	}
	_, err := newEMKernel(c.Attention)
	return err
}

// Segmenter labels every pixel of an image from its features and a few
// clicked pixels whose labels are known, with probabilistic attention over
// the pixels (em/MATH.md). Every pixel is both a query unit and a memory
// unit of each layer:
//
//	h      = MLP(x)                                    per pixel, ReLU: [B, P, D]
//	q, ξ⁰  = h W_q, h W_k                              per head: [B, H, P, d]
//	μ⁰     = h W_v + b_v                               per head: [B, H, P, C]
//	S, v_i = clicked pixels, onehot(label_i)           the annotated units of §5
//	r      = EM(q, ξ⁰, μ⁰; S, v)                       §4 keys, §5 propagation, §3 readout
//	logits = MLP(r)                                    [B, P, C]
//
// The value space of each head is label space (m = C) and a click's known
// value is its one-hot label itself, with no learned embedding: μ_j is then a
// memory unit's soft label, value propagation moves the μ_j of the units a
// clicked pixel weighs towards its label, and the readout of every pixel is
// a mixture of soft labels. Colour and position tell which pixels belong
// together; only the clicks tell the class. With no clicks, or with
// PropagateIters = 0, the readout cannot depend on any label, so the model
// can only guess.
//
// With Layers > 1, layer l + 1 reads h ← ReLU([h, r] W + b), and every layer
// is given the same clicks. Parameters: enc.<i>, em.<l>.{wq,wk,wv} and the
// priors em.<l>.em.* (em.ParamName), em.<l>.mix (between layers), head.<i>.
//
// The value-side priors start where clicks matter (SegmenterPriors), not
// at em's defaults, which keep value propagation all but off.
type Segmenter struct {
	Config SegmenterConfig
}

// Initial value-side priors of a Segmenter's attention layers.
//
// A click moves the value of memory unit j by the fraction
// β n_j / (θ_μ + β n_j) of the way to its label (em/MATH.md §5), where n_j
// is the click's weight on j, about 1/P for an untrained layer that weighs
// all P pixels alike. em.DefaultRawParams start at β⁰/θ_μ = 10⁻³, so
// clicks move nothing, the readout carries no label, and no gradient asks
// for more: in 400 steps of segment-em from those defaults, β⁰ and θ_μ
// moved by a few percent and the loss stayed at log C. β⁰/θ_μ = 10 lets five clicks on 144 pixels move every
// unit by about a quarter of the way, which the head can read from the
// first step; training then sharpens the weights and sets the priors.
const (
	segmenterBeta0   = 1.0
	segmenterThetaMu = 0.1
)

// SegmenterPriors returns the raw prior parameters each head of a
// Segmenter starts from, for key width d: em.DefaultRawParams(d) with
// β⁰ = 1, θ_μ = 0.1 and b_β = (a_β − 1)/β⁰, so that the Gamma prior on β
// still has its mode at β⁰.
func SegmenterPriors(d int) em.RawParams {
	r := em.DefaultRawParams(d)
	h, _, _ := r.LayerHyperparams()
	r.Beta0 = rawAbove(segmenterBeta0, em.PrecisionFloor)
	r.ThetaMu = rawAbove(segmenterThetaMu, em.PriorFloor)
	r.BBeta = rawAbove((h.ABeta-1)/segmenterBeta0, em.PriorFloor)
	return r
}

// rawAbove returns the raw value r with floor + softplus(r) = y, the
// inverse of em's transforms; y > floor is a constant above.
func rawAbove(y, floor float64) float64 {
	r, err := em.InverseSoftplus(y - floor)
	if err != nil {
		panic(err) // unreachable for the constants above
	}
	return r
}

// initPriors creates the value-side prior parameters of layer name with
// the values of SegmenterPriors before em.Attend asks for them: a
// parameter is initialised by its first request (graph.Builder.Param), and
// em.Attend then binds the same ones. Only parameters that em.Attend uses
// for cfg with annotated units are created, since a parameter the loss
// cannot reach fails the gradient (see em.Attend).
func initPriors(b *graph.Builder, name string, cfg em.Config, heads, d int) {
	r := SegmenterPriors(d)
	propagate := cfg.PropagateIters > 0
	for _, p := range []struct {
		field string
		raw   float64
		used  bool
	}{
		{"beta0", r.Beta0, cfg.Prior == em.LinkedPrior || propagate || cfg.ValueIters > 0},
		{"theta_mu", r.ThetaMu, propagate},
		{"b_beta", r.BBeta, propagate && cfg.AdaptBeta && (cfg.PropagateIters > 1 || cfg.ValueIters > 0)},
	} {
		if p.used {
			b.Param(em.ParamName(name, p.field), []int{heads}, graph.Constant(p.raw))
		}
	}
}

// LayerName returns the name of attention layer l, the prefix of its prior
// hyperparameters (em.ParamName(LayerName(l), field)).
func (s Segmenter) LayerName(l int) string { return fmt.Sprintf("em.%d", l) }

// Forward: x [B, P, FeatDim] pixel features; clicked [B, P] 1 at clicked
// pixels, 0 elsewhere; values [B, P, Classes] the one-hot label of each
// clicked pixel (0 elsewhere) → logits [B, P, Classes].
func (s Segmenter) Forward(b *graph.Builder, x, clicked, values *graph.Node) (*graph.Node, error) {
	c := s.Config
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("segmenter: %w", err)
	}
	if x == nil || clicked == nil || values == nil {
		return nil, errors.New("segmenter: nil input")
	}
	xs := graph.Shape(x)
	if len(xs) != 3 || xs[2] != c.FeatDim {
		return nil, fmt.Errorf("segmenter: features %v, want [B, P, %d]", xs, c.FeatDim)
	}
	kernel, err := newEMKernel(c.Attention)
	if err != nil {
		return nil, fmt.Errorf("segmenter: %w", err)
	}
	// The known values, the same for every head: [B, P, C] → [B, P, H·C].
	perHead := make([]*graph.Node, c.Heads)
	for i := range perHead {
		perHead[i] = values
	}
	known := graph.Concat(2, perHead...) // [B, P, H·C]

	h := x
	for i := range c.Encoder {
		h = denseReLU(b, fmt.Sprintf("enc.%d", i), h, c.Dim)
	}
	var readout *graph.Node // [B, P, H·C]
	for l := range c.Layers {
		name := s.LayerName(l)
		if l > 0 {
			h = denseReLU(b, name+".mix", graph.Concat(2, h, readout), c.Dim)
		}
		// The unsplit heads go straight to the fused op (no transposes),
		// which builds the readout alone: the trainer reads nothing else.
		q := dense(b, name+".wq", h, c.Dim)
		k := dense(b, name+".wk", h, c.Dim)
		v := dense(b, name+".wv", h, c.Heads*c.Classes)
		initPriors(b, name, kernel.Config, c.Heads, c.Dim/c.Heads)
		var err error
		readout, _, err = em.AttendHeads(b, name, kernel.Config, c.Heads, q, k, v, nil,
			&em.Extras{Annotated: clicked, Values: known}, graph.EMReadout)
		if err != nil {
			return nil, fmt.Errorf("segmenter: %w", err)
		}
	}
	hidden := denseReLU(b, "head.0", readout, c.Dim)
	return dense(b, "head.1", hidden, c.Classes), nil
}
