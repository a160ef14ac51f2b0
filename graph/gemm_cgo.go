//go:build cgo && !purego

package graph

// #cgo CFLAGS: -O3
// #include "gemm.h"
import "C"

import (
	"sync"
	"unsafe"
)

// hasAVX2 is whether this CPU runs the AVX2/FMA kernel of gemm.c; it is
// asked once.
var hasAVX2 = sync.OnceValue(func() C.int { return C.pf_has_avx2() })

// gemmKernel runs gemm.c's kernel: AVX2 and FMA where the CPU has them,
// portable C otherwise. Build with -tags purego for gonum's pure-Go BLAS.
// A non-nil bias [n] makes it c ← bias + α·op(a)·op(b) on every row, with
// beta ignored.
func gemmKernel[T float](tA, tB bool, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int, bias []T) {
	if k == 0 || len(a) == 0 || len(b) == 0 {
		if bias != nil {
			for i := range m {
				copy(c[i*ldc:i*ldc+n], bias[:n])
			}
			return
		}
		scaleRows(m, n, beta, c, ldc)
		return
	}
	switch cs := any(c).(type) {
	case []float32:
		as, bs := any(a).([]float32), any(b).([]float32)
		var bp *C.float
		if bias != nil {
			bp = (*C.float)(unsafe.Pointer(&any(bias).([]float32)[0]))
		}
		C.pf_sgemm(hasAVX2(), cbool(tA), cbool(tB), C.int(m), C.int(n), C.int(k), C.float(alpha),
			(*C.float)(unsafe.Pointer(&as[0])), C.int(lda), (*C.float)(unsafe.Pointer(&bs[0])), C.int(ldb),
			C.float(beta), (*C.float)(unsafe.Pointer(&cs[0])), C.int(ldc), bp)
	case []float64:
		if bias != nil {
			for i := range m {
				copy(c[i*ldc:i*ldc+n], bias[:n])
			}
			beta = 1
		}
		as, bs := any(a).([]float64), any(b).([]float64)
		C.pf_dgemm(hasAVX2(), cbool(tA), cbool(tB), C.int(m), C.int(n), C.int(k), C.double(alpha),
			(*C.double)(unsafe.Pointer(&as[0])), C.int(lda), (*C.double)(unsafe.Pointer(&bs[0])), C.int(ldb),
			C.double(beta), (*C.double)(unsafe.Pointer(&cs[0])), C.int(ldc))
	}
}

func cbool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

// softmaxRows32 runs softmax.c's AVX2 row softmax over p [n×m] (see
// weights) and reports whether it did; without AVX2 and FMA the caller
// uses the Go loop.
func softmaxRows32(p []float32, n, m int, mask []float32, causal bool) bool {
	if hasAVX2() == 0 || len(p) < n*m || n*m == 0 {
		return false
	}
	var mp *C.float
	if mask != nil {
		mp = (*C.float)(unsafe.Pointer(&mask[0]))
	}
	C.pf_softmax_rows((*C.float)(unsafe.Pointer(&p[0])), C.int(n), C.int(m), mp, cbool(causal))
	return true
}

// layerNormFwd32 runs layernorm.c's forward over the rows of x (row length
// d = len(g), a multiple of 8), filling y and each row's mean and rstd,
// and reports whether it did.
func layerNormFwd32(x, g, b, y []float32, eps float64, mean, rstd []float32) bool {
	d := len(g)
	if hasAVX2() == 0 || d%8 != 0 || len(x) == 0 || len(x)%d != 0 || len(mean) != len(x)/d {
		return false
	}
	C.pf_layernorm_fwd((*C.float)(&x[0]), (*C.float)(&g[0]), (*C.float)(&b[0]), (*C.float)(&y[0]),
		C.int(len(x)/d), C.int(d), C.float(eps), (*C.float)(&mean[0]), (*C.float)(&rstd[0]))
	return true
}

