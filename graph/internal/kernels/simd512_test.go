//go:build cgo && !purego

package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
)

// The AVX-512 paths of the attention heads and the row softmax against
// their AVX2 paths (bit for bit: both sum in the same order, see
// softmax.c, attention.c) and both against float64 Go
// references computed here from the same float32 inputs. Each test calls
// the two levels explicitly, so the AVX2 path is tested on a machine with
// AVX-512 whatever PROBFORMER_SIMD says.

// needAVX512 skips t on a CPU without AVX-512 (there only the AVX2 path
// runs, which the graph tests cover).
func needAVX512(t *testing.T) {
	t.Helper()
	if hasAVX2() == 0 || !hasAVX512() {
		t.Skip("no AVX-512 on this CPU: only the AVX2 paths run here")
	}
}

// sameBits fails unless a and b hold the same float32 bits.
func sameBits(t *testing.T, what string, a, b []float32) {
	t.Helper()
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			t.Fatalf("%s: element %d is %v on AVX2, %v on AVX-512", what, i, a[i], b[i])
		}
	}
}

// within fails unless got is within tol[i] of want[i] for every i.
func within(t *testing.T, what string, got []float32, want, tol []float64) {
	t.Helper()
	for i := range want {
		if d := math.Abs(float64(got[i]) - want[i]); !(d <= tol[i]) {
			t.Fatalf("%s: element %d is %v, want %v ± %.3g", what, i, got[i], want[i], tol[i])
		}
	}
}

// randMask is a key mask [m] with about a quarter of the keys masked, or
// all of them when all is set.
func randMask(rng *rand.Rand, m int, all bool) []float32 {
	mk := make([]float32, m)
	for j := range mk {
		if !all && rng.IntN(4) != 0 {
			mk[j] = 1
		}
	}
	return mk
}

// softmaxRef is the float64 softmax of each row of s [n×m] over its
// visible keys (j < m, j ≤ i when causal, mask[j] ≠ 0), 0 elsewhere and on
// rows with no visible key.
func softmaxRef(s []float64, n, m int, mask []float32, causal bool) []float64 {
	p := make([]float64, n*m)
	for i := range n {
		mx := math.Inf(-1)
		vis := func(j int) bool { return (!causal || j <= i) && (mask == nil || mask[j] != 0) }
		for j := range m {
			if vis(j) {
				mx = math.Max(mx, s[i*m+j])
			}
		}
		if math.IsInf(mx, -1) {
			continue
		}
		z := 0.0
		for j := range m {
			if vis(j) {
				p[i*m+j] = math.Exp(s[i*m+j] - mx)
				z += p[i*m+j]
			}
		}
		for j := range m {
			p[i*m+j] /= z
		}
	}
	return p
}

// TestSoftmaxRowsAVX512 compares the row softmax at both levels, bit for
// bit, and against softmaxRef, over row lengths 1–70 (around 8, 16, 32
// and 64 lanes), with and without a mask (some wholly masked) and causal
// rows.
func TestSoftmaxRowsAVX512(t *testing.T) {
	needAVX512(t)
	rng := rand.New(rand.NewPCG(3, 5))
	for m := 1; m <= 70; m++ {
		for _, n := range []int{1, 3, 17} {
			for c := range 4 {
				causal := c&1 != 0
				var mask []float32
				if c&2 != 0 {
					mask = randMask(rng, m, m%7 == 0)
				}
				s := to32(normal(3)(rng, []int{n * m}))
				a, b := append([]float32(nil), s...), append([]float32(nil), s...)
				if !softmaxRows32At(1, a, n, m, mask, causal) || !softmaxRows32At(2, b, n, m, mask, causal) {
					t.Fatal("softmax kernel did not run")
				}
				what := fmt.Sprintf("n=%d m=%d causal=%v mask=%v", n, m, causal, mask != nil)
				sameBits(t, what, a, b)
				want := softmaxRef(to64(s), n, m, mask, causal)
				tol := make([]float64, len(want))
				for i, w := range want {
					// exp_le0's relative error below 3e-7, the sum's and
					// the quotient's rounding
					tol[i] = 1e-6*w + 1e-9
				}
				within(t, what, b, want, tol)
			}
		}
	}
	// A NaN score at a visible key makes the row NaN on both levels; at a
	// masked key it is ignored.
	s := []float32{1, float32(math.NaN()), 2, 3, 0, 1, float32(math.NaN()), 2}
	mask := []float32{1, 1, 1, 1, 1, 1, 0, 1}
	a, b := append([]float32(nil), s...), append([]float32(nil), s...)
	softmaxRows32At(1, a, 2, 4, mask[:4], false)
	softmaxRows32At(2, b, 2, 4, mask[:4], false)
	for i := range 4 {
		if !math.IsNaN(float64(a[i])) || !math.IsNaN(float64(b[i])) {
			t.Fatalf("row with a visible NaN: %v (AVX2), %v (AVX-512)", a[:4], b[:4])
		}
	}
	a, b = append([]float32(nil), s[4:]...), append([]float32(nil), s[4:]...)
	softmaxRows32At(1, a, 1, 4, mask[4:], false)
	softmaxRows32At(2, b, 1, 4, mask[4:], false)
	sameBits(t, "masked NaN", a, b)
	if b[2] != 0 || math.IsNaN(float64(b[0])) {
		t.Fatalf("row with a masked NaN: %v", b)
	}
}

