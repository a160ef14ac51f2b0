//go:build cgo && !purego

// Dropout masks from SplitMix64 counters (see DrawDropout in dropout.go):
// unit i of the mask of seed s reads the low (even i) or high (odd i)
// 32-bit half u of h = SplitMix64(s + (⌊i/2⌋+1)·γ) and is scale when
// u < thr, 0 otherwise. The AVX2 kernel makes four h at a time; their
// eight halves, in memory order, are the units of eight consecutive
// floats, so it needs no shuffles.
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <immintrin.h>
#include "kernels.h"

#define GAMMA 0x9E3779B97F4A7C15ULL
#define MIX1 0xBF58476D1CE4E5B9ULL
#define MIX2 0x94D049BB133111EBULL

static inline uint64_t splitmix64(uint64_t z) {
	z = (z ^ (z >> 30)) * MIX1;
	z = (z ^ (z >> 27)) * MIX2;
	return z ^ (z >> 31);
}

// The portable kernels, the same loop as fillMaskGo: m [n] gets units
// first … first+n−1. A unit is scale's bits ANDed with all ones or all
// zeros, without a branch (the outcome is random, so a branch would miss
// half the time).
#define PORTABLE(NAME, T, U)                                                           \
	static inline T NAME##_pick(uint64_t u, uint64_t thr, U bits) {                    \
		U b = bits & ((U)0 - (U)(u < thr));                                            \
		T v;                                                                           \
		memcpy(&v, &b, sizeof v);                                                      \
		return v;                                                                      \
	}                                                                                  \
	static void NAME(T *m, size_t n, uint64_t seed, uint64_t first, uint64_t thr, T scale) { \
		if (n == 0) return;                                                            \
		U bits;                                                                        \
		memcpy(&bits, &scale, sizeof bits);                                            \
		uint64_t s = seed + (first / 2 + 1) * GAMMA;                                   \
		size_t i = 0;                                                                  \
		if (first & 1) {                                                               \
			m[0] = NAME##_pick(splitmix64(s) >> 32, thr, bits);                        \
			s += GAMMA;                                                                \
			i = 1;                                                                     \
		}                                                                              \
		for (; i + 1 < n; i += 2) {                                                    \
			uint64_t h = splitmix64(s);                                                \
			s += GAMMA;                                                                \
			m[i] = NAME##_pick(h & 0xFFFFFFFFu, thr, bits);                            \
			m[i + 1] = NAME##_pick(h >> 32, thr, bits);                                \
		}                                                                              \
		if (i < n) m[i] = NAME##_pick(splitmix64(s) & 0xFFFFFFFFu, thr, bits);         \
	}
PORTABLE(mask_f32_portable, float, uint32_t)
PORTABLE(mask_f64_portable, double, uint64_t)

// mul64 is the low 64 bits of a·c in each lane, from three 32×32 products
// (AVX2 has no 64-bit multiply); chi holds c ≫ 32.
__attribute__((target("avx2"))) static inline __m256i mul64(__m256i a, __m256i c, __m256i chi) {
	__m256i lo = _mm256_mul_epu32(a, c);
	__m256i cross = _mm256_add_epi64(_mm256_mul_epu32(_mm256_srli_epi64(a, 32), c), _mm256_mul_epu32(a, chi));
	return _mm256_add_epi64(lo, _mm256_slli_epi64(cross, 32));
}

__attribute__((target("avx2"))) static inline __m256i splitmix4(__m256i z) {
	const __m256i m1 = _mm256_set1_epi64x((long long)MIX1), m1h = _mm256_set1_epi64x((long long)(MIX1 >> 32));
	const __m256i m2 = _mm256_set1_epi64x((long long)MIX2), m2h = _mm256_set1_epi64x((long long)(MIX2 >> 32));
	z = mul64(_mm256_xor_si256(z, _mm256_srli_epi64(z, 30)), m1, m1h);
	z = mul64(_mm256_xor_si256(z, _mm256_srli_epi64(z, 27)), m2, m2h);
	return _mm256_xor_si256(z, _mm256_srli_epi64(z, 31));
}

// keep8 returns, per 32-bit lane, all ones where the lane of h is below
// thr (< 2³²): an unsigned compare through the sign-flip trick.
__attribute__((target("avx2"))) static inline __m256i keep8(__m256i h, __m256i tflip) {
	const __m256i flip = _mm256_set1_epi32((int)0x80000000u);
	return _mm256_cmpgt_epi32(tflip, _mm256_xor_si256(h, flip));
}

