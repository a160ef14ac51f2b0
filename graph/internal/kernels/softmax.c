//go:build cgo && !purego

// Row softmax of attention scores with AVX2/FMA: the exponentials are a
// large part of an attention layer's time, and Go evaluates them one at a
// time.
#include <math.h>
#include <string.h>
#include <immintrin.h>
#include "kernels.h"
#include "simd.h"

// Callers clamp with _mm256_min_ps(zero, d), zero first: minps returns its
// second operand when either is NaN, so a NaN score stays NaN (and the
// divergence check sees it) instead of becoming e^0.
//
// load_visible loads the scores row[j … j+8), masked past the row's end
// unless whole, and sets in to the lanes j+l < vis and keep to those of
// them whose key is visible (mask[j+l] ≠ 0 when mask is given).
__attribute__((target("avx2,fma")))
static inline __m256 load_visible(const float *row, const float *mask, int j, int vis, int whole, __m256i *in,
                                  __m256 *keep) {
	*in = _mm256_cmpgt_epi32(_mm256_set1_epi32(vis - j), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
	*keep = _mm256_castsi256_ps(*in);
	__m256 x = whole ? _mm256_loadu_ps(row + j) : _mm256_maskload_ps(row + j, *in);
	if (mask) {
		__m256 mk = whole ? _mm256_loadu_ps(mask + j) : _mm256_maskload_ps(mask + j, *in);
		*keep = _mm256_and_ps(*keep, _mm256_cmp_ps(mk, _mm256_setzero_ps(), _CMP_NEQ_UQ));
	}
	return x;
}

// pf_softmax_rows replaces each row i of p [n×m] with its softmax over the
// visible keys: j < m, or j ≤ i when causal, and mask[j] ≠ 0 when mask is
// given. Other keys get weight 0; a row with no visible key becomes 0, and
// a row with a NaN score at a visible key becomes NaN.
// Vector lanes past the visible keys are masked out, so a row's values
// do not depend on what lies beyond them; only a vector that would cross
// the row's end is loaded and stored masked (maskmov is slow on AMD).
__attribute__((target("avx2,fma")))
void pf_softmax_rows(float *p, int n, int m, const float *mask, int causal) {
	const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
	const __m256 zero = _mm256_setzero_ps(), ninf = _mm256_set1_ps(-INFINITY);
	for (int i = 0; i < n; i++) {
		float *row = p + (size_t)i * m;
		int vis = causal && i + 1 < m ? i + 1 : m;
		// the max over the visible keys; a NaN score sticks, so the row
		// becomes NaN
		__m256 vmx = ninf, nan = zero;
		for (int j = 0; j < vis; j += 8) {
			__m256i in;
			__m256 keep;
			int whole = j + 8 <= m;
			__m256 x = load_visible(row, mask, j, vis, whole, &in, &keep);
			x = _mm256_blendv_ps(ninf, x, keep);
			nan = _mm256_or_ps(nan, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
			vmx = _mm256_max_ps(vmx, x);
		}
		__m128 h = _mm_max_ps(_mm256_castps256_ps128(vmx), _mm256_extractf128_ps(vmx, 1));
		h = _mm_max_ps(h, _mm_movehl_ps(h, h));
		h = _mm_max_ss(h, _mm_movehdup_ps(h));
		float mx = _mm256_movemask_ps(nan) ? NAN : _mm_cvtss_f32(h);
		if (mx == -INFINITY) {
			memset(row, 0, sizeof(float) * (size_t)m);
			continue;
		}
		__m256 zs = zero;
		vmx = _mm256_set1_ps(mx);
		for (int j = 0; j < vis; j += 8) {
			__m256i in;
			__m256 keep;
			int whole = j + 8 <= m;
			__m256 x = load_visible(row, mask, j, vis, whole, &in, &keep);
			__m256 ex = _mm256_and_ps(keep, exp_le0(_mm256_min_ps(zero, _mm256_sub_ps(x, vmx))));
			if (whole) {
				_mm256_storeu_ps(row + j, ex); // lanes from vis on: 0, cleared below anyway
			} else {
				_mm256_maskstore_ps(row + j, in, ex);
			}
			zs = _mm256_add_ps(zs, ex);
		}
		__m256 vz = _mm256_set1_ps(hsum(zs));
		for (int j = 0; j < vis; j += 8) {
			if (j + 8 <= m) {
				_mm256_storeu_ps(row + j, _mm256_div_ps(_mm256_loadu_ps(row + j), vz));
			} else {
				__m256i in = _mm256_cmpgt_epi32(_mm256_set1_epi32(vis - j), lane);
				_mm256_maskstore_ps(row + j, in, _mm256_div_ps(_mm256_maskload_ps(row + j, in), vz));
			}
		}
		if (vis < m) memset(row + vis, 0, sizeof(float) * (size_t)(m - vis));
	}
}

// pf_exp_row sets dst[j] = e^(src[j] − shift) for j < n (src[j] ≤ shift:
// the exponentials of a softmax after its max is taken out) and returns
// their sum, accumulated in double. dst may be src.
__attribute__((target("avx2,fma")))
double pf_exp_row(const float *src, float *dst, int n, float shift) {
	const __m256 vs = _mm256_set1_ps(shift), zero = _mm256_setzero_ps();
	__m256d z0 = _mm256_setzero_pd(), z1 = _mm256_setzero_pd();
	int j = 0;
	for (; j + 8 <= n; j += 8) {
		__m256 e = exp_le0(_mm256_min_ps(zero, _mm256_sub_ps(_mm256_loadu_ps(src + j), vs)));
		_mm256_storeu_ps(dst + j, e);
		z0 = _mm256_add_pd(z0, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
		z1 = _mm256_add_pd(z1, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
	}
	if (j < n) {
		const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
		__m256i in = _mm256_cmpgt_epi32(_mm256_set1_epi32(n - j), lane);
		__m256 x = _mm256_maskload_ps(src + j, in);
		__m256 e = _mm256_and_ps(_mm256_castsi256_ps(in), exp_le0(_mm256_min_ps(zero, _mm256_sub_ps(x, vs))));
		_mm256_maskstore_ps(dst + j, in, e);
		z0 = _mm256_add_pd(z0, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
		z1 = _mm256_add_pd(z1, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
	}
	double lanes[4];
	_mm256_storeu_pd(lanes, _mm256_add_pd(z0, z1));
	return (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
}

// pf_max_sum returns the largest of x[0..n) in *mx and their sum,
// accumulated in double, in *sum: a cross-entropy row's shift and mean.
__attribute__((target("avx2,fma")))
void pf_max_sum(const float *x, int n, float *mx, double *sum) {
	__m256 vm = _mm256_set1_ps(-INFINITY);
	__m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
	int j = 0;
	for (; j + 8 <= n; j += 8) {
		__m256 v = _mm256_loadu_ps(x + j);
		vm = _mm256_max_ps(vm, v);
		s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
		s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
	}
	float lanes[8];
	_mm256_storeu_ps(lanes, vm);
	float m = lanes[0];
	for (int l = 1; l < 8; l++) m = lanes[l] > m ? lanes[l] : m;
	double d[4];
	_mm256_storeu_pd(d, _mm256_add_pd(s0, s1));
	double s = (d[0] + d[1]) + (d[2] + d[3]);
	for (; j < n; j++) {
		m = x[j] > m ? x[j] : m;
		s += x[j];
	}
	*mx = m;
	*sum = s;
}

// pf_scale_shift sets d[j] = d[j]·scale − off for j < n.
__attribute__((target("avx2,fma")))
void pf_scale_shift(float *d, int n, float scale, float off) {
	const __m256 vs = _mm256_set1_ps(scale), vo = _mm256_set1_ps(off);
	int j = 0;
	for (; j + 8 <= n; j += 8) {
		_mm256_storeu_ps(d + j, _mm256_fmsub_ps(_mm256_loadu_ps(d + j), vs, vo));
	}
	for (; j < n; j++) d[j] = d[j] * scale - off;
}

// pf_softmax_rows512 is pf_softmax_rows with AVX-512, for CPUs that have
// it (simdLevel): 16 keys a vector, lanes past the visible keys masked
// (masked loads and stores never touch memory outside them, so no
// separate path for a row's last vector). Its values are
// pf_softmax_rows's bit for bit: the exponentials are exp_le0's
// operations lane for lane, and their sum is taken in pf_softmax_rows's
// order, 8-lane blocks added one after another (add_halves) and then
// hsum (a block wholly past the visible keys adds +0, which changes no
// sum of non-negative terms). The max is order-free; among ±0 maxima,
// either gives e^0 = 1.
PF_AVX512
void pf_softmax_rows512(float *p, int n, int m, const float *mask, int causal) {
	const __m512 ninf = _mm512_set1_ps(-INFINITY), zero = _mm512_setzero_ps();
	// Rows go 8 at a time through three passes (maxima, exponentials and
	// sums, quotients), so that the rows of one pass, independent of each
	// other, overlap in the pipeline: a row of 16 keys is one vector, and
	// one row at a time would wait on each step's latency.
	for (int i0 = 0; i0 < n; i0 += 8) {
		const int nb = n - i0 < 8 ? n - i0 : 8;
		float mxs[8], zs[8];
		for (int b = 0; b < nb; b++) {
			const int i = i0 + b;
			const float *row = p + (size_t)i * m;
			const int vis = causal && i + 1 < m ? i + 1 : m;
			// the max over the visible keys; a NaN score sticks, so the
			// row becomes NaN
			__m512 vmx = ninf;
			__mmask16 nan = 0;
			for (int j = 0; j < vis; j += 16) {
				__mmask16 in = lanes16(vis - j), keep = in;
				__m512 x = _mm512_maskz_loadu_ps(in, row + j);
				if (mask) keep = _mm512_mask_cmp_ps_mask(in, _mm512_maskz_loadu_ps(in, mask + j), zero, _CMP_NEQ_UQ);
				nan |= _mm512_mask_cmp_ps_mask(keep, x, x, _CMP_UNORD_Q);
				vmx = _mm512_mask_max_ps(vmx, keep, vmx, x);
			}
			mxs[b] = nan ? NAN : _mm512_reduce_max_ps(vmx);
		}
		for (int b = 0; b < nb; b++) {
			const int i = i0 + b;
			float *row = p + (size_t)i * m;
			const int vis = causal && i + 1 < m ? i + 1 : m;
			if (mxs[b] == -INFINITY) continue;
			__m256 z = _mm256_setzero_ps();
			const __m512 vmx = _mm512_set1_ps(mxs[b]);
			for (int j = 0; j < vis; j += 16) {
				__mmask16 in = lanes16(vis - j), keep = in;
				__m512 x = _mm512_maskz_loadu_ps(in, row + j);
				if (mask) keep = _mm512_mask_cmp_ps_mask(in, _mm512_maskz_loadu_ps(in, mask + j), zero, _CMP_NEQ_UQ);
				__m512 ex = _mm512_maskz_mov_ps(keep, exp_le0_512(_mm512_min_ps(zero, _mm512_sub_ps(x, vmx))));
				_mm512_mask_storeu_ps(row + j, in, ex);
				z = add_halves(z, ex);
			}
			zs[b] = hsum(z);
		}
		for (int b = 0; b < nb; b++) {
			const int i = i0 + b;
			float *row = p + (size_t)i * m;
			const int vis = causal && i + 1 < m ? i + 1 : m;
			if (mxs[b] == -INFINITY) {
				memset(row, 0, sizeof(float) * (size_t)m);
				continue;
			}
			const __m512 vz = _mm512_set1_ps(zs[b]);
			for (int j = 0; j < vis; j += 16) {
				__mmask16 in = lanes16(vis - j);
				_mm512_mask_storeu_ps(row + j, in, _mm512_div_ps(_mm512_maskz_loadu_ps(in, row + j), vz));
			}
			if (vis < m) memset(row + vis, 0, sizeof(float) * (size_t)(m - vis));
		}
	}
}
