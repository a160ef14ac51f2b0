package em

import (
	"github.com/probformer/probformer/graph/graphtest"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/probformer/probformer/graph"
)

// TestLayerHyperparams compares the graph layer's transforms with
// ε + log(1 + eʳ) (ε = 1e-4, or 1e-8 for α⁰, β⁰) at 40 digits (mpmath).
func TestLayerHyperparams(t *testing.T) {
	for _, tc := range []struct {
		raw             float64
		floored, shape1 float64 // ε + softplus(r), 1 + ε + softplus(r)
		precision       float64 // 1e-8 + softplus(r)
	}{
		{-2.5, 0.078989734292549623, 1.0789897342925496, 0.078889744292549623},
		{0, 0.69324718055994531, 1.6932471805599453, 0.69314719055994531},
		{0.75, 1.1369710061148999, 2.1369710061148999, 1.1368710161148999},
		{3, 3.0486873515737421, 4.0486873515737421, 3.0485873615737421},
	} {
		r := tc.raw
		h, alpha0, beta0 := RawParams{r, r, r, r, r, r, r, r, r}.LayerHyperparams()
		for _, got := range []struct {
			name      string
			got, want float64
		}{
			{"θ_ξ", h.ThetaXi, tc.floored}, {"a_α", h.AAlpha, tc.shape1}, {"b_α", h.BAlpha, tc.floored},
			{"θ_μ", h.ThetaMu, tc.floored}, {"a_β", h.ABeta, tc.shape1}, {"b_β", h.BBeta, tc.floored},
			{"θ_π", h.ThetaPi, tc.shape1}, {"α⁰", alpha0, tc.precision}, {"β⁰", beta0, tc.precision},
		} {
			if math.Abs(got.got-got.want) > 4e-16*got.want {
				t.Errorf("raw %v: %s = %.17g, want %.17g", r, got.name, got.got, got.want)
			}
		}
	}
	// Far below zero the floors are all that is left, and the ranges of
	// MATH.md §4–§5 hold strictly.
	h, alpha0, beta0 := RawParams{-800, -800, -800, -800, -800, -800, -800, -800, -800}.LayerHyperparams()
	if h.ThetaXi != PriorFloor || h.AAlpha != 1+PriorFloor || h.BBeta != PriorFloor || h.ThetaPi != 1+PriorFloor || alpha0 != PrecisionFloor || beta0 != PrecisionFloor {
		t.Errorf("raw −800: %+v, α⁰ %v, β⁰ %v", h, alpha0, beta0)
	}
}

// TestDefaultRawParams checks the initial priors DefaultRawParams
// documents: α⁰ = 1/√d, β⁰ = 0.01, θ_ξ = θ_μ = 10, a_α = a_β = θ_π = 2,
// and Gamma modes (a − 1)/b equal to the initial precisions.
func TestDefaultRawParams(t *testing.T) {
	for _, d := range []int{1, 4, 16, 64} {
		h, alpha0, beta0 := DefaultRawParams(d).LayerHyperparams()
		for _, c := range []struct {
			name      string
			got, want float64
		}{
			{"α⁰", alpha0, 1 / math.Sqrt(float64(d))}, {"β⁰", beta0, 0.01},
			{"θ_ξ", h.ThetaXi, 10}, {"θ_μ", h.ThetaMu, 10},
			{"a_α", h.AAlpha, 2}, {"a_β", h.ABeta, 2}, {"θ_π", h.ThetaPi, 2},
			{"α mode", (h.AAlpha - 1) / h.BAlpha, alpha0}, {"β mode", (h.ABeta - 1) / h.BBeta, beta0},
		} {
			if math.Abs(c.got-c.want) > 1e-13*c.want {
				t.Errorf("d = %d: %s = %.17g, want %.17g", d, c.name, c.got, c.want)
			}
		}
	}
}

// TestAttendCreatesReachableParams compiles a training program for every
// combination of iteration counts, optional updates, prior and
// annotations: Attend must create exactly the parameters the readout
// reaches (Gorgonia refuses to differentiate with respect to any other),
// named "<name>.em.<field>", and their gradients must be finite.
func TestAttendCreatesReachableParams(t *testing.T) {
	p := randomBatch(rand.New(rand.NewPCG(31, 1)), 2, 2, 3, 3, 2, 2, true, true)
	seen := map[Config]bool{}
	for _, keys := range []int{0, 2} {
		for _, props := range []int{0, 1, 2} {
			for _, values := range []int{0, 1} {
				for flagBits := range 8 {
					for _, prior := range []Prior{LinkedPrior, FreePrior} {
						for _, annotate := range []bool{false, true} {
							cfg := Config{
								KeyIters: keys, PropagateIters: props, ValueIters: values,
								AdaptAlpha: flagBits&1 != 0, AdaptBeta: flagBits&2 != 0, AdaptPi: flagBits&4 != 0, Prior: prior,
							}
							// Skip combinations that differ only in flags of
							// phases that do not run.
							effective := cfg
							effective.AdaptAlpha = cfg.AdaptAlpha && keys > 0
							if props == 0 || !annotate {
								effective.PropagateIters, effective.AdaptBeta, effective.AdaptPi = 0, false, false
							}
							if seen[effective] {
								continue
							}
							seen[effective] = true
							checkReachableParams(t, p, cfg, annotate)
						}
					}
				}
			}
		}
	}
}

func checkReachableParams(t *testing.T, p *batch, cfg Config, annotate bool) {
	t.Helper()
	ps := graph.NewParams(graph.Float64, 1)
	prog, err := graph.Compile(ps, func(b *graph.Builder) error {
		q, k, v, keyMask, ex := p.nodes(b, false)
		if !annotate {
			ex.Annotated, ex.Values = nil, nil
		}
		res, err := Attend(b, "att", cfg, q, k, v, keyMask, ex)
		if err != nil {
			return err
		}
		b.SetLoss(graph.Sum(res.Readout))
		return nil
	}, true)
	if err != nil {
		t.Fatalf("%+v, annotated %v: %v", cfg, annotate, err)
	}
	propagate := cfg.PropagateIters > 0 && annotate
	want := []string{paramAlpha0}
	for _, f := range []struct {
		field string
		used  bool
	}{
		{paramBeta0, cfg.Prior == LinkedPrior || propagate || cfg.ValueIters > 0},
		{paramPiLogits, cfg.Prior == FreePrior},
		{paramThetaXi, cfg.KeyIters > 0},
		{paramAAlpha, cfg.KeyIters > 0 && cfg.AdaptAlpha},
		{paramBAlpha, cfg.KeyIters > 0 && cfg.AdaptAlpha},
		{paramThetaMu, propagate},
		{paramABeta, propagate && cfg.AdaptBeta && (cfg.PropagateIters > 1 || cfg.ValueIters > 0)},
		{paramBBeta, propagate && cfg.AdaptBeta && (cfg.PropagateIters > 1 || cfg.ValueIters > 0)},
		{paramThetaPi, propagate && cfg.AdaptPi},
	} {
		if f.used {
			want = append(want, f.field)
		}
	}
	var got []string
	for _, prm := range ps.List() {
		got = append(got, prm.Name)
	}
	for i := range want {
		want[i] = ParamName("att", want[i])
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("%+v, annotated %v: parameters %v, want %v", cfg, annotate, got, want)
	}
	for name, g := range graphtest.Run(t, prog).Grads {
		for _, x := range g {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				t.Errorf("%+v: gradient of %s = %v", cfg, name, x)
				break
			}
		}
	}
}
