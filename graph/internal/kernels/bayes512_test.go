//go:build cgo && !purego

package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// The Bayesian heads at level 2 (AVX-512 products and transposes,
// bayes_axpy, the backward's attn_head_bwd512) against level 1 (the AVX2 code the
// results tables were run on), bit for bit: every output of the forward
// pass (p, x, out, dc, the KL sum) and of the backward pass (dq, dk, dv,
// the prior network's gradients), over both kernels, masks, with and
// without the prior network, at sizes around the 8-, 16- and 64-column
// edges, with strided rows.

// bayesHeadCase is one head's inputs for TestBayesHeadAVX512IsAVX2.
type bayesHeadCase struct {
	n, m, d, dv, ld, ldv int
	q, k, v, g, u        []float32
	mask, qmask          []float32
	net                  *PriorNet32
	kc                   [7]float64
}

// newBayesHeadCase draws a head of the given sizes; q and k rows are ld
// apart, v rows ldv apart (padding with values the head must not read).
func newBayesHeadCase(rng *rand.Rand, n, m, d, dv, kind int, masked, prior bool) *bayesHeadCase {
	c := &bayesHeadCase{n: n, m: m, d: d, dv: dv, ld: d + 8*rng.IntN(3), ldv: dv + 8*rng.IntN(3)}
	fill := func(x []float32, s float64) []float32 {
		for i := range x {
			x[i] = float32(s * rng.NormFloat64())
		}
		return x
	}
	rows := max(n, m)
	c.q = fill(make([]float32, rows*c.ld), 1)
	c.k = fill(make([]float32, rows*c.ld), 1)
	c.v = fill(make([]float32, m*c.ldv), 1)
	c.g = fill(make([]float32, n*c.ldv), 1)
	c.u = make([]float32, n*m)
	for i := range c.u {
		if kind == 0 {
			c.u[i] = float32((float64(rng.Uint32()>>9) + 0.5) / (1 << 23))
		} else {
			c.u[i] = float32(rng.NormFloat64())
		}
	}
	if masked {
		c.mask = randMask(rng, m, false)
		c.mask[rng.IntN(m)] = 1 // at least one visible key
		c.qmask = randMask(rng, n, false)
		c.qmask[rng.IntN(n)] = 1
	}
	if prior {
		c.net = &PriorNet32{W1: make([]float32, 16*d), W1t: make([]float32, 16*d), B1: fill(make([]float32, 16), 0.5),
			W2: fill(make([]float32, 16), 0.5), B2: 0.1}
		for e := range d {
			for t := range 16 {
				x := float32(0.3 * rng.NormFloat64())
				c.net.W1[e*16+t], c.net.W1t[t*d+e] = x, x
			}
		}
	}
	if kind == 0 {
		c.kc = [7]float64{0, 0.1, 1, 0.3, -1.2, 0, 0.5}
	} else {
		c.kc = [7]float64{1, 1, 1, 0, 0.2, 0.05, 0.5}
	}
	return c
}

// bayesHeadOut is every output of one head's forward and backward pass.
type bayesHeadOut struct {
	p, x, out, dc, dq, dk, dv, pg []float32
	sum                           float64
}

// special puts the values at the edges of the row loops into c: noise
// that weighs a key out (u = 1, Weibull) or a whole row out, noise of
// ±0 (log-normal) on rows of zero scores, so that a row's max is a tie
// of +0 and −0 (maxps keeps its second operand), and tiny u.
func (c *bayesHeadCase) special(rng *rand.Rand, kind int) {
	n, m := c.n, c.m
	for i := range n {
		switch rng.IntN(4) {
		case 0: // zero scores: q's row 0
			clear(c.q[i*c.ld : i*c.ld+c.d])
			for j := range m {
				if kind == 1 {
					c.u[i*m+j] = float32(math.Copysign(0, float64(rng.IntN(2)*2-1)))
				}
			}
		case 1:
			if kind == 0 && rng.IntN(2) == 0 { // the whole row weighed out
				for j := range m {
					c.u[i*m+j] = 1
				}
			}
		}
		for j := range m {
			if kind == 0 && rng.IntN(8) == 0 {
				c.u[i*m+j] = []float32{1, 1e-30, 0x1p-24, 1 - 0x1p-24}[rng.IntN(4)]
			}
		}
	}
}