// counters4 holds the SplitMix64 states of the four outputs that give
// units first … first+7 (first even).
__attribute__((target("avx2"))) static inline __m256i counters4(uint64_t seed, uint64_t first) {
	return _mm256_add_epi64(_mm256_set1_epi64x((long long)(seed + (first / 2 + 1) * GAMMA)),
	                        _mm256_setr_epi64x(0, (long long)GAMMA, (long long)(2 * GAMMA), (long long)(3 * GAMMA)));
}

// The AVX2 kernels fill whole groups of eight units from an even first
// and return how many units they filled; thr must be below 2³².
__attribute__((target("avx2"))) static size_t mask_f32_avx2(float *m, size_t n, uint64_t seed, uint64_t first,
                                                            uint64_t thr, float scale) {
	__m256i s = counters4(seed, first);
	const __m256i step = _mm256_set1_epi64x((long long)(4 * GAMMA));
	const __m256i tflip = _mm256_set1_epi32((int)((uint32_t)thr ^ 0x80000000u));
	const __m256 sc = _mm256_set1_ps(scale);
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		__m256i keep = keep8(splitmix4(s), tflip);
		s = _mm256_add_epi64(s, step);
		_mm256_storeu_ps(m + i, _mm256_and_ps(_mm256_castsi256_ps(keep), sc));
	}
	return i;
}

__attribute__((target("avx2"))) static size_t mask_f64_avx2(double *m, size_t n, uint64_t seed, uint64_t first,
                                                            uint64_t thr, double scale) {
	__m256i s = counters4(seed, first);
	const __m256i step = _mm256_set1_epi64x((long long)(4 * GAMMA));
	const __m256i tflip = _mm256_set1_epi32((int)((uint32_t)thr ^ 0x80000000u));
	const __m256d sc = _mm256_set1_pd(scale);
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		__m256i keep = keep8(splitmix4(s), tflip);
		s = _mm256_add_epi64(s, step);
		__m256i k0 = _mm256_cvtepi32_epi64(_mm256_castsi256_si128(keep));
		__m256i k1 = _mm256_cvtepi32_epi64(_mm256_extracti128_si256(keep, 1));
		_mm256_storeu_pd(m + i, _mm256_and_pd(_mm256_castsi256_pd(k0), sc));
		_mm256_storeu_pd(m + i + 4, _mm256_and_pd(_mm256_castsi256_pd(k1), sc));
	}
	return i;
}

// pick_avx2 is whether to use the AVX2 kernels: kernel 0 is the portable
// loop, 1 AVX2 (the caller checked the CPU), −1 AVX2 where the CPU has it.
static int pick_avx2(int kernel) {
	if (kernel >= 0) return kernel;
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx2");
}

// pf_dropout_f32 sets m [n] to units first … first+n−1 of the mask stream
// of seed: scale where the unit's 32-bit uniform is below thr (≤ 2³²).
void pf_dropout_f32(int kernel, float *m, size_t n, uint64_t seed, uint64_t first, uint64_t thr, float scale) {
	if (n > 0 && (first & 1)) {
		mask_f32_portable(m, 1, seed, first, thr, scale);
		m++, n--, first++;
	}
	size_t done = 0;
	if (pick_avx2(kernel)) {
		if (thr > 0xFFFFFFFFu) { // every 32-bit uniform is below thr
			for (size_t i = 0; i < n; i++) m[i] = scale;
			return;
		}
		done = mask_f32_avx2(m, n, seed, first, thr, scale);
	}
	mask_f32_portable(m + done, n - done, seed, first + done, thr, scale);
}

// pf_dropout_f64 is pf_dropout_f32 for a float64 mask.
void pf_dropout_f64(int kernel, double *m, size_t n, uint64_t seed, uint64_t first, uint64_t thr, double scale) {
	if (n > 0 && (first & 1)) {
		mask_f64_portable(m, 1, seed, first, thr, scale);
		m++, n--, first++;
	}
	size_t done = 0;
	if (pick_avx2(kernel)) {
		if (thr > 0xFFFFFFFFu) {
			for (size_t i = 0; i < n; i++) m[i] = scale;
			return;
		}
		done = mask_f64_avx2(m, n, seed, first, thr, scale);
	}
	mask_f64_portable(m + done, n - done, seed, first + done, thr, scale);
}

// pf_dropout_has_avx2 is whether this CPU runs the AVX2 kernels.
int pf_dropout_has_avx2(void) { return pick_avx2(-1); }
