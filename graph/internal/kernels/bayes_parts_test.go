//go:build cgo && !purego

package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestSumPartsIsGoLoop holds pf_sum_parts to graph's Go loop bit for bit
// (each element from +0 over the rows in order), with signed zeros,
// huge and tiny values whose sums depend on the order, NaN and
// infinities, at widths around its 16-element blocks and strides past
// the width.
func TestSumPartsIsGoLoop(t *testing.T) {
	if hasAVX2() == 0 {
		t.Skip("no AVX2")
	}
	rng := rand.New(rand.NewPCG(3, 5))
	specials := []float64{math.Copysign(0, -1), 0, 1e300, -1e300, 1e-300, math.NaN(), math.Inf(1), math.Inf(-1)}
	for _, np := range []int{1, 3, 15, 16, 17, 31, 32, 33, 181} {
		for _, rows := range []int{1, 2, 7, 64} {
			for _, extra := range []int{0, 5} {
				stride := np + extra
				part := make([]float64, (rows-1)*stride+np)
				for i := range part {
					part[i] = rng.NormFloat64() * math.Pow(10, float64(rng.IntN(20)-10))
					if rng.IntN(20) == 0 {
						part[i] = specials[rng.IntN(len(specials))]
					}
				}
				want := make([]float64, np)
				for r := range rows {
					for i, v := range part[r*stride : r*stride+np] {
						want[i] += v
					}
				}
				got := make([]float64, np+1)
				got[np] = 42
				if !SumParts64(part, stride, rows, np, got) {
					t.Fatalf("np %d rows %d: pf_sum_parts did not run", np, rows)
				}
				for i, w := range want {
					if math.Float64bits(got[i]) != math.Float64bits(w) {
						t.Fatalf("np %d rows %d stride %d: sum[%d] = %v, Go's loop %v", np, rows, stride, i, got[i], w)
					}
				}
				if got[np] != 42 {
					t.Fatalf("np %d rows %d: wrote past sum", np, rows)
				}
			}
		}
	}
	if SumParts64(make([]float64, 10), 5, 3, 5, make([]float64, 5)) {
		t.Fatal("ran on a part too short")
	}
}

// TestBayesHeadBwdPartIsBwd holds BayesHeadBwdPart32 (dc made from the
// KL's unit gradient in C, the prior network's gradients also written
// out as graph's float64 part) to BayesHeadBwd32 fed graph's dc, and its
// part to graph's conversion of pg, bit for bit, at both levels, hidden
// widths 1, 10 (the layers' width) and 16, with and without masks.
func TestBayesHeadBwdPartIsBwd(t *testing.T) {
	if hasAVX2() == 0 {
		t.Skip("no AVX2")
	}
	rng := rand.New(rand.NewPCG(9, 2))
	levels := []int{1}
	if simdLevel() >= 2 {
		levels = append(levels, 2)
	}
	for _, sz := range [][4]int{{16, 50, 16, 16}, {50, 16, 16, 16}, {1, 50, 16, 16}, {5, 7, 8, 8}, {33, 47, 40, 24}} {
		for kind := range 2 {
			for _, masked := range []bool{false, true} {
				for _, r := range []int{1, 10, 16} {
					for _, level := range levels {
						n, m, d, dv := sz[0], sz[1], sz[2], sz[3]
						c := newBayesHeadCase(rng, n, m, d, dv, kind, masked, true)
						o := c.run(t, level) // p and x from the forward pass
						xc := make([]float32, m)
						for j := range xc {
							xc[j] = float32(rng.NormFloat64())
						}
						gd := rng.Float64() / 3
						dc := make([]float32, m)
						for j := range dc {
							dc[j] = float32(gd * float64(xc[j]))
						}
						name := fmt.Sprintf("n%d-m%d-d%d-kind%d-mask%v-r%d-level%d", n, m, d, kind, masked, r, level)
						type res struct{ dq, dk, dv, pg []float32 }
						mk := func() res {
							return res{make([]float32, max(n, m)*c.ld), make([]float32, max(n, m)*c.ld),
								make([]float32, m*c.ldv), make([]float32, 16*d+33)}
						}
						a, b := mk(), mk()
						if !bayesHeadBwd32At(level, c.q, c.ld, c.k, c.v, c.ldv, c.g, o.p, o.x, n, m, d, dv, 0.25, 0.01,
							a.dq, a.dk, a.dv, c.net, dc, a.pg) {
							t.Fatalf("%s: pf_bayes_head_bwd did not run", name)
						}
						part := make([]float64, d*r+2*r+2)
						part[len(part)-1] = 42
						if !bayesHeadBwdPart32At(level, c.q, c.ld, c.k, c.v, c.ldv, c.g, o.p, o.x, n, m, d, dv, 0.25, 0.01,
							b.dq, b.dk, b.dv, c.net, nil, xc, gd, part, r, b.pg) {
							t.Fatalf("%s: pf_bayes_head_bwd with part did not run", name)
						}
						for _, f := range []struct {
							what string
							x, y []float32
						}{{"dq", a.dq, b.dq}, {"dk", a.dk, b.dk}, {"dv", a.dv, b.dv}, {"prior grads", a.pg, b.pg}} {
							sameBits(t, name+": "+f.what, f.x, f.y)
						}
						want := make([]float64, d*r+2*r+1)
						for e := range d {
							for t := range r {
								want[e*r+t] = float64(a.pg[e*16+t])
							}
						}
						for t := range r {
							want[d*r+t], want[d*r+r+t] = float64(a.pg[16*d+t]), float64(a.pg[16*d+16+t])
						}
						want[d*r+2*r] = float64(a.pg[16*d+32])
						for i, w := range want {
							if math.Float64bits(part[i]) != math.Float64bits(w) {
								t.Fatalf("%s: part[%d] = %v, want %v", name, i, part[i], w)
							}
						}
						if part[len(want)] != 42 {
							t.Fatalf("%s: wrote past part", name)
						}
					}
				}
			}
		}
	}
}

