//go:build cgo && !purego

// Row-major matrix products for probformer's custom ops: AVX2/FMA and
// AVX-512 register-blocked kernels, chosen at run time, and a portable
// fallback.
#include <stdlib.h>
#include <string.h>
#include <immintrin.h>
#include <stdio.h>
#include <cpuid.h>
#include "kernels.h"

// oom ends the process with a message: a failed allocation inside a
// matrix product has no caller to return an error to.
static void oom(const char *what) {
	fprintf(stderr, "probformer: out of memory in the matrix kernel (%s)\n", what);
	abort();
}

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

// KC is the depth of one pass over k: each element of C gets α·(its sum
// over KC consecutive products, accumulated in order) added per pass, in
// every code path, so a result does not depend on how C is tiled or split
// between threads.
#define KC 128

// SMALL_BT is the most elements of a transposed B (an attention head's
// keys, say) copied on the stack rather than the heap.
#define SMALL_BT 2048

#define SCALE_C(T)                                                             \
	static void scale_c_##T(int m, int n, T beta, T *C, int ldc) {             \
		for (int i = 0; i < m; i++) {                                          \
			T *c = C + (size_t)i * ldc;                                        \
			if (beta == 0) memset(c, 0, sizeof(T) * (size_t)n);               \
			else if (beta != 1) for (int j = 0; j < n; j++) c[j] *= beta;      \
		}                                                                      \
	}
SCALE_C(float)
SCALE_C(double)

// The public entry points follow BLAS: C ← α·op(A)·op(B) + β·C. A
// transposed A is read through its strides; a transposed B is copied to
// its plain layout first, since the kernel loads rows of B as vectors.
#define GEMM(NAME, T, AVX, PORT)                                                       \
	void NAME(int avx2, int transA, int transB, int m, int n, int k, T alpha,            \
	          const T *A, int lda, const T *B, int ldb, T beta, T *C, int ldc) {        \
		scale_c_##T(m, n, beta, C, ldc);                                               \
		if (m == 0 || n == 0 || k == 0) return;                                        \
		T *bt = NULL, small[SMALL_BT];                                                 \
		int rsa = transA ? 1 : lda, csa = transA ? lda : 1;                            \
		if (transB) { /* B is [n×k]: make it [k×n], on the stack when small */        \
			bt = (size_t)k * n <= SMALL_BT ? small : malloc(sizeof(T) * (size_t)k * n); \
			if (!bt) oom("transposing B");                                             \
			for (int j = 0; j < n; j++)                                                \
				for (int p = 0; p < k; p++) bt[(size_t)p * n + j] = B[(size_t)j * ldb + p]; \
			B = bt; ldb = n;                                                           \
		}                                                                              \
		/* k in chunks of KC, so the rows of B in use stay in cache */                 \
		for (int p0 = 0; p0 < k; p0 += KC) {                                           \
			int kc = k - p0 < KC ? k - p0 : KC;                                        \
			const T *a = A + (size_t)p0 * csa, *b = B + (size_t)p0 * ldb;              \
			if (avx2) AVX(m, n, kc, alpha, a, rsa, csa, b, ldb, C, ldc);               \
			else PORT(m, n, kc, alpha, a, rsa, csa, b, ldb, C, ldc);                   \
		}                                                                              \
		if (bt != small) free(bt);                                                     \
	}
GEMM(pf_dgemm, double, dgemm_avx2, dgemm_portable)
GEMM(sgemm_direct, float, sgemm_avx2, sgemm_portable)

// The packed float32 path, for products large enough to repay packing
// (after Goto & van de Geijn 2008): per pass over KC values of k, B's block
// is copied into zero-padded panels of 16 columns, so the 6×16
// micro-kernel reads it contiguously with no edge cases, whatever the
// transpose. A is read in place through its strides (each value is
// broadcast, so its layout costs little, and for C's narrow rows packing
// A costs more than it saves). The 12 accumulators take 6 broadcasts and
// 2 loads per 12 FMAs.
#define MR 6
#define NR 16
#define NC 1024

// Each thread keeps its packing buffer between calls; it lives as long as
// the thread (Go's threads are few and long-lived), and is never freed.
static __thread float *pack_b;
static __thread size_t pack_b_cap;

static float *grow(float **buf, size_t *cap, size_t n) {
	if (*cap < n) {
		free(*buf);
		*buf = aligned_alloc(64, ((n * sizeof(float) + 63) / 64) * 64);
		*cap = *buf ? n : 0;
		if (!*buf) oom("packing B");
	}
	return *buf;
}

// zero_row is the C that the first pass over k of a β = 0 product adds
// α·sum to (ldcin 0, every row reading it): fma(α, sum, +0) is what a
// memset C gave, bit for bit, -0 and NaN sums included, without the
// memset's pass over C and with C's old values unread, as BLAS has it
// for β = 0. 32 floats: the widest micro-kernel's row.
static const float zero_row[32] __attribute__((aligned(64)));

// micro_6x16 adds α·(A's mr rows · a B panel) to the mr×nr block at C.
// Row r of A is read as a[r·rsa + p·csa]; rows past mr repeat row 0 and
// their sums are dropped.
__attribute__((target("avx2,fma")))
static void micro_6x16(int kc, const float *a, int rsa, int csa, const float *b, float alpha,
                       const float *Cin, int ldcin, float *C, int ldc, int mr, int nr) {
	const float *a0 = a, *a1 = mr > 1 ? a + rsa : a, *a2 = mr > 2 ? a + 2 * (size_t)rsa : a;
	const float *a3 = mr > 3 ? a + 3 * (size_t)rsa : a, *a4 = mr > 4 ? a + 4 * (size_t)rsa : a;
	const float *a5 = mr > 5 ? a + 5 * (size_t)rsa : a;
	__m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
	__m256 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
	for (int p = 0; p < kc; p++) {
		size_t o = (size_t)p * csa;
		__m256 b0 = _mm256_load_ps(b), b1 = _mm256_load_ps(b + 8);
		__m256 x = _mm256_broadcast_ss(a0 + o);
		c00 = _mm256_fmadd_ps(x, b0, c00); c01 = _mm256_fmadd_ps(x, b1, c01);
		x = _mm256_broadcast_ss(a1 + o);
		c10 = _mm256_fmadd_ps(x, b0, c10); c11 = _mm256_fmadd_ps(x, b1, c11);
		x = _mm256_broadcast_ss(a2 + o);
		c20 = _mm256_fmadd_ps(x, b0, c20); c21 = _mm256_fmadd_ps(x, b1, c21);
		x = _mm256_broadcast_ss(a3 + o);
		c30 = _mm256_fmadd_ps(x, b0, c30); c31 = _mm256_fmadd_ps(x, b1, c31);
		x = _mm256_broadcast_ss(a4 + o);
		c40 = _mm256_fmadd_ps(x, b0, c40); c41 = _mm256_fmadd_ps(x, b1, c41);
		x = _mm256_broadcast_ss(a5 + o);
		c50 = _mm256_fmadd_ps(x, b0, c50); c51 = _mm256_fmadd_ps(x, b1, c51);
		b += NR;
	}
	__m256 va = _mm256_set1_ps(alpha);
	if (mr == MR && nr == NR) {
#define ST(R, V0, V1)                                                                              \
	_mm256_storeu_ps(C + (size_t)(R) * ldc, _mm256_fmadd_ps(va, V0, _mm256_loadu_ps(Cin + (size_t)(R) * ldcin))); \
	_mm256_storeu_ps(C + (size_t)(R) * ldc + 8, _mm256_fmadd_ps(va, V1, _mm256_loadu_ps(Cin + (size_t)(R) * ldcin + 8)));
		ST(0, c00, c01) ST(1, c10, c11) ST(2, c20, c21) ST(3, c30, c31) ST(4, c40, c41) ST(5, c50, c51)
#undef ST
		return;
	}
	// An edge block: the same sums, added element by element with the
	// same fused multiply-add.
	float t[MR * NR] __attribute__((aligned(32)));
	_mm256_store_ps(t + 0, c00); _mm256_store_ps(t + 8, c01);
	_mm256_store_ps(t + 16, c10); _mm256_store_ps(t + 24, c11);
	_mm256_store_ps(t + 32, c20); _mm256_store_ps(t + 40, c21);
	_mm256_store_ps(t + 48, c30); _mm256_store_ps(t + 56, c31);
	_mm256_store_ps(t + 64, c40); _mm256_store_ps(t + 72, c41);
	_mm256_store_ps(t + 80, c50); _mm256_store_ps(t + 88, c51);
	for (int i = 0; i < mr; i++) {
		float *c = C + (size_t)i * ldc;
		const float *cin = Cin + (size_t)i * ldcin;
		for (int j = 0; j < nr; j++) c[j] = __builtin_fmaf(alpha, t[i * NR + j], cin[j]);
	}
}

