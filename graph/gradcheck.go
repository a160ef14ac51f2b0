package graph

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
)

// GradCheckOptions tunes CheckGradients.
type GradCheckOptions struct {
	Step        float64 // central-difference step h; default 1e-5
	Tol         float64 // largest accepted relative error; default 1e-6
	AbsTol      float64 // ‖a − n‖ accepted whatever the relative error; default 1e-8
	MaxPerParam int     // elements probed per parameter; 0 probes all
	Seed        uint64  // for the projection R and the probed elements
}

// GradCheckResult is the relative error of one parameter's gradient.
type GradCheckResult struct {
	Param  string
	RelErr float64
}

// CheckGradients compares the analytic gradient of f = Σ out ⊙ R, with out
// the node fn returns and R a fixed random tensor, against central
// differences (f(w+h) − f(w−h)) / 2h, for every parameter fn uses. The
// relative error of a parameter is ‖a − n‖ / max(‖a‖, ‖n‖); a parameter
// passes when it is at most Tol or when ‖a − n‖ ≤ AbsTol. Inputs that
// need gradients are declared as parameters; others as constants. params
// must be Float64. The check also fails if running the training graph
// changes a parameter (the Reshape-aliasing trap) or if its forward value
// differs from a forward-only graph's.
func CheckGradients(params *Params, fn func(b *Builder) *Node, opt GradCheckOptions) ([]GradCheckResult, error) {
	if params.dtype != Float64 {
		return nil, fmt.Errorf("gradient check needs float64 parameters")
	}
	if opt.Step == 0 {
		opt.Step = 1e-5
	}
	if opt.Tol == 0 {
		opt.Tol = 1e-6
	}
	if opt.AbsTol == 0 {
		opt.AbsTol = 1e-8
	}
	rng := rand.New(rand.NewPCG(opt.Seed, 17))
	fwd, err := Compile(params, func(b *Builder) error {
		b.Output("out", fn(b))
		return nil
	}, false)
	if err != nil {
		return nil, fmt.Errorf("forward graph: %w", err)
	}
	if err := fwd.Run(); err != nil {
		return nil, err
	}
	out, shape, err := fwd.Output("out")
	if err != nil {
		return nil, err
	}
	r := Normal(1)(rng, shape)
	project := func() (float64, error) {
		if err := fwd.Run(); err != nil {
			return 0, err
		}
		o, _, err := fwd.Output("out")
		if err != nil {
			return 0, err
		}
		var s float64
		for i := range o {
			s += o[i] * r[i]
		}
		return s, nil
	}
	f0 := dot(out, r)

	train, err := Compile(params, func(b *Builder) error {
		o := fn(b)
		if len(shape) == 0 || shapeSize(shape) == 1 && o.IsScalar() {
			b.SetLoss(Scale(o, r[0]))
		} else {
			b.SetLoss(Sum(Mul(o, b.Constant("gradcheck.r", shape, r))))
		}
		return nil
	}, true)
	if err != nil {
		return nil, fmt.Errorf("training graph: %w", err)
	}
	before := map[string][]float64{}
	for _, p := range train.used {
		before[p.Name] = p.Values()
	}
	if err := train.Run(); err != nil {
		return nil, err
	}
	for _, p := range train.used {
		if !slices.Equal(before[p.Name], p.Values()) {
			return nil, fmt.Errorf("running the training graph changed parameter %s", p.Name)
		}
	}
	if d := math.Abs(train.Loss() - f0); d > 1e-9*math.Max(1, math.Abs(f0)) {
		return nil, fmt.Errorf("training graph computes %.17g, forward graph %.17g", train.Loss(), f0)
	}
	grads, err := train.Gradients()
	if err != nil {
		return nil, err
	}

	var results []GradCheckResult
	var bad []string
	for _, p := range train.used {
		w := p.value.Data().([]float64)
		idx := probeIndices(rng, len(w), opt.MaxPerParam)
		var na, nn, nd float64
		for _, i := range idx {
			orig := w[i]
			w[i] = orig + opt.Step
			fp, err := project()
			if err != nil {
				return nil, err
			}
			w[i] = orig - opt.Step
			fm, err := project()
			w[i] = orig
			if err != nil {
				return nil, err
			}
			num := (fp - fm) / (2 * opt.Step)
			ana := grads[p.Name][i]
			na += ana * ana
			nn += num * num
			nd += (ana - num) * (ana - num)
		}
		rel := 0.0
		if den := math.Sqrt(math.Max(na, nn)); den > 1e-12 {
			rel = math.Sqrt(nd) / den
		}
		results = append(results, GradCheckResult{Param: p.Name, RelErr: rel})
		// A gradient that is zero by symmetry (the key bias under softmax)
		// leaves only rounding noise, so its relative error means nothing.
		if (rel > opt.Tol && math.Sqrt(nd) > opt.AbsTol) || math.IsNaN(rel) {
			bad = append(bad, fmt.Sprintf("%s (rel err %.3g)", p.Name, rel))
		}
	}
	if len(bad) > 0 {
		return results, fmt.Errorf("gradient check failed for %s", strings.Join(bad, ", "))
	}
	return results, nil
}

func probeIndices(rng *rand.Rand, n, most int) []int {
	if most <= 0 || most >= n {
		idx := make([]int, n)
		for i := range idx {
			idx[i] = i
		}
		return idx
	}
	return rng.Perm(n)[:most]
}

func dot(a, b []float64) float64 {
	var s float64
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}
