//go:build cgo && !purego

package kernels

// kernels.h through -I${SRCDIR} and angle brackets, as layernorm_cgo.go
// includes it: cgo compiles its probe of the C names from a file in
// $TMPDIR, where a quoted include looks first, and a stray old copy there
// would hide the heads' residual arguments.

// #cgo CFLAGS: -I${SRCDIR}
// #include <kernels.h>
import "C"

// AttnHeadOK reports whether attention.c takes a head of n queries, m
// keys and widths d, dv: d and dv multiples of 8 up to 64, any m up to 64,
// and n rows of m rounded up to 8 in its 64×64 scratch.
func AttnHeadOK(n, m, d, dv int) bool {
	m8 := (m + 7) &^ 7
	return hasAVX2() != 0 && n > 0 && m > 0 && d > 0 && dv > 0 && d%8 == 0 && dv%8 == 0 &&
		m <= 64 && d <= 64 && dv <= 64 && n*m8 <= 64*64
}

// AttnHeadFwd32 runs attention.c's forward for one head: p [n×m] gets the
// weights and out (rows strided by ldo) the readout (p ⊙ drop) v, or p v
// when drop [n×m] is nil. It reports whether it did.
func AttnHeadFwd32(q []float32, ldq int, k []float32, ldk int, v []float32, ldv, n, m, d, dv int,
	scale float32, mask []float32, causal bool, drop, p, out []float32, ldo int) bool {
	return attnHeadFwd32At(simdLevel(), q, ldq, k, ldk, v, ldv, n, m, d, dv, scale, mask, causal, drop, p, out, ldo)
}

// attnHeadFwd32At is AttnHeadFwd32 at the given simdLevel (≥ 1; the tests
// run both levels of a CPU with AVX-512).
func attnHeadFwd32At(level int, q []float32, ldq int, k []float32, ldk int, v []float32, ldv, n, m, d, dv int,
	scale float32, mask []float32, causal bool, drop, p, out []float32, ldo int) bool {
	return attnHeadFwdAt(level, q, ldq, k, ldk, v, ldv, n, m, d, dv, scale, mask, causal, nil, drop, p, out, ldo, nil, 0)
}

// AttnHeadFwdRes32 is AttnHeadFwd32, or AttnHeadFwdBias32 when bias is
// not nil, with a residual connection: after the readout, out's rows get
// res's (rows strided by ldr, dv wide) added, out[r][c] += res[r][c], one
// float32 addition each, in C while the rows are in cache. res nil adds
// nothing. It reports whether it ran.
func AttnHeadFwdRes32(q []float32, ldq int, k []float32, ldk int, v []float32, ldv, n, m, d, dv int,
	scale float32, mask []float32, causal bool, bias, drop, p, out []float32, ldo int, res []float32, ldr int) bool {
	return attnHeadFwdAt(simdLevel(), q, ldq, k, ldk, v, ldv, n, m, d, dv, scale, mask, causal, bias, drop, p, out, ldo,
		res, ldr)
}

// attnHeadFwdAt runs one head's forward at the given simdLevel (≥ 1):
// with a score bias when bias is not nil, and the residual res added to
// out when res is not nil.
func attnHeadFwdAt(level int, q []float32, ldq int, k []float32, ldk int, v []float32, ldv, n, m, d, dv int,
	scale float32, mask []float32, causal bool, bias, drop, p, out []float32, ldo int, res []float32, ldr int) bool {
	if !AttnHeadOK(n, m, d, dv) || len(p) < n*m || (bias != nil && len(bias) < n*m) ||
		(drop != nil && len(drop) < n*m) || (res != nil && len(res) < (n-1)*ldr+dv) {
		return false
	}
	var mp, bp, dp, rp *C.float
	if mask != nil {
		mp = (*C.float)(&mask[0])
	}
	if bias != nil {
		bp = (*C.float)(&bias[0])
	}
	if drop != nil {
		dp = (*C.float)(&drop[0])
	}
	if res != nil {
		rp = (*C.float)(&res[0])
	}
	qp, kp, vp, pp, op := (*C.float)(&q[0]), (*C.float)(&k[0]), (*C.float)(&v[0]), (*C.float)(&p[0]), (*C.float)(&out[0])
	switch {
	case level >= 2 && bias != nil:
		C.pf_attn_head_fwd_bias512(qp, C.int(ldq), kp, C.int(ldk), vp, C.int(ldv), C.int(n), C.int(m), C.int(d),
			C.int(dv), C.float(scale), mp, cbool(causal), bp, dp, pp, op, C.int(ldo), rp, C.int(ldr))
	case level >= 2:
		C.pf_attn_head_fwd512(qp, C.int(ldq), kp, C.int(ldk), vp, C.int(ldv), C.int(n), C.int(m), C.int(d),
			C.int(dv), C.float(scale), mp, cbool(causal), dp, pp, op, C.int(ldo), rp, C.int(ldr))
	case bias != nil:
		C.pf_attn_head_fwd_bias(qp, C.int(ldq), kp, C.int(ldk), vp, C.int(ldv), C.int(n), C.int(m), C.int(d),
			C.int(dv), C.float(scale), mp, cbool(causal), bp, dp, pp, op, C.int(ldo), rp, C.int(ldr))
	default:
		C.pf_attn_head_fwd(qp, C.int(ldq), kp, C.int(ldk), vp, C.int(ldv), C.int(n), C.int(m), C.int(d),
			C.int(dv), C.float(scale), mp, cbool(causal), dp, pp, op, C.int(ldo), rp, C.int(ldr))
	}
	return true
}

