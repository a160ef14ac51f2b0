//go:build cgo && !purego

// Element-wise kernels of Bayesian attention (fusedbayes.go) in float32
// with AVX2/FMA: the noise of a Weibull sample needs two logarithms per
// attention weight, hundreds of thousands per training step, which Go's
// math.Log computes one at a time.
#include <math.h>
#include <immintrin.h>
#include "kernels.h"
#include "bayes.h"
#include "simd.h"

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

// pf_weibull_bias_fast is pf_weibull_log_noise with weibull_bias_fast, the
// form attention.c's Bayesian attention heads take (u in (0, 1]); the
// tests hold it to the float64 values.
__attribute__((target("avx2,fma")))
void pf_weibull_bias_fast(const float *u, float *b, int n, float scale) {
	const __m256 vs = _mm256_set1_ps(scale);
	int i = 0;
	for (; i + 8 <= n; i += 8) _mm256_storeu_ps(b + i, weibull_bias_fast(_mm256_loadu_ps(u + i), vs));
	if (i < n) {
		float in[8] = {1, 1, 1, 1, 1, 1, 1, 1}, out[8];
		for (int l = 0; i + l < n; l++) in[l] = u[i + l];
		_mm256_storeu_ps(out, weibull_bias_fast(_mm256_loadu_ps(in), vs));
		for (int l = 0; i + l < n; l++) b[i + l] = out[l];
	}
}

// splitmix8 is SplitMix64's output function (kernels.SplitMix64) on
// eight 64-bit lanes.
PF_AVX512 static inline __m512i splitmix8(__m512i z) {
	z = _mm512_mullo_epi64(_mm512_xor_si512(z, _mm512_srli_epi64(z, 30)),
	                       _mm512_set1_epi64((long long)0xBF58476D1CE4E5B9ULL));
	z = _mm512_mullo_epi64(_mm512_xor_si512(z, _mm512_srli_epi64(z, 27)),
	                       _mm512_set1_epi64((long long)0x94D049BB133111EBULL));
	return _mm512_xor_si512(z, _mm512_srli_epi64(z, 31));
}

// splitmix is splitmix8 on one 64-bit value.
static inline unsigned long long splitmix(unsigned long long z) {
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

// pf_uniform_noise512 fills pairs j ∈ [lo, hi) of d [len] with graph's
// uniform noise (noise.go's fillNoise, DrawNoise): with g = j + first and
// h = SplitMix64(seed + (g+1)·γ), d[2j] and d[2j+1] are (x ≫ 9 + ½)·2⁻²³
// of h's low and high 32-bit halves x (d[2j+1] only where 2j+1 < len).
// Eight hashes at a time (AVX-512DQ's 64-bit products); a hash's two
// halves lie in two adjacent 32-bit lanes, which is d's order already.
// Every step is exact (x ≫ 9 < 2²³, so x ≫ 9 + ½ has 24 bits and the
// factor is a power of 2), so the values are fillNoise's float64
// arithmetic rounded to float32, bit for bit.
__attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")))
void pf_uniform_noise512(float *d, long len, unsigned long long seed, long lo, long hi, long first) {
	const unsigned long long gamma = 0x9E3779B97F4A7C15ULL;
	const __m512i vgam8 = _mm512_set1_epi64((long long)(gamma * 8));
	const __m512 half = _mm512_set1_ps(0.5f), unit = _mm512_set1_ps(0x1p-23f);
	long j = lo;
	long full = hi;
	if (2 * full > len) full = len / 2; // pairs whose both entries exist
	if (j + 8 <= full) {
		// z_l = seed + (j + first + 1 + l)·γ for lane l, stepped by 8γ
		unsigned long long z0 = seed + (unsigned long long)(j + first + 1) * gamma;
		__m512i z = _mm512_add_epi64(_mm512_set1_epi64((long long)z0),
		                             _mm512_mullo_epi64(_mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7),
		                                                _mm512_set1_epi64((long long)gamma)));
		for (; j + 8 <= full; j += 8) {
			__m512i h = splitmix8(z);
			__m512 f = _mm512_cvtepi32_ps(_mm512_srli_epi32(h, 9));
			_mm512_storeu_ps(d + 2 * j, _mm512_mul_ps(_mm512_add_ps(f, half), unit));
			z = _mm512_add_epi64(z, vgam8);
		}
	}
	for (; j < hi; j++) {
		const unsigned long long h = splitmix(seed + (unsigned long long)(j + first + 1) * gamma);
		d[2 * j] = ((float)(unsigned)((h & 0xFFFFFFFFULL) >> 9) + 0.5f) * 0x1p-23f;
		if (2 * j + 1 < len) d[2 * j + 1] = ((float)(unsigned)(h >> 41) + 0.5f) * 0x1p-23f;
	}
}

