package layers

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/probformer/probformer/em"
	"github.com/probformer/probformer/graph"
)

// segmenterConfig is a small Segmenter: 3 classes, 2 heads of width 2.
func segmenterConfig(layers, propagate int) SegmenterConfig {
	return SegmenterConfig{FeatDim: 5, Classes: 3, Dim: 4, Heads: 2, Encoder: 1, Layers: layers,
		Attention: AttentionConfig{Kind: "em", KeyIters: 1, PropagateIters: propagate, ValueIters: 1, AdaptBeta: true}}
}

// segmenterInputs are B = 2 images of P = 6 random pixels; the clicks are
// on image 0 only: pixel 1 of class 2 and pixel 4 of class 0.
func segmenterInputs() (x, clicked, values []float64) {
	const B, P, C = 2, 6, 3
	rng := rand.New(rand.NewPCG(5, 5))
	x = make([]float64, B*P*5)
	for i := range x {
		x[i] = rng.Float64()
	}
	clicked = make([]float64, B*P)
	values = make([]float64, B*P*C)
	for _, c := range []struct{ pixel, class int }{{1, 2}, {4, 0}} {
		clicked[c.pixel] = 1
		values[c.pixel*C+c.class] = 1
	}
	return x, clicked, values
}

// segmenterLogits runs a Segmenter on the inputs, with or without the
// clicks, and returns the logits [2, 6, 3].
func segmenterLogits(t *testing.T, cfg SegmenterConfig, withClicks bool) []float64 {
	t.Helper()
	const B, P = 2, 6
	x, clicked, values := segmenterInputs()
	if !withClicks {
		clear(clicked)
		clear(values)
	}
	var shape []int
	out := evaluate(t, graph.NewParams(graph.Float64, 3), func(b *graph.Builder) error {
		logits, err := Segmenter{Config: cfg}.Forward(b, b.Constant("x", []int{B, P, 5}, x),
			b.Constant("clicked", []int{B, P}, clicked), b.Constant("values", []int{B, P, cfg.Classes}, values))
		if err != nil {
			return err
		}
		shape = graph.Shape(logits)
		b.Output("logits", logits)
		return nil
	}, "logits")[0]
	if len(shape) != 3 || shape[0] != B || shape[1] != P || shape[2] != cfg.Classes {
		t.Fatalf("logits of shape %v", shape)
	}
	return out
}

// TestSegmenterClicks: clicks reach the other pixels of their image only
// through value propagation, and never another image.
func TestSegmenterClicks(t *testing.T) {
	const P, C = 6, 3
	for _, tc := range []struct {
		name              string
		layers, propagate int
		reaches           bool
	}{
		{"one layer, no propagation", 1, 0, false},
		{"one layer, propagation", 1, 2, true},
		{"two layers, propagation", 2, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := segmenterConfig(tc.layers, tc.propagate)
			before := segmenterLogits(t, cfg, false)
			after := segmenterLogits(t, cfg, true)
			var moved float64
			for i := range before {
				pixel := i / C
				switch {
				case pixel >= P: // image 1 has no click
					if before[i] != after[i] {
						t.Fatalf("a click on image 0 changed logit %d of image 1: %v → %v", i, before[i], after[i])
					}
				case pixel != 1 && pixel != 4:
					moved = math.Max(moved, math.Abs(after[i]-before[i]))
				}
			}
			if tc.reaches && !(moved > 1e-6) {
				t.Errorf("clicks moved the unclicked pixels' logits by at most %g", moved)
			}
			if !tc.reaches && moved != 0 {
				t.Errorf("without propagation, clicks moved unclicked pixels' logits by %g", moved)
			}
		})
	}
}