// AttnHeadBwd32 runs attention.c's backward for one head from its weights
// p [n×m] and dropout mask drop [n×m] (nil: none), writing dq, dk, dv
// (strided as q, k, v). It reports whether it did.
func AttnHeadBwd32(q []float32, ldq int, k []float32, ldk int, v []float32, ldv int, g []float32, ldg int,
	p, drop []float32, n, m, d, dv int, scale float32, dq, dk, dvv []float32) bool {
	return attnHeadBwdAt(simdLevel(), q, ldq, k, ldk, v, ldv, g, ldg, p, drop, n, m, d, dv, scale, dq, dk, dvv, nil, 0)
}

// AttnHeadBwdRes32 is AttnHeadBwd32 with a residual connection's
// gradient: after dq is written, its rows get res's (rows strided by ldr,
// d wide; the readout's gradient G) added, dq[r][c] += res[r][c], one
// float32 addition each. res nil adds nothing. It reports whether it ran.
func AttnHeadBwdRes32(q []float32, ldq int, k []float32, ldk int, v []float32, ldv int, g []float32, ldg int,
	p, drop []float32, n, m, d, dv int, scale float32, dq, dk, dvv []float32, res []float32, ldr int) bool {
	return attnHeadBwdAt(simdLevel(), q, ldq, k, ldk, v, ldv, g, ldg, p, drop, n, m, d, dv, scale, dq, dk, dvv, res, ldr)
}

// attnHeadBwd32At is AttnHeadBwd32 at the given simdLevel (≥ 1).
func attnHeadBwd32At(level int, q []float32, ldq int, k []float32, ldk int, v []float32, ldv int, g []float32,
	ldg int, p, drop []float32, n, m, d, dv int, scale float32, dq, dk, dvv []float32) bool {
	return attnHeadBwdAt(level, q, ldq, k, ldk, v, ldv, g, ldg, p, drop, n, m, d, dv, scale, dq, dk, dvv, nil, 0)
}

// attnHeadBwdAt is AttnHeadBwdRes32 at the given simdLevel (≥ 1).
func attnHeadBwdAt(level int, q []float32, ldq int, k []float32, ldk int, v []float32, ldv int, g []float32,
	ldg int, p, drop []float32, n, m, d, dv int, scale float32, dq, dk, dvv []float32, res []float32, ldr int) bool {
	if !AttnHeadOK(n, m, d, dv) || len(p) < n*m || (drop != nil && len(drop) < n*m) ||
		(res != nil && len(res) < (n-1)*ldr+d) {
		return false
	}
	var dp, rp *C.float
	if drop != nil {
		dp = (*C.float)(&drop[0])
	}
	if res != nil {
		rp = (*C.float)(&res[0])
	}
	if level >= 2 {
		C.pf_attn_head_bwd512((*C.float)(&q[0]), C.int(ldq), (*C.float)(&k[0]), C.int(ldk), (*C.float)(&v[0]), C.int(ldv),
			(*C.float)(&g[0]), C.int(ldg), (*C.float)(&p[0]), dp, C.int(n), C.int(m), C.int(d), C.int(dv), C.float(scale),
			(*C.float)(&dq[0]), (*C.float)(&dk[0]), (*C.float)(&dvv[0]), rp, C.int(ldr))
	} else {
		C.pf_attn_head_bwd((*C.float)(&q[0]), C.int(ldq), (*C.float)(&k[0]), C.int(ldk), (*C.float)(&v[0]), C.int(ldv),
			(*C.float)(&g[0]), C.int(ldg), (*C.float)(&p[0]), dp, C.int(n), C.int(m), C.int(d), C.int(dv), C.float(scale),
			(*C.float)(&dq[0]), (*C.float)(&dk[0]), (*C.float)(&dvv[0]), rp, C.int(ldr))
	}
	return true
}