// exp_neg8 is e^y for y in [−7, 0] in double, within a few ulps (far
// inside normal_retry8's margin): y = n·ln 2 + r with |r| ≤ ln 2 / 2 (ln 2
// in two parts, so r is exact to about 2⁻⁶⁰), e^r by its Taylor series to
// r¹³/13! (a remainder below 10⁻¹⁷), then scaled by 2ⁿ.
PF_AVX512 static inline __m512d exp_neg8(__m512d y) {
	const __m512d ln2hi = _mm512_set1_pd(6.93147180369123816490e-01), ln2lo = _mm512_set1_pd(1.90821492927058770002e-10);
	__m512d n = _mm512_roundscale_pd(_mm512_mul_pd(y, _mm512_set1_pd(1.4426950408889634074)),
	                                 _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	__m512d r = _mm512_fnmadd_pd(n, ln2lo, _mm512_fnmadd_pd(n, ln2hi, y));
	static const double c[] = {1.0 / 6227020800, 1.0 / 479001600, 1.0 / 39916800, 1.0 / 3628800, 1.0 / 362880,
	                           1.0 / 40320,      1.0 / 5040,      1.0 / 720,      1.0 / 120,     1.0 / 24,
	                           1.0 / 6,          0.5,             1,              1};
	__m512d p = _mm512_set1_pd(c[0]);
	for (int t = 1; t < 14; t++) p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(c[t]));
	return _mm512_scalef_pd(p, n);
}

// pf_exp_neg is exp_neg8 on y [n], into out, for the tests of its
// accuracy.
PF_AVX512 void pf_exp_neg(const double *y, double *out, long n) {
	for (long i = 0; i < n; i += 8) {
		const __mmask8 l = n - i < 8 ? (__mmask8)((1u << (n - i)) - 1) : 0xFF;
		_mm512_mask_storeu_pd(out + i, l, exp_neg8(_mm512_maskz_loadu_pd(l, y + i)));
	}
}