// TestSegmenterPriors: the value-side priors start at SegmenterPriors,
// the others at em's defaults, and the training graph compiles for every
// configuration (a prior created but not reached would fail it).
func TestSegmenterPriors(t *testing.T) {
	r := SegmenterPriors(2)
	h, alpha0, beta0 := r.LayerHyperparams()
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"β⁰", beta0, 1}, {"θ_μ", h.ThetaMu, 0.1}, {"b_β", h.BBeta, 1},
		{"a_β", h.ABeta, 2}, {"θ_ξ", h.ThetaXi, 10}, {"α⁰", alpha0, 0.707106781186548},
	} {
		if math.Abs(c.got-c.want) > 1e-12 {
			t.Errorf("%s = %.15g, want %.15g", c.name, c.got, c.want)
		}
	}

	const B, P = 2, 6
	x, clicked, values := segmenterInputs()
	for _, tc := range []struct {
		name   string
		cfg    SegmenterConfig
		fields []string // prior parameters the layer has
	}{
		{"propagation, adapted β", segmenterConfig(1, 2), []string{"alpha0", "beta0", "theta_xi", "theta_mu", "a_beta", "b_beta"}},
		{"one propagation, no value iteration", func() SegmenterConfig {
			c := segmenterConfig(1, 1)
			c.Attention.ValueIters = 0 // the β update cannot reach the readout
			return c
		}(), []string{"alpha0", "beta0", "theta_xi", "theta_mu"}},
		{"no propagation", segmenterConfig(1, 0), []string{"alpha0", "beta0", "theta_xi"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			params := graph.NewParams(graph.Float64, 1)
			_, err := graph.Compile(params, func(b *graph.Builder) error {
				logits, err := Segmenter{Config: tc.cfg}.Forward(b, b.Constant("x", []int{B, P, 5}, x),
					b.Constant("clicked", []int{B, P}, clicked), b.Constant("values", []int{B, P, 3}, values))
				if err != nil {
					return err
				}
				b.SetLoss(graph.Mean(logits))
				return nil
			}, true)
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]float64{"alpha0": r.Alpha0, "beta0": r.Beta0, "theta_xi": r.ThetaXi,
				"theta_mu": r.ThetaMu, "a_beta": r.ABeta, "b_beta": r.BBeta}
			var have []string
			for _, p := range params.List() {
				field, ok := strings.CutPrefix(p.Name, "em.0.em.")
				if !ok {
					continue
				}
				have = append(have, field)
				for h, v := range p.Values() {
					if v != want[field] {
						t.Errorf("%s head %d starts at %v, want %v", p.Name, h, v, want[field])
					}
				}
			}
			slices.Sort(have)
			slices.Sort(tc.fields)
			if !slices.Equal(have, tc.fields) {
				t.Errorf("prior parameters %v, want %v", have, tc.fields)
			}
		})
	}
}

func TestSegmenterGradients(t *testing.T) {
	const B, P = 2, 6
	x, clicked, values := segmenterInputs()
	res, err := graph.CheckGradients(graph.NewParams(graph.Float64, 2), func(b *graph.Builder) *graph.Node {
		logits, err := Segmenter{Config: segmenterConfig(1, 2)}.Forward(b, b.Constant("x", []int{B, P, 5}, x),
			b.Constant("clicked", []int{B, P}, clicked), b.Constant("values", []int{B, P, 3}, values))
		if err != nil {
			panic(err)
		}
		return logits
	}, graph.GradCheckOptions{Seed: 4, MaxPerParam: 8})
	if err != nil {
		t.Fatal(err)
	}
	checked := map[string]bool{}
	for _, r := range res {
		checked[r.Param] = true
	}
	for _, field := range []string{"theta_mu", "beta0", "b_beta"} {
		if name := em.ParamName("em.0", field); !checked[name] {
			t.Errorf("%s not checked (checked %v)", name, res)
		}
	}
}

func TestSegmenterConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*SegmenterConfig)
		want string
	}{
		{"features", func(c *SegmenterConfig) { c.FeatDim = 0 }, "feature width"},
		{"classes", func(c *SegmenterConfig) { c.Classes = 1 }, "classes"},
		{"dim", func(c *SegmenterConfig) { c.Dim = 0 }, "dim"},
		{"heads", func(c *SegmenterConfig) { c.Heads = 3 }, "heads = 3"},
		{"encoder", func(c *SegmenterConfig) { c.Encoder = 0 }, "encoder"},
		{"layers", func(c *SegmenterConfig) { c.Layers = 0 }, "attention layers"},
		{"softmax", func(c *SegmenterConfig) { c.Attention.Kind = "softmax" }, "must be em"},
		{"negative iterations", func(c *SegmenterConfig) { c.Attention.KeyIters = -1 }, "negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := segmenterConfig(1, 1)
			tc.edit(&cfg)
			err := cfg.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate() = %v, want an error mentioning %q", err, tc.want)
			}
		})
	}
	if err := segmenterConfig(2, 1).Validate(); err != nil {
		t.Fatal(err)
	}
}
