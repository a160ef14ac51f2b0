// Small AVX2 helpers shared by the C kernels.
#ifndef PF_SIMD_H
#define PF_SIMD_H
#include <math.h>
#include <stddef.h>
#include <immintrin.h>

// hsum is the sum of the 8 lanes of v, in a fixed order.
__attribute__((target("avx2,fma")))
static inline float hsum(__m256 v) {
	__m128 h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	h = _mm_add_ps(h, _mm_movehl_ps(h, h));
	h = _mm_add_ss(h, _mm_movehdup_ps(h));
	return _mm_cvtss_f32(h);
}

// The horizontal maxima of the 8 lanes of v. They agree on lanes that are
// all numbers except, among lanes equal to ±0, on which zero they return,
// and they differ on NaN lanes; each caller keeps the one whose rule its
// results were made with, so none is swapped for another:
//
//   - hmax_maxps folds with maxps (the high half onto the low, then pairs);
//     maxps returns its second operand when either is NaN, so a NaN lane
//     may or may not come out: for callers that test for NaN themselves
//     (em.c's softmax rows);
//   - hmax_nan is NaN if any lane is NaN, and hmax_maxps otherwise
//     (attention.c's sampled Bayesian head, pf_bayes_attn_head);
//   - hmax_seq runs through lanes 0…7 in order, taking a lane that is
//     larger than the running max or is NaN: NaN if any lane is NaN, and
//     the first of equal lanes (attention.c's KL rows, kl_rows).
__attribute__((always_inline, target("avx2,fma")))
static inline float hmax_maxps(__m256 v) {
	__m128 h = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	h = _mm_max_ps(h, _mm_movehl_ps(h, h));
	h = _mm_max_ss(h, _mm_movehdup_ps(h));
	return _mm_cvtss_f32(h);
}

__attribute__((target("avx2,fma")))
static inline float hmax_nan(__m256 v) {
	if (_mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q))) return NAN;
	return hmax_maxps(v);
}

__attribute__((target("avx2,fma")))
static inline float hmax_seq(__m256 v) {
	float l[8];
	_mm256_storeu_ps(l, v);
	float mx = l[0];
	for (int i = 1; i < 8; i++) mx = (l[i] > mx || l[i] != l[i]) ? l[i] : mx;
	return mx;
}

// exp_le0 is e^x for x ≤ 0 to a relative error below 3e-7, as exp32 in
// fastexp.go computes it: x = k·ln2 + r with |r| ≤ ln2/2 (ln2 split in two
// for an exact reduction), a degree-6 Taylor polynomial for e^r, and k
// added to the exponent bits; 0 below −87.
__attribute__((target("avx2,fma")))
static inline __m256 exp_le0(__m256 x) {
	__m256 under = _mm256_cmp_ps(x, _mm256_set1_ps(-87.0f), _CMP_LT_OQ);
	__m256 k = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
	                           _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	__m256 r = _mm256_fnmadd_ps(k, _mm256_set1_ps(0.693359375f), x);
	r = _mm256_fnmadd_ps(k, _mm256_set1_ps(-2.12194440e-4f), r);
	__m256 p = _mm256_set1_ps(1.0f / 720);
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
	__m256i e = _mm256_slli_epi32(_mm256_cvtps_epi32(k), 23);
	__m256 y = _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(p), e));
	return _mm256_andnot_ps(under, y);
}