// pack_b_block copies op(B)[p0:p0+kc, j0:j0+nc] into panels of NR columns,
// zero-padded: panel q holds row p at bp[q·kc·NR + p·NR].
static void pack_b_block(int transB, const float *B, int ldb, int p0, int kc, int j0, int nc, float *bp) {
	for (int q = 0; q * NR < nc; q++) {
		float *dst = bp + (size_t)q * kc * NR;
		int w = nc - q * NR < NR ? nc - q * NR : NR;
		int j = j0 + q * NR;
		if (!transB) {
			for (int p = 0; p < kc; p++) {
				const float *src = B + (size_t)(p0 + p) * ldb + j;
				float *d = dst + (size_t)p * NR;
				int c = 0;
				for (; c < w; c++) d[c] = src[c];
				for (; c < NR; c++) d[c] = 0;
			}
		} else {
			for (int c = 0; c < NR; c++) {
				if (c < w) {
					const float *src = B + (size_t)(j + c) * ldb + p0;
					for (int p = 0; p < kc; p++) dst[(size_t)p * NR + c] = src[p];
				} else {
					for (int p = 0; p < kc; p++) dst[(size_t)p * NR + c] = 0;
				}
			}
		}
	}
}

// tile256 is tile512 for the 6×16 AVX2 kernel and panels of 16: one
// pass of sgemm_packed and of pf_sgemm_par over a block.
__attribute__((target("avx2,fma")))
static void tile256(int i0, int i1, int j0, int j1, int p0, int kc, float alpha, const float *A, int rsa, int csa,
                    const float *bq, float *C, int ldc, const float *bias, int beta0) {
	const float *a = A + (size_t)p0 * csa;
	for (int i = i0; i < i1; i += MR) {
		int mr = i1 - i < MR ? i1 - i : MR;
		for (int q = 0; j0 + q * NR < j1; q++) {
			int j = j0 + q * NR, nr = j1 - j < NR ? j1 - j : NR;
			float *c = C + (size_t)i * ldc + j;
			const float *b = bq + (size_t)q * kc * NR;
			if (bias && p0 == 0) micro_6x16(kc, a + (size_t)i * rsa, rsa, csa, b, alpha, bias + j, 0, c, ldc, mr, nr);
			else if (beta0 && p0 == 0) micro_6x16(kc, a + (size_t)i * rsa, rsa, csa, b, alpha, zero_row, 0, c, ldc, mr, nr);
			else micro_6x16(kc, a + (size_t)i * rsa, rsa, csa, b, alpha, c, ldc, c, ldc, mr, nr);
		}
	}
}

// sgemm_packed adds α·op(A)·op(B) to C (β already applied), or with bias
// given sets C to bias (repeated on every row) + α·op(A)·op(B), or with
// beta0 sets C to α·op(A)·op(B) (the first pass adding to zero_row), C's
// old values unread in both. It returns 0 if the packing buffer cannot
// be allocated.
static int sgemm_packed(int transA, int transB, int m, int n, int k, float alpha,
                        const float *A, int lda, const float *B, int ldb, float *C, int ldc, const float *bias,
                        int beta0) {
	int ncMax = n < NC ? n : NC;
	int kcMax = k < KC ? k : KC;
	float *bp = grow(&pack_b, &pack_b_cap, (size_t)kcMax * ((ncMax + NR - 1) / NR) * NR);
	if (!bp) return 0;
	int rsa = transA ? 1 : lda, csa = transA ? lda : 1;
	for (int j0 = 0; j0 < n; j0 += NC) {
		int nc = n - j0 < NC ? n - j0 : NC;
		for (int p0 = 0; p0 < k; p0 += KC) {
			int kc = k - p0 < KC ? k - p0 : KC;
			pack_b_block(transB, B, ldb, p0, kc, j0, nc, bp);
			tile256(0, m, j0, j0 + nc, p0, kc, alpha, A, rsa, csa, bp, C, ldc, bias, beta0);
		}
	}
	return 1;
}

// ---- The AVX-512 packed path ----
//
// On CPUs with AVX-512 (F, VL, BW, DQ) whose OS saves the zmm state,
// products that take the packed path above run on 16-lane registers
// instead: B's block is packed into zero-padded panels of 32 columns and
// an MR5×32 block of C (MR5 = 12: 24 accumulators of the 32 zmm registers,
// 12 broadcasts and 2 loads per 24 FMAs) is kept in registers over a pass.
// The arithmetic of each element is the AVX2 kernel's, operation for
// operation: per pass over KC values of k, a sum that starts at +0 and
// takes one fused multiply-add per p, in order, then C ← fma(α, sum, C)
// (C being the bias on the first pass when one is given). Only the tiling
// differs, and no element's value depends on its tile, so the results are
// bit-identical to the AVX2 path's (TestGemmAVX512IsAVX2).
#define T512 "avx512f,avx512vl,avx512bw,avx512dq,avx2,fma"
#define NR5 32
#define MR5 12

// pf_has_avx512 is whether the CPU has AVX-512 F/VL/BW/DQ and FMA and the
// OS saves the opmask and zmm registers (XCR0 bits 5–7, with the SSE and
// AVX state, bits 1–2).
int pf_has_avx512(void) {
	__builtin_cpu_init();
	if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512vl") ||
	    !__builtin_cpu_supports("avx512bw") || !__builtin_cpu_supports("avx512dq") ||
	    !__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma"))
		return 0;
	unsigned a, b, c, d;
	if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_OSXSAVE)) return 0;
	unsigned lo, hi;
	__asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
	return (lo & 0xe6) == 0xe6;
}

