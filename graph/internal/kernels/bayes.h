// log_pos, log_fast and the Weibull noise term (log_fast512 and
// weibull_bias_fast512 their 16-lane twins, lane for lane the same
// values), shared by bayes.c and attention.c (Bayesian attention's
// Weibull noise, fusedbayes.go).
#ifndef PF_BAYES_H
#define PF_BAYES_H
#include <math.h>
#include <immintrin.h>

// log_pos is log x for finite x > 0 (normal or not), to about 1 ulp: x =
// 2^e·m with m in [√½, √2), and log m from Cephes' logf polynomial in
// t = m − 1, so that x near 1 keeps its full relative accuracy. x = 0
// gives −∞, x < 0 and NaN give NaN, +∞ gives +∞.
__attribute__((target("avx2,fma")))
static inline __m256 log_pos(__m256 x) {
	const __m256 one = _mm256_set1_ps(1.0f), zero = _mm256_setzero_ps();
	// subnormals: scale by 2^23 first and take 23 off the exponent
	__m256 tiny = _mm256_cmp_ps(x, _mm256_set1_ps(1.17549435e-38f), _CMP_LT_OQ);
	__m256 xs = _mm256_blendv_ps(x, _mm256_mul_ps(x, _mm256_set1_ps(8388608.0f)), tiny);
	__m256 eoff = _mm256_and_ps(tiny, _mm256_set1_ps(23.0f));
	__m256i xi = _mm256_castps_si256(xs);
	__m256i ei = _mm256_sub_epi32(_mm256_srli_epi32(xi, 23), _mm256_set1_epi32(126));
	// m in [0.5, 1)
	__m256 m = _mm256_castsi256_ps(_mm256_or_si256(_mm256_and_si256(xi, _mm256_set1_epi32(0x007fffff)),
	                                               _mm256_set1_epi32(0x3f000000)));
	__m256 e = _mm256_sub_ps(_mm256_cvtepi32_ps(ei), eoff);
	// m < √½: use 2m − 1 and e − 1, so that t lies in [√½ − 1, √2 − 1)
	__m256 small = _mm256_cmp_ps(m, _mm256_set1_ps(0.707106781186547524f), _CMP_LT_OQ);
	__m256 t = _mm256_sub_ps(_mm256_add_ps(m, _mm256_and_ps(small, m)), one);
	e = _mm256_sub_ps(e, _mm256_and_ps(small, one));
	__m256 z = _mm256_mul_ps(t, t);
	__m256 y = _mm256_set1_ps(7.0376836292e-2f);
	y = _mm256_fmadd_ps(y, t, _mm256_set1_ps(-1.1514610310e-1f));
	y = _mm256_fmadd_ps(y, t, _mm256_set1_ps(1.1676998740e-1f));
	y = _mm256_fmadd_ps(y, t, _mm256_set1_ps(-1.2420140846e-1f));
	y = _mm256_fmadd_ps(y, t, _mm256_set1_ps(1.4249322787e-1f));
	y = _mm256_fmadd_ps(y, t, _mm256_set1_ps(-1.6668057665e-1f));
	y = _mm256_fmadd_ps(y, t, _mm256_set1_ps(2.0000714765e-1f));
	y = _mm256_fmadd_ps(y, t, _mm256_set1_ps(-2.4999993993e-1f));
	y = _mm256_fmadd_ps(y, t, _mm256_set1_ps(3.3333331174e-1f));
	y = _mm256_mul_ps(_mm256_mul_ps(y, t), z);
	y = _mm256_fmadd_ps(e, _mm256_set1_ps(-2.12194440e-4f), y);
	y = _mm256_fnmadd_ps(_mm256_set1_ps(0.5f), z, y);
	__m256 r = _mm256_add_ps(t, y);
	r = _mm256_fmadd_ps(e, _mm256_set1_ps(0.693359375f), r);
	// the special values
	r = _mm256_blendv_ps(r, _mm256_set1_ps(-INFINITY), _mm256_cmp_ps(x, zero, _CMP_EQ_OQ));
	r = _mm256_blendv_ps(r, _mm256_set1_ps(INFINITY), _mm256_cmp_ps(x, _mm256_set1_ps(INFINITY), _CMP_EQ_OQ));
	r = _mm256_blendv_ps(r, _mm256_set1_ps(NAN), _mm256_cmp_ps(x, zero, _CMP_NGE_UQ)); // x < 0 or NaN
	return r;
}

// weibull_bias is scale · log(−log u) lane by lane: the log of a
// Weibull(1/scale, 1) draw from a uniform one (u = 1 gives −∞).
__attribute__((target("avx2,fma")))
static inline __m256 weibull_bias(__m256 u, __m256 scale) {
	__m256 e = _mm256_xor_ps(_mm256_set1_ps(-0.0f), log_pos(u)); // −log u
	return _mm256_mul_ps(scale, log_pos(e));
}

