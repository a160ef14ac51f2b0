package graph

import (
	"fmt"
	"github.com/probformer/probformer/graph/graphtest"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/probformer/probformer/graph/internal/kernels"
)

// emCCase is one EMAttention configuration on which em.c is compared with
// the Go path.
type emCCase struct {
	spec                  EMSpec
	b, n, m, d, dv        int
	masks, annotate, free bool
	emptyS, perHeadPi     bool
	// selfKeys: the keys are the queries (n = m), so that D_ii = ‖q_i −
	// q_i‖² rounds to 0 or below and dist_back's clamp mask matters
	selfKeys bool
}

func (c emCCase) String() string {
	s := c.spec
	name := fmt.Sprintf("T%d-%d-%d_a%v_b%v_p%v_free%v_split%v_n%dm%dd%ddv%d_masks%v_ann%v_empty%v",
		s.KeyIters, s.PropagateIters, s.ValueIters, s.AdaptAlpha, s.AdaptBeta, s.AdaptPi, c.free, s.SplitHeads,
		c.n, c.m, c.d, c.dv, c.masks, c.annotate, c.emptyS)
	if c.selfKeys {
		name += "_self"
	}
	return name
}

// emCCases covers T_k, T_p, T_v from 0 to 3, every adapt flag, masks,
// annotations (and an empty S), both priors, both head layouts, and
// sizes on and off multiples of the vector widths (8 and 16 lanes), with
// heads of 8 at the width-32 maxnorm model's N and M.
func emCCases() []emCCase {
	var cs []emCCase
	sizes := [][4]int{{5, 7, 5, 6}, {32, 16, 16, 16}, {16, 32, 8, 8}, {9, 20, 11, 17}, {1, 1, 3, 2}, {50, 16, 8, 8},
		{16, 50, 8, 8}, {45, 29, 8, 8}}
	i := 0
	for tk := 0; tk <= 3; tk++ {
		for tp := 0; tp <= 3; tp++ {
			for tv := 0; tv <= 3; tv++ {
				z := sizes[i%len(sizes)]
				c := emCCase{b: 3, n: z[0], m: z[1], d: z[2], dv: z[3],
					spec: EMSpec{KeyIters: tk, PropagateIters: tp, ValueIters: tv, Heads: 2,
						AdaptAlpha: i%2 == 0, AdaptBeta: i%3 != 1, AdaptPi: i%4 < 2, SplitHeads: i%5 < 2},
					masks: i%3 != 2, annotate: tp > 0 || i%7 == 0, free: i%6 == 1, emptyS: i%11 == 5,
					perHeadPi: i%4 == 1}
				cs = append(cs, c)
				i++
			}
		}
	}
	return cs
}

