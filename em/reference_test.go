package em

import (
	"math"
	"math/rand/v2"
	"testing"
)

// randomMatrix returns rows×cols draws of scale·N(0, 1).
func randomMatrix(rng *rand.Rand, rows, cols int, scale float64) [][]float64 {
	a := make([][]float64, rows)
	for i := range a {
		a[i] = make([]float64, cols)
		for k := range a[i] {
			a[i][k] = scale * rng.NormFloat64()
		}
	}
	return a
}

// randomPositive returns n draws of softplus(N(0, 1)).
func randomPositive(rng *rand.Rand, n int) []float64 {
	a := make([]float64, n)
	for j := range a {
		a[j] = Softplus(rng.NormFloat64())
	}
	return a
}

// randomMask returns n flags, each false with probability padProb, with
// at least one true when needOne.
func randomMask(rng *rand.Rand, n int, padProb float64, needOne bool) []bool {
	mask := make([]bool, n)
	for i := range mask {
		mask[i] = rng.Float64() >= padProb
	}
	if needOne && n > 0 {
		mask[rng.IntN(n)] = true
	}
	return mask
}

// randomInputs returns a random problem with N query units, M memory units,
// key dimension d, value dimension m; with masks, about a quarter of the
// units are padded, and about half of the query units are annotated.
func randomInputs(rng *rand.Rand, n, mem, d, m int, masks bool) Inputs {
	in := Inputs{
		Q:         randomMatrix(rng, n, d, 1),
		Xi0:       randomMatrix(rng, mem, d, 1),
		Mu0:       randomMatrix(rng, mem, m, 1.5),
		Alpha0:    randomPositive(rng, mem),
		Beta0:     randomPositive(rng, mem),
		PiLogits:  randomMatrix(rng, 1, mem, 1)[0],
		Annotated: randomMask(rng, n, 0.5, false),
		V:         randomMatrix(rng, n, m, 1.5),
	}
	if masks {
		in.QueryMask = randomMask(rng, n, 0.25, false)
		in.MemoryMask = randomMask(rng, mem, 0.25, true)
	}
	return in
}

// randomHyperparams draws every RawParams field from N(0, 1.5²) clipped to
// [−4, 4] (so b_α, b_β ≥ 0.018), and sets a_α, a_β or θ_π to exactly 1 one
// time in ten, the edge of their range.
//
// Rates b far below that let α or β grow towards 1/b as a component
// collapses onto one point; at precisions near 1e15 the rounding error of
// the expanded ‖q − ξ‖² of §1 (about 1e-16·‖q‖², times the precision)
// swamps the objective's changes and EM can step downhill. Computing the
// distances directly restores monotonicity there, so the equations are not
// at fault; such precisions are outside the regime this test covers.
func randomHyperparams(rng *rand.Rand) Hyperparams {
	var r RawParams
	for _, f := range []*float64{&r.ThetaXi, &r.AAlpha, &r.BAlpha, &r.ThetaMu, &r.ABeta, &r.BBeta, &r.ThetaPi} {
		*f = math.Max(-4, math.Min(4, 1.5*rng.NormFloat64()))
	}
	h := r.Hyperparams()
	for _, f := range []*float64{&h.AAlpha, &h.ABeta, &h.ThetaPi} {
		if rng.IntN(10) == 0 {
			*f = 1
		}
	}
	return h
}

// closeTo reports whether got and want are equal (infinities included) or
// agree to tol, relative to |want|
// when |want| > 1 and absolute otherwise.
func closeTo(got, want, tol float64) bool {
	return got == want || math.Abs(got-want) <= tol*math.Max(1, math.Abs(want))
}

func assertMatrix(t *testing.T, name string, got, want [][]float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d rows, want %d", name, len(got), len(want))
	}
	for i := range want {
		assertVector(t, name, got[i], want[i], tol)
	}
}

func assertVector(t *testing.T, name string, got, want []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: length %d, want %d", name, len(got), len(want))
	}
	for k := range want {
		if !closeTo(got[k], want[k], tol) {
			t.Errorf("%s[%d] = %.17g, want %.17g", name, k, got[k], want[k])
		}
	}
}

// TestRunEqualsScaledDotProductAttention checks MATH.md §2: with equal
// precisions, the linked prior, β = 0, α = 1/√d and no iterations the layer
// is softmax_j(q_i·ξ_j/√d) μ_j, computed here directly.
func TestRunEqualsScaledDotProductAttention(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 1))
	for trial := range 50 {
		n, mem, d, m := 1+rng.IntN(6), 1+rng.IntN(7), 1+rng.IntN(16), 1+rng.IntN(5)
		in := randomInputs(rng, n, mem, d, m, trial%2 == 1)
		in.QueryMask = nil // every query unit is read out by plain attention too
		alpha := 1 / math.Sqrt(float64(d))
		for j := range in.Alpha0 {
			in.Alpha0[j], in.Beta0[j] = alpha, 0
		}
		res, err := Run(Config{Prior: LinkedPrior}, Hyperparams{}, in)
		if err != nil {
			t.Fatal(err)
		}
		for i, q := range in.Q {
			want := attention(q, in.Xi0, in.Mu0, in.MemoryMask, func(j int) float64 {
				return dot(q, in.Xi0[j]) / math.Sqrt(float64(d))
			})
			assertVector(t, "readout", res.Readout[i], want, 1e-12)
		}
	}
}