// transpose16 transposes the 16×16 block r[0..15] in registers: r[i][j]
// becomes r[j][i] (pairs of rows interleaved, then pairs of pairs, then
// 128-bit lanes, twice).
__attribute__((target(T512)))
static inline void transpose16(__m512 r[16]) {
	__m512 t[16], u[16];
	for (int i = 0; i < 16; i += 2) {
		t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
		t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
	}
	for (int g = 0; g < 16; g += 4) { // u[g+e] lane L: column 4L+e of rows g..g+3
		__m512d t0 = _mm512_castps_pd(t[g]), t1 = _mm512_castps_pd(t[g + 1]);
		__m512d t2 = _mm512_castps_pd(t[g + 2]), t3 = _mm512_castps_pd(t[g + 3]);
		u[g] = _mm512_castpd_ps(_mm512_unpacklo_pd(t0, t2));
		u[g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(t0, t2));
		u[g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(t1, t3));
		u[g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(t1, t3));
	}
	for (int e = 0; e < 4; e++) {
		__m512 a = _mm512_shuffle_f32x4(u[e], u[4 + e], 0x88), b = _mm512_shuffle_f32x4(u[e], u[4 + e], 0xdd);
		__m512 c = _mm512_shuffle_f32x4(u[8 + e], u[12 + e], 0x88), d = _mm512_shuffle_f32x4(u[8 + e], u[12 + e], 0xdd);
		r[e] = _mm512_shuffle_f32x4(a, c, 0x88);
		r[8 + e] = _mm512_shuffle_f32x4(a, c, 0xdd);
		r[4 + e] = _mm512_shuffle_f32x4(b, d, 0x88);
		r[12 + e] = _mm512_shuffle_f32x4(b, d, 0xdd);
	}
}

// pack_b32 copies op(B)[p0:p0+kc, j0:j0+nc] into panels of 32 columns,
// zero-padded: panel q holds row p at bp[q·kc·32 + p·32]. A transposed B
// (an [n×k] weight read as its transpose, in dX = dY·Wᵀ) is copied 16×16
// at a time through transpose16 rather than a float at a time: a copy, so
// the values are the same whatever the order.
__attribute__((target(T512)))
static void pack_b32(int transB, const float *B, int ldb, int p0, int kc, int j0, int nc, float *bp) {
	for (int q = 0; q * NR5 < nc; q++) {
		float *dst = bp + (size_t)q * kc * NR5;
		int w = nc - q * NR5 < NR5 ? nc - q * NR5 : NR5;
		int j = j0 + q * NR5;
		if (!transB) {
			__mmask16 m0 = w >= 16 ? 0xffff : (__mmask16)((1u << w) - 1);
			__mmask16 m1 = w >= 32 ? 0xffff : w > 16 ? (__mmask16)((1u << (w - 16)) - 1) : 0;
			for (int p = 0; p < kc; p++) {
				const float *src = B + (size_t)(p0 + p) * ldb + j;
				float *d = dst + (size_t)p * NR5;
				_mm512_store_ps(d, _mm512_maskz_loadu_ps(m0, src));
				_mm512_store_ps(d + 16, _mm512_maskz_loadu_ps(m1, src + 16));
			}
		} else {
			for (int c0 = 0; c0 < NR5; c0 += 16) { // the panel's two halves of 16 columns
				int wc = w - c0; // columns of op(B) in this half; the rest are zero
				for (int p = 0; p < kc; p += 16) {
					int np = kc - p < 16 ? kc - p : 16;
					__mmask16 pm = np == 16 ? 0xffff : (__mmask16)((1u << np) - 1);
					__m512 r[16];
					for (int c = 0; c < 16; c++)
						r[c] = c < wc ? _mm512_maskz_loadu_ps(pm, B + (size_t)(j + c0 + c) * ldb + p0 + p)
						              : _mm512_setzero_ps();
					transpose16(r);
					for (int i = 0; i < np; i++) _mm512_store_ps(dst + (size_t)(p + i) * NR5 + c0, r[i]);
				}
			}
		}
	}
}

// The micro-kernels: ROWS(X) lists the rows of the block. Row r of A is
// read in place as a[r·rsa + p·csa], through three base pointers (rows
// 0–3, 4–7, 8–11) so that each broadcast is one addressing mode.
#define R12(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
#define R8(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)
#define R4(X) X(0) X(1) X(2) X(3)
#define R1(X) X(0)
#define ACC_DECL(r) __m512 c##r##0 = _mm512_setzero_ps(), c##r##1 = _mm512_setzero_ps();
#define ACC_FMA(r)                                                                           \
	{                                                                                        \
		__m512 x = _mm512_set1_ps(*ROWPTR(r));                                               \
		c##r##0 = _mm512_fmadd_ps(x, b0, c##r##0);                                           \
		c##r##1 = _mm512_fmadd_ps(x, b1, c##r##1);                                           \
	}