// normal_retry8 is noise.go's zigguratNormal for the up to 8 entries
// e [len live] of the noise stream of seed (entry e is pair e/2 + first,
// half e%2) whose first tries were rejected, with the ziggurat's tables
// w, k and f [128], eight lanes at a time (a branch per draw would be
// mispredicted at each accept-or-retry): it writes each draw it finishes
// to d[e], rounded to float32, and returns the mask of the lanes it
// leaves to Go. Those are the draws that reach the base layer (i = 0,
// whose tail takes logarithms: 6 draws in 10⁴) or a test f_i +
// u·(f_{i−1} − f_i) < exp(−x²/2) within 10⁻¹³ relative of a tie. Away from
// a tie, exp_neg8 and Go's math.Exp (each within a few ulps of the true
// value) decide alike, and so would a multiply-add fused by either
// compiler, so the draws are the Go loop's bit for bit; the draw x =
// hz·w_i is one product, as in Go.
PF_AVX512 static __mmask8 normal_retry8(float *d, unsigned long long seed, long first, const int *e, int live,
                                        const double *w, const unsigned *k, const double *f) {
	const __m512i gamma = _mm512_set1_epi64((long long)0x9E3779B97F4A7C15ULL), one = _mm512_set1_epi64(1);
	const __m512i m127 = _mm512_set1_epi64(127);
	const __mmask8 lanes = (__mmask8)((1u << live) - 1);
	__m512i ev = _mm512_cvtepi32_epi64(_mm256_maskz_loadu_epi32(lanes, e));
	__m512i odd = _mm512_and_si512(ev, one);
	__m512i g = _mm512_add_epi64(_mm512_srli_epi64(ev, 1), _mm512_set1_epi64(first));
	__m512i h = splitmix8(_mm512_add_epi64(_mm512_set1_epi64((long long)seed),
	                                       _mm512_mullo_epi64(_mm512_add_epi64(g, one), gamma)));
	__mmask8 hi = _mm512_test_epi64_mask(odd, odd);
	__m512i bits = _mm512_mask_srli_epi64(_mm512_and_si512(h, _mm512_set1_epi64(0xFFFFFFFFLL)), hi, h, 32);
	__m512i more = _mm512_xor_si512(h, _mm512_or_si512(_mm512_slli_epi64(g, 1), odd));
	__m512d x = _mm512_setzero_pd();
	__mmask8 act = lanes, done = 0;
	for (int round = 0; act && round < 64; round++) {
		__m512i hz = _mm512_srai_epi64(_mm512_slli_epi64(bits, 32), 32); // int32(bits)
		__m512i i = _mm512_and_si512(bits, m127);
		x = _mm512_mask_mul_pd(x, act, _mm512_cvtepi64_pd(hz), _mm512_mask_i64gather_pd(_mm512_set1_pd(1), act, i, w, 8));
		__m512i ki = _mm512_cvtepu32_epi64(_mm512_mask_i64gather_epi32(_mm256_setzero_si256(), act, i, (const int *)k, 4));
		__mmask8 acc = _mm512_mask_cmplt_epu64_mask(act, _mm512_abs_epi64(hz), ki);
		done |= acc, act &= ~acc;
		act &= ~_mm512_cmpeq_epi64_mask(i, _mm512_setzero_si512()); // the tail: Go's
		more = _mm512_add_epi64(more, gamma);
		__m512i ub = _mm512_srli_epi64(splitmix8(more), 40); // next() >> 8
		__m512d u = _mm512_mul_pd(_mm512_add_pd(_mm512_cvtepu64_pd(ub), _mm512_set1_pd(0.5)), _mm512_set1_pd(0x1p-24));
		__m512d fi = _mm512_mask_i64gather_pd(_mm512_set1_pd(1), act, i, f, 8),
		        fp = _mm512_mask_i64gather_pd(_mm512_set1_pd(1), act, _mm512_sub_epi64(i, one), f, 8);
		__m512d lhs = _mm512_add_pd(fi, _mm512_mul_pd(u, _mm512_sub_pd(fp, fi)));
		__m512d ex = exp_neg8(_mm512_mul_pd(_mm512_mul_pd(_mm512_set1_pd(-0.5), x), x));
		__m512d gap = _mm512_abs_pd(_mm512_sub_pd(lhs, ex));
		act &= ~_mm512_cmp_pd_mask(gap, _mm512_mul_pd(_mm512_set1_pd(1e-13), ex), _CMP_LE_OQ); // near a tie: Go's
		acc = _mm512_mask_cmp_pd_mask(act, lhs, ex, _CMP_LT_OQ);
		done |= acc, act &= ~acc;
		more = _mm512_add_epi64(more, gamma);
		bits = _mm512_srli_epi64(splitmix8(more), 32);
	}
	float out[8];
	_mm256_storeu_ps(out, _mm512_cvtpd_ps(x));
	for (int t = 0; t < live; t++)
		if (done >> t & 1) d[e[t]] = out[t];
	return (__mmask8)(lanes & ~done);
}

// zig_tables holds the ziggurat's tables k [128] (uint32) and w [128]
// (float64, split into its low and high 32-bit halves) in registers, 32
// entries a pair, for zig_lookup.
typedef struct {
	__m512i k[8], wlo[8], whi[8];
} zig_tables;

// zig_load fills t from k and w.
PF_AVX512 static inline void zig_load(zig_tables *t, const unsigned *k, const double *w) {
	for (int i = 0; i < 8; i++) {
		t->k[i] = _mm512_loadu_si512((const void *)(k + 16 * i));
		const __m512i a = _mm512_loadu_si512((const void *)(w + 16 * i));
		const __m512i b = _mm512_loadu_si512((const void *)(w + 16 * i + 8));
		t->wlo[i] = _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtepi64_epi32(a)), _mm512_cvtepi64_epi32(b), 1);
		t->whi[i] = _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtepi64_epi32(_mm512_srli_epi64(a, 32))),
		                               _mm512_cvtepi64_epi32(_mm512_srli_epi64(b, 32)), 1);
	}
}