// AttnHeadFwdBias32 is AttnHeadFwd32 with an additive score bias [n×m]
// (attention.c's pf_attn_head_fwd_bias): p ← softmax(q kᵀ·scale + bias)
// over the visible keys. It reports whether it ran.
func AttnHeadFwdBias32(q []float32, ldq int, k []float32, ldk int, v []float32, ldv, n, m, d, dv int,
	scale float32, mask []float32, causal bool, bias, drop, p, out []float32, ldo int) bool {
	return attnHeadFwdBias32At(simdLevel(), q, ldq, k, ldk, v, ldv, n, m, d, dv, scale, mask, causal, bias, drop, p,
		out, ldo)
}

// attnHeadFwdBias32At is AttnHeadFwdBias32 at the given simdLevel (≥ 1).
func attnHeadFwdBias32At(level int, q []float32, ldq int, k []float32, ldk int, v []float32, ldv, n, m, d, dv int,
	scale float32, mask []float32, causal bool, bias, drop, p, out []float32, ldo int) bool {
	if len(bias) < n*m {
		return false
	}
	return attnHeadFwdAt(level, q, ldq, k, ldk, v, ldv, n, m, d, dv, scale, mask, causal, bias, drop, p, out, ldo, nil, 0)
}

// KLHead32 runs attention.c's pf_bayes_kl_head on one float32 head
// without a causal mask (q, k: the head's first rows, strided by ld; mask
// [m], qmask [n] or nil; a, b [m]), and reports whether it did. Without dq
// it returns the head's sum; with dq, dk, colsum [m] and agg [2] it runs
// the backward pass. See bayesKLHeadC.
func KLHead32(q []float32, k []float32, ld, n, m, d int, scale float32, mask, qmask []float32, kind int,
	a, b []float32, g float32, dq, dk, colsum []float32, agg *[2]float64) (float64, bool) {
	if !AttnHeadOK(n, m, d, 8) || len(a) < m || (b != nil && len(b) < m) {
		return 0, false
	}
	var mp, qp, bp, dqp, dkp, csp *C.float
	if mask != nil {
		mp = (*C.float)(&mask[0])
	}
	if qmask != nil {
		qp = (*C.float)(&qmask[0])
	}
	if b != nil {
		bp = (*C.float)(&b[0])
	}
	if dq != nil {
		dqp, dkp, csp = (*C.float)(&dq[0]), (*C.float)(&dk[0]), (*C.float)(&colsum[0])
	}
	r := C.pf_bayes_kl_head((*C.float)(&q[0]), C.int(ld), (*C.float)(&k[0]), C.int(ld), C.int(n), C.int(m), C.int(d),
		C.float(scale), mp, qp, C.int(kind), (*C.float)(&a[0]), bp, C.float(g), dqp, dkp, csp, (*C.double)(&agg[0]))
	return float64(r), true
}

// PriorHead32 runs attention.c's pf_prior_head (see there) on one head:
// rows = B·M rows of k, hidden width padded to 16 in w1 [d×16], w1t
// [16×d], b1, w2 [16]; c or gc laid out [B, ·, M] with rows of examples
// ldc apart; scratch [rows×16]. With gc it writes dk, dw1 [d×16], db1,
// dw2 [16] and db2 [1]. It reports whether it ran (AVX2 and FMA, d a
// multiple of 8 up to 64).
func PriorHead32(k []float32, ldk, rows, m, d int, w1, w1t, b1, w2 []float32, b2 float32, c, gc []float32, ldc int,
	scratch, dk, dw1, db1, dw2, db2 []float32) bool {
	if hasAVX2() == 0 || d%8 != 0 || d > 64 || rows == 0 || len(scratch) < rows*16 {
		return false
	}
	if gc == nil {
		C.pf_prior_head((*C.float)(&k[0]), C.int(ldk), C.int(rows), C.int(m), C.int(d), (*C.float)(&w1[0]),
			(*C.float)(&w1t[0]), (*C.float)(&b1[0]), (*C.float)(&w2[0]), C.float(b2), (*C.float)(&c[0]), nil, C.int(ldc),
			(*C.float)(&scratch[0]), nil, nil, nil, nil, nil)
		return true
	}
	C.pf_prior_head((*C.float)(&k[0]), C.int(ldk), C.int(rows), C.int(m), C.int(d), (*C.float)(&w1[0]),
		(*C.float)(&w1t[0]), (*C.float)(&b1[0]), (*C.float)(&w2[0]), C.float(b2), nil, (*C.float)(&gc[0]), C.int(ldc),
		(*C.float)(&scratch[0]), (*C.float)(&dk[0]), (*C.float)(&dw1[0]), (*C.float)(&db1[0]), (*C.float)(&dw2[0]),
		(*C.float)(&db2[0]))
	return true
}

// SampleHeadFits reports whether attention.c takes a Bayesian attention
// head of these sizes.
func SampleHeadFits(n, m, d, dv int) bool { return AttnHeadOK(n, m, d, dv) }

