// Every C entry point of package kernels, by the C file that defines it.
// Each C file includes this header, so the compiler checks these
// declarations against the definitions; each Go binding (X_cgo.go for X.c)
// includes it to call them.
#ifndef PF_KERNELS_H
#define PF_KERNELS_H
#include <stddef.h>
#include <stdint.h>

// gemm.c (gemm_cgo.go)
int pf_has_avx2(void);
int pf_has_avx512(void);
void pf_sgemm(int level, int transA, int transB, int m, int n, int k, float alpha,
              const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc,
              const float *bias);
void pf_dgemm(int avx2, int transA, int transB, int m, int n, int k, double alpha,
              const double *A, int lda, const double *B, int ldb, double beta, double *C, int ldc);
void pf_sgemm_par(int level, int mode, int worker, int transA, int transB, int m, int n, int k, float alpha,
                  const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc,
                  const float *bias, float *bp, int rb, int cw, int *ctr);

// pool.c (pool_cgo.go, gemm_cgo.go)
#define PF_POOL_SLOTS 64
int *pf_pool_slot(int i);
void pf_pool_serve(int i);
int pf_pool_take(int i);
void pf_pool_wake(void);
// The counts of pf_pool_stats, kept while pf_pool_stats_on(1): sections
// posted to a helper, those whose helper slept (a wake-up), shares the
// helper started polling and asleep with their summed start latencies
// (ns after the post), the longest, those later than 10 µs, shares taken
// back, the caller's own time in the sections, its wait for the helper
// at the end, the helper's idle time before the caller finished, how
// often the helper went to sleep, and its wake-ups sent away from the
// waker's CPU (pf_pool_wake).
enum {
	PF_PS_SECTIONS,
	PF_PS_WAKES,
	PF_PS_STARTED,
	PF_PS_START_NS,
	PF_PS_WOKE_STARTED,
	PF_PS_WOKE_START_NS,
	PF_PS_START_MAX_NS,
	PF_PS_START_LATE,
	PF_PS_TAKEN_BACK,
	PF_PS_SECTION_NS,
	PF_PS_WAIT_NS,
	PF_PS_HELPER_IDLE_NS,
	PF_PS_SLEEPS,
	PF_PS_WOKE_AWAY,
	PF_PS_N,
};
void pf_pool_stats_on(int on);
long long *pf_pool_stats(void);
int pf_pool_sgemm(int workers, int helpers, int level, int mode, int transA, int transB, int m, int n, int k,
                  float alpha, const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc,
                  const float *bias, float *bp, int rb, int cw, int *ctr);
int pf_pool_attn(int workers, int helpers, int bwd, int level, const float *q, int ldq, const float *k, int ldk,
                 const float *v, int ldv, const float *g, int ldg, int b, int heads, int n, int m, int d, int dv,
                 float scale, const float *mask, int causal, const float *bias, const float *drop, float *p,
                 int pstride, float *out, int ldo, float *dq, float *dk, float *dvv, int residual);
// pf_pool_bayes's dims hold pf_bayes_job's ints in their order (level …
// r), fl its scale and gx.
int pf_pool_bayes(int workers, int helpers, int bwd, const int *dims, const float *fl, double gd, long pgsize,
                  const float *q, const float *k, const float *v, const float *g, const float *mask, const float *qmask,
                  const float *noise, const float *pad, const float *b2, const float *xc, const double *kc, float *p,
                  float *x, float *out, float *dc, float *dq, float *dk, float *dvv, float *pg, double *sums,
                  double *part, unsigned *skipped);
// pf_pool_em's offs holds pf_em_job's longs in their order (q_b … ns);
// dims its b, heads, n, m, d, dv, ldo, ldr, hmask.
int pf_pool_em(int workers, int helpers, int bwd, const int *dims, const int *iv, const int *gld, const long *offs,
               const float *hv, const float *q, const float *xi0, const float *mu0, const float *km, const float *qm,
               const float *sr, float *trace, float *out, float *gq, float *gxi0, float *gmu0, float *gh, float *scr);
// The kinds of pf_pool_range's jobs: vec.c's and layernorm.c's loops.
enum {
	PF_RANGE_ADD_REPEAT,
	PF_RANGE_ADD,
	PF_RANGE_MUL,
	PF_RANGE_RELU,
	PF_RANGE_RELU_GRAD,
	PF_RANGE_LN_FWD,
	PF_RANGE_ADD_LN_FWD,
	PF_RANGE_LN_BWD,
	PF_RANGE_COLSUM,
};
#define PF_RANGE_PTRS 10
int pf_pool_range(int workers, int helpers, int kind, int n, int d, int chunks, int units, int align, float eps,
                  void *p0, void *p1, void *p2, void *p3, void *p4, void *p5, void *p6, void *p7, void *p8, void *p9);