// emCRun builds c's op in a training program of dtype dt whose loss
// weighs every output by fixed random coefficients, runs it at GOMAXPROCS
// procs, and returns the outputs and the gradients by name.
func emCRun(t *testing.T, c emCCase, dt DType, useC bool, procs int) map[string][]float64 {
	t.Helper()
	defer func(u bool, p int) { kernels.EMUseC = u; runtime.GOMAXPROCS(p) }(kernels.EMUseC, runtime.GOMAXPROCS(procs))
	kernels.EMUseC = useC
	if useC && kernels.EMAVX512() != emWant512 {
		t.Fatalf("em.c's AVX-512 build runs: %v, want %v", kernels.EMAVX512(), emWant512)
	}
	s, h := c.spec, c.spec.Heads
	s.FreePrior = c.free
	rng := rand.New(rand.NewPCG(uint64(c.n*131+c.m), 3))
	positive := func(lo, hi float64) Init {
		return func(_ *rand.Rand, shape []int) []float64 {
			v := make([]float64, shapeSize(shape))
			for i := range v {
				v[i] = lo + (hi-lo)*rng.Float64()
			}
			return v
		}
	}
	mask := func(rows, cols int, p float64, keepFirst bool) []float64 {
		v := make([]float64, rows*cols)
		for i := range v {
			if rng.Float64() >= p || (keepFirst && i%cols == 0) {
				v[i] = 1
			}
		}
		return v
	}
	ps := NewParams(dt, 7)
	names := []string{"readout", "weights", "xi", "alpha", "mu", "beta", "log_pi"}
	prog, err := Compile(ps, func(bd *Builder) error {
		shape := func(rows, w int) []int {
			if s.SplitHeads {
				return []int{c.b, h, rows, w}
			}
			return []int{c.b, rows, h * w}
		}
		in := EMInputs{
			Q: bd.Param("q", shape(c.n, c.d), Normal(0.5)),
			V: bd.Param("v", shape(c.m, c.dv), Normal(0.5)),
		}
		if in.K = in.Q; !c.selfKeys {
			in.K = bd.Param("k", shape(c.m, c.d), Normal(0.5))
		}
		var keyMask []float64
		if c.masks {
			keyMask = mask(c.b, c.m, 0.3, true)
			in.KeyMask = bd.Constant("key_mask", []int{c.b, c.m}, keyMask)
			in.QueryMask = bd.Constant("query_mask", []int{c.b, c.n}, mask(c.b, c.n, 0.3, false))
		}
		if c.annotate {
			p := 0.5
			if c.emptyS {
				p = 1
			}
			in.Annotated = bd.Constant("annotated", []int{c.b, c.n}, mask(c.b, c.n, p, false))
			in.Values = bd.Param("values", shape(c.n, c.dv), Normal(0.5))
		}
		if c.free {
			if c.perHeadPi {
				in.PiLogits = bd.Param("logits", []int{h, c.m}, Normal(1))
			} else {
				in.PiLogits = bd.Param("logits", []int{c.b, h, c.m}, Normal(1))
			}
		}
		hp := func(name string, lo, hi float64) *Node { return bd.Param(name, []int{h}, positive(lo, hi)) }
		in.Alpha0, in.Beta0 = hp("alpha0", 0.3, 1.5), hp("beta0", 0.3, 1.5)
		in.ThetaXi, in.AAlphaExtra, in.BAlpha = hp("theta_xi", 0.5, 2), hp("a_alpha", 0.5, 3), hp("b_alpha", 0.5, 3)
		in.ThetaMu, in.ABetaExtra, in.BBeta = hp("theta_mu", 0.5, 2), hp("a_beta", 0.5, 3), hp("b_beta", 0.5, 3)
		in.PiExtra = hp("pi_extra", 0.5, 2)
		res := EMAttention(s, in, EMReadout|EMWeights|EMMixture)
		var loss *Node
		for i, x := range []*Node{res.Readout, res.Weights, res.Xi, res.Alpha, res.Mu, res.Beta, res.LogPi} {
			bd.Output(names[i], x)
			coef := make([]float64, shapeSize(Shape(x)))
			for k := range coef {
				coef[k] = rng.NormFloat64()
				// log π is MaskNegInf at padded units: no loss term there
				if names[i] == "log_pi" && keyMask != nil && keyMask[(k/(h*c.m))*c.m+k%c.m] == 0 {
					coef[k] = 0
				}
			}
			term := Sum(Mul(x, bd.Constant("coef_"+names[i], Shape(x), coef)))
			if loss == nil {
				loss = term
			} else {
				loss = Add(loss, term)
			}
		}
		bd.SetLoss(loss)
		return nil
	}, true)
	if err != nil {
		t.Fatal(err)
	}
	run := graphtest.Run(t, prog, names...)
	res := map[string][]float64{}
	for k, v := range run.Grads {
		res["d"+k] = v
	}
	for _, name := range names {
		res[name] = run.Out[name]
	}
	return res
}

// emRelErr is max|a − b| / max|b|: errors relative to the scale of a
// tensor, as an element near 0 carries its neighbours' rounding.
func emRelErr(a, b []float64) float64 {
	var diff, scale float64
	for i := range b {
		diff = math.Max(diff, math.Abs(a[i]-b[i]))
		if math.Abs(b[i]) < 1e8 { // log π's MaskNegInf
			scale = math.Max(scale, math.Abs(b[i]))
		}
	}
	if diff == 0 {
		return 0
	}
	return diff / math.Max(scale, 1e-30)
}

// emWant512 is the build of em.c emCRun expects to run (emLevels sets
// it; emCRun checks it).
var emWant512 bool