// attnCase is one attention head problem: n queries, m keys, widths d
// and dv, inside rows of ldq, ldk, ldv, ldo values (the other heads'
// columns around it), with the options fusedattention.go passes.
type attnCase struct {
	n, m, d, dv, ldq, ldk, ldv, ldo     int
	causal, mask, drop, bias, allMasked bool
}

func (c attnCase) String() string {
	return fmt.Sprintf("n=%d m=%d d=%d dv=%d ld=%d/%d/%d/%d causal=%v mask=%v drop=%v bias=%v allMasked=%v",
		c.n, c.m, c.d, c.dv, c.ldq, c.ldk, c.ldv, c.ldo, c.causal, c.mask, c.drop, c.bias, c.allMasked)
}

// attnCases are heads of 1–40 queries and keys (and 48, 63, 64), widths
// every multiple of 8 to 64, cycling the options and strides over them.
func attnCases() []attnCase {
	var cs []attnCase
	ns := []int{1, 2, 3, 5, 7, 8, 9, 15, 16, 17, 23, 24, 31, 32, 33, 40, 48, 64}
	i := 0
	for _, n := range ns {
		for m := 1; m <= 64; m++ {
			if m > 40 && m != 48 && m != 63 && m != 64 {
				continue
			}
			m8 := (m + 7) &^ 7
			if n*m8 > 64*64 {
				continue
			}
			i++
			d, dv := 8*(1+i%8), 8*(1+(i*3+1)%8)
			if i%3 == 0 {
				d, dv = 16, 16 // the models' head width, one zmm
			}
			pad := 8 * (i % 3)
			c := attnCase{n: n, m: m, d: d, dv: dv, ldq: d + pad, ldk: d + pad + 8*(i%2), ldv: dv + pad, ldo: dv + 2*pad,
				causal: i%4 == 1, mask: i%5 < 2, drop: i%3 == 2, bias: i%7 < 3, allMasked: i%23 == 0}
			cs = append(cs, c)
		}
	}
	return cs
}

// attnData are one head's inputs, filled with sentinels past each row's
// width so that a write outside the head shows.
type attnData struct {
	q, k, v, g, mask, drop, bias []float32
}

func newAttnData(rng *rand.Rand, c attnCase) attnData {
	var a attnData
	a.q = to32(normal(1)(rng, []int{c.n * c.ldq}))
	a.k = to32(normal(1)(rng, []int{c.m * c.ldk}))
	a.v = to32(normal(1)(rng, []int{c.m * c.ldv}))
	a.g = to32(normal(1)(rng, []int{c.n * c.ldv}))
	if c.mask {
		a.mask = randMask(rng, c.m, c.allMasked)
		if !c.allMasked {
			a.mask[rng.IntN(c.m)] = 1
		}
	}
	if c.drop {
		a.drop = make([]float32, c.n*c.m)
		for i := range a.drop {
			if rng.IntN(10) != 0 {
				a.drop[i] = 1 / 0.9
			}
		}
	}
	if c.bias {
		a.bias = to32(normal(2)(rng, []int{c.n * c.m}))
	}
	return a
}

// attnOut are one level's results: forward p, out; backward dq, dk, dv.
type attnOut struct{ p, out, dq, dk, dv []float32 }

const sentinel = float32(-7.25)

func filled(n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = sentinel
	}
	return v
}