// TestRunLinkedPriorKeepsValueNorm checks the remark closing MATH.md §2:
// with β > 0 and no value iterations the readout is
// softmax_j(α q·ξ_j + (β/2)‖μ_j‖²) μ_j.
func TestRunLinkedPriorKeepsValueNorm(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	for range 20 {
		n, mem, d, m := 1+rng.IntN(4), 1+rng.IntN(6), 1+rng.IntN(8), 1+rng.IntN(4)
		in := randomInputs(rng, n, mem, d, m, false)
		alpha, beta := 0.3+rng.Float64(), 0.1+rng.Float64()
		for j := range in.Alpha0 {
			in.Alpha0[j], in.Beta0[j] = alpha, beta
		}
		res, err := Run(Config{Prior: LinkedPrior}, Hyperparams{}, in)
		if err != nil {
			t.Fatal(err)
		}
		for i, q := range in.Q {
			want := attention(q, in.Xi0, in.Mu0, nil, func(j int) float64 {
				return alpha*dot(q, in.Xi0[j]) + beta/2*dot(in.Mu0[j], in.Mu0[j])
			})
			assertVector(t, "readout", res.Readout[i], want, 1e-12)
		}
	}
}

// attention returns Σ_j softmax_j(logit(j)) μ_j over the unmasked j.
func attention(q []float64, xi, mu [][]float64, mask []bool, logit func(j int) float64) []float64 {
	top := math.Inf(-1)
	for j := range xi {
		if mask == nil || mask[j] {
			top = math.Max(top, logit(j))
		}
	}
	var z float64
	out := make([]float64, len(mu[0]))
	for j := range xi {
		if mask != nil && !mask[j] {
			continue
		}
		e := math.Exp(logit(j) - top)
		z += e
		for k := range out {
			out[k] += e * mu[j][k]
		}
	}
	for k := range out {
		out[k] /= z
	}
	return out
}

// monotoneTol is the relative tolerance of the monotonicity tests.
const monotoneTol = 1e-9

func nonDecreasing(before, after float64) bool {
	return after >= before-monotoneTol*math.Max(1, math.Abs(before))
}

// TestKeyAdaptationIsMonotone checks MATH.md §7: no key adaptation
// iteration lowers KeyLogPosterior, with and without the α update, masks
// and either prior.
func TestKeyAdaptationIsMonotone(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 1))
	for seed := range 300 {
		n, mem, d, m := 1+rng.IntN(6), 1+rng.IntN(5), 1+rng.IntN(4), 1+rng.IntN(3)
		in := randomInputs(rng, n, mem, d, m, seed%2 == 1)
		h := randomHyperparams(rng)
		prior := Prior(seed % 3 % 2)
		for _, adaptAlpha := range []bool{false, true} {
			mix, err := InitialMixture(prior, in)
			if err != nil {
				t.Fatal(err)
			}
			before, err := KeyLogPosterior(h, in, mix)
			if err != nil {
				t.Fatal(err)
			}
			for it := range 8 {
				if mix, err = AdaptKeys(h, in, mix, 1, adaptAlpha); err != nil {
					t.Fatal(err)
				}
				after, err := KeyLogPosterior(h, in, mix)
				if err != nil {
					t.Fatal(err)
				}
				if !nonDecreasing(before, after) {
					t.Errorf("seed %d, adaptAlpha %v, iteration %d: objective %.17g → %.17g", seed, adaptAlpha, it, before, after)
				}
				before = after
			}
		}
	}
}

// TestPropagationIsMonotone checks MATH.md §7: no value propagation
// iteration lowers PropagationLogPosterior, for every combination of the
// optional β and π updates, with masks, either prior, and keys adapted
// first as in a layer.
func TestPropagationIsMonotone(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 2))
	for seed := range 300 {
		n, mem, d, m := 1+rng.IntN(6), 1+rng.IntN(5), 1+rng.IntN(4), 1+rng.IntN(3)
		in := randomInputs(rng, n, mem, d, m, seed%2 == 1)
		h := randomHyperparams(rng)
		prior := Prior(seed % 3 % 2)
		start, err := InitialMixture(prior, in)
		if err != nil {
			t.Fatal(err)
		}
		if start, err = AdaptKeys(h, in, start, seed%3, seed%4 == 0); err != nil {
			t.Fatal(err)
		}
		for variant := range 4 {
			adaptBeta, adaptPi := variant&1 == 1, variant&2 == 2
			mix := start
			before, err := PropagationLogPosterior(h, in, mix)
			if err != nil {
				t.Fatal(err)
			}
			for it := range 8 {
				if mix, err = Propagate(h, in, mix, 1, adaptBeta, adaptPi); err != nil {
					t.Fatal(err)
				}
				after, err := PropagationLogPosterior(h, in, mix)
				if err != nil {
					t.Fatal(err)
				}
				if !nonDecreasing(before, after) {
					t.Errorf("seed %d, adaptBeta %v, adaptPi %v, iteration %d: objective %.17g → %.17g",
						seed, adaptBeta, adaptPi, it, before, after)
				}
				before = after
			}
		}
	}
}

// TestValueInferenceIsMonotone checks that each §3 iteration does not lower
// the query unit's log joint density log Σ_j π_j N(q; ξ_j, α_j⁻¹) N(v; μ_j, β_j⁻¹),
// the objective its E- and M-steps ascend in v.
func TestValueInferenceIsMonotone(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 3))
	for seed := range 200 {
		n, mem, d, m := 1+rng.IntN(4), 1+rng.IntN(5), 1+rng.IntN(4), 1+rng.IntN(3)
		in := randomInputs(rng, n, mem, d, m, seed%2 == 1)
		mix, err := InitialMixture(Prior(seed%2), in)
		if err != nil {
			t.Fatal(err)
		}
		var before []float64
		for iters := range 8 {
			readout, _, err := InferValues(in, mix, iters)
			if err != nil {
				t.Fatal(err)
			}
			for i, v := range readout {
				if in.QueryMask != nil && !in.QueryMask[i] {
					continue
				}
				after := logJoint(in.Q[i], v, mix, in.MemoryMask)
				if iters > 0 && !nonDecreasing(before[i], after) {
					t.Errorf("seed %d, query unit %d, iteration %d: log p(q, v) %.17g → %.17g", seed, i, iters, before[i], after)
				}
				if before == nil {
					before = make([]float64, len(readout))
				}
				before[i] = after
			}
		}
	}
}