// emLevels runs f once for each build of em.c this CPU can run, AVX2 and
// AVX-512, chosen through kernels.EMUseAVX512 whatever PROBFORMER_SIMD
// says.
func emLevels(t *testing.T, f func(t *testing.T)) {
	defer func(u bool) { kernels.EMUseAVX512 = u; emWant512 = false }(kernels.EMUseAVX512)
	for _, use512 := range []bool{false, true} {
		kernels.EMUseAVX512 = use512
		if use512 && !kernels.EMAVX512() {
			t.Log("no AVX-512: em.c's AVX-512 build not tested")
			continue
		}
		emWant512 = use512
		name := "avx2"
		if use512 {
			name = "avx512"
		}
		t.Run(name, f)
	}
}

// TestEMCMatchesGo compares em.c's float32 forward and backward, in its
// AVX2 and AVX-512 builds, with the Go float32 path (to 1e-5 relative)
// and the Go float64 path (to float32 tolerance) on every output and
// gradient of emCCases.
func TestEMCMatchesGo(t *testing.T) {
	if !kernels.EMCAvailable() {
		t.Skip("em.c needs cgo and AVX2/FMA")
	}
	emLevels(t, func(t *testing.T) {
		for _, c := range emCCases() {
			t.Run(c.String(), func(t *testing.T) { emCCompare(t, c) })
		}
	})
}

// emCCompare is TestEMCMatchesGo for one case.
func emCCompare(t *testing.T, c emCCase) {
	got := emCRun(t, c, Float32, true, 2)
	ref := emCRun(t, c, Float32, false, 2)
	ref64 := emCRun(t, c, Float64, false, 2)
	for name, want := range ref {
		g := got[name]
		if len(g) != len(want) {
			t.Fatalf("%s: %d values, want %d", name, len(g), len(want))
		}
		for i, x := range g {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				t.Fatalf("%s[%d] = %v", name, i, x)
			}
		}
		// Several unrolled EM steps amplify float32 rounding, most in the
		// hyperparameters' gradients (sums over the batch of terms that
		// mostly cancel): where C and Go float32 differ by more than 1e-5,
		// C must be no further from the float64 path than Go float32 is
		// (to a factor 4: the two round differently, and the worst element
		// of one need not be that of the other).
		e32, e64, go64 := emRelErr(g, want), emRelErr(g, ref64[name]), emRelErr(want, ref64[name])
		if e32 > 1e-5 && e64 > 4*max(go64, 1e-5) {
			t.Errorf("%s: C vs Go float32: relative error %.3g; C vs float64 %.3g, Go float32 vs float64 %.3g", name, e32, e64, go64)
		}
		if e64 > 1e-3 {
			t.Errorf("%s: C float32 vs Go float64: relative error %.3g", name, e64)
		}
	}
}

// TestEMCThreadCount checks that em.c's results, in either build, are bit
// for bit the same at GOMAXPROCS 1 and 2.
func TestEMCThreadCount(t *testing.T) {
	if !kernels.EMCAvailable() {
		t.Skip("em.c needs cgo and AVX2/FMA")
	}
	emLevels(t, func(t *testing.T) {
		for i, c := range emCCases() {
			if i%5 != 0 {
				continue
			}
			one, two := emCRun(t, c, Float32, true, 1), emCRun(t, c, Float32, true, 2)
			for name, a := range one {
				for k := range a {
					if math.Float64bits(a[k]) != math.Float64bits(two[name][k]) {
						t.Fatalf("%v: %s[%d] = %v at GOMAXPROCS 1, %v at 2", c, name, k, a[k], two[name][k])
					}
				}
			}
		}
	})
}