// runAttn runs one head forward and backward at level (backward from the
// forward's p).
func runAttn(t *testing.T, level int, c attnCase, a attnData, scale float32) attnOut {
	t.Helper()
	o := attnOut{p: filled(c.n * c.m), out: filled(c.n * c.ldo), dq: filled(c.n * c.ldq), dk: filled(c.m * c.ldk),
		dv: filled(c.m * c.ldv)}
	var ok bool
	if a.bias != nil {
		ok = attnHeadFwdBias32At(level, a.q, c.ldq, a.k, c.ldk, a.v, c.ldv, c.n, c.m, c.d, c.dv, scale, a.mask,
			c.causal, a.bias, a.drop, o.p, o.out, c.ldo)
	} else {
		ok = attnHeadFwd32At(level, a.q, c.ldq, a.k, c.ldk, a.v, c.ldv, c.n, c.m, c.d, c.dv, scale, a.mask, c.causal,
			a.drop, o.p, o.out, c.ldo)
	}
	if !ok || !attnHeadBwd32At(level, a.q, c.ldq, a.k, c.ldk, a.v, c.ldv, a.g, c.ldv, o.p, a.drop, c.n, c.m, c.d, c.dv,
		scale, o.dq, o.dk, o.dv) {
		t.Fatalf("%v: attention kernel did not run", c)
	}
	// nothing written past a row's width
	for _, r := range []struct {
		name        string
		x           []float32
		rows, w, ld int
	}{{"out", o.out, c.n, c.dv, c.ldo}, {"dq", o.dq, c.n, c.d, c.ldq}, {"dk", o.dk, c.m, c.d, c.ldk}, {"dv", o.dv, c.m, c.dv, c.ldv}} {
		for i := range r.rows {
			for j := r.w; j < r.ld; j++ {
				if r.x[i*r.ld+j] != sentinel {
					t.Fatalf("%v level %d: %s written at row %d column %d, past its width %d", c, level, r.name, i, j, r.w)
				}
			}
		}
	}
	return o
}

// attnRef is the head in float64 from the float32 inputs: forward (p,
// out) and backward from p32 (the kernel's weights), with bounds |·| of
// each result's terms (the same formulas on absolute values) for the
// tolerances.
func attnRef(c attnCase, a attnData, scale float32, p32 []float32) (ref, bound map[string][]float64) {
	q, k, v, g := to64(a.q), to64(a.k), to64(a.v), to64(a.g)
	sc := float64(scale)
	dropAt := func(i int) float64 {
		if a.drop == nil {
			return 1
		}
		return float64(a.drop[i])
	}
	s := make([]float64, c.n*c.m)
	for i := range c.n {
		for j := range c.m {
			for t := range c.d {
				s[i*c.m+j] += q[i*c.ldq+t] * k[j*c.ldk+t]
			}
			s[i*c.m+j] *= sc
			if a.bias != nil {
				s[i*c.m+j] += float64(a.bias[i*c.m+j])
			}
		}
	}
	p := softmaxRef(s, c.n, c.m, a.mask, c.causal)
	ref, bound = map[string][]float64{"p": p}, map[string][]float64{}
	pb := make([]float64, len(p))
	for i := range pb {
		pb[i] = 1
	}
	bound["p"] = pb
	// products of the head: f(x) for values, f(|x|) for bounds
	run := func(abs bool) map[string][]float64 {
		f := func(x float64) float64 {
			if abs {
				return math.Abs(x)
			}
			return x
		}
		out := make([]float64, c.n*c.ldo)
		for i := range c.n {
			for j := range c.m {
				w := f(p[i*c.m+j] * dropAt(i*c.m+j))
				for t := range c.dv {
					out[i*c.ldo+t] += w * f(v[j*c.ldv+t])
				}
			}
		}
		dv := make([]float64, c.m*c.ldv)
		dp := make([]float64, c.n*c.m)
		for i := range c.n {
			for j := range c.m {
				pd := f(float64(p32[i*c.m+j]) * dropAt(i*c.m+j))
				for t := range c.dv {
					dv[j*c.ldv+t] += pd * f(g[i*c.ldv+t])
					dp[i*c.m+j] += f(g[i*c.ldv+t]) * f(v[j*c.ldv+t])
				}
				dp[i*c.m+j] *= f(dropAt(i*c.m + j))
			}
		}
		ds := make([]float64, c.n*c.m)
		for i := range c.n {
			dot := 0.0
			for j := range c.m {
				dot += f(float64(p32[i*c.m+j])) * dp[i*c.m+j]
			}
			for j := range c.m {
				if abs {
					ds[i*c.m+j] = f(float64(p32[i*c.m+j])) * (dp[i*c.m+j] + dot)
				} else {
					ds[i*c.m+j] = float64(p32[i*c.m+j]) * (dp[i*c.m+j] - dot)
				}
			}
		}
		dq, dk := make([]float64, c.n*c.ldq), make([]float64, c.m*c.ldk)
		for i := range c.n {
			for j := range c.m {
				for t := range c.d {
					dq[i*c.ldq+t] += ds[i*c.m+j] * f(k[j*c.ldk+t]) * f(sc)
					dk[j*c.ldk+t] += ds[i*c.m+j] * f(q[i*c.ldq+t]) * f(sc)
				}
			}
		}
		return map[string][]float64{"out": out, "dv": dv, "dq": dq, "dk": dk}
	}
	for name, x := range run(false) {
		ref[name] = x
	}
	for name, x := range run(true) {
		bound[name] = x
	}
	return ref, bound
}