// softmax.c (softmax_cgo.go)
void pf_softmax_rows(float *p, int n, int m, const float *mask, int causal);
double pf_exp_row(const float *src, float *dst, int n, float shift);
void pf_max_sum(const float *x, int n, float *mx, double *sum);
void pf_scale_shift(float *d, int n, float scale, float off);
void pf_softmax_rows512(float *p, int n, int m, const float *mask, int causal);

// pf_claim takes the next of b items (batch elements, chunks) from the
// two-ended counter at ctr (8 bytes, 8-byte aligned, zeroed: items taken
// from the front in its low half, from the back in its high half), or
// returns −1 when none is left. Worker 0, the caller, takes 0, 1, 2, …
// and the helpers b−1, b−2, …: in the jobs of a step each thread keeps to
// its own end of the batch, whose rows its cache holds from the job
// before, where taking turns from one counter handed half of each job's
// rows to the other core (some 5% of a Set Transformer step). One atomic
// addition a claim: an item is handed out only while the two counts
// together are below b, so the front and the back never hand out the
// same one.
static inline int pf_claim(int *ctr, int worker, int b) {
	long long old = __atomic_fetch_add((long long *)ctr, worker == 0 ? 1LL : 1LL << 32, __ATOMIC_RELAXED);
	int front = (int)(old & 0xffffffff), back = (int)(old >> 32);
	if (front + back >= b) return -1;
	return worker == 0 ? front : b - 1 - back;
}
int pf_claim_rows(int *ctr, int worker, int m, int rb, int unit, int *i0, int *i1);

// layernorm.c (layernorm_cgo.go)
void pf_layernorm_fwd(const float *x, const float *g, const float *b, float *y, int rows, int d, float eps,
                      float *mean, float *rstd);
void pf_add_layernorm_fwd(const float *x, const float *f, const float *g, const float *b, float *s, float *y,
                          int rows, int d, float eps, float *mean, float *rstd);
void pf_layernorm_bwd(const float *x, const float *g, const float *go, const float *go2, const float *mean,
                      const float *rstd, float *dx, float *dgamma, float *dbeta, int rows, int d);

// vec.c (vec_cgo.go)
void pf_colsum(const float *x, int rows, int d, float *s);
void pf_colsum_ld(const float *x, int rows, int d, int ld, float *s);
void pf_adam_f32(float *w, const float *g, double *m, double *v, int n, const double *c);
int pf_finite32(const float *x, int n);
void pf_mul(const float *a, const float *b, float *y, int n);
void pf_add_repeat(const float *a, const float *b, float *y, int n, int d);
void pf_relu_grad(const float *x, const float *g, float *y, int n);
void pf_relu(const float *x, float *y, int n);

// attention.c (attention_cgo.go): softmax attention heads, and the
// Bayesian heads (KL, prior network, sampled head) built on them.
void pf_attn_head_fwd(const float *q, int ldq, const float *k, int ldk, const float *v, int ldv,
                      int n, int m, int d, int dv, float scale, const float *mask, int causal,
                      const float *drop, float *p, float *out, int ldo, const float *res, int ldr);
void pf_attn_head_fwd_bias(const float *q, int ldq, const float *k, int ldk, const float *v, int ldv,
                           int n, int m, int d, int dv, float scale, const float *mask, int causal,
                           const float *bias, const float *drop, float *p, float *out, int ldo, const float *res,
                           int ldr);
void pf_attn_head_bwd(const float *q, int ldq, const float *k, int ldk, const float *v, int ldv,
                      const float *g, int ldg, const float *p, const float *drop, int n, int m, int d, int dv,
                      float scale, float *dq, float *dk, float *dvv, const float *res, int ldr);
void pf_attn_heads_fwd(int level, const float *q, int ldq, const float *k, int ldk, const float *v, int ldv,
                       int b0, int bstep, int b, int heads, int n, int m, int d, int dv, float scale,
                       const float *mask, int causal, const float *bias, const float *drop, float *p, int pstride,
                       float *out, int ldo, int residual);
