//go:build cgo && !purego

// One head of attention, forward and backward, in float32 with AVX2/FMA
// (fusedattention.go has the equations). A head's matrices are a few
// dozen rows of 8–64 values: one call computes all its products, each row
// of a result built as a sum of scaled rows (so vector lanes run along a
// result's row), instead of four general matrix products with their call
// and setup costs. Widths d, dv and the key count m are multiples of 8.
#include <string.h>
#include <immintrin.h>
#include "gemm.h"

// axpy_block computes R rows of rows_axpy, each NV vectors wide: R·NV ≤ 8
// independent accumulators hide the FMA latency. R and NV are constants
// at every call, so the loops unroll and the accumulators stay in
// registers.
__attribute__((always_inline, target("avx2,fma")))
static inline void axpy_block(const int R, const int NV, int nt, float alpha, const float *c, int ldc,
                              int cst, const float *x, int ldx, float *out, int ldo) {
	__m256 acc[8];
	for (int i = 0; i < R * NV; i++) acc[i] = _mm256_setzero_ps();
	for (int t = 0; t < nt; t++) {
		const float *xt = x + (size_t)t * ldx;
		for (int r = 0; r < R; r++) {
			__m256 s = _mm256_broadcast_ss(c + (size_t)r * ldc + (size_t)t * cst);
			for (int v = 0; v < NV; v++) acc[r * NV + v] = _mm256_fmadd_ps(s, _mm256_loadu_ps(xt + 8 * v), acc[r * NV + v]);
		}
	}
	__m256 va = _mm256_set1_ps(alpha);
	for (int r = 0; r < R; r++)
		for (int v = 0; v < NV; v++) _mm256_storeu_ps(out + (size_t)r * ldo + 8 * v, _mm256_mul_ps(va, acc[r * NV + v]));
}

#define AXPY_ROWS(R, NV)                                                                       \
	do {                                                                                       \
		int r = 0;                                                                             \
		for (; r + (R) <= nr; r += (R))                                                        \
			axpy_block((R), (NV), nt, alpha, c + (size_t)r * ldc, ldc, cst, x, ldx, out + (size_t)r * ldo, ldo); \
		for (; r < nr; r++)                                                                    \
			axpy_block(1, (NV), nt, alpha, c + (size_t)r * ldc, ldc, cst, x, ldx, out + (size_t)r * ldo, ldo); \
	} while (0)

// rows_axpy sets out[r][:w] = α · Σ_t c[r][t] · x[t][:w] for r < nr, with
// c's rows strided by ldc and its column t at t·cst, x's rows by ldx, out's
// rows by ldo; w a multiple of 8 and at most 64.
__attribute__((target("avx2,fma")))
static void rows_axpy(int nr, int nt, int w, float alpha, const float *c, int ldc, int cst,
                      const float *x, int ldx, float *out, int ldo) {
	switch (w / 8) {
	case 1: AXPY_ROWS(8, 1); break;
	case 2: AXPY_ROWS(4, 2); break;
	case 3: AXPY_ROWS(2, 3); break;
	case 4: AXPY_ROWS(2, 4); break;
	case 5: AXPY_ROWS(1, 5); break;
	case 6: AXPY_ROWS(1, 6); break;
	case 7: AXPY_ROWS(1, 7); break;
	case 8: AXPY_ROWS(1, 8); break;
	}
}

// transpose_rows copies x [rows×w] (rows strided by ldx) into t [w×rows].
static void transpose_rows(const float *x, int ldx, int rows, int w, float *t) {
	for (int r = 0; r < rows; r++)
		for (int c = 0; c < w; c++) t[(size_t)c * rows + r] = x[(size_t)r * ldx + c];
}

#define MAXW 64

// pf_attn_head_fwd: p [n×m] ← softmax(q kᵀ · scale) over visible keys,
// out [n×dv] (rows strided by ldo) ← p v.
__attribute__((target("avx2,fma")))
void pf_attn_head_fwd(const float *q, int ldq, const float *k, int ldk, const float *v, int ldv,
                      int n, int m, int d, int dv, float scale, const float *mask, int causal,
                      float *p, float *out, int ldo) {
	float kt[MAXW * MAXW];
	transpose_rows(k, ldk, m, d, kt); // kt [d×m]
	rows_axpy(n, d, m, scale, q, ldq, 1, kt, m, p, m);
	pf_softmax_rows(p, n, m, mask, causal);
	rows_axpy(n, m, dv, 1, p, m, 1, v, ldv, out, ldo);
}

// pf_attn_head_bwd, with P the weights, G the output gradient:
//   dv = Pᵀ G,  dP = G vᵀ,  dS = P ⊙ (dP − rowsum(P ⊙ dP)),
//   dq = dS k · scale,  dk = dSᵀ q · scale.
__attribute__((target("avx2,fma")))
void pf_attn_head_bwd(const float *q, int ldq, const float *k, int ldk, const float *v, int ldv,
                      const float *g, int ldg, const float *p, int n, int m, int d, int dv, float scale,
                      float *dq, float *dk, float *dvv) {
	float vt[MAXW * MAXW], ds[MAXW * MAXW];
	// dv [m×dv]: row j = Σ_i P[i][j] G[i]
	rows_axpy(m, n, dv, 1, p, 1, m, g, ldg, dvv, ldv);
	// dP [n×m]: row i = Σ_c G[i][c] vᵀ[c]
	transpose_rows(v, ldv, m, dv, vt);
	rows_axpy(n, dv, m, 1, g, ldg, 1, vt, m, ds, m);
	for (int i = 0; i < n; i++) {
		const float *pr = p + (size_t)i * m;
		float *dr = ds + (size_t)i * m;
		__m256 s = _mm256_setzero_ps();
		for (int j = 0; j < m; j += 8) s = _mm256_fmadd_ps(_mm256_loadu_ps(pr + j), _mm256_loadu_ps(dr + j), s);
		__m128 h = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
		h = _mm_add_ps(h, _mm_movehl_ps(h, h));
		h = _mm_add_ss(h, _mm_movehdup_ps(h));
		__m256 dot = _mm256_set1_ps(_mm_cvtss_f32(h));
		for (int j = 0; j < m; j += 8) {
			__m256 pv = _mm256_loadu_ps(pr + j);
			_mm256_storeu_ps(dr + j, _mm256_mul_ps(pv, _mm256_sub_ps(_mm256_loadu_ps(dr + j), dot)));
		}
	}
	// dq [n×d]: row i = scale · Σ_j dS[i][j] k[j]
	rows_axpy(n, m, d, scale, ds, m, 1, k, ldk, dq, ldq);
	// dk [m×d]: row j = scale · Σ_i dS[i][j] q[i]
	rows_axpy(m, n, d, scale, ds, 1, m, q, ldq, dk, ldk);
}