// transpose8_regs sets c[i] to column i of the 8×8 block whose rows are
// r[0…7], in registers: unpack pairs, shuffle quads, swap 128-bit halves.
// em.c and attention.c transpose through it, 8×8 blocks at a time.
__attribute__((always_inline, target("avx2,fma")))
static inline void transpose8_regs(const __m256 r[8], __m256 c[8]) {
	__m256 u[8], s[8];
	for (int i = 0; i < 8; i += 2) {
		u[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
		u[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
	}
	for (int i = 0; i < 8; i += 4) {
		s[i] = _mm256_shuffle_ps(u[i], u[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
		s[i + 1] = _mm256_shuffle_ps(u[i], u[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
		s[i + 2] = _mm256_shuffle_ps(u[i + 1], u[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
		s[i + 3] = _mm256_shuffle_ps(u[i + 1], u[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
	}
	// s[i] holds column i of rows 0–3 in its low half and column i+4 in
	// its high half; s[i+4] the same for rows 4–7.
	for (int i = 0; i < 4; i++) {
		c[i] = _mm256_permute2f128_ps(s[i], s[i + 4], 0x20);
		c[i + 4] = _mm256_permute2f128_ps(s[i], s[i + 4], 0x31);
	}
}

// PF_AVX512 is the target of the AVX-512 functions of softmax.c,
// layernorm.c and attention.c (and gemm.c's), so each file still builds
// for any x86-64 and runs them only where the CPU has AVX-512 (simdLevel).
#define PF_AVX512 __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")))

// exp_le0_512 is exp_le0 on 16 lanes, the same operations in the same
// order, so each lane is exp_le0's value bit for bit.
__attribute__((always_inline)) PF_AVX512
static inline __m512 exp_le0_512(__m512 x) {
	__mmask16 under = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.0f), _CMP_LT_OQ);
	__m512 k = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
	                                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	__m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(0.693359375f), x);
	r = _mm512_fnmadd_ps(k, _mm512_set1_ps(-2.12194440e-4f), r);
	__m512 p = _mm512_set1_ps(1.0f / 720);
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
	__m512i e = _mm512_slli_epi32(_mm512_cvtps_epi32(k), 23);
	__m512 y = _mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(p), e));
	return _mm512_maskz_mov_ps(~under, y);
}

// add_halves adds the low then the high 8 lanes of v to the 8-lane
// accumulator s: a sum over 16-lane blocks made this way is, lane for
// lane, the AVX2 kernels' sum over 8-lane blocks in the same order, so
// the AVX-512 paths' row sums are theirs bit for bit.
__attribute__((always_inline)) PF_AVX512
static inline __m256 add_halves(__m256 s, __m512 v) {
	s = _mm256_add_ps(s, _mm512_castps512_ps256(v));
	return _mm256_add_ps(s, _mm512_extractf32x8_ps(v, 1));
}

// fma_halves is add_halves for a dot product: s + a·b, the low 8 lanes
// fused first, then the high 8.
__attribute__((always_inline)) PF_AVX512
static inline __m256 fma_halves(__m512 a, __m512 b, __m256 s) {
	s = _mm256_fmadd_ps(_mm512_castps512_ps256(a), _mm512_castps512_ps256(b), s);
	return _mm256_fmadd_ps(_mm512_extractf32x8_ps(a, 1), _mm512_extractf32x8_ps(b, 1), s);
}

// fma_blocks is fma_halves for a row's 16-lane block, or with full 0
// (the row ends in the low half) the low 8 lanes alone: a dot over a
// row's 16-lane blocks made this way adds the AVX2 loops' 8-lane blocks
// and no more (a block past the row would add +0 to each lane, which
// turns a lane's −0, the rounding of a negative product too small for
// a float, into +0).
__attribute__((always_inline)) PF_AVX512
static inline __m256 fma_blocks(__m512 a, __m512 b, __m256 s, int full) {
	if (full) return fma_halves(a, b, s);
	return _mm256_fmadd_ps(_mm512_castps512_ps256(a), _mm512_castps512_ps256(b), s);
}

// lanes16 is the lane mask of the first w of 16 lanes (w ≤ 0: none).
__attribute__((always_inline)) PF_AVX512
static inline __mmask16 lanes16(int w) {
	return w >= 16 ? (__mmask16)0xFFFF : w <= 0 ? 0 : (__mmask16)((1u << w) - 1);
}

// prefetch_nta asks for the 64-byte lines of [p, p + bytes) with the
// non-temporal hint: data that one problem or batch element of a pool.c
// job uses once each way, fetched while the one before it computes
// (em.c's pf_em_job_run, which says what it gained). Where a CPU evicts
// such lines before their use, the prefetch is wasted, not wrong.
static inline void prefetch_nta(const void *p, size_t bytes) {
	const char *c = (const char *)p, *end = c + bytes;
	for (; c < end; c += 64) _mm_prefetch(c, _MM_HINT_NTA);
}

#endif