void pf_attn_heads_bwd(int level, const float *q, int ldq, const float *k, int ldk, const float *v, int ldv,
                       const float *g, int ldg, const float *p, const float *drop, int b0, int bstep, int b, int heads,
                       int n, int m, int d, int dv, float scale, float *dq, float *dk, float *dvv, int residual);
// pf_attn_job is a batch of softmax heads, pf_attn_heads_fwd's or _bwd's
// arguments (g, ldg and dq, dk, dvv the backward's; ldo, out, bias, mask,
// causal the forward's), and ctr, the counter from which its workers
// take the batch elements (pf_attn_heads_run).
typedef struct {
	int level, ldq, ldk, ldv, ldg, ldo, b, heads, n, m, d, dv, causal, residual, pstride;
	float scale;
	const float *q, *k, *v, *g, *mask, *bias, *drop;
	float *p, *out, *dq, *dk, *dvv;
	int *ctr;
} pf_attn_job;
void pf_attn_heads_run(const pf_attn_job *j, int bwd, int worker);
void pf_attn_head_fwd512(const float *q, int ldq, const float *k, int ldk, const float *v, int ldv, int n, int m,
                         int d, int dv, float scale, const float *mask, int causal, const float *drop, float *p,
                         float *out, int ldo, const float *res, int ldr);
void pf_attn_head_fwd_bias512(const float *q, int ldq, const float *k, int ldk, const float *v, int ldv, int n,
                              int m, int d, int dv, float scale, const float *mask, int causal, const float *bias,
                              const float *drop, float *p, float *out, int ldo, const float *res, int ldr);
void pf_attn_head_bwd512(const float *q, int ldq, const float *k, int ldk, const float *v, int ldv, const float *g,
                         int ldg, const float *p, const float *drop, int n, int m, int d, int dv, float scale,
                         float *dq, float *dk, float *dvv, const float *res, int ldr);
double pf_bayes_kl_head(const float *q, int ldq, const float *k, int ldk, int n, int m, int d, float scale,
                        const float *mask, const float *qmask, int kind, const float *a, const float *b, float g,
                        float *dq, float *dk, float *colsum, double *agg);
int pf_bayes_head(int level, const float *q, int ldq, const float *k, int ldk, const float *v, int ldv, int n, int m, int d,
                  int dv, float scale, const float *mask, const float *qmask, const float *noise, const float *w1,
                  const float *b1, const float *w2, float b2, const double *kc, float *p, float *x, float *out,
                  int ldo, float *dc, double *sum);
unsigned pf_bayes_heads(int level, int h, const float *q, int ldq, const float *k, int ldk, const float *v, int ldv,
                        int n, int m, int d, int dv, float scale, const float *mask, const float *qmask,
                        const float *noise, const float *pad, int padsize, const float *b2, const double *kc, float *p,
                        float *x, float *out, int ldo, float *dc, double *sums);
void pf_bayes_head_bwd(int level, const float *q, int ldq, const float *k, int ldk, const float *v, int ldv, const float *g,
                       int ldg, const float *p, int n, int m, int d, int dv, float scale, const float *x, float gx,
                       float *dq, float *dk, float *dvv, const float *w1, const float *w1t, const float *b1,
                       const float *w2, const float *dc, float *dw1, float *db1, float *dw2, float *db2,
                       const float *xc, double gd, double *part, int r);
void pf_bayes_heads_bwd(int level, int h, const float *q, int ldq, const float *k, int ldk, const float *v, int ldv,
                        const float *g, int ldg, const float *p, int n, int m, int d, int dv, float scale,
                        const float *x, float gx, float *dq, float *dk, float *dvv, const float *pad, int padsize,
                        const float *xc, double gd, double *part, int np, int r, float *pg);