// layerNormBwd32 runs layernorm.c's backward: dx, and dgamma and dbeta
// accumulated (the caller zeroes them), from the forward's statistics.
func layerNormBwd32(x, g, gOut, mean, rstd, dx, dgamma, dbeta []float32) bool {
	d := len(g)
	if hasAVX2() == 0 || d%8 != 0 || len(x) == 0 || len(x)%d != 0 || len(mean) != len(x)/d {
		return false
	}
	C.pf_layernorm_bwd((*C.float)(&x[0]), (*C.float)(&g[0]), (*C.float)(&gOut[0]), (*C.float)(&mean[0]),
		(*C.float)(&rstd[0]), (*C.float)(&dx[0]), (*C.float)(&dgamma[0]), (*C.float)(&dbeta[0]),
		C.int(len(x)/d), C.int(d))
	return true
}

// colSum32 runs vec.c's column sums of x [rows×len(s)] into s, the values
// of colSum, and reports whether it did.
func colSum32(x, s []float32) bool {
	d := len(s)
	if hasAVX2() == 0 || d == 0 || len(x) == 0 || len(x)%d != 0 {
		return false
	}
	C.pf_colsum((*C.float)(&x[0]), C.int(len(x)/d), C.int(d), (*C.float)(&s[0]))
	return true
}

// adam32 runs vec.c's Adam update on float32 weights, the values of
// adamUpdate; c holds scale, lr, β₁, 1−β₁, β₂, 1−β₂, bc1, bc2, ε, decay.
func adam32(w, g []float32, m, v []float64, c *[10]float64) bool {
	n := len(w)
	if hasAVX2() == 0 || n == 0 || len(g) != n || len(m) != n || len(v) != n {
		return false
	}
	C.pf_adam_f32((*C.float)(&w[0]), (*C.float)(&g[0]), (*C.double)(&m[0]), (*C.double)(&v[0]), C.int(n),
		(*C.double)(&c[0]))
	return true
}

// attnHeadOK reports whether attention.c takes a head of n queries, m
// keys and widths d, dv: d and dv multiples of 8 up to 64, any m up to 64,
// and n rows of m rounded up to 8 in its 64×64 scratch.
func attnHeadOK(n, m, d, dv int) bool {
	m8 := (m + 7) &^ 7
	return hasAVX2() != 0 && n > 0 && m > 0 && d > 0 && dv > 0 && d%8 == 0 && dv%8 == 0 &&
		m <= 64 && d <= 64 && dv <= 64 && n*m8 <= 64*64
}

// attnHeadFwd32 runs attention.c's forward for one head: p [n×m] gets the
// weights and out (rows strided by ldo) the readout (p ⊙ drop) v, or p v
// when drop [n×m] is nil. It reports whether it did.
func attnHeadFwd32(q []float32, ldq int, k []float32, ldk int, v []float32, ldv, n, m, d, dv int,
	scale float32, mask []float32, causal bool, drop, p, out []float32, ldo int) bool {
	if !attnHeadOK(n, m, d, dv) || len(p) < n*m || (drop != nil && len(drop) < n*m) {
		return false
	}
	var mp, dp *C.float
	if mask != nil {
		mp = (*C.float)(&mask[0])
	}
	if drop != nil {
		dp = (*C.float)(&drop[0])
	}
	C.pf_attn_head_fwd((*C.float)(&q[0]), C.int(ldq), (*C.float)(&k[0]), C.int(ldk), (*C.float)(&v[0]), C.int(ldv),
		C.int(n), C.int(m), C.int(d), C.int(dv), C.float(scale), mp, cbool(causal), dp,
		(*C.float)(&p[0]), (*C.float)(&out[0]), C.int(ldo))
	return true
}