// BayesHead32 runs attention.c's pf_bayes_head on one float32 head
// without a causal mask (q, k, v, out: the head's first rows, q and k
// strided by ld, v and out by ldv; mask [m], qmask [n] or nil; net the
// head's prior network or nil; noise, p, x [n×m]; dc [m]; kc the
// settings, see there). It reports whether it ran, and returns the head's
// Σ KL_ij.
func BayesHead32(q []float32, ld int, k, v []float32, ldv, n, m, d, dv int, scale float32, mask, qmask, noise []float32,
	net *PriorNet32, kc *[7]float64, p, x, out, dc []float32) (float64, bool) {
	return bayesHead32At(simdLevel(), q, ld, k, v, ldv, n, m, d, dv, scale, mask, qmask, noise, net, kc, p, x, out, dc)
}

// bayesHead32At is BayesHead32 at the given simdLevel (≥ 1; the tests run
// both levels of a CPU with AVX-512 and compare the bits).
func bayesHead32At(level int, q []float32, ld int, k, v []float32, ldv, n, m, d, dv int, scale float32, mask, qmask,
	noise []float32, net *PriorNet32, kc *[7]float64, p, x, out, dc []float32) (float64, bool) {
	if !AttnHeadOK(n, m, d, dv) || len(noise) < n*m || len(p) < n*m || len(x) < n*m || (net != nil && len(dc) < m) {
		return 0, false
	}
	var mp, qp, w1, b1, w2, dcp *C.float
	var b2 C.float
	if mask != nil {
		mp = (*C.float)(&mask[0])
	}
	if qmask != nil {
		qp = (*C.float)(&qmask[0])
	}
	if net != nil {
		w1, b1, w2, b2, dcp = (*C.float)(&net.W1[0]), (*C.float)(&net.B1[0]), (*C.float)(&net.W2[0]), C.float(net.B2), (*C.float)(&dc[0])
	}
	var sum C.double
	ran := C.pf_bayes_head(C.int(level), (*C.float)(&q[0]), C.int(ld), (*C.float)(&k[0]), C.int(ld), (*C.float)(&v[0]), C.int(ldv),
		C.int(n), C.int(m), C.int(d), C.int(dv), C.float(scale), mp, qp, (*C.float)(&noise[0]), w1, b1, w2, b2,
		(*C.double)(&kc[0]), (*C.float)(&p[0]), (*C.float)(&x[0]), (*C.float)(&out[0]), C.int(ldv), dcp, &sum)
	return float64(sum), ran != 0
}

// BayesHeads32 runs BayesHead32 on the h ≤ 32 heads of one batch element
// in one call (attention.c's pf_bayes_heads): q, k, v and out are the
// element's rows (head hh at columns hh·d, or hh·dv), noise, p and x its
// heads' [h·n×m], dc [h·m]; pad holds the heads' prior networks, padSize
// apart, each W1 [d×16], W1ᵀ [16×d], B1 and W2 [16] (graph's priorPad),
// and b2 [h] their B2, or pad is nil; sums [h] gets each head's Σ KL_ij.
// It returns the bit mask of the heads it did not run (BayesHead32's
// false), and ok false when it ran nothing.
func BayesHeads32(h int, q []float32, ld int, k, v []float32, ldv, n, m, d, dv int, scale float32, mask, qmask,
	noise, pad []float32, padSize int, b2 []float32, kc *[7]float64, p, x, out, dc []float32, sums []float64) (uint32, bool) {
	return bayesHeads32At(simdLevel(), h, q, ld, k, v, ldv, n, m, d, dv, scale, mask, qmask, noise, pad, padSize, b2, kc,
		p, x, out, dc, sums)
}

// bayesHeads32At is BayesHeads32 at the given simdLevel (≥ 1).
func bayesHeads32At(level, h int, q []float32, ld int, k, v []float32, ldv, n, m, d, dv int, scale float32, mask, qmask,
	noise, pad []float32, padSize int, b2 []float32, kc *[7]float64, p, x, out, dc []float32, sums []float64) (uint32, bool) {
	hm := h * n * m
	if h < 1 || h > 32 || !AttnHeadOK(n, m, d, dv) || len(noise) < hm || len(p) < hm || len(x) < hm || len(sums) < h ||
		len(q) < (n-1)*ld+h*d || len(k) < (m-1)*ld+h*d || len(v) < (m-1)*ldv+h*dv || len(out) < (n-1)*ldv+h*dv ||
		(mask != nil && len(mask) < m) || (qmask != nil && len(qmask) < n) ||
		(pad != nil && (padSize < 32*d+32 || len(pad) < h*padSize || len(b2) < h || len(dc) < h*m)) {
		return 0, false
	}
	var mp, qp, pp, b2p, dcp *C.float
	if mask != nil {
		mp = (*C.float)(&mask[0])
	}
	if qmask != nil {
		qp = (*C.float)(&qmask[0])
	}
	if pad != nil {
		pp, b2p, dcp = (*C.float)(&pad[0]), (*C.float)(&b2[0]), (*C.float)(&dc[0])
	}
	skipped := C.pf_bayes_heads(C.int(level), C.int(h), (*C.float)(&q[0]), C.int(ld), (*C.float)(&k[0]), C.int(ld),
		(*C.float)(&v[0]), C.int(ldv), C.int(n), C.int(m), C.int(d), C.int(dv), C.float(scale), mp, qp,
		(*C.float)(&noise[0]), pp, C.int(padSize), b2p, (*C.double)(&kc[0]), (*C.float)(&p[0]), (*C.float)(&x[0]),
		(*C.float)(&out[0]), C.int(ldv), dcp, (*C.double)(&sums[0]))
	return uint32(skipped), true
}

