//go:build cgo && !purego

// One problem (one example and head) of EMAttention, forward and backward,
// in float32 with AVX2/FMA: emForward (emgroup.go) and emBackward with
// emPropagateBack (emgroupback.go), step for step, so that a problem costs
// one cgo call per pass instead of one per matrix product, and the
// [N×M] loops run 8 lanes at a time. The Go code documents each step and
// its equation in em/MATH.md; the comments here only name the step.
//
// The sizes are any N, M, d, dv ≥ 1. Matrices inside a problem are dense
// [rows×cols] (the trace, as cutTrace lays it out), inputs and gradient
// destinations are strided views (row i at i·ld). Products are computed
// as rows of scaled rows (rows_axpy's scheme in attention.c, with any
// width: the last vector of a row is loaded and stored under a lane mask).
// Exponentials are exp_le0 (simd.h), the function softmax.c's pf_exp_row
// and the Go float32 path use; a softmax row is kept in registers and
// reduced in another order than Go's, and products and dot products sum
// in another order than gemm.c and Go, so the results agree with the Go
// float32 path to rounding, not bit for bit. Column sums run down the
// rows a block of columns at a time, in registers, and row dots eight
// rows per reduction tree. Nothing depends on the thread that runs a
// problem.
#include <math.h>
#include <string.h>
#include <immintrin.h>
#include "kernels.h"
#include "simd.h"

// EM_TARGET, AVX2 and FMA, is the target of every vector function here
// in both builds. em512.c includes this file with EM_AVX512 defined, so
// the same code compiles a second time (its own static functions; the
// entry points named with _avx512), where the loops over [N×M] matrices
// run 16 lanes at a time in the EM_TARGET512 (AVX-512) functions of the
// EM_AVX512 parts below; pf_em_forward and pf_em_backward call them when
// iv[16] asks for it (em_cgo.go's emLevel). The AVX-512 build's values
// are the AVX2 build's bit for bit: the 16-lane functions do the AVX2
// loops' operations lane for lane, sum rows in 8-lane accumulators in
// the AVX2 order (add_halves, then the same horizontal sums), divide
// where AVX2 divides, and leave the scalar tails to the AVX2 code. Only
// those functions get the AVX-512 target, because the compiler
// vectorizes a scalar loop after its target, and a multiply-add reduced
// in order is fused in a scalar loop but not in a vectorized one (dot's
// tail, gaussian_back's last columns): under AVX-512 the same C would
// round differently (TestEMAVX512IsAVX2 in package graph compares them).
#define EM_TARGET __attribute__((target("avx2,fma")))
#ifdef EM_AVX512
#define EM_TARGET512 PF_AVX512
#define EM_ENTRY(name) name##_avx512
#else
#define EM_ENTRY(name) name
#endif

#define EM_NEG_INF (-1e9f) // MaskNegInf

// Hyperparameter indices: emHyper's order.
enum { H_ALPHA0, H_BETA0, H_THETA_XI, H_A_ALPHA, H_B_ALPHA, H_THETA_MU, H_A_BETA, H_B_BETA, H_PI };

// em_p is one problem: emProblem and the EMSpec flags. iv and fv in the
// entry points hold its scalars (em_cgo.go fills them in this order).
typedef struct {
	int n, m, d, dv, ldq, ldk, ldv, ldx;
	int tk, tp, tv, adapt_alpha, adapt_beta, adapt_pi, pr;
	const float *q, *xi0, *mu0, *vals, *km, *qm, *in_s, *logits;
	float h[9], size_s, real_memory;
} em_p;

// em_tr points into one problem's trace buffer, laid out as cutTrace cuts
// it; the per-iteration parts are reached through the macros below.
typedef struct {
	float *lp0, *pi0, *kn0, *vn0, *dk, *xi, *al, *wk, *nk, *ak, *ep, *ep2, *mu, *be, *lp, *wp, *np, *bp, *wi, *r, *f,
	    *pz;
} em_tr;

#define DK(t) (tr.dk + (size_t)(t) * nm)
#define XI(t) (tr.xi + (size_t)((t) - 1) * m * d) // t ≥ 1
#define AL(t) (tr.al + (size_t)(t) * m)
#define WK(t) (tr.wk + (size_t)(t) * nm)
#define NK(t) (tr.nk + (size_t)(t) * m)
#define AK(t) (tr.ak + (size_t)(t) * m * d)
#define EP(t) (tr.ep + (size_t)(t) * nm)
#define EP2(t) (tr.ep2 + (size_t)(t) * nm)
#define MU(t) (tr.mu + (size_t)((t) - 1) * m * dv) // t ≥ 1
#define BE(t) (tr.be + (size_t)(t) * m)
#define LP(t) (tr.lp + (size_t)(t) * m)
#define WP(t) (tr.wp + (size_t)(t) * nm)
#define NP(t) (tr.np + (size_t)(t) * m)
#define BP(t) (tr.bp + (size_t)(t) * m * dv)
#define WI(t) (tr.wi + (size_t)(t) * nm)
#define RO(t) (tr.r + (size_t)(t) * n * dv)
#define FV(t) (tr.f + (size_t)(t) * nm)
#define PZ(t) (tr.pz + (size_t)(t) * n)

// cut_trace is cutTrace: the same parts in the same order.
static em_tr cut_trace(const em_p *p, float *buf) {
	const size_t n = p->n, m = p->m, d = p->d, dv = p->dv, nm = n * m;
	const size_t tk = p->tk, tp = p->tp, tv = p->tv;
	em_tr t;
#define TAKE(k) (buf += (k), buf - (k))
	t.lp0 = TAKE(m), t.pi0 = TAKE(m), t.kn0 = TAKE(m), t.vn0 = TAKE(m);
	t.dk = TAKE((tk + 1) * nm);
	t.xi = TAKE(tk * m * d);
	t.al = TAKE((tk + 1) * m);
	t.wk = TAKE(tk * nm), t.nk = TAKE(tk * m), t.ak = TAKE(tk * m * d);
	t.ep = TAKE(tp * nm), t.ep2 = TAKE(tp * nm);
	t.mu = TAKE(tp * m * dv);
	t.be = TAKE((tp + 1) * m), t.lp = TAKE((tp + 1) * m);
	t.wp = TAKE(tp * nm), t.np = TAKE(tp * m), t.bp = TAKE(tp * m * dv);
	t.wi = TAKE((tv + 1) * nm), t.r = TAKE((tv + 1) * n * dv);
	t.f = TAKE(tv * nm), t.pz = TAKE(tv * n);
#undef TAKE
	return t;
}

static void unpack(em_p *p, const int *iv, const float *fv) {
	p->n = iv[0], p->m = iv[1], p->d = iv[2], p->dv = iv[3];
	p->ldq = iv[4], p->ldk = iv[5], p->ldv = iv[6], p->ldx = iv[7];
	p->tk = iv[8], p->tp = iv[9], p->tv = iv[10];
	p->adapt_alpha = iv[11], p->adapt_beta = iv[12], p->adapt_pi = iv[13], p->pr = iv[14];
	for (int i = 0; i < 9; i++) p->h[i] = fv[i];
	p->size_s = fv[9], p->real_memory = fv[10];
}

static inline int real_key(const em_p *p, int j) { return !p->km || p->km[j] != 0; }
static inline int real_query(const em_p *p, int i) { return !p->qm || p->qm[i] != 0; }

// update_beta is EMSpec.updateBeta.
static inline int update_beta(const em_p *p, int t) { return p->adapt_beta && (t < p->tp - 1 || p->tv > 0); }

// scratch hands out consecutive pieces of the caller's scratch; over is
// set when they do not fit (the entry points then return −1).
typedef struct {
	float *at;
	long left;
	int over;
} scratch;

static float *take(scratch *s, long k) {
	if (k > s->left) {
		s->over = 1;
		return NULL;
	}
	float *x = s->at;
	s->at += k, s->left -= k;
	return x;
}

