//go:build cgo && !purego

// Element-wise kernels of Bayesian attention (fusedbayes.go) in float32
// with AVX2/FMA: the noise of a Weibull sample needs two logarithms per
// attention weight, hundreds of thousands per training step, which Go's
// math.Log computes one at a time.
#include <math.h>
#include <immintrin.h>
#include "kernels.h"
#include "bayes.h"

// pf_weibull_log_noise sets b[i] = scale · log(−log u[i]) for i < n: the
// log of a Weibull(1/scale, 1) draw from a uniform one (fusedbayes.go).
// u = 1 gives −∞ (a weight of 0 in the sample).
__attribute__((target("avx2,fma")))
void pf_weibull_log_noise(const float *u, float *b, int n, float scale) {
	const __m256 vs = _mm256_set1_ps(scale), sign = _mm256_set1_ps(-0.0f);
	int i = 0;
	for (; i + 8 <= n; i += 8) {
		__m256 e = _mm256_xor_ps(sign, log_pos(_mm256_loadu_ps(u + i))); // −log u
		_mm256_storeu_ps(b + i, _mm256_mul_ps(vs, log_pos(e)));
	}
	if (i < n) {
		float in[8] = {1, 1, 1, 1, 1, 1, 1, 1}, out[8];
		for (int l = 0; i + l < n; l++) in[l] = u[i + l];
		__m256 e = _mm256_xor_ps(sign, log_pos(_mm256_loadu_ps(in)));
		_mm256_storeu_ps(out, _mm256_mul_ps(vs, log_pos(e)));
		for (int l = 0; i + l < n; l++) b[i + l] = out[l];
	}
}

// pf_weibull_bias_fast is pf_weibull_log_noise with weibull_bias_fast, the
// form attention.c's Bayesian attention heads take (u in (0, 1]); the
// tests hold it to the float64 values.
__attribute__((target("avx2,fma")))
void pf_weibull_bias_fast(const float *u, float *b, int n, float scale) {
	const __m256 vs = _mm256_set1_ps(scale);
	int i = 0;
	for (; i + 8 <= n; i += 8) _mm256_storeu_ps(b + i, weibull_bias_fast(_mm256_loadu_ps(u + i), vs));
	if (i < n) {
		float in[8] = {1, 1, 1, 1, 1, 1, 1, 1}, out[8];
		for (int l = 0; i + l < n; l++) in[l] = u[i + l];
		_mm256_storeu_ps(out, weibull_bias_fast(_mm256_loadu_ps(in), vs));
		for (int l = 0; i + l < n; l++) b[i + l] = out[l];
	}
}