// BayesHeadBwd32 runs attention.c's pf_bayes_head_bwd on one float32
// head: attention's backward pass from the weights p [n×m] and the
// readout's gradient g (strided as v), with gx·x [n×m] added to dS, and
// with net the prior network's from dc [m], its parameters' gradients
// into pg [16·d + 33] (dW1 [d×16], db1, dw2 [16], db2). It reports whether
// it did.
func BayesHeadBwd32(q []float32, ld int, k, v []float32, ldv int, g, p, x []float32, n, m, d, dv int, scale, gx float32,
	dq, dk, dvv []float32, net *PriorNet32, dc, pg []float32) bool {
	return bayesHeadBwd32At(simdLevel(), q, ld, k, v, ldv, g, p, x, n, m, d, dv, scale, gx, dq, dk, dvv, net, dc, pg)
}

// BayesHeadsBwd32 runs BayesHeadBwdPart32 on the h heads of one batch
// element in one call (attention.c's pf_bayes_heads_bwd): q, k, v, g and
// the gradients dq, dk, dvv are the element's rows (head hh at columns
// hh·d, or hh·dv; g and dvv strided as v, dq and dk as q), p and x its
// heads' [h·n×m]; with pad (BayesHeads32's layout) the prior networks'
// gradients from xc [h·m] and gd go to part [h·np] in graph's layout for
// the hidden width r, pg [16·d + 33] their scratch. Each head's values are
// BayesHeadBwdPart32's. It reports whether it ran.
func BayesHeadsBwd32(h int, q []float32, ld int, k, v []float32, ldv int, g, p, x []float32, n, m, d, dv int,
	scale, gx float32, dq, dk, dvv, pad []float32, padSize int, xc []float32, gd float64, part []float64, np, r int,
	pg []float32) bool {
	return bayesHeadsBwd32At(simdLevel(), h, q, ld, k, v, ldv, g, p, x, n, m, d, dv, scale, gx, dq, dk, dvv, pad, padSize,
		xc, gd, part, np, r, pg)
}

// bayesHeadsBwd32At is BayesHeadsBwd32 at the given simdLevel (≥ 1).
func bayesHeadsBwd32At(level, h int, q []float32, ld int, k, v []float32, ldv int, g, p, x []float32, n, m, d, dv int,
	scale, gx float32, dq, dk, dvv, pad []float32, padSize int, xc []float32, gd float64, part []float64, np, r int,
	pg []float32) bool {
	hm := h * n * m
	rows := max(n, m)
	if h < 1 || !AttnHeadOK(n, m, d, dv) || len(p) < hm || len(x) < hm || len(q) < (n-1)*ld+h*d ||
		len(k) < (m-1)*ld+h*d || len(v) < (m-1)*ldv+h*dv || len(g) < (n-1)*ldv+h*dv || len(dq) < (n-1)*ld+h*d ||
		len(dk) < (m-1)*ld+h*d || len(dvv) < (m-1)*ldv+h*dv || rows < 1 ||
		(pad != nil && (padSize < 32*d+32 || len(pad) < h*padSize || len(xc) < h*m || r < 1 || r > 16 ||
			np < d*r+2*r+1 || len(part) < h*np || len(pg) < 16*d+33)) {
		return false
	}
	var pp, xcp, pgp *C.float
	var partp *C.double
	if pad != nil {
		pp, xcp, pgp, partp = (*C.float)(&pad[0]), (*C.float)(&xc[0]), (*C.float)(&pg[0]), (*C.double)(&part[0])
	}
	C.pf_bayes_heads_bwd(C.int(level), C.int(h), (*C.float)(&q[0]), C.int(ld), (*C.float)(&k[0]), C.int(ld),
		(*C.float)(&v[0]), C.int(ldv), (*C.float)(&g[0]), C.int(ldv), (*C.float)(&p[0]), C.int(n), C.int(m), C.int(d),
		C.int(dv), C.float(scale), (*C.float)(&x[0]), C.float(gx), (*C.float)(&dq[0]), (*C.float)(&dk[0]),
		(*C.float)(&dvv[0]), pp, C.int(padSize), xcp, C.double(gd), partp, C.int(np), C.int(r), pgp)
	return true
}

