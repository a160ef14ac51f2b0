//go:build cgo && !purego

package kernels

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// attnBatchCase is a batch of heads laid out as graph's fused attention
// lays them out: extra columns in each row (packed projections) and the
// options it passes.
type attnBatchCase struct {
	b, h, n, m, d, dv, pad                   int
	causal, mask, bias, drop, residual, save bool
}

// newAttnBatch draws a case's operands; q, k, v rows are H·d (H·dv) wide
// plus pad columns of other data.
func newAttnBatch(rng *rand.Rand, c attnBatchCase) (a *AttnBatch32, g []float32) {
	a = &AttnBatch32{LdQ: c.h*c.d + c.pad, LdK: c.h*c.d + 2*c.pad, LdV: c.h*c.dv + c.pad, B: c.b, H: c.h, N: c.n,
		M: c.m, D: c.d, DV: c.dv, Scale: 0.25, Causal: c.causal, Residual: c.residual}
	a.Q = to32(normal(1)(rng, []int{c.b * c.n * a.LdQ}))
	a.K = to32(normal(1)(rng, []int{c.b * c.m * a.LdK}))
	a.V = to32(normal(1)(rng, []int{c.b * c.m * a.LdV}))
	g = to32(normal(1)(rng, []int{c.b * c.n * c.h * c.dv}))
	nm := c.b * c.h * c.n * c.m
	if c.mask {
		a.Mask = randMask(rng, c.b*c.m, false)
		for bi := range c.b {
			a.Mask[bi*c.m+rng.IntN(c.m)] = 1
		}
		if c.b > 2 {
			clear(a.Mask[2*c.m : 3*c.m]) // an element with no visible key
		}
	}
	if c.bias {
		a.Bias = to32(normal(2)(rng, []int{nm}))
	}
	if c.drop {
		a.Drop = make([]float32, nm)
		for i := range a.Drop {
			if rng.IntN(10) != 0 {
				a.Drop[i] = 1 / 0.9
			}
		}
	}
	if c.save {
		a.P = filled(nm)
	} else {
		a.P = filled(c.n * c.m)
	}
	return a, g
}

// TestAttnHeadsAreHeads: attnHeadsFwdAt and attnHeadsBwdAt over a worker
// split of the batch elements (b0, bstep) give each head's values bit for
// bit as the one-head calls (attnHeadFwdAt, attnHeadBwdAt) do, at both
// levels, and write nothing outside the heads.
func TestAttnHeadsAreHeads(t *testing.T) {
	if hasAVX2() == 0 {
		t.Skip("no AVX2")
	}
	levels := []int{1}
	if hasAVX512() {
		levels = append(levels, 2)
	}
	rng := rand.New(rand.NewPCG(3, 14))
	cases := []attnBatchCase{
		{b: 5, h: 4, n: 16, m: 32, d: 16, dv: 16, residual: true, save: true},
		{b: 5, h: 4, n: 32, m: 16, d: 16, dv: 16, pad: 8, residual: true, save: true, mask: true},
		{b: 4, h: 4, n: 11, m: 11, d: 16, dv: 16, pad: 3, causal: true, mask: true, drop: true, save: true},
		{b: 3, h: 2, n: 7, m: 13, d: 8, dv: 24, pad: 5, bias: true, drop: true, save: true},
		{b: 3, h: 3, n: 9, m: 9, d: 32, dv: 32, mask: true, save: false},
		{b: 2, h: 1, n: 1, m: 1, d: 64, dv: 8, save: true},
	}
	for _, c := range cases {
		a, g := newAttnBatch(rng, c)
		ldo := c.h * c.dv
		for _, level := range levels {
			// the one-head calls
			wantOut, wantP := filled(c.b*c.n*ldo), filled(len(a.P))
			wantDQ, wantDK, wantDV := filled(len(a.Q)), filled(len(a.K)), filled(len(a.V))
			for bi := range c.b {
				for h := range c.h {
					i := bi*c.h + h
					oq, ok, ov := bi*c.n*a.LdQ+h*c.d, bi*c.m*a.LdK+h*c.d, bi*c.m*a.LdV+h*c.dv
					var mask, bias, drop, res []float32
					if a.Mask != nil {
						mask = a.Mask[bi*c.m : (bi+1)*c.m]
					}
					if a.Bias != nil {
						bias = a.Bias[i*c.n*c.m:]
					}
					if a.Drop != nil {
						drop = a.Drop[i*c.n*c.m:]
					}
					if c.residual {
						res = a.Q[oq:]
					}
					p := wantP
					if c.save {
						p = wantP[i*c.n*c.m:]
					}
					oo := bi*c.n*ldo + h*c.dv
					if !attnHeadFwdAt(level, a.Q[oq:], a.LdQ, a.K[ok:], a.LdK, a.V[ov:], a.LdV, c.n, c.m, c.d, c.dv, a.Scale,
						mask, c.causal, bias, drop, p, wantOut[oo:], ldo, res, a.LdQ) {
						t.Fatalf("%+v: head did not run", c)
					}
					if !c.save {
						continue
					}
					var gres []float32
					if c.residual {
						gres = g[oo:]
					}
					if !attnHeadBwdAt(level, a.Q[oq:], a.LdQ, a.K[ok:], a.LdK, a.V[ov:], a.LdV, g[oo:], ldo, p, drop, c.n, c.m,
						c.d, c.dv, a.Scale, wantDQ[oq:], wantDK[ok:], wantDV[ov:], gres, ldo) {
						t.Fatalf("%+v: head backward did not run", c)
					}
				}
			}
			for _, step := range []int{1, 2, 3} {
				what := fmt.Sprintf("%+v level %d step %d", c, level, step)
				a.P = filled(len(a.P))
				out, dq, dk, dv := filled(len(wantOut)), filled(len(a.Q)), filled(len(a.K)), filled(len(a.V))
				for b0 := range step {
					if !attnHeadsFwdAt(level, a, out, b0, step) {
						t.Fatalf("%s: forward did not run", what)
					}
				}
				sameBits(t, what+" out", wantOut, out)
				if !c.save {
					continue
				}
				sameBits(t, what+" p", wantP, a.P)
				for b0 := range step {
					if !attnHeadsBwdAt(level, a, g, dq, dk, dv, b0, step) {
						t.Fatalf("%s: backward did not run", what)
					}
				}
				sameBits(t, what+" dq", wantDQ, dq)
				sameBits(t, what+" dk", wantDK, dk)
				sameBits(t, what+" dv", wantDV, dv)
			}
		}
	}
}

