int pf_has_avx2(void);
void pf_sgemm(int avx2, int transA, int transB, int m, int n, int k, float alpha,
              const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc,
              const float *bias);
void pf_dgemm(int avx2, int transA, int transB, int m, int n, int k, double alpha,
              const double *A, int lda, const double *B, int ldb, double beta, double *C, int ldc);
void pf_softmax_rows(float *p, int n, int m, const float *mask, int causal);
double pf_exp_row(const float *src, float *dst, int n, float shift);
void pf_max_sum(const float *x, int n, float *mx, double *sum);
void pf_scale_shift(float *d, int n, float scale, float off);
void pf_layernorm_fwd(const float *x, const float *g, const float *b, float *y, int rows, int d, float eps,
                      float *mean, float *rstd);
void pf_layernorm_bwd(const float *x, const float *g, const float *go, const float *mean, const float *rstd,
                      float *dx, float *dgamma, float *dbeta, int rows, int d);
void pf_colsum(const float *x, int rows, int d, float *s);
void pf_adam_f32(float *w, const float *g, double *m, double *v, int n, const double *c);
void pf_attn_head_fwd(const float *q, int ldq, const float *k, int ldk, const float *v, int ldv,
                      int n, int m, int d, int dv, float scale, const float *mask, int causal,
                      const float *drop, float *p, float *out, int ldo);
void pf_attn_head_bwd(const float *q, int ldq, const float *k, int ldk, const float *v, int ldv,
                      const float *g, int ldg, const float *p, const float *drop, int n, int m, int d, int dv,
                      float scale, float *dq, float *dk, float *dvv);
void pf_mul(const float *a, const float *b, float *y, int n);
void pf_add_repeat(const float *a, const float *b, float *y, int n, int d);
void pf_relu_grad(const float *x, const float *g, float *y, int n);
void pf_relu(const float *x, float *y, int n);