// TestBayesHeadsAreHeads holds BayesHeads32 and BayesHeadsBwd32 (one call
// for a batch element's heads) to BayesHead32 and BayesHeadBwdPart32 a
// head bit for bit: every head's p, x, readout, dc and KL sum, dq, dk, dv
// and the prior network's gradients, at both levels, both kernels, with
// and without the prior network and masks; an element without a visible
// key runs no head and writes nothing.
func TestBayesHeadsAreHeads(t *testing.T) {
	if hasAVX2() == 0 {
		t.Skip("no AVX2")
	}
	rng := rand.New(rand.NewPCG(13, 17))
	levels := []int{1}
	if simdLevel() >= 2 {
		levels = append(levels, 2)
	}
	fill := func(x []float32, s float64) []float32 {
		for i := range x {
			x[i] = float32(s * rng.NormFloat64())
		}
		return x
	}
	for _, sz := range [][4]int{{16, 50, 16, 16}, {50, 16, 16, 16}, {1, 50, 16, 16}, {5, 7, 8, 8}} {
		for _, h := range []int{1, 4} {
			for kind := range 2 {
				for _, masked := range []bool{false, true} {
					for _, prior := range []bool{false, true} {
						for _, level := range levels {
							n, m, d, dv := sz[0], sz[1], sz[2], sz[3]
							name := fmt.Sprintf("n%d-m%d-d%d-h%d-kind%d-mask%v-prior%v-level%d", n, m, d, h, kind, masked, prior, level)
							ld, ldv := h*d, h*dv
							q, k, v := fill(make([]float32, n*ld), 1), fill(make([]float32, m*ld), 1), fill(make([]float32, m*ldv), 1)
							noise := make([]float32, h*n*m)
							for i := range noise {
								if kind == 0 {
									noise[i] = float32((float64(rng.Uint32()>>9) + 0.5) / (1 << 23))
								} else {
									noise[i] = float32(rng.NormFloat64())
								}
							}
							var mask, qmask []float32
							if masked {
								mask, qmask = randMask(rng, m, false), randMask(rng, n, false)
								mask[rng.IntN(m)], qmask[rng.IntN(n)] = 1, 1
							}
							padSize := 32*d + 32
							var pad, b2 []float32
							if prior {
								pad, b2 = make([]float32, h*padSize), fill(make([]float32, h), 0.1)
								for hh := range h {
									hp := pad[hh*padSize:]
									for e := range d {
										for t := range 10 {
											w := float32(0.3 * rng.NormFloat64())
											hp[e*16+t], hp[16*d+t*d+e] = w, w
										}
									}
									fill(hp[32*d:32*d+10], 0.5)
									fill(hp[32*d+16:32*d+26], 0.5)
								}
							}
							kc := [7]float64{0, 0.1, 1, 0.3, -1.2, 0, 0.5}
							if kind == 1 {
								kc = [7]float64{1, 1, 1, 0, 0.2, 0.05, 0.5}
							}
							type res struct {
								p, x, out, dc []float32
								sums          []float64
							}
							mk := func() res {
								return res{make([]float32, h*n*m), make([]float32, h*n*m), make([]float32, n*ldv),
									make([]float32, h*m), make([]float64, h)}
							}
							a, b := mk(), mk()
							for hh := range h {
								var net *PriorNet32
								if prior {
									hp := pad[hh*padSize:]
									net = &PriorNet32{W1: hp[:16*d], W1t: hp[16*d : 32*d], B1: hp[32*d : 32*d+16],
										W2: hp[32*d+16 : 32*d+32], B2: b2[hh]}
								}
								kk := kc
								s, ok := bayesHead32At(level, q[hh*d:], ld, k[hh*d:], v[hh*dv:], ldv, n, m, d, dv, 0.25, mask,
									qmask, noise[hh*n*m:], net, &kk, a.p[hh*n*m:], a.x[hh*n*m:], a.out[hh*dv:], a.dc[hh*m:])
								if !ok {
									t.Fatalf("%s: head %d did not run", name, hh)
								}
								a.sums[hh] = s
							}
							skipped, ok := bayesHeads32At(level, h, q, ld, k, v, ldv, n, m, d, dv, 0.25, mask, qmask, noise,
								pad, padSize, b2, &kc, b.p, b.x, b.out, b.dc, b.sums)
							if !ok || skipped != 0 {
								t.Fatalf("%s: BayesHeads32 ran %v, skipped %b", name, ok, skipped)
							}
							for _, f := range []struct {
								what string
								x, y []float32
							}{{"p", a.p, b.p}, {"x", a.x, b.x}, {"out", a.out, b.out}, {"dc", a.dc, b.dc}} {
								sameBits(t, name+": "+f.what, f.x, f.y)
							}
							for hh := range h {
								if math.Float64bits(a.sums[hh]) != math.Float64bits(b.sums[hh]) {
									t.Fatalf("%s: head %d's sum %v, one head a call %v", name, hh, b.sums[hh], a.sums[hh])
								}
							}
							// the backward pass: BayesHeadsBwd32 against BayesHeadBwdPart32
							// a head, from the forward's p and x
							g := fill(make([]float32, n*ldv), 1)
							xc := fill(make([]float32, h*m), 1)
							const r = 10
							np := d*r + 2*r + 1
							type bres struct {
								dq, dk, dv []float32
								part       []float64
							}
							mkb := func() bres {
								return bres{make([]float32, n*ld), make([]float32, m*ld), make([]float32, m*ldv),
									make([]float64, h*np)}
							}
							ba, bb := mkb(), mkb()
							pg := make([]float32, 16*d+33)
							for hh := range h {
								var net *PriorNet32
								var xch []float32
								var part []float64
								if prior {
									hp := pad[hh*padSize:]
									net = &PriorNet32{W1: hp[:16*d], W1t: hp[16*d : 32*d], B1: hp[32*d : 32*d+16],
										W2: hp[32*d+16 : 32*d+32]}
									xch, part = xc[hh*m:], ba.part[hh*np:]
								}
								if !bayesHeadBwdPart32At(level, q[hh*d:], ld, k[hh*d:], v[hh*dv:], ldv, g[hh*dv:], a.p[hh*n*m:],
									a.x[hh*n*m:], n, m, d, dv, 0.25, 0.01, ba.dq[hh*d:], ba.dk[hh*d:], ba.dv[hh*dv:], net, nil,
									xch, 0.01, part, r, pg) {
									t.Fatalf("%s: head %d's backward did not run", name, hh)
								}
							}
							var xce []float32
							if prior {
								xce = xc
							}
							if !bayesHeadsBwd32At(level, h, q, ld, k, v, ldv, g, a.p, a.x, n, m, d, dv, 0.25, 0.01, bb.dq, bb.dk,
								bb.dv, pad, padSize, xce, 0.01, bb.part, np, r, make([]float32, 16*d+33)) {
								t.Fatalf("%s: BayesHeadsBwd32 did not run", name)
							}
							for _, f := range []struct {
								what string
								x, y []float32
							}{{"dq", ba.dq, bb.dq}, {"dk", ba.dk, bb.dk}, {"dv", ba.dv, bb.dv}} {
								sameBits(t, name+": "+f.what, f.x, f.y)
							}
							for i := range ba.part {
								if math.Float64bits(ba.part[i]) != math.Float64bits(bb.part[i]) {
									t.Fatalf("%s: part[%d] %v, one head a call %v", name, i, bb.part[i], ba.part[i])
								}
							}
							// no visible key: no head runs, nothing is written
							c := mk()
							c.p[0] = 42
							skipped, ok = bayesHeads32At(level, h, q, ld, k, v, ldv, n, m, d, dv, 0.25, make([]float32, m),
								qmask, noise, pad, padSize, b2, &kc, c.p, c.x, c.out, c.dc, c.sums)
							if !ok || skipped != 1<<h-1 || c.p[0] != 42 {
								t.Fatalf("%s: without a visible key BayesHeads32 ran %v, skipped %b, p[0] %v", name, ok, skipped, c.p[0])
							}
						}
					}
				}
			}
		}
	}
}