// lanes is the mask of the first k lanes (0 < k ≤ 8).
EM_TARGET
static inline __m256i lanes(int k) {
	return _mm256_cmpgt_epi32(_mm256_set1_epi32(k), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// mm_block computes R rows of mm's result at NV vectors of columns, the
// last under the lane mask tail when TAIL: R·NV ≤ 14 accumulators. R, NV
// and TAIL are constants at every call, so the loops unroll.
__attribute__((always_inline)) EM_TARGET
static inline void mm_block(const int R, const int NV, const int TAIL, int nt, float alpha, const float *c, int ldc,
                            int cst, const float *x, int ldx, int acc, float *out, int ldo, __m256i tail) {
	__m256 s[16], xv[4];
	for (int i = 0; i < R * NV; i++) s[i] = _mm256_setzero_ps();
	for (int t = 0; t < nt; t++) {
		const float *xt = x + (size_t)t * ldx;
		for (int v = 0; v < NV; v++)
			xv[v] = TAIL && v == NV - 1 ? _mm256_maskload_ps(xt + 8 * v, tail) : _mm256_loadu_ps(xt + 8 * v);
		for (int r = 0; r < R; r++) {
			__m256 b = _mm256_broadcast_ss(c + (size_t)r * ldc + (size_t)t * cst);
			for (int v = 0; v < NV; v++) s[r * NV + v] = _mm256_fmadd_ps(b, xv[v], s[r * NV + v]);
		}
	}
	const __m256 va = _mm256_set1_ps(alpha);
	for (int r = 0; r < R; r++)
		for (int v = 0; v < NV; v++) {
			float *o = out + (size_t)r * ldo + 8 * v;
			__m256 y = _mm256_mul_ps(va, s[r * NV + v]);
			if (TAIL && v == NV - 1) {
				if (acc) y = _mm256_add_ps(_mm256_maskload_ps(o, tail), y);
				_mm256_maskstore_ps(o, tail, y);
			} else {
				if (acc) y = _mm256_add_ps(_mm256_loadu_ps(o), y);
				_mm256_storeu_ps(o, y);
			}
		}
}

// MM_REST(K, …) is case K of MM_ROWS's last rows: one block of K rows,
// so that they share the loads of x and overlap their chains of
// multiply-adds instead of running them one row at a time.
#define MM_REST(K, NV, TAIL)                                                                                  \
	case K:                                                                                                   \
		mm_block((K), (NV), (TAIL), nt, alpha, c + (size_t)r * ldc, ldc, cst, x + j, ldx, acc,                \
		         out + (size_t)r * ldo + j, ldo, tail);                                                       \
		break

#define MM_ROWS(R, NV, TAIL)                                                                                  \
	do {                                                                                                      \
		int r = 0;                                                                                            \
		for (; r + (R) <= nr; r += (R))                                                                       \
			mm_block((R), (NV), (TAIL), nt, alpha, c + (size_t)r * ldc, ldc, cst, x + j, ldx, acc,            \
			         out + (size_t)r * ldo + j, ldo, tail);                                                   \
		switch (nr - r) { /* fewer than R rows */                                                             \
			MM_REST(1, NV, TAIL);                                                                             \
			MM_REST(2, NV, TAIL);                                                                             \
			MM_REST(3, NV, TAIL);                                                                             \
			MM_REST(4, NV, TAIL);                                                                             \
			MM_REST(5, NV, TAIL);                                                                             \
			MM_REST(6, NV, TAIL);                                                                             \
			MM_REST(7, NV, TAIL);                                                                             \
		}                                                                                                     \
	} while (0)

#ifdef EM_AVX512
// mm16_block is mm_block in zmm registers: R rows of mm's result at NV
// vectors of 16 columns, vector v's lanes under the mask mk[v] (masked
// lanes are neither read nor written). Each element is the same sum as
// mm_block's, bit for bit: fused multiply-adds over t in order from 0,
// times α, then added to out. With aa (acc = 0), it stores dist's
// max(0, (α·sum + aa_r) + cc_j) instead of α·sum, the three operations
// a pass over out did on the stored product, so that dist makes its [n×m]
// distances in one pass (the product is kept apart from the adds, as
// when it was stored: no fused multiply-add).
__attribute__((always_inline)) EM_TARGET512
static inline void mm16_block(const int R, const int NV, int nt, float alpha, const float *c, int ldc, int cst,
                              const float *x, int ldx, int acc, float *out, int ldo, const __mmask16 *mk,
                              const float *aa, const float *cc) {
	__m512 s[16], xv[2];
	for (int i = 0; i < R * NV; i++) s[i] = _mm512_setzero_ps();
	for (int t = 0; t < nt; t++) {
		const float *xt = x + (size_t)t * ldx;
		for (int v = 0; v < NV; v++) xv[v] = _mm512_maskz_loadu_ps(mk[v], xt + 16 * v);
		for (int r = 0; r < R; r++) {
			__m512 b = _mm512_set1_ps(c[(size_t)r * ldc + (size_t)t * cst]);
			for (int v = 0; v < NV; v++) s[r * NV + v] = _mm512_fmadd_ps(b, xv[v], s[r * NV + v]);
		}
	}
	const __m512 va = _mm512_set1_ps(alpha);
	for (int r = 0; r < R; r++)
		for (int v = 0; v < NV; v++) {
			float *o = out + (size_t)r * ldo + 16 * v;
			__m512 y = _mm512_mul_ps(va, s[r * NV + v]);
			if (aa) {
				__asm__("" : "+v"(y)); // the product rounded alone, as stored before
				y = _mm512_add_ps(_mm512_add_ps(y, _mm512_set1_ps(aa[r])), _mm512_maskz_loadu_ps(mk[v], cc + 16 * v));
				y = _mm512_max_ps(_mm512_setzero_ps(), y); // x < 0 ? 0 : x, NaN and −0 kept
			} else if (acc) {
				y = _mm512_add_ps(_mm512_maskz_loadu_ps(mk[v], o), y);
			}
			_mm512_mask_storeu_ps(o, mk[v], y);
		}
}

#define MM16_REST(K, NV)                                                                                     \
	case K:                                                                                                  \
		mm16_block((K), (NV), nt, alpha, c + (size_t)r * ldc, ldc, cst, x + j, ldx, acc,                     \
		           out + (size_t)r * ldo + j, ldo, mk, aa ? aa + r : NULL, cc ? cc + j : NULL);              \
		break

#define MM16_ROWS(R, NV)                                                                                     \
	do {                                                                                                     \
		int r = 0;                                                                                           \
		for (; r + (R) <= nr; r += (R))                                                                      \
			mm16_block((R), (NV), nt, alpha, c + (size_t)r * ldc, ldc, cst, x + j, ldx, acc,                 \
			           out + (size_t)r * ldo + j, ldo, mk, aa ? aa + r : NULL, cc ? cc + j : NULL);          \
		switch (nr - r) { /* fewer than R rows: one block, as MM_ROWS */                                     \
			MM16_REST(1, NV);                                                                                \
			MM16_REST(2, NV);                                                                                \
			MM16_REST(3, NV);                                                                                \
			MM16_REST(4, NV);                                                                                \
			MM16_REST(5, NV);                                                                                \
			MM16_REST(6, NV);                                                                                \
			MM16_REST(7, NV);                                                                                \
		}                                                                                                    \
	} while (0)

// mm16_dist is mm16, or with aa and cc (then acc = 0) dist's whole
// pass: out_rj = max(0, (α Σ_t c x + aa_r) + cc_j) (mm16_block).
__attribute__((always_inline)) EM_TARGET512
static inline void mm16_dist(int nr, int nt, int w, float alpha, const float *c, int ldc, int cst, const float *x,
                             int ldx, int acc, float *out, int ldo, const float *aa, const float *cc) {
	__mmask16 mk[2] = {0xffff, 0xffff};
	int j = 0;
	for (; j + 32 <= w; j += 32) MM16_ROWS(8, 2);
	if (w - j > 16) {
		mk[1] = (__mmask16)((1u << (w - j - 16)) - 1);
		MM16_ROWS(8, 2);
	} else if (w > j) {
		mk[0] = (__mmask16)(w - j == 16 ? 0xffff : (1u << (w - j)) - 1);
		MM16_ROWS(8, 1);
	}
}
#undef MM16_ROWS
#undef MM16_REST

// mm16 is mm for nt ≥ 1 in 16-lane vectors, the last of a row under a
// lane mask: a row of 50 is 4 vectors, not 6 and a masked seventh. Its
// values are mm's bit for bit (mm16_block).
EM_TARGET512
static void mm16(int nr, int nt, int w, float alpha, const float *c, int ldc, int cst, const float *x, int ldx,
                 int acc, float *out, int ldo) {
	mm16_dist(nr, nt, w, alpha, c, ldc, cst, x, ldx, acc, out, ldo, NULL, NULL);
}

// dist16 is dist's product and adds for m > 8 in one pass (mm16_dist).
EM_TARGET512
static void dist16(int n, int w, int m, const float *a, int lda, const float *ct, const float *aa, const float *cc,
                   float *out) {
	mm16_dist(n, w, m, -2, a, lda, 1, ct, m, 0, out, m, aa, cc);
}

// mm8t_block is mm for w = 8 with c read transposed (ldc = 1, so c's
// values for one t and consecutive rows are contiguous), on NB blocks of
// 16 rows from r0: lanes run along the rows, so one zmm multiply-add
// takes 16 rows' products with one of x's 8 columns (broadcast), twice
// the lanes of a row of 8. The sums are then transposed back to rows of
// out (transpose8_regs on each 8×8 half). Each element is mm_block's sum
// bit for bit: fused multiply-adds over t in order from 0, times α, then
// added to out.
__attribute__((always_inline)) EM_TARGET512
static inline void mm8t_block(const int NB, int nr, int r0, int nt, float alpha, const float *c, int cst,
                              const float *x, int ldx, int acc, float *out, int ldo) {
	__m512 s[2][8];
	__mmask16 mk[2];
	for (int b = 0; b < NB; b++) {
		int left = nr - r0 - 16 * b;
		mk[b] = left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
		for (int k = 0; k < 8; k++) s[b][k] = _mm512_setzero_ps();
	}
	for (int t = 0; t < nt; t++) {
		const float *xt = x + (size_t)t * ldx, *ct = c + (size_t)t * cst + r0;
		__m512 cv[2];
		for (int b = 0; b < NB; b++) cv[b] = _mm512_maskz_loadu_ps(mk[b], ct + 16 * b);
		for (int k = 0; k < 8; k++) {
			const __m512 xk = _mm512_set1_ps(xt[k]);
			for (int b = 0; b < NB; b++) s[b][k] = _mm512_fmadd_ps(cv[b], xk, s[b][k]);
		}
	}
	const __m256 va = _mm256_set1_ps(alpha);
	// the loops over b, half and k unroll whole (no early exit), so that
	// s stays in registers: with a break here GCC kept s on the stack and
	// stored every accumulator in each step of the loop over t
#pragma GCC unroll 2
	for (int b = 0; b < NB; b++)
#pragma GCC unroll 2
		for (int half = 0; half < 2; half++) {
			const int row = r0 + 16 * b + 8 * half, nrow = nr - row < 8 ? nr - row : 8;
			__m256 h[8], rows[8];
#pragma GCC unroll 8
			for (int k = 0; k < 8; k++) h[k] = half ? _mm512_extractf32x8_ps(s[b][k], 1) : _mm512_castps512_ps256(s[b][k]);
			if (nrow <= 0) continue;
			transpose8_regs(h, rows);
			for (int i = 0; i < nrow; i++) {
				float *o = out + (size_t)(row + i) * ldo;
				__m256 y = _mm256_mul_ps(va, rows[i]);
				if (acc) y = _mm256_add_ps(_mm256_loadu_ps(o), y);
				_mm256_storeu_ps(o, y);
			}
		}
}

// mm8p_block is mm for w = 8 on P pairs of rows from out's first: one
// zmm holds two rows of out, r in the low 8 lanes and r + 1 in the high
// 8, so that a multiply-add takes 16 products where mm_block's ymm took
// 8, with c's two values broadcast each to its half and x's row of 8 to
// both. Each element is mm_block's sum bit for bit: fused multiply-adds
// over t in order from 0, times α, then added to out.
__attribute__((always_inline)) EM_TARGET512
static inline void mm8p_block(const int P, int nt, float alpha, const float *c, int ldc, int cst, const float *x,
                              int ldx, int acc, float *out, int ldo) {
	__m512 s[8];
	// the loops over p unroll (P is a constant at every call), so that s
	// stays in registers whatever the optimisation level
#pragma GCC unroll 8
	for (int p = 0; p < P; p++) s[p] = _mm512_setzero_ps();
	for (int t = 0; t < nt; t++) {
		const __m512 xv = _mm512_broadcast_f32x8(_mm256_loadu_ps(x + (size_t)t * ldx));
		const float *ct = c + (size_t)t * cst;
#pragma GCC unroll 8
		for (int p = 0; p < P; p++) {
			const float *cr = ct + (size_t)(2 * p) * ldc;
			const __m512 b = _mm512_mask_broadcastss_ps(_mm512_set1_ps(cr[0]), 0xff00, _mm_load_ss(cr + ldc));
			s[p] = _mm512_fmadd_ps(b, xv, s[p]);
		}
	}
	const __m512 va = _mm512_set1_ps(alpha);
#pragma GCC unroll 8
	for (int p = 0; p < P; p++) {
		float *o0 = out + (size_t)(2 * p) * ldo, *o1 = o0 + ldo;
		__m512 y = _mm512_mul_ps(va, s[p]);
		if (acc)
			y = _mm512_add_ps(_mm512_insertf32x8(_mm512_castps256_ps512(_mm256_loadu_ps(o0)), _mm256_loadu_ps(o1), 1), y);
		_mm256_storeu_ps(o0, _mm512_castps512_ps256(y));
		_mm256_storeu_ps(o1, _mm512_extractf32x8_ps(y, 1));
	}
}

// mm8p is mm for w = 8 and nt ≥ 1 on the rows in whole pairs, 16 rows
// (8 accumulators, enough to cover the multiply-add's latency) at a time
// (mm8p_block); it returns how many rows it did (nr rounded down to
// even).
EM_TARGET512
static int mm8p(int nr, int nt, float alpha, const float *c, int ldc, int cst, const float *x, int ldx, int acc,
                float *out, int ldo) {
	int r = 0;
	for (; r + 16 <= nr; r += 16)
		mm8p_block(8, nt, alpha, c + (size_t)r * ldc, ldc, cst, x, ldx, acc, out + (size_t)r * ldo, ldo);
	const float *cr = c + (size_t)r * ldc;
	float *orow = out + (size_t)r * ldo;
	switch ((nr - r) / 2) {
	case 1: mm8p_block(1, nt, alpha, cr, ldc, cst, x, ldx, acc, orow, ldo); break;
	case 2: mm8p_block(2, nt, alpha, cr, ldc, cst, x, ldx, acc, orow, ldo); break;
	case 3: mm8p_block(3, nt, alpha, cr, ldc, cst, x, ldx, acc, orow, ldo); break;
	case 4: mm8p_block(4, nt, alpha, cr, ldc, cst, x, ldx, acc, orow, ldo); break;
	case 5: mm8p_block(5, nt, alpha, cr, ldc, cst, x, ldx, acc, orow, ldo); break;
	case 6: mm8p_block(6, nt, alpha, cr, ldc, cst, x, ldx, acc, orow, ldo); break;
	case 7: mm8p_block(7, nt, alpha, cr, ldc, cst, x, ldx, acc, orow, ldo); break;
	}
	return nr & ~1;
}

// mm8t is mm for w = 8, c read transposed (ldc = 1) and nt ≥ 1, 32 rows
// at a time (mm8t_block).
EM_TARGET512
static void mm8t(int nr, int nt, float alpha, const float *c, int cst, const float *x, int ldx, int acc, float *out,
                 int ldo) {
	int r = 0;
	for (; r + 16 < nr; r += 32) mm8t_block(2, nr, r, nt, alpha, c, cst, x, ldx, acc, out, ldo);
	if (r < nr) mm8t_block(1, nr, r, nt, alpha, c, cst, x, ldx, acc, out, ldo);
}
#endif

// mm sets out[r][:w] = α Σ_t c[r·ldc + t·cst] x[t][:w] for r < nr (acc = 0),
// or adds it (acc = 1); x's rows are strided by ldx, out's by ldo. With
// cst = 1 c is [nr×nt] row-major; with ldc = 1 and cst = its row length,
// c is read transposed. Lanes run along out's rows: nr and nt are a few
// dozen, w 8–256.
EM_TARGET
static void mm(int nr, int nt, int w, float alpha, const float *c, int ldc, int cst, const float *x, int ldx, int acc,
               float *out, int ldo) {
	if (nr <= 0 || w <= 0) return;
	if (nt <= 0) {
		if (!acc)
			for (int r = 0; r < nr; r++) memset(out + (size_t)r * ldo, 0, sizeof(float) * (size_t)w);
		return;
	}
#ifdef EM_AVX512
	if (w > 8) { // one ymm holds a row of 8
		mm16(nr, nt, w, alpha, c, ldc, cst, x, ldx, acc, out, ldo);
		return;
	}
	// lanes along the rows instead, where there are enough terms for the
	// multiply-adds to outweigh transposing the sums back (a query of
	// PMA's seed, nt = 1, took 4 transposes of 8×8 per 16 rows for 16
	// multiply-adds; mm_block's rows give the same bits)
	if (w == 8 && ldc == 1 && nr >= 12 && nt >= 4) {
		mm8t(nr, nt, alpha, c, cst, x, ldx, acc, out, ldo);
		return;
	}
	// otherwise two rows to a zmm, and an odd last row below
	if (w == 8 && nr >= 2) {
		int done = mm8p(nr, nt, alpha, c, ldc, cst, x, ldx, acc, out, ldo);
		c += (size_t)done * ldc, out += (size_t)done * ldo, nr -= done;
		if (nr == 0) return;
	}
#endif
	__m256i tail = _mm256_setzero_si256();
	int j = 0;
	for (; j + 16 <= w; j += 16) MM_ROWS(4, 2, 0);
	if (j + 8 <= w) {
		MM_ROWS(8, 1, 0);
		j += 8;
	}
	if (j < w) {
		tail = lanes(w - j);
		MM_ROWS(8, 1, 1);
	}
}

// transpose8 stores the 8×8 block at x (rows strided by ldx) transposed
// at t (rows strided by ldt), in registers: unpack, shuffle, swap halves.
__attribute__((always_inline)) EM_TARGET
static inline void transpose8(const float *x, size_t ldx, float *t, size_t ldt) {
	__m256 r[8], c[8];
	for (int i = 0; i < 8; i++) r[i] = _mm256_loadu_ps(x + (size_t)i * ldx);
	transpose8_regs(r, c);
	for (int i = 0; i < 8; i++) _mm256_storeu_ps(t + (size_t)i * ldt, c[i]);
}

// transpose sets t [w×rows] to x [rows×w]ᵀ (x's rows strided by ldx):
// 8×8 blocks in registers, the edges one element at a time (one scalar
// store per element, each to another row of t, cost more than the
// products that read t).
EM_TARGET
static void transpose(const float *x, int ldx, int rows, int w, float *t) {
	const int r8 = rows & ~7, w8 = w & ~7;
	for (int r = 0; r < r8; r += 8)
		for (int k = 0; k < w8; k += 8) transpose8(x + (size_t)r * ldx + k, ldx, t + (size_t)k * rows + r, rows);
	for (int k = w8; k < w; k++)
		for (int r = 0; r < r8; r++) t[(size_t)k * rows + r] = x[(size_t)r * ldx + k];
	for (int k = 0; k < w; k++)
		for (int r = r8; r < rows; r++) t[(size_t)k * rows + r] = x[(size_t)r * ldx + k];
}

// axpy_row adds a·x to y [w]: one fused multiply-add an element, as GCC
// contracts the scalar loop's y += a·x (so vectors give its values).
EM_TARGET
static void axpy_row(int w, float a, const float *x, float *y) {
	const __m256 va = _mm256_set1_ps(a);
	int k = 0;
	for (; k + 8 <= w; k += 8) _mm256_storeu_ps(y + k, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + k), _mm256_loadu_ps(y + k)));
	for (; k < w; k++) y[k] = fmaf(a, x[k], y[k]);
}

// dot is Σ_k a_k b_k over k < n.
EM_TARGET
static float dot(const float *a, const float *b, int n) {
	__m256 s = _mm256_setzero_ps();
	int k = 0;
	for (; k + 8 <= n; k += 8) s = _mm256_fmadd_ps(_mm256_loadu_ps(a + k), _mm256_loadu_ps(b + k), s);
	float r = hsum(s);
	for (; k < n; k++) r += a[k] * b[k];
	return r;
}

// dot_avx2 is dot, never inlined: the AVX-512 functions call it so that
// its scalar loop stays compiled for AVX2, where GCC fuses its
// multiply-adds as row_dots' calls do (inlined under the AVX-512 target
// it vectorized the loop and summed otherwise).
#ifdef EM_AVX512
__attribute__((noinline)) EM_TARGET
static float dot_avx2(const float *a, const float *b, int n) { return dot(a, b, n); }
#endif

// hsum8x8 is the vector of the lane sums of v[0…7]: lane i is the sum of
// v[i]'s lanes (one reduction tree for eight rows instead of eight).
__attribute__((always_inline)) EM_TARGET
static inline __m256 hsum8x8(const __m256 *v) {
	__m256 t0 = _mm256_hadd_ps(v[0], v[1]), t1 = _mm256_hadd_ps(v[2], v[3]);
	__m256 t2 = _mm256_hadd_ps(v[4], v[5]), t3 = _mm256_hadd_ps(v[6], v[7]);
	__m256 u0 = _mm256_hadd_ps(t0, t1), u1 = _mm256_hadd_ps(t2, t3);
	return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}

// row_dots sets out[i] = a_i · b_i for rows a_i, b_i [w] (strided by lda,
// ldb; b's stride may be 0: one vector), eight rows at a time.
EM_TARGET
static void row_dots(int rows, int w, const float *a, int lda, const float *b, int ldb, float *out) {
	const int w8 = w & ~7;
	const __m256i tail = lanes(w - w8);
	int i = 0;
	for (; i + 8 <= rows; i += 8) {
		__m256 acc[8];
		for (int r = 0; r < 8; r++) {
			const float *ar = a + (size_t)(i + r) * lda, *br = b + (size_t)(i + r) * ldb;
			__m256 s = _mm256_setzero_ps();
			int k = 0;
			for (; k < w8; k += 8) s = _mm256_fmadd_ps(_mm256_loadu_ps(ar + k), _mm256_loadu_ps(br + k), s);
			if (k < w) s = _mm256_fmadd_ps(_mm256_maskload_ps(ar + k, tail), _mm256_maskload_ps(br + k, tail), s);
			acc[r] = s;
		}
		_mm256_storeu_ps(out + i, hsum8x8(acc));
	}
	for (; i < rows; i++) out[i] = dot(a + (size_t)i * lda, b + (size_t)i * ldb, w);
}