// logJoint returns log Σ_j π_j N(q; ξ_j, α_j⁻¹ I) N(v; μ_j, β_j⁻¹ I) over
// the unmasked j, written out here apart from the package's code.
func logJoint(q, v []float64, mix Mixture, mask []bool) float64 {
	var terms []float64
	for j := range mix.Xi {
		if mask != nil && !mask[j] {
			continue
		}
		var dq, dv float64
		for k := range q {
			dq += (q[k] - mix.Xi[j][k]) * (q[k] - mix.Xi[j][k])
		}
		for k := range v {
			dv += (v[k] - mix.Mu[j][k]) * (v[k] - mix.Mu[j][k])
		}
		a, b := mix.Alpha[j], mix.Beta[j]
		terms = append(terms, mix.LogPi[j]+
			float64(len(q))/2*math.Log(a/(2*math.Pi))-a/2*dq+
			float64(len(v))/2*math.Log(b/(2*math.Pi))-b/2*dv)
	}
	top := math.Inf(-1)
	for _, x := range terms {
		top = math.Max(top, x)
	}
	var z float64
	for _, x := range terms {
		z += math.Exp(x - top)
	}
	return top + math.Log(z)
}

// TestPaddingChangesNothing checks MATH.md §1 and §7: inserting padded
// query and memory units holding garbage (NaN, ±Inf, huge numbers, padded
// query units marked annotated) leaves every output of the real units
// bit-for-bit unchanged.
func TestPaddingChangesNothing(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 1))
	garbage := []float64{math.NaN(), math.Inf(1), math.Inf(-1), 1e300, -1e300, 0}
	for trial := range 100 {
		n, mem, d, m := 1+rng.IntN(5), 1+rng.IntN(5), 1+rng.IntN(4), 1+rng.IntN(3)
		in := randomInputs(rng, n, mem, d, m, false)
		h := randomHyperparams(rng)
		cfg := Config{
			KeyIters: rng.IntN(4), PropagateIters: rng.IntN(4), ValueIters: rng.IntN(4),
			AdaptAlpha: rng.IntN(2) == 0, AdaptBeta: rng.IntN(2) == 0, AdaptPi: rng.IntN(2) == 0,
			Prior: Prior(trial % 2),
		}
		want, err := Run(cfg, h, in)
		if err != nil {
			t.Fatal(err)
		}

		junk := func() float64 { return garbage[rng.IntN(len(garbage))] }
		junkRow := func(width int) []float64 {
			row := make([]float64, width)
			for k := range row {
				row[k] = junk()
			}
			return row
		}
		// queryAt[i'] / memoryAt[j'] give the unpadded index of a padded
		// problem's unit, or −1 for an inserted padded unit.
		queryAt := interleave(rng, n, 1+rng.IntN(3))
		memoryAt := interleave(rng, mem, 1+rng.IntN(3))
		var padded Inputs
		for _, i := range queryAt {
			if i < 0 {
				padded.Q = append(padded.Q, junkRow(d))
				padded.V = append(padded.V, junkRow(m))
				padded.QueryMask = append(padded.QueryMask, false)
				padded.Annotated = append(padded.Annotated, true)
				continue
			}
			padded.Q = append(padded.Q, in.Q[i])
			padded.V = append(padded.V, in.V[i])
			padded.QueryMask = append(padded.QueryMask, true)
			padded.Annotated = append(padded.Annotated, in.Annotated[i])
		}
		for _, j := range memoryAt {
			if j < 0 {
				padded.Xi0 = append(padded.Xi0, junkRow(d))
				padded.Mu0 = append(padded.Mu0, junkRow(m))
				padded.Alpha0 = append(padded.Alpha0, junk())
				padded.Beta0 = append(padded.Beta0, junk())
				padded.PiLogits = append(padded.PiLogits, junk())
				padded.MemoryMask = append(padded.MemoryMask, false)
				continue
			}
			padded.Xi0 = append(padded.Xi0, in.Xi0[j])
			padded.Mu0 = append(padded.Mu0, in.Mu0[j])
			padded.Alpha0 = append(padded.Alpha0, in.Alpha0[j])
			padded.Beta0 = append(padded.Beta0, in.Beta0[j])
			padded.PiLogits = append(padded.PiLogits, in.PiLogits[j])
			padded.MemoryMask = append(padded.MemoryMask, true)
		}

		got, err := Run(cfg, h, padded)
		if err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		for pi, i := range queryAt {
			for pj, j := range memoryAt {
				w := got.Weights[pi][pj]
				switch {
				case i < 0 || j < 0:
					if w != 0 {
						t.Errorf("trial %d: weight[%d][%d] of a padded unit = %v, want 0", trial, pi, pj, w)
					}
				case w != want.Weights[i][j]:
					t.Errorf("trial %d: weight[%d][%d] = %.17g, want %.17g", trial, pi, pj, w, want.Weights[i][j])
				}
			}
			for k, x := range got.Readout[pi] {
				if (i < 0 && x != 0) || (i >= 0 && x != want.Readout[i][k]) {
					t.Errorf("trial %d: readout[%d][%d] = %.17g", trial, pi, k, x)
				}
			}
		}
		for pj, j := range memoryAt {
			if j < 0 {
				if !math.IsInf(got.LogPi[pj], -1) {
					t.Errorf("trial %d: log π of padded unit %d = %v, want −Inf", trial, pj, got.LogPi[pj])
				}
				continue
			}
			same := got.LogPi[pj] == want.LogPi[j] && got.Alpha[pj] == want.Alpha[j] && got.Beta[pj] == want.Beta[j]
			for k := range got.Xi[pj] {
				same = same && got.Xi[pj][k] == want.Xi[j][k]
			}
			for k := range got.Mu[pj] {
				same = same && got.Mu[pj][k] == want.Mu[j][k]
			}
			if !same {
				t.Errorf("trial %d: memory unit %d (unpadded %d) differs", trial, pj, j)
			}
		}
	}
}