#define ACC_ST(r)                                                                            \
	if ((r) < mr) {                                                                          \
		const float *ci = Cin + (size_t)(r) * ldcin;                                         \
		float *co = C + (size_t)(r) * ldc;                                                   \
		if (full) {                                                                          \
			_mm512_storeu_ps(co, _mm512_fmadd_ps(va, c##r##0, _mm512_loadu_ps(ci)));          \
			_mm512_storeu_ps(co + 16, _mm512_fmadd_ps(va, c##r##1, _mm512_loadu_ps(ci + 16))); \
		} else {                                                                             \
			_mm512_mask_storeu_ps(co, m0, _mm512_fmadd_ps(va, c##r##0, _mm512_maskz_loadu_ps(m0, ci)));      \
			_mm512_mask_storeu_ps(co + 16, m1, _mm512_fmadd_ps(va, c##r##1, _mm512_maskz_loadu_ps(m1, ci + 16))); \
		}                                                                                    \
	}
// ROWPTR(r): rows 0–3 from a0, 4–7 from a4, 8–11 from a8, each offset by
// 0, rsa, 2·rsa or 3·rsa.
#define ROWPTR(r) (((r) < 4 ? a0 : (r) < 8 ? a4 : a8) + (((r) & 3) == 0 ? 0 : ((r) & 3) == 1 ? r1 : ((r) & 3) == 2 ? r2 : r3))

// MICRO512 defines a micro-kernel reading B's rows of 32 at b, BSTEP
// floats apart, through LOAD: the packed panel (aligned, 32 apart), or
// (the …u kernels, PF 1) a plain row-major B in place, ldb apart, with
// the row 8 ahead prefetched. In a training step that B (a layer's
// output gradient in dW = xᵀ·g, a weight in y = x·W) was written by
// other ops and comes from L2 or further, and the kernel's samples sat
// on its loads; the Set Transformer step ran 2–4% faster with the
// prefetch (eight interleaved rounds on each side), the GEMM benchmark's
// shapes, whose operands are hot, the same within the noise. A prefetch
// changes no value.
#define MICRO512(NAME, ROWS) MICRO512X(NAME, ROWS, _mm512_load_ps, NR5, 0, )
#define MICRO512U(NAME, ROWS) MICRO512X(NAME, ROWS, _mm512_loadu_ps, ldb, 1, size_t ldb, )
#define MICRO512X(NAME, ROWS, LOAD, BSTEP, PF, ...)                                          \
	__attribute__((target(T512)))                                                            \
	static void NAME(int kc, const float *a, size_t rsa, size_t csa, const float *b, __VA_ARGS__ float alpha, \
	                 const float *Cin, size_t ldcin, float *C, size_t ldc, int mr, int nr) {  \
		const float *a0 = a, *a4 = a + 4 * rsa, *a8 = a + 8 * rsa;                           \
		size_t r1 = rsa, r2 = 2 * rsa, r3 = 3 * rsa;                                         \
		ROWS(ACC_DECL)                                                                       \
		for (int p = 0; p < kc; p++) {                                                       \
			__m512 b0 = LOAD(b), b1 = LOAD(b + 16);                                          \
			if (PF) {                                                                        \
				_mm_prefetch((const char *)(b + 8 * BSTEP), _MM_HINT_T0);                     \
				_mm_prefetch((const char *)(b + 8 * BSTEP + 16), _MM_HINT_T0);                \
			}                                                                                \
			ROWS(ACC_FMA)                                                                    \
			b += BSTEP;                                                                      \
			a0 += csa; a4 += csa; a8 += csa;                                                 \
		}                                                                                    \
		__m512 va = _mm512_set1_ps(alpha);                                                   \
		int full = nr == NR5;                                                                \
		__mmask16 m0 = nr >= 16 ? 0xffff : (__mmask16)((1u << nr) - 1);                      \
		__mmask16 m1 = nr >= 32 ? 0xffff : nr > 16 ? (__mmask16)((1u << (nr - 16)) - 1) : 0; \
		ROWS(ACC_ST)                                                                         \
	}
MICRO512(micro512_12, R12)
MICRO512(micro512_8, R8)
MICRO512(micro512_4, R4)
MICRO512(micro512_1, R1)
MICRO512U(micro512u_12, R12)
MICRO512U(micro512u_8, R8)
MICRO512U(micro512u_4, R4)
MICRO512U(micro512u_1, R1)
#undef ROWPTR
#undef MICRO512
#undef MICRO512U
#undef MICRO512X
#undef ACC_DECL
#undef ACC_FMA
#undef ACC_ST

// sgemm_packed512 is sgemm_packed on the AVX-512 kernels; the same
// contract and the same passes over k. Rows are taken 12 at a time, then a
// block of 8 or 4, then one by one.
// tile512 adds α·op(A)[i0:i1, p0:p0+kc]·op(B)[p0:p0+kc, j0:j1] to C, one
// pass over k (or sets C to the bias plus it, or to it with beta0, on the
// first pass, C unread), op(B)'s
// block packed in panels of 32 columns at bq, panel q holding columns
// j0 + 32q: one pass of sgemm_packed512 and of pf_sgemm_par over a block.
// With bu given (op(B) plain, bu = B + p0·ldb + j0, rows ldbu apart), the
// full panels are read from B in place (the …u micro-kernels) and only
// the last, narrower panel, if any, from bq: the same values, loaded from
// elsewhere.
__attribute__((target(T512)))
static void tile512(int i0, int i1, int j0, int j1, int p0, int kc, float alpha, const float *A, size_t rsa,
                    size_t csa, const float *bq, float *C, int ldc, const float *bias, int beta0, const float *bu,
                    size_t ldbu) {
	const float *a = A + (size_t)p0 * csa;
	for (int i = i0; i < i1;) {
		int left = i1 - i, mr = left >= 12 ? 12 : left >= 8 ? 8 : left >= 4 ? 4 : 1;
		const float *ai = a + (size_t)i * rsa;
		for (int q = 0; j0 + q * NR5 < j1; q++) {
			int j = j0 + q * NR5, nr = j1 - j < NR5 ? j1 - j : NR5;
			float *c = C + (size_t)i * ldc + j;
			const float *cin = c;
			size_t ldcin = (size_t)ldc;
			if (bias && p0 == 0) {
				cin = bias + j;
				ldcin = 0;
			} else if (beta0 && p0 == 0) {
				cin = zero_row;
				ldcin = 0;
			}
			if (bu && nr == NR5) {
				const float *b = bu + (size_t)q * NR5;
				if (mr == 12) micro512u_12(kc, ai, rsa, csa, b, ldbu, alpha, cin, ldcin, c, ldc, mr, nr);
				else if (mr == 8) micro512u_8(kc, ai, rsa, csa, b, ldbu, alpha, cin, ldcin, c, ldc, mr, nr);
				else if (mr == 4) micro512u_4(kc, ai, rsa, csa, b, ldbu, alpha, cin, ldcin, c, ldc, mr, nr);
				else micro512u_1(kc, ai, rsa, csa, b, ldbu, alpha, cin, ldcin, c, ldc, mr, nr);
				continue;
			}
			const float *b = bq + (size_t)q * kc * NR5;
			if (mr == 12) micro512_12(kc, ai, rsa, csa, b, alpha, cin, ldcin, c, ldc, mr, nr);
			else if (mr == 8) micro512_8(kc, ai, rsa, csa, b, alpha, cin, ldcin, c, ldc, mr, nr);
			else if (mr == 4) micro512_4(kc, ai, rsa, csa, b, alpha, cin, ldcin, c, ldc, mr, nr);
			else micro512_1(kc, ai, rsa, csa, b, alpha, cin, ldcin, c, ldc, mr, nr);
		}
		i += mr;
	}
}

// inplace_b is whether the AVX-512 packed path reads op(B)'s full
// panels in place rather than packed: for a plain B, whose rows of 32
// are already what a panel holds. Where few rows of C use each value of
// B (weight gradients, dW = xᵀ·g with g as B) copying it into panels
// cost about a tenth of the product (dW at 64×1024×64 12–15% faster on
// one thread without); with many rows it is a small copy each thread
// saves (1–3%).
static inline int inplace_b(int transB) { return !transB; }

// pack_tail32 packs the last, narrower than 32, panel of a plain
// B[p0:p0+kc, j0:j0+nc] where tile512 expects it in bp (panel nc/32), for
// tile512 with bu: the full panels are read in place.
__attribute__((target(T512)))
static void pack_tail32(const float *B, int ldb, int p0, int kc, int j0, int nc, float *bp) {
	int full = nc / NR5 * NR5;
	if (full < nc) pack_b32(0, B, ldb, p0, kc, j0 + full, nc - full, bp + (size_t)(full / NR5) * kc * NR5);
}

__attribute__((target(T512)))
static int sgemm_packed512(int transA, int transB, int m, int n, int k, float alpha,
                           const float *A, int lda, const float *B, int ldb, float *C, int ldc, const float *bias,
                           int beta0) {
	int ncMax = n < NC ? n : NC;
	int kcMax = k < KC ? k : KC;
	float *bp = grow(&pack_b, &pack_b_cap, (size_t)kcMax * ((ncMax + NR5 - 1) / NR5) * NR5);
	if (!bp) return 0;
	size_t rsa = transA ? 1 : (size_t)lda, csa = transA ? (size_t)lda : 1;
	for (int j0 = 0; j0 < n; j0 += NC) {
		int nc = n - j0 < NC ? n - j0 : NC;
		for (int p0 = 0; p0 < k; p0 += KC) {
			int kc = k - p0 < KC ? k - p0 : KC;
			if (inplace_b(transB)) {
				pack_tail32(B, ldb, p0, kc, j0, nc, bp);
				tile512(0, m, j0, j0 + nc, p0, kc, alpha, A, rsa, csa, bp, C, ldc, bias, beta0,
				        B + (size_t)p0 * ldb + j0, (size_t)ldb);
				continue;
			}
			pack_b32(transB, B, ldb, p0, kc, j0, nc, bp);
			tile512(0, m, j0, j0 + nc, p0, kc, alpha, A, rsa, csa, bp, C, ldc, bias, beta0, NULL, 0);
		}
	}
	return 1;
}

// ---- The AVX-512 direct path ----
//
// The products the packed path leaves to sgemm_avx2 (n < 16 or k < 32:
// the k = 8 input layers, the n = 8 output layers and their gradients)
// run on 16-lane registers on the AVX-512 level, with the AVX2 path's
// arithmetic element for element: per pass over KC values of k, a sum
// from +0 taking one fused multiply-add per p in order, then C ←
// fma(α, sum, C). The last n mod 8 columns, which sgemm_avx2 leaves to
// sgemm_portable, get what that code is inside sgemm_avx2: GCC inlines it
// there and, under the FMA target, contracts its C += (α·a)·b into C ←
// fma(α·a, b, C), one per p in order (tail_fma, written out so that it
// does not hang on the compiler's choice). Only the tiling differs: blocks of up to 64
// columns (the last one masked) and 6–12 rows, enough independent
// accumulators to hide the FMA latency (sgemm_avx2's 4×8 block of n = 8
// has four chains and waits on them), and the bias, or for β = 0 a zero
// row, is the first pass's C, so C is neither copied into nor cleared
// first (TestGemmDirect512IsAVX2).

// zero_row64 is the C a β = 0 direct block adds its first pass to.
static const float zero_row64[64] __attribute__((aligned(64)));

// dblock512 adds α·(R rows of A · B[:, 0:16·V]) to Cin and writes C, the
// last vector of each row masked by mlast; B is row-major with stride
// ldb. Rows of A are read as a[r·rsa + p·csa]. R and V are constants at
// every call, so the accumulators stay in registers.
__attribute__((target(T512), always_inline))
static inline void dblock512(const int R, const int V, int kc, const float *a, size_t rsa, size_t csa,
                             const float *B, size_t ldb, float alpha, const float *Cin, size_t ldcin, float *C,
                             size_t ldc, __mmask16 mlast) {
	__m512 acc[12][4];
	for (int r = 0; r < R; r++)
		for (int v = 0; v < V; v++) acc[r][v] = _mm512_setzero_ps();
	for (int p = 0; p < kc; p++) {
		const float *b = B + (size_t)p * ldb;
		__m512 bv[4];
		for (int v = 0; v < V; v++)
			bv[v] = v == V - 1 ? _mm512_maskz_loadu_ps(mlast, b + 16 * v) : _mm512_loadu_ps(b + 16 * v);
		const float *ap = a + (size_t)p * csa;
		for (int r = 0; r < R; r++) {
			__m512 x = _mm512_set1_ps(ap[(size_t)r * rsa]);
			for (int v = 0; v < V; v++) acc[r][v] = _mm512_fmadd_ps(x, bv[v], acc[r][v]);
		}
	}
	__m512 va = _mm512_set1_ps(alpha);
	for (int r = 0; r < R; r++) {
		const float *ci = Cin + (size_t)r * ldcin;
		float *co = C + (size_t)r * ldc;
		for (int v = 0; v < V; v++) {
			__mmask16 mk = v == V - 1 ? mlast : 0xffff;
			_mm512_mask_storeu_ps(co + 16 * v, mk, _mm512_fmadd_ps(va, acc[r][v], _mm512_maskz_loadu_ps(mk, ci + 16 * v)));
		}
	}
}

// DBLOCK instantiates dblock512 for V vectors: its full row block R and
// the row tails of 4 and 1.
#define DBLOCK(V, R)                                                                                            \
	__attribute__((target(T512))) static void dblock512_##V(int rows, int kc, const float *a, size_t rsa,     \
	                                                        size_t csa, const float *B, size_t ldb, float alpha, \
	                                                        const float *Cin, size_t ldcin, float *C, size_t ldc,   \
	                                                        __mmask16 mlast) {                                  \
		int i = 0;                                                                                              \
		for (; i + R <= rows; i += R)                                                                           \
			dblock512(R, V, kc, a + i * rsa, rsa, csa, B, ldb, alpha, Cin + i * ldcin, ldcin, C + i * ldc, ldc, \
			          mlast);                                                                                   \
		for (; i + 4 <= rows; i += 4)                                                                           \
			dblock512(4, V, kc, a + i * rsa, rsa, csa, B, ldb, alpha, Cin + i * ldcin, ldcin, C + i * ldc, ldc, \
			          mlast);                                                                                   \
		for (; i < rows; i++)                                                                                   \
			dblock512(1, V, kc, a + i * rsa, rsa, csa, B, ldb, alpha, Cin + i * ldcin, ldcin, C + i * ldc, ldc, \
			          mlast);                                                                                   \
	}
DBLOCK(1, 12)
DBLOCK(2, 12)
DBLOCK(3, 8)
DBLOCK(4, 6)
#undef DBLOCK

// tail_fma adds the products of columns the vector blocks leave (fewer
// than 8) as sgemm_avx2's inlined sgemm_portable does: per row and p in
// order, x = α·a(i, p), then c ← fma(x, b, c) per column.
__attribute__((target(T512)))
static void tail_fma(int rows, int nt, int kc, float alpha, const float *A, size_t rsa, size_t csa, const float *B,
                     size_t ldb, float *C, size_t ldc) {
	for (int i = 0; i < rows; i++) {
		float *c = C + (size_t)i * ldc;
		for (int p = 0; p < kc; p++) {
			float x = alpha * A[(size_t)i * rsa + (size_t)p * csa];
			const float *b = B + (size_t)p * ldb;
			for (int j = 0; j < nt; j++) c[j] = __builtin_fmaf(x, b[j], c[j]);
		}
	}
}

// direct512_rows computes rows i0 ≤ i < i1 of C ← α·op(A)·B + β·C (or
// bias + α·op(A)·B, or with β = 0 C unread) on the AVX-512 direct path,
// B [k×n] row-major with stride ldb (a transposed B already copied):
// columns below n8 = n − n mod 8 in 64-column blocks, rows of a block
// 12, 8 or 6 at a time (more rows where fewer vectors, so the
// accumulators fill the registers), then 4, then 1; the last n mod 8
// columns on tail_fma after C is set (bias copied, β applied), as
// sgemm_direct does them.
__attribute__((target(T512)))
static void direct512_rows(int i0, int i1, int n, int k, float alpha, const float *A, size_t rsa, size_t csa,
                           const float *B, size_t ldb, float beta, float *C, size_t ldc, const float *bias) {
	int n8 = n - n % 8, rows = i1 - i0;
	int beta0 = !bias && beta == 0;
	if (rows <= 0) return;
	float *c0 = C + (size_t)i0 * ldc;
	const float *a0 = A + (size_t)i0 * rsa;
	if (!bias && !beta0 && beta != 1) scale_c_float(rows, n8, beta, c0, (int)ldc);
	if (n8 < n) { // the tail columns: C set as sgemm_direct sets it
		for (int i = 0; i < rows; i++) {
			float *c = c0 + (size_t)i * ldc + n8;
			if (bias) memcpy(c, bias + n8, sizeof(float) * (size_t)(n - n8));
			else if (beta0) memset(c, 0, sizeof(float) * (size_t)(n - n8));
			else if (beta != 1) for (int j = 0; j < n - n8; j++) c[j] *= beta;
		}
	}
	for (int p0 = 0; p0 < k; p0 += KC) {
		int kc = k - p0 < KC ? k - p0 : KC;
		const float *a = a0 + (size_t)p0 * csa, *b = B + (size_t)p0 * ldb;
		for (int j0 = 0; j0 < n8; j0 += 64) {
			int w = n8 - j0 < 64 ? n8 - j0 : 64, V = (w + 15) / 16;
			__mmask16 mlast = (__mmask16)(w - 16 * (V - 1) == 16 ? 0xffff : (1u << (w - 16 * (V - 1))) - 1);
			const float *cin = c0 + j0;
			size_t ldcin = ldc;
			if (p0 == 0 && bias) cin = bias + j0, ldcin = 0;
			else if (p0 == 0 && beta0) cin = zero_row64, ldcin = 0;
			float *c = c0 + j0;
			switch (V) {
			case 1: dblock512_1(rows, kc, a, rsa, csa, b + j0, ldb, alpha, cin, ldcin, c, ldc, mlast); break;
			case 2: dblock512_2(rows, kc, a, rsa, csa, b + j0, ldb, alpha, cin, ldcin, c, ldc, mlast); break;
			case 3: dblock512_3(rows, kc, a, rsa, csa, b + j0, ldb, alpha, cin, ldcin, c, ldc, mlast); break;
			default: dblock512_4(rows, kc, a, rsa, csa, b + j0, ldb, alpha, cin, ldcin, c, ldc, mlast);
			}
		}
		if (n8 < n) tail_fma(rows, n - n8, kc, alpha, a, rsa, csa, b + n8, ldb, c0 + n8, ldc);
	}
}

// transpose_b copies B [n×k] (stride ldb) to bt [k×n], as sgemm_direct's
// transposed B.
static void transpose_b(const float *B, int ldb, int n, int k, float *bt) {
	for (int j = 0; j < n; j++)
		for (int p = 0; p < k; p++) bt[(size_t)p * n + j] = B[(size_t)j * ldb + p];
}

// sgemm_direct512 is sgemm_direct on the AVX-512 direct path, the bias
// (if any) fused, k ≥ 1: the same values bit for bit.
static void sgemm_direct512(int transA, int transB, int m, int n, int k, float alpha, const float *A, int lda,
                            const float *B, int ldb, float beta, float *C, int ldc, const float *bias) {
	float *bt = NULL, small[SMALL_BT];
	if (transB) {
		bt = (size_t)k * n <= SMALL_BT ? small : malloc(sizeof(float) * (size_t)k * n);
		if (!bt) oom("transposing B");
		transpose_b(B, ldb, n, k, bt);
		B = bt, ldb = n;
	}
	size_t rsa = transA ? 1 : (size_t)lda, csa = transA ? (size_t)lda : 1;
	direct512_rows(0, m, n, k, alpha, A, rsa, csa, B, (size_t)ldb, beta, C, (size_t)ldc, bias);
	if (bt != small) free(bt);
}

// pf_sgemm takes the packed path when the CPU has AVX2 and FMA and a row
// of C is long enough to fill the micro-kernel. The choice depends on n
// and k only, never on m, so splitting C's rows between threads cannot
// change which code computes an element. With bias given (β is then
// ignored), C ← bias + α·op(A)·op(B), bias repeated on every row: the
// same values as copying bias into C and taking β = 1. With β = 0 the
// packed path neither clears C nor reads it: its first pass adds α·sum
// to zero_row, the values of clearing C first, bit for bit.
//
// level is 0 for the portable C, 1 for AVX2/FMA, 2 for AVX2/FMA with the
// AVX-512 packed kernel (the same values as 1, bit for bit).
void pf_sgemm(int level, int transA, int transB, int m, int n, int k, float alpha,
              const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc,
              const float *bias) {
	int avx2 = level >= 1;
	if (avx2 && n >= NR && k >= 32 && m > 0) {
		int beta0 = !bias && beta == 0;
		if (!bias && !beta0) scale_c_float(m, n, beta, C, ldc);
		if (level >= 2 ? sgemm_packed512(transA, transB, m, n, k, alpha, A, lda, B, ldb, C, ldc, bias, beta0)
		               : sgemm_packed(transA, transB, m, n, k, alpha, A, lda, B, ldb, C, ldc, bias, beta0))
			return;
		if (!bias && !beta0) beta = 1; // no memory for the buffer: fall back, C already scaled
	}
	if (level >= 2 && m > 0 && n > 0 && k > 0) {
		sgemm_direct512(transA, transB, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, bias);
		return;
	}
	if (bias) {
		for (int i = 0; i < m; i++) memcpy(C + (size_t)i * ldc, bias, sizeof(float) * (size_t)n);
		beta = 1;
	}
	sgemm_direct(avx2, transA, transB, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}

// ---- Products shared between threads ----
//
// pf_sgemm_par is one thread's part of a packed float32 product (the
// products pf_sgemm sends to sgemm_packed or sgemm_packed512) that several
// threads compute together. The threads take blocks of work from shared
// counters (ctr, in the caller's memory), so a thread that runs slower,
// or starts late because its core is busy, takes fewer blocks and none
// waits for the other's half. Each element of C is still computed as in
// pf_sgemm: the same micro-kernels, the same passes over k in order,
// whatever block it falls in, so the values depend neither on the number
// of threads nor on which took what.
//
// mode 0 (many rows): the threads take blocks of at most rb rows of C,
// shrinking towards the end (pf_claim_rows), each over
// every column and every pass; a thread packs the whole of B (every pass
// over k, panels of nr columns: pass t at own + t·KC·npad) into its own
// part of bp, worker·k·npad floats in, when it takes its first block, so a
// thread that comes too late to take one packs nothing. (Packing B once
// and sharing it made the threads wait for each other's packing, a wait
// of a whole time slice when the packer's core is taken by another
// process, and read half of B from the other core's cache: 4–10% slower
// at 256×1024×64, no faster at the other shapes of BenchmarkGemmShared,
// to save a copy of B that costs 2/m of the product's work.) mode 1 (few rows
// and many columns, a weight gradient say): the threads take blocks of cw
// columns, each packing its block of B into its own part of bp,
// worker·KC·cw floats in, and computing every row of it (or, with rb >
// 0, rb rows of it: tiles, for products with few columns): no B is
// packed twice but for a tile's. mode 2 (the direct path's products, n <
// 16 or k < 32, which pf_sgemm does not pack): blocks of at most rb rows,
// shrinking as mode 0's, on sgemm_direct or
// direct512_rows (direct_par), so that these go to the helpers in C too
// rather than as a halving of the rows through Go's RunShares. mode 3
// (parts_par: several weight gradients of one input, C in parts of rb
// columns, bias the column sums' output or NULL) is mode 1's blocks inside
// each part.
//
// ctr counts what the threads claimed; the caller zeroes it: in modes 0
// and 2 its 8 bytes (8-byte aligned) are the rows taken from the front
// and from the back (pf_claim_rows), in modes 1 and 3 ctr[0] counts the
// blocks of C taken. bp is 64-byte aligned.
#define CTR_TILE 0

// claim takes the next block number from *c.
static inline int claim(int *c) { return __atomic_fetch_add(c, 1, __ATOMIC_RELAXED); }

// pf_claim_rows takes a block of rows [*i0, *i1) of a product of m rows
// shared by blocks of about rb rows (modes 0 and 2) from the two-ended
// counter at ctr (8 bytes, 8-byte aligned, zeroed: rows taken from the
// front in its low half, from the back in its high half), or returns 0
// when none is left.
// Worker 0, the caller, takes from the front and the helpers from the
// back, so that in the jobs of a step each thread keeps to its own end of
// the rows, whose lines its cache holds from the job before (the heads
// and the range jobs take their elements and chunks so too, pf_claim).
// A block is a quarter of the rows left between the two ends, rounded up
// to a multiple of unit, at most rb and at least a quarter of rb (a
// multiple of unit): guided self-scheduling, so the last blocks, where
// the ends meet, are small and neither thread waits long for the other's,
// but not so small that the counter's cache line, passed between the
// cores at each claim, costs more than they save (blocks of 12 rows
// slowed 512×64×64). A back block starts on a multiple of unit, so it
// may be up to unit − 1 rows longer (the first holds the rows past the
// last multiple). No
// element's value depends on the rows beside it, so whoever takes what,
// the values are pf_sgemm's.
int pf_claim_rows(int *ctr, int worker, int m, int rb, int unit, int *i0, int *i1) {
	long long *c = (long long *)ctr;
	int lo = (rb / 4 + unit - 1) / unit * unit;
	if (lo < unit) lo = unit;
	long long old = __atomic_load_n(c, __ATOMIC_RELAXED);
	for (;;) {
		int front = (int)(old & 0xffffffff), hi = m - (int)(old >> 32), left = hi - front;
		if (left <= 0) return 0;
		int sz = (left / 4 + unit - 1) / unit * unit;
		sz = sz > rb ? rb : sz < lo ? lo : sz;
		if (sz > left) sz = left;
		int r0 = front, r1 = front + sz;
		if (worker != 0) {
			r0 = (hi - sz) / unit * unit;
			if (r0 < front) r0 = front;
			r1 = hi;
		}
		long long next = worker == 0 ? old + (r1 - r0) : old + ((long long)(r1 - r0) << 32);
		if (__atomic_compare_exchange_n(c, &old, next, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
			*i0 = r0, *i1 = r1;
			return 1;
		}
	}
}

// scale_block sets C[i0:i1, j0:j1] ← β·C, the β of pf_sgemm, before its
// first pass (not with a bias, nor with β = 0, whose first passes do not
// read C: they add to the bias or to zero_row).
static void scale_block(int i0, int i1, int j0, int j1, float beta, float *C, int ldc) {
	scale_c_float(i1 - i0, j1 - j0, beta, C + (size_t)i0 * ldc + j0, ldc);
}

// direct_par is mode 2 of pf_sgemm_par: a product on the direct path (n
// < 16 or k < 32, at level 1 or 2) shared by blocks of rb rows; a thread
// that takes a block copies a transposed B to its own k·n floats of bp
// first, once. Each element is computed as pf_sgemm computes it on one
// thread (no element of the direct path depends on the rows beside it).
static void direct_par(int level, int worker, int transA, int transB, int m, int n, int k, float alpha,
                       const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc,
                       const float *bias, float *bp, int rb, int *ctr) {
	int copied = 0, i0, i1;
	size_t rsa = transA ? 1 : (size_t)lda, csa = transA ? (size_t)lda : 1;
	while (pf_claim_rows(ctr, worker, m, rb, 24, &i0, &i1)) {
		if (transB && !copied) {
			float *own = bp + (size_t)worker * k * n;
			transpose_b(B, ldb, n, k, own);
			B = own, ldb = n, transB = 0, copied = 1;
		}
		if (level >= 2) {
			direct512_rows(i0, i1, n, k, alpha, A, rsa, csa, B, (size_t)ldb, beta, C, (size_t)ldc, bias);
			continue;
		}
		float *c = C + (size_t)i0 * ldc;
		float bt = beta;
		if (bias) {
			for (int i = i0; i < i1; i++) memcpy(C + (size_t)i * ldc, bias, sizeof(float) * (size_t)n);
			bt = 1;
		}
		sgemm_direct(1, transA, transB, i1 - i0, n, k, alpha, A + (size_t)i0 * rsa, lda, B, ldb, bt, c, ldc);
	}
}

// colsum_pass adds rows p0 ≤ p < p0 + kc of a plain B's columns j0 ≤ j
// < j1 into db[j] (from +0 when first): each column alone, one float32
// addition per row in order, as vec.c's pf_colsum sums it, so that a
// column's sum carried in db from pass to pass is pf_colsum's value bit
// for bit (a float32 stored and reloaded is unchanged).
__attribute__((target("avx2")))
static void colsum_pass(const float *B, int ldb, int p0, int kc, int j0, int j1, float *db, int first) {
	int j = j0;
	for (; j + 32 <= j1; j += 32) {
		__m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
		if (!first) {
			s0 = _mm256_loadu_ps(db + j), s1 = _mm256_loadu_ps(db + j + 8);
			s2 = _mm256_loadu_ps(db + j + 16), s3 = _mm256_loadu_ps(db + j + 24);
		}
		for (int p = p0; p < p0 + kc; p++) {
			const float *b = B + (size_t)p * ldb + j;
			s0 = _mm256_add_ps(s0, _mm256_loadu_ps(b));
			s1 = _mm256_add_ps(s1, _mm256_loadu_ps(b + 8));
			s2 = _mm256_add_ps(s2, _mm256_loadu_ps(b + 16));
			s3 = _mm256_add_ps(s3, _mm256_loadu_ps(b + 24));
		}
		_mm256_storeu_ps(db + j, s0), _mm256_storeu_ps(db + j + 8, s1);
		_mm256_storeu_ps(db + j + 16, s2), _mm256_storeu_ps(db + j + 24, s3);
	}
	for (; j + 8 <= j1; j += 8) {
		__m256 s0 = first ? _mm256_setzero_ps() : _mm256_loadu_ps(db + j);
		for (int p = p0; p < p0 + kc; p++) s0 = _mm256_add_ps(s0, _mm256_loadu_ps(B + (size_t)p * ldb + j));
		_mm256_storeu_ps(db + j, s0);
	}
	for (; j < j1; j++) {
		__m128 s = first ? _mm_setzero_ps() : _mm_load_ss(db + j);
		for (int p = p0; p < p0 + kc; p++) s = _mm_add_ss(s, _mm_load_ss(B + (size_t)p * ldb + j));
		db[j] = _mm_cvtss_f32(s);
	}
}

// parts_par is mode 3 of pf_sgemm_par: the weight gradients of parts
// that share their input, C_q ← α·op(A)·op(B)[:, q·d:(q+1)·d] for q <
// n/d (β = 0), each part's [m×d] block stored whole after the previous
// one's (rows d apart), in one product: the threads take blocks of at
// most cw columns inside a part, as mode 1 takes them in a part's own
// product, so each element is the same micro-kernel's sum, pass by pass
// over k in order, as pf_sgemm's of that part alone (linear-concat's dw
// made one Gemm a part). With db given (B plain), the thread that takes
// a block also sums its columns of B into db after each pass, while
// they are in cache, pf_colsum's sums bit for bit (the biases'
// gradients), so no second pass reads B.
static void parts_par(int level, int worker, int transA, int transB, int m, int n, int k, float alpha,
                      const float *A, int lda, const float *B, int ldb, float *C, float *db, float *bp, int d,
                      int cw, int *ctr) {
	int wide = level >= 2, passes = (k + KC - 1) / KC, per = (d + cw - 1) / cw, blocks = n / d * per;
	size_t rsa = transA ? 1 : (size_t)lda, csa = transA ? (size_t)lda : 1;
	float *own = bp + (size_t)worker * KC * cw;
	for (int bl; (bl = claim(ctr + CTR_TILE)) < blocks;) {
		int q = bl / per, j0 = q * d + bl % per * cw, end = (q + 1) * d, j1 = end - j0 < cw ? end : j0 + cw;
		// Column j of part q, row i, is at C + q·m·d + i·d + (j − q·d):
		// tile512's c = cq + i·d + j.
		float *cq = C + (size_t)q * d * (m - 1);
		for (int t = 0; t < passes; t++) {
			int p0 = t * KC, kc = k - p0 < KC ? k - p0 : KC;
			if (wide && inplace_b(transB)) {
				pack_tail32(B, ldb, p0, kc, j0, j1 - j0, own);
				tile512(0, m, j0, j1, p0, kc, alpha, A, rsa, csa, own, cq, d, NULL, 1, B + (size_t)p0 * ldb + j0,
				        (size_t)ldb);
			} else if (wide) {
				pack_b32(transB, B, ldb, p0, kc, j0, j1 - j0, own);
				tile512(0, m, j0, j1, p0, kc, alpha, A, rsa, csa, own, cq, d, NULL, 1, NULL, 0);
			} else {
				pack_b_block(transB, B, ldb, p0, kc, j0, j1 - j0, own);
				tile256(0, m, j0, j1, p0, kc, alpha, A, (int)rsa, (int)csa, own, cq, d, NULL, 1);
			}
			if (db && !transB) colsum_pass(B, ldb, p0, kc, j0, j1, db, t == 0);
		}
	}
}

void pf_sgemm_par(int level, int mode, int worker, int transA, int transB, int m, int n, int k, float alpha,
                  const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc,
                  const float *bias, float *bp, int rb, int cw, int *ctr) {
	if (mode == 3) { // rb is the parts' width d, bias the column sums' output (see parts_par)
		parts_par(level, worker, transA, transB, m, n, k, alpha, A, lda, B, ldb, C, (float *)bias, bp, rb, cw, ctr);
		return;
	}
	int wide = level >= 2, nr = wide ? NR5 : NR;
	int rsa = transA ? 1 : lda, csa = transA ? lda : 1;
	int passes = (k + KC - 1) / KC, beta0 = !bias && beta == 0;
	if (mode == 0) {
		int npad = (n + nr - 1) / nr * nr, packed = 0, i0, i1;
		float *own = bp + (size_t)worker * k * npad;
		while (pf_claim_rows(ctr, worker, m, rb, 12, &i0, &i1)) {
			if (!packed) { // B, whole, on the first block this thread takes
				for (int t = 0; t < passes; t++) {
					int p0 = t * KC, kc = k - p0 < KC ? k - p0 : KC;
					if (wide && inplace_b(transB)) pack_tail32(B, ldb, p0, kc, 0, n, own + (size_t)t * KC * npad);
					else if (wide) pack_b32(transB, B, ldb, p0, kc, 0, n, own + (size_t)t * KC * npad);
					else pack_b_block(transB, B, ldb, p0, kc, 0, n, own + (size_t)t * KC * npad);
				}
				packed = 1;
			}
			if (!bias && !beta0) scale_block(i0, i1, 0, n, beta, C, ldc);
			for (int j0 = 0; j0 < n; j0 += NC) {
				int j1 = n - j0 < NC ? n : j0 + NC;
				for (int t = 0; t < passes; t++) {
					int p0 = t * KC, kc = k - p0 < KC ? k - p0 : KC;
					const float *bq = own + (size_t)t * KC * npad + (size_t)j0 * kc;
					if (wide && inplace_b(transB))
						tile512(i0, i1, j0, j1, p0, kc, alpha, A, rsa, csa, bq, C, ldc, bias, beta0,
						        B + (size_t)p0 * ldb + j0, (size_t)ldb);
					else if (wide) tile512(i0, i1, j0, j1, p0, kc, alpha, A, rsa, csa, bq, C, ldc, bias, beta0, NULL, 0);
					else tile256(i0, i1, j0, j1, p0, kc, alpha, A, rsa, csa, bq, C, ldc, bias, beta0);
				}
			}
		}
		return;
	}
	if (mode == 2) {
		direct_par(level, worker, transA, transB, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, bias, bp, rb, ctr);
		return;
	}
	// mode 1: blocks of cw columns, or with rb > 0 tiles of rb rows × cw
	// columns, a column's row tiles one after another (bl = column block
	// · row blocks + row block), for products of so few columns that
	// their column blocks alone are too few to keep both threads busy to
	// the end (dW of 64×64 over k = 1024: two blocks). A tile is computed
	// as a column block is, over its rows only: every pass over k in
	// order, each element one micro-kernel's sum, so the same values.
	float *own = bp + (size_t)worker * KC * cw;
	int rblocks = rb > 0 ? (m + rb - 1) / rb : 1, blocks = (n + cw - 1) / cw * rblocks;
	for (int bl; (bl = claim(ctr + CTR_TILE)) < blocks;) {
		int cb = bl / rblocks, rbk = bl % rblocks;
		int j0 = cb * cw, j1 = n - j0 < cw ? n : j0 + cw;
		int i0 = rb > 0 ? rbk * rb : 0, i1 = rb > 0 && m - i0 > rb ? i0 + rb : m;
		if (!bias && !beta0) scale_block(i0, i1, j0, j1, beta, C, ldc);
		for (int t = 0; t < passes; t++) {
			int p0 = t * KC, kc = k - p0 < KC ? k - p0 : KC;
			if (wide && inplace_b(transB)) {
				pack_tail32(B, ldb, p0, kc, j0, j1 - j0, own);
				tile512(i0, i1, j0, j1, p0, kc, alpha, A, rsa, csa, own, C, ldc, bias, beta0,
				        B + (size_t)p0 * ldb + j0, (size_t)ldb);
			} else if (wide) {
				pack_b32(transB, B, ldb, p0, kc, j0, j1 - j0, own);
				tile512(i0, i1, j0, j1, p0, kc, alpha, A, rsa, csa, own, C, ldc, bias, beta0, NULL, 0);
			} else {
				pack_b_block(transB, B, ldb, p0, kc, j0, j1 - j0, own);
				tile256(i0, i1, j0, j1, p0, kc, alpha, A, rsa, csa, own, C, ldc, bias, beta0);
			}
		}
	}
}