// bayesHeadBwd32At is BayesHeadBwd32 at the given simdLevel (≥ 1).
func bayesHeadBwd32At(level int, q []float32, ld int, k, v []float32, ldv int, g, p, x []float32, n, m, d, dv int,
	scale, gx float32, dq, dk, dvv []float32, net *PriorNet32, dc, pg []float32) bool {
	if net != nil && len(dc) < m {
		return false
	}
	return bayesHeadBwdPart32At(level, q, ld, k, v, ldv, g, p, x, n, m, d, dv, scale, gx, dq, dk, dvv, net, dc, nil, 0,
		nil, 0, pg)
}

// BayesHeadBwdPart32 is BayesHeadBwd32 with the work graph does around
// each head in C: with net, dc [m] is xc [m] (the KL's saved unit
// gradients) times g, each product in float64 rounded to float32 (graph's
// T(g·float64(xc_j))), and the prior network's gradients also go to part
// [d·r + 2r + 1] in graph's layout for a hidden width r ≤ 16 (dW1 [d×r],
// db1 [r], dw2 [r], db2, converted to float64, exact). The same values
// bit for bit as BayesHeadBwd32 and graph's loops.
func BayesHeadBwdPart32(q []float32, ld int, k, v []float32, ldv int, g, p, x []float32, n, m, d, dv int, scale,
	gx float32, dq, dk, dvv []float32, net *PriorNet32, xc []float32, gd float64, part []float64, r int, pg []float32) bool {
	if net != nil && (len(xc) < m || r < 1 || r > 16 || len(part) < d*r+2*r+1) {
		return false
	}
	return bayesHeadBwdPart32At(simdLevel(), q, ld, k, v, ldv, g, p, x, n, m, d, dv, scale, gx, dq, dk, dvv, net, nil,
		xc, gd, part, r, pg)
}

// bayesHeadBwdPart32At is the call to pf_bayes_head_bwd at simdLevel
// level (≥ 1), with net dc [m] or else xc and gd, and part or nil; the
// callers have checked dc, xc and part.
func bayesHeadBwdPart32At(level int, q []float32, ld int, k, v []float32, ldv int, g, p, x []float32, n, m, d, dv int,
	scale, gx float32, dq, dk, dvv []float32, net *PriorNet32, dc, xc []float32, gd float64, part []float64, r int,
	pg []float32) bool {
	if !AttnHeadOK(n, m, d, dv) || len(p) < n*m || len(x) < n*m || (net != nil && len(pg) < 16*d+33) {
		return false
	}
	var w1, w1t, b1, w2, dcp, xcp, dw1, db1, dw2, db2 *C.float
	var pp *C.double
	if net != nil {
		w1, w1t, b1, w2 = (*C.float)(&net.W1[0]), (*C.float)(&net.W1t[0]), (*C.float)(&net.B1[0]), (*C.float)(&net.W2[0])
		dw1, db1, dw2, db2 = (*C.float)(&pg[0]), (*C.float)(&pg[16*d]), (*C.float)(&pg[16*d+16]), (*C.float)(&pg[16*d+32])
		if dc != nil {
			dcp = (*C.float)(&dc[0])
		} else {
			xcp = (*C.float)(&xc[0])
		}
		if part != nil {
			pp = (*C.double)(&part[0])
		}
	}
	C.pf_bayes_head_bwd(C.int(level), (*C.float)(&q[0]), C.int(ld), (*C.float)(&k[0]), C.int(ld), (*C.float)(&v[0]), C.int(ldv),
		(*C.float)(&g[0]), C.int(ldv), (*C.float)(&p[0]), C.int(n), C.int(m), C.int(d), C.int(dv), C.float(scale),
		(*C.float)(&x[0]), C.float(gx), (*C.float)(&dq[0]), (*C.float)(&dk[0]), (*C.float)(&dvv[0]),
		w1, w1t, b1, w2, dcp, dw1, db1, dw2, db2, xcp, C.double(gd), pp, C.int(r))
	return true
}

