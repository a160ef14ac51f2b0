//go:build cgo && !purego

package graph

// #cgo LDFLAGS: -lm
// void pf_attn_head_fwd_bias(const float *q, int ldq, const float *k, int ldk, const float *v, int ldv,
//                            int n, int m, int d, int dv, float scale, const float *mask, int causal,
//                            const float *bias, const float *drop, float *p, float *out, int ldo);
// void pf_weibull_log_noise(const float *u, float *b, int n, float scale);
// double pf_bayes_kl_head(const float *q, int ldq, const float *k, int ldk, int n, int m, int d, float scale,
//                         const float *mask, const float *qmask, int kind, const float *a, const float *b, float g,
//                         float *dq, float *dk, float *colsum, double *agg);
import "C"

// attnHeadFwdBias32 is attnHeadFwd32 with an additive score bias [n×m]
// (attention.c's pf_attn_head_fwd_bias): p ← softmax(q kᵀ·scale + bias)
// over the visible keys. It reports whether it ran.
func attnHeadFwdBias32(q []float32, ldq int, k []float32, ldk int, v []float32, ldv, n, m, d, dv int,
	scale float32, mask []float32, causal bool, bias, drop, p, out []float32, ldo int) bool {
	if !attnHeadOK(n, m, d, dv) || len(p) < n*m || len(bias) < n*m || (drop != nil && len(drop) < n*m) {
		return false
	}
	var mp, dp *C.float
	if mask != nil {
		mp = (*C.float)(&mask[0])
	}
	if drop != nil {
		dp = (*C.float)(&drop[0])
	}
	C.pf_attn_head_fwd_bias((*C.float)(&q[0]), C.int(ldq), (*C.float)(&k[0]), C.int(ldk), (*C.float)(&v[0]), C.int(ldv),
		C.int(n), C.int(m), C.int(d), C.int(dv), C.float(scale), mp, cbool(causal), (*C.float)(&bias[0]), dp,
		(*C.float)(&p[0]), (*C.float)(&out[0]), C.int(ldo))
	return true
}

// weibullLogNoise32 runs bayes.c's b = scale·log(−log u) and reports
// whether it did (it needs AVX2 and FMA).
func weibullLogNoise32(u, b []float32, scale float32) bool {
	if hasAVX2() == 0 || len(u) == 0 || len(b) < len(u) {
		return false
	}
	C.pf_weibull_log_noise((*C.float)(&u[0]), (*C.float)(&b[0]), C.int(len(u)), C.float(scale))
	return true
}

// klHead32 runs attention.c's pf_bayes_kl_head on one float32 head
// without a causal mask (q, k: the head's first rows, strided by ld; mask
// [m], qmask [n] or nil; a, b [m]), and reports whether it did. Without dq
// it returns the head's sum; with dq, dk, colsum [m] and agg [2] it runs
// the backward pass. See bayesKLHeadC.
func klHead32(q []float32, k []float32, ld, n, m, d int, scale float32, mask, qmask []float32, kind int,
	a, b []float32, g float32, dq, dk, colsum []float32, agg *[2]float64) (float64, bool) {
	if !attnHeadOK(n, m, d, 8) || len(a) < m || (b != nil && len(b) < m) {
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