// attnHeadBwd32 runs attention.c's backward for one head from its weights
// p [n×m] and dropout mask drop [n×m] (nil: none), writing dq, dk, dv
// (strided as q, k, v). It reports whether it did.
func attnHeadBwd32(q []float32, ldq int, k []float32, ldk int, v []float32, ldv int, g []float32, ldg int,
	p, drop []float32, n, m, d, dv int, scale float32, dq, dk, dvv []float32) bool {
	if !attnHeadOK(n, m, d, dv) || len(p) < n*m || (drop != nil && len(drop) < n*m) {
		return false
	}
	var dp *C.float
	if drop != nil {
		dp = (*C.float)(&drop[0])
	}
	C.pf_attn_head_bwd((*C.float)(&q[0]), C.int(ldq), (*C.float)(&k[0]), C.int(ldk), (*C.float)(&v[0]), C.int(ldv),
		(*C.float)(&g[0]), C.int(ldg), (*C.float)(&p[0]), dp, C.int(n), C.int(m), C.int(d), C.int(dv), C.float(scale),
		(*C.float)(&dq[0]), (*C.float)(&dk[0]), (*C.float)(&dvv[0]))
	return true
}

// mul32, addRepeat32 and reluGrad32C run vec.c's element-wise loops, the
// values of mulInto, addRepeat and reluGrad32, and report whether they
// did.
func mul32(a, b, y []float32) bool {
	if hasAVX2() == 0 || len(a) == 0 || len(b) < len(a) || len(y) < len(a) {
		return false
	}
	C.pf_mul((*C.float)(&a[0]), (*C.float)(&b[0]), (*C.float)(&y[0]), C.int(len(a)))
	return true
}

func addRepeat32(a, b, y []float32) bool {
	if hasAVX2() == 0 || len(a) == 0 || len(b) == 0 || len(a)%len(b) != 0 || len(y) < len(a) {
		return false
	}
	C.pf_add_repeat((*C.float)(&a[0]), (*C.float)(&b[0]), (*C.float)(&y[0]), C.int(len(a)), C.int(len(b)))
	return true
}

func reluGrad32C(x, g, y []float32) bool {
	if hasAVX2() == 0 || len(x) == 0 || len(g) < len(x) || len(y) < len(x) {
		return false
	}
	C.pf_relu_grad((*C.float)(&x[0]), (*C.float)(&g[0]), (*C.float)(&y[0]), C.int(len(x)))
	return true
}

// relu32 runs vec.c's max(x, 0), the values of Go's max, and reports
// whether it did.
func relu32(x, y []float32) bool {
	if hasAVX2() == 0 || len(x) == 0 || len(y) < len(x) {
		return false
	}
	C.pf_relu((*C.float)(&x[0]), (*C.float)(&y[0]), C.int(len(x)))
	return true
}

// expRow32C runs softmax.c's vectorised exponentials of a row (see
// expRow) and reports whether it did.
func expRow32C(dst, src []float32, shift float32) (float64, bool) {
	if hasAVX2() == 0 || len(src) == 0 || len(dst) < len(src) {
		return 0, false
	}
	return float64(C.pf_exp_row((*C.float)(&src[0]), (*C.float)(&dst[0]), C.int(len(src)), C.float(shift))), true
}

// maxSum32C runs softmax.c's max and sum of a row, and reports whether it
// did.
func maxSum32C(x []float32) (mx float32, sum float64, ok bool) {
	if hasAVX2() == 0 || len(x) == 0 {
		return 0, 0, false
	}
	var m C.float
	var s C.double
	C.pf_max_sum((*C.float)(&x[0]), C.int(len(x)), &m, &s)
	return float32(m), float64(s), true
}

// scaleShift32C runs softmax.c's d ← d·scale − off, and reports whether
// it did.
func scaleShift32C(d []float32, scale, off float32) bool {
	if hasAVX2() == 0 || len(d) == 0 {
		return false
	}
	C.pf_scale_shift((*C.float)(&d[0]), C.int(len(d)), C.float(scale), C.float(off))
	return true
}

// packedGemm reports whether float32 products with n ≥ 16 and k ≥ 32 run
// on gemm.c's packed kernel, whose values do not depend on the columns it
// is given (see splitColumns).
func packedGemm() bool { return hasAVX2() != 0 }