// TestAttnHeadsSharedIsOneWorker: AttnHeadsFwdShared32 and
// AttnHeadsBwdShared32, whose workers take batch elements from a shared
// counter, give the bits of one worker's attnHeadsFwdAt and
// attnHeadsBwdAt over the whole batch at 1-3 workers (and more workers
// than elements), at both levels, with batch sizes that do not divide
// among the workers, saved weights or the workers' scratches, and
// several concurrent callers (one holds the pool; the others run every
// element themselves). Run under GOMAXPROCS 1 and 2 and -race too.
func TestAttnHeadsSharedIsOneWorker(t *testing.T) {
	if hasAVX2() == 0 {
		t.Skip("no AVX2")
	}
	levels := []int{1}
	if hasAVX512() {
		levels = append(levels, 2)
	}
	rng := rand.New(rand.NewPCG(5, 23))
	cases := []attnBatchCase{
		{b: 7, h: 4, n: 16, m: 32, d: 16, dv: 16, residual: true, save: true},
		{b: 5, h: 4, n: 32, m: 16, d: 16, dv: 16, pad: 8, residual: true, save: true, mask: true},
		{b: 11, h: 4, n: 11, m: 11, d: 16, dv: 16, pad: 3, causal: true, mask: true, drop: true, save: true},
		{b: 3, h: 2, n: 7, m: 13, d: 8, dv: 24, pad: 5, bias: true, drop: true, save: true},
		{b: 5, h: 3, n: 9, m: 9, d: 32, dv: 32, mask: true},
		{b: 2, h: 1, n: 1, m: 1, d: 64, dv: 8, save: true},
		{b: 1, h: 2, n: 4, m: 6, d: 8, dv: 8, save: true},
	}
	for _, c := range cases {
		a, g := newAttnBatch(rng, c)
		ldo := c.h * c.dv
		for _, level := range levels {
			wantOut, wantDQ, wantDK, wantDV := filled(c.b*c.n*ldo), filled(len(a.Q)), filled(len(a.K)), filled(len(a.V))
			a.P = filled(len(a.P))
			if !attnHeadsFwdAt(level, a, wantOut, 0, 1) {
				t.Fatalf("%+v: one worker's forward did not run", c)
			}
			wantP := append([]float32(nil), a.P...)
			if c.save && !attnHeadsBwdAt(level, a, g, wantDQ, wantDK, wantDV, 0, 1) {
				t.Fatalf("%+v: one worker's backward did not run", c)
			}
			for _, workers := range []int{1, 2, 3, 4} {
				what := fmt.Sprintf("%+v level %d workers %d", c, level, workers)
				const callers = 3
				type result struct {
					p, out, dq, dk, dv []float32
					okF, okB           bool
				}
				done := make(chan result, callers)
				for range callers {
					ac := *a
					if c.save {
						ac.P = filled(len(a.P))
					} else {
						ac.P = filled(min(workers, c.b) * c.n * c.m)
					}
					go func() {
						r := result{p: ac.P, out: filled(len(wantOut)), dq: filled(len(a.Q)), dk: filled(len(a.K)),
							dv: filled(len(a.V))}
						r.okF = attnHeadsShared(level, false, &ac, r.out, nil, nil, nil, workers)
						r.okB = !c.save || attnHeadsShared(level, true, &ac, g, r.dq, r.dk, r.dv, workers)
						done <- r
					}()
				}
				for range callers {
					r := <-done
					if !r.okF || !r.okB {
						t.Fatalf("%s: did not run (forward %v, backward %v)", what, r.okF, r.okB)
					}
					sameBits(t, what+" out", wantOut, r.out)
					if !c.save {
						continue
					}
					sameBits(t, what+" p", wantP, r.p)
					sameBits(t, what+" dq", wantDQ, r.dq)
					sameBits(t, what+" dk", wantDK, r.dk)
					sameBits(t, what+" dv", wantDV, r.dv)
				}
			}
		}
	}
}

