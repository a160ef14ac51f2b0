//go:build cgo && !purego

// Vector loops over float32 data with AVX2 that give bit for bit the
// results of their Go versions: each output element sees the same
// operations in the same order, only several elements at a time.
#include <string.h>
#include <immintrin.h>
#include "kernels.h"

// pf_colsum sets s[j] = Σ_r x[r·d + j], adding rows in order (colSum).
__attribute__((target("avx2")))
void pf_colsum(const float *x, int rows, int d, float *s) { pf_colsum_ld(x, rows, d, d, s); }

// pf_colsum_ld is pf_colsum on d columns of rows ld apart, so that
// column blocks can go to different threads (pool.c's range jobs): each
// column is summed alone, from +0 down the rows in order, in whichever
// loop below takes it, so its value does not depend on the block.
__attribute__((target("avx2")))
void pf_colsum_ld(const float *x, int rows, int d, int ld, float *s) {
	int j = 0;
	for (; j + 32 <= d; j += 32) {
		__m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
		for (int r = 0; r < rows; r++) {
			const float *p = x + (size_t)r * ld + j;
			a0 = _mm256_add_ps(a0, _mm256_loadu_ps(p));
			a1 = _mm256_add_ps(a1, _mm256_loadu_ps(p + 8));
			a2 = _mm256_add_ps(a2, _mm256_loadu_ps(p + 16));
			a3 = _mm256_add_ps(a3, _mm256_loadu_ps(p + 24));
		}
		_mm256_storeu_ps(s + j, a0);
		_mm256_storeu_ps(s + j + 8, a1);
		_mm256_storeu_ps(s + j + 16, a2);
		_mm256_storeu_ps(s + j + 24, a3);
	}
	for (; j + 8 <= d; j += 8) {
		__m256 a0 = _mm256_setzero_ps();
		for (int r = 0; r < rows; r++) a0 = _mm256_add_ps(a0, _mm256_loadu_ps(x + (size_t)r * ld + j));
		_mm256_storeu_ps(s + j, a0);
	}
	for (; j < d; j++) {
		__m128 a = _mm_setzero_ps();
		for (int r = 0; r < rows; r++) a = _mm_add_ss(a, _mm_load_ss(x + (size_t)r * ld + j));
		s[j] = _mm_cvtss_f32(a);
	}
}

// adam4 is adamUpdate (adam.go) on four elements, operation for operation:
//   gj = g·scale;  m = β₁m + (1−β₁)gj;  v = β₂v + ((1−β₂)gj)gj;
//   w = float32(w·decay − (lr·(m/bc1)) / (√(v/bc2) + ε)).
__attribute__((target("avx2")))
static inline void adam4(float *w, const float *g, double *m, double *v, const double *c) {
	__m256d gj = _mm256_mul_pd(_mm256_cvtps_pd(_mm_loadu_ps(g)), _mm256_set1_pd(c[0]));
	__m256d mj = _mm256_add_pd(_mm256_mul_pd(_mm256_set1_pd(c[2]), _mm256_loadu_pd(m)),
	                           _mm256_mul_pd(_mm256_set1_pd(c[3]), gj));
	__m256d vj = _mm256_add_pd(_mm256_mul_pd(_mm256_set1_pd(c[4]), _mm256_loadu_pd(v)),
	                           _mm256_mul_pd(_mm256_mul_pd(_mm256_set1_pd(c[5]), gj), gj));
	_mm256_storeu_pd(m, mj);
	_mm256_storeu_pd(v, vj);
	__m256d wj = _mm256_mul_pd(_mm256_cvtps_pd(_mm_loadu_ps(w)), _mm256_set1_pd(c[9]));
	__m256d num = _mm256_mul_pd(_mm256_set1_pd(c[1]), _mm256_div_pd(mj, _mm256_set1_pd(c[6])));
	__m256d den = _mm256_add_pd(_mm256_sqrt_pd(_mm256_div_pd(vj, _mm256_set1_pd(c[7]))), _mm256_set1_pd(c[8]));
	_mm_storeu_ps(w, _mm256_cvtpd_ps(_mm256_sub_pd(wj, _mm256_div_pd(num, den))));
}