// emBitCases are the problems on which TestEMAVX512IsAVX2 compares em.c's
// two builds: heads of 8, 16 and 32, N and M from 1 to 64 (on, beside and
// between multiples of 8 and 16, with the models' 16, 50, 45 and 29),
// T_k 0–2 with and without adapted α, T_p and T_v 0–1, masks, annotated
// units (and an empty S), both priors and both head layouts; and the
// maxnorm-em models' kind of problem (T_k = 1 or 2, α fixed, T_p = T_v =
// 0) at their sizes and beside them, also with the keys the queries.
func emBitCases() []emCCase {
	nm := [][2]int{{1, 1}, {16, 50}, {50, 16}, {45, 29}, {29, 45}, {16, 16}, {64, 64}, {9, 17}, {17, 9}, {8, 24},
		{24, 8}, {31, 33}, {33, 31}, {63, 40}, {40, 63}, {7, 15}, {15, 7}, {32, 48}, {48, 32}, {3, 57}, {57, 3},
		{12, 25}, {25, 12}, {2, 64}, {64, 2}, {50, 50}, {45, 45}, {29, 16}, {16, 29}, {13, 8}}
	heads := []int{8, 16, 32}
	dvs := []int{8, 16, 32, 5}
	var cs []emCCase
	for i := 0; i < 90; i++ {
		z := nm[i%len(nm)]
		tk, tp, tv := i%3, (i/3)%2, (i/2)%2
		cs = append(cs, emCCase{b: 2, n: z[0], m: z[1], d: heads[i%len(heads)], dv: dvs[(i/3)%len(dvs)],
			spec: EMSpec{KeyIters: tk, PropagateIters: tp, ValueIters: tv, Heads: 2,
				AdaptAlpha: i%4 != 3, AdaptBeta: i%3 != 1, AdaptPi: i%5 < 3, SplitHeads: i%5 < 2},
			masks: i%4 != 2, annotate: tp > 0 || i%7 == 0, free: i%2 == 1, emptyS: i%13 == 5,
			perHeadPi: i%4 == 1})
	}
	// the maxnorm-em models' EM, T_k = 1 or 2 with α fixed and neither
	// propagation nor value iterations, where em.c's AVX-512 backward
	// runs softmax_back, gaussian_back and dist_back's sums as one pass
	// (back_rows16) from the readout on
	for i, z := range [][2]int{{16, 50}, {50, 16}, {1, 50}, {45, 29}, {9, 20}, {64, 64}, {17, 9}, {7, 57}} {
		cs = append(cs, emCCase{b: 2, n: z[0], m: z[1], d: heads[i%2], dv: heads[i%2],
			spec:  EMSpec{KeyIters: 1 + i%2, Heads: 2, SplitHeads: i%3 == 2},
			masks: i%2 == 0, free: i%4 == 3})
	}
	// and with the keys the queries, where distances clamp to 0, in the
	// fused pass from the readout (T_k = 0) and from a key iteration
	for i, n := range []int{16, 50, 29, 9} {
		cs = append(cs, emCCase{b: 2, n: n, m: n, d: heads[i%2], dv: 8, spec: EMSpec{KeyIters: i % 2, Heads: 2},
			masks: i >= 2, selfKeys: true})
	}
	return cs
}

// TestEMAVX512IsAVX2 checks that em.c's AVX-512 build gives its AVX2
// build's float32 values bit for bit, on every output and gradient of
// emBitCases and emCCases, so that a training run gives the same numbers
// on either.
func TestEMAVX512IsAVX2(t *testing.T) {
	if !kernels.EMCAvailable() {
		t.Skip("em.c needs cgo and AVX2/FMA")
	}
	defer func(u bool) { kernels.EMUseAVX512 = u; emWant512 = false }(kernels.EMUseAVX512)
	kernels.EMUseAVX512 = true
	if !kernels.EMAVX512() {
		t.Skip("no AVX-512: em.c's AVX-512 build not tested")
	}
	for _, c := range append(emBitCases(), emCCases()...) {
		t.Run(c.String(), func(t *testing.T) {
			kernels.EMUseAVX512, emWant512 = false, false
			avx2 := emCRun(t, c, Float32, true, 2)
			kernels.EMUseAVX512, emWant512 = true, true
			avx512 := emCRun(t, c, Float32, true, 2)
			bad := 0
			for name, want := range avx2 {
				got := avx512[name]
				if len(got) != len(want) {
					t.Fatalf("%s: %d values, want %d", name, len(got), len(want))
				}
				for k := range want {
					// float32 values, carried in float64: exactly
					if g, w := math.Float32bits(float32(got[k])), math.Float32bits(float32(want[k])); g != w {
						if bad++; bad <= 5 {
							t.Errorf("%s[%d] = %v (%#08x) with AVX-512, %v (%#08x) with AVX2", name, k, got[k], g,
								want[k], w)
						}
					}
				}
			}
			if bad > 5 {
				t.Errorf("%d values differ", bad)
			}
		})
	}
}