// TestAttnHeadsRefuse: sizes attention.c does not take, and operands too
// short for the batch, run nothing and report false.
func TestAttnHeadsRefuse(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 7))
	c := attnBatchCase{b: 2, h: 2, n: 4, m: 4, d: 8, dv: 8, save: true}
	for _, bad := range []func(a *AttnBatch32){
		func(a *AttnBatch32) { a.D = 12 },
		func(a *AttnBatch32) { a.M = 65 },
		func(a *AttnBatch32) { a.Q = a.Q[:len(a.Q)-1] },
		func(a *AttnBatch32) { a.P = a.P[:len(a.P)-1] },
		func(a *AttnBatch32) { a.Mask = make([]float32, 3) },
		func(a *AttnBatch32) { a.Residual, a.DV = true, 16 },
	} {
		a, g := newAttnBatch(rng, c)
		bad(a)
		out := filled(len(g))
		if attnHeadsFwdAt(simdLevel(), a, out, 0, 1) || attnHeadsBwdAt(simdLevel(), a, g, filled(len(a.Q)), filled(len(a.K)), filled(len(a.V)), 0, 1) {
			t.Fatalf("ran on B=%d H=%d N=%d M=%d D=%d DV=%d len(Q)=%d len(P)=%d len(Mask)=%d", a.B, a.H, a.N, a.M, a.D, a.DV, len(a.Q), len(a.P), len(a.Mask))
		}
		for _, x := range out {
			if x != sentinel {
				t.Fatal("wrote out without running")
			}
		}
	}
}

// BenchmarkAttnHeads times the heads of one Set Transformer attention op
// (ISAB: 64 sets, 4 heads of 16, 16 inducing points over sets of 32 and
// back, with the residual) forward and backward on one thread: "heads"
// makes one cgo call a head, as graph did, "batch" one call for all of
// them (attnHeadsFwdAt, attnHeadsBwdAt), at the CPU's level.
func BenchmarkAttnHeads(b *testing.B) {
	if hasAVX2() == 0 {
		b.Skip("no AVX2")
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range []attnBatchCase{
		{b: 64, h: 4, n: 16, m: 32, d: 16, dv: 16, residual: true, save: true},
		{b: 64, h: 4, n: 32, m: 16, d: 16, dv: 16, residual: true, save: true},
	} {
		a, g := newAttnBatch(rng, c)
		out, dq, dk, dv := make([]float32, len(g)), make([]float32, len(a.Q)), make([]float32, len(a.K)), make([]float32, len(a.V))
		ldo, nm := c.h*c.dv, c.n*c.m
		name := fmt.Sprintf("n=%d,m=%d", c.n, c.m)
		b.Run("heads/"+name, func(b *testing.B) {
			for range b.N {
				for bi := range c.b {
					for h := range c.h {
						i := bi*c.h + h
						oq, ok, ov, oo := bi*c.n*a.LdQ+h*c.d, bi*c.m*a.LdK+h*c.d, bi*c.m*a.LdV+h*c.dv, bi*c.n*ldo+h*c.dv
						AttnHeadFwdRes32(a.Q[oq:], a.LdQ, a.K[ok:], a.LdK, a.V[ov:], a.LdV, c.n, c.m, c.d, c.dv, a.Scale, nil,
							false, nil, nil, a.P[i*nm:], out[oo:], ldo, a.Q[oq:], a.LdQ)
						AttnHeadBwdRes32(a.Q[oq:], a.LdQ, a.K[ok:], a.LdK, a.V[ov:], a.LdV, g[oo:], ldo, a.P[i*nm:], nil, c.n,
							c.m, c.d, c.dv, a.Scale, dq[oq:], dk[ok:], dv[ov:], g[oo:], ldo)
					}
				}
			}
		})
		b.Run("batch/"+name, func(b *testing.B) {
			for range b.N {
				attnHeadsFwdAt(simdLevel(), a, out, 0, 1)
				attnHeadsBwdAt(simdLevel(), a, g, dq, dk, dv, 0, 1)
			}
		})
	}
}