// zig_pick is tab[idx] for 16 indices idx < 128 from a table of 128
// dwords in 8 registers: a two-table permute for each 32 entries, then
// bits 5 and 6 of idx choose among the four.
PF_AVX512 static inline __m512i zig_pick(const __m512i *tab, __m512i idx) {
	const __mmask16 b5 = _mm512_test_epi32_mask(idx, _mm512_set1_epi32(32)),
	                b6 = _mm512_test_epi32_mask(idx, _mm512_set1_epi32(64));
	const __m512i p0 = _mm512_permutex2var_epi32(tab[0], idx, tab[1]),
	              p1 = _mm512_permutex2var_epi32(tab[2], idx, tab[3]),
	              p2 = _mm512_permutex2var_epi32(tab[4], idx, tab[5]),
	              p3 = _mm512_permutex2var_epi32(tab[6], idx, tab[7]);
	return _mm512_mask_blend_epi32(b6, _mm512_mask_blend_epi32(b5, p0, p1), _mm512_mask_blend_epi32(b5, p2, p3));
}

// zig_lookup sets *kv to k[idx] and *w0, *w1 to w[idx] of lanes 0–7 and
// 8–15, idx < 128, from t: the same values as gathers from the tables,
// without gathers, which took most of the loop's time on a Zen 5 EPYC
// (a vpgatherdd and two vgatherdpd per 16 draws).
PF_AVX512 static inline void zig_lookup(const zig_tables *t, __m512i idx, __m512i *kv, __m512d *w0, __m512d *w1) {
	*kv = zig_pick(t->k, idx);
	const __m512i lo = zig_pick(t->wlo, idx), hi = zig_pick(t->whi, idx);
	const __m512i even = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
	*w0 = _mm512_castsi512_pd(_mm512_permutex2var_epi32(lo, even, hi));
	*w1 = _mm512_castsi512_pd(_mm512_permutex2var_epi32(lo, _mm512_add_epi32(even, _mm512_set1_epi32(8)), hi));
}

// pf_normal_noise512 fills pairs j ∈ [lo, hi) of d [len] with graph's
// normal noise (noise.go's zigguratNormal), the Go loop's values bit for
// bit. Where the ziggurat's first try accepts (97% of the draws), eight
// hashes at a time: each entry's 32 bits x (the halves of h as in
// pf_uniform_noise512) give i = x & 127 and, where |x| < k[i] (as int32,
// |·| wrapping as absInt32), the float64 product x·w[i] rounded to
// float32. The entries it rejects go, eight at a time, through normal_retry8
// (w, k and f the ziggurat's tables); the indices of those it leaves
// for the Go loop go into rej (at most 2·(hi − lo)), and it returns how
// many there are.
__attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")))
long pf_normal_noise512(float *d, long len, unsigned long long seed, long lo, long hi, long first, const double *w,
                        const unsigned *k, const double *f, int *rej) {
	const unsigned long long gamma = 0x9E3779B97F4A7C15ULL;
	const __m512i vgam8 = _mm512_set1_epi64((long long)(gamma * 8)), m127 = _mm512_set1_epi32(127);
	const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
	long j = lo, nrej = 0;
	long full = hi;
	if (2 * full > len) full = len / 2;
	if (j + 8 <= full) {
		unsigned long long z0 = seed + (unsigned long long)(j + first + 1) * gamma;
		__m512i z = _mm512_add_epi64(_mm512_set1_epi64((long long)z0),
		                             _mm512_mullo_epi64(_mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7),
		                                                _mm512_set1_epi64((long long)gamma)));
		zig_tables tab;
		zig_load(&tab, k, w);
		for (; j + 8 <= full; j += 8) {
			__m512i h = splitmix8(z);
			z = _mm512_add_epi64(z, vgam8);
			__m512i idx = _mm512_and_si512(h, m127), kv;
			__m512d wv0, wv1;
			zig_lookup(&tab, idx, &kv, &wv0, &wv1);
			__mmask16 ok = _mm512_cmplt_epu32_mask(_mm512_abs_epi32(h), kv);
			__m256i h0 = _mm512_castsi512_si256(h), h1 = _mm512_extracti64x4_epi64(h, 1);
			__m512d x0 = _mm512_mul_pd(_mm512_cvtepi32_pd(h0), wv0);
			__m512d x1 = _mm512_mul_pd(_mm512_cvtepi32_pd(h1), wv1);
			__m512 xf = _mm512_insertf32x8(_mm512_castps256_ps512(_mm512_cvtpd_ps(x0)), _mm512_cvtpd_ps(x1), 1);
			_mm512_mask_storeu_ps(d + 2 * j, ok, xf);
			// the rejected lanes' indices, packed to the front of a
			// full store: a branch per rejection would be mispredicted
			// in a third of the iterations (2.7% of the draws are)
			__m512i at = _mm512_add_epi32(_mm512_set1_epi32((int)(2 * j)), iota);
			_mm512_storeu_si512((void *)(rej + nrej), _mm512_maskz_compress_epi32((__mmask16)~ok, at));
			nrej += __builtin_popcount((unsigned)(__mmask16)~ok);
		}
	}
	for (; j < hi; j++) {
		const unsigned long long h = splitmix(seed + (unsigned long long)(j + first + 1) * gamma);
		for (int half = 0; half < 2 && 2 * j + half < len; half++) {
			int hz = (int)(unsigned)(half ? h >> 32 : h & 0xFFFFFFFFULL);
			int i = hz & 127;
			unsigned a = hz < 0 ? 0u - (unsigned)hz : (unsigned)hz;
			if (a < k[i]) {
				d[2 * j + half] = (float)((double)hz * w[i]);
			} else {
				rej[nrej++] = (int)(2 * j + half);
			}
		}
	}
	long left = 0;
	for (long t = 0; t < nrej; t += 8) {
		const int live = nrej - t < 8 ? (int)(nrej - t) : 8;
		const __mmask8 go = normal_retry8(d, seed, first, rej + t, live, w, k, f);
		for (int l = 0; l < live; l++)
			if (go >> l & 1) rej[left++] = rej[t + l];
	}
	return left;
}