// interleave returns the indices 0..n−1 in order with pads −1 entries
// inserted at random places.
func interleave(rng *rand.Rand, n, pads int) []int {
	order := make([]int, 0, n+pads)
	next := 0
	for next < n || pads > 0 {
		if pads > 0 && (next == n || rng.IntN(2) == 0) {
			order = append(order, -1)
			pads--
			continue
		}
		order = append(order, next)
		next++
	}
	return order
}

// TestLargePriorPrecisionPinsParameters checks MATH.md §7: θ_ξ = 1e12
// keeps ξ at ξ⁰ and θ_μ = 1e12 keeps μ at μ⁰, while small θ let them move.
func TestLargePriorPrecisionPinsParameters(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 1))
	cfg := Config{KeyIters: 5, PropagateIters: 5, ValueIters: 2, AdaptAlpha: true, AdaptBeta: true, AdaptPi: true}
	for trial := range 30 {
		in := randomInputs(rng, 2+rng.IntN(5), 1+rng.IntN(5), 1+rng.IntN(4), 1+rng.IntN(3), trial%2 == 1)
		in.Annotated = make([]bool, len(in.Q))
		for i := range in.Annotated {
			in.Annotated[i] = true // S is every real query unit, so μ would move
		}
		if in.QueryMask != nil {
			in.QueryMask[0] = true // some query unit must be real for anything to move
		}
		h := randomHyperparams(rng)
		for _, tc := range []struct {
			theta    float64
			pinned   bool
			maxShift float64
		}{
			{theta: 1e12, pinned: true, maxShift: 1e-10},
			{theta: 1e-3, pinned: false, maxShift: 1e-3},
		} {
			h.ThetaXi, h.ThetaMu = tc.theta, tc.theta
			res, err := Run(cfg, h, in)
			if err != nil {
				t.Fatal(err)
			}
			xiShift := maxShift(res.Xi, in.Xi0, in.MemoryMask)
			muShift := maxShift(res.Mu, in.Mu0, in.MemoryMask)
			if tc.pinned && (xiShift > tc.maxShift || muShift > tc.maxShift) {
				t.Errorf("trial %d, θ = %g: ξ moved %g, μ moved %g, want ≤ %g", trial, tc.theta, xiShift, muShift, tc.maxShift)
			}
			if !tc.pinned && (xiShift < tc.maxShift || muShift < tc.maxShift) {
				t.Errorf("trial %d, θ = %g: ξ moved %g, μ moved %g, want ≥ %g", trial, tc.theta, xiShift, muShift, tc.maxShift)
			}
		}
	}
}

// maxShift returns max |a − b| over the unmasked rows.
func maxShift(a, b [][]float64, mask []bool) float64 {
	var worst float64
	for j := range a {
		if mask != nil && !mask[j] {
			continue
		}
		for k := range a[j] {
			worst = math.Max(worst, math.Abs(a[j][k]-b[j][k]))
		}
	}
	return worst
}

// handHyperparams are the hyperparameters of the cases of TestRunHandValues.
var handHyperparams = Hyperparams{ThetaXi: 0.9, AAlpha: 2.5, BAlpha: 1.2, ThetaMu: 0.6, ABeta: 1.8, BBeta: 0.5, ThetaPi: 2}

