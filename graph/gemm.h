int pf_has_avx2(void);
void pf_sgemm(int avx2, int transA, int transB, int m, int n, int k, float alpha,
              const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc);
void pf_dgemm(int avx2, int transA, int transB, int m, int n, int k, double alpha,
              const double *A, int lda, const double *B, int ldb, double beta, double *C, int ldc);