// attnHeadsFwdAt runs, at simdLevel level (≥ 1), the forward pass of
// the heads of batch elements bi = b0, b0+bstep, … < a.B, all a.H heads
// of each, in one call to C (pf_attn_heads_fwd): each head as
// AttnHeadFwdRes32 runs it, so the same values bit for bit. out
// [B, N, H·DV] gets the readouts. It reports whether it ran; it runs
// nothing when it does not (a size attention.c does not take, or
// operands too short). graph runs the heads through AttnHeadsFwdShared32;
// this fixed split is the tests' one-worker reference.
func attnHeadsFwdAt(level int, a *AttnBatch32, out []float32, b0, bstep int) bool {
	pstride, ok := a.fits(out, false)
	if !ok || b0 < 0 || bstep < 1 {
		return false
	}
	if b0 >= a.B {
		return true
	}
	var mp, bp, dp *C.float
	if a.Mask != nil {
		mp = (*C.float)(&a.Mask[0])
	}
	if a.Bias != nil {
		bp = (*C.float)(&a.Bias[0])
	}
	if a.Drop != nil {
		dp = (*C.float)(&a.Drop[0])
	}
	C.pf_attn_heads_fwd(C.int(level), (*C.float)(&a.Q[0]), C.int(a.LdQ), (*C.float)(&a.K[0]), C.int(a.LdK),
		(*C.float)(&a.V[0]), C.int(a.LdV), C.int(b0), C.int(bstep), C.int(a.B), C.int(a.H), C.int(a.N), C.int(a.M),
		C.int(a.D), C.int(a.DV), C.float(a.Scale), mp, cbool(a.Causal), bp, dp, (*C.float)(&a.P[0]), C.int(pstride),
		(*C.float)(&out[0]), C.int(a.H*a.DV), cbool(a.Residual))
	return true
}

// AttnHeadsFwdShared32 runs the forward pass of all of a's heads, each
// head as AttnHeadFwdRes32 runs it, so the same values bit for bit,
// without a cgo call a head, on up to workers threads (the caller and the
// pool's helpers) in one cgo call (pf_pool_attn): the threads take whole
// batch elements from a shared counter until none is left, so a helper
// that starts late or is preempted on a shared machine leaves its
// elements to the caller rather than a fixed share the caller waits for.
// Each element's values depend on its inputs alone, so they are
// the same whoever runs it. out [B, N, H·DV] gets the readouts. a.P holds every head's weights
// [B·H·N·M] or, when none are saved, a scratch of N·M for each worker
// [workers·N·M]. It reports whether it ran; it runs nothing when it does
// not (a size attention.c does not take, or operands too short).
func AttnHeadsFwdShared32(a *AttnBatch32, out []float32, workers int) bool {
	return attnHeadsShared(simdLevel(), false, a, out, nil, nil, nil, workers)
}

// AttnHeadsBwdShared32 runs the backward pass of all of a's heads, from
// the saved weights a.P [B·H·N·M] and the readout's gradient g
// [B, N, H·DV]: dq, dk, dv laid out as Q, K, V (the same offsets and
// strides), each head as AttnHeadBwdRes32 computes it (a.Bias is not
// read: the weights already hold it), on up to workers threads taking
// whole batch elements from a shared counter, as AttnHeadsFwdShared32
// does. It reports whether it ran.
func AttnHeadsBwdShared32(a *AttnBatch32, g, dq, dk, dv []float32, workers int) bool {
	return attnHeadsShared(simdLevel(), true, a, g, dq, dk, dv, workers)
}

// attnHeadsShared is AttnHeadsFwdShared32 (bwd false, x the readout) or
// AttnHeadsBwdShared32 (x the readout's gradient) at the given simdLevel
// (≥ 1).
func attnHeadsShared(level int, bwd bool, a *AttnBatch32, x, dq, dk, dv []float32, workers int) bool {
	workers = max(1, min(workers, a.B))
	pstride, ok := a.fitsShared(x, bwd, workers)
	if !ok || bwd && (len(dq) < len(a.Q) || len(dk) < len(a.K) || len(dv) < len(a.V)) {
		return false
	}
	nh := poolHelpers(workers)
	var mp, bp, dp, dqp, dkp, dvp *C.float
	if a.Mask != nil && !bwd {
		mp = (*C.float)(&a.Mask[0])
	}
	if a.Bias != nil && !bwd {
		bp = (*C.float)(&a.Bias[0])
	}
	if a.Drop != nil {
		dp = (*C.float)(&a.Drop[0])
	}
	if bwd {
		dqp, dkp, dvp = (*C.float)(&dq[0]), (*C.float)(&dk[0]), (*C.float)(&dv[0])
	}
	ld := C.int(a.H * a.DV) // the readout's and its gradient's row stride
	C.pf_pool_attn(C.int(workers), C.int(nh), cbool(bwd), C.int(level), (*C.float)(&a.Q[0]), C.int(a.LdQ),
		(*C.float)(&a.K[0]), C.int(a.LdK), (*C.float)(&a.V[0]), C.int(a.LdV), (*C.float)(&x[0]), ld, C.int(a.B),
		C.int(a.H), C.int(a.N), C.int(a.M), C.int(a.D), C.int(a.DV), C.float(a.Scale), mp, cbool(a.Causal), bp, dp,
		(*C.float)(&a.P[0]), C.int(pstride), (*C.float)(&x[0]), ld, dqp, dkp, dvp, cbool(a.Residual))
	return true
}

