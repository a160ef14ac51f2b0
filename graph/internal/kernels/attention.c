//go:build cgo && !purego

// One head of attention, forward and backward, in float32 with AVX2/FMA
// (fusedattention.go has the equations). A head's matrices are a few
// dozen rows of 8–64 values: one call computes all its products, each row
// of a result built as a sum of scaled rows (so vector lanes run along a
// result's row), instead of four general matrix products with their call
// and setup costs. Widths d and dv are multiples of 8, at most 64; the key
// count m is any 1 ≤ m ≤ 64: products whose rows run along the keys are
// computed m8 = roundup(m, 8) wide against key rows padded with zeros,
// and only their first m columns are read; n·m8 ≤ 64·64 fits the scratch.
// The weights p and the dropout mask are [n×m], as fusedattention.go
// lays them out.
#include <math.h>
#include <string.h>
#include <immintrin.h>
#include "kernels.h"
#include "simd.h"
#include "bayes.h"

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

// transpose_rows copies x [rows×w] (rows strided by ldx; w a multiple of
// 8) into t [w×ld], t[c][r] = x[r][c], with the padding columns
// rows ≤ r < ld set to 0; ld is rows rounded up to a multiple of 8. It
// works on 8×8 blocks in registers (unpack, shuffle, swap halves): one
// scalar store per element, each to another row of t, costs more than the
// products that read t.
__attribute__((target("avx2,fma")))
static void transpose_rows(const float *x, int ldx, int rows, int w, float *t, int ld) {
	for (int rb = 0; rb < ld; rb += 8) {
		for (int cb = 0; cb < w; cb += 8) {
			__m256 r[8], c[8];
			for (int i = 0; i < 8; i++)
				r[i] = rb + i < rows ? _mm256_loadu_ps(x + (size_t)(rb + i) * ldx + cb) : _mm256_setzero_ps();
			transpose8_regs(r, c);
			for (int i = 0; i < 8; i++)
				_mm256_storeu_ps(t + (size_t)(cb + i) * ld + rb, c[i]);
		}
	}
}

#define MAXW 64