// add_pd4 and add_sd are a + b with a the instruction's first source,
// written out so that gcc cannot swap the operands: where both are NaN the
// first source's payload is the result's, and Go's loop in
// fusedbayessample.go adds sum[i] += v as v + sum[i].
__attribute__((always_inline, target("avx2,fma")))
static inline __m256d add_pd4(__m256d a, __m256d b) {
	__m256d r;
	__asm__("vaddpd %2, %1, %0" : "=x"(r) : "x"(a), "x"(b));
	return r;
}
__attribute__((always_inline, target("avx2,fma")))
static inline double add_sd(double a, double b) {
	double r;
	__asm__("vaddsd %2, %1, %0" : "=x"(r) : "x"(a), "x"(b));
	return r;
}

// pf_sum_parts sets sum [np] to Σ_r part[r·stride + i] over the rows
// r = 0 … rows−1 in order, from +0, each element alone: the prior
// network's gradients per example summed over the batch
// (fusedbayessample.go), as Go's loop adds them (part + sum, see
// add_pd4), four elements to a vector (the lanes never meet), so the same
// values bit for bit.
__attribute__((target("avx2,fma")))
void pf_sum_parts(const double *part, long stride, int rows, int np, double *sum) {
	int i = 0;
	for (; i + 16 <= np; i += 16) {
		__m256d s0 = _mm256_setzero_pd(), s1 = s0, s2 = s0, s3 = s0;
		for (int r = 0; r < rows; r++) {
			const double *p = part + (size_t)r * stride + i;
			s0 = add_pd4(_mm256_loadu_pd(p), s0);
			s1 = add_pd4(_mm256_loadu_pd(p + 4), s1);
			s2 = add_pd4(_mm256_loadu_pd(p + 8), s2);
			s3 = add_pd4(_mm256_loadu_pd(p + 12), s3);
		}
		_mm256_storeu_pd(sum + i, s0);
		_mm256_storeu_pd(sum + i + 4, s1);
		_mm256_storeu_pd(sum + i + 8, s2);
		_mm256_storeu_pd(sum + i + 12, s3);
	}
	for (; i < np; i++) {
		double s = 0;
		for (int r = 0; r < rows; r++) s = add_sd(part[(size_t)r * stride + i], s);
		sum[i] = s;
	}
}