// pf_adam_f32 runs adam4 over n elements; c holds scale, lr, β₁, 1−β₁,
// β₂, 1−β₂, bc1, bc2, ε, decay.
__attribute__((target("avx2")))
void pf_adam_f32(float *w, const float *g, double *m, double *v, int n, const double *c) {
	int j = 0;
	for (; j + 4 <= n; j += 4) adam4(w + j, g + j, m + j, v + j, c);
	if (j < n) {
		float tw[4] = {0}, tg[4] = {0};
		double tm[4] = {0}, tv[4] = {0};
		int r = n - j;
		memcpy(tw, w + j, sizeof(float) * r);
		memcpy(tg, g + j, sizeof(float) * r);
		memcpy(tm, m + j, sizeof(double) * r);
		memcpy(tv, v + j, sizeof(double) * r);
		adam4(tw, tg, tm, tv, c);
		memcpy(w + j, tw, sizeof(float) * r);
		memcpy(m + j, tm, sizeof(double) * r);
		memcpy(v + j, tv, sizeof(double) * r);
	}
}

// pf_finite32 reports whether all n values of x are finite (exponent
// bits not all set), Adam's check of a gradient before it changes any
// weight: eight lanes at a time, where the Go loop tests one value a
// cycle or slower.
__attribute__((target("avx2")))
int pf_finite32(const float *x, int n) {
	const __m256i e = _mm256_set1_epi32(0x7f800000);
	__m256i bad = _mm256_setzero_si256();
	int i = 0;
	for (; i + 8 <= n; i += 8) {
		__m256i b = _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(x + i)), e);
		bad = _mm256_or_si256(bad, _mm256_cmpeq_epi32(b, e));
	}
	if (!_mm256_testz_si256(bad, bad)) return 0;
	for (; i < n; i++) {
		unsigned int b;
		memcpy(&b, x + i, sizeof b);
		if ((b & 0x7f800000u) == 0x7f800000u) return 0;
	}
	return 1;
}

// pf_mul sets y[i] = a[i]·b[i] (mulInto).
__attribute__((target("avx2")))
void pf_mul(const float *a, const float *b, float *y, int n) {
	int i = 0;
	for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
	for (; i < n; i++) _mm_store_ss(y + i, _mm_mul_ss(_mm_load_ss(a + i), _mm_load_ss(b + i)));
}

// pf_add_repeat sets y[r·d + j] = a[r·d + j] + b[j] for n = rows·d values
// (addRepeat).
__attribute__((target("avx2")))
void pf_add_repeat(const float *a, const float *b, float *y, int n, int d) {
	for (int r = 0; r < n; r += d) {
		const float *ar = a + r;
		float *yr = y + r;
		int j = 0;
		for (; j + 8 <= d; j += 8) _mm256_storeu_ps(yr + j, _mm256_add_ps(_mm256_loadu_ps(ar + j), _mm256_loadu_ps(b + j)));
		for (; j < d; j++) _mm_store_ss(yr + j, _mm_add_ss(_mm_load_ss(ar + j), _mm_load_ss(b + j)));
	}
}

// pf_relu_grad sets y[i] = g[i] where x[i] > 0 (as a signed integer, the
// test of reluGrad32) and +0 elsewhere.
__attribute__((target("avx2")))
void pf_relu_grad(const float *x, const float *g, float *y, int n) {
	int i = 0;
	__m256i zero = _mm256_setzero_si256();
	for (; i + 8 <= n; i += 8) {
		__m256i keep = _mm256_cmpgt_epi32(_mm256_loadu_si256((const __m256i *)(x + i)), zero);
		_mm256_storeu_ps(y + i, _mm256_and_ps(_mm256_castsi256_ps(keep), _mm256_loadu_ps(g + i)));
	}
	for (; i < n; i++) {
		int b;
		memcpy(&b, x + i, sizeof b);
		y[i] = b > 0 ? g[i] : 0.0f;
	}
}

// pf_relu sets y[i] = max(x[i], 0) as Go's max does: +0 for ±0, NaN kept.
__attribute__((target("avx2")))
void pf_relu(const float *x, float *y, int n) {
	int i = 0;
	__m256 z = _mm256_setzero_ps();
	// max_ps returns its second operand when either is NaN or both are
	// zeros; adding +0 turns −0 into +0.
	for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_max_ps(z, _mm256_loadu_ps(x + i)), z));
	for (; i < n; i++) {
		__m128 v = _mm_max_ss(_mm_setzero_ps(), _mm_load_ss(x + i));
		_mm_store_ss(y + i, _mm_add_ss(v, _mm_setzero_ps()));
	}
}