// attnHeadsBwdAt runs, at simdLevel level (≥ 1), the backward pass of
// the heads of batch elements bi = b0, b0+bstep, … < a.B, all a.H heads
// of each, in one call to C (pf_attn_heads_bwd), from the saved weights
// a.P [B·H·N·M] and the readout's gradient g [B, N, H·DV]: dq, dk, dv
// laid out as Q, K, V (the same offsets and strides), each head as
// AttnHeadBwdRes32 computes it. a.Bias is not read (the weights already
// hold it). It reports whether it ran; it runs nothing when it does not.
// graph runs the heads through AttnHeadsBwdShared32; this fixed split is
// the tests' one-worker reference.
func attnHeadsBwdAt(level int, a *AttnBatch32, g, dq, dk, dv []float32, b0, bstep int) bool {
	_, ok := a.fits(g, true)
	if !ok || b0 < 0 || bstep < 1 || len(dq) < len(a.Q) || len(dk) < len(a.K) || len(dv) < len(a.V) {
		return false
	}
	if b0 >= a.B {
		return true
	}
	var dp *C.float
	if a.Drop != nil {
		dp = (*C.float)(&a.Drop[0])
	}
	C.pf_attn_heads_bwd(C.int(level), (*C.float)(&a.Q[0]), C.int(a.LdQ), (*C.float)(&a.K[0]), C.int(a.LdK),
		(*C.float)(&a.V[0]), C.int(a.LdV), (*C.float)(&g[0]), C.int(a.H*a.DV), (*C.float)(&a.P[0]), dp, C.int(b0),
		C.int(bstep), C.int(a.B), C.int(a.H), C.int(a.N), C.int(a.M), C.int(a.D), C.int(a.DV), C.float(a.Scale),
		(*C.float)(&dq[0]), (*C.float)(&dk[0]), (*C.float)(&dv[0]), cbool(a.Residual))
	return true
}

// BayesForwardPass32 runs the forward pass of every head of p, each
// element's heads as BayesHeads32 runs them (so the same values), on up
// to workers threads (the caller and the pool's helpers) in one cgo call
// (pf_pool_bayes): the threads take whole batch elements from a shared
// counter. It reports whether it ran; it runs nothing where attention.c
// does not take the heads or a slice is too short.
func BayesForwardPass32(p *BayesPass32, workers int) bool {
	return bayesPass32(simdLevel(), p, false, workers)
}

// BayesBackwardPass32 runs the backward pass of every head of p, each
// element's heads as BayesHeadsBwd32 runs them, shared as
// BayesForwardPass32 shares them.
func BayesBackwardPass32(p *BayesPass32, workers int) bool {
	return bayesPass32(simdLevel(), p, true, workers)
}

func bayesPass32(level int, p *BayesPass32, bwd bool, workers int) bool {
	if !p.fits(bwd) {
		return false
	}
	workers = max(1, min(workers, p.B))
	nh := poolHelpers(workers)
	pgsize := 16*p.D + 33
	if p.Pad != nil && len(p.PG) < workers*pgsize {
		p.PG = make([]float32, workers*pgsize)
	}
	dims := [12]C.int{C.int(level), C.int(p.B), C.int(p.H), C.int(p.N), C.int(p.M), C.int(p.D), C.int(p.Dv),
		C.int(p.H * p.D), C.int(p.H * p.Dv), C.int(p.PadSize), C.int(p.NP), C.int(p.R)}
	fl := [2]C.float{C.float(p.Scale), C.float(p.Gx)}
	var kc, sums, part *C.double
	var skipped *C.unsigned
	if bwd {
		if p.Pad != nil {
			part = (*C.double)(&p.Part[0])
		}
	} else {
		kc, sums, skipped = (*C.double)(&p.KC[0]), (*C.double)(&p.Sums[0]), (*C.unsigned)(&p.Skipped[0])
	}
	var pad, b2, dc, xc, pg *C.float
	if p.Pad != nil {
		pad, pg = cptr(p.Pad), cptr(p.PG)
		if bwd {
			xc = cptr(p.XC)
		} else {
			b2, dc = cptr(p.B2), cptr(p.DC)
		}
	}
	C.pf_pool_bayes(C.int(workers), C.int(nh), cbool(bwd), &dims[0], &fl[0], C.double(p.Gd), C.long(pgsize),
		cptr(p.Q), cptr(p.K), cptr(p.V), cptr(p.G), cptr(p.Mask), cptr(p.QMask), cptr(p.Noise), pad, b2, xc, kc,
		cptr(p.P), cptr(p.X), cptr(p.Out), dc, cptr(p.DQ), cptr(p.DK), cptr(p.DV), pg, sums, part, skipped)
	return true
}