// TestAttnHeadAVX512 runs every head of attnCases forward and backward at
// both levels: the same bits, nothing written past the head's columns,
// and both within float32 rounding of attnRef. The tolerances: p within
// 2e-6 (exp_le0's 3e-7 and the scores' rounding, scores of size ~3 from
// a sum of d products); every product within 64·2⁻²⁴ of the sum of its
// terms' sizes (a sum of at most 64 terms rounds by at most 64 units of
// its terms' sizes), doubled for dS's extra rounding, plus the weights'
// error times the values they weigh.
func TestAttnHeadAVX512(t *testing.T) {
	needAVX512(t)
	rng := rand.New(rand.NewPCG(21, 8))
	cases := attnCases()
	for _, c := range cases {
		a := newAttnData(rng, c)
		scale := float32(1 / math.Sqrt(float64(c.d)))
		o1 := runAttn(t, 1, c, a, scale)
		o2 := runAttn(t, 2, c, a, scale)
		what := c.String()
		sameBits(t, what+" p", o1.p, o2.p)
		sameBits(t, what+" out", o1.out, o2.out)
		sameBits(t, what+" dq", o1.dq, o2.dq)
		sameBits(t, what+" dk", o1.dk, o2.dk)
		sameBits(t, what+" dv", o1.dv, o2.dv)
		ref, bound := attnRef(c, a, scale, o2.p)
		tol := func(name string, units float64) []float64 {
			b := make([]float64, len(bound[name]))
			for i, x := range bound[name] {
				b[i] = units*64*0x1p-24*x + 1e-30
			}
			return b
		}
		within(t, what+" p", o2.p, ref["p"], tol("p", 2e-6/(64*0x1p-24)))
		// out also carries p's error (2e-6 on each weight) times |v|
		to := tol("out", 1)
		for i := range to {
			to[i] += 2e-6 * 4 * float64(c.m)
		}
		within(t, what+" out", keepCols(o2.out, c.n, c.dv, c.ldo), ref["out"], to)
		within(t, what+" dv", keepCols(o2.dv, c.m, c.dv, c.ldv), ref["dv"], tol("dv", 2))
		within(t, what+" dq", keepCols(o2.dq, c.n, c.d, c.ldq), ref["dq"], tol("dq", 4))
		within(t, what+" dk", keepCols(o2.dk, c.m, c.d, c.ldk), ref["dk"], tol("dk", 4))
	}
	t.Logf("%d heads bit-identical on both levels", len(cases))
}

// keepCols zeroes the columns from w on of rows strided by ld (the sentinels
// past a head's width), for comparing with a reference that holds 0 there.
func keepCols(x []float32, rows, w, ld int) []float32 {
	y := append([]float32(nil), x...)
	for i := range rows {
		for j := w; j < ld; j++ {
			y[i*ld+j] = 0
		}
	}
	return y
}

// TestSIMDThreads: heads split between workers give the bits of one
// thread running them all, at GOMAXPROCS 1 and 2 and either level (each
// head's values depend on its inputs alone).
func TestSIMDThreads(t *testing.T) {
	needAVX512(t)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	rng := rand.New(rand.NewPCG(4, 4))
	c := attnCase{n: 32, m: 16, d: 16, dv: 16, ldq: 64, ldk: 64, ldv: 64, ldo: 64, causal: true, drop: true}
	const heads = 8
	data := make([]attnData, heads)
	for h := range data {
		data[h] = newAttnData(rng, c)
	}
	var want [heads]attnOut
	for h := range heads {
		want[h] = runAttn(t, 1, c, data[h], 0.25)
	}
	for _, procs := range []int{1, 2} {
		runtime.GOMAXPROCS(procs)
		for level := 1; level <= 2; level++ {
			var got [heads]attnOut
			RunShares(2, func(w int) {
				for h := w; h < heads; h += 2 {
					got[h] = runAttn(t, level, c, data[h], 0.25)
				}
			})
			for h := range heads {
				what := fmt.Sprintf("GOMAXPROCS %d level %d head %d", procs, level, h)
				sameBits(t, what+" out", want[h].out, got[h].out)
				sameBits(t, what+" dq", want[h].dq, got[h].dq)
				sameBits(t, what+" dk", want[h].dk, got[h].dk)
				sameBits(t, what+" dv", want[h].dv, got[h].dv)
			}
		}
	}
}