// run runs c's head forward and backward at level.
func (c *bayesHeadCase) run(t *testing.T, level int) bayesHeadOut {
	t.Helper()
	n, m, d, dv := c.n, c.m, c.d, c.dv
	o := bayesHeadOut{p: make([]float32, n*m), x: make([]float32, n*m), out: make([]float32, n*c.ldv),
		dc: make([]float32, m), dq: make([]float32, max(n, m)*c.ld), dk: make([]float32, max(n, m)*c.ld),
		dv: make([]float32, m*c.ldv), pg: make([]float32, 16*d+33)}
	kc := c.kc
	sum, ok := bayesHead32At(level, c.q, c.ld, c.k, c.v, c.ldv, n, m, d, dv, 0.25, c.mask, c.qmask, c.u, c.net, &kc,
		o.p, o.x, o.out, o.dc)
	if !ok {
		t.Fatalf("level %d: pf_bayes_head did not run", level)
	}
	o.sum = sum
	if !bayesHeadBwd32At(level, c.q, c.ld, c.k, c.v, c.ldv, c.g, o.p, o.x, n, m, d, dv, 0.25, 0.01, o.dq, o.dk, o.dv,
		c.net, o.dc, o.pg) {
		t.Fatalf("level %d: pf_bayes_head_bwd did not run", level)
	}
	return o
}

// TestBayesHeadAVX512IsAVX2 holds the Bayesian heads' AVX-512 level to
// their AVX2 level bit for bit.
func TestBayesHeadAVX512IsAVX2(t *testing.T) {
	needAVX512(t)
	rng := rand.New(rand.NewPCG(7, 11))
	sizes := [][4]int{{1, 1, 8, 8}, {5, 7, 8, 8}, {16, 16, 16, 16}, {20, 20, 16, 16}, {17, 33, 24, 40},
		{32, 32, 32, 32}, {33, 47, 40, 24}, {64, 64, 64, 64}, {9, 64, 16, 8}, {64, 9, 8, 16},
		{16, 50, 16, 16}, {50, 16, 16, 16}, {1, 50, 16, 16}, {3, 56, 16, 16}}
	for _, sz := range sizes {
		for kind := range 2 {
			for _, masked := range []bool{false, true} {
				for _, prior := range []bool{false, true} {
					name := fmt.Sprintf("n%d-m%d-d%d-dv%d-kind%d-mask%v-prior%v", sz[0], sz[1], sz[2], sz[3], kind, masked, prior)
					c := newBayesHeadCase(rng, sz[0], sz[1], sz[2], sz[3], kind, masked, prior)
					if prior {
						c.special(rng, kind)
					}
					a, b := c.run(t, 1), c.run(t, 2)
					if math.Float64bits(a.sum) != math.Float64bits(b.sum) {
						t.Fatalf("%s: KL sum %v on AVX2, %v on AVX-512", name, a.sum, b.sum)
					}
					for _, f := range []struct {
						what string
						x, y []float32
					}{{"p", a.p, b.p}, {"x", a.x, b.x}, {"out", a.out, b.out}, {"dc", a.dc, b.dc}, {"dq", a.dq, b.dq},
						{"dk", a.dk, b.dk}, {"dv", a.dv, b.dv}, {"prior grads", a.pg, b.pg}} {
						sameBits(t, name+": "+f.what, f.x, f.y)
					}
					if slices.ContainsFunc(a.out, func(x float32) bool { return x != x }) {
						t.Fatalf("%s: NaN in the readout", name)
					}
				}
			}
		}
	}
}

// TestExpNegWithinMargin holds exp_neg8, which the normal noise's
// retries compare against (pf_normal_noise512), to math.Exp within 4 ulps
// on [−7, 0], where the retries' margin (10⁻¹³ relative) assumes a few:
// 2·10⁵ random points, the ends, and the points where n = round(y/ln 2)
// changes.
func TestExpNegWithinMargin(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	y := []float64{0, -7, math.Copysign(0, -1), -1e-300}
	for n := 1; n <= 10; n++ {
		h := (float64(n) - 0.5) * math.Ln2
		y = append(y, -h, math.Nextafter(-h, 0), math.Nextafter(-h, -8))
	}
	for range 200000 {
		y = append(y, -7*rng.Float64())
	}
	got := make([]float64, len(y))
	if !expNeg64(y, got) {
		t.Skip("no AVX-512 here")
	}
	for i, v := range y {
		want := math.Exp(v)
		if d := math.Abs(got[i]-want) / want; d > 4*0x1p-52 {
			t.Fatalf("exp(%v) = %v, math.Exp %v: %.3g relative", v, got[i], want, d)
		}
	}
}