// TestRunHandValues compares a whole layer (linked prior, every update on)
// with values computed independently at 50 significant digits by
// testdata/handcases.py, which shares no code with this package.
func TestRunHandValues(t *testing.T) {
	cfgAll := func(k, p, v int) Config {
		return Config{KeyIters: k, PropagateIters: p, ValueIters: v, AdaptAlpha: true, AdaptBeta: true, AdaptPi: true}
	}
	for _, tc := range []struct {
		name string
		cfg  Config
		in   Inputs

		logPi0, alpha, beta, logPi []float64
		xi, mu, readout            [][]float64
		keyObjective0              float64 // KeyLogPosterior before adaptation
		keyObjective               float64 // after T_k key iterations
		propObjective0             float64 // PropagationLogPosterior of the initial mixture
		propObjective              float64 // of the final mixture
	}{
		{
			name: "1-D, 2 units, 3 queries, 1 annotated",
			cfg:  cfgAll(2, 2, 3),
			in: Inputs{
				Q:   [][]float64{{0.3}, {-1.2}, {0.8}},
				Xi0: [][]float64{{-0.5}, {1}}, Mu0: [][]float64{{2}, {-1}},
				Alpha0: []float64{1.5, 0.7}, Beta0: []float64{0.8, 1.3},
				Annotated: []bool{false, false, true},
				V:         [][]float64{nil, nil, {1.5}},
			},
			logPi0:         []float64{-0.37499272302334883, -1.1624927230233488},
			alpha:          []float64{1.2737044136068768, 1.4771525396703603},
			beta:           []float64{2.556984874433555, 1.4651663522524181},
			logPi:          []float64{-0.41459649321066964, -1.0805959212443134},
			xi:             [][]float64{{-0.32130488142787572}, {0.71025615234667822}},
			mu:             [][]float64{{1.5994617785286297}, {-0.89678154910799119}},
			readout:        [][]float64{{1.5917532007820816}, {1.598771528859254}, {-0.89307388833809686}},
			keyObjective0:  -6.7867723662739681,
			keyObjective:   -6.2345628824401175,
			propObjective0: -6.0192712775139082,
			propObjective:  -4.9625601480619461,
		},
		{
			name: "2-D keys, 3-D values, 3 units, 2 queries, 2 annotated",
			cfg:  cfgAll(3, 2, 2),
			in: Inputs{
				Q:         [][]float64{{0.4, -0.9}, {1.1, 0.2}},
				Xi0:       [][]float64{{0.5, -0.3}, {-0.7, 0.8}, {1.2, 0.6}},
				Mu0:       [][]float64{{1, 0, 0.2}, {-0.5, 2, -0.6}, {0.3, -1.4, 0.9}},
				Alpha0:    []float64{0.9, 1.6, 1.1},
				Beta0:     []float64{0.5, 1, 2},
				Annotated: []bool{true, true},
				V:         [][]float64{{0.7, 0.9, -0.1}, {-0.2, 1.3, 0.4}},
			},
			logPi0:         []float64{-3.880997391397133, -1.084997391397133, -0.44399739139713299},
			alpha:          []float64{1.2775612911831975, 1.1637293074376446, 2.014880694257668},
			beta:           []float64{3.0303273048193803, 4.0276101310160328, 1.3007130411659939},
			logPi:          []float64{-1.1231928963646918, -0.78259733993116172, -1.5253569007797408},
			xi:             [][]float64{{0.50751381983526268, -0.31536867290156146}, {-0.40089071031491765, 0.52417507016532359}, {0.8522658329364996, -0.13952424830628579}},
			mu:             [][]float64{{0.74153928097383561, 0.62217390231934893, 0.034796479522879934}, {0.0062953682316843897, 1.2705006437999655, 0.15735842712994702}, {0.30709717463347097, -0.98827623945907986, 0.76582634391904749}},
			readout:        [][]float64{{0.66188552478902563, 0.67624801459857403, 0.05341434656814544}, {0.66031685702903535, 0.62604641367201201, 0.070718078591319471}},
			keyObjective0:  -9.39576144151264,
			keyObjective:   -7.9396726940270228,
			propObjective0: -25.066689763116672,
			propObjective:  -14.577633885317719,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const tol = 1e-13
			h := handHyperparams
			mix0, err := InitialMixture(tc.cfg.Prior, tc.in)
			if err != nil {
				t.Fatal(err)
			}
			assertVector(t, "log π⁰", mix0.LogPi, tc.logPi0, tol)
			res, err := Run(tc.cfg, h, tc.in)
			if err != nil {
				t.Fatal(err)
			}
			assertMatrix(t, "ξ", res.Xi, tc.xi, tol)
			assertVector(t, "α", res.Alpha, tc.alpha, tol)
			assertMatrix(t, "μ", res.Mu, tc.mu, tol)
			assertVector(t, "β", res.Beta, tc.beta, tol)
			assertVector(t, "log π", res.LogPi, tc.logPi, tol)
			assertMatrix(t, "readout", res.Readout, tc.readout, tol)

			keyMix, err := AdaptKeys(h, tc.in, mix0, tc.cfg.KeyIters, tc.cfg.AdaptAlpha)
			if err != nil {
				t.Fatal(err)
			}
			for _, obj := range []struct {
				name string
				f    func(Hyperparams, Inputs, Mixture) (float64, error)
				mix  Mixture
				want float64
			}{
				{"key objective, initial", KeyLogPosterior, mix0, tc.keyObjective0},
				{"key objective, adapted", KeyLogPosterior, keyMix, tc.keyObjective},
				{"propagation objective, initial", PropagationLogPosterior, mix0, tc.propObjective0},
				{"propagation objective, final", PropagationLogPosterior, res.Mixture, tc.propObjective},
			} {
				got, err := obj.f(h, tc.in, obj.mix)
				if err != nil {
					t.Fatal(err)
				}
				if !closeTo(got, obj.want, tol) {
					t.Errorf("%s = %.17g, want %.17g", obj.name, got, obj.want)
				}
			}
		})
	}
}

// TestSymmetricCaseByHand works a symmetric 1-D case by hand. With q = 0,
// ξ⁰ = (−1, +1), α⁰ = (1, 1), equal prior logits, θ_ξ = 1, a_α = 2,
// b_α = 1, every weight is ½, so one key iteration gives
//
//	ξ = (θ_ξ ξ⁰ + α·½·0) / (θ_ξ + α·½) = ±2/3,
//	α = (a_α − 1 + ½·½) / (b_α + ½·½·(2/3)²) = 1.25 / (10/9) = 1.125,
//
// and the readout stays (μ₁ + μ₂)/2 = 3, a fixed point of value inference
// (v = 3 is equidistant from μ = (2, 4), so the weights stay ½ and the
// β-weighted mean with equal β is 3 again).
func TestSymmetricCaseByHand(t *testing.T) {
	in := Inputs{
		Q:   [][]float64{{0}},
		Xi0: [][]float64{{-1}, {1}}, Mu0: [][]float64{{2}, {4}},
		Alpha0: []float64{1, 1}, Beta0: []float64{0.7, 0.7},
		PiLogits: []float64{0.4, 0.4},
	}
	h := Hyperparams{ThetaXi: 1, AAlpha: 2, BAlpha: 1, ThetaMu: 1, ABeta: 1, BBeta: 1, ThetaPi: 1}
	for _, valueIters := range []int{0, 1, 5} {
		res, err := Run(Config{KeyIters: 1, ValueIters: valueIters, AdaptAlpha: true, Prior: FreePrior}, h, in)
		if err != nil {
			t.Fatal(err)
		}
		assertMatrix(t, "ξ", res.Xi, [][]float64{{-2.0 / 3}, {2.0 / 3}}, 1e-15)
		assertVector(t, "α", res.Alpha, []float64{1.125, 1.125}, 1e-15)
		assertVector(t, "π", res.Pi(), []float64{0.5, 0.5}, 1e-15)
		assertMatrix(t, "readout", res.Readout, [][]float64{{3}}, 1e-15)
		assertMatrix(t, "weights", res.Weights, [][]float64{{0.5, 0.5}}, 1e-15)
	}
}