// hsum8 is the vector of hsum(v[0]), …, hsum(v[7]): each lane the sum
// of one vector's lanes in hsum's order, (v0 + v4) + (v2 + v6) then
// plus (v1 + v5) + (v3 + v7), the same additions with the same operands,
// eight rows to a reduction tree (hsum8x8 adds in another order).
__attribute__((always_inline)) EM_TARGET
static inline __m256 hsum8(const __m256 *v) {
	__m256 h[4], t[2];
	for (int r = 0; r < 4; r++) // [lo + hi of v[2r] | lo + hi of v[2r+1]]
		h[r] = _mm256_add_ps(_mm256_permute2f128_ps(v[2 * r], v[2 * r + 1], 0x20),
		                     _mm256_permute2f128_ps(v[2 * r], v[2 * r + 1], 0x31));
	for (int r = 0; r < 2; r++) // lanes 0 + 2 and 1 + 3 of each half: [v2r·, v2r+2· | v2r+1·, v2r+3·]
		t[r] = _mm256_add_ps(_mm256_shuffle_ps(h[2 * r], h[2 * r + 1], _MM_SHUFFLE(1, 0, 1, 0)),
		                     _mm256_shuffle_ps(h[2 * r], h[2 * r + 1], _MM_SHUFFLE(3, 2, 3, 2)));
	// pair lane 0 + lane 1: [v0, v2, v4, v6 | v1, v3, v5, v7], into order
	__m256 u = _mm256_add_ps(_mm256_shuffle_ps(t[0], t[1], _MM_SHUFFLE(2, 0, 2, 0)),
	                         _mm256_shuffle_ps(t[0], t[1], _MM_SHUFFLE(3, 1, 3, 1)));
	return _mm256_permutevar8x32_ps(u, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// sq_norms is sqNorms: out[i] = ‖x_i‖² for rows x_i [w] strided by ld,
// each dot's value: for w a multiple of 8, eight rows at a time with
// their horizontal sums in one hsum8 (a row of a head of 8 is one
// multiply and a sum, and a reduction a row cost more than the rest).
EM_TARGET
static void sq_norms(const float *x, int rows, int w, int ld, float *out) {
	int i = 0;
	if ((w & 7) == 0)
		for (; i + 8 <= rows; i += 8) {
			__m256 acc[8];
			for (int r = 0; r < 8; r++) {
				const float *xr = x + (size_t)(i + r) * ld;
				__m256 s = _mm256_setzero_ps();
				for (int k = 0; k < w; k += 8) {
					const __m256 v = _mm256_loadu_ps(xr + k);
					s = _mm256_fmadd_ps(v, v, s);
				}
				acc[r] = s;
			}
			_mm256_storeu_ps(out + i, hsum8(acc));
		}
	for (; i < rows; i++) out[i] = dot(x + (size_t)i * ld, x + (size_t)i * ld, w);
}

#ifdef EM_AVX512
// mask16 is the mask of the first min(k, 16) lanes (k > 0).
static inline __mmask16 mask16(int k) { return k >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << k) - 1); }
#endif

#ifdef EM_AVX512
// col_sums16 is col_sums (from +0) or add_col_sums (from out) for m > 8,
// 16 columns at a time: the same sums, down the rows in order.
EM_TARGET512
static void col_sums16(int n, int m, const float *x, float *out, int acc0) {
	for (int j = 0; j < m; j += 16) {
		const __mmask16 k = mask16(m - j);
		__m512 acc = acc0 ? _mm512_maskz_loadu_ps(k, out + j) : _mm512_setzero_ps();
		for (int i = 0; i < n; i++) acc = _mm512_add_ps(acc, _mm512_maskz_loadu_ps(k, x + (size_t)i * m + j));
		_mm512_mask_storeu_ps(out + j, k, acc);
	}
}

// add_row16 is add_row for m > 8, 16 lanes at a time.
EM_TARGET512
static void add_row16(int n, int m, float *x, const float *v) {
	for (int i = 0; i < n; i++)
		for (int j = 0; j < m; j += 16) {
			const __mmask16 k = mask16(m - j);
			float *xr = x + (size_t)i * m + j;
			_mm512_mask_storeu_ps(xr, k, _mm512_add_ps(_mm512_maskz_loadu_ps(k, xr), _mm512_maskz_loadu_ps(k, v + j)));
		}
}
#endif

// col_sums is colSums: out[j] = Σ_i x_ij for x [n×m], i in order.
EM_TARGET
static void col_sums(int n, int m, const float *x, float *out) {
#ifdef EM_AVX512
	if (m > 8) { // 16 columns at a time, the same sums
		col_sums16(n, m, x, out, 0);
		return;
	}
#endif
	int j = 0;
	for (; j + 8 <= m; j += 8) { // a block of columns down all rows, in a register
		__m256 acc = _mm256_setzero_ps();
		for (int i = 0; i < n; i++) acc = _mm256_add_ps(acc, _mm256_loadu_ps(x + (size_t)i * m + j));
		_mm256_storeu_ps(out + j, acc);
	}
	for (; j < m; j++) {
		float acc = 0;
		for (int i = 0; i < n; i++) acc += x[(size_t)i * m + j];
		out[j] = acc;
	}
}

// add_col_sums adds Σ_i x_ij to out[j] for x [n×m], i in order, a block
// of columns at a time in a register.
EM_TARGET
static void add_col_sums(int n, int m, const float *x, float *out) {
#ifdef EM_AVX512
	if (m > 8) {
		col_sums16(n, m, x, out, 1);
		return;
	}
#endif
	int j = 0;
	for (; j + 8 <= m; j += 8) {
		__m256 acc = _mm256_loadu_ps(out + j);
		for (int i = 0; i < n; i++) acc = _mm256_add_ps(acc, _mm256_loadu_ps(x + (size_t)i * m + j));
		_mm256_storeu_ps(out + j, acc);
	}
	for (; j < m; j++) {
		float acc = out[j];
		for (int i = 0; i < n; i++) acc += x[(size_t)i * m + j];
		out[j] = acc;
	}
}

// add_row adds v [m] to every row of x [n×m].
EM_TARGET
static void add_row(int n, int m, float *x, const float *v) {
#ifdef EM_AVX512
	if (m > 8) {
		add_row16(n, m, x, v);
		return;
	}
#endif
	for (int i = 0; i < n; i++) {
		float *xr = x + (size_t)i * m;
		int j = 0;
		for (; j + 8 <= m; j += 8) _mm256_storeu_ps(xr + j, _mm256_add_ps(_mm256_loadu_ps(xr + j), _mm256_loadu_ps(v + j)));
		for (; j < m; j++) xr[j] += v[j];
	}
}

#ifdef EM_AVX512
// dist_rows16 is dist_back's first pass for m > 8: g ← g ⊙ [D > 0] 16
// lanes at a time, and rs_i = Σ_j g_ij as the AVX2 loop sums it: 8-lane
// blocks from +0 in order (the halves of each 16-lane vector, low then
// high), hsum, then the last m % 8 one at a time. For m ≤ 64 it also
// sets cs_j = Σ_i g_ij, col_sums' sums (from +0, down the rows in
// order) in registers as the rows go by, and returns 1; otherwise it
// leaves cs to col_sums and returns 0. Eight rows share one reduction
// tree (hsum8: each lane hsum's additions) and their last columns' adds
// (a gather a column), where a row took its own hsum and scalar loop.
EM_TARGET512
static int dist_rows16(int n, int m, const float *dd, float *g, float *rs, float *cs) {
	const int m8 = m & ~7, nv = (m + 15) / 16, cols = m <= 64;
	__m512 csum[4];
	__mmask16 in[4];
	for (int v = 0; v < 4; v++) csum[v] = _mm512_setzero_ps(), in[v] = v < nv ? mask16(m - 16 * v) : 0;
	int i = 0;
	if (cols) {
		const __m256i at = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(m));
		for (; i + 8 <= n; i += 8) {
			__m256 s[8];
			for (int r = 0; r < 8; r++) {
				float *row = g + (size_t)(i + r) * m;
				const float *d = dd + (size_t)(i + r) * m;
				s[r] = _mm256_setzero_ps();
				for (int v = 0; v < nv; v++) {
					const int j = 16 * v;
					__mmask16 pos = _mm512_mask_cmp_ps_mask(in[v], _mm512_maskz_loadu_ps(in[v], d + j), _mm512_setzero_ps(), _CMP_GT_OQ);
					__m512 x = _mm512_maskz_loadu_ps(pos, row + j);
					_mm512_mask_storeu_ps(row + j, in[v], x);
					csum[v] = _mm512_add_ps(csum[v], x);
					if (j + 16 <= m8)
						s[r] = add_halves(s[r], x);
					else if (j + 8 <= m8)
						s[r] = _mm256_add_ps(s[r], _mm512_castps512_ps256(x));
				}
			}
			__m256 t = hsum8(s);
			for (int j = m8; j < m; j++) t = _mm256_add_ps(t, _mm256_i32gather_ps(g + (size_t)i * m + j, at, 4));
			_mm256_storeu_ps(rs + i, t);
		}
	}
	for (; i < n; i++) {
		float *row = g + (size_t)i * m;
		const float *d = dd + (size_t)i * m;
		__m256 s = _mm256_setzero_ps();
		int j = 0;
		for (; j < m; j += 16) {
			const __mmask16 k = mask16(m - j);
			__mmask16 pos = _mm512_mask_cmp_ps_mask(k, _mm512_maskz_loadu_ps(k, d + j), _mm512_setzero_ps(), _CMP_GT_OQ);
			__m512 x = _mm512_maskz_loadu_ps(pos, row + j);
			_mm512_mask_storeu_ps(row + j, k, x);
			if (cols) csum[j / 16] = _mm512_add_ps(csum[j / 16], x);
			if (j + 16 <= m8)
				s = add_halves(s, x);
			else if (j + 8 <= m8)
				s = _mm256_add_ps(s, _mm512_castps512_ps256(x));
		}
		float t = hsum(s);
		for (j = m8; j < m; j++) t += row[j];
		rs[i] = t;
	}
	if (cols)
		for (int v = 0; v < nv; v++) _mm512_mask_storeu_ps(cs + 16 * v, in[v], csum[v]);
	return cols;
}
#endif

// dist is emDist: out [n×m] = max(0, aa_i − 2 a_i·c_j + cc_j), for a
// [n×w] and c [m×w]; ct is scratch [w×m].
EM_TARGET
static void dist(int n, int m, int w, const float *a, int lda, const float *c, int ldc, const float *aa,
                 const float *cc, float *out, float *ct) {
	transpose(c, ldc, m, w, ct);
#ifdef EM_AVX512
	if (m > 8) { // product and adds in one pass over out
		dist16(n, w, m, a, lda, ct, aa, cc, out);
		return;
	}
#endif
	mm(n, w, m, -2, a, lda, 1, ct, m, 0, out, m);
	for (int i = 0; i < n; i++) {
		float *row = out + (size_t)i * m, ai = aa[i];
		for (int j = 0; j < m; j++) {
			float x = row[j] + ai + cc[j];
			row[j] = x < 0 ? 0 : x;
		}
	}
}

// dist_back_apply is dist_back past its masking and sums: given G [n×m]
// and its row and column sums rs and cs, da_i += 2 rs_i a_i − 2 Σ_j G_ij
// c_j and dc_j += 2 cs_j c_j − 2 Σ_i G_ij a_i (da or dc may be NULL).
EM_TARGET
static void dist_back_apply(int n, int m, int w, const float *a, int lda, const float *c, int ldc, const float *g,
                            float *da, int ldda, float *dc, int lddc, const float *rs, const float *cs) {
	if (da) {
		for (int i = 0; i < n; i++)
			if (rs[i] != 0) axpy_row(w, 2 * rs[i], a + (size_t)i * lda, da + (size_t)i * ldda);
		mm(n, m, w, -2, g, m, 1, c, ldc, 1, da, ldda);
	}
	if (dc) {
		for (int j = 0; j < m; j++)
			if (cs[j] != 0) axpy_row(w, 2 * cs[j], c + (size_t)j * ldc, dc + (size_t)j * lddc);
		mm(m, n, w, -2, g, 1, m, a, lda, 1, dc, lddc);
	}
}

// dist_back is emDistBack: g [n×m] becomes G = g ⊙ [D > 0], and
// da_i += 2 (Σ_j G_ij) a_i − 2 Σ_j G_ij c_j, dc_j += 2 (Σ_i G_ij) c_j −
// 2 Σ_i G_ij a_i; da or dc may be NULL. rs [n] and cs [m] are scratch.
EM_TARGET
static void dist_back(int n, int m, int w, const float *a, int lda, const float *c, int ldc, const float *dd, float *g,
                      float *da, int ldda, float *dc, int lddc, float *rs, float *cs) {
	const __m256 zero = _mm256_setzero_ps();
	int have_cs = 0;
#ifdef EM_AVX512
	if (m > 8) have_cs = dist_rows16(n, m, dd, g, rs, cs);
	for (int i = 0; m <= 8 && i < n; i++) {
#else
	for (int i = 0; i < n; i++) {
#endif
		float *row = g + (size_t)i * m;
		const float *d = dd + (size_t)i * m;
		__m256 s = zero;
		int j = 0;
		for (; j + 8 <= m; j += 8) {
			__m256 x = _mm256_and_ps(_mm256_cmp_ps(_mm256_loadu_ps(d + j), zero, _CMP_GT_OQ), _mm256_loadu_ps(row + j));
			_mm256_storeu_ps(row + j, x);
			s = _mm256_add_ps(s, x);
		}
		float t = hsum(s);
		for (; j < m; j++) {
			if (!(d[j] > 0)) row[j] = 0;
			t += row[j];
		}
		rs[i] = t;
	}
	if (!have_cs) col_sums(n, m, g, cs);
	dist_back_apply(n, m, w, a, lda, c, ldc, g, da, ldda, dc, lddc, rs, cs);
}

// row_top is the largest score of a row over the real keys, NaN if one of
// them is NaN (emSoftmax's max).
EM_TARGET
static float row_top(const float *x, int m, const float *km) {
	const __m256 zero = _mm256_setzero_ps(), ninf = _mm256_set1_ps(-INFINITY);
	__m256 vmx = ninf, nan = zero;
	int j = 0;
	for (; j + 8 <= m; j += 8) {
		__m256 v = _mm256_loadu_ps(x + j);
		if (km) v = _mm256_blendv_ps(ninf, v, _mm256_cmp_ps(_mm256_loadu_ps(km + j), zero, _CMP_NEQ_UQ));
		nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
		vmx = _mm256_max_ps(vmx, v);
	}
	float l[8], top = -INFINITY;
	_mm256_storeu_ps(l, vmx);
	for (int k = 0; k < 8; k++) top = l[k] > top ? l[k] : top;
	int isnan = _mm256_movemask_ps(nan) != 0;
	for (; j < m; j++) {
		if (km && km[j] == 0) continue;
		if (x[j] != x[j]) isnan = 1;
		top = x[j] > top ? x[j] : top;
	}
	return isnan ? NAN : top;
}

// hsum_d is the sum of the 8 lanes of v, added in double and rounded to
// float once (as emSoftmax's sum, which accumulates in double).
__attribute__((always_inline)) EM_TARGET
static inline float hsum_d(__m256 v) {
	__m256d a = _mm256_add_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(v)), _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
	__m128d h = _mm_add_pd(_mm256_castpd256_pd128(a), _mm256_extractf128_pd(a, 1));
	return (float)_mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h)));
}

// softmax_long is softmax for one row of any length: a pass for the max
// (row_top), one for e^(s − max) and its sum, one for the division.
EM_TARGET
static void softmax_long(const float *src, float *dst, int m, const float *km) {
	const int m8 = m & ~7;
	const __m256 zero = _mm256_setzero_ps(), vt = _mm256_set1_ps(row_top(src, m, km));
	__m256 acc = zero, et = zero;
	int j = 0;
	for (; j < m8; j += 8) {
		__m256 e = exp_le0(_mm256_min_ps(zero, _mm256_sub_ps(_mm256_loadu_ps(src + j), vt)));
		if (km) e = _mm256_and_ps(e, _mm256_cmp_ps(_mm256_loadu_ps(km + j), zero, _CMP_NEQ_UQ));
		acc = _mm256_add_ps(acc, e);
		_mm256_storeu_ps(dst + j, e);
	}
	const __m256i tail = lanes(m - j);
	if (j < m) {
		__m256 x = _mm256_blendv_ps(_mm256_set1_ps(-INFINITY), _mm256_maskload_ps(src + j, tail), _mm256_castsi256_ps(tail));
		et = exp_le0(_mm256_min_ps(zero, _mm256_sub_ps(x, vt)));
		if (km) et = _mm256_and_ps(et, _mm256_cmp_ps(_mm256_maskload_ps(km + j, tail), zero, _CMP_NEQ_UQ));
		acc = _mm256_add_ps(acc, et);
	}
	const __m256 vz = _mm256_set1_ps(hsum_d(acc));
	for (j = 0; j < m8; j += 8) _mm256_storeu_ps(dst + j, _mm256_div_ps(_mm256_loadu_ps(dst + j), vz));
	if (j < m) {
		float t[8];
		_mm256_storeu_ps(t, _mm256_div_ps(et, vz));
		for (int l = 0; j + l < m; l++) dst[j + l] = t[l];
	}
}