// log_fast is log x for normal x > 0 to a few ulp: x = 2^k·m with m in
// [√½, √2) by integer arithmetic (the reduction of musl's logf), t = m − 1
// exactly, and log m = 2 atanh(z) = 2z + 2z³/3 + 2z⁵/5 + 2z⁷/7 with
// z = t/(t + 2), |z| ≤ 0.172, so x near 1 keeps its relative accuracy.
// Zero, subnormals, infinities and NaN give garbage: the callers handle
// zero and pass nothing else.
__attribute__((target("avx2,fma")))
static inline __m256 log_fast(__m256 x) {
	const __m256i off = _mm256_set1_epi32(0x3f3504f3); // √½
	__m256i ix = _mm256_castps_si256(x);
	__m256i tmp = _mm256_sub_epi32(ix, off);
	__m256 k = _mm256_cvtepi32_ps(_mm256_srai_epi32(tmp, 23));
	__m256 m = _mm256_castsi256_ps(_mm256_sub_epi32(ix, _mm256_and_si256(tmp, _mm256_set1_epi32((int)0xff800000))));
	__m256 t = _mm256_sub_ps(m, _mm256_set1_ps(1.0f));
	__m256 z = _mm256_div_ps(t, _mm256_add_ps(t, _mm256_set1_ps(2.0f)));
	__m256 w = _mm256_mul_ps(z, z);
	__m256 p = _mm256_fmadd_ps(w, _mm256_set1_ps(2.0f / 7), _mm256_set1_ps(2.0f / 5));
	p = _mm256_fmadd_ps(w, p, _mm256_set1_ps(2.0f / 3));
	p = _mm256_mul_ps(_mm256_mul_ps(w, z), p);
	// 2z + p + k ln2, with ln2 split so that k·ln2_hi is exact
	__m256 r = _mm256_fmadd_ps(k, _mm256_set1_ps(-2.12194440e-4f), p);
	r = _mm256_add_ps(r, _mm256_add_ps(z, z));
	return _mm256_fmadd_ps(k, _mm256_set1_ps(0.693359375f), r);
}

// weibull_bias_fast is weibull_bias for u in (0, 1] (a noise draw):
// scale · log(−log u), with u = 1 giving −∞.
__attribute__((target("avx2,fma")))
static inline __m256 weibull_bias_fast(__m256 u, __m256 scale) {
	__m256 e = _mm256_xor_ps(_mm256_set1_ps(-0.0f), log_fast(u)); // −log u ≥ 0
	__m256 zero = _mm256_cmp_ps(e, _mm256_setzero_ps(), _CMP_EQ_OQ);
	return _mm256_blendv_ps(_mm256_mul_ps(scale, log_fast(e)), _mm256_set1_ps(-INFINITY), zero);
}

// log_fast512 is log_fast on 16 lanes: the same operations in the same
// order, so each lane is log_fast's value bit for bit (the division is
// IEEE's on either width).
__attribute__((always_inline, target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")))
static inline __m512 log_fast512(__m512 x) {
	const __m512i off = _mm512_set1_epi32(0x3f3504f3); // √½
	__m512i ix = _mm512_castps_si512(x);
	__m512i tmp = _mm512_sub_epi32(ix, off);
	__m512 k = _mm512_cvtepi32_ps(_mm512_srai_epi32(tmp, 23));
	__m512 m = _mm512_castsi512_ps(_mm512_sub_epi32(ix, _mm512_and_si512(tmp, _mm512_set1_epi32((int)0xff800000))));
	__m512 t = _mm512_sub_ps(m, _mm512_set1_ps(1.0f));
	__m512 z = _mm512_div_ps(t, _mm512_add_ps(t, _mm512_set1_ps(2.0f)));
	__m512 w = _mm512_mul_ps(z, z);
	__m512 p = _mm512_fmadd_ps(w, _mm512_set1_ps(2.0f / 7), _mm512_set1_ps(2.0f / 5));
	p = _mm512_fmadd_ps(w, p, _mm512_set1_ps(2.0f / 3));
	p = _mm512_mul_ps(_mm512_mul_ps(w, z), p);
	__m512 r = _mm512_fmadd_ps(k, _mm512_set1_ps(-2.12194440e-4f), p);
	r = _mm512_add_ps(r, _mm512_add_ps(z, z));
	return _mm512_fmadd_ps(k, _mm512_set1_ps(0.693359375f), r);
}

// weibull_bias_fast512 is weibull_bias_fast on 16 lanes, lane for lane
// its value: scale · log(−log u), with u = 1 giving −∞.
__attribute__((always_inline, target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")))
static inline __m512 weibull_bias_fast512(__m512 u, __m512 scale) {
	__m512 e = _mm512_xor_ps(_mm512_set1_ps(-0.0f), log_fast512(u)); // −log u ≥ 0
	__mmask16 zero = _mm512_cmp_ps_mask(e, _mm512_setzero_ps(), _CMP_EQ_OQ);
	return _mm512_mask_blend_ps(zero, _mm512_mul_ps(scale, log_fast512(e)), _mm512_set1_ps(-INFINITY));
}

#endif