// TestEMFixedPointIsStationary runs key adaptation and value propagation to
// convergence and checks that the converged parameters are stationary
// points of the §7 objectives (central finite differences ≈ 0): the
// updates and the objectives, written separately, agree on what is being
// maximised. The gradient at the start is checked to be far from 0.
func TestEMFixedPointIsStationary(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 1))
	h := Hyperparams{ThetaXi: 0.8, AAlpha: 2, BAlpha: 1.5, ThetaMu: 0.7, ABeta: 2.5, BBeta: 0.8, ThetaPi: 1.7}
	for trial := range 5 {
		in := randomInputs(rng, 6, 3, 2, 3, trial%2 == 1) // d ≠ m, so d/2 for m/2 would show
		for i := range in.Annotated {
			in.Annotated[i] = i%2 == 0
		}
		mix, err := InitialMixture(LinkedPrior, in)
		if err != nil {
			t.Fatal(err)
		}
		keyObjective := func(mix Mixture) float64 {
			v, err := KeyLogPosterior(h, in, mix)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
		propObjective := func(mix Mixture) float64 {
			v, err := PropagationLogPosterior(h, in, mix)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
		if g := maxGradient(mix, in.MemoryMask, keyObjective, true); g < 1e-3 {
			t.Fatalf("trial %d: initial key gradient %g, want a non-trivial start", trial, g)
		}
		if mix, err = AdaptKeys(h, in, mix, 3000, true); err != nil {
			t.Fatal(err)
		}
		next, err := AdaptKeys(h, in, mix, 1, true)
		if err != nil {
			t.Fatal(err)
		}
		if s := maxShift(next.Xi, mix.Xi, in.MemoryMask); s > 1e-12 {
			t.Fatalf("trial %d: key adaptation not converged, ξ moves %g", trial, s)
		}
		if g := maxGradient(mix, in.MemoryMask, keyObjective, true); g > 1e-7 {
			t.Errorf("trial %d: key objective gradient at the fixed point %g, want ≈ 0", trial, g)
		}

		if g := maxGradient(mix, in.MemoryMask, propObjective, false); g < 1e-3 {
			t.Fatalf("trial %d: initial propagation gradient %g, want a non-trivial start", trial, g)
		}
		if mix, err = Propagate(h, in, mix, 3000, true, true); err != nil {
			t.Fatal(err)
		}
		if next, err = Propagate(h, in, mix, 1, true, true); err != nil {
			t.Fatal(err)
		}
		if s := maxShift(next.Mu, mix.Mu, in.MemoryMask); s > 1e-12 {
			t.Fatalf("trial %d: propagation not converged, μ moves %g", trial, s)
		}
		if g := maxGradient(mix, in.MemoryMask, propObjective, false); g > 1e-7 {
			t.Errorf("trial %d: propagation objective gradient at the fixed point %g, want ≈ 0", trial, g)
		}
	}
}

// maxGradient returns the largest central-difference derivative of f over
// the real units' parameters: ξ and log α when keys, else μ, log β and the
// logits of π (π kept normalised, so the constraint Σπ = 1 holds).
// Derivatives are taken in log α, log β to keep the precisions positive.
func maxGradient(mix Mixture, mask []bool, f func(Mixture) float64, keys bool) float64 {
	const step = 1e-5
	var worst float64
	probe := func(perturb func(m *Mixture, delta float64)) {
		plus, minus := mix.clone(), mix.clone()
		perturb(&plus, step)
		perturb(&minus, -step)
		worst = math.Max(worst, math.Abs(f(plus)-f(minus))/(2*step))
	}
	for j := range mix.Xi {
		if mask != nil && !mask[j] {
			continue
		}
		if keys {
			for k := range mix.Xi[j] {
				probe(func(m *Mixture, delta float64) { m.Xi[j][k] += delta })
			}
			probe(func(m *Mixture, delta float64) { m.Alpha[j] *= math.Exp(delta) })
			continue
		}
		for k := range mix.Mu[j] {
			probe(func(m *Mixture, delta float64) { m.Mu[j][k] += delta })
		}
		probe(func(m *Mixture, delta float64) { m.Beta[j] *= math.Exp(delta) })
		probe(func(m *Mixture, delta float64) {
			m.LogPi[j] += delta
			z := logSumExp(m.LogPi)
			for k := range m.LogPi {
				m.LogPi[k] -= z
			}
		})
	}
	return worst
}

// TestRunComposesPhases checks that Run is InitialMixture, AdaptKeys,
// Propagate and InferValues in the order of MATH.md, bit for bit, and
// that the readout is formed from the returned weights as InferValues
// documents.
func TestRunComposesPhases(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 1))
	for trial := range 40 {
		in := randomInputs(rng, 1+rng.IntN(5), 1+rng.IntN(5), 1+rng.IntN(4), 1+rng.IntN(3), trial%2 == 1)
		h := randomHyperparams(rng)
		cfg := Config{
			KeyIters: rng.IntN(3), PropagateIters: rng.IntN(3), ValueIters: rng.IntN(3),
			AdaptAlpha: rng.IntN(2) == 0, AdaptBeta: rng.IntN(2) == 0, AdaptPi: rng.IntN(2) == 0,
			Prior: Prior(rng.IntN(2)),
		}
		res, err := Run(cfg, h, in)
		if err != nil {
			t.Fatal(err)
		}
		mix, err := InitialMixture(cfg.Prior, in)
		if err != nil {
			t.Fatal(err)
		}
		if mix, err = AdaptKeys(h, in, mix, cfg.KeyIters, cfg.AdaptAlpha); err != nil {
			t.Fatal(err)
		}
		if mix, err = Propagate(h, in, mix, cfg.PropagateIters, cfg.AdaptBeta, cfg.AdaptPi); err != nil {
			t.Fatal(err)
		}
		readout, weights, err := InferValues(in, mix, cfg.ValueIters)
		if err != nil {
			t.Fatal(err)
		}
		assertMatrix(t, "readout", res.Readout, readout, 0)
		assertMatrix(t, "weights", res.Weights, weights, 0)
		assertMatrix(t, "ξ", res.Xi, mix.Xi, 0)
		assertMatrix(t, "μ", res.Mu, mix.Mu, 0)
		assertVector(t, "α", res.Alpha, mix.Alpha, 0)
		assertVector(t, "β", res.Beta, mix.Beta, 0)
		assertVector(t, "log π", res.LogPi, mix.LogPi, 0)

		for i, w := range res.Weights {
			if in.QueryMask != nil && !in.QueryMask[i] {
				continue
			}
			c := make([]float64, len(w)) // the M-step's w_j β_j, or w_j alone for the plain readout
			var total float64
			for j := range w {
				c[j] = w[j]
				if cfg.ValueIters > 0 {
					c[j] *= res.Beta[j]
				}
				total += c[j]
			}
			want := make([]float64, len(res.Mu[0]))
			for j := range w {
				if in.MemoryMask != nil && !in.MemoryMask[j] {
					continue
				}
				for k := range want {
					want[k] += c[j] / total * res.Mu[j][k]
				}
			}
			assertVector(t, "readout from weights", res.Readout[i], want, 1e-13)
		}
	}
}