// em_gs is the column terms of gaussian's scores, (k/2) log λ_j and
// λ_j/2, and its optional row term (NULL: none), for softmax_gs to make
// the scores of a row in registers instead of reading them.
typedef struct {
	const float *logs, *hl, *row;
} em_gs;

// softmax_nv is softmax's loop over the rows for rows of NV vectors, the
// last under the lane mask tail, R rows at a time (the last rows one at
// a time) so that one row's exponentials overlap another's reductions.
// NV and R are constants at every call, so that the rows stay in
// registers from their load to their store.
__attribute__((always_inline)) EM_TARGET
static inline void softmax_nv(const int NV, const int R, int n, int m, const float *s, float *w, const float *rows,
                              const __m256 *keep, __m256i tail, const em_gs *gs, const float *dd) {
	const __m256 zero = _mm256_setzero_ps(), ninf = _mm256_set1_ps(-INFINITY);
	for (int i = 0; i < n; i += R) {
		if (i + R > n) {
			softmax_nv(NV, 1, n - i, m, s ? s + (size_t)i * m : NULL, w + (size_t)i * m, rows ? rows + i : NULL, keep,
			           tail, gs, dd ? dd + (size_t)i * m : NULL);
			return;
		}
		__m256 x[R][NV], vt[R], acc[R];
		for (int r = 0; r < R; r++) {
			__m256 vmx = ninf, nan = zero;
			for (int v = 0; v < NV; v++) {
#define LD8(ptr) (v == NV - 1 ? _mm256_maskload_ps((ptr) + 8 * v, tail) : _mm256_loadu_ps((ptr) + 8 * v))
				__m256 y;
				if (gs) { // gaussian's score, as it computes it
					y = _mm256_fnmadd_ps(LD8(gs->hl), LD8(dd + (size_t)(i + r) * m), LD8(gs->logs));
					if (gs->row) y = _mm256_add_ps(y, LD8(gs->row));
				} else {
					y = LD8(s + (size_t)(i + r) * m);
				}
#undef LD8
				x[r][v] = _mm256_blendv_ps(ninf, y, keep[v]);
				nan = _mm256_or_ps(nan, _mm256_cmp_ps(x[r][v], x[r][v], _CMP_UNORD_Q));
				vmx = _mm256_max_ps(vmx, x[r][v]);
			}
			// a NaN score makes the row NaN, as emSoftmax's max does
			vt[r] = _mm256_or_ps(_mm256_set1_ps(hmax_maxps(vmx)), _mm256_set1_ps(_mm256_movemask_ps(nan) ? NAN : 0));
		}
		for (int r = 0; r < R; r++) {
			acc[r] = zero;
			for (int v = 0; v < NV; v++) {
				x[r][v] = exp_le0(_mm256_min_ps(zero, _mm256_sub_ps(x[r][v], vt[r])));
				acc[r] = _mm256_add_ps(acc[r], x[r][v]);
			}
		}
		for (int r = 0; r < R; r++) {
			float *dst = w + (size_t)(i + r) * m;
			if (rows && rows[i + r] == 0) {
				memset(dst, 0, sizeof(float) * (size_t)m);
				continue;
			}
			const __m256 vz = _mm256_set1_ps(hsum_d(acc[r]));
			for (int v = 0; v < NV - 1; v++) _mm256_storeu_ps(dst + 8 * v, _mm256_div_ps(x[r][v], vz));
			if (m == 8 * NV) {
				_mm256_storeu_ps(dst + 8 * (NV - 1), _mm256_div_ps(x[r][NV - 1], vz));
			} else {
				float t[8];
				_mm256_storeu_ps(t, _mm256_div_ps(x[r][NV - 1], vz));
				for (int l = 0; 8 * (NV - 1) + l < m; l++) dst[8 * (NV - 1) + l] = t[l];
			}
		}
	}
}

#ifdef EM_AVX512
// softmax16_nv is softmax_nv in 16-lane vectors: rows of NV ≤ 4 vectors,
// R rows at a time, kept in registers from load to store. keep[v] masks
// the real keys of vector v inside the row (the others read as −∞, whose
// exponential is 0), in[v] the lanes inside the row. Its weights are
// softmax_nv's bit for bit: the exponentials are summed in softmax_nv's
// 8-lane accumulator in its order (add_halves), hsum_d rounds the sum
// once, and the row is divided by it, not multiplied by its reciprocal.
__attribute__((always_inline)) EM_TARGET512
static inline void softmax16_nv(const int NV, const int R, int n, int m, const float *s, float *w, const float *rows,
                                const __mmask16 *keep, const __mmask16 *in, const em_gs *gs, const float *dd) {
	const __m512 zero = _mm512_setzero_ps(), ninf = _mm512_set1_ps(-INFINITY);
	for (int i = 0; i < n; i += R) {
		if (i + R > n) {
			softmax16_nv(NV, 1, n - i, m, s ? s + (size_t)i * m : NULL, w + (size_t)i * m, rows ? rows + i : NULL, keep,
			             in, gs, dd ? dd + (size_t)i * m : NULL);
			return;
		}
		__m512 x[R][NV], vt[R];
		__m256 acc[R];
		for (int r = 0; r < R; r++) {
			__m512 vmx = ninf;
			__mmask16 nan = 0;
			for (int v = 0; v < NV; v++) {
				if (gs) { // gaussian's score, as gaussian16 computes it
#define LD16(ptr) _mm512_maskz_loadu_ps(in[v], (ptr) + 16 * v)
					__m512 y = _mm512_fnmadd_ps(LD16(gs->hl), LD16(dd + (size_t)(i + r) * m), LD16(gs->logs));
					if (gs->row) y = _mm512_add_ps(y, LD16(gs->row));
#undef LD16
					x[r][v] = _mm512_mask_blend_ps(keep[v], ninf, y);
				} else {
					x[r][v] = _mm512_mask_loadu_ps(ninf, keep[v], s + (size_t)(i + r) * m + 16 * v);
				}
				nan |= _mm512_cmp_ps_mask(x[r][v], x[r][v], _CMP_UNORD_Q);
				vmx = _mm512_max_ps(vmx, x[r][v]);
			}
			// a NaN score makes the row NaN, as emSoftmax's max does
			vt[r] = _mm512_set1_ps(nan ? NAN : _mm512_reduce_max_ps(vmx));
		}
		for (int r = 0; r < R; r++) {
			// softmax_nv's sum: 8-lane blocks in order, each 16-lane
			// vector's low half then its high half (lanes past the row
			// add exp(−∞) = +0, which changes no sum)
			acc[r] = _mm256_setzero_ps();
			for (int v = 0; v < NV; v++) {
				x[r][v] = exp_le0_512(_mm512_min_ps(zero, _mm512_sub_ps(x[r][v], vt[r])));
				acc[r] = add_halves(acc[r], x[r][v]);
			}
		}
		for (int r = 0; r < R; r++) {
			float *dst = w + (size_t)(i + r) * m;
			if (rows && rows[i + r] == 0) {
				memset(dst, 0, sizeof(float) * (size_t)m);
				continue;
			}
			const __m512 vz = _mm512_set1_ps(hsum_d(acc[r]));
			for (int v = 0; v < NV; v++) _mm512_mask_storeu_ps(dst + 16 * v, in[v], _mm512_div_ps(x[r][v], vz));
		}
	}
}

// softmax16 is softmax for rows of 9 to 64 scores.
EM_TARGET512
static void softmax16(int n, int m, const float *km, const float *s, float *w, const float *rows, const em_gs *gs,
                      const float *dd) {
	const int nv = (m + 15) / 16;
	__mmask16 keep[4], in[4];
	for (int v = 0; v < nv; v++) {
		int k = m - 16 * v;
		in[v] = k >= 16 ? 0xffff : (__mmask16)((1u << k) - 1);
		keep[v] = in[v];
		if (km) keep[v] &= _mm512_cmp_ps_mask(_mm512_maskz_loadu_ps(in[v], km + 16 * v), _mm512_setzero_ps(), _CMP_NEQ_UQ);
	}
	switch (nv) {
	case 1: softmax16_nv(1, 8, n, m, s, w, rows, keep, in, gs, dd); break;
	case 2: softmax16_nv(2, 4, n, m, s, w, rows, keep, in, gs, dd); break;
	case 3: softmax16_nv(3, 4, n, m, s, w, rows, keep, in, gs, dd); break;
	default: softmax16_nv(4, 3, n, m, s, w, rows, keep, in, gs, dd); break;
	}
}
#endif

// softmax_gs is emSoftmax: w [n×m] = softmax_j of s over the real keys,
// rows outside rows (NULL: none) 0; padded keys get weight exactly 0 (s
// may be w). The exponentials are exp_le0, as pf_exp_row computes them,
// summed added in double, and the row is divided by the sum. A row of up
// to 64 scores stays in registers (softmax_nv), the last vector under a
// lane mask (padded lanes −∞, whose exponential is 0); longer rows take
// softmax_long's passes. With gs (m ≤ 64 only), the scores are not read
// from s but made in registers as gaussian makes them, from gs and the
// distances dd [n×m] (gauss_softmax).
EM_TARGET
static void softmax_gs(const em_p *p, const float *s, float *w, const float *rows, const em_gs *gs, const float *dd) {
	const int n = p->n, m = p->m, nv = (m + 7) / 8;
	const float *km = p->km;
#ifdef EM_AVX512
	if (m > 8 && m <= 64) {
		softmax16(n, m, km, s, w, rows, gs, dd);
		return;
	}
#endif
	if (m > 64) { // never with gs (gauss_softmax)
		for (int i = 0; i < n; i++) {
			if (rows && rows[i] == 0)
				memset(w + (size_t)i * m, 0, sizeof(float) * (size_t)m);
			else
				softmax_long(s + (size_t)i * m, w + (size_t)i * m, m, km);
		}
		return;
	}
	const __m256 zero = _mm256_setzero_ps();
	const __m256i tail = lanes(m - 8 * (nv - 1));
	// keep[v]: the lanes of vector v that are real keys inside the row
	__m256 keep[8];
	for (int v = 0; v < nv; v++) {
		__m256i in = v == nv - 1 ? tail : _mm256_set1_epi32(-1);
		keep[v] = _mm256_castsi256_ps(in);
		if (km)
			keep[v] = _mm256_and_ps(keep[v], _mm256_cmp_ps(_mm256_maskload_ps(km + 8 * v, in), zero, _CMP_NEQ_UQ));
	}
	switch (nv) {
	case 1: softmax_nv(1, 4, n, m, s, w, rows, keep, tail, gs, dd); break;
	case 2: softmax_nv(2, 4, n, m, s, w, rows, keep, tail, gs, dd); break;
	case 3: softmax_nv(3, 2, n, m, s, w, rows, keep, tail, gs, dd); break;
	case 4: softmax_nv(4, 2, n, m, s, w, rows, keep, tail, gs, dd); break;
	case 5: softmax_nv(5, 2, n, m, s, w, rows, keep, tail, gs, dd); break;
	case 6: softmax_nv(6, 2, n, m, s, w, rows, keep, tail, gs, dd); break;
	case 7: softmax_nv(7, 2, n, m, s, w, rows, keep, tail, gs, dd); break;
	default: softmax_nv(8, 1, n, m, s, w, rows, keep, tail, gs, dd); break;
	}
}

// softmax is softmax_gs of the scores s.
EM_TARGET
static void softmax(const em_p *p, const float *s, float *w, const float *rows) { softmax_gs(p, s, w, rows, NULL, NULL); }

#ifdef EM_AVX512
// softmax_back16 is softmax_back's second pass for m > 8, 16 lanes at a
// time, given the row dots rs.
EM_TARGET512
static void softmax_back16(int n, int m, const float *w, float *dw, const float *rs) {
	for (int i = 0; i < n; i++) {
		const float *wr = w + (size_t)i * m;
		float *dr = dw + (size_t)i * m;
		const __m512 vs = _mm512_set1_ps(rs[i]);
		for (int j = 0; j < m; j += 16) {
			const __mmask16 k = mask16(m - j);
			_mm512_mask_storeu_ps(dr + j, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, wr + j),
			                                                _mm512_sub_ps(_mm512_maskz_loadu_ps(k, dr + j), vs)));
		}
	}
}
#endif

// gaussian_back_cols is gaussian_back for the columns from j0 on, one at
// a time: its last m % 8 columns, in both builds the same code. How the
// compiler vectorizes this loop, and so which of its multiply-adds it
// fuses, depends on the target and on what it knows of the arguments:
// GCC 12 fuses each row's multiply-add in a loop a row at a time, and
// takes two rows at a time, unfused, from 24 rows when dd is given but
// from 2 when it is NULL. So it is never inlined into an AVX-512 caller
// nor cloned, and every caller gives it a dd.
__attribute__((noinline, noclone)) EM_TARGET
static void gaussian_back_cols(int n, int m, int j0, float half, const float *lambda, const float *dist,
                               const float *ds, float *dlambda, float *dd) {
	for (int j = j0; j < m; j++) {
		float inv = half / lambda[j], hl = -lambda[j] / 2, acc = dlambda[j];
		for (int i = 0; i < n; i++) {
			const size_t at = (size_t)i * m + j;
			acc += ds[at] * (inv - dist[at] / 2);
			if (dd) dd[at] = hl * ds[at];
		}
		dlambda[j] = acc;
	}
}

#ifdef EM_AVX512
// em_gd is what back_rows16 needs to go on, past softmax_back_add, to
// gaussian_back's and then dist_back's masking and sums: the precisions
// lambda [m] of a k-wide Gaussian (half = k/2), its distances dist [n×m],
// the sums dlambda [m] to add to, and where G = (−λ_j/2 ds_ij)·[D_ij > 0]
// [n×m] and its row and column sums rs [n], cs [m] go (dist_back_apply
// reads them); spare [n×m] is scratch for gaussian_back_cols' dd.
typedef struct {
	float half;
	const float *lambda, *dist;
	float *dlambda, *g, *rs, *cs, *spare;
} em_gd;

