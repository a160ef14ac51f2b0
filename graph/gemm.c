//go:build cgo && !purego

// Row-major matrix products for probformer's custom ops: an AVX2/FMA
// register-blocked kernel, chosen at run time, and a portable fallback.
#include <stdlib.h>
#include <string.h>
#include <immintrin.h>
#include "gemm.h"

int pf_has_avx2(void) {
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

// The portable kernels: C += alpha·A·B, with A [m×k], B [k×n].
// A is read as a(i, p) = A[i·rsa + p·csa], so a transposed A needs no copy.
#define PORTABLE(NAME, T)                                                      \
	static void NAME(int m, int n, int k, T alpha, const T *A, int rsa, int csa, \
	                 const T *B, int ldb, T *C, int ldc) {                     \
		for (int i = 0; i < m; i++) {                                          \
			T *c = C + (size_t)i * ldc;                                        \
			for (int p = 0; p < k; p++) {                                      \
				T a = alpha * A[(size_t)i * rsa + (size_t)p * csa];            \
				const T *b = B + (size_t)p * ldb;                              \
				for (int j = 0; j < n; j++) c[j] += a * b[j];                  \
			}                                                                  \
		}                                                                      \
	}
PORTABLE(sgemm_portable, float)
PORTABLE(dgemm_portable, double)

// sgemm_avx2 keeps a 4×16 block of C in eight registers while it runs over
// k: per step two loads of B, four broadcasts of A and eight FMAs.
__attribute__((target("avx2,fma")))
static void sgemm_avx2(int m, int n, int k, float alpha, const float *A, int rsa, int csa,
                       const float *B, int ldb, float *C, int ldc) {
	__m256 va = _mm256_set1_ps(alpha);
	int i = 0;
	for (; i + 4 <= m; i += 4) {
		const float *a0 = A + (size_t)i * rsa, *a1 = a0 + rsa, *a2 = a1 + rsa, *a3 = a2 + rsa;
		int j = 0;
		for (; j + 16 <= n; j += 16) {
			__m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00;
			__m256 c20 = c00, c21 = c00, c30 = c00, c31 = c00;
			for (int p = 0; p < k; p++) {
				const float *b = B + (size_t)p * ldb + j;
				__m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
				__m256 x = _mm256_broadcast_ss(a0 + (size_t)p * csa);
				c00 = _mm256_fmadd_ps(x, b0, c00); c01 = _mm256_fmadd_ps(x, b1, c01);
				x = _mm256_broadcast_ss(a1 + (size_t)p * csa);
				c10 = _mm256_fmadd_ps(x, b0, c10); c11 = _mm256_fmadd_ps(x, b1, c11);
				x = _mm256_broadcast_ss(a2 + (size_t)p * csa);
				c20 = _mm256_fmadd_ps(x, b0, c20); c21 = _mm256_fmadd_ps(x, b1, c21);
				x = _mm256_broadcast_ss(a3 + (size_t)p * csa);
				c30 = _mm256_fmadd_ps(x, b0, c30); c31 = _mm256_fmadd_ps(x, b1, c31);
			}
			float *c = C + (size_t)i * ldc + j;
#define ST(R, V0, V1)                                                                       \
	_mm256_storeu_ps(c + (size_t)(R) * ldc, _mm256_fmadd_ps(va, V0, _mm256_loadu_ps(c + (size_t)(R) * ldc)));         \
	_mm256_storeu_ps(c + (size_t)(R) * ldc + 8, _mm256_fmadd_ps(va, V1, _mm256_loadu_ps(c + (size_t)(R) * ldc + 8)));
			ST(0, c00, c01) ST(1, c10, c11) ST(2, c20, c21) ST(3, c30, c31)
#undef ST
		}
		for (; j + 8 <= n; j += 8) {
			__m256 c0 = _mm256_setzero_ps(), c1 = c0, c2 = c0, c3 = c0;
			for (int p = 0; p < k; p++) {
				__m256 b0 = _mm256_loadu_ps(B + (size_t)p * ldb + j);
				c0 = _mm256_fmadd_ps(_mm256_broadcast_ss(a0 + (size_t)p * csa), b0, c0);
				c1 = _mm256_fmadd_ps(_mm256_broadcast_ss(a1 + (size_t)p * csa), b0, c1);
				c2 = _mm256_fmadd_ps(_mm256_broadcast_ss(a2 + (size_t)p * csa), b0, c2);
				c3 = _mm256_fmadd_ps(_mm256_broadcast_ss(a3 + (size_t)p * csa), b0, c3);
			}
			float *c = C + (size_t)i * ldc + j;
			_mm256_storeu_ps(c, _mm256_fmadd_ps(va, c0, _mm256_loadu_ps(c)));
			_mm256_storeu_ps(c + ldc, _mm256_fmadd_ps(va, c1, _mm256_loadu_ps(c + ldc)));
			_mm256_storeu_ps(c + 2 * (size_t)ldc, _mm256_fmadd_ps(va, c2, _mm256_loadu_ps(c + 2 * (size_t)ldc)));
			_mm256_storeu_ps(c + 3 * (size_t)ldc, _mm256_fmadd_ps(va, c3, _mm256_loadu_ps(c + 3 * (size_t)ldc)));
		}
		if (j < n) {
			sgemm_portable(4, n - j, k, alpha, a0, rsa, csa, B + j, ldb, C + (size_t)i * ldc + j, ldc);
		}
	}
	for (; i < m; i++) {
		const float *a = A + (size_t)i * rsa;
		int j = 0;
		for (; j + 8 <= n; j += 8) {
			__m256 c0 = _mm256_setzero_ps();
			for (int p = 0; p < k; p++) {
				c0 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + (size_t)p * csa), _mm256_loadu_ps(B + (size_t)p * ldb + j), c0);
			}
			float *c = C + (size_t)i * ldc + j;
			_mm256_storeu_ps(c, _mm256_fmadd_ps(va, c0, _mm256_loadu_ps(c)));
		}
		if (j < n) {
			sgemm_portable(1, n - j, k, alpha, a, rsa, csa, B + j, ldb, C + (size_t)i * ldc + j, ldc);
		}
	}
}