// TestPropagateSkipsWithoutAnnotations checks MATH.md §5: with S empty
// (nothing annotated, or only padded query units annotated) value
// propagation leaves β and π alone instead of resetting them.
func TestPropagateSkipsWithoutAnnotations(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 2))
	in := randomInputs(rng, 4, 3, 2, 2, false)
	h := randomHyperparams(rng)
	mix, err := InitialMixture(LinkedPrior, in)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		annotated []bool
		queryMask []bool
	}{
		{"nothing annotated", nil, nil},
		{"only padded units annotated", []bool{true, false, true, false}, []bool{false, true, false, true}},
	} {
		in.Annotated, in.QueryMask, in.V = tc.annotated, tc.queryMask, nil
		got, err := Propagate(h, in, mix, 5, true, true)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		assertMatrix(t, tc.name+": μ", got.Mu, mix.Mu, 0)
		assertVector(t, tc.name+": β", got.Beta, mix.Beta, 0)
		assertVector(t, tc.name+": log π", got.LogPi, mix.LogPi, 0)
	}
}

// TestRunLeavesInputsUnchanged checks that Run does not write to the
// caller's slices.
func TestRunLeavesInputsUnchanged(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 3))
	in := randomInputs(rng, 5, 4, 3, 2, true)
	before := cloneMatrix(append(append(append([][]float64{}, in.Q...), in.Xi0...), in.Mu0...))
	alpha0, beta0 := append([]float64(nil), in.Alpha0...), append([]float64(nil), in.Beta0...)
	cfg := Config{KeyIters: 3, PropagateIters: 3, ValueIters: 3, AdaptAlpha: true, AdaptBeta: true, AdaptPi: true}
	if _, err := Run(cfg, randomHyperparams(rng), in); err != nil {
		t.Fatal(err)
	}
	after := append(append(append([][]float64{}, in.Q...), in.Xi0...), in.Mu0...)
	assertMatrix(t, "q, ξ⁰, μ⁰", after, before, 0)
	assertVector(t, "α⁰", in.Alpha0, alpha0, 0)
	assertVector(t, "β⁰", in.Beta0, beta0, 0)
}

