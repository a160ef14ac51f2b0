//go:build cgo && !purego

package kernels

// The header is included through -I${SRCDIR} with angle brackets, not
// as "kernels.h": cgo compiles its probe of the C names from a file in
// $TMPDIR, and a quoted include looks in that file's directory first, so
// a stray kernels.h there (an old copy in /tmp, say) would hide the
// declarations added since.

// #cgo CFLAGS: -I${SRCDIR}
// #include <kernels.h>
import "C"

import (
	"runtime"
	"unsafe"
)

// LayerNormFwd32 runs layernorm.c's forward over the rows of x (row length
// d = len(g), a multiple of 8), filling y and each row's mean and rstd,
// and reports whether it did.
func LayerNormFwd32(x, g, b, y []float32, eps float64, mean, rstd []float32) bool {
	d := len(g)
	if hasAVX2() == 0 || d%8 != 0 || len(x) == 0 || len(x)%d != 0 || len(mean) != len(x)/d {
		return false
	}
	C.pf_layernorm_fwd((*C.float)(&x[0]), (*C.float)(&g[0]), (*C.float)(&b[0]), (*C.float)(&y[0]),
		C.int(len(x)/d), C.int(d), C.float(eps), (*C.float)(&mean[0]), (*C.float)(&rstd[0]))
	return true
}

// AddLayerNormFwd32 runs layernorm.c's residual and layer norm: s = x + f
// (the values of AddRepeat32 on equal lengths), then LayerNormFwd32 of
// s, row by row; it reports whether it did.
func AddLayerNormFwd32(x, f, g, b, s, y []float32, eps float64, mean, rstd []float32) bool {
	d := len(g)
	if hasAVX2() == 0 || d%8 != 0 || len(x) == 0 || len(x)%d != 0 || len(mean) != len(x)/d || len(rstd) != len(mean) ||
		len(f) != len(x) || len(s) != len(x) || len(y) != len(x) || len(b) != d {
		return false
	}
	C.pf_add_layernorm_fwd((*C.float)(&x[0]), (*C.float)(&f[0]), (*C.float)(&g[0]), (*C.float)(&b[0]),
		(*C.float)(&s[0]), (*C.float)(&y[0]), C.int(len(x)/d), C.int(d), C.float(eps), (*C.float)(&mean[0]),
		(*C.float)(&rstd[0]))
	return true
}

// LayerNormBwd32 runs layernorm.c's backward: dx, and dgamma and dbeta
// accumulated (the caller zeroes them), from the forward's statistics.
// The output gradient is gOut, or gOut + gOut2 (each value one float
// addition) when gOut2 is not nil.
func LayerNormBwd32(x, g, gOut, gOut2, mean, rstd, dx, dgamma, dbeta []float32) bool {
	d := len(g)
	if hasAVX2() == 0 || d%8 != 0 || len(x) == 0 || len(x)%d != 0 || len(mean) != len(x)/d ||
		len(gOut) < len(x) || (gOut2 != nil && len(gOut2) < len(x)) {
		return false
	}
	C.pf_layernorm_bwd((*C.float)(&x[0]), (*C.float)(&g[0]), (*C.float)(&gOut[0]), cptr(gOut2),
		(*C.float)(&mean[0]), (*C.float)(&rstd[0]), (*C.float)(&dx[0]), (*C.float)(&dgamma[0]),
		(*C.float)(&dbeta[0]), C.int(len(x)/d), C.int(d))
	return true
}

// LayerNormFwdShared32 is LayerNormFwd32 on SplitRange's chunks of whole
// rows, run by the caller and the helpers in one cgo call (pool.c's
// pf_pool_range): each row's values are LayerNormFwd32's. It reports
// whether it ran.
func LayerNormFwdShared32(x, g, b, y []float32, eps float64, mean, rstd []float32) bool {
	d := len(g)
	if hasAVX2() == 0 || d == 0 || d%8 != 0 || len(x) == 0 || len(x)%d != 0 || len(mean) != len(x)/d ||
		len(rstd) != len(mean) || len(b) != d || len(y) < len(x) {
		return false
	}
	poolRange(C.PF_RANGE_LN_FWD, len(x), d, d, float32(eps),
		[C.PF_RANGE_PTRS]unsafe.Pointer{f32p(x), f32p(g), f32p(b), f32p(y), f32p(mean), f32p(rstd)})
	return true
}

// AddLayerNormFwdShared32 is AddLayerNormFwd32 on SplitRange's chunks of
// whole rows, shared as LayerNormFwdShared32 is; it reports whether it
// ran.
func AddLayerNormFwdShared32(x, f, g, b, s, y []float32, eps float64, mean, rstd []float32) bool {
	d := len(g)
	if hasAVX2() == 0 || d == 0 || d%8 != 0 || len(x) == 0 || len(x)%d != 0 || len(mean) != len(x)/d ||
		len(rstd) != len(mean) || len(f) != len(x) || len(s) != len(x) || len(y) != len(x) || len(b) != d {
		return false
	}
	poolRange(C.PF_RANGE_ADD_LN_FWD, len(x), d, d, float32(eps),
		[C.PF_RANGE_PTRS]unsafe.Pointer{f32p(x), f32p(f), f32p(g), f32p(b), f32p(s), f32p(y), f32p(mean), f32p(rstd)})
	return true
}

// LayerNormBwdHalves32 is LayerNormBwd32 on the first rows/2 rows, into
// dgamma and dbeta, and on the others, into part [2·d] (dγ then dβ),
// both halves in one cgo call on the caller and a helper (pool.c's
// pf_pool_range), or on the caller alone with GOMAXPROCS 1: the halves
// and what each sums into are the same either way. The caller zeroes
// dgamma, dbeta and part, and adds part after. It reports whether it
// ran.
func LayerNormBwdHalves32(x, g, gOut, gOut2, mean, rstd, dx, dgamma, dbeta, part []float32) bool {
	d := len(g)
	if hasAVX2() == 0 || d == 0 || d%8 != 0 || len(x) == 0 || len(x)%d != 0 || len(x)/d < 2 ||
		len(mean) != len(x)/d || len(rstd) != len(mean) || len(gOut) < len(x) || len(dx) < len(x) ||
		(gOut2 != nil && len(gOut2) < len(x)) || len(dgamma) < d || len(dbeta) < d || len(part) < 2*d {
		return false
	}
	poolRun(C.PF_RANGE_LN_BWD, len(x), d, 2, len(x)/d, d, min(runtime.GOMAXPROCS(0), 2), 0,
		[C.PF_RANGE_PTRS]unsafe.Pointer{f32p(x), f32p(g), f32p(gOut), f32p(mean), f32p(rstd), f32p(dx),
			f32p(dgamma), f32p(dbeta), f32p(part), unsafe.Pointer(cptr(gOut2))})
	return true
}