// BenchmarkAttnHead512 times one head forward and backward at both levels
// at the models' shapes: the Set Transformer's ISAB (16 inducing points
// over sets of 32 and back, heads of 16) and the seq2seq decoder's causal
// self-attention with dropout (16 tokens, heads of 16), in rows of 4
// heads. Compare levels as ratios within one run.
func BenchmarkAttnHead512(b *testing.B) {
	if hasAVX2() == 0 || !hasAVX512() {
		b.Skip("no AVX-512 on this CPU")
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range []attnCase{
		{n: 16, m: 32, d: 16, dv: 16, ldq: 64, ldk: 64, ldv: 64, ldo: 64},
		{n: 32, m: 16, d: 16, dv: 16, ldq: 64, ldk: 64, ldv: 64, ldo: 64},
		{n: 16, m: 16, d: 16, dv: 16, ldq: 64, ldk: 64, ldv: 64, ldo: 64, causal: true, drop: true},
	} {
		a := newAttnData(rng, c)
		o := attnOut{p: make([]float32, c.n*c.m), out: make([]float32, c.n*c.ldo), dq: make([]float32, c.n*c.ldq),
			dk: make([]float32, c.m*c.ldk), dv: make([]float32, c.m*c.ldv)}
		for _, level := range []int{1, 2} {
			name := fmt.Sprintf("n=%d,m=%d,causal=%v/%s", c.n, c.m, c.causal, [...]string{"", "avx2", "avx512"}[level])
			b.Run("fwd/"+name, func(b *testing.B) {
				for range b.N {
					attnHeadFwd32At(level, a.q, c.ldq, a.k, c.ldk, a.v, c.ldv, c.n, c.m, c.d, c.dv, 0.25, a.mask, c.causal,
						a.drop, o.p, o.out, c.ldo)
				}
			})
			b.Run("bwd/"+name, func(b *testing.B) {
				for range b.N {
					attnHeadBwd32At(level, a.q, c.ldq, a.k, c.ldk, a.v, c.ldv, a.g, c.ldv, o.p, a.drop, c.n, c.m, c.d, c.dv,
						0.25, o.dq, o.dk, o.dv)
				}
			})
		}
	}
}

// TestAttnHeadResidual: the heads with a residual connection (res given)
// are the heads without it and then one float32 addition a value, out +=
// q in the forward and dq += G in the backward, as graph's addResidual
// adds them in Go: the same bits at both levels, and no column past the
// head's width written.
func TestAttnHeadResidual(t *testing.T) {
	needAVX512(t)
	rng := rand.New(rand.NewPCG(5, 9))
	checked := 0
	for _, c := range attnCases() {
		if c.d != c.dv || c.ldv < c.d {
			continue
		}
		a := newAttnData(rng, c)
		scale := float32(1 / math.Sqrt(float64(c.d)))
		for level := 1; level <= 2; level++ {
			want := runAttn(t, level, c, a, scale)
			for i := range c.n {
				for j := range c.d {
					want.out[i*c.ldo+j] += a.q[i*c.ldq+j]
					want.dq[i*c.ldq+j] += a.g[i*c.ldv+j]
				}
			}
			got := attnOut{p: filled(c.n * c.m), out: filled(c.n * c.ldo), dq: filled(c.n * c.ldq), dk: filled(c.m * c.ldk),
				dv: filled(c.m * c.ldv)}
			if !attnHeadFwdAt(level, a.q, c.ldq, a.k, c.ldk, a.v, c.ldv, c.n, c.m, c.d, c.dv, scale, a.mask, c.causal,
				a.bias, a.drop, got.p, got.out, c.ldo, a.q, c.ldq) ||
				!attnHeadBwdAt(level, a.q, c.ldq, a.k, c.ldk, a.v, c.ldv, a.g, c.ldv, got.p, a.drop, c.n, c.m, c.d, c.dv,
					scale, got.dq, got.dk, got.dv, a.g, c.ldv) {
				t.Fatalf("%v: residual head did not run", c)
			}
			what := fmt.Sprintf("%v level %d", c, level)
			sameBits(t, what+" p", want.p, got.p)
			sameBits(t, what+" out", want.out, got.out)
			sameBits(t, what+" dq", want.dq, got.dq)
			sameBits(t, what+" dk", want.dk, got.dk)
			sameBits(t, what+" dv", want.dv, got.dv)
			checked++
		}
	}
	t.Logf("%d heads with a residual connection checked", checked)
}