// back_rows16_nv is back_rows16 (below) for rows of NV 16-lane vectors:
// softmax_back_add for 8 < m ≤ 64 in one pass over the rows, eight at a
// time: each row gets add_row16's dw + v, row_dots' dot with w (the 8-lane
// blocks' fused multiply-adds in order, the last block's lanes past m 0,
// eight rows to one hsum8x8; the last n % 8 rows through dot, as
// row_dots), softmax_back16's w (x − dot), and, with cols, col_sums16's
// running column sums from cols, down the rows in order: every value as
// the three passes made it, while the rows are in L1 and without three
// loops' loads and stores. With gd, the same pass goes on with each row of
// ds = w (x − dot), as gaussian_back (the multiply-adds GCC fuses there,
// in order down the rows) and then dist_rows16 (G = −λ/2 ds where D > 0,
// its row sums in dist_rows16's order: 8-lane halves to the last whole 8
// columns, eight rows to one hsum8, the columns past them added one by
// one; its column sums down the rows) make them: two more passes over
// [n×m] saved.
//
// NV is a constant at every call (back_rows16's switch), so that the loops
// over the vectors unroll and the running sums stay in registers: with a
// variable count GCC kept them in arrays on the stack, and the masked
// store of λ's sums, read back a row later, stalled on store forwarding (a
// sixth of the function's samples on a Zen 5 EPYC). For the same reason a
// full block's dw + v is made again in the second pass, not stored in the
// first and read back: a load waits for a masked store to the same place
// to complete.
__attribute__((always_inline)) EM_TARGET512
static inline void back_rows16_nv(const int NV, int n, int m, const float *w, float *dw, const float *v, float *cols,
                                  const em_gd *gd) {
	const int nv = NV, m8 = m & ~7;
	__m512 csum[4], lsum[4], gsum[4], inv[4], hl[4];
	__mmask16 in[4], full[4]; // full: the lanes of gaussian_back16's columns, before m8
	const __m512 wh = _mm512_set1_ps(0.5f);
#pragma GCC unroll 4
	for (int k = 0; k < 4; k++) {
		in[k] = k < nv ? mask16(m - 16 * k) : 0;
		full[k] = m8 > 16 * k ? mask16(m8 - 16 * k) : 0;
		csum[k] = cols && k < nv ? _mm512_maskz_loadu_ps(in[k], cols + 16 * k) : _mm512_setzero_ps();
		lsum[k] = gsum[k] = inv[k] = hl[k] = _mm512_setzero_ps();
		if (gd && k < nv) {
			const __m512 lam = _mm512_mask_loadu_ps(_mm512_set1_ps(1), in[k], gd->lambda + 16 * k);
			lsum[k] = _mm512_maskz_loadu_ps(in[k], gd->dlambda + 16 * k);
			inv[k] = _mm512_div_ps(_mm512_set1_ps(gd->half), lam);
			hl[k] = _mm512_mul_ps(_mm512_set1_ps(-0.5f), lam);
		}
	}
	const __m256i at = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(m));
	for (int i = 0; i < n; i += 8) {
		const int rows = n - i < 8 ? n - i : 8;
		float dots[8];
		if (rows == 8) {
			__m256 acc[8];
			for (int r = 0; r < 8; r++) {
				const float *wr = w + (size_t)(i + r) * m;
				float *dr = dw + (size_t)(i + r) * m;
				__m256 s = _mm256_setzero_ps();
#pragma GCC unroll 4
				for (int k = 0; k < nv; k++) {
					const int j = 16 * k;
					__m512 x = _mm512_maskz_loadu_ps(in[k], dr + j);
					// dw + v is made again below, not stored here: read
					// back from a masked store, it stalled on forwarding
					if (v) x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(in[k], v + j));
					const __m512 a = _mm512_maskz_loadu_ps(in[k], wr + j);
					s = fma_blocks(a, x, s, j + 8 < m);
				}
				acc[r] = s;
			}
			_mm256_storeu_ps(dots, hsum8x8(acc));
		} else {
			for (int r = 0; r < rows; r++) {
				const float *wr = w + (size_t)(i + r) * m;
				float *dr = dw + (size_t)(i + r) * m;
				if (v) {
#pragma GCC unroll 4
					for (int k = 0; k < nv; k++) {
						const int j = 16 * k;
						_mm512_mask_storeu_ps(dr + j, in[k],
						                      _mm512_add_ps(_mm512_maskz_loadu_ps(in[k], dr + j), _mm512_maskz_loadu_ps(in[k], v + j)));
					}
				}
				dots[r] = dot_avx2(wr, dr, m);
			}
		}
		__m256 gs[8];
		const int add_v = v && rows == 8; // dw + v not yet stored
		for (int r = 0; r < rows; r++) {
			const float *wr = w + (size_t)(i + r) * m;
			float *dr = dw + (size_t)(i + r) * m;
			const __m512 vs = _mm512_set1_ps(dots[r]);
			__m256 g = _mm256_setzero_ps(); // the row's sum in a register, stored once
#pragma GCC unroll 4
			for (int k = 0; k < nv; k++) {
				const int j = 16 * k;
				__m512 x = _mm512_maskz_loadu_ps(in[k], dr + j);
				if (add_v) x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(in[k], v + j));
				__m512 y = _mm512_mul_ps(_mm512_maskz_loadu_ps(in[k], wr + j), _mm512_sub_ps(x, vs));
				_mm512_mask_storeu_ps(dr + j, in[k], y);
				__asm__("" : "+v"(y)); // summed as stored: no multiply-add fused into the sum
				if (cols) csum[k] = _mm512_add_ps(csum[k], y);
				if (!gd) continue;
				const size_t o = (size_t)(i + r) * m + j;
				const __m512 dd = _mm512_maskz_loadu_ps(in[k], gd->dist + o);
				lsum[k] = _mm512_mask3_fmadd_ps(y, _mm512_fnmadd_ps(dd, wh, inv[k]), lsum[k], full[k]);
				const __mmask16 pos = _mm512_mask_cmp_ps_mask(in[k], dd, _mm512_setzero_ps(), _CMP_GT_OQ);
				const __m512 gx = _mm512_maskz_mul_ps(pos, hl[k], y);
				_mm512_mask_storeu_ps(gd->g + o, in[k], gx);
				gsum[k] = _mm512_add_ps(gsum[k], gx);
				if (j + 16 <= m8)
					g = add_halves(g, gx);
				else if (j + 8 <= m8)
					g = _mm256_add_ps(g, _mm512_castps512_ps256(gx));
			}
			gs[r] = g;
		}
		if (!gd) continue;
		const float *g = gd->g + (size_t)i * m;
		if (rows == 8) {
			__m256 t = hsum8(gs);
			for (int j = m8; j < m; j++) t = _mm256_add_ps(t, _mm256_i32gather_ps(g + j, at, 4));
			_mm256_storeu_ps(gd->rs + i, t);
		} else {
			for (int r = 0; r < rows; r++) {
				float t = hsum(gs[r]);
				for (int j = m8; j < m; j++) t += g[(size_t)r * m + j];
				gd->rs[i + r] = t;
			}
		}
	}
#pragma GCC unroll 4
	for (int k = 0; k < nv; k++) {
		if (cols) _mm512_mask_storeu_ps(cols + 16 * k, in[k], csum[k]);
		if (gd) {
			_mm512_mask_storeu_ps(gd->dlambda + 16 * k, full[k], lsum[k]);
			_mm512_mask_storeu_ps(gd->cs + 16 * k, in[k], gsum[k]);
		}
	}
	if (gd) gaussian_back_cols(n, m, m8, gd->half, gd->lambda, gd->dist, dw, gd->dlambda, gd->spare);
}

// back_rows16 is back_rows16_nv for m's count of 16-lane vectors, 1 to 4
// (its callers hold 8 < m ≤ 64).
EM_TARGET512
static void back_rows16(int n, int m, const float *w, float *dw, const float *v, float *cols, const em_gd *gd) {
	switch ((m + 15) / 16) {
	case 1: back_rows16_nv(1, n, m, w, dw, v, cols, gd); break;
	case 2: back_rows16_nv(2, n, m, w, dw, v, cols, gd); break;
	case 3: back_rows16_nv(3, n, m, w, dw, v, cols, gd); break;
	case 4: back_rows16_nv(4, n, m, w, dw, v, cols, gd); break;
	}
}
#endif

// softmax_back is emSoftmaxBack: dw_ij ← w_ij (dw_ij − Σ_k w_ik dw_ik);
// rs [n] is scratch. Its row dots are row_dots' in both builds.
EM_TARGET
static void softmax_back(int n, int m, const float *w, float *dw, float *rs) {
	row_dots(n, m, w, m, dw, m, rs);
#ifdef EM_AVX512
	if (m > 8) { // the rows 16 lanes at a time
		softmax_back16(n, m, w, dw, rs);
		return;
	}
#endif
	for (int i = 0; i < n; i++) {
		const float *wr = w + (size_t)i * m;
		float *dr = dw + (size_t)i * m, s = rs[i];
		const __m256 vs = _mm256_set1_ps(s);
		int j = 0;
		for (; j + 8 <= m; j += 8)
			_mm256_storeu_ps(dr + j, _mm256_mul_ps(_mm256_loadu_ps(wr + j), _mm256_sub_ps(_mm256_loadu_ps(dr + j), vs)));
		for (; j < m; j++) dr[j] = wr[j] * (dr[j] - s);
	}
}

// softmax_back_add is add_row(n, m, dw, v) (v NULL: none), then
// softmax_back, then add_col_sums(n, m, dw, cols) (cols NULL: none): in
// one pass for 8 < m ≤ 64 in the AVX-512 build (back_rows16).
EM_TARGET
static void softmax_back_add(int n, int m, const float *w, float *dw, float *rs, const float *v, float *cols) {
#ifdef EM_AVX512
	if (m > 8 && m <= 64) {
		back_rows16(n, m, w, dw, v, cols, NULL);
		return;
	}
#endif
	if (v) add_row(n, m, dw, v);
	softmax_back(n, m, w, dw, rs);
	if (cols) add_col_sums(n, m, dw, cols);
}

#ifdef EM_AVX512
// gaussian16 is gaussian's pass over the rows for m > 8, 16 lanes at a
// time: logs_j − hl_j D_ij (+ base_ij) (+ row_j), as the AVX2 loop.
EM_TARGET512
static void gaussian16(int n, int m, const float *logs, const float *hl, const float *dd, const float *base,
                       const float *row, float *out) {
	for (int i = 0; i < n; i++) {
		const float *d = dd + (size_t)i * m, *b = base ? base + (size_t)i * m : NULL;
		float *o = out + (size_t)i * m;
		for (int j = 0; j < m; j += 16) {
			const __mmask16 km = mask16(m - j);
			__m512 x = _mm512_sub_ps(_mm512_maskz_loadu_ps(km, logs + j),
			                         _mm512_mul_ps(_mm512_maskz_loadu_ps(km, hl + j), _mm512_maskz_loadu_ps(km, d + j)));
			if (b) x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(km, b + j));
			if (row) x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(km, row + j));
			_mm512_mask_storeu_ps(o + j, km, x);
		}
	}
}
#endif

// gauss_cols sets cols [2m] to gaussian's column terms: (k/2) log λ_j,
// then λ_j/2.
static void gauss_cols(int m, int k, const float *lambda, float *cols) {
	float half = (float)k / 2, *logs = cols, *hl = cols + m, prev = NAN, lp = 0;
	for (int j = 0; j < m; j++) {
		if (!(lambda[j] == prev)) // precisions not adapted are all one value
			prev = lambda[j], lp = half * (float)log((double)prev);
		logs[j] = lp;
		hl[j] = lambda[j] * 0.5f;
	}
}

// gaussian is emGaussian with addRows fused: out_ij = (k/2) log λ_j −
// (λ_j/2) D_ij + base_ij + row_j, base and row optional. cols is
// scratch [2m].
EM_TARGET
static void gaussian(int n, int m, int k, const float *lambda, const float *dd, const float *base, const float *row,
                     float *out, float *cols) {
	float *logs = cols, *hl = cols + m;
	gauss_cols(m, k, lambda, cols);
#ifdef EM_AVX512
	if (m > 8) {
		gaussian16(n, m, logs, hl, dd, base, row, out);
		return;
	}
#endif
	for (int i = 0; i < n; i++) {
		const float *d = dd + (size_t)i * m, *b = base ? base + (size_t)i * m : NULL;
		float *o = out + (size_t)i * m;
		int j = 0;
#define GAUSS_LOOP(B, ROW)                                                                                               \
	for (; j + 8 <= m; j += 8) {                                                                                       \
		__m256 x = _mm256_sub_ps(_mm256_loadu_ps(logs + j), _mm256_mul_ps(_mm256_loadu_ps(hl + j), _mm256_loadu_ps(d + j))); \
		if (B) x = _mm256_add_ps(x, _mm256_loadu_ps(b + j));                                                           \
		if (ROW) x = _mm256_add_ps(x, _mm256_loadu_ps(row + j));                                                       \
		_mm256_storeu_ps(o + j, x);                                                                                    \
	}
		if (b && row) GAUSS_LOOP(1, 1)
		else if (b) GAUSS_LOOP(1, 0)
		else if (row) GAUSS_LOOP(0, 1)
		else GAUSS_LOOP(0, 0)
#undef GAUSS_LOOP
		for (; j < m; j++) {
			float x = logs[j] - hl[j] * d[j];
			if (b) x += b[j];
			if (row) x += row[j];
			o[j] = x;
		}
	}
}

// gauss_softmax is softmax(gaussian(…)) without gaussian's [n×m] pass:
// w = softmax_j of the scores gaussian(n, m, k, λ, dd, NULL, row) over
// the real keys, rows outside rows 0, each score made in registers with
// gaussian's operations (a fused multiply-add, then + row_j), so the
// weights are the two passes' bit for bit. Rows longer than softmax_gs
// keeps in registers take the two passes, through sbuf [n×m].
EM_TARGET
static void gauss_softmax(const em_p *p, int k, const float *lambda, const float *dd, const float *row, float *w,
                          const float *rows, float *sbuf, float *cols) {
	const int n = p->n, m = p->m;
	if (m > 64) {
		gaussian(n, m, k, lambda, dd, NULL, row, sbuf, cols);
		softmax(p, sbuf, w, rows);
		return;
	}
	gauss_cols(m, k, lambda, cols);
	const em_gs gs = {cols, cols + m, row};
	softmax_gs(p, NULL, w, rows, &gs, dd);
}

#ifdef EM_AVX512
// gaussian_back16 is gaussian_back's loop over blocks of columns for
// the first m8 (a multiple of 8) of the m columns, 16 down all rows at a
// time (32, two independent sums, where they fit): the AVX2 loop's
// operations lane for lane (a masked lane's λ reads 1).
EM_TARGET512
static void gaussian_back16(int n, int m, int m8, float half, const float *lambda, const float *dist, const float *ds,
                            float *dlambda, float *dd) {
	const __m512 wh = _mm512_set1_ps(0.5f), whalf = _mm512_set1_ps(half), wm = _mm512_set1_ps(-0.5f);
	int j = 0;
	for (; j + 32 <= m8; j += 32) { // two blocks down the rows at once: two chains of adds in flight
		const __m512 lam0 = _mm512_loadu_ps(lambda + j), inv0 = _mm512_div_ps(whalf, lam0), hl0 = _mm512_mul_ps(wm, lam0);
		const __m512 lam1 = _mm512_loadu_ps(lambda + j + 16), inv1 = _mm512_div_ps(whalf, lam1),
		             hl1 = _mm512_mul_ps(wm, lam1);
		__m512 acc0 = _mm512_loadu_ps(dlambda + j), acc1 = _mm512_loadu_ps(dlambda + j + 16);
		for (int i = 0; i < n; i++) {
			const size_t at = (size_t)i * m + j;
			__m512 gv0 = _mm512_loadu_ps(ds + at), gv1 = _mm512_loadu_ps(ds + at + 16);
			acc0 = _mm512_add_ps(acc0, _mm512_mul_ps(gv0, _mm512_sub_ps(inv0, _mm512_mul_ps(_mm512_loadu_ps(dist + at), wh))));
			acc1 = _mm512_add_ps(acc1, _mm512_mul_ps(gv1, _mm512_sub_ps(inv1, _mm512_mul_ps(_mm512_loadu_ps(dist + at + 16), wh))));
			if (dd) {
				_mm512_storeu_ps(dd + at, _mm512_mul_ps(hl0, gv0));
				_mm512_storeu_ps(dd + at + 16, _mm512_mul_ps(hl1, gv1));
			}
		}
		_mm512_storeu_ps(dlambda + j, acc0);
		_mm512_storeu_ps(dlambda + j + 16, acc1);
	}
	for (; j < m8; j += 16) {
		const __mmask16 k = mask16(m8 - j);
		const __m512 lam = _mm512_mask_loadu_ps(_mm512_set1_ps(1), k, lambda + j), inv = _mm512_div_ps(whalf, lam),
		             hl = _mm512_mul_ps(wm, lam);
		__m512 acc = _mm512_maskz_loadu_ps(k, dlambda + j);
		for (int i = 0; i < n; i++) {
			const size_t at = (size_t)i * m + j;
			__m512 gv = _mm512_maskz_loadu_ps(k, ds + at);
			acc = _mm512_add_ps(acc, _mm512_mul_ps(gv, _mm512_sub_ps(inv, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, dist + at), wh))));
			if (dd) _mm512_mask_storeu_ps(dd + at, k, _mm512_mul_ps(hl, gv));
		}
		_mm512_mask_storeu_ps(dlambda + j, k, acc);
	}
}
#endif

