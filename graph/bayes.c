//go:build cgo && !purego

// Element-wise kernels of Bayesian attention (fusedbayes.go) in float32
// with AVX2/FMA: the noise of a Weibull sample needs two logarithms per
// attention weight, hundreds of thousands per training step, which Go's
// math.Log computes one at a time.
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

// pf_weibull_log_noise sets b[i] = scale · log(−log u[i]) for i < n: the
// log of a Weibull(1/scale, 1) draw from a uniform one (fusedbayes.go).
// u = 1 gives −∞ (a weight of 0 in the sample).
__attribute__((target("avx2,fma")))
void pf_weibull_log_noise(const float *u, float *b, int n, float scale) {
	const __m256 vs = _mm256_set1_ps(scale), sign = _mm256_set1_ps(-0.0f);
	int i = 0;
	for (; i + 8 <= n; i += 8) {
		__m256 e = _mm256_xor_ps(sign, log_pos(_mm256_loadu_ps(u + i))); // −log u
		_mm256_storeu_ps(b + i, _mm256_mul_ps(vs, log_pos(e)));
	}
	if (i < n) {
		float in[8] = {1, 1, 1, 1, 1, 1, 1, 1}, out[8];
		for (int l = 0; i + l < n; l++) in[l] = u[i + l];
		__m256 e = _mm256_xor_ps(sign, log_pos(_mm256_loadu_ps(in)));
		_mm256_storeu_ps(out, _mm256_mul_ps(vs, log_pos(e)));
		for (int l = 0; i + l < n; l++) b[i + l] = out[l];
	}
}
