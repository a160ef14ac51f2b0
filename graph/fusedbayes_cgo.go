//go:build cgo && !purego

package graph

// void pf_attn_head_fwd_bias(const float *q, int ldq, const float *k, int ldk, const float *v, int ldv,
//                            int n, int m, int d, int dv, float scale, const float *mask, int causal,
//                            const float *bias, const float *drop, float *p, float *out, int ldo);
// void pf_weibull_log_noise(const float *u, float *b, int n, float scale);
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
