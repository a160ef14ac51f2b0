// Small AVX2 helpers shared by the C kernels.
#ifndef PF_SIMD_H
#define PF_SIMD_H
#include <immintrin.h>

// hsum is the sum of the 8 lanes of v, in a fixed order.
__attribute__((target("avx2,fma")))
static inline float hsum(__m256 v) {
	__m128 h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	h = _mm_add_ps(h, _mm_movehl_ps(h, h));
	h = _mm_add_ss(h, _mm_movehdup_ps(h));
	return _mm_cvtss_f32(h);
}

#endif