// dgemm_avx2 is sgemm_avx2 for doubles: a 4×8 block in eight registers.
__attribute__((target("avx2,fma")))
static void dgemm_avx2(int m, int n, int k, double alpha, const double *A, int rsa, int csa,
                       const double *B, int ldb, double *C, int ldc) {
	__m256d va = _mm256_set1_pd(alpha);
	int i = 0;
	for (; i + 4 <= m; i += 4) {
		const double *a0 = A + (size_t)i * rsa, *a1 = a0 + rsa, *a2 = a1 + rsa, *a3 = a2 + rsa;
		int j = 0;
		for (; j + 8 <= n; j += 8) {
			__m256d c00 = _mm256_setzero_pd(), c01 = c00, c10 = c00, c11 = c00;
			__m256d c20 = c00, c21 = c00, c30 = c00, c31 = c00;
			for (int p = 0; p < k; p++) {
				const double *b = B + (size_t)p * ldb + j;
				__m256d b0 = _mm256_loadu_pd(b), b1 = _mm256_loadu_pd(b + 4);
				__m256d x = _mm256_broadcast_sd(a0 + (size_t)p * csa);
				c00 = _mm256_fmadd_pd(x, b0, c00); c01 = _mm256_fmadd_pd(x, b1, c01);
				x = _mm256_broadcast_sd(a1 + (size_t)p * csa);
				c10 = _mm256_fmadd_pd(x, b0, c10); c11 = _mm256_fmadd_pd(x, b1, c11);
				x = _mm256_broadcast_sd(a2 + (size_t)p * csa);
				c20 = _mm256_fmadd_pd(x, b0, c20); c21 = _mm256_fmadd_pd(x, b1, c21);
				x = _mm256_broadcast_sd(a3 + (size_t)p * csa);
				c30 = _mm256_fmadd_pd(x, b0, c30); c31 = _mm256_fmadd_pd(x, b1, c31);
			}
			double *c = C + (size_t)i * ldc + j;
#define ST(R, V0, V1)                                                                       \
	_mm256_storeu_pd(c + (size_t)(R) * ldc, _mm256_fmadd_pd(va, V0, _mm256_loadu_pd(c + (size_t)(R) * ldc)));         \
	_mm256_storeu_pd(c + (size_t)(R) * ldc + 4, _mm256_fmadd_pd(va, V1, _mm256_loadu_pd(c + (size_t)(R) * ldc + 4)));
			ST(0, c00, c01) ST(1, c10, c11) ST(2, c20, c21) ST(3, c30, c31)
#undef ST
		}
		if (j < n) {
			dgemm_portable(4, n - j, k, alpha, a0, rsa, csa, B + j, ldb, C + (size_t)i * ldc + j, ldc);
		}
	}
	if (i < m) {
		dgemm_portable(m - i, n, k, alpha, A + (size_t)i * rsa, rsa, csa, B, ldb, C + (size_t)i * ldc, ldc);
	}
}

// The public entry points follow BLAS: C ← α·op(A)·op(B) + β·C. A
// transposed A is read through its strides; a transposed B is copied to
// its plain layout first, since the kernel loads rows of B as vectors.
#define GEMM(NAME, T, AVX, PORT)                                                       \
	void NAME(int avx2, int transA, int transB, int m, int n, int k, T alpha,            \
	          const T *A, int lda, const T *B, int ldb, T beta, T *C, int ldc) {        \
		for (int i = 0; i < m; i++) {                                                  \
			T *c = C + (size_t)i * ldc;                                                \
			if (beta == 0) memset(c, 0, sizeof(T) * (size_t)n);                       \
			else if (beta != 1) for (int j = 0; j < n; j++) c[j] *= beta;              \
		}                                                                              \
		if (m == 0 || n == 0 || k == 0) return;                                        \
		T *bt = NULL;                                                                  \
		int rsa = transA ? 1 : lda, csa = transA ? lda : 1;                            \
		if (transB) { /* B is [n×k]: make it [k×n] */                                  \
			bt = malloc(sizeof(T) * (size_t)k * n);                                    \
			for (int j = 0; j < n; j++)                                                \
				for (int p = 0; p < k; p++) bt[(size_t)p * n + j] = B[(size_t)j * ldb + p]; \
			B = bt; ldb = n;                                                           \
		}                                                                              \
		/* k in chunks of 128, so the rows of B in use stay in cache */                \
		for (int p0 = 0; p0 < k; p0 += 128) {                                          \
			int kc = k - p0 < 128 ? k - p0 : 128;                                      \
			const T *a = A + (size_t)p0 * csa, *b = B + (size_t)p0 * ldb;              \
			if (avx2) AVX(m, n, kc, alpha, a, rsa, csa, b, ldb, C, ldc);               \
			else PORT(m, n, kc, alpha, a, rsa, csa, b, ldb, C, ldc);                   \
		}                                                                              \
		free(bt);                                                                      \
	}
GEMM(pf_sgemm, float, sgemm_avx2, sgemm_portable)
GEMM(pf_dgemm, double, dgemm_avx2, dgemm_portable)
