//go:build cgo && !purego

// Float32 layer norm rows with AVX2/FMA (fusedlayernorm.go has the
// equations). Row statistics are taken in float32 over 8 lanes, then
// summed across lanes in a fixed order, so results are deterministic.
#include <math.h>
#include <string.h>
#include <immintrin.h>
#include "kernels.h"
#include "simd.h"

// ln_row normalises one row xr [d] (d a multiple of 8) into yr with gain
// g and bias b, recording its mean and 1/√(σ²+ε): pf_layernorm_fwd's and
// pf_add_layernorm_fwd's row, one code for both so their values agree.
__attribute__((target("avx2,fma")))
static inline void ln_row(const float *xr, const float *g, const float *b, float *yr, int d, float eps,
                          float *mean, float *rstd) {
	__m256 s = _mm256_setzero_ps();
	for (int j = 0; j < d; j += 8) s = _mm256_add_ps(s, _mm256_loadu_ps(xr + j));
	float mu = hsum(s) / d;
	__m256 vm = _mm256_set1_ps(mu);
	s = _mm256_setzero_ps();
	for (int j = 0; j < d; j += 8) {
		__m256 c = _mm256_sub_ps(_mm256_loadu_ps(xr + j), vm);
		s = _mm256_fmadd_ps(c, c, s);
	}
	float rs = 1.0f / _mm_cvtss_f32(_mm_sqrt_ss(_mm_set_ss(hsum(s) / d + eps)));
	*mean = mu;
	*rstd = rs;
	__m256 vr = _mm256_set1_ps(rs);
	for (int j = 0; j < d; j += 8) {
		__m256 xh = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(xr + j), vm), vr);
		_mm256_storeu_ps(yr + j, _mm256_fmadd_ps(xh, _mm256_loadu_ps(g + j), _mm256_loadu_ps(b + j)));
	}
}

// pf_layernorm_fwd normalises rows of x [rows×d] (d a multiple of 8) into
// y with gain g and bias b, recording each row's mean and 1/√(σ²+ε).
__attribute__((target("avx2,fma")))
void pf_layernorm_fwd(const float *x, const float *g, const float *b, float *y, int rows, int d, float eps,
                      float *mean, float *rstd) {
	for (int r = 0; r < rows; r++)
		ln_row(x + (size_t)r * d, g, b, y + (size_t)r * d, d, eps, mean + r, rstd + r);
}

// pf_add_layernorm_fwd sets s = x + f [rows×d] (pf_add_repeat's sums) and
// normalises s into y as pf_layernorm_fwd does, a row at a time: each row
// of s is normalised while it is still in L1, rather than written out
// whole and read back.
__attribute__((target("avx2,fma")))
void pf_add_layernorm_fwd(const float *x, const float *f, const float *g, const float *b, float *s, float *y,
                          int rows, int d, float eps, float *mean, float *rstd) {
	for (int r = 0; r < rows; r++) {
		size_t o = (size_t)r * d;
		for (int j = 0; j < d; j += 8)
			_mm256_storeu_ps(s + o + j, _mm256_add_ps(_mm256_loadu_ps(x + o + j), _mm256_loadu_ps(f + o + j)));
		ln_row(s + o, g, b, y + o, d, eps, mean + r, rstd + r);
	}
}

// pf_layernorm_bwd writes dx [rows×d] and accumulates dgamma, dbeta [d]
// (which the caller zeroes) from the output gradient go, given the
// forward pass's row statistics:
//   ĝ = go ⊙ γ,  dx = (ĝ − mean(ĝ) − x̂ · mean(ĝ ⊙ x̂)) · rstd.
// With go2 not NULL the output gradient is go + go2, each value the one
// float addition graph's grad-sum makes, taken as it is read: the sum of
// the two gradients that reach a layer norm's output is never written.
__attribute__((target("avx2,fma")))
void pf_layernorm_bwd(const float *x, const float *g, const float *go, const float *go2, const float *mean,
                      const float *rstd, float *dx, float *dgamma, float *dbeta, int rows, int d) {
	for (int r = 0; r < rows; r++) {
		const float *xr = x + (size_t)r * d, *gr = go + (size_t)r * d, *g2r = go2 ? go2 + (size_t)r * d : NULL;
		float *dxr = dx + (size_t)r * d;
		__m256 vm = _mm256_set1_ps(mean[r]), vr = _mm256_set1_ps(rstd[r]);
		__m256 s1 = _mm256_setzero_ps(), s2 = _mm256_setzero_ps();
		for (int j = 0; j < d; j += 8) {
			__m256 xh = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(xr + j), vm), vr);
			__m256 gv = _mm256_loadu_ps(gr + j);
			if (g2r) gv = _mm256_add_ps(gv, _mm256_loadu_ps(g2r + j));
			__m256 gh = _mm256_mul_ps(gv, _mm256_loadu_ps(g + j));
			s1 = _mm256_add_ps(s1, gh);
			s2 = _mm256_fmadd_ps(gh, xh, s2);
			_mm256_storeu_ps(dgamma + j, _mm256_fmadd_ps(gv, xh, _mm256_loadu_ps(dgamma + j)));
			_mm256_storeu_ps(dbeta + j, _mm256_add_ps(gv, _mm256_loadu_ps(dbeta + j)));
		}
		__m256 m1 = _mm256_set1_ps(hsum(s1) / d), m2 = _mm256_set1_ps(hsum(s2) / d);
		for (int j = 0; j < d; j += 8) {
			__m256 xh = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(xr + j), vm), vr);
			__m256 gv = _mm256_loadu_ps(gr + j);
			if (g2r) gv = _mm256_add_ps(gv, _mm256_loadu_ps(g2r + j));
			__m256 gh = _mm256_mul_ps(gv, _mm256_loadu_ps(g + j));
			__m256 t = _mm256_fnmadd_ps(xh, m2, _mm256_sub_ps(gh, m1));
			_mm256_storeu_ps(dxr + j, _mm256_mul_ps(t, vr));
		}
	}
}