// pf_bayes_job is a pass of the sampled Bayesian heads of b batch
// elements, h heads each, laid out as graph's BayesAttentionSample op
// holds them: element bi's q and k at q, k + bi·n·ld and bi·m·ld (rows ld
// apart), its v, readout (forward) or the readout's gradient g (backward)
// at bi·m·ldv and bi·n·ldv (rows ldv apart), the masks' rows bi, and its
// heads' [n×m] noise, weights and KL gradients at bi·h·n·m. The forward
// runs pf_bayes_heads on each element, its Σ KL into sums + bi·h, the
// contextual prior's dc at bi·h·m, and the mask of the heads it skipped
// into skipped[bi]; the backward runs pf_bayes_heads_bwd, xc and part at
// bi·h·m and bi·h·np. pad NULL: no prior network. Worker w's scratch pg
// is pg + w·pgsize. The workers take whole elements from ctr
// (pf_bayes_job_run).
typedef struct {
	int level, b, h, n, m, d, dv, ld, ldv, padsize, np, r;
	float scale, gx;
	double gd;
	long pgsize;
	const float *q, *k, *v, *g, *mask, *qmask, *noise, *pad, *b2, *xc;
	const double *kc;
	float *p, *x, *out, *dc, *dq, *dk, *dvv, *pg;
	double *sums, *part;
	unsigned *skipped;
	int *ctr;
} pf_bayes_job;
void pf_bayes_job_run(const pf_bayes_job *j, int bwd, int worker);
void pf_prior_head(const float *k, int ldk, int rows, int m, int d, const float *w1, const float *w1t,
                   const float *b1, const float *w2, float b2, float *c, const float *gc, int ldc,
                   float *scratch, float *dk, float *dw1, float *db1, float *dw2, float *db2);

// bayes.c (bayes_cgo.go)
void pf_weibull_log_noise(const float *u, float *b, int n, float scale);
void pf_uniform_noise512(float *d, long len, unsigned long long seed, long lo, long hi, long first);
long pf_normal_noise512(float *d, long len, unsigned long long seed, long lo, long hi, long first, const double *w,
                        const unsigned *k, const double *f, int *rej);
void pf_exp_neg(const double *y, double *out, long n);
void pf_sum_parts(const double *part, long stride, int rows, int np, double *sum);
void pf_weibull_bias_fast(const float *u, float *b, int n, float scale);

// dropout.c (dropout_cgo.go)
void pf_dropout_f32(int kernel, float *m, size_t n, uint64_t seed, uint64_t first, uint64_t thr, float scale);
void pf_dropout_f64(int kernel, double *m, size_t n, uint64_t seed, uint64_t first, uint64_t thr, double scale);
int pf_dropout_has_avx2(void);

// em.c (em_cgo.go)
int pf_em_forward(const int *iv, const float *fv, const float *q, const float *xi0, const float *mu0,
                  const float *vals, const float *km, const float *qm, const float *in_s, const float *logits,
                  float *trace, float *scr, long ns, float *out, int ldo);
int pf_em_backward(const int *iv, const float *fv, const float *q, const float *xi0, const float *mu0,
                   const float *vals, const float *km, const float *qm, const float *in_s, const float *logits,
                   float *trace, const float *sr, const float *sw, const float *sxi, const float *sal,
                   const float *smu, const float *sbe, const float *slp, float *gq, float *gxi0, float *gmu0,
                   float *gvals, float *glogits, float *gh, const int *gld, float *scr, long ns);
// pf_em_job is a pass of EM problems (b batch elements of heads
// problems each) as graph's EM op lays them out: problem (bi, h) reads
// q + bi·q_b + h·q_h (rows ldq apart), its keys at xi0 + bi·k_b + h·k_h
// (ldk), its values at mu0 + bi·v_b + h·v_h (ldv), the masks' rows bi
// (km [b×m], qm [b×n], or NULL), hyperparameter i at hv[i·heads + h] when
// bit i of hmask is set (else 0), and its trace at
// trace + (bi·heads + h)·tsize. iv holds pf_em_forward's scalars common
// to every problem (em_cgo.go's order). The forward writes the residual
// rows out + bi·o_b + h·o_h (ldo); the backward reads the readout's seed
// at sr + bi·sr_b + h·sr_h (ldr, iv[15]), writes the gradients gq, gxi0,
// gmu0 at bi·g*_b + h·g*_h in their own strides (gld) and problem g's
// hyperparameter gradients at gh + 9g. Worker w's scratch is scr + w·ns.
// The workers take whole batch elements from ctr (pf_em_job_run); failed
// is set when a scratch is too small.
typedef struct {
	int b, heads, n, m, d, dv, ldo, ldr, hmask;
	const int *iv, *gld;
	const float *q, *xi0, *mu0, *km, *qm, *sr, *hv;
	long q_b, q_h, k_b, k_h, v_b, v_h, o_b, o_h, sr_b, sr_h, g_q_b, g_q_h, g_k_b, g_k_h, g_v_b, g_v_h, tsize, ns;
	float *trace, *out, *gq, *gxi0, *gmu0, *gh, *scr;
	int *ctr, *failed;
} pf_em_job;
void pf_em_job_run(const pf_em_job *j, int bwd, int worker);

#endif