// TestRunRejectsBadInputs checks that malformed inputs give errors, not
// panics or NaN, and that a phase's hyperparameters are only checked when
// the phase runs.
func TestRunRejectsBadInputs(t *testing.T) {
	good := func() Inputs {
		return Inputs{
			Q:   [][]float64{{0.1, 0.2}, {0.3, -0.4}},
			Xi0: [][]float64{{1, 0}, {0, 1}}, Mu0: [][]float64{{1}, {2}},
			Alpha0: []float64{1, 1}, Beta0: []float64{1, 1}, PiLogits: []float64{0, 0},
			Annotated: []bool{true, false}, V: [][]float64{{1.5}, nil},
		}
	}
	all := Config{KeyIters: 1, PropagateIters: 1, ValueIters: 1, AdaptAlpha: true, AdaptBeta: true, AdaptPi: true}
	for _, tc := range []struct {
		name   string
		cfg    Config
		h      Hyperparams
		modify func(*Inputs)
		ok     bool
	}{
		{name: "good", cfg: all, h: handHyperparams, ok: true},
		{name: "zero hyperparameters, no iterations", h: Hyperparams{}, ok: true},
		{name: "β⁰ = 0, no value likelihood", modify: func(in *Inputs) { in.Beta0 = []float64{0, 0} }, ok: true},
		{name: "β⁰ = 0 with value iterations", cfg: Config{ValueIters: 1}, modify: func(in *Inputs) { in.Beta0 = []float64{0, 0} }},
		{name: "β⁰ = 0 with propagation", cfg: Config{PropagateIters: 1}, h: handHyperparams, modify: func(in *Inputs) { in.Beta0 = []float64{0, 0} }},
		{name: "no memory units", modify: func(in *Inputs) { in.Xi0, in.Mu0, in.Alpha0, in.Beta0 = nil, nil, nil, nil }},
		{name: "all memory padded", modify: func(in *Inputs) { in.MemoryMask = []bool{false, false} }},
		{name: "short memory mask", modify: func(in *Inputs) { in.MemoryMask = []bool{true} }},
		{name: "ragged query", modify: func(in *Inputs) { in.Q[1] = []float64{1} }},
		{name: "ragged padded query", modify: func(in *Inputs) { in.Q[1], in.QueryMask = []float64{1}, []bool{true, false} }},
		{name: "NaN query", modify: func(in *Inputs) { in.Q[0][1] = math.NaN() }},
		{name: "NaN padded query", modify: func(in *Inputs) { in.Q[0][1], in.QueryMask = math.NaN(), []bool{false, true} }, ok: true},
		{name: "Inf key", modify: func(in *Inputs) { in.Xi0[1][0] = math.Inf(1) }},
		{name: "μ⁰ rows", modify: func(in *Inputs) { in.Mu0 = in.Mu0[:1] }},
		{name: "α⁰ = 0", modify: func(in *Inputs) { in.Alpha0[0] = 0 }},
		{name: "β⁰ < 0", modify: func(in *Inputs) { in.Beta0[0] = -1 }},
		{name: "α⁰ length", modify: func(in *Inputs) { in.Alpha0 = in.Alpha0[:1] }},
		{name: "free prior without logits", cfg: Config{Prior: FreePrior}, modify: func(in *Inputs) { in.PiLogits = nil }},
		{name: "unknown prior", cfg: Config{Prior: Prior(7)}},
		{name: "negative iterations", cfg: Config{KeyIters: -1}},
		{name: "annotated without values", cfg: all, h: handHyperparams, modify: func(in *Inputs) { in.V = nil }},
		{name: "annotated value too short", cfg: all, h: handHyperparams, modify: func(in *Inputs) { in.V[0] = nil }},
		{name: "θ_ξ = 0", cfg: Config{KeyIters: 1}, h: Hyperparams{AAlpha: 1, BAlpha: 1}},
		{name: "a_α < 1", cfg: Config{KeyIters: 1}, h: Hyperparams{ThetaXi: 1, AAlpha: 0.5, BAlpha: 1}},
		{name: "b_α = 0", cfg: Config{KeyIters: 1}, h: Hyperparams{ThetaXi: 1, AAlpha: 1}},
		{name: "key hyperparameters suffice for keys", cfg: Config{KeyIters: 1}, h: Hyperparams{ThetaXi: 1, AAlpha: 1, BAlpha: 1}, ok: true},
		{name: "θ_π < 1", cfg: Config{PropagateIters: 1}, h: Hyperparams{ThetaMu: 1, ABeta: 1, BBeta: 1, ThetaPi: 0.5}},
		{name: "b_β = Inf", cfg: Config{PropagateIters: 1}, h: Hyperparams{ThetaMu: 1, ABeta: 1, BBeta: math.Inf(1), ThetaPi: 1}},
		{name: "θ_μ = NaN", cfg: Config{PropagateIters: 1}, h: Hyperparams{ThetaMu: math.NaN(), ABeta: 1, BBeta: 1, ThetaPi: 1}},
	} {
		in := good()
		if tc.modify != nil {
			tc.modify(&in)
		}
		res, err := Run(tc.cfg, tc.h, in)
		if tc.ok != (err == nil) {
			t.Errorf("%s: error %v, want ok = %v", tc.name, err, tc.ok)
			continue
		}
		for i, row := range res.Readout {
			for _, x := range row {
				if math.IsNaN(x) || math.IsInf(x, 0) {
					t.Errorf("%s: readout row %d = %v", tc.name, i, row)
				}
			}
		}
	}
}

// TestPhasesRejectMismatchedMixture checks that every function taking a
// Mixture refuses one whose shapes or values do not fit the inputs.
func TestPhasesRejectMismatchedMixture(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 4))
	in := randomInputs(rng, 3, 2, 2, 1, false)
	h := handHyperparams
	good, err := InitialMixture(FreePrior, in)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		modify func(*Mixture)
	}{
		{"short ξ row", func(m *Mixture) { m.Xi[0] = m.Xi[0][:1] }},
		{"missing μ row", func(m *Mixture) { m.Mu = m.Mu[:1] }},
		{"negative α", func(m *Mixture) { m.Alpha[1] = -1 }},
		{"NaN β", func(m *Mixture) { m.Beta[0] = math.NaN() }},
		{"log π = +Inf", func(m *Mixture) { m.LogPi[0] = math.Inf(1) }},
		{"short log π", func(m *Mixture) { m.LogPi = m.LogPi[:1] }},
	} {
		mix := good.clone()
		tc.modify(&mix)
		errs := []error{}
		_, err := AdaptKeys(h, in, mix, 1, true)
		errs = append(errs, err)
		_, err = Propagate(h, in, mix, 1, true, true)
		errs = append(errs, err)
		_, _, err = InferValues(in, mix, 1)
		errs = append(errs, err)
		_, err = KeyLogPosterior(h, in, mix)
		errs = append(errs, err)
		_, err = PropagationLogPosterior(h, in, mix)
		errs = append(errs, err)
		for k, err := range errs {
			if err == nil {
				t.Errorf("%s: function %d accepted the mixture", tc.name, k)
			}
		}
	}
}