// tail_lanes is the lane mask of the 8 columns from j of a row of m:
// lanes j+l < m.
__attribute__((target("avx2,fma")))
static inline __m256i tail_lanes(int j, int m) {
	return _mm256_cmpgt_epi32(_mm256_set1_epi32(m - j), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// mul_rows sets y[j] = x[j] · d[j] for j < nm (y may be x).
__attribute__((target("avx2,fma")))
static void mul_rows(const float *x, const float *d, float *y, int nm) {
	int j = 0;
	for (; j + 8 <= nm; j += 8)
		_mm256_storeu_ps(y + j, _mm256_mul_ps(_mm256_loadu_ps(x + j), _mm256_loadu_ps(d + j)));
	for (; j < nm; j++) y[j] = x[j] * d[j];
}

// add_rows sets y[j] += x[j] for j < nm.
__attribute__((target("avx2,fma")))
static void add_rows(const float *x, float *y, int nm) {
	int j = 0;
	for (; j + 8 <= nm; j += 8)
		_mm256_storeu_ps(y + j, _mm256_add_ps(_mm256_loadu_ps(y + j), _mm256_loadu_ps(x + j)));
	for (; j < nm; j++) y[j] += x[j];
}

// add_res_rows sets y[r][:w] += x[r][:w] for r < n (x's rows strided by
// ldx, y's by ldy; w a multiple of 8): a head's residual connection (its
// readout += q) or its gradient's (dq += G), added while the rows are in
// cache, one float32 addition each, y's value first, as Go's y += x
// (addResidual in graph/fusedattention.go). The empty asm hands the add y
// as stored, so the compiler cannot fuse it with the product that made y
// into one multiply-add (a different rounding).
__attribute__((target("avx2,fma")))
static void add_res_rows(const float *x, int ldx, float *y, int ldy, int n, int w) {
	for (int r = 0; r < n; r++) {
		float *yr = y + (size_t)r * ldy;
		const float *xr = x + (size_t)r * ldx;
		for (int j = 0; j < w; j += 8) {
			__m256 a = _mm256_loadu_ps(yr + j);
			__asm__("" : "+x"(a));
			_mm256_storeu_ps(yr + j, _mm256_add_ps(a, _mm256_loadu_ps(xr + j)));
		}
	}
}

// attn_head_fwd: p [n×m] ← softmax(q kᵀ · scale + bias) over visible keys,
// out [n×dv] (rows strided by ldo) ← (p ⊙ drop) v, or p v when drop
// [n×m] is NULL. bias [n×m] may be NULL (no bias). p holds the weights
// before dropout.
__attribute__((target("avx2,fma")))
static void attn_head_fwd(const float *q, int ldq, const float *k, int ldk, const float *v, int ldv,
                          int n, int m, int d, int dv, float scale, const float *mask, int causal,
                          const float *bias, const float *drop, float *p, float *out, int ldo, const float *res,
                          int ldr) {
	const int m8 = (m + 7) & ~7;
	float kt[MAXW * MAXW], s[MAXW * MAXW];
	transpose_rows(k, ldk, m, d, kt, m8); // kt [d×m8]
	if (m8 == m) {
		rows_axpy(n, d, m, scale, q, ldq, 1, kt, m, p, m);
	} else {
		rows_axpy(n, d, m8, scale, q, ldq, 1, kt, m8, s, m8); // s [n×m8]
		for (int i = 0; i < n; i++) memcpy(p + (size_t)i * m, s + (size_t)i * m8, sizeof(float) * (size_t)m);
	}
	// the bias is added to every score, masked keys included: the softmax
	// ignores those whatever their value
	if (bias) add_rows(bias, p, n * m);
	pf_softmax_rows(p, n, m, mask, causal);
	const float *w = p;
	if (drop) {
		mul_rows(p, drop, s, n * m);
		w = s;
	}
	rows_axpy(n, m, dv, 1, w, m, 1, v, ldv, out, ldo);
	if (res) add_res_rows(res, ldr, out, ldo, n, dv);
}

// pf_attn_head_fwd: p [n×m] ← softmax(q kᵀ · scale) over visible keys,
// out [n×dv] (rows strided by ldo) ← (p ⊙ drop) v, or p v when drop
// [n×m] is NULL. p holds the weights before dropout. With res (rows
// strided by ldr) not NULL, out += res after: a residual connection
// (add_res_rows).
__attribute__((target("avx2,fma")))
void pf_attn_head_fwd(const float *q, int ldq, const float *k, int ldk, const float *v, int ldv,
                      int n, int m, int d, int dv, float scale, const float *mask, int causal,
                      const float *drop, float *p, float *out, int ldo, const float *res, int ldr) {
	attn_head_fwd(q, ldq, k, ldk, v, ldv, n, m, d, dv, scale, mask, causal, NULL, drop, p, out, ldo, res, ldr);
}

// pf_attn_head_fwd_bias is pf_attn_head_fwd with an additive score bias
// [n×m] (fusedbayes.go: the noise of a Bayesian attention sample):
// p ← softmax(q kᵀ · scale + bias) over the visible keys. The backward
// pass is pf_attn_head_bwd's, from these p.
__attribute__((target("avx2,fma")))
void pf_attn_head_fwd_bias(const float *q, int ldq, const float *k, int ldk, const float *v, int ldv,
                           int n, int m, int d, int dv, float scale, const float *mask, int causal,
                           const float *bias, const float *drop, float *p, float *out, int ldo, const float *res,
                           int ldr) {
	attn_head_fwd(q, ldq, k, ldk, v, ldv, n, m, d, dv, scale, mask, causal, bias, drop, p, out, ldo, res, ldr);
}

// attn_head_bwd, with P the weights [n×m], D the dropout mask [n×m]
// (all ones when drop is NULL) and G the output gradient:
//   dv = (P ⊙ D)ᵀ G,  dP = (G vᵀ) ⊙ D,  dS = P ⊙ (dP − rowsum(P ⊙ dP)) + gx·X,
//   dq = dS k · scale,  dk = dSᵀ q · scale,
// with X [n×m] an extra score gradient (the KL's of Bayesian attention),
// left out when x is NULL. Every caller passes a constant x, so each
// inlined copy keeps only its own branch.
__attribute__((always_inline, target("avx2,fma")))
static inline void attn_head_bwd(const float *q, int ldq, const float *k, int ldk, const float *v, int ldv,
                                 const float *g, int ldg, const float *p, const float *drop, int n, int m, int d,
                                 int dv, float scale, float *dq, float *dk, float *dvv, const float *x, float gx) {
	const int m8 = (m + 7) & ~7;
	float vt[MAXW * MAXW], ds[MAXW * MAXW];
	// dv [m×dv]: row j = Σ_i (P ⊙ D)[i][j] G[i]
	const float *w = p;
	if (drop) {
		mul_rows(p, drop, ds, n * m);
		w = ds;
	}
	rows_axpy(m, n, dv, 1, w, 1, m, g, ldg, dvv, ldv);
	// dP [n×m8]: row i = Σ_c G[i][c] vᵀ[c], columns from m on 0·G
	transpose_rows(v, ldv, m, dv, vt, m8);
	rows_axpy(n, dv, m8, 1, g, ldg, 1, vt, m8, ds, m8);
	const __m256 vgx = _mm256_set1_ps(gx);
	for (int i = 0; i < n; i++) {
		const float *pr = p + (size_t)i * m, *dr0 = drop ? drop + (size_t)i * m : NULL;
		float *dr = ds + (size_t)i * m8;
		__m256 s = _mm256_setzero_ps();
		for (int j = 0; j < m; j += 8) {
			__m256i in = tail_lanes(j, m);
			// columns past m: exactly 0, even when G holds infinities
			__m256 y = _mm256_and_ps(_mm256_castsi256_ps(in), _mm256_loadu_ps(dr + j));
			if (dr0) y = _mm256_mul_ps(y, _mm256_maskload_ps(dr0 + j, in));
			_mm256_storeu_ps(dr + j, y);
			s = _mm256_fmadd_ps(_mm256_maskload_ps(pr + j, in), y, s);
		}
		__m256 dot = _mm256_set1_ps(hsum(s));
		for (int j = 0; j < m; j += 8) {
			__m256i in = tail_lanes(j, m);
			__m256 pv = _mm256_maskload_ps(pr + j, in);
			__m256 r = _mm256_mul_ps(pv, _mm256_sub_ps(_mm256_loadu_ps(dr + j), dot));
			if (x) r = _mm256_fmadd_ps(vgx, _mm256_maskload_ps(x + (size_t)i * m + j, in), r);
			_mm256_storeu_ps(dr + j, r);
		}
	}
	// dq [n×d]: row i = scale · Σ_j dS[i][j] k[j]
	rows_axpy(n, m, d, scale, ds, m8, 1, k, ldk, dq, ldq);
	// dk [m×d]: row j = scale · Σ_i dS[i][j] q[i]
	rows_axpy(m, n, d, scale, ds, 1, m8, q, ldq, dk, ldk);
}

// pf_attn_head_bwd, with P the weights [n×m], D the dropout mask [n×m]
// (all ones when drop is NULL) and G the output gradient:
//   dv = (P ⊙ D)ᵀ G,  dP = (G vᵀ) ⊙ D,  dS = P ⊙ (dP − rowsum(P ⊙ dP)),
//   dq = dS k · scale,  dk = dSᵀ q · scale,
// and with res (rows strided by ldr) not NULL, dq += res after: a
// residual connection's gradient (add_res_rows).
__attribute__((target("avx2,fma")))
void pf_attn_head_bwd(const float *q, int ldq, const float *k, int ldk, const float *v, int ldv,
                      const float *g, int ldg, const float *p, const float *drop, int n, int m, int d, int dv,
                      float scale, float *dq, float *dk, float *dvv, const float *res, int ldr) {
	attn_head_bwd(q, ldq, k, ldk, v, ldv, g, ldg, p, drop, n, m, d, dv, scale, dq, dk, dvv, NULL, 0);
	if (res) add_res_rows(res, ldr, dq, ldq, n, d);
}

// The AVX-512 heads (simdLevel 2): pf_attn_head_fwd512,
// pf_attn_head_fwd_bias512 and pf_attn_head_bwd512 are the heads above
// with their products and softmax 16 lanes wide. A head of width 16 is
// one zmm a row, a row of 32 keys two; widths that are not a multiple of
// 16 end in a masked vector, so the scores go straight into p (no
// padded scratch and copy). Their values are the AVX2 heads' bit for
// bit: each element of a product is the same chain of fused
// multiply-adds in t from 0 then α·sum (rows_axpy512 tiles differently,
// which no element depends on), the softmax is pf_softmax_rows512 (see
// there), and the backward's row dot Σ_j P·dP is summed in 8-lane blocks
// in order (fma_blocks), as attn_head_bwd does.

// axpy_block512 is axpy_block 16 lanes wide: R rows of NV vectors, the
// last of them masked by last; R·NV ≤ 16. R and NV are constants at every
// call, so only the accumulators a0…a(R·NV−1) survive, accumulator i
// holding row i/NV, vector i%NV. They are named variables, not an array:
// gcc keeps an array of zmm on the stack and stores it on every step.
// 16 of them, not 8: two FMA ports of 4 cycles' latency need 8 chains in
// flight at every step, and 8 left no slack for the loads between steps
// (at heads of 16 the products ran at about half the FMA rate).
#define AXPY512_X(v) ((v) == 0 ? x0 : (v) == 1 ? x1 : (v) == 2 ? x2 : x3)
#define AXPY512_STEP(i)                                                                                   \
	if ((i) < R * NV)                                                                                      \
		a##i = _mm512_fmadd_ps(_mm512_set1_ps(ct[(size_t)((i) / NV) * ldc]), AXPY512_X((i) % NV), a##i)
#define AXPY512_STORE(i)                                                                                  \
	if ((i) < R * NV)                                                                                      \
		_mm512_mask_storeu_ps(out + (size_t)((i) / NV) * ldo + 16 * ((i) % NV),                            \
		                      (i) % NV + 1 < NV ? (__mmask16)0xFFFF : last, _mm512_mul_ps(va, a##i))
__attribute__((always_inline)) PF_AVX512
static inline void axpy_block512(const int R, const int NV, __mmask16 last, int nt, float alpha, const float *c,
                                 int ldc, int cst, const float *x, int ldx, float *out, int ldo) {
	__m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0, a8 = a0, a9 = a0,
	       a10 = a0, a11 = a0, a12 = a0, a13 = a0, a14 = a0, a15 = a0;
	for (int t = 0; t < nt; t++) {
		const float *xt = x + (size_t)t * ldx, *ct = c + (size_t)t * cst;
		__m512 x0, x1 = a0, x2 = a0, x3 = a0;
		const __mmask16 l0 = NV == 1 ? last : 0xFFFF, l1 = NV == 2 ? last : 0xFFFF, l2 = NV == 3 ? last : 0xFFFF;
		x0 = _mm512_maskz_loadu_ps(l0, xt);
		if (NV > 1) x1 = _mm512_maskz_loadu_ps(l1, xt + 16);
		if (NV > 2) x2 = _mm512_maskz_loadu_ps(l2, xt + 32);
		if (NV > 3) x3 = _mm512_maskz_loadu_ps(last, xt + 48);
		AXPY512_STEP(0);
		AXPY512_STEP(1);
		AXPY512_STEP(2);
		AXPY512_STEP(3);
		AXPY512_STEP(4);
		AXPY512_STEP(5);
		AXPY512_STEP(6);
		AXPY512_STEP(7);
		AXPY512_STEP(8);
		AXPY512_STEP(9);
		AXPY512_STEP(10);
		AXPY512_STEP(11);
		AXPY512_STEP(12);
		AXPY512_STEP(13);
		AXPY512_STEP(14);
		AXPY512_STEP(15);
	}
	const __m512 va = _mm512_set1_ps(alpha);
	AXPY512_STORE(0);
	AXPY512_STORE(1);
	AXPY512_STORE(2);
	AXPY512_STORE(3);
	AXPY512_STORE(4);
	AXPY512_STORE(5);
	AXPY512_STORE(6);
	AXPY512_STORE(7);
	AXPY512_STORE(8);
	AXPY512_STORE(9);
	AXPY512_STORE(10);
	AXPY512_STORE(11);
	AXPY512_STORE(12);
	AXPY512_STORE(13);
	AXPY512_STORE(14);
	AXPY512_STORE(15);
}

// AXPY512_ROWS runs blocks of R rows, then the rest in blocks of 8, 4, 2, 1.
#define AXPY512_ROWS(R, NV)                                                                                      \
	do {                                                                                                         \
		int r = 0;                                                                                               \
		for (; r + (R) <= nr; r += (R))                                                                          \
			axpy_block512((R), (NV), last, nt, alpha, c + (size_t)r * ldc, ldc, cst, x, ldx, out + (size_t)r * ldo, ldo); \
		if ((R) > 8)                                                                                             \
			for (; r + 8 <= nr; r += 8)                                                                          \
				axpy_block512(8, (NV), last, nt, alpha, c + (size_t)r * ldc, ldc, cst, x, ldx, out + (size_t)r * ldo, ldo); \
		if ((R) > 4)                                                                                             \
			for (; r + 4 <= nr; r += 4)                                                                          \
				axpy_block512(4, (NV), last, nt, alpha, c + (size_t)r * ldc, ldc, cst, x, ldx, out + (size_t)r * ldo, ldo); \
		if ((R) > 2)                                                                                             \
			for (; r + 2 <= nr; r += 2)                                                                          \
				axpy_block512(2, (NV), last, nt, alpha, c + (size_t)r * ldc, ldc, cst, x, ldx, out + (size_t)r * ldo, ldo); \
		for (; r < nr; r++)                                                                                      \
			axpy_block512(1, (NV), last, nt, alpha, c + (size_t)r * ldc, ldc, cst, x, ldx, out + (size_t)r * ldo, ldo); \
	} while (0)

// rows_axpy512 is rows_axpy for any width 1 ≤ w ≤ 64: out[r][:w] =
// α · Σ_t c[r][t] · x[t][:w], reading and writing no column from w on.
// 16 accumulators where w ≤ 32 (see axpy_block512), 8 or more elsewhere.
PF_AVX512
static void rows_axpy512(int nr, int nt, int w, float alpha, const float *c, int ldc, int cst, const float *x,
                         int ldx, float *out, int ldo) {
	const __mmask16 last = lanes16(w - ((w - 1) & ~15));
	switch ((w + 15) / 16) {
	case 1: AXPY512_ROWS(16, 1); break;
	case 2: AXPY512_ROWS(8, 2); break;
	case 3: AXPY512_ROWS(2, 3); break;
	case 4: AXPY512_ROWS(2, 4); break;
	}
}

// transpose_rows512 is transpose_rows (the same t, padding included) 16
// columns at a time: a block of 8 rows × 16 columns is one zmm a row, and
// the 8×8 transpose's unpacks and shuffles work within 128-bit lanes, so
// one pass of them transposes both 8×8 halves; a two-source permute then
// joins each column's two 4-row halves. That is 24 shuffles for 128
// values, against transpose8_regs's 24 for 64: the shuffle port is what
// bounds a transpose.
PF_AVX512
static void transpose_rows512(const float *x, int ldx, int rows, int w, float *t, int ld) {
	// column c of rows 0–3 sits in lane group c%4 of s[c/4]… see below;
	// idx takes lanes 0–3 (then 8–11) of a and the same lanes of b
	const __m512i idx = _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27);
	for (int rb = 0; rb < ld; rb += 8) {
		for (int cb = 0; cb < w; cb += 16) {
			const __mmask16 in = lanes16(w - cb);
			__m512 r[8], u[8], s[8];
			for (int i = 0; i < 8; i++)
				r[i] = rb + i < rows ? _mm512_maskz_loadu_ps(in, x + (size_t)(rb + i) * ldx + cb) : _mm512_setzero_ps();
			for (int i = 0; i < 8; i += 2) {
				u[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
				u[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
			}
			for (int i = 0; i < 8; i += 4) {
				s[i] = _mm512_shuffle_ps(u[i], u[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
				s[i + 1] = _mm512_shuffle_ps(u[i], u[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
				s[i + 2] = _mm512_shuffle_ps(u[i + 1], u[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
				s[i + 3] = _mm512_shuffle_ps(u[i + 1], u[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
			}
			// lane group g (4 floats) of s[i] holds column 4g + i of rows
			// 0–3, of s[i+4] the same of rows 4–7: c[i] below is column
			// cb+i then column cb+8+i of the 8 rows, c[i+4] columns
			// cb+4+i and cb+12+i
			for (int i = 0; i < 4; i++) {
				__m512 lo = _mm512_permutex2var_ps(s[i], idx, s[i + 4]);
				__m512 hi = _mm512_permutex2var_ps(s[i], _mm512_add_epi32(idx, _mm512_set1_epi32(4)), s[i + 4]);
				_mm256_storeu_ps(t + (size_t)(cb + i) * ld + rb, _mm512_castps512_ps256(lo));
				_mm256_storeu_ps(t + (size_t)(cb + 4 + i) * ld + rb, _mm512_castps512_ps256(hi));
				if (cb + 8 < w) {
					_mm256_storeu_ps(t + (size_t)(cb + 8 + i) * ld + rb, _mm512_extractf32x8_ps(lo, 1));
					_mm256_storeu_ps(t + (size_t)(cb + 12 + i) * ld + rb, _mm512_extractf32x8_ps(hi, 1));
				}
			}
		}
	}
}

// softmax_row512 is pf_softmax_rows512's row i on scores held in
// registers: s0 (keys 0–15) and, when NV is 2, s1 (keys 16–31) of a row
// of m ≤ 16·NV keys, scaled and with the bias added as the forward
// stores them (lanes past m unread). It writes the row's weights [m] to
// prow with the same operations in the same order: the max over the
// visible keys (NaN sticks), e^min(0, x − max) on the kept lanes, their
// sum in 8-lane blocks (add_halves, blocks wholly past the visible keys
// skipped as pf_softmax_rows512's loop skips them) then hsum, the
// quotient on lanes before vis, +0 after; a row with no visible key is
// all +0. Only the loads and stores between the passes are gone.
__attribute__((always_inline)) PF_AVX512
static inline void softmax_row512(const int NV, __m512 s0, __m512 s1, int m, int vis, const float *mask,
                                  float *prow) {
	const __m512 ninf = _mm512_set1_ps(-INFINITY), zero = _mm512_setzero_ps();
	const __mmask16 in0 = lanes16(vis), in1 = lanes16(vis - 16);
	__mmask16 keep0 = in0, keep1 = in1;
	if (mask) {
		keep0 = _mm512_mask_cmp_ps_mask(in0, _mm512_maskz_loadu_ps(in0, mask), zero, _CMP_NEQ_UQ);
		if (NV > 1) keep1 = _mm512_mask_cmp_ps_mask(in1, _mm512_maskz_loadu_ps(in1, mask + 16), zero, _CMP_NEQ_UQ);
	}
	const __m512 x0 = _mm512_maskz_mov_ps(in0, s0), x1 = NV > 1 ? _mm512_maskz_mov_ps(in1, s1) : zero;
	__mmask16 nan = _mm512_mask_cmp_ps_mask(keep0, x0, x0, _CMP_UNORD_Q);
	__m512 vmx = _mm512_mask_max_ps(ninf, keep0, ninf, x0);
	if (NV > 1 && vis > 16) {
		nan |= _mm512_mask_cmp_ps_mask(keep1, x1, x1, _CMP_UNORD_Q);
		vmx = _mm512_mask_max_ps(vmx, keep1, vmx, x1);
	}
	const float mx = nan ? NAN : _mm512_reduce_max_ps(vmx);
	const __mmask16 w0 = lanes16(m), w1 = lanes16(m - 16);
	if (mx == -INFINITY) {
		_mm512_mask_storeu_ps(prow, w0, zero);
		if (NV > 1) _mm512_mask_storeu_ps(prow + 16, w1, zero);
		return;
	}
	const __m512 vm = _mm512_set1_ps(mx);
	const __m512 e0 = _mm512_maskz_mov_ps(keep0, exp_le0_512(_mm512_min_ps(zero, _mm512_sub_ps(x0, vm))));
	__m256 z = add_halves(_mm256_setzero_ps(), e0);
	__m512 e1 = zero;
	if (NV > 1 && vis > 16) {
		e1 = _mm512_maskz_mov_ps(keep1, exp_le0_512(_mm512_min_ps(zero, _mm512_sub_ps(x1, vm))));
		z = add_halves(z, e1);
	}
	const __m512 vz = _mm512_set1_ps(hsum(z));
	_mm512_mask_storeu_ps(prow, w0, _mm512_maskz_div_ps(in0, e0, vz));
	if (NV > 1) _mm512_mask_storeu_ps(prow + 16, w1, _mm512_maskz_div_ps(in1, e1, vz));
}

// scores_softmax_block512 is rows_axpy512's block of R query rows of the
// scores (q kᵀ · scale against kt [d×m8]: the same fused multiply-add
// chain over t from 0, then the product with scale) followed by the
// bias and softmax_row512 on each row while it is in registers, where
// attn_head_fwd512 stored the scores, added the bias and ran
// pf_softmax_rows512's three passes over them in memory. Rows i0 … i0+R−1
// of p [n×m]; m ≤ 16·NV, R·NV ≤ 16.
#define SSB_ROW(r)                                                                                          \
	if ((r) < R) {                                                                                          \
		const int i = i0 + (r);                                                                             \
		__m512 s0 = _mm512_mul_ps(va, NV == 1 ? a##r : SSB_A((r) * 2)), s1 = NV == 1 ? s0 : _mm512_mul_ps(va, SSB_A((r) * 2 + 1)); \
		if (bias) {                                                                                         \
			s0 = _mm512_add_ps(s0, _mm512_maskz_loadu_ps(lanes16(m), bias + (size_t)i * m));                \
			if (NV > 1) s1 = _mm512_add_ps(s1, _mm512_maskz_loadu_ps(lanes16(m - 16), bias + (size_t)i * m + 16)); \
		}                                                                                                   \
		softmax_row512(NV, s0, s1, m, causal && i + 1 < m ? i + 1 : m, mask, p + (size_t)i * m);              \
	}
#define SSB_A(i)                                                                                            \
	((i) == 0 ? a0 : (i) == 1 ? a1 : (i) == 2 ? a2 : (i) == 3 ? a3 : (i) == 4 ? a4 : (i) == 5 ? a5 : (i) == 6 ? a6 \
	 : (i) == 7 ? a7 : (i) == 8 ? a8 : (i) == 9 ? a9 : (i) == 10 ? a10 : (i) == 11 ? a11 : (i) == 12 ? a12         \
	 : (i) == 13 ? a13 : (i) == 14 ? a14 : a15)
__attribute__((always_inline)) PF_AVX512
static inline void scores_softmax_block512(const int R, const int NV, int i0, const float *q, int ldq,
                                           const float *kt, int ldk, int d, int m, float scale, const float *mask,
                                           int causal, const float *bias, float *p) {
	__m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0, a8 = a0, a9 = a0,
	       a10 = a0, a11 = a0, a12 = a0, a13 = a0, a14 = a0, a15 = a0;
	const __mmask16 last = lanes16(m - 16 * (NV - 1));
	const float *c = q + (size_t)i0 * ldq;
	for (int t = 0; t < d; t++) {
		const float *xt = kt + (size_t)t * ldk, *ct = c + t;
		const int ldc = ldq;
		__m512 x0, x1 = a0, x2 = a0, x3 = a0;
		x0 = _mm512_maskz_loadu_ps(NV == 1 ? last : (__mmask16)0xFFFF, xt);
		if (NV > 1) x1 = _mm512_maskz_loadu_ps(last, xt + 16);
		(void)x2;
		(void)x3;
		AXPY512_STEP(0);
		AXPY512_STEP(1);
		AXPY512_STEP(2);
		AXPY512_STEP(3);
		AXPY512_STEP(4);
		AXPY512_STEP(5);
		AXPY512_STEP(6);
		AXPY512_STEP(7);
		AXPY512_STEP(8);
		AXPY512_STEP(9);
		AXPY512_STEP(10);
		AXPY512_STEP(11);
		AXPY512_STEP(12);
		AXPY512_STEP(13);
		AXPY512_STEP(14);
		AXPY512_STEP(15);
	}
	const __m512 va = _mm512_set1_ps(scale);
	SSB_ROW(0);
	SSB_ROW(1);
	SSB_ROW(2);
	SSB_ROW(3);
	SSB_ROW(4);
	SSB_ROW(5);
	SSB_ROW(6);
	SSB_ROW(7);
	SSB_ROW(8);
	SSB_ROW(9);
	SSB_ROW(10);
	SSB_ROW(11);
	SSB_ROW(12);
	SSB_ROW(13);
	SSB_ROW(14);
	SSB_ROW(15);
}

// scores_softmax512 sets p [n×m] (m ≤ 32) to softmax(q kᵀ · scale +
// bias) over the visible keys, as rows_axpy512, add_rows and
// pf_softmax_rows512 do in attn_head_fwd512 (the same values bit for
// bit), blocks of 16 rows (m ≤ 16) or 8 (m ≤ 32), then 8, 4, 2, 1.
#define SSB_ROWS(R, NV)                                                                                        \
	do {                                                                                                       \
		int i = 0;                                                                                             \
		for (; i + (R) <= n; i += (R))                                                                         \
			scores_softmax_block512((R), (NV), i, q, ldq, kt, ldk, d, m, scale, mask, causal, bias, p);         \
		if ((R) > 8)                                                                                           \
			for (; i + 8 <= n; i += 8)                                                                         \
				scores_softmax_block512(8, (NV), i, q, ldq, kt, ldk, d, m, scale, mask, causal, bias, p);       \
		if ((R) > 4)                                                                                           \
			for (; i + 4 <= n; i += 4)                                                                         \
				scores_softmax_block512(4, (NV), i, q, ldq, kt, ldk, d, m, scale, mask, causal, bias, p);       \
		if ((R) > 2)                                                                                           \
			for (; i + 2 <= n; i += 2)                                                                         \
				scores_softmax_block512(2, (NV), i, q, ldq, kt, ldk, d, m, scale, mask, causal, bias, p);       \
		for (; i < n; i++)                                                                                     \
			scores_softmax_block512(1, (NV), i, q, ldq, kt, ldk, d, m, scale, mask, causal, bias, p);           \
	} while (0)
PF_AVX512
static void scores_softmax512(int n, int m, int d, float scale, const float *q, int ldq, const float *kt, int ldk,
                              const float *mask, int causal, const float *bias, float *p) {
	if (m <= 16)
		SSB_ROWS(16, 1);
	else
		SSB_ROWS(8, 2);
}

// pf_plan is a batch element's operands and results, as rows of
// floats, to be prefetched into the cache while the element before it
// computes: pf_attn_heads_fwd and _bwd (and pf_bayes_job_run) read a
// head's rows of q, k, v (16 floats, one 64-byte line, at the models'
// width) far apart, first in a transpose or a product whose loads then
// wait on each line in turn (in the Set Transformer step the transposes'
// samples sat at their row loads). The next element's lines are asked for in steps, plan_step
// doing step j of steps: rows [j·rows/steps, (j+1)·rows/steps) of each
// set, between the phases of each head, so the waits for them overlap
// the heads' arithmetic instead of stalling a burst of prefetches. A
// prefetch reads no value into a register and cannot fault, so no result
// changes.
typedef struct {
	const float *x;
	size_t ld;
	int rows, w;
} pf_rows;
typedef struct {
	pf_rows r[10];
	int nr, step, steps;
} pf_plan;

// plan_add adds rows [rows×w] of x (strided by ld) to pl; x NULL adds
// nothing.
static inline void plan_add(pf_plan *pl, const float *x, size_t ld, int rows, int w) {
	if (x && rows > 0 && pl->nr < 10) pl->r[pl->nr++] = (pf_rows){x, ld, rows, w};
}

// plan_add_span adds the floats [0, len) of x to pl, as rows of 16.
static inline void plan_add_span(pf_plan *pl, const float *x, size_t len) {
	plan_add(pl, x, 16, (int)((len + 15) / 16), 16);
}

// plan_step prefetches pl's next step (nothing when pl is NULL or done).
static inline void plan_step(pf_plan *pl) {
	if (!pl || pl->step >= pl->steps) return;
	const int j = pl->step++;
	for (int i = 0; i < pl->nr; i++) {
		const pf_rows *r = &pl->r[i];
		const int r0 = (int)((long)r->rows * j / pl->steps), r1 = (int)((long)r->rows * (j + 1) / pl->steps);
		for (int k = r0; k < r1; k++) {
			const char *a = (const char *)(r->x + (size_t)k * r->ld), *e = a + sizeof(float) * (size_t)r->w;
			for (a = (const char *)((uintptr_t)a & ~(uintptr_t)63); a < e; a += 64) _mm_prefetch(a, _MM_HINT_T0);
		}
	}
}

// plan_rest prefetches the steps pl has left.
static inline void plan_rest(pf_plan *pl) {
	while (pl && pl->step < pl->steps) plan_step(pl);
}

// attn_head_fwd512 is attn_head_fwd with AVX-512. It takes FWD_STEPS
// steps of pl (NULL: none) between its phases.
#define FWD_STEPS 3
PF_AVX512
static void attn_head_fwd512(const float *q, int ldq, const float *k, int ldk, const float *v, int ldv, int n,
                             int m, int d, int dv, float scale, const float *mask, int causal, const float *bias,
                             const float *drop, float *p, float *out, int ldo, const float *res, int ldr,
                             pf_plan *pl) {
	const int m8 = (m + 7) & ~7;
	float kt[MAXW * MAXW], s[MAXW * MAXW];
	plan_step(pl);
	transpose_rows512(k, ldk, m, d, kt, m8); // kt [d×m8]
	plan_step(pl);
	if (m <= 32) {
		scores_softmax512(n, m, d, scale, q, ldq, kt, m8, mask, causal, bias, p); // p [n×m]
	} else {
		rows_axpy512(n, d, m, scale, q, ldq, 1, kt, m8, p, m);
		if (bias) add_rows(bias, p, n * m);
		pf_softmax_rows512(p, n, m, mask, causal);
	}
	plan_step(pl);
	const float *w = p;
	if (drop) {
		mul_rows(p, drop, s, n * m);
		w = s;
	}
	rows_axpy512(n, m, dv, 1, w, m, 1, v, ldv, out, ldo);
	if (res) add_res_rows(res, ldr, out, ldo, n, dv);
}

// pf_attn_head_fwd512 is pf_attn_head_fwd with AVX-512, its values the
// same bit for bit.
PF_AVX512
void pf_attn_head_fwd512(const float *q, int ldq, const float *k, int ldk, const float *v, int ldv, int n, int m,
                         int d, int dv, float scale, const float *mask, int causal, const float *drop, float *p,
                         float *out, int ldo, const float *res, int ldr) {
	attn_head_fwd512(q, ldq, k, ldk, v, ldv, n, m, d, dv, scale, mask, causal, NULL, drop, p, out, ldo, res, ldr, NULL);
}

// pf_attn_head_fwd_bias512 is pf_attn_head_fwd_bias with AVX-512, its
// values the same bit for bit.
PF_AVX512
void pf_attn_head_fwd_bias512(const float *q, int ldq, const float *k, int ldk, const float *v, int ldv, int n,
                              int m, int d, int dv, float scale, const float *mask, int causal, const float *bias,
                              const float *drop, float *p, float *out, int ldo, const float *res, int ldr) {
	attn_head_fwd512(q, ldq, k, ldk, v, ldv, n, m, d, dv, scale, mask, causal, bias, drop, p, out, ldo, res, ldr, NULL);
}

// dscores_row512 is pf_attn_head_bwd512's row loop on row i of dP held in
// registers (y0: keys 0–15, y1: keys 16–31 when NV is 2, as the product
// stores them, 1 · the sum): y ⊙ D, its dot with the row of P over the
// row's 8-lane blocks in order (fma_blocks) then hsum, and dS = P ⊙
// (y − dot) written to dsr on the row's m lanes: the same operations in
// the same order, without the stores and loads of dP between them. With
// xr (the sampled Bayesian head's, no D), dS = P ⊙ (y − dot) + gx·x_i,
// as attn_head_bwd has it.
__attribute__((always_inline)) PF_AVX512
static inline void dscores_row512(const int NV, __m512 y0, __m512 y1, int m, const float *pr, const float *dr0,
                                  const float *xr, __m512 vgx, float *dsr) {
	const __mmask16 in0 = lanes16(m), in1 = lanes16(m - 16);
	y0 = _mm512_maskz_mov_ps(in0, y0);
	if (dr0) y0 = _mm512_mul_ps(y0, _mm512_maskz_loadu_ps(in0, dr0));
	const __m512 p0 = _mm512_maskz_loadu_ps(in0, pr);
	__m256 s = fma_blocks(p0, y0, _mm256_setzero_ps(), m > 8);
	__m512 p1 = p0;
	if (NV > 1) {
		y1 = _mm512_maskz_mov_ps(in1, y1);
		if (dr0) y1 = _mm512_mul_ps(y1, _mm512_maskz_loadu_ps(in1, dr0 + 16));
		p1 = _mm512_maskz_loadu_ps(in1, pr + 16);
		s = fma_blocks(p1, y1, s, m > 24);
	}
	const __m512 dot = _mm512_set1_ps(hsum(s));
	__m512 r0 = _mm512_mul_ps(p0, _mm512_sub_ps(y0, dot));
	if (xr) r0 = _mm512_fmadd_ps(vgx, _mm512_maskz_loadu_ps(in0, xr), r0);
	_mm512_mask_storeu_ps(dsr, in0, r0);
	if (NV > 1) {
		__m512 r1 = _mm512_mul_ps(p1, _mm512_sub_ps(y1, dot));
		if (xr) r1 = _mm512_fmadd_ps(vgx, _mm512_maskz_loadu_ps(in1, xr + 16), r1);
		_mm512_mask_storeu_ps(dsr + 16, in1, r1);
	}
}

// dscores_block512 is rows_axpy512's block of R rows of dP = G vᵀ (vt
// [dv×m8]: the same fused multiply-add chain over c from 0, then 1 · the
// sum) followed by dscores_row512 on each row in registers: rows i0 …
// i0+R−1 of dS [n×m8]; m ≤ 16·NV, R·NV ≤ 16.
#define DSB_ROW(r)                                                                                          \
	if ((r) < R) {                                                                                          \
		const int i = i0 + (r);                                                                             \
		dscores_row512(NV, _mm512_mul_ps(va, NV == 1 ? SSB_A(r) : SSB_A((r) * 2)),                          \
		               NV == 1 ? va : _mm512_mul_ps(va, SSB_A((r) * 2 + 1)), m, p + (size_t)i * m,          \
		               drop ? drop + (size_t)i * m : NULL, x ? x + (size_t)i * m : NULL, vgx,               \
		               ds + (size_t)i * m8);                                                                \
	}
__attribute__((always_inline)) PF_AVX512
static inline void dscores_block512(const int R, const int NV, int i0, const float *g, int ldg, const float *vt,
                                    int m8, int dv, int m, const float *p, const float *drop, const float *x,
                                    __m512 vgx, float *ds) {
	__m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0, a8 = a0, a9 = a0,
	       a10 = a0, a11 = a0, a12 = a0, a13 = a0, a14 = a0, a15 = a0;
	const __mmask16 last = lanes16(m - 16 * (NV - 1));
	const float *c = g + (size_t)i0 * ldg;
	for (int t = 0; t < dv; t++) {
		const float *xt = vt + (size_t)t * m8, *ct = c + t;
		const int ldc = ldg;
		__m512 x0, x1 = a0, x2 = a0, x3 = a0;
		x0 = _mm512_maskz_loadu_ps(NV == 1 ? last : (__mmask16)0xFFFF, xt);
		if (NV > 1) x1 = _mm512_maskz_loadu_ps(last, xt + 16);
		(void)x2;
		(void)x3;
		AXPY512_STEP(0);
		AXPY512_STEP(1);
		AXPY512_STEP(2);
		AXPY512_STEP(3);
		AXPY512_STEP(4);
		AXPY512_STEP(5);
		AXPY512_STEP(6);
		AXPY512_STEP(7);
		AXPY512_STEP(8);
		AXPY512_STEP(9);
		AXPY512_STEP(10);
		AXPY512_STEP(11);
		AXPY512_STEP(12);
		AXPY512_STEP(13);
		AXPY512_STEP(14);
		AXPY512_STEP(15);
	}
	const __m512 va = _mm512_set1_ps(1.0f);
	DSB_ROW(0);
	DSB_ROW(1);
	DSB_ROW(2);
	DSB_ROW(3);
	DSB_ROW(4);
	DSB_ROW(5);
	DSB_ROW(6);
	DSB_ROW(7);
	DSB_ROW(8);
	DSB_ROW(9);
	DSB_ROW(10);
	DSB_ROW(11);
	DSB_ROW(12);
	DSB_ROW(13);
	DSB_ROW(14);
	DSB_ROW(15);
}

// dscores512 sets dS [n×m8] (m ≤ 32) from G, vt, P and the dropout mask
// as pf_attn_head_bwd512's product and row loop do (the same values bit
// for bit), blocks of 16 rows (m ≤ 16) or 8 (m ≤ 32), then 8, 4, 2, 1;
// x [n×m] (NULL: none) adds gx·x to dS (see attn_head_bwd512). Each case
// of x is its own copy of the loops, so the softmax heads' rows test no
// x.
#define DSB_ROWS(R, NV, X)                                                                                     \
	do {                                                                                                       \
		int i = 0;                                                                                             \
		for (; i + (R) <= n; i += (R)) dscores_block512((R), (NV), i, g, ldg, vt, m8, dv, m, p, drop, X, vgx, ds); \
		if ((R) > 8)                                                                                           \
			for (; i + 8 <= n; i += 8) dscores_block512(8, (NV), i, g, ldg, vt, m8, dv, m, p, drop, X, vgx, ds); \
		for (; i + 4 <= n; i += 4) dscores_block512(4, (NV), i, g, ldg, vt, m8, dv, m, p, drop, X, vgx, ds);    \
		for (; i + 2 <= n; i += 2) dscores_block512(2, (NV), i, g, ldg, vt, m8, dv, m, p, drop, X, vgx, ds);    \
		for (; i < n; i++) dscores_block512(1, (NV), i, g, ldg, vt, m8, dv, m, p, drop, X, vgx, ds);            \
	} while (0)
PF_AVX512
static void dscores512(int n, int m, int dv, const float *g, int ldg, const float *vt, int m8, const float *p,
                       const float *drop, const float *x, float gx, float *ds) {
	const __m512 vgx = _mm512_set1_ps(gx);
	if (m <= 16) {
		if (x)
			DSB_ROWS(16, 1, x);
		else
			DSB_ROWS(16, 1, NULL);
	} else {
		if (x)
			DSB_ROWS(8, 2, x);
		else
			DSB_ROWS(8, 2, NULL);
	}
}

// attn_head_bwd512 is pf_attn_head_bwd512's body, taking BWD_STEPS steps
// of pl (NULL: none) between its phases. dS keeps rows m8 apart; only its
// first m columns are written or read. With x [n×m] (the sampled
// Bayesian head's, without dropout) dS gains gx·x, as attn_head_bwd's
// does: each element the AVX2 loop's operations in the same order, a
// row's dot over its 8-lane blocks (fma_blocks).
#define BWD_STEPS 5
PF_AVX512
static void attn_head_bwd512(const float *q, int ldq, const float *k, int ldk, const float *v, int ldv,
                             const float *g, int ldg, const float *p, const float *drop, int n, int m, int d, int dv,
                             float scale, float *dq, float *dk, float *dvv, const float *res, int ldr, const float *x,
                             float gx, pf_plan *pl) {
	const int m8 = (m + 7) & ~7;
	float vt[MAXW * MAXW], ds[MAXW * MAXW];
	plan_step(pl);
	// dv [m×dv]: row j = Σ_i (P ⊙ D)[i][j] G[i]
	const float *w = p;
	if (drop) {
		mul_rows(p, drop, ds, n * m);
		w = ds;
	}
	rows_axpy512(m, n, dv, 1, w, 1, m, g, ldg, dvv, ldv);
	plan_step(pl);
	// dP [n×m]: row i = Σ_c G[i][c] vᵀ[c]
	transpose_rows512(v, ldv, m, dv, vt, m8);
	plan_step(pl);
	if (m <= 32) {
		dscores512(n, m, dv, g, ldg, vt, m8, p, drop, x, gx, ds);
	} else {
		rows_axpy512(n, dv, m, 1, g, ldg, 1, vt, m8, ds, m8);
	}
	plan_step(pl);
	const __m512 vgx = _mm512_set1_ps(gx);
	for (int i = 0; i < n && m > 32; i++) {
		const float *pr = p + (size_t)i * m, *dr0 = drop ? drop + (size_t)i * m : NULL;
		float *dr = ds + (size_t)i * m8;
		__m256 s = _mm256_setzero_ps();
		for (int j = 0; j < m; j += 16) {
			__mmask16 in = lanes16(m - j);
			__m512 y = _mm512_maskz_loadu_ps(in, dr + j);
			if (dr0) y = _mm512_mul_ps(y, _mm512_maskz_loadu_ps(in, dr0 + j));
			_mm512_mask_storeu_ps(dr + j, in, y);
			s = fma_blocks(_mm512_maskz_loadu_ps(in, pr + j), y, s, j + 8 < m);
		}
		const __m512 dot = _mm512_set1_ps(hsum(s));
		const float *xr = x ? x + (size_t)i * m : NULL;
		for (int j = 0; j < m; j += 16) {
			__mmask16 in = lanes16(m - j);
			__m512 r = _mm512_mul_ps(_mm512_maskz_loadu_ps(in, pr + j), _mm512_sub_ps(_mm512_maskz_loadu_ps(in, dr + j), dot));
			if (xr) r = _mm512_fmadd_ps(vgx, _mm512_maskz_loadu_ps(in, xr + j), r);
			_mm512_mask_storeu_ps(dr + j, in, r);
		}
	}
	// dq [n×d]: row i = scale · Σ_j dS[i][j] k[j]
	rows_axpy512(n, m, d, scale, ds, m8, 1, k, ldk, dq, ldq);
	if (res) add_res_rows(res, ldr, dq, ldq, n, d);
	plan_step(pl);
	// dk [m×d]: row j = scale · Σ_i dS[i][j] q[i]
	rows_axpy512(m, n, d, scale, ds, 1, m8, q, ldq, dk, ldk);
}

// pf_attn_head_bwd512 is pf_attn_head_bwd with AVX-512, its values the
// same bit for bit.
PF_AVX512
void pf_attn_head_bwd512(const float *q, int ldq, const float *k, int ldk, const float *v, int ldv, const float *g,
                         int ldg, const float *p, const float *drop, int n, int m, int d, int dv, float scale,
                         float *dq, float *dk, float *dvv, const float *res, int ldr) {
	attn_head_bwd512(q, ldq, k, ldk, v, ldv, g, ldg, p, drop, n, m, d, dv, scale, dq, dk, dvv, res, ldr, NULL, 0, NULL);
}

// heads_fwd_elem runs the forward of batch element bi's heads, all H in
// order, as pf_attn_heads_fwd lays them out (below), with every head's
// weights at p + i·pstride; with AVX-512 it prefetches element nb's
// operands and results as they go (pf_plan), none when nb is not below
// b. Each head is pf_attn_head_fwd(_bias)(512)'s call for it.
static void heads_fwd_elem(const pf_attn_job *j, int bi, int nb, float *p, size_t pstride) {
	const int heads = j->heads, n = j->n, m = j->m, d = j->d, dv = j->dv, ldq = j->ldq, ldk = j->ldk,
	          ldv = j->ldv, ldo = j->ldo;
	const size_t nm = (size_t)n * m, hn = (size_t)heads * nm;
	const float *q = j->q, *k = j->k, *v = j->v, *bias = j->bias, *drop = j->drop;
	float *out = j->out;
	const float *mk = j->mask ? j->mask + (size_t)bi * m : NULL;
	// the next element's operands and results, prefetched while this
	// one's heads compute (see pf_plan)
	pf_plan plan = {.steps = heads * FWD_STEPS}, *pl = NULL;
	if (nb < j->b && j->level >= 2) {
		plan_add(&plan, q + (size_t)nb * n * ldq, ldq, n, heads * d);
		plan_add(&plan, k + (size_t)nb * m * ldk, ldk, m, heads * d);
		plan_add(&plan, v + (size_t)nb * m * ldv, ldv, m, heads * dv);
		plan_add(&plan, out + (size_t)nb * n * ldo, ldo, n, heads * dv);
		if (bias) plan_add_span(&plan, bias + nb * hn, hn);
		if (drop) plan_add_span(&plan, drop + nb * hn, hn);
		if (pstride) plan_add_span(&plan, p + nb * hn, hn);
		pl = &plan;
	}
	for (int h = 0; h < heads; h++) {
		const size_t i = (size_t)bi * heads + h;
		const float *qh = q + (size_t)bi * n * ldq + (size_t)h * d, *kh = k + (size_t)bi * m * ldk + (size_t)h * d,
		            *vh = v + (size_t)bi * m * ldv + (size_t)h * dv;
		const float *bh = bias ? bias + i * nm : NULL, *dh = drop ? drop + i * nm : NULL,
		            *res = j->residual ? qh : NULL;
		float *ph = p + i * pstride, *oh = out + (size_t)bi * n * ldo + (size_t)h * dv;
		if (j->level >= 2)
			attn_head_fwd512(qh, ldq, kh, ldk, vh, ldv, n, m, d, dv, j->scale, mk, j->causal, bh, dh, ph, oh, ldo, res,
			                 ldq, pl);
		else
			attn_head_fwd(qh, ldq, kh, ldk, vh, ldv, n, m, d, dv, j->scale, mk, j->causal, bh, dh, ph, oh, ldo, res,
			              ldq);
	}
	plan_rest(pl);
}

// heads_bwd_elem runs the backward of batch element bi's heads, all H,
// as pf_attn_heads_bwd lays them out; with AVX-512 it prefetches element
// nb's operands and results as they go (none when nb is not below b).
static void heads_bwd_elem(const pf_attn_job *j, int bi, int nb) {
	const int heads = j->heads, n = j->n, m = j->m, d = j->d, dv = j->dv, ldq = j->ldq, ldk = j->ldk,
	          ldv = j->ldv, ldg = j->ldg;
	const size_t nm = (size_t)n * m, hn = (size_t)heads * nm;
	const float *q = j->q, *k = j->k, *v = j->v, *g = j->g, *p = j->p, *drop = j->drop;
	float *dq = j->dq, *dk = j->dk, *dvv = j->dvv;
	pf_plan plan = {.steps = heads * BWD_STEPS}, *pl = NULL;
	if (nb < j->b && j->level >= 2) {
		plan_add(&plan, q + (size_t)nb * n * ldq, ldq, n, heads * d);
		plan_add(&plan, g + (size_t)nb * n * ldg, ldg, n, heads * dv);
		plan_add(&plan, k + (size_t)nb * m * ldk, ldk, m, heads * d);
		plan_add(&plan, v + (size_t)nb * m * ldv, ldv, m, heads * dv);
		plan_add_span(&plan, p + nb * hn, hn);
		if (drop) plan_add_span(&plan, drop + nb * hn, hn);
		plan_add(&plan, dq + (size_t)nb * n * ldq, ldq, n, heads * d);
		plan_add(&plan, dk + (size_t)nb * m * ldk, ldk, m, heads * d);
		plan_add(&plan, dvv + (size_t)nb * m * ldv, ldv, m, heads * dv);
		pl = &plan;
	}
	for (int h = 0; h < heads; h++) {
		const size_t i = (size_t)bi * heads + h;
		const size_t oq = (size_t)bi * n * ldq + (size_t)h * d, ok = (size_t)bi * m * ldk + (size_t)h * d,
		             ov = (size_t)bi * m * ldv + (size_t)h * dv;
		const float *gh = g + (size_t)bi * n * ldg + (size_t)h * dv, *dh = drop ? drop + i * nm : NULL;
		if (j->level >= 2)
			attn_head_bwd512(q + oq, ldq, k + ok, ldk, v + ov, ldv, gh, ldg, p + i * nm, dh, n, m, d, dv, j->scale,
			                 dq + oq, dk + ok, dvv + ov, j->residual ? gh : NULL, ldg, NULL, 0, pl);
		else
			pf_attn_head_bwd(q + oq, ldq, k + ok, ldk, v + ov, ldv, gh, ldg, p + i * nm, dh, n, m, d, dv, j->scale,
			                 dq + oq, dk + ok, dvv + ov, j->residual ? gh : NULL, ldg);
	}
	plan_rest(pl);
}

// pf_attn_heads_fwd runs the heads of batch elements bi = b0, b0 + bstep,
// … < b, all H of each in order, in one call: one cgo call a head (256
// an op in the Set Transformer) cost more in Go's cgo entry and exit than
// some heads' arithmetic. The layout is fusedattention.go's: head (bi, h)
// is i = bi·H + h; its q, k, v start at q + bi·n·ldq + h·d, k + bi·m·ldk
// + h·d, v + bi·m·ldv + h·dv, its readout at out + bi·n·ldo + h·dv, its
// key mask at mask + bi·m (mask NULL: none), its score bias, dropout mask
// and weights at bias, drop, p + i·n·m (NULL: none; pstride 0: every
// head's weights into the same p, a scratch). With residual set, out += q
// after each head (dv = d). level ≥ 2 runs the AVX-512 heads. Each head
// is pf_attn_head_fwd(_bias)(512)'s call for it, so the values are those
// calls' bit for bit. The AVX-512 heads prefetch the next element's
// operands and results as they go (pf_plan).
void pf_attn_heads_fwd(int level, const float *q, int ldq, const float *k, int ldk, const float *v, int ldv,
                       int b0, int bstep, int b, int heads, int n, int m, int d, int dv, float scale,
                       const float *mask, int causal, const float *bias, const float *drop, float *p, int pstride,
                       float *out, int ldo, int residual) {
	const pf_attn_job j = {.level = level, .ldq = ldq, .ldk = ldk, .ldv = ldv, .ldo = ldo, .b = b, .heads = heads,
	                       .n = n, .m = m, .d = d, .dv = dv, .causal = causal, .residual = residual,
	                       .pstride = pstride, .scale = scale, .q = q, .k = k, .v = v, .mask = mask, .bias = bias,
	                       .drop = drop, .p = p, .out = out};
	for (int bi = b0; bi < b; bi += bstep) heads_fwd_elem(&j, bi, bi + bstep, p, (size_t)pstride);
}

// pf_attn_heads_bwd is pf_attn_head_bwd(512) over the heads of batch
// elements bi = b0, b0 + bstep, … < b, all H of each, in one call, laid
// out as pf_attn_heads_fwd's: G (rows strided by ldg) as the readout,
// dq, dk, dv as q, k, v, the weights p and dropout mask drop at i·n·m.
// With residual set, dq += G after each head. The AVX-512 heads prefetch
// the next element's operands and results as they go (pf_plan).
void pf_attn_heads_bwd(int level, const float *q, int ldq, const float *k, int ldk, const float *v, int ldv,
                       const float *g, int ldg, const float *p, const float *drop, int b0, int bstep, int b, int heads,
                       int n, int m, int d, int dv, float scale, float *dq, float *dk, float *dvv, int residual) {
	const pf_attn_job j = {.level = level, .ldq = ldq, .ldk = ldk, .ldv = ldv, .ldg = ldg, .b = b, .heads = heads,
	                       .n = n, .m = m, .d = d, .dv = dv, .residual = residual, .scale = scale, .q = q, .k = k,
	                       .v = v, .g = g, .drop = drop, .p = (float *)p, .dq = dq, .dk = dk, .dvv = dvv};
	for (int bi = b0; bi < b; bi += bstep) heads_bwd_elem(&j, bi, bi + bstep);
}

// pf_attn_heads_run is worker's share of j's heads, forward or (bwd)
// backward, laid out as pf_attn_heads_fwd's and _bwd's: it takes batch
// elements one at a time from the two-ended counter j->ctr (shared by
// every worker of the job; pf_claim: the caller from the front, the
// helpers from the back) until none is left, so that on a shared
// machine a worker whose thread is late or preempted leaves its
// elements to the others rather than a fixed share the caller must wait
// for. It claims each element before it computes the one it holds, so
// that element's rows are prefetched while this one computes (pf_plan);
// a worker holds at most two. With pstride 0 the forward's weights go to
// the worker's own scratch, p + worker·n·m. Each element's values depend
// on its own inputs alone (nothing is summed across elements: every
// head's mask, bias, dropout mask, weights and rows of q, k, v, the
// readout and their gradients are its element's), so they are the same
// whichever worker takes it, in whatever order.
void pf_attn_heads_run(const pf_attn_job *j, int bwd, int worker) {
	float *p = j->pstride ? j->p : j->p + (size_t)worker * j->n * j->m;
	int bi = pf_claim(j->ctr, worker, j->b);
	while (bi >= 0) {
		int nb = pf_claim(j->ctr, worker, j->b);
		if (bwd)
			heads_bwd_elem(j, bi, nb < 0 ? j->b : nb);
		else
			heads_fwd_elem(j, bi, nb < 0 ? j->b : nb, p, (size_t)j->pstride);
		bi = nb;
	}
}

// kl_rows is the row loop of pf_bayes_kl_head on the scores s [n×m8]
// (columns from m on 0): it returns the head's sum, and with grad it
// overwrites s with dS (rows of padded queries 0) and sets colsum [m] and
// agg [2].
__attribute__((always_inline, target("avx2,fma")))
static inline double kl_rows(float *s, int n, int m, const float *mask, const float *qmask, int kind, const float *a,
                             const float *b, float g, int grad, float *colsum, double *agg) {
	const int m8 = (m + 7) & ~7;
	float av[MAXW], bv[MAXW], keep[MAXW], cs[MAXW];
	float sa = 0;
	for (int j = 0; j < m8; j++) {
		int vis = j < m && (!mask || mask[j] != 0);
		keep[j] = vis ? 1.0f : 0.0f;
		av[j] = vis ? a[j] : 0;
		bv[j] = vis && b ? b[j] : 0;
		cs[j] = 0;
		sa += av[j];
	}
	const __m256 zero = _mm256_setzero_ps(), ninf = _mm256_set1_ps(-INFINITY), vsa = _mm256_set1_ps(sa),
	             vg = _mm256_set1_ps(g);
	double total = 0, lsum = 0, agg1 = 0;
	for (int i = 0; i < n; i++) {
		float *sr = s + (size_t)i * m8;
		if (qmask && qmask[i] == 0) {
			if (grad) memset(sr, 0, sizeof(float) * (size_t)m8); // dS row 0
			continue;
		}
		__m256 vmx = ninf;
		for (int j = 0; j < m8; j += 8) {
			__m256 vis = _mm256_cmp_ps(_mm256_loadu_ps(keep + j), zero, _CMP_NEQ_OQ);
			vmx = _mm256_max_ps(vmx, _mm256_blendv_ps(ninf, _mm256_loadu_ps(sr + j), vis));
		}
		float mx = hmax_seq(vmx);
		__m256 vm = _mm256_set1_ps(mx), zs = zero;
		float e[MAXW];
		for (int j = 0; j < m8; j += 8) {
			__m256 vis = _mm256_cmp_ps(_mm256_loadu_ps(keep + j), zero, _CMP_NEQ_OQ);
			__m256 ex = _mm256_and_ps(vis, exp_le0(_mm256_min_ps(zero, _mm256_sub_ps(_mm256_loadu_ps(sr + j), vm))));
			_mm256_storeu_ps(e + j, ex);
			zs = _mm256_add_ps(zs, ex);
		}
		float z = hsum(zs), lse = mx + logf(z);
		__m256 vl = _mm256_set1_ps(lse);
		if (kind == 0) {
			__m256 as = zero, bs = zero;
			for (int j = 0; j < m8; j += 8) {
				__m256 x = _mm256_loadu_ps(sr + j);
				as = _mm256_fmadd_ps(_mm256_loadu_ps(av + j), x, as);
				bs = _mm256_fmadd_ps(_mm256_loadu_ps(bv + j), x, bs);
			}
			total += (double)lse * sa - hsum(as);
			agg1 += hsum(bs);
			if (grad) {
				__m256 vz = _mm256_set1_ps(1 / z);
				for (int j = 0; j < m8; j += 8) {
					__m256 x = _mm256_loadu_ps(sr + j);
					_mm256_storeu_ps(cs + j, _mm256_add_ps(_mm256_loadu_ps(cs + j), x));
					__m256 phi = _mm256_mul_ps(_mm256_loadu_ps(e + j), vz);
					_mm256_storeu_ps(sr + j, _mm256_mul_ps(vg, _mm256_fmsub_ps(phi, vsa, _mm256_loadu_ps(av + j))));
				}
			}
		} else {
			__m256 ds = zero, d2 = zero;
			for (int j = 0; j < m8; j += 8) {
				__m256 vis = _mm256_cmp_ps(_mm256_loadu_ps(keep + j), zero, _CMP_NEQ_OQ);
				__m256 dl = _mm256_and_ps(vis, _mm256_add_ps(_mm256_sub_ps(_mm256_loadu_ps(sr + j), vl), _mm256_loadu_ps(av + j)));
				ds = _mm256_add_ps(ds, dl);
				d2 = _mm256_fmadd_ps(dl, dl, d2);
			}
			float dsum = hsum(ds);
			total += hsum(d2);
			agg1 += dsum;
			if (grad) {
				__m256 vz = _mm256_set1_ps(1 / z), vd = _mm256_set1_ps(dsum);
				for (int j = 0; j < m8; j += 8) {
					__m256 x = _mm256_loadu_ps(sr + j);
					__m256 vis = _mm256_cmp_ps(_mm256_loadu_ps(keep + j), zero, _CMP_NEQ_OQ);
					_mm256_storeu_ps(cs + j, _mm256_add_ps(_mm256_loadu_ps(cs + j), x));
					__m256 dl = _mm256_and_ps(vis, _mm256_add_ps(_mm256_sub_ps(x, vl), _mm256_loadu_ps(av + j)));
					__m256 phi = _mm256_mul_ps(_mm256_loadu_ps(e + j), vz);
					_mm256_storeu_ps(sr + j, _mm256_mul_ps(vg, _mm256_fnmadd_ps(phi, vd, dl)));
				}
			}
		}
		lsum += lse;
	}
	if (!grad) return total;
	agg[0] = lsum;
	agg[1] = agg1;
	for (int j = 0; j < m; j++) colsum[j] = cs[j];
	return total;
}

// pf_bayes_kl_head computes one head of the KL of Bayesian attention
// (fusedbayes.go, BayesAttentionKL) without a causal mask: the scores
// s = q kᵀ·scale [n×m], and for each real query i (qmask[i] ≠ 0, or all
// when qmask is NULL), over the visible keys V (mask[j] ≠ 0, or all),
// lse_i = log Σ_{j∈V} e^{s_ij} and φ_ij = e^{s_ij − lse_i}. a and b are
// per-key coefficients [m], 0 at masked keys; sa = Σ_j a_j.
//   kind 0 (Weibull; a = α, b = α where the floor does not hold α, else 0):
//     returns Σ_i (lse_i·sa − Σ_j a_j s_ij);
//     backward: dS_ij = g (φ_ij·sa − a_j), agg[1] = Σ_i Σ_j b_j s_ij.
//   kind 1 (log-normal; a_j = shift − log p_j): δ_ij = s_ij − lse_i + a_j,
//     returns Σ_i Σ_{j∈V} δ_ij²;
//     backward: dS_ij = g (δ_ij − φ_ij D_i), D_i = Σ_{j∈V} δ_ij, agg[1] = Σ_i D_i.
// The backward runs when dq is not NULL: it also sets agg[0] = Σ_i lse_i and
// colsum[j] = Σ_i s_ij over the real queries, and writes dq = dS k·scale,
// dk = dSᵀ q·scale (strided as q and k), and returns 0. Sizes as for
// pf_attn_head_fwd (d a multiple of 8 up to 64, m ≤ 64, n·m8 ≤ 64·64).
__attribute__((target("avx2,fma")))
double pf_bayes_kl_head(const float *q, int ldq, const float *k, int ldk, int n, int m, int d, float scale,
                        const float *mask, const float *qmask, int kind, const float *a, const float *b, float g,
                        float *dq, float *dk, float *colsum, double *agg) {
	const int m8 = (m + 7) & ~7;
	float kt[MAXW * MAXW], s[MAXW * MAXW];
	transpose_rows(k, ldk, m, d, kt, m8); // kt [d×m8]
	rows_axpy(n, d, m8, scale, q, ldq, 1, kt, m8, s, m8); // s [n×m8], columns from m on 0
	double total = kl_rows(s, n, m, mask, qmask, kind, a, b, g, dq != NULL, colsum, agg);
	if (!dq) return total;
	// dq [n×d]: row i = scale · Σ_j dS[i][j] k[j]
	rows_axpy(n, m, d, scale, s, m8, 1, k, ldk, dq, ldq);
	// dk [m×d]: row j = scale · Σ_i dS[i][j] q[i]
	rows_axpy(m, n, d, scale, s, 1, m8, q, ldq, dk, ldk);
	return 0;
}

// store_row stores the 8 lanes y at row + j of a row of m values, where
// the lanes past m may spill into the next row (which is written after),
// except in the last row (last set), whose tail is stored masked.
__attribute__((target("avx2,fma")))
static inline void store_row(float *row, int j, int m, int last, __m256 y) {
	if (j + 8 <= m || !last) {
		_mm256_storeu_ps(row + j, y);
	} else {
		_mm256_maskstore_ps(row + j, tail_lanes(j, m), y);
	}
}

// bayes_axpy is rows_axpy (w a multiple of 8), or rows_axpy512 at
// level ≥ 2: per element of out the same fused multiply-adds from +0 in
// the same order of t, then the same product by α, so the same bits; the
// 512 blocks only tile more rows and columns at once.
__attribute__((target("avx2,fma")))
static void bayes_axpy(int level, int nr, int nt, int w, float alpha, const float *c, int ldc, int cst,
                       const float *x, int ldx, float *out, int ldo) {
	if (level >= 2) {
		rows_axpy512(nr, nt, w, alpha, c, ldc, cst, x, ldx, out, ldo);
	} else {
		rows_axpy(nr, nt, w, alpha, c, ldc, cst, x, ldx, out, ldo);
	}
}

// The sampled head's row loops 16 lanes wide (level ≥ 2), each element
// with the same operations in the same order as pf_bayes_attn_head's
// AVX2 loops, so the same bits: log_fast512 and exp_le0_512 are
// log_fast and exp_le0 lane for lane; a row's running
// max, sums and dot run over its 8-lane blocks in the AVX2 order
// (bayes_max_halves, add_halves, fma_halves: a 16-lane block is the low
// 8-lane block then the high one; a row ending in half a block adds the
// low half alone), since maxps keeps its second operand among equal
// zeros and the sums round block by block. Lanes past the row are masked,
// not read (the AVX2 loops read and wrote them as padding nobody uses).

// bayes_vis512 is the visible-key mask of the 16 keys from j: vis holds
// all-ones or 0 per key, m8 keys.
__attribute__((always_inline)) PF_AVX512
static inline __mmask16 bayes_vis512(const float *vis, int j, int m8) {
	return _mm512_movepi32_mask(_mm512_castps_si512(_mm512_maskz_loadu_ps(lanes16(m8 - j), vis + j)));
}

// bayes_max_halves is s ← max(s, low 8 lanes of y), then with full the
// same with the high 8: the AVX2 loops' running max over their blocks.
__attribute__((always_inline)) PF_AVX512
static inline __m256 bayes_max_halves(__m256 s, __m512 y, int full) {
	s = _mm256_max_ps(s, _mm512_castps512_ps256(y));
	return full ? _mm256_max_ps(s, _mm512_extractf32x8_ps(y, 1)) : s;
}

// bayes_sample_rows512 is pf_bayes_attn_head's sample on 16 lanes: for
// each row i of s [n×m8], e_i ← s_i + b_i at the visible keys (−∞
// elsewhere), b the noise term of noise [n×m] (kind 0, Weibull:
// nscale·log(−log u); kind 1: nscale·ε), then p_i [m] ← its softmax, or 0
// when its max is −∞. It runs pass by pass over all the rows (the terms
// and maxima, then the exponentials and sums, then the quotients), not
// row by row: a row's passes wait on each other's reductions, and the
// noise's two logarithms are long chains, so rows taken one at a time
// left the cores waiting on latency; each element's operations are the
// same either way.
__attribute__((noinline)) PF_AVX512
static void bayes_sample_rows512(int n, int m, const float *s, const float *noise, const float *vis, int kind,
                                 float nscale, float *e, float *p) {
	const int m8 = (m + 7) & ~7;
	const __m512 ninf = _mm512_set1_ps(-INFINITY), one = _mm512_set1_ps(1.0f), zero = _mm512_setzero_ps(),
	             vn = _mm512_set1_ps(nscale);
	float rmx[MAXW * MAXW / 8], rz[MAXW * MAXW / 8];
	for (int i = 0; i < n; i++) {
		const float *sr = s + (size_t)i * m8, *ur = noise + (size_t)i * m;
		float *er = e + (size_t)i * m8;
		__m256 vmx = _mm256_set1_ps(-INFINITY);
		__mmask16 nan = 0;
		for (int j = 0; j < m8; j += 16) {
			const __mmask16 in = lanes16(m8 - j);
			__m512 u = _mm512_mask_loadu_ps(one, lanes16(m - j), ur + j);
			__m512 bias = kind == 0 ? weibull_bias_fast512(u, vn) : _mm512_mul_ps(vn, u);
			__m512 y = _mm512_mask_blend_ps(bayes_vis512(vis, j, m8), ninf,
			                                _mm512_add_ps(_mm512_maskz_loadu_ps(in, sr + j), bias));
			_mm512_mask_storeu_ps(er + j, in, y);
			nan |= _mm512_mask_cmp_ps_mask(in, y, y, _CMP_UNORD_Q);
			vmx = bayes_max_halves(vmx, y, j + 8 < m8);
		}
		rmx[i] = nan ? NAN : hmax_nan(vmx);
	}
	for (int i = 0; i < n; i++) {
		float *er = e + (size_t)i * m8;
		if (rmx[i] == -INFINITY) continue; // no visible key, or all weighted 0 by the noise
		__m512 vm = _mm512_set1_ps(rmx[i]);
		__m256 zs = _mm256_setzero_ps();
		for (int j = 0; j < m8; j += 16) {
			const __mmask16 in = lanes16(m8 - j);
			__m512 ex = _mm512_maskz_mov_ps(bayes_vis512(vis, j, m8),
			                                exp_le0_512(_mm512_min_ps(zero, _mm512_sub_ps(_mm512_maskz_loadu_ps(in, er + j), vm))));
			_mm512_mask_storeu_ps(er + j, in, ex);
			zs = j + 8 < m8 ? add_halves(zs, ex) : _mm256_add_ps(zs, _mm512_castps512_ps256(ex));
		}
		rz[i] = hsum(zs);
	}
	for (int i = 0; i < n; i++) {
		const float *er = e + (size_t)i * m8;
		float *pr = p + (size_t)i * m;
		if (rmx[i] == -INFINITY) {
			memset(pr, 0, sizeof(float) * (size_t)m);
			continue;
		}
		__m512 vz = _mm512_set1_ps(rz[i]);
		for (int j = 0; j < m8; j += 16)
			_mm512_mask_storeu_ps(pr + j, lanes16(m - j),
			                      _mm512_div_ps(_mm512_maskz_loadu_ps(lanes16(m8 - j), er + j), vz));
	}
}

// bayes_kl_sums512 is pf_bayes_attn_head's KL phase 1 on 16 lanes: each
// real row's maximum (rmx), exponentials (into e), their sum (rz) and the
// sums r1, r2 (kind 0: Σ a s and Σ b s; kind 1: Σ y and Σ y², y = s −
// max + a at the visible keys); rz is 1 in the padded queries' rows. The
// maxima are taken for all the rows first, as bayes_sample_rows512 does.
__attribute__((noinline)) PF_AVX512
static void bayes_kl_sums512(int n, int m, const float *s, const float *vis, const float *av, const float *bv,
                             const float *qmask, int kind, float *e, float *rmx, float *rz, float *r1, float *r2) {
	const int m8 = (m + 7) & ~7;
	const __m512 ninf = _mm512_set1_ps(-INFINITY), zero = _mm512_setzero_ps();
	for (int i = 0; i < n; i++) {
		if (qmask && qmask[i] == 0) continue;
		const float *sr = s + (size_t)i * m8;
		__m256 vmx = _mm256_set1_ps(-INFINITY);
		for (int j = 0; j < m8; j += 16)
			vmx = bayes_max_halves(vmx, _mm512_mask_blend_ps(bayes_vis512(vis, j, m8), ninf,
			                                                 _mm512_maskz_loadu_ps(lanes16(m8 - j), sr + j)),
			                       j + 8 < m8);
		rmx[i] = hmax_nan(vmx);
	}
	for (int i = 0; i < n; i++) {
		rz[i] = 1;
		if (qmask && qmask[i] == 0) continue;
		const float *sr = s + (size_t)i * m8;
		float *er = e + (size_t)i * m8;
		__m512 vm = _mm512_set1_ps(rmx[i]);
		__m256 zs = _mm256_setzero_ps(), s1 = zs, s2 = zs;
		for (int j = 0; j < m8; j += 16) {
			const __mmask16 in = lanes16(m8 - j), keep = bayes_vis512(vis, j, m8);
			const int full = j + 8 < m8;
			__m512 sv = _mm512_maskz_loadu_ps(in, sr + j);
			__m512 ex = _mm512_maskz_mov_ps(keep, exp_le0_512(_mm512_min_ps(zero, _mm512_sub_ps(sv, vm))));
			_mm512_mask_storeu_ps(er + j, in, ex);
			zs = full ? add_halves(zs, ex) : _mm256_add_ps(zs, _mm512_castps512_ps256(ex));
			__m512 a = _mm512_maskz_loadu_ps(in, av + j);
			if (kind == 0) {
				__m512 b = _mm512_maskz_loadu_ps(in, bv + j);
				s1 = fma_blocks(a, sv, s1, full);
				s2 = fma_blocks(b, sv, s2, full);
			} else {
				__m512 y = _mm512_maskz_mov_ps(keep, _mm512_add_ps(_mm512_sub_ps(sv, vm), a));
				if (full) {
					s1 = add_halves(s1, y);
					s2 = fma_halves(y, y, s2);
				} else {
					__m256 yl = _mm512_castps512_ps256(y);
					s1 = _mm256_add_ps(s1, yl);
					s2 = _mm256_fmadd_ps(yl, yl, s2);
				}
			}
		}
		rz[i] = hsum(zs), r1[i] = hsum(s1), r2[i] = hsum(s2);
	}
}

// bayes_kl_x_rows512 is pf_bayes_attn_head's KL phase 3 on 16 lanes, its
// rows' coefficients made before by the AVX2 code: for each real row i,
// cs [m8, 64-byte aligned] += s_i, and x_i [m] ← g·(e_i·f_i − a) (kind
// 0, f_i = sa/z_i) or g·(δ_i − e_i·f_i) with δ_i = s_i − lse_i + a at the
// visible keys (kind 1, f_i = D_i/z_i); the padded queries' rows of x 0.
__attribute__((noinline)) PF_AVX512
static void bayes_kl_x_rows512(int kind, int n, int m, const float *s, const float *e, const float *vis,
                               const float *av, const float *qmask, const float *f, const float *lse, float g,
                               float *cs, float *x) {
	const int m8 = (m + 7) & ~7;
	const __m512 vg = _mm512_set1_ps(g);
	for (int i = 0; i < n; i++) {
		float *xr = x + (size_t)i * m;
		if (qmask && qmask[i] == 0) {
			memset(xr, 0, sizeof(float) * (size_t)m);
			continue;
		}
		const float *sr = s + (size_t)i * m8, *er = e + (size_t)i * m8;
		const __m512 vf = _mm512_set1_ps(f[i]), vl = _mm512_set1_ps(lse[i]);
		for (int j = 0; j < m8; j += 16) {
			const __mmask16 in = lanes16(m8 - j);
			__m512 sv = _mm512_maskz_loadu_ps(in, sr + j), a = _mm512_maskz_loadu_ps(in, av + j);
			_mm512_store_ps(cs + j, _mm512_add_ps(_mm512_load_ps(cs + j), sv));
			__m512 y;
			if (kind == 0) {
				y = _mm512_fmsub_ps(_mm512_maskz_loadu_ps(in, er + j), vf, a);
			} else {
				__m512 dl = _mm512_maskz_mov_ps(bayes_vis512(vis, j, m8), _mm512_add_ps(_mm512_sub_ps(sv, vl), a));
				y = _mm512_fnmadd_ps(_mm512_maskz_loadu_ps(in, er + j), vf, dl);
			}
			_mm512_mask_storeu_ps(xr + j, lanes16(m - j), _mm512_mul_ps(vg, y));
		}
	}
}

// pf_bayes_attn_head computes one head of a Bayesian attention sample and
// its KL (fusedbayessample.go, BayesAttentionSample) without a causal
// mask, from one product of scores s = q kᵀ·scale:
//   the sample:  p [n×m] ← softmax(s + b) over the visible keys, with the
//                noise term b = nscale·log(−log u) (kind 0, Weibull;
//                weibull_bias_fast) or nscale·ε (kind 1, log-normal) from
//                noise [n×m]; out [n×dv] (rows strided by ldo) ← p v;
//   the KL:      over each real query's visible keys, with
//                lse_i = log Σ_j e^{s_ij} and φ_ij = e^{s_ij − lse_i}, and
//                the per-key coefficients a, b [m] (0 at masked keys),
//                sa = Σ_j a_j, as pf_bayes_kl_head computes it:
//     kind 0: returns Σ_i (lse_i·sa − Σ_j a_j s_ij);
//             x_ij = g (φ_ij·sa − a_j), agg[1] = Σ_i Σ_j b_j s_ij;
//     kind 1: δ_ij = s_ij − lse_i + a_j, returns Σ_i Σ_j δ_ij²;
//             x_ij = g (δ_ij − φ_ij D_i), D_i = Σ_j δ_ij, agg[1] = Σ_i D_i;
//   and agg[0] = Σ_i lse_i, colsum[j] = Σ_i s_ij over the real queries;
//   x [n×m] is 0 in the rows of padded queries.
// A row's maximum, exponentials and sums take one pass over its keys
// for the sample and one for the KL (Σ δ² and D_i from the sums of
// y = s − max + a and y²), and the KL's row logarithms are taken 8 rows
// at a time. The backward pass is pf_bayes_head_bwd's. Sizes as for
// pf_attn_head_fwd. level ≥ 2 takes the AVX-512 transpose and products
// (bayes_axpy), the same values bit for bit.
__attribute__((target("avx2,fma")))
static double pf_bayes_attn_head(int level, const float *q, int ldq, const float *k, int ldk, const float *v,
                                 int ldv, int n, int m, int d, int dv, float scale, const float *mask,
                                 const float *qmask, const float *noise, int kind, float nscale, const float *a,
                                 const float *b, float g, float *p, float *x, float *out, int ldo, float *colsum,
                                 double *agg, pf_plan *pl) {
	const int m8 = (m + 7) & ~7;
	float kt[MAXW * MAXW], s[MAXW * MAXW], e[MAXW * MAXW];
	if (level >= 2) {
		transpose_rows512(k, ldk, m, d, kt, m8); // kt [d×m8]
	} else {
		transpose_rows(k, ldk, m, d, kt, m8);
	}
	bayes_axpy(level, n, d, m8, scale, q, ldq, 1, kt, m8, s, m8); // s [n×m8], columns from m on 0
	float vis[MAXW], av[MAXW], bv[MAXW];
	float sa = 0;
	int nv = 0;
	for (int j = 0; j < m8; j++) {
		int on = j < m && (!mask || mask[j] != 0);
		union { int i; float f; } bits = {on ? -1 : 0};
		vis[j] = bits.f;
		av[j] = on ? a[j] : 0;
		bv[j] = on && b ? b[j] : 0;
		sa += av[j];
		nv += on;
	}
	const __m256 zero = _mm256_setzero_ps(), ninf = _mm256_set1_ps(-INFINITY), one = _mm256_set1_ps(1.0f);
	const __m256 vn = _mm256_set1_ps(nscale);
	// the sample: e ← s + b at the visible keys (−∞ elsewhere), then its
	// softmax into p
	if (level >= 2) bayes_sample_rows512(n, m, s, noise, vis, kind, nscale, e, p);
	plan_step(pl);
	for (int i = 0; i < n && level < 2; i++) {
		const float *sr = s + (size_t)i * m8, *ur = noise + (size_t)i * m;
		float *er = e + (size_t)i * m8;
		int last = i + 1 == n;
		__m256 vmx = ninf, nan = zero;
		for (int j = 0; j < m8; j += 8) {
			__m256 vm = _mm256_loadu_ps(vis + j);
			__m256 u = j + 8 <= m || !last ? _mm256_loadu_ps(ur + j)
			                               : _mm256_blendv_ps(one, _mm256_maskload_ps(ur + j, tail_lanes(j, m)),
			                                                  _mm256_castsi256_ps(tail_lanes(j, m)));
			__m256 bias = kind == 0 ? weibull_bias_fast(u, vn) : _mm256_mul_ps(vn, u);
			__m256 y = _mm256_blendv_ps(ninf, _mm256_add_ps(_mm256_loadu_ps(sr + j), bias), vm);
			_mm256_storeu_ps(er + j, y);
			nan = _mm256_or_ps(nan, _mm256_cmp_ps(y, y, _CMP_UNORD_Q));
			vmx = _mm256_max_ps(vmx, y);
		}
		float mx = _mm256_movemask_ps(nan) ? NAN : hmax_nan(vmx);
		float *pr = p + (size_t)i * m;
		if (mx == -INFINITY) { // no visible key, or all weighted 0 by the noise
			memset(pr, 0, sizeof(float) * (size_t)m);
			continue;
		}
		__m256 vm = _mm256_set1_ps(mx), zs = zero;
		for (int j = 0; j < m8; j += 8) {
			__m256 ex = _mm256_and_ps(_mm256_loadu_ps(vis + j),
			                          exp_le0(_mm256_min_ps(zero, _mm256_sub_ps(_mm256_loadu_ps(er + j), vm))));
			_mm256_storeu_ps(er + j, ex);
			zs = _mm256_add_ps(zs, ex);
		}
		__m256 vz = _mm256_set1_ps(hsum(zs));
		for (int j = 0; j < m8; j += 8) store_row(pr, j, m, last, _mm256_div_ps(_mm256_loadu_ps(er + j), vz));
	}
	bayes_axpy(level, n, m, dv, 1, p, m, 1, v, ldv, out, ldo);
	// the KL, phase 1: each real row's maximum, exponentials (into e) and
	// sums
	float rmx[MAXW * MAXW / 8], rz[MAXW * MAXW / 8], r1[MAXW * MAXW / 8], r2[MAXW * MAXW / 8], rl[MAXW * MAXW / 8];
	if (level >= 2) bayes_kl_sums512(n, m, s, vis, av, bv, qmask, kind, e, rmx, rz, r1, r2);
	plan_step(pl);
	for (int i = 0; i < n && level < 2; i++) {
		rz[i] = 1;
		if (qmask && qmask[i] == 0) continue;
		const float *sr = s + (size_t)i * m8;
		float *er = e + (size_t)i * m8;
		__m256 vmx = ninf;
		for (int j = 0; j < m8; j += 8)
			vmx = _mm256_max_ps(vmx, _mm256_blendv_ps(ninf, _mm256_loadu_ps(sr + j), _mm256_loadu_ps(vis + j)));
		float mx = hmax_nan(vmx);
		__m256 vm = _mm256_set1_ps(mx), zs = zero, s1 = zero, s2 = zero;
		for (int j = 0; j < m8; j += 8) {
			__m256 keep = _mm256_loadu_ps(vis + j), sv = _mm256_loadu_ps(sr + j);
			__m256 ex = _mm256_and_ps(keep, exp_le0(_mm256_min_ps(zero, _mm256_sub_ps(sv, vm))));
			_mm256_storeu_ps(er + j, ex);
			zs = _mm256_add_ps(zs, ex);
			if (kind == 0) {
				s1 = _mm256_fmadd_ps(_mm256_loadu_ps(av + j), sv, s1);
				s2 = _mm256_fmadd_ps(_mm256_loadu_ps(bv + j), sv, s2);
			} else {
				__m256 y = _mm256_and_ps(keep, _mm256_add_ps(_mm256_sub_ps(sv, vm), _mm256_loadu_ps(av + j)));
				s1 = _mm256_add_ps(s1, y);
				s2 = _mm256_fmadd_ps(y, y, s2);
			}
		}
		rmx[i] = mx, rz[i] = hsum(zs), r1[i] = hsum(s1), r2[i] = hsum(s2);
	}
	// phase 2: log z of 8 rows at a time (z ≥ 1: the largest key's term
	// is 1)
	for (int i = 0; i < n; i += 8) {
		float l[8];
		for (int t = 0; t < 8; t++) l[t] = i + t < n ? rz[i + t] : 1;
		_mm256_storeu_ps(l, log_fast(_mm256_loadu_ps(l)));
		for (int t = 0; t < 8 && i + t < n; t++) rl[i + t] = l[t];
	}
	// phase 3: each row's terms and x
	const __m256 vg = _mm256_set1_ps(g), vsa = _mm256_set1_ps(sa);
	__m256 cs[MAXW / 8];
	for (int c = 0; c < m8 / 8; c++) cs[c] = zero;
	float cs16[MAXW] __attribute__((aligned(64))) = {0}; // level ≥ 2: the column sums,
	float rf[MAXW * MAXW / 8], rlse[MAXW * MAXW / 8];      // and each row's coefficients
	double total = 0, lsum = 0, agg1 = 0;
	for (int i = 0; i < n; i++) {
		float *xr = x + (size_t)i * m;
		int last = i + 1 == n;
		if (qmask && qmask[i] == 0) {
			if (level < 2)
				for (int j = 0; j < m8; j += 8) store_row(xr, j, m, last, zero);
			continue;
		}
		const float *sr = s + (size_t)i * m8, *er = e + (size_t)i * m8;
		float lz = rl[i], lse = rmx[i] + lz;
		__m256 vf = _mm256_set1_ps(1 / rz[i]);
		if (kind == 0) {
			total += (double)lse * sa - r1[i];
			agg1 += r2[i];
			__m256 vfs = _mm256_mul_ps(vf, vsa);
			rf[i] = _mm256_cvtss_f32(vfs), rlse[i] = lse;
			for (int j = 0; j < m8 && level < 2; j += 8) {
				cs[j / 8] = _mm256_add_ps(cs[j / 8], _mm256_loadu_ps(sr + j));
				__m256 y = _mm256_fmsub_ps(_mm256_loadu_ps(er + j), vfs, _mm256_loadu_ps(av + j));
				store_row(xr, j, m, last, _mm256_mul_ps(vg, y));
			}
		} else {
			float di = r1[i] - nv * lz;
			total += (double)r2[i] - 2.0 * lz * r1[i] + (double)nv * lz * lz;
			agg1 += di;
			__m256 vl = _mm256_set1_ps(lse), vdf = _mm256_mul_ps(vf, _mm256_set1_ps(di));
			rf[i] = _mm256_cvtss_f32(vdf), rlse[i] = lse;
			for (int j = 0; j < m8 && level < 2; j += 8) {
				__m256 sv = _mm256_loadu_ps(sr + j);
				cs[j / 8] = _mm256_add_ps(cs[j / 8], sv);
				__m256 dl = _mm256_and_ps(_mm256_loadu_ps(vis + j),
				                          _mm256_add_ps(_mm256_sub_ps(sv, vl), _mm256_loadu_ps(av + j)));
				store_row(xr, j, m, last, _mm256_mul_ps(vg, _mm256_fnmadd_ps(_mm256_loadu_ps(er + j), vdf, dl)));
			}
		}
		lsum += lse;
	}
	if (level >= 2) bayes_kl_x_rows512(kind, n, m, s, e, vis, av, qmask, rf, rlse, g, cs16, x);
	agg[0] = lsum;
	agg[1] = agg1;
	float csum[MAXW];
	for (int c = 0; c < m8 / 8; c++) _mm256_storeu_ps(csum + 8 * c, cs[c]);
	for (int j = 0; j < m; j++) colsum[j] = level >= 2 ? cs16[j] : csum[j];
	return total;
}

// prior_unit_back is one row of the prior network's backward pass: with
// u its 16 hidden pre-activations (less b1) and g its logit's gradient,
// it adds G·ReLU(u + b1) to sw and du = G·w2·[u + b1 > 0] to sb, and
// leaves du in u.
__attribute__((always_inline, target("avx2,fma")))
static inline void prior_unit_back(float *u, float g, __m256 b10, __m256 b11, __m256 w20, __m256 w21,
	__m256 *sb0, __m256 *sb1, __m256 *sw0, __m256 *sw1) {
	const __m256 zero = _mm256_setzero_ps();
	__m256 vg = _mm256_set1_ps(g);
	__m256 u0 = _mm256_add_ps(_mm256_loadu_ps(u), b10), u1 = _mm256_add_ps(_mm256_loadu_ps(u + 8), b11);
	__m256 on0 = _mm256_cmp_ps(u0, zero, _CMP_GT_OQ), on1 = _mm256_cmp_ps(u1, zero, _CMP_GT_OQ);
	*sw0 = _mm256_fmadd_ps(vg, _mm256_and_ps(on0, u0), *sw0);
	*sw1 = _mm256_fmadd_ps(vg, _mm256_and_ps(on1, u1), *sw1);
	__m256 d0 = _mm256_and_ps(on0, _mm256_mul_ps(vg, w20)), d1 = _mm256_and_ps(on1, _mm256_mul_ps(vg, w21));
	*sb0 = _mm256_add_ps(*sb0, d0);
	*sb1 = _mm256_add_ps(*sb1, d1);
	_mm256_storeu_ps(u, d0);
	_mm256_storeu_ps(u + 8, d1);
}

// pf_prior_head computes one head of the contextual prior network of
// Bayesian attention (fusedbayesprior.go, BayesPriorLogits) with its
// hidden width padded to 16: w1 [d×16], w1t [16×d] (its transpose), b1
// and w2 [16], all zero past the real width. Row r = b·m + j of k (rows
// strided by ldk, d wide) has the hidden units u = kᵀ w1 + b1 (kept in
// scratch [rows×16]) and the logit
//   c[b·ldc + j] = b2 + Σ_t w2_t ReLU(u_t).
// With gc (the logits' gradient, laid out as c) it runs the backward pass
// instead: du = G w2 [u > 0], db1 = Σ du, dw2 = Σ G ReLU(u), *db2 = Σ G,
// dw1 [d×16] = kᵀ du, and dk rows = du w1ᵀ (strided by ldk).
__attribute__((target("avx2,fma")))
void pf_prior_head(const float *k, int ldk, int rows, int m, int d, const float *w1, const float *w1t,
                   const float *b1, const float *w2, float b2, float *c, const float *gc, int ldc,
                   float *scratch, float *dk, float *dw1, float *db1, float *dw2, float *db2) {
	rows_axpy(rows, d, 16, 1, k, ldk, 1, w1, 16, scratch, 16);
	const __m256 zero = _mm256_setzero_ps();
	const __m256 b10 = _mm256_loadu_ps(b1), b11 = _mm256_loadu_ps(b1 + 8);
	const __m256 w20 = _mm256_loadu_ps(w2), w21 = _mm256_loadu_ps(w2 + 8);
	if (!gc) {
		for (int r = 0; r < rows; r++) {
			float *u = scratch + (size_t)r * 16;
			__m256 h0 = _mm256_max_ps(zero, _mm256_add_ps(_mm256_loadu_ps(u), b10));
			__m256 h1 = _mm256_max_ps(zero, _mm256_add_ps(_mm256_loadu_ps(u + 8), b11));
			c[(size_t)(r / m) * ldc + r % m] = b2 + hsum(_mm256_fmadd_ps(h1, w21, _mm256_mul_ps(h0, w20)));
		}
		return;
	}
	__m256 sb0 = zero, sb1 = zero, sw0 = zero, sw1 = zero;
	double sg = 0;
	for (int r = 0; r < rows; r++) {
		float g = gc[(size_t)(r / m) * ldc + r % m];
		prior_unit_back(scratch + (size_t)r * 16, g, b10, b11, w20, w21, &sb0, &sb1, &sw0, &sw1);
		sg += g;
	}
	_mm256_storeu_ps(db1, sb0);
	_mm256_storeu_ps(db1 + 8, sb1);
	_mm256_storeu_ps(dw2, sw0);
	_mm256_storeu_ps(dw2 + 8, sw1);
	*db2 = (float)sg;
	// dk [rows×d]: row r = Σ_t du[r][t] w1ᵀ[t]
	rows_axpy(rows, 16, d, 1, scratch, 16, 1, w1t, d, dk, ldk);
	// dw1 [d×16]: row e = Σ_r k[r][e] du[r]
	rows_axpy(d, rows, 16, 1, k, 1, ldk, scratch, 16, dw1, 16);
}

// lgamma_pos is log Γ(x) for x > 0 lane by lane, as lgammaFast
// (fusedbayes.go) computes it: x < 6 moves to z = x + 6 by the recurrence,
// then Stirling's series to z⁻⁷.
__attribute__((target("avx2,fma")))
static inline __m256 lgamma_pos(__m256 x) {
	const __m256 one = _mm256_set1_ps(1.0f), six = _mm256_set1_ps(6.0f);
	__m256 small = _mm256_cmp_ps(x, six, _CMP_LT_OQ);
	__m256 prod = _mm256_mul_ps(_mm256_mul_ps(x, _mm256_add_ps(x, one)),
	                            _mm256_mul_ps(_mm256_add_ps(x, _mm256_set1_ps(2.0f)), _mm256_add_ps(x, _mm256_set1_ps(3.0f))));
	prod = _mm256_mul_ps(prod, _mm256_mul_ps(_mm256_add_ps(x, _mm256_set1_ps(4.0f)), _mm256_add_ps(x, _mm256_set1_ps(5.0f))));
	__m256 shift = _mm256_and_ps(small, log_pos(_mm256_blendv_ps(one, prod, small)));
	__m256 z = _mm256_add_ps(x, _mm256_and_ps(small, six));
	__m256 iz = _mm256_div_ps(one, z), iz2 = _mm256_mul_ps(iz, iz);
	__m256 s = _mm256_fnmadd_ps(iz2, _mm256_set1_ps(1.0f / 1680), _mm256_set1_ps(1.0f / 1260));
	s = _mm256_fnmadd_ps(iz2, s, _mm256_set1_ps(1.0f / 360));
	s = _mm256_fnmadd_ps(iz2, s, _mm256_set1_ps(1.0f / 12));
	s = _mm256_mul_ps(iz, s);
	__m256 r = _mm256_fmsub_ps(_mm256_sub_ps(z, _mm256_set1_ps(0.5f)), log_pos(z), z);
	r = _mm256_add_ps(r, _mm256_set1_ps(0.9189385332046728f));
	return _mm256_sub_ps(_mm256_add_ps(r, s), shift);
}

// digamma_pos is ψ(x) for x > 0 lane by lane, as digammaFast
// (fusedbayes.go) computes it: ψ(x) = ψ(x+6) − Σ_{i<6} 1/(x+i) for x < 6,
// and the asymptotic series at z ≥ 6.
__attribute__((target("avx2,fma")))
static inline __m256 digamma_pos(__m256 x) {
	const __m256 one = _mm256_set1_ps(1.0f), two = _mm256_set1_ps(2.0f), six = _mm256_set1_ps(6.0f);
	__m256 small = _mm256_cmp_ps(x, six, _CMP_LT_OQ);
	__m256 x2 = _mm256_add_ps(x, two), x4 = _mm256_add_ps(x, _mm256_set1_ps(4.0f));
	__m256 a = _mm256_mul_ps(x, _mm256_add_ps(x, one)), b = _mm256_mul_ps(x2, _mm256_add_ps(x, _mm256_set1_ps(3.0f))),
	       c = _mm256_mul_ps(x4, _mm256_add_ps(x, _mm256_set1_ps(5.0f)));
	__m256 x2p1 = _mm256_fmadd_ps(two, x, one);
	__m256 shift = _mm256_add_ps(_mm256_div_ps(x2p1, a), _mm256_div_ps(_mm256_add_ps(x2p1, _mm256_set1_ps(4.0f)), b));
	shift = _mm256_add_ps(shift, _mm256_div_ps(_mm256_add_ps(x2p1, _mm256_set1_ps(8.0f)), c));
	shift = _mm256_and_ps(small, shift);
	__m256 z = _mm256_add_ps(x, _mm256_and_ps(small, six));
	__m256 iz = _mm256_div_ps(one, z), iz2 = _mm256_mul_ps(iz, iz);
	__m256 s = _mm256_fnmadd_ps(iz2, _mm256_set1_ps(1.0f / 240), _mm256_set1_ps(1.0f / 252));
	s = _mm256_fnmadd_ps(iz2, s, _mm256_set1_ps(1.0f / 120));
	s = _mm256_fnmadd_ps(iz2, s, _mm256_set1_ps(1.0f / 12));
	s = _mm256_mul_ps(iz2, s);
	__m256 r = _mm256_fnmadd_ps(_mm256_set1_ps(0.5f), iz, log_pos(z));
	return _mm256_sub_ps(_mm256_sub_ps(r, s), shift);
}

// prior_logits sets c [m] to the contextual prior network's logits of the
// m keys k (rows strided by ldk, d wide; fusedbayesprior.go), its hidden
// width padded to 16 in w1 [d×16], b1 and w2 [16]: c_j = b2 + w2 · ReLU(k_j
// w1 + b1), with the hidden units k_j w1 in u [m×16].
__attribute__((target("avx2,fma")))
static void prior_logits(int level, const float *k, int ldk, int m, int d, const float *w1, const float *b1,
                         const float *w2, float b2, float *u, float *c) {
	bayes_axpy(level, m, d, 16, 1, k, ldk, 1, w1, 16, u, 16);
	const __m256 zero = _mm256_setzero_ps();
	const __m256 b10 = _mm256_loadu_ps(b1), b11 = _mm256_loadu_ps(b1 + 8);
	const __m256 w20 = _mm256_loadu_ps(w2), w21 = _mm256_loadu_ps(w2 + 8);
	for (int j = 0; j < m; j++) {
		__m256 h0 = _mm256_max_ps(zero, _mm256_add_ps(_mm256_loadu_ps(u + 16 * j), b10));
		__m256 h1 = _mm256_max_ps(zero, _mm256_add_ps(_mm256_loadu_ps(u + 16 * j + 8), b11));
		c[j] = b2 + hsum(_mm256_fmadd_ps(h1, w21, _mm256_mul_ps(h0, w20)));
	}
}

// pf_bayes_head runs one float32 head of BayesAttentionSample without a
// causal mask (fusedbayessample.go) whole: the prior of the visible keys
// (p = softmax of the contextual prior network's logits, prior_logits
// with w1, b1, w2, b2, or 1/|V| when w1 is NULL), the KL's per-key
// coefficients, pf_bayes_attn_head, and from its sums the head's Σ KL_ij
// (into *sum) and ∂Σ KL/∂c for a unit gradient (into dc [m], when w1 is
// given), as klHeadCoefs, klCoefs.value and klPriorGrad compute them.
// kc holds the settings: kind (0 Weibull, 1 log-normal), the noise scale
// (1/k or σ), β₀, A = γ/k + lgamma(1+1/k) − log β₀, the per-weight
// constant c0, the log-normal shift (σ₀² − σ²)/2 and 1/(2σ₀²). α, lgamma α
// and ψ α are float32 vector functions here (lgamma_pos, digamma_pos). It
// returns 0 without computing anything when no key is visible or no query
// real (the Go loop handles those heads), 1 otherwise. level ≥ 2 runs the
// products and the transpose with AVX-512 (bayes_axpy), the same bits.
// bayes_head is its body, taking BAYES_FWD_STEPS steps of pl (NULL:
// none) between its phases.
#define BAYES_FWD_STEPS 3
__attribute__((target("avx2,fma")))
static int bayes_head(int level, const float *q, int ldq, const float *k, int ldk, const float *v, int ldv, int n, int m,
                      int d, int dv, float scale, const float *mask, const float *qmask, const float *noise,
                      const float *w1, const float *b1, const float *w2, float b2, const double *kc, float *p, float *x,
                      float *out, int ldo, float *dc, double *sum, pf_plan *pl) {
	plan_step(pl);
	const int kind = (int)kc[0];
	const double rate = kc[2], A = kc[3], c0 = kc[4], shift = kc[5], inv2s02 = kc[6];
	const float floor_ = 1e-8f; // BayesAlphaFloor
	int nr = n, nv = 0;
	if (qmask) {
		nr = 0;
		for (int i = 0; i < n; i++) nr += qmask[i] != 0;
	}
	float keep[MAXW], pp[MAXW], lp[MAXW], al[MAXW], lg[MAXW], ps[MAXW], av[MAXW], bv[MAXW], cs[MAXW];
	const int m8 = (m + 7) & ~7;
	for (int j = 0; j < m8; j++) {
		int vis = j < m && (!mask || mask[j] != 0);
		keep[j] = vis ? 1.0f : 0.0f;
		nv += vis;
	}
	if (nr == 0 || nv == 0) return 0;
	float cbuf[MAXW], ubuf[MAXW * 16], cmx = -INFINITY;
	const float *c = NULL;
	if (w1) {
		prior_logits(level, k, ldk, m, d, w1, b1, w2, b2, ubuf, cbuf);
		c = cbuf;
		for (int j = 0; j < m; j++)
			if (keep[j] != 0 && c[j] > cmx) cmx = c[j];
	}
	const __m256 zero = _mm256_setzero_ps();
	// the prior: p and log p at the visible keys, 0 elsewhere
	if (c) {
		__m256 vm = _mm256_set1_ps(cmx), zs = zero;
		for (int j = 0; j < m8; j += 8) {
			__m256 vis = _mm256_cmp_ps(_mm256_loadu_ps(keep + j), zero, _CMP_NEQ_OQ);
			__m256 cv = _mm256_and_ps(vis, _mm256_loadu_ps(c + j)); // cbuf is MAXW wide
			__m256 e = _mm256_and_ps(vis, exp_le0(_mm256_min_ps(zero, _mm256_sub_ps(cv, vm))));
			_mm256_storeu_ps(lp + j, cv);
			_mm256_storeu_ps(pp + j, e);
			zs = _mm256_add_ps(zs, e);
		}
		float z = hsum(zs), lz = cmx + logf(z);
		__m256 vz = _mm256_set1_ps(1 / z), vl = _mm256_set1_ps(lz);
		for (int j = 0; j < m8; j += 8) {
			__m256 vis = _mm256_cmp_ps(_mm256_loadu_ps(keep + j), zero, _CMP_NEQ_OQ);
			_mm256_storeu_ps(pp + j, _mm256_mul_ps(_mm256_loadu_ps(pp + j), vz));
			_mm256_storeu_ps(lp + j, _mm256_and_ps(vis, _mm256_sub_ps(_mm256_loadu_ps(lp + j), vl)));
		}
	} else {
		float pc = 1.0f / (float)nv, lpc = -logf((float)nv);
		for (int j = 0; j < m8; j++) {
			pp[j] = keep[j] != 0 ? pc : 0;
			lp[j] = keep[j] != 0 ? lpc : 0;
		}
	}
	double sumA = 0, sumLg = 0, sumEa = 0, sumEb = 0;
	float g = 1;
	if (kind == 0) {
		const __m256 vr = _mm256_set1_ps((float)rate), vf = _mm256_set1_ps(floor_), one = _mm256_set1_ps(1.0f);
		for (int j = 0; j < m8; j += 8) {
			__m256 vis = _mm256_cmp_ps(_mm256_loadu_ps(keep + j), zero, _CMP_NEQ_OQ);
			__m256 a = _mm256_mul_ps(vr, _mm256_max_ps(_mm256_loadu_ps(pp + j), vf));
			__m256 ax = _mm256_blendv_ps(one, a, vis); // masked lanes: lgamma and ψ of 1, then 0
			_mm256_storeu_ps(al + j, _mm256_and_ps(vis, a));
			_mm256_storeu_ps(lg + j, _mm256_and_ps(vis, lgamma_pos(ax)));
			_mm256_storeu_ps(ps + j, _mm256_and_ps(vis, digamma_pos(ax)));
		}
		for (int j = 0; j < m; j++) {
			av[j] = al[j];
			bv[j] = keep[j] != 0 && pp[j] > floor_ ? al[j] : 0;
			sumA += al[j];
			sumLg += lg[j];
			sumEa += bv[j];
			sumEb += bv[j] * (A + ps[j]);
		}
	} else {
		g = (float)(2 * inv2s02);
		for (int j = 0; j < m; j++) {
			av[j] = keep[j] != 0 ? (float)(shift - lp[j]) : 0;
			bv[j] = 0;
		}
	}
	double agg[2];
	double rows = pf_bayes_attn_head(level, q, ldq, k, ldk, v, ldv, n, m, d, dv, scale, mask, qmask, noise, kind,
	                                 (float)kc[1], av, bv, g, p, x, out, ldo, cs, agg, pl);
	if (kind == 0) {
		*sum = rows + nr * (A * sumA + rate + sumLg + nv * c0);
	} else {
		*sum = (double)nr * nv * c0 + inv2s02 * rows;
	}
	if (!c) return 1;
	const double lsum = agg[0];
	if (kind == 0) {
		double etot = nr * sumEb + lsum * sumEa - agg[1];
		for (int j = 0; j < m; j++) {
			double r = 0;
			if (keep[j] != 0 && pp[j] > floor_) {
				r = nr * (double)al[j] * (A + ps[j]) + (double)al[j] * (lsum - cs[j]) - pp[j] * etot;
			} else if (keep[j] != 0) {
				r = -pp[j] * etot;
			}
			dc[j] = (float)r;
		}
		return 1;
	}
	for (int j = 0; j < m; j++)
		dc[j] = keep[j] != 0 ? (float)(-g * ((double)cs[j] - lsum + nr * (double)av[j] - pp[j] * agg[1])) : 0;
	return 1;
}

__attribute__((target("avx2,fma")))
int pf_bayes_head(int level, const float *q, int ldq, const float *k, int ldk, const float *v, int ldv, int n, int m, int d,
                  int dv, float scale, const float *mask, const float *qmask, const float *noise, const float *w1,
                  const float *b1, const float *w2, float b2, const double *kc, float *p, float *x, float *out, int ldo,
                  float *dc, double *sum) {
	return bayes_head(level, q, ldq, k, ldk, v, ldv, n, m, d, dv, scale, mask, qmask, noise, w1, b1, w2, b2, kc, p, x,
	                  out, ldo, dc, sum, NULL);
}

// pf_bayes_heads runs pf_bayes_head on the h heads of one batch element
// in one call, where graph made one call a head: head hh's operands at
// its offsets (q and k columns hh·d, v and out columns hh·dv, noise, p and
// x rows hh·n·m, dc hh·m, the prior network at pad + hh·padsize in
// fusedbayessample.go's priorPad layout, w1 [d×16], w1ᵀ [16×d], b1 and
// w2 [16], and b2[hh]; pad NULL for no network), its Σ KL_ij into
// sums[hh]. It returns the bit mask of the heads pf_bayes_head did not
// run (no visible key or no real query: graph's Go loop takes those);
// every head's values are pf_bayes_head's. bayes_heads is its body,
// which takes pl's steps (NULL: none) as the heads go and the rest at
// the end.
__attribute__((target("avx2,fma")))
static unsigned bayes_heads(int level, int h, const float *q, int ldq, const float *k, int ldk, const float *v, int ldv,
                            int n, int m, int d, int dv, float scale, const float *mask, const float *qmask,
                            const float *noise, const float *pad, int padsize, const float *b2, const double *kc,
                            float *p, float *x, float *out, int ldo, float *dc, double *sums, pf_plan *pl) {
	unsigned skipped = 0;
	const size_t nm = (size_t)n * m;
	for (int hh = 0; hh < h; hh++) {
		const float *w1 = NULL, *b1 = NULL, *w2 = NULL;
		float b2h = 0;
		if (pad) {
			w1 = pad + (size_t)hh * padsize;
			b1 = w1 + 32 * d;
			w2 = b1 + 16;
			b2h = b2[hh];
		}
		if (!bayes_head(level, q + (size_t)hh * d, ldq, k + (size_t)hh * d, ldk, v + (size_t)hh * dv, ldv, n, m, d, dv,
		                scale, mask, qmask, noise + hh * nm, w1, b1, w2, b2h, kc, p + hh * nm, x + hh * nm,
		                out + (size_t)hh * dv, ldo, pad ? dc + (size_t)hh * m : NULL, sums + hh, pl))
			skipped |= 1u << hh;
	}
	plan_rest(pl);
	return skipped;
}

__attribute__((target("avx2,fma")))
unsigned pf_bayes_heads(int level, int h, const float *q, int ldq, const float *k, int ldk, const float *v, int ldv,
                        int n, int m, int d, int dv, float scale, const float *mask, const float *qmask,
                        const float *noise, const float *pad, int padsize, const float *b2, const double *kc, float *p,
                        float *x, float *out, int ldo, float *dc, double *sums) {
	return bayes_heads(level, h, q, ldq, k, ldk, v, ldv, n, m, d, dv, scale, mask, qmask, noise, pad, padsize, b2, kc,
	                   p, x, out, ldo, dc, sums, NULL);
}

// pf_bayes_head_bwd is one float32 head of BayesAttentionSample's backward
// pass: attention's (pf_attn_head_bwd without dropout), with gx·x [n×m]
// (the KL's score gradient, which pf_bayes_attn_head saved for a unit gx)
// added to dS before the products that the sample and the KL share, and
// with w1 the contextual prior
// network's, from dc [m] = ∂L/∂c (the KL's saved unit gradient times its
// upstream gradient): with the hidden units u = k w1 + b1 recomputed,
//   du = dc w2 [u > 0],  dk += du w1ᵀ (w1t [16×d]),  dw1 [d×16] = kᵀ du,
//   db1 [16] = Σ du,  dw2 [16] = Σ dc ReLU(u),  *db2 = Σ dc,
// over the head's m keys; level ≥ 2 runs the prior network's products
// with AVX-512 (bayes_axpy), the same bits. With dc NULL and xc given, dc
// is the KL's saved unit gradient xc [m] times gd, each product in double
// rounded to float (graph's T(g·float64(xc_j))); with part given, the
// parameters' gradients are also written to part [d·r + 2r + 1] in
// graph's layout for a hidden width r ≤ 16, [dW1 (d×r) | db1 | dw2 | db2]
// converted to double (exact): the per-head work fusedbayessample.go did
// in Go around each call. bayes_head_bwd is its body, the AVX-512
// backward taking BWD_STEPS steps of pl (NULL: none) between its phases.
__attribute__((target("avx2,fma")))
static void bayes_head_bwd(int level, const float *q, int ldq, const float *k, int ldk, const float *v, int ldv,
                           const float *g, int ldg, const float *p, int n, int m, int d, int dv, float scale,
                           const float *x, float gx, float *dq, float *dk, float *dvv, const float *w1,
                           const float *w1t, const float *b1, const float *w2, const float *dc, float *dw1, float *db1,
                           float *dw2, float *db2, const float *xc, double gd, double *part, int r, pf_plan *pl) {
	if (level >= 2) {
		attn_head_bwd512(q, ldq, k, ldk, v, ldv, g, ldg, p, NULL, n, m, d, dv, scale, dq, dk, dvv, NULL, 0, x, gx, pl);
	} else {
		attn_head_bwd(q, ldq, k, ldk, v, ldv, g, ldg, p, NULL, n, m, d, dv, scale, dq, dk, dvv, x, gx);
	}
	if (!w1) return;
	float u[MAXW * 16], dkp[MAXW * MAXW], dcl[MAXW];
	if (!dc) {
		for (int j = 0; j < m; j++) dcl[j] = (float)(gd * (double)xc[j]);
		dc = dcl;
	}
	bayes_axpy(level, m, d, 16, 1, k, ldk, 1, w1, 16, u, 16);
	const __m256 zero = _mm256_setzero_ps();
	const __m256 b10 = _mm256_loadu_ps(b1), b11 = _mm256_loadu_ps(b1 + 8);
	const __m256 w20 = _mm256_loadu_ps(w2), w21 = _mm256_loadu_ps(w2 + 8);
	__m256 sb0 = zero, sb1 = zero, sw0 = zero, sw1 = zero;
	float sg = 0;
	for (int j = 0; j < m; j++) {
		prior_unit_back(u + 16 * j, dc[j], b10, b11, w20, w21, &sb0, &sb1, &sw0, &sw1);
		sg += dc[j];
	}
	_mm256_storeu_ps(db1, sb0);
	_mm256_storeu_ps(db1 + 8, sb1);
	_mm256_storeu_ps(dw2, sw0);
	_mm256_storeu_ps(dw2 + 8, sw1);
	*db2 = sg;
	// dk rows += du w1ᵀ
	bayes_axpy(level, m, 16, d, 1, u, 16, 1, w1t, d, dkp, d);
	for (int j = 0; j < m; j++) add_rows(dkp + (size_t)j * d, dk + (size_t)j * ldk, d);
	// dw1 [d×16]: row e = Σ_j k[j][e] du[j]
	bayes_axpy(level, d, m, 16, 1, k, 1, ldk, u, 16, dw1, 16);
	if (!part) return;
	for (int e = 0; e < d; e++)
		for (int t = 0; t < r; t++) part[e * r + t] = dw1[e * 16 + t];
	for (int t = 0; t < r; t++) {
		part[d * r + t] = db1[t];
		part[d * r + r + t] = dw2[t];
	}
	part[d * r + 2 * r] = *db2;
}

__attribute__((target("avx2,fma")))
void pf_bayes_head_bwd(int level, const float *q, int ldq, const float *k, int ldk, const float *v, int ldv, const float *g, int ldg,
                       const float *p, int n, int m, int d, int dv, float scale, const float *x, float gx, float *dq,
                       float *dk, float *dvv, const float *w1, const float *w1t, const float *b1, const float *w2,
                       const float *dc, float *dw1, float *db1, float *dw2, float *db2, const float *xc, double gd,
                       double *part, int r) {
	bayes_head_bwd(level, q, ldq, k, ldk, v, ldv, g, ldg, p, n, m, d, dv, scale, x, gx, dq, dk, dvv, w1, w1t, b1, w2, dc,
	               dw1, db1, dw2, db2, xc, gd, part, r, NULL);
}

// pf_bayes_heads_bwd runs pf_bayes_head_bwd on the h heads of one batch
// element in one call, where graph made one call a head: head hh's
// operands at its offsets (q, k, dq and dk columns hh·d, v, g and dv
// columns hh·dv, p and x rows hh·n·m), with pad its prior network at
// pad + hh·padsize in pf_bayes_heads' layout, dc from xc + hh·m and gd,
// and its parameters' gradients into part + hh·np (pg [16·d + 33] the
// scratch they pass through); pad NULL for no network. Every head's
// values are pf_bayes_head_bwd's. bayes_heads_bwd is its body, which
// takes pl's steps (NULL: none) as the heads go and the rest at the end.
__attribute__((target("avx2,fma")))
static void bayes_heads_bwd(int level, int h, const float *q, int ldq, const float *k, int ldk, const float *v, int ldv,
                            const float *g, int ldg, const float *p, int n, int m, int d, int dv, float scale,
                            const float *x, float gx, float *dq, float *dk, float *dvv, const float *pad, int padsize,
                            const float *xc, double gd, double *part, int np, int r, float *pg, pf_plan *pl) {
	const size_t nm = (size_t)n * m;
	for (int hh = 0; hh < h; hh++) {
		const float *w1 = NULL, *w1t = NULL, *b1 = NULL, *w2 = NULL, *xch = NULL;
		double *ph = NULL;
		if (pad) {
			w1 = pad + (size_t)hh * padsize;
			w1t = w1 + 16 * d;
			b1 = w1 + 32 * d;
			w2 = b1 + 16;
			xch = xc + (size_t)hh * m;
			ph = part + (size_t)hh * np;
		}
		bayes_head_bwd(level, q + (size_t)hh * d, ldq, k + (size_t)hh * d, ldk, v + (size_t)hh * dv, ldv,
		               g + (size_t)hh * dv, ldg, p + hh * nm, n, m, d, dv, scale, x + hh * nm, gx, dq + (size_t)hh * d,
		               dk + (size_t)hh * d, dvv + (size_t)hh * dv, w1, w1t, b1, w2, NULL, pg, pad ? pg + 16 * d : NULL,
		               pad ? pg + 16 * d + 16 : NULL, pad ? pg + 16 * d + 32 : NULL, xch, gd, ph, r, pl);
	}
	plan_rest(pl);
}

__attribute__((target("avx2,fma")))
void pf_bayes_heads_bwd(int level, int h, const float *q, int ldq, const float *k, int ldk, const float *v, int ldv,
                        const float *g, int ldg, const float *p, int n, int m, int d, int dv, float scale,
                        const float *x, float gx, float *dq, float *dk, float *dvv, const float *pad, int padsize,
                        const float *xc, double gd, double *part, int np, int r, float *pg) {
	bayes_heads_bwd(level, h, q, ldq, k, ldk, v, ldv, g, ldg, p, n, m, d, dv, scale, x, gx, dq, dk, dvv, pad, padsize,
	                xc, gd, part, np, r, pg, NULL);
}

// pf_bayes_job_run is worker's share of j, forward or (bwd) backward:
// whole batch elements taken from j's two-ended counter (pf_claim) until
// none is left, each element's heads the one call graph made for it
// (pf_bayes_heads, pf_bayes_heads_bwd) with its operands at their
// offsets. Each element writes its own rows and slots only, so the
// values do not depend on who runs it.
//
// The next element is claimed before the one in hand is computed, and
// its operands and results are prefetched as the heads go (pf_plan,
// BAYES_FWD_STEPS steps a head forward, BWD_STEPS backward; at once, at
// the start, for the AVX2 heads, whose backward takes no steps): its
// noise, weights and scores
// ([H×N×M] each, 12.8 KB at the maxnorm model's 4 heads, 16 queries and
// 50 keys), its rows of q, k, v (and g), and the rows it writes (out, or
// dq, dk, dv). A step's such arrays outgrow the caches between the
// forward and the backward, and each head's short rows give the
// hardware's prefetchers too little to go on. These lines were once
// asked for in one burst at the element's start, with the non-temporal
// hint: the burst itself then took 3% of the Bayesian step's CPU time,
// its prefetches waiting for free miss buffers. On a Zen 5 EPYC
// (BenchmarkBayesAttentionRatio, eight alternated rounds), spreading
// them took the median ratios from 1.47× to 1.39× (Weibull) and from
// 1.47× to 1.41× (log-normal), the T0 hint in place of the non-temporal
// one to 1.37× and 1.38×, and the rows it writes as well to 1.35× and
// 1.35× (graph/PERFORMANCE.md).
void pf_bayes_job_run(const pf_bayes_job *j, int bwd, int worker) {
	const int h = j->h, n = j->n, m = j->m;
	const size_t hnm = (size_t)h * n * m;
	int nb = pf_claim(j->ctr, worker, j->b);
	for (;;) {
		int bi = nb;
		if (bi < 0) return;
		nb = pf_claim(j->ctr, worker, j->b);
		pf_plan plan = {.steps = h * (bwd ? BWD_STEPS : BAYES_FWD_STEPS)}, *pl = NULL;
		if (nb >= 0) { // the next element's operands and results (see above)
			const size_t ne = (size_t)nb * hnm;
			if (!bwd) plan_add_span(&plan, j->noise + ne, hnm);
			plan_add_span(&plan, j->p + ne, hnm);
			plan_add_span(&plan, j->x + ne, hnm);
			plan_add(&plan, j->q + (size_t)nb * n * j->ld, j->ld, n, h * j->d);
			plan_add(&plan, j->k + (size_t)nb * m * j->ld, j->ld, m, h * j->d);
			plan_add(&plan, j->v + (size_t)nb * m * j->ldv, j->ldv, m, h * j->dv);
			if (!bwd) {
				plan_add(&plan, j->out + (size_t)nb * n * j->ldv, j->ldv, n, h * j->dv);
			} else {
				plan_add(&plan, j->g + (size_t)nb * n * j->ldv, j->ldv, n, h * j->dv);
				plan_add(&plan, j->dq + (size_t)nb * n * j->ld, j->ld, n, h * j->d);
				plan_add(&plan, j->dk + (size_t)nb * m * j->ld, j->ld, m, h * j->d);
				plan_add(&plan, j->dvv + (size_t)nb * m * j->ldv, j->ldv, m, h * j->dv);
			}
			pl = &plan;
			if (j->level < 2) { // the AVX2 backward takes no steps: all at once
				plan_rest(pl);
				pl = NULL;
			}
		}
		const size_t e = (size_t)bi * hnm, oq = (size_t)bi * n * j->ld, ok = (size_t)bi * m * j->ld,
		             ov = (size_t)bi * m * j->ldv, og = (size_t)bi * n * j->ldv;
		if (!bwd) {
			j->skipped[bi] = bayes_heads(
			    j->level, h, j->q + oq, j->ld, j->k + ok, j->ld, j->v + ov, j->ldv, n, m, j->d, j->dv, j->scale,
			    j->mask ? j->mask + (size_t)bi * m : NULL, j->qmask ? j->qmask + (size_t)bi * n : NULL, j->noise + e,
			    j->pad, j->padsize, j->b2, j->kc, j->p + e, j->x + e, j->out + og, j->ldv,
			    j->pad ? j->dc + (size_t)bi * h * m : NULL, j->sums + (size_t)bi * h, pl);
			continue;
		}
		bayes_heads_bwd(j->level, h, j->q + oq, j->ld, j->k + ok, j->ld, j->v + ov, j->ldv, j->g + og, j->ldv, j->p + e,
		                n, m, j->d, j->dv, j->scale, j->x + e, j->gx, j->dq + oq, j->dk + ok, j->dvv + ov, j->pad,
		                j->padsize, j->pad ? j->xc + (size_t)bi * h * m : NULL, j->gd,
		                j->pad ? j->part + (size_t)bi * h * j->np : NULL, j->np, j->r,
		                j->pad ? j->pg + (size_t)worker * j->pgsize : NULL, pl);
	}
}
