package kernels

import "testing"

// TestEMPassFits: a pass whose slices hold every problem fits, and
// shortening any slice it reads or writes by one value makes it not fit,
// so EMForwardPass32 and EMBackwardPass32 fall back rather than let C
// index past a slice.
func TestEMPassFits(t *testing.T) {
	const b, h, n, m, d = 3, 2, 5, 4, 8
	s := EMSpec{KeyIters: 1}
	w := h * d
	p := EMPass32{Spec: s, B: b, H: h, N: n, M: m, D: d, Dv: d,
		Q: make([]float32, b*n*w), Ldq: w, QB: n * w, QH: d,
		Xi0: make([]float32, b*m*w), Ldk: w, KB: m * w, KH: d, Mu0: make([]float32, b*m*w), Ldv: w, VB: m * w, VH: d,
		KeyMask: make([]float32, b*m), QueryMask: make([]float32, b*n),
		Trace: make([]float32, b*h*EMTraceSize(s, n, m, d, d)),
		Out:   make([]float32, b*n*w), Ldo: w, OB: n * w, OH: d,
		Seed: make([]float32, b*n*w), Ldr: w, SB: n * w, SH: d,
		GQ: make([]float32, b*n*w), GLdq: w, GQB: n * w, GQH: d,
		GXi0: make([]float32, b*m*w), GLdk: w, GKB: m * w, GKH: d, GMu0: make([]float32, b*m*w), GLdv: w, GVB: m * w,
		GVH: d,
		GH:  make([]EMHyper[float32], b*h)}
	p.Hyper[HAlpha0] = make([]float32, h)
	expectShortUnfit(t, p.fits, []shortSlice{
		{"q", &p.Q, false}, {"keys", &p.Xi0, false}, {"values", &p.Mu0, false}, {"key mask", &p.KeyMask, false},
		{"query mask", &p.QueryMask, false}, {"trace", &p.Trace, false}, {"out", &p.Out, false},
		{"alpha0", &p.Hyper[HAlpha0], false}, {"seed", &p.Seed, true}, {"dq", &p.GQ, true},
		{"dkeys", &p.GXi0, true}, {"dvalues", &p.GMu0, true},
	})
	gh := p.GH
	p.GH = gh[:len(gh)-1]
	if p.fits(true) {
		t.Error("hyperparameter gradients one problem short: the pass fits")
	}
	p.GH = gh
}

// TestBayesPassFits is TestEMPassFits for the sampled Bayesian heads'
// pass.
func TestBayesPassFits(t *testing.T) {
	const b, h, n, m, d, r = 3, 2, 5, 16, 16, 4
	if !AttnHeadOK(n, m, d, d) {
		t.Skip("no attention.c heads here")
	}
	w, hnm, pad := h*d, h*n*m, 32*d+32+16
	np := d*r + 2*r + 1
	p := BayesPass32{B: b, H: h, N: n, M: m, D: d, Dv: d, Q: make([]float32, b*n*w), K: make([]float32, b*m*w),
		V: make([]float32, b*m*w), Mask: make([]float32, b*m), QMask: make([]float32, b*n),
		Noise: make([]float32, b*hnm), P: make([]float32, b*hnm), X: make([]float32, b*hnm),
		Pad: make([]float32, h*pad), PadSize: pad, B2: make([]float32, h), KC: new([7]float64),
		Out: make([]float32, b*n*w), DC: make([]float32, b*h*m), Sums: make([]float64, b*h),
		Skipped: make([]uint32, b), G: make([]float32, b*n*w), DQ: make([]float32, b*n*w),
		DK: make([]float32, b*m*w), DV: make([]float32, b*m*w), XC: make([]float32, b*h*m),
		Part: make([]float64, b*h*np), NP: np, R: r}
	expectShortUnfit(t, p.fits, []shortSlice{
		{"q", &p.Q, false}, {"k", &p.K, false}, {"v", &p.V, false}, {"mask", &p.Mask, false},
		{"query mask", &p.QMask, false}, {"noise", &p.Noise, false}, {"weights", &p.P, false},
		{"KL gradient", &p.X, true}, {"prior network", &p.Pad, false}, {"b2", &p.B2, false},
		{"out", &p.Out, false}, {"dc", &p.DC, false}, {"g", &p.G, true}, {"dq", &p.DQ, true},
		{"dk", &p.DK, true}, {"dv", &p.DV, true}, {"xc", &p.XC, true},
	})
	for _, bwd := range []bool{false, true} {
		sums, part, skipped := p.Sums, p.Part, p.Skipped
		p.Sums, p.Part, p.Skipped = sums[:len(sums)-1], part[:len(part)-1], skipped[:len(skipped)-1]
		if p.fits(bwd) {
			t.Errorf("sums, parts and skip masks one short: the pass fits (bwd %v)", bwd)
		}
		p.Sums, p.Part, p.Skipped = sums, part, skipped
	}
}

// shortSlice is a slice of a pass, by name, and the pass (forward or
// backward) that must refuse it one value short.
type shortSlice struct {
	name string
	x    *[]float32
	bwd  bool
}

// expectShortUnfit checks that fits accepts the pass as it is, both ways,
// and refuses it with each slice of cases one value short.
func expectShortUnfit(t *testing.T, fits func(bwd bool) bool, cases []shortSlice) {
	t.Helper()
	for _, bwd := range []bool{false, true} {
		if !fits(bwd) {
			t.Fatalf("bwd %v: a pass that holds every problem does not fit", bwd)
		}
	}
	for _, c := range cases {
		old := *c.x
		*c.x = old[:len(old)-1]
		if fits(c.bwd) {
			t.Errorf("%s one short: the pass fits (bwd %v)", c.name, c.bwd)
		}
		*c.x = old
	}
}