// gaussian_back is emGaussianBack: dλ_j += Σ_i ds_ij (k/(2λ_j) − D_ij/2)
// and dd_ij = −(λ_j/2) ds_ij (dd may be NULL). cols is scratch [2m].
EM_TARGET
static void gaussian_back(int n, int m, int k, const float *lambda, const float *dist, const float *ds,
                          float *dlambda, float *dd, float *cols) {
	const float half = (float)k / 2;
	const __m256 vh = _mm256_set1_ps(0.5f), vhalf = _mm256_set1_ps(half), vm = _mm256_set1_ps(-0.5f);
	const int m8 = m & ~7;
	int j = 0;
#ifdef EM_AVX512
	if (m > 8) { // 16 columns down all rows, the same sums
		gaussian_back16(n, m, m8, half, lambda, dist, ds, dlambda, dd);
		j = m8;
	}
#endif
	for (; j < m8; j += 8) { // a block of columns down all rows
		const __m256 lam = _mm256_loadu_ps(lambda + j), inv = _mm256_div_ps(vhalf, lam), hl = _mm256_mul_ps(vm, lam);
		__m256 acc = _mm256_loadu_ps(dlambda + j);
		for (int i = 0; i < n; i++) {
			const size_t at = (size_t)i * m + j;
			__m256 gv = _mm256_loadu_ps(ds + at);
			acc = _mm256_add_ps(acc, _mm256_mul_ps(gv, _mm256_sub_ps(inv, _mm256_mul_ps(_mm256_loadu_ps(dist + at), vh))));
			if (dd) _mm256_storeu_ps(dd + at, _mm256_mul_ps(hl, gv));
		}
		_mm256_storeu_ps(dlambda + j, acc);
	}
	gaussian_back_cols(n, m, m8, half, lambda, dist, ds, dlambda, dd);
	(void)cols;
}

// centres is emCentres: n_j = Σ_i w_ij, A = wᵀx [m×width], c_j = (θ c⁰_j
// + λ_j A_j) / (θ + λ_j n_j) for the real units, c⁰_j for padded ones.
EM_TARGET
static void centres(const em_p *p, const float *w, const float *x, int ldx, int width, const float *c0, int ldc0,
                    const float *lambda, float theta, float *nn, float *a, float *c) {
	const int n = p->n, m = p->m;
	col_sums(n, m, w, nn);
	mm(m, n, width, 1, w, 1, m, x, ldx, 0, a, width);
	for (int j = 0; j < m; j++) {
		float *cj = c + (size_t)j * width;
		const float *c0j = c0 + (size_t)j * ldc0, *aj = a + (size_t)j * width;
		if (!real_key(p, j)) {
			memcpy(cj, c0j, sizeof(float) * (size_t)width);
			continue;
		}
		const float den = theta + lambda[j] * nn[j], l = lambda[j];
		const __m256 vth = _mm256_set1_ps(theta), vl = _mm256_set1_ps(l), vd = _mm256_set1_ps(den);
		int k = 0;
		for (; k + 8 <= width; k += 8)
			_mm256_storeu_ps(cj + k, _mm256_div_ps(_mm256_fmadd_ps(vth, _mm256_loadu_ps(c0j + k),
			                                                      _mm256_mul_ps(vl, _mm256_loadu_ps(aj + k))), vd));
		for (; k < width; k++) cj[k] = (theta * c0j[k] + l * aj[k]) / den;
	}
}

// spreads sets out[j] = Σ_i w_ij D_ij, i in order.
EM_TARGET
static void spreads(int n, int m, const float *w, const float *dd, float *out) {
	int j = 0;
	for (; j + 8 <= m; j += 8) {
		__m256 acc = _mm256_setzero_ps();
		for (int i = 0; i < n; i++)
			acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_loadu_ps(w + (size_t)i * m + j), _mm256_loadu_ps(dd + (size_t)i * m + j)));
		_mm256_storeu_ps(out + j, acc);
	}
	for (; j < m; j++) {
		float acc = 0;
		for (int i = 0; i < n; i++) acc += w[(size_t)i * m + j] * dd[(size_t)i * m + j];
		out[j] = acc;
	}
}

// precision is emPrecision: λ_j = (a − 1 + (k/2) n_j) / (b + ½ Σ_i w_ij
// D_ij) for the real units, old_j for padded ones. sp is scratch [m].
EM_TARGET
static void precision(const em_p *p, const float *w, const float *dd, const float *nn, float a_extra, float b, int k,
                      const float *old, float *out, float *sp) {
	spreads(p->n, p->m, w, dd, sp);
	float half = (float)k / 2;
	for (int j = 0; j < p->m; j++) out[j] = real_key(p, j) ? (a_extra + half * nn[j]) / (b + sp[j] / 2) : old[j];
}

// precision_back is emPrecisionBack: the gradient through precision's λ
// of the real units, given dλ, to a − 1 (*da), b (*db), n, the weights
// (dw) and the distances (dd); a padded unit passes dλ on to dold. sp is
// scratch [m].
EM_TARGET
static void precision_back(const em_p *p, const float *w, const float *dist, const float *nn, const float *dlambda,
                           const float *lambda, float brate, int k, float *da, float *db, float *dn, float *dw,
                           float *dd, float *dold, float *sp) {
	const int n = p->n, m = p->m;
	spreads(n, m, w, dist, sp);
	float sa = *da, sb = *db; // in registers: da and db may alias the arrays
	for (int j = 0; j < m; j++) {
		if (!real_key(p, j)) {
			dold[j] += dlambda[j];
			sp[j] = 0;
			continue;
		}
		float den = brate + sp[j] / 2, dnum = dlambda[j] / den, dden = -dlambda[j] * lambda[j] / den;
		sa += dnum;
		dn[j] += (float)k / 2 * dnum;
		sb += dden;
		sp[j] = dden / 2; // now d spread_j
	}
	*da = sa, *db = sb;
	for (int i = 0; i < n; i++) {
		const float *wr = w + (size_t)i * m, *dr = dist + (size_t)i * m;
		float *gw = dw + (size_t)i * m, *gd = dd + (size_t)i * m;
		int j = 0;
		for (; j + 8 <= m; j += 8) {
			__m256 v = _mm256_loadu_ps(sp + j);
			_mm256_storeu_ps(gw + j, _mm256_add_ps(_mm256_loadu_ps(gw + j), _mm256_mul_ps(v, _mm256_loadu_ps(dr + j))));
			_mm256_storeu_ps(gd + j, _mm256_add_ps(_mm256_loadu_ps(gd + j), _mm256_mul_ps(v, _mm256_loadu_ps(wr + j))));
		}
		for (; j < m; j++) {
			gw[j] += sp[j] * dr[j];
			gd[j] += sp[j] * wr[j];
		}
	}
}

// centres_back is emCentresBack: the gradient through centres' c, given
// dc [m×width], to θ (*dtheta), c⁰ (dc0), λ, n, the weights (dw) and x
// (dx, may be NULL). da [m×width] and ct [width×m] are scratch.
EM_TARGET
static void centres_back(const em_p *p, const float *w, const float *x, int ldx, float *dx, int lddx, int width,
                         const float *c0, int ldc0, float *dc0, int lddc0, const float *lambda, float theta,
                         const float *nn, const float *a, const float *c, const float *dc, float *dtheta,
                         float *dlambda, float *dn, float *dw, float *da, float *ct) {
	const int n = p->n, m = p->m;
	float dth = *dtheta;
	__m256 vdth = _mm256_setzero_ps();
	for (int j = 0; j < m; j++) {
		const float *dcj = dc + (size_t)j * width;
		float *daj = da + (size_t)j * width, *dc0j = dc0 + (size_t)j * lddc0;
		if (!real_key(p, j)) {
			for (int k = 0; k < width; k++) dc0j[k] += dcj[k];
			memset(daj, 0, sizeof(float) * (size_t)width);
			continue;
		}
		const float *cj = c + (size_t)j * width, *c0j = c0 + (size_t)j * ldc0, *aj = a + (size_t)j * width;
		float l = lambda[j], den = theta + l * nn[j], dden = -dot(dcj, cj, width) / den, dl = 0;
		const __m256 vden = _mm256_set1_ps(den), vth = _mm256_set1_ps(theta), vl = _mm256_set1_ps(l);
		__m256 vdl = _mm256_setzero_ps();
		int k = 0;
		for (; k + 8 <= width; k += 8) {
			__m256 dnum = _mm256_div_ps(_mm256_loadu_ps(dcj + k), vden);
			vdth = _mm256_fmadd_ps(dnum, _mm256_loadu_ps(c0j + k), vdth);
			_mm256_storeu_ps(dc0j + k, _mm256_add_ps(_mm256_loadu_ps(dc0j + k), _mm256_mul_ps(vth, dnum)));
			vdl = _mm256_fmadd_ps(dnum, _mm256_loadu_ps(aj + k), vdl);
			_mm256_storeu_ps(daj + k, _mm256_mul_ps(vl, dnum));
		}
		for (; k < width; k++) {
			float dnum = dcj[k] / den;
			dth += dnum * c0j[k];
			dc0j[k] += theta * dnum;
			dl += dnum * aj[k];
			daj[k] = l * dnum;
		}
		dth += dden;
		dlambda[j] += (dl + hsum(vdl)) + dden * nn[j];
		dn[j] += dden * l;
	}
	*dtheta = dth + hsum(vdth);
	transpose(da, width, m, width, ct);
	mm(n, width, m, 1, x, ldx, 1, ct, m, 1, dw, m);
	if (dx) mm(n, m, width, 1, w, m, 1, da, width, 1, dx, lddx);
}

// log_softmax is emLogSoftmax, in double as there: z ← log-softmax of z
// over the real units (MaskNegInf at padded ones), pi ← its softmax.
EM_TARGET
static void log_softmax(const em_p *p, float *z, float *pi) {
	const int m = p->m;
	double top = -INFINITY, total = 0;
	for (int j = 0; j < m; j++)
		if (real_key(p, j)) {
			double x = z[j];
			top = x != x || top != top ? NAN : (x > top ? x : top); // math.Max
		}
	// the exponentials 8 at a time (exp_le0; a padded unit's lane is
	// −∞, whose exponential is 0), summed in double
	const __m256 zero = _mm256_setzero_ps(), ninf = _mm256_set1_ps(-INFINITY), vt = _mm256_set1_ps((float)top);
	__m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
	for (int j = 0; j < m; j += 8) {
		const __m256i in = lanes(m - j < 8 ? m - j : 8);
		__m256 keep = _mm256_castsi256_ps(in);
		if (p->km) keep = _mm256_and_ps(keep, _mm256_cmp_ps(_mm256_maskload_ps(p->km + j, in), zero, _CMP_NEQ_UQ));
		__m256 x = _mm256_blendv_ps(ninf, _mm256_sub_ps(_mm256_maskload_ps(z + j, in), vt), keep);
		__m256 e = exp_le0(_mm256_min_ps(zero, x));
		s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
		s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
	}
	double lanes4[4];
	_mm256_storeu_pd(lanes4, _mm256_add_pd(s0, s1));
	total = (lanes4[0] + lanes4[1]) + (lanes4[2] + lanes4[3]);
	float lse = (float)(top + log(total));
	for (int j = 0; j < m; j++) z[j] = real_key(p, j) ? z[j] - lse : EM_NEG_INF;
	for (int j = 0; j < m; j += 8) {
		const int k = m - j < 8 ? m - j : 8;
		const __m256i in = lanes(k);
		__m256 keep = _mm256_castsi256_ps(in);
		if (p->km) keep = _mm256_and_ps(keep, _mm256_cmp_ps(_mm256_maskload_ps(p->km + j, in), zero, _CMP_NEQ_UQ));
		__m256 e = exp_le0(_mm256_min_ps(zero, _mm256_blendv_ps(ninf, _mm256_maskload_ps(z + j, in), keep)));
		float t[8];
		_mm256_storeu_ps(t, e);
		for (int l = 0; l < k; l++) pi[j + l] = t[l];
	}
}

// zero_rows zeroes a head's rows of a gradient whose heads share rows:
// rows×w values of y (rows strided by ld), in vector stores: a row of a
// head of 8 is one store, where memset would be a call.
EM_TARGET
static void zero_rows(float *y, int rows, int w, int ld) {
	const int w8 = w & ~7;
	const __m256i tail = lanes(w - w8 > 0 ? w - w8 : 8);
	const __m256 zero = _mm256_setzero_ps();
	for (int i = 0; i < rows; i++) {
		float *r = y + (size_t)i * ld;
		for (int k = 0; k < w8; k += 8) _mm256_storeu_ps(r + k, zero);
		if (w8 < w) _mm256_maskstore_ps(r + w8, tail, zero);
	}
}

// add_rows_into adds x [rows×w] (dense) into y (rows strided by ld).
// Each element is one addition, so vectors give the scalar loop's values.
EM_TARGET
static void add_rows_into(int rows, int w, const float *x, float *y, int ld) {
	const int w8 = w & ~7;
	for (int i = 0; i < rows; i++) {
		const float *xr = x + (size_t)i * w;
		float *yr = y + (size_t)i * ld;
		int k = 0;
		for (; k < w8; k += 8) _mm256_storeu_ps(yr + k, _mm256_add_ps(_mm256_loadu_ps(yr + k), _mm256_loadu_ps(xr + k)));
		for (; k < w; k++) yr[k] += xr[k];
	}
}

// pf_em_forward is emForward for one problem. iv holds N, M, d, dv, the
// input strides ldq, ldk, ldv, ldx, T_k, T_p, T_v, the flags AdaptAlpha,
// AdaptBeta, AdaptPi and whether propagation runs (emPropagates); fv the
// nine hyperparameters (emHyper's order), |S| and the number of real
// memory units. q [N×d] (rows at ldq), xi0 [M×d] (ldk), mu0 [M×dv] (ldv),
// vals [N×dv] (ldx; NULL without propagation); km [M], qm [N], in_s [N]
// (annotated and real) and logits [M] may be NULL. trace holds
// emTraceSize values, filled as emForward fills cutTrace's parts; scratch
// holds ns values (emCScratchSize); iv[16] nonzero runs em512.c's build
// (pf_em_forward_avx512); out, when not NULL, takes the residual
// connection's readout rows (at ldo; EMProblem.Out). It returns 0, or −1
// when the scratch is too small.
#ifndef EM_AVX512
int pf_em_forward_avx512(const int *iv, const float *fv, const float *q, const float *xi0, const float *mu0,
                  const float *vals, const float *km, const float *qm, const float *in_s, const float *logits,
                  float *trace, float *scr, long ns, float *out, int ldo);
#endif

EM_TARGET
int EM_ENTRY(pf_em_forward)(const int *iv, const float *fv, const float *q, const float *xi0, const float *mu0,
                  const float *vals, const float *km, const float *qm, const float *in_s, const float *logits,
                  float *trace, float *scr, long ns, float *out, int ldo) {
#ifndef EM_AVX512
	if (iv[16]) return pf_em_forward_avx512(iv, fv, q, xi0, mu0, vals, km, qm, in_s, logits, trace, scr, ns, out, ldo);
#endif
	em_p P, *p = &P;
	unpack(p, iv, fv);
	p->q = q, p->xi0 = xi0, p->mu0 = mu0, p->vals = vals, p->km = km, p->qm = qm, p->in_s = in_s, p->logits = logits;
	const int n = p->n, m = p->m, d = p->d, dv = p->dv, tk = p->tk, tp = p->tp, tv = p->tv;
	const size_t nm = (size_t)n * m;
	const float *h = p->h;
	em_tr tr = cut_trace(p, trace);
	scratch sc = {scr, ns, 0};
	// kf: the adapted key term K_ij, then K_ij + log π_j of the readout
	// [N×M]; the forward pass reads them, the backward pass does not
	float *qq = take(&sc, n), *cc = take(&sc, m > n ? m : n), *sbuf = take(&sc, nm), *vv = take(&sc, n), *kf = take(&sc, nm),
	      *ct = take(&sc, (long)m * (d > dv ? d : dv)), *cols = take(&sc, 2 * m), *sp = take(&sc, m);
	if (sc.over) return -1;

	// §2: the initial mixing prior.
	sq_norms(xi0, m, d, p->ldk, tr.kn0);
	sq_norms(mu0, m, dv, p->ldv, tr.vn0);
	for (int j = 0; j < m; j++)
		tr.lp0[j] = logits ? logits[j] : h[H_ALPHA0] / 2 * tr.kn0[j] + h[H_BETA0] / 2 * tr.vn0[j];
	log_softmax(p, tr.lp0, tr.pi0);

	// §4: key adaptation.
	sq_norms(q, n, d, p->ldq, qq);
	for (int j = 0; j < m; j++) AL(0)[j] = h[H_ALPHA0];
	dist(n, m, d, q, p->ldq, xi0, p->ldk, qq, tr.kn0, DK(0), ct);
	for (int t = 0; t < tk; t++) {
		gauss_softmax(p, d, AL(t), DK(t), tr.lp0, WK(t), qm, sbuf, cols);
		centres(p, WK(t), q, p->ldq, d, xi0, p->ldk, AL(t), h[H_THETA_XI], NK(t), AK(t), XI(t + 1));
		sq_norms(XI(t + 1), m, d, d, cc);
		dist(n, m, d, q, p->ldq, XI(t + 1), d, qq, cc, DK(t + 1), ct);
		if (p->adapt_alpha)
			precision(p, WK(t), DK(t + 1), NK(t), h[H_A_ALPHA], h[H_B_ALPHA], d, AL(t), AL(t + 1), sp);
		else
			memcpy(AL(t + 1), AL(t), sizeof(float) * (size_t)m);
	}
	// kf, the key term: propagation and value inference read it; without
	// them the readout's weights are made from the distances directly
	const int kf_read = p->pr || tv > 0;
	if (kf_read) gaussian(n, m, d, AL(tk), DK(tk), NULL, NULL, kf, cols);

	// §5: value propagation.
	for (int j = 0; j < m; j++) BE(0)[j] = h[H_BETA0];
	memcpy(LP(0), tr.lp0, sizeof(float) * (size_t)m);
	const float *mu = mu0, *beta = BE(0), *log_pi = tr.lp0;
	int ldmu = p->ldv;
	if (p->pr) {
		sq_norms(vals, n, dv, p->ldx, vv);
		float log_den = (float)log((double)(h[H_PI] * p->real_memory + p->size_s));
		for (int t = 0; t < tp; t++) {
			const float *mu_old = t > 0 ? MU(t) : mu0;
			int ld_old = t > 0 ? dv : p->ldv;
			sq_norms(mu_old, m, dv, ld_old, cc);
			dist(n, m, dv, vals, p->ldx, mu_old, ld_old, vv, cc, EP(t), ct);
			gaussian(n, m, dv, BE(t), EP(t), kf, LP(t), sbuf, cols);
			softmax(p, sbuf, WP(t), in_s);
			centres(p, WP(t), vals, p->ldx, dv, mu0, p->ldv, BE(t), h[H_THETA_MU], NP(t), BP(t), MU(t + 1));
			if (update_beta(p, t)) {
				sq_norms(MU(t + 1), m, dv, dv, cc);
				dist(n, m, dv, vals, p->ldx, MU(t + 1), dv, vv, cc, EP2(t), ct);
				precision(p, WP(t), EP2(t), NP(t), h[H_A_BETA], h[H_B_BETA], dv, BE(t), BE(t + 1), sp);
			} else {
				memcpy(BE(t + 1), BE(t), sizeof(float) * (size_t)m);
			}
			if (p->adapt_pi) {
				for (int j = 0; j < m; j++)
					LP(t + 1)[j] = real_key(p, j) ? (float)log((double)(NP(t)[j] + h[H_PI])) - log_den : EM_NEG_INF;
			} else {
				memcpy(LP(t + 1), LP(t), sizeof(float) * (size_t)m);
			}
		}
		mu = MU(tp), ldmu = dv, beta = BE(tp), log_pi = LP(tp);
	}

	// §3: value inference of every query unit.
	const float *s0 = kf;
	if (kf_read) {
		for (int i = 0; i < n; i++)
			for (int j = 0; j < m; j++) kf[(size_t)i * m + j] += log_pi[j];
		softmax(p, kf, WI(0), NULL);
	} else { // log π is log π⁰: gaussian's row term
		gauss_softmax(p, d, AL(tk), DK(tk), log_pi, WI(0), NULL, kf, cols);
	}
	mm(n, m, dv, 1, WI(0), m, 1, mu, ldmu, 0, RO(0), dv);
	if (tv > 0) sq_norms(mu, m, dv, ldmu, cc);
	for (int t = 0; t < tv; t++) {
		sq_norms(RO(t), n, dv, dv, qq);
		dist(n, m, dv, RO(t), dv, mu, ldmu, qq, cc, FV(t), ct);
		gaussian(n, m, dv, beta, FV(t), s0, NULL, sbuf, cols);
		float *w = WI(t + 1), *pz = PZ(t), *r = RO(t + 1);
		softmax(p, sbuf, w, NULL);
		for (int i = 0; i < n; i++) {
			pz[i] = dot(w + (size_t)i * m, beta, m);
			for (int j = 0; j < m; j++) sbuf[(size_t)i * m + j] = w[(size_t)i * m + j] * beta[j]; // w_ij β_j
		}
		mm(n, m, dv, 1, sbuf, m, 1, mu, ldmu, 0, r, dv);
		for (int i = 0; i < n; i++)
			for (int k = 0; k < dv; k++) r[(size_t)i * dv + k] /= pz[i];
	}
	// The residual connection, when out is given (EMSpec.Residual): row
	// i of out [N×dv] (rows at ldo) is q_i + r_i, q_i + 0 for a padded
	// query, the additions graph's emAddRows makes, here in the call that
	// made r, where Go's scalar loop a row showed in profiles (~1% of the
	// width-32 ratio benchmark). No multiply, so nothing to fuse.
	if (out) {
		const float *r = RO(tv);
		for (int i = 0; i < n; i++) {
			const float *qi = q + (size_t)i * p->ldq, *ri = r + (size_t)i * dv;
			float *oi = out + (size_t)i * ldo;
			if (qm && qm[i] == 0)
				for (int k = 0; k < dv; k++) oi[k] = qi[k] + 0.0f;
			else {
				int k = 0;
				for (; k + 8 <= dv; k += 8) _mm256_storeu_ps(oi + k, _mm256_add_ps(_mm256_loadu_ps(qi + k), _mm256_loadu_ps(ri + k)));
				for (; k < dv; k++) oi[k] = qi[k] + ri[k];
			}
		}
	}
	return 0;
}

// The backward scratch: emBackScratch's buffers and the C helpers' own.
typedef struct {
	float *kf, *s0, *w, *g, *d, *p;  // [N×M]
	float *r, *r2, *u;               // [N×dv]
	float *rs, *dp;                  // [N]
	float *cs, *dn, *lp0;            // [M]
	float *xi[2], *al[2], *mu[2], *be[2], *lp[2];
	float *da, *ct;                  // [M×max(d, dv)]
	float *cols, *sp;                // [2M], [M]
} em_bs;

// propagate_back is emPropagateBack: from the adjoints of the propagated
// μ, β and log π (b->mu[0], b->be[0], b->lp[0]) to μ⁰, β⁰, the initial log
// π (added to b->lp0), the annotated values, the key term (b->kf) and the
// hyperparameters.
EM_TARGET
static void propagate_back(const em_p *p, em_tr tr, float *gvals, int gldx, float *gmu0, int gldv, float *gh,
                           em_bs *b) {
	const int n = p->n, m = p->m, dv = p->dv;
	const size_t nm = (size_t)n * m;
	const float *h = p->h;
	float *dmu = b->mu[0], *dbe = b->be[0], *dlp = b->lp[0];
	float pi_count = h[H_PI] * p->real_memory + p->size_s;
	for (int t = p->tp - 1; t >= 0; t--) {
		const float *w = WP(t), *nn = NP(t), *bv = BP(t), *mu_new = MU(t + 1), *be_old = BE(t), *be_new = BE(t + 1);
		const float *mu_old = t > 0 ? MU(t) : p->mu0;
		int ld_old = t > 0 ? dv : p->ldv;
		float *dmu_old = b->mu[1], *dbe_old = b->be[1], *dlp_old = b->lp[1], *dw = b->w, *dn = b->dn;
		memset(dmu_old, 0, sizeof(float) * (size_t)m * dv);
		memset(dbe_old, 0, sizeof(float) * (size_t)m);
		memset(dlp_old, 0, sizeof(float) * (size_t)m);
		memset(dw, 0, sizeof(float) * nm);
		memset(dn, 0, sizeof(float) * (size_t)m);
		if (p->adapt_pi) {
			float total = 0;
			for (int j = 0; j < m; j++)
				if (real_key(p, j)) {
					float c = dlp[j] / (nn[j] + h[H_PI]);
					dn[j] += c;
					gh[H_PI] += c;
					total += dlp[j];
				}
			gh[H_PI] -= total * p->real_memory / pi_count;
		} else {
			memcpy(dlp_old, dlp, sizeof(float) * (size_t)m);
		}
		if (update_beta(p, t)) {
			memset(b->g, 0, sizeof(float) * nm);
			precision_back(p, w, EP2(t), nn, dbe, be_new, h[H_B_BETA], dv, &gh[H_A_BETA], &gh[H_B_BETA], dn, dw, b->g,
			               dbe_old, b->sp);
			dist_back(n, m, dv, p->vals, p->ldx, mu_new, dv, EP2(t), b->g, gvals, gldx, dmu, dv, b->rs, b->cs);
		} else {
			memcpy(dbe_old, dbe, sizeof(float) * (size_t)m);
		}
		centres_back(p, w, p->vals, p->ldx, gvals, gldx, dv, p->mu0, p->ldv, gmu0, gldv, be_old, h[H_THETA_MU], nn, bv,
		             mu_new, dmu, &gh[H_THETA_MU], dbe_old, dn, dw, b->da, b->ct);
		add_row(n, m, dw, dn);
		softmax_back(n, m, w, dw, b->rs);
		for (size_t k = 0; k < nm; k++) b->kf[k] += dw[k];
		add_col_sums(n, m, dw, dlp_old);
		gaussian_back(n, m, dv, be_old, EP(t), dw, dbe_old, b->g, b->cols);
		dist_back(n, m, dv, p->vals, p->ldx, mu_old, ld_old, EP(t), b->g, gvals, gldx, dmu_old, dv, b->rs, b->cs);
		b->mu[0] = dmu_old, b->mu[1] = dmu;
		b->be[0] = dbe_old, b->be[1] = dbe;
		b->lp[0] = dlp_old, b->lp[1] = dlp;
		dmu = dmu_old, dbe = dbe_old, dlp = dlp_old;
	}
	add_rows_into(m, dv, dmu, gmu0, gldv);
	float gb = gh[H_BETA0]; // a register, not a store and a load a unit
	for (int j = 0; j < m; j++) {
		gb += dbe[j]; // padded units too: their β is β⁰
		if (real_key(p, j)) b->lp0[j] += dlp[j];
	}
	gh[H_BETA0] = gb;
}

// add_weight_seed adds the weights' seed sw [N×M] (NULL: none) to dw at
// the real query units.
static void add_weight_seed(const em_p *p, const float *sw, float *dw) {
	if (!sw) return;
	for (int i = 0; i < p->n; i++)
		if (real_query(p, i))
			for (int j = 0; j < p->m; j++) dw[(size_t)i * p->m + j] += sw[(size_t)i * p->m + j];
}

// pf_em_backward is emBackward for one problem: it adds the gradients of
// the problem's inputs to gq [N×d], gxi0 [M×d], gmu0 [M×dv], gvals [N×dv]
// (strided by gld[0…3]; gvals may be NULL; iv[17] nonzero zeroes their
// rows first, EMGrads.Zero; iv[18] nonzero adds sr's rows to gq's at
// the end, EMGrads.AddReadoutSeed), glogits [M] (NULL for the
// linked prior) and gh [9], given the seeds (the gradients of the
// outputs, each NULL when 0): sr [N×dv] strided by iv[15], sw [N×M], and
// the mixture's sxi [M×d], sal, smu [M×dv], sbe and slp [M]. iv, fv and
// the inputs are pf_em_forward's, trace what it filled; scratch holds ns
// values. It returns 0, or −1 when the scratch is too small.
#ifndef EM_AVX512
int pf_em_backward_avx512(const int *iv, const float *fv, const float *q, const float *xi0, const float *mu0,
                   const float *vals, const float *km, const float *qm, const float *in_s, const float *logits,
                   float *trace, const float *sr, const float *sw, const float *sxi, const float *sal,
                   const float *smu, const float *sbe, const float *slp, float *gq, float *gxi0, float *gmu0,
                   float *gvals, float *glogits, float *gh, const int *gld, float *scr, long ns);
#endif

EM_TARGET
int EM_ENTRY(pf_em_backward)(const int *iv, const float *fv, const float *q, const float *xi0, const float *mu0,
                   const float *vals, const float *km, const float *qm, const float *in_s, const float *logits,
                   float *trace, const float *sr, const float *sw, const float *sxi, const float *sal,
                   const float *smu, const float *sbe, const float *slp, float *gq, float *gxi0, float *gmu0,
                   float *gvals, float *glogits, float *gh, const int *gld, float *scr, long ns) {
#ifndef EM_AVX512
	if (iv[16])
		return pf_em_backward_avx512(iv, fv, q, xi0, mu0, vals, km, qm, in_s, logits, trace, sr, sw, sxi, sal, smu, sbe,
		                             slp, gq, gxi0, gmu0, gvals, glogits, gh, gld, scr, ns);
#endif
	em_p P, *p = &P;
	unpack(p, iv, fv);
	p->q = q, p->xi0 = xi0, p->mu0 = mu0, p->vals = vals, p->km = km, p->qm = qm, p->in_s = in_s, p->logits = logits;
	const int n = p->n, m = p->m, d = p->d, dv = p->dv, tk = p->tk, tp = p->tp, tv = p->tv, ldr = iv[15];
	const int gldq = gld[0], gldk = gld[1], gldv = gld[2], gldx = gld[3];
	const size_t nm = (size_t)n * m;
	const float *h = p->h;
	em_tr tr = cut_trace(p, trace);
	scratch sc = {scr, ns, 0};
	const long wmax = d > dv ? d : dv;
	em_bs B, *b = &B;
	b->kf = take(&sc, nm), b->s0 = take(&sc, nm), b->w = take(&sc, nm), b->g = take(&sc, nm), b->d = take(&sc, nm),
	b->p = take(&sc, nm);
	b->r = take(&sc, (long)n * dv), b->r2 = take(&sc, (long)n * dv), b->u = take(&sc, (long)n * dv);
	b->rs = take(&sc, n), b->dp = take(&sc, n);
	b->cs = take(&sc, m), b->dn = take(&sc, m), b->lp0 = take(&sc, m);
	for (int i = 0; i < 2; i++)
		b->xi[i] = take(&sc, (long)m * d), b->al[i] = take(&sc, m), b->mu[i] = take(&sc, (long)m * dv),
		b->be[i] = take(&sc, m), b->lp[i] = take(&sc, m);
	b->da = take(&sc, m * wmax), b->ct = take(&sc, m * wmax), b->cols = take(&sc, 2 * m), b->sp = take(&sc, m);
	if (sc.over) return -1;
	if (iv[17]) {
		zero_rows(gq, n, d, gldq);
		zero_rows(gxi0, m, d, gldk);
		zero_rows(gmu0, m, dv, gldv);
		if (gvals) zero_rows(gvals, n, dv, gldx);
	}

	if (tv > 0) memset(b->s0, 0, sizeof(float) * nm);
	memset(b->lp0, 0, sizeof(float) * (size_t)m);
	memset(b->xi[0], 0, sizeof(float) * (size_t)m * d);
	memset(b->al[0], 0, sizeof(float) * (size_t)m);
	memset(b->mu[0], 0, sizeof(float) * (size_t)m * dv);
	memset(b->be[0], 0, sizeof(float) * (size_t)m);
	memset(b->lp[0], 0, sizeof(float) * (size_t)m);
	if (sxi) memcpy(b->xi[0], sxi, sizeof(float) * (size_t)m * d);
	if (sal) memcpy(b->al[0], sal, sizeof(float) * (size_t)m);
	if (smu) memcpy(b->mu[0], smu, sizeof(float) * (size_t)m * dv);
	if (sbe) memcpy(b->be[0], sbe, sizeof(float) * (size_t)m);
	if (slp)
		for (int j = 0; j < m; j++)
			if (real_key(p, j)) b->lp[0][j] = slp[j];
	const float *mu = mu0, *beta = BE(0);
	int ldmu = p->ldv;
	if (p->pr) mu = MU(tp), ldmu = dv, beta = BE(tp);
	float *dmu = b->mu[0], *dbe = b->be[0], *dlp = b->lp[0];

	// §3 backward. The outputs are the last readout and weights, 0 at
	// padded query units.
	// g_ready: the distances' gradient in b->d is dist_back's G already,
	// b->rs and b->cs its sums (back_rows16 with em_gd)
	int g_ready = 0;
	float *dr = b->r, *dr_prev = b->r2;
	memset(dr, 0, sizeof(float) * (size_t)n * dv);
	if (sr) // a row of a head of 8 is one load and store, where memcpy would be a call
		for (int i = 0; i < n; i++)
			if (real_query(p, i)) {
				const float *si = sr + (size_t)i * ldr;
				float *di = dr + (size_t)i * dv;
				int k = 0;
				for (; k + 8 <= dv; k += 8) _mm256_storeu_ps(di + k, _mm256_loadu_ps(si + k));
				for (; k < dv; k++) di[k] = si[k];
			}
	transpose(mu, ldmu, m, dv, b->ct); // μᵀ [dv×M], for the products into [N×M] until §5
	for (int t = tv; t >= 1; t--) {
		const float *w = WI(t), *r = RO(t), *pz = PZ(t - 1), *r_prev = RO(t - 1), *f = FV(t - 1);
		// r_i = u_i / P_i with u = (w ⊙ β) μ and P_i = Σ_j w_ij β_j.
		float *du = b->u, *dp = b->w, *precise = b->p;
		for (int i = 0; i < n; i++) {
			const float *dri = dr + (size_t)i * dv, *ri = r + (size_t)i * dv;
			float *dui = du + (size_t)i * dv;
			for (int k = 0; k < dv; k++) dui[k] = dri[k] / pz[i];
			b->dp[i] = -dot(dri, ri, dv) / pz[i];
		}
		mm(n, dv, m, 1, du, dv, 1, b->ct, m, 0, dp, m);
		for (int i = 0; i < n; i++)
			for (int j = 0; j < m; j++) precise[(size_t)i * m + j] = w[(size_t)i * m + j] * beta[j];
		mm(m, n, dv, 1, precise, 1, m, du, dv, 1, dmu, dv);
		for (int i = 0; i < n; i++) {
			float dpi = b->dp[i];
			for (int j = 0; j < m; j++) {
				float x = dp[(size_t)i * m + j] + dpi;
				dbe[j] += x * w[(size_t)i * m + j];
				dp[(size_t)i * m + j] = x * beta[j];
			}
		}
		if (t == tv) add_weight_seed(p, sw, dp);
		softmax_back(n, m, w, dp, b->rs);
		for (size_t k = 0; k < nm; k++) b->s0[k] += dp[k];
		gaussian_back(n, m, dv, beta, f, dp, dbe, b->g, b->cols);
		memset(dr_prev, 0, sizeof(float) * (size_t)n * dv);
		dist_back(n, m, dv, r_prev, dv, mu, ldmu, f, b->g, dr_prev, dv, dmu, dv, b->rs, b->cs);
		float *x = dr;
		dr = dr_prev, dr_prev = x;
	}
	// without value iterations the readout's weight adjoint is the key
	// term's adjoint as it stands: made in b->kf, not copied there
	float *dw0 = tv > 0 ? b->w : b->kf;
	mm(n, dv, m, 1, dr, dv, 1, b->ct, m, 0, dw0, m);
	mm(m, n, dv, 1, WI(0), 1, m, dr, dv, 1, dmu, dv);
	if (tv == 0) add_weight_seed(p, sw, dw0);
	// the readout's scores K_ij + log π_j: their adjoint starts the key
	// term's (b->kf, which propagation adds to) and adds to log π's
	if (tv > 0) {
		softmax_back(n, m, WI(0), dw0, b->rs);
		for (size_t k = 0; k < nm; k++) b->kf[k] = b->s0[k] + dw0[k];
		add_col_sums(n, m, b->kf, dlp);
	} else { // kf is dw0: its column sums in softmax_back's pass
#ifdef EM_AVX512
		// and on to gaussian_back and dist_back's sums where nothing
		// comes between (propagation adds to kf, and precision_back to
		// the distances' gradient before dist_back reads it)
		if (m > 8 && m <= 64 && !p->pr && (tk == 0 || !p->adapt_alpha)) {
			em_gd gd = {(float)d / 2, AL(tk), DK(tk), b->al[0], b->d, b->rs, b->cs, b->g};
			back_rows16(n, m, WI(0), dw0, NULL, dlp, &gd);
			g_ready = 1;
		} else
#endif
			softmax_back_add(n, m, WI(0), dw0, b->rs, NULL, dlp);
	}

	// §5 backward.
	if (p->pr) {
		propagate_back(p, tr, gvals, gldx, gmu0, gldv, gh, b);
	} else {
		add_rows_into(m, dv, dmu, gmu0, gldv);
		float gb = gh[H_BETA0]; // a register: gh may alias the arrays, for the compiler
		for (int j = 0; j < m; j++) {
			gb += dbe[j]; // padded units too: their β is β⁰
			b->lp0[j] += dlp[j];
		}
		gh[H_BETA0] = gb;
	}

	// §4 backward.
	float *dd = b->d, *dxi = b->xi[0], *dal = b->al[0];
	if (!g_ready) gaussian_back(n, m, d, AL(tk), DK(tk), b->kf, dal, dd, b->cols);
	for (int t = tk - 1; t >= 0; t--) {
		const float *w = WK(t), *nn = NK(t), *a = AK(t), *xi_new = XI(t + 1), *al_old = AL(t), *al_new = AL(t + 1),
		            *d_new = DK(t + 1);
		float *dxi_old = b->xi[1], *dal_old = b->al[1], *dw = b->w, *dn = b->dn;
		memset(dxi_old, 0, sizeof(float) * (size_t)m * d);
		memset(dal_old, 0, sizeof(float) * (size_t)m);
		memset(dw, 0, sizeof(float) * nm);
		memset(dn, 0, sizeof(float) * (size_t)m);
		if (p->adapt_alpha)
			precision_back(p, w, d_new, nn, dal, al_new, h[H_B_ALPHA], d, &gh[H_A_ALPHA], &gh[H_B_ALPHA], dn, dw, dd,
			               dal_old, b->sp);
		else
			memcpy(dal_old, dal, sizeof(float) * (size_t)m);
		if (g_ready)
			dist_back_apply(n, m, d, q, p->ldq, xi_new, d, dd, gq, gldq, dxi, d, b->rs, b->cs);
		else
			dist_back(n, m, d, q, p->ldq, xi_new, d, d_new, dd, gq, gldq, dxi, d, b->rs, b->cs);
		centres_back(p, w, q, p->ldq, gq, gldq, d, xi0, p->ldk, gxi0, gldk, al_old, h[H_THETA_XI], nn, a, xi_new, dxi,
		             &gh[H_THETA_XI], dal_old, dn, dw, b->da, b->ct);
		g_ready = 0;
#ifdef EM_AVX512
		// on to gaussian_back and dist_back's sums unless precision_back
		// adds to these distances' gradient first (with α adapted, in
		// every key iteration before the first)
		if (m > 8 && m <= 64 && (t == 0 || !p->adapt_alpha)) {
			em_gd gd = {(float)d / 2, al_old, DK(t), dal_old, dd, b->rs, b->cs, b->g};
			back_rows16(n, m, w, dw, dn, b->lp0, &gd);
			g_ready = 1;
		}
#endif
		if (!g_ready) {
			softmax_back_add(n, m, w, dw, b->rs, dn, b->lp0);
			gaussian_back(n, m, d, al_old, DK(t), dw, dal_old, dd, b->cols);
		}
		b->xi[0] = dxi_old, b->xi[1] = dxi;
		b->al[0] = dal_old, b->al[1] = dal;
		dxi = dxi_old, dal = dal_old;
	}
	if (g_ready)
		dist_back_apply(n, m, d, q, p->ldq, xi0, p->ldk, dd, gq, gldq, gxi0, gldk, b->rs, b->cs);
	else
		dist_back(n, m, d, q, p->ldq, xi0, p->ldk, DK(0), dd, gq, gldq, gxi0, gldk, b->rs, b->cs);
	add_rows_into(m, d, dxi, gxi0, gldk);
	float ga = gh[H_ALPHA0];
	for (int j = 0; j < m; j++) ga += dal[j]; // padded units too: their α is α⁰

	// §2 backward: log π⁰ = z − logsumexp(z) over the real units. The
	// sums into gh run in registers ga, gb (gxi0's stores may alias gh,
	// for the compiler, which then stored and reloaded them a unit).
	float total = 0, gb = gh[H_BETA0];
	for (int j = 0; j < m; j++)
		if (real_key(p, j)) total += b->lp0[j];
	for (int j = 0; j < m; j++) {
		if (!real_key(p, j)) continue;
		float dz = b->lp0[j] - tr.pi0[j] * total;
		if (logits) {
			glogits[j] += dz;
			continue;
		}
		ga += dz * tr.kn0[j] / 2;
		gb += dz * tr.vn0[j] / 2;
		axpy_row(d, dz * h[H_ALPHA0], xi0 + (size_t)j * p->ldk, gxi0 + (size_t)j * gldk);
		axpy_row(dv, dz * h[H_BETA0], mu0 + (size_t)j * p->ldv, gmu0 + (size_t)j * gldv);
	}
	gh[H_ALPHA0] = ga, gh[H_BETA0] = gb;
	// the residual connection's q gradient (iv[18]): gq_i + sr_i, last,
	// as graph's emAddRows added them after this call
	if (iv[18])
		for (int i = 0; i < n; i++) add_rows_into(1, d, sr + (size_t)i * ldr, gq + (size_t)i * gldq, gldq);
	return 0;
}

#ifndef EM_AVX512
// em_job_problem runs problem (bi, h) of j, forward or (bwd) backward, as
// graph's emRunForward and emRunBackward run it through pf_em_forward and
// pf_em_backward: the same calls with the same arguments, and for a
// problem with no real memory unit, what they do instead (the trace
// cleared, out = q + 0; the gradients' rows cleared, gq = 0 + the seed).
static int em_job_problem(const pf_em_job *j, int bwd, int bi, int h, float *scr) {
	const int n = j->n, m = j->m, d = j->d, dv = j->dv, g = bi * j->heads + h;
	float fv[11];
	for (int i = 0; i < 9; i++) fv[i] = j->hmask >> i & 1 ? j->hv[i * j->heads + h] : 0;
	const float *km = j->km ? j->km + (size_t)bi * m : NULL, *qm = j->qm ? j->qm + (size_t)bi * n : NULL;
	float real = (float)m;
	if (km) {
		real = 0;
		for (int k = 0; k < m; k++) real += km[k];
	}
	fv[9] = 0, fv[10] = real;
	const float *q = j->q + bi * j->q_b + h * j->q_h, *xi0 = j->xi0 + bi * j->k_b + h * j->k_h,
	            *mu0 = j->mu0 + bi * j->v_b + h * j->v_h;
	const int ldq = j->iv[4];
	float *trace = j->trace + (size_t)g * j->tsize;
	if (!bwd) {
		float *out = j->out + bi * j->o_b + h * j->o_h;
		if (real > 0) return pf_em_forward(j->iv, fv, q, xi0, mu0, NULL, km, qm, NULL, NULL, trace, scr, j->ns, out, j->ldo);
		memset(trace, 0, sizeof(float) * (size_t)j->tsize);
		for (int i = 0; i < n; i++)
			for (int k = 0; k < dv; k++) out[(size_t)i * j->ldo + k] = q[(size_t)i * ldq + k] + 0.0f;
		return 0;
	}
	const float *sr = j->sr + bi * j->sr_b + h * j->sr_h;
	float *gq = j->gq + bi * j->g_q_b + h * j->g_q_h, *gxi0 = j->gxi0 + bi * j->g_k_b + h * j->g_k_h,
	      *gmu0 = j->gmu0 + bi * j->g_v_b + h * j->g_v_h, *gh = j->gh + (size_t)g * 9;
	if (real > 0)
		return pf_em_backward(j->iv, fv, q, xi0, mu0, NULL, km, qm, NULL, NULL, trace, sr, NULL, NULL, NULL, NULL,
		                      NULL, NULL, gq, gxi0, gmu0, NULL, NULL, gh, j->gld, scr, j->ns);
	zero_rows(gq, n, d, j->gld[0]);
	zero_rows(gxi0, m, d, j->gld[1]);
	zero_rows(gmu0, m, dv, j->gld[2]);
	if (j->iv[18])
		for (int i = 0; i < n; i++)
			for (int k = 0; k < d; k++) gq[(size_t)i * j->gld[0] + k] += sr[(size_t)i * j->ldr + k];
	return 0;
}

// pf_em_job_run is worker's share of j: whole batch elements, all heads of
// each, taken from j's two-ended counter (pf_claim) until none is left,
// the next element claimed as the last head of the one in hand starts. Each
// problem's values depend on its inputs alone, so not on who runs it.
//
// While a problem runs, the next one's trace is fetched into the cache
// (simd.h's prefetch_nta), to be written in the forward and read in the
// backward. Why: a step's traces outgrow the caches (18 KB a problem of
// 16 queries and 50 keys at T_k = 1, 640 problems a step of the width-32
// Set Transformer, each written in the forward and read back in the
// backward after the other layers' passes), and a problem's own
// accesses, a few short runs of lines in each of its N×M arrays, are too
// short for the hardware's prefetchers to ramp up: 640 such problems
// took 16 µs each against 5 µs for 128 (one thread, forward all then
// backward all), and the width-32 EM step was 2.0× its softmax twin on a
// Zen 5 EPYC, about 1.6× with this prefetch
// (BenchmarkEMAttentionRatioDim32). The non-temporal hint beat the L2
// one (T1) there: 1.57–1.63× against 1.66–1.77× in six alternated
// rounds, and T2 was no better than T1.
void pf_em_job_run(const pf_em_job *j, int bwd, int worker) {
	float *scr = j->scr + (size_t)worker * j->ns;
	int bi = pf_claim(j->ctr, worker, j->b);
	while (bi >= 0) {
		int nb = -1;
		for (int h = 0; h < j->heads; h++) {
			// the next problem's trace: this element's next head, or the
			// next element's first, claimed only as this element's last
			// head starts (claimed a whole element ahead, a worker held
			// up to two, and a helper that had finished waited for them)
			if (h + 1 == j->heads) nb = pf_claim(j->ctr, worker, j->b);
			int nbi = h + 1 < j->heads ? bi : nb, nh = h + 1 < j->heads ? h + 1 : 0;
			if (nbi >= 0)
				prefetch_nta(j->trace + (size_t)(nbi * j->heads + nh) * j->tsize, sizeof(float) * (size_t)j->tsize);
			if (em_job_problem(j, bwd, bi, h, scr) != 0) __atomic_store_n(j->failed, 1, __ATOMIC_SEQ_CST);
		}
		bi = nb;
	}
}
#endif
