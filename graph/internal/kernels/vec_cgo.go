//go:build cgo && !purego

package kernels

// #cgo CFLAGS: -I${SRCDIR}
// #include <kernels.h>
import "C"

import (
	"runtime"
	"unsafe"
)

// ColSum32 runs vec.c's column sums of x [rows×len(s)] into s, the values
// of colSum, and reports whether it did. With 2·MinPart values or more
// and 64 columns or more, blocks of 32 columns go to the caller and the
// helpers (pool.c's range job, as AddRepeatShared32's chunks do): each
// column is still summed alone down the rows in order, so the split
// changes no value.
func ColSum32(x, s []float32) bool {
	d := len(s)
	if hasAVX2() == 0 || d == 0 || len(x) == 0 || len(x)%d != 0 {
		return false
	}
	if workers := min(runtime.GOMAXPROCS(0), d/32); len(x) >= 2*MinPart && workers > 1 {
		chunks := min(d/32, maxChunks)
		poolRun(C.PF_RANGE_COLSUM, d, len(x)/d, chunks, (d+31)/32, 32, min(workers, chunks), 0,
			[C.PF_RANGE_PTRS]unsafe.Pointer{f32p(x), f32p(s)})
		return true
	}
	C.pf_colsum((*C.float)(&x[0]), C.int(len(x)/d), C.int(d), (*C.float)(&s[0]))
	return true
}

// Adam32 runs vec.c's Adam update on float32 weights, the values of
// adamUpdate; c holds scale, lr, β₁, 1−β₁, β₂, 1−β₂, bc1, bc2, ε, decay.
func Adam32(w, g []float32, m, v []float64, c *[10]float64) bool {
	n := len(w)
	if hasAVX2() == 0 || n == 0 || len(g) != n || len(m) != n || len(v) != n {
		return false
	}
	C.pf_adam_f32((*C.float)(&w[0]), (*C.float)(&g[0]), (*C.double)(&m[0]), (*C.double)(&v[0]), C.int(n),
		(*C.double)(&c[0]))
	return true
}

// Finite32 reports whether every value of x is finite (no NaN or ±Inf):
// vec.c's eight-lane test where the CPU has AVX2, finite32's Go loop
// elsewhere.
func Finite32(x []float32) bool {
	if hasAVX2() == 0 || len(x) == 0 {
		return finite32(x)
	}
	return C.pf_finite32((*C.float)(&x[0]), C.int(len(x))) != 0
}

// Mul32, AddRepeat32 and ReluGrad32 run vec.c's element-wise loops, the
// values of mulInto, addRepeat and reluGrad32, and report whether they
// did.
func Mul32(a, b, y []float32) bool {
	if hasAVX2() == 0 || len(a) == 0 || len(b) < len(a) || len(y) < len(a) {
		return false
	}
	C.pf_mul((*C.float)(&a[0]), (*C.float)(&b[0]), (*C.float)(&y[0]), C.int(len(a)))
	return true
}

func AddRepeat32(a, b, y []float32) bool {
	if hasAVX2() == 0 || len(a) == 0 || len(b) == 0 || len(a)%len(b) != 0 || len(y) < len(a) {
		return false
	}
	C.pf_add_repeat((*C.float)(&a[0]), (*C.float)(&b[0]), (*C.float)(&y[0]), C.int(len(a)), C.int(len(b)))
	return true
}

func ReluGrad32(x, g, y []float32) bool {
	if hasAVX2() == 0 || len(x) == 0 || len(g) < len(x) || len(y) < len(x) {
		return false
	}
	C.pf_relu_grad((*C.float)(&x[0]), (*C.float)(&g[0]), (*C.float)(&y[0]), C.int(len(x)))
	return true
}

// Relu32 runs vec.c's max(x, 0), the values of Go's max, and reports
// whether it did.
func Relu32(x, y []float32) bool {
	if hasAVX2() == 0 || len(x) == 0 || len(y) < len(x) {
		return false
	}
	C.pf_relu((*C.float)(&x[0]), (*C.float)(&y[0]), C.int(len(x)))
	return true
}

// f32p is the address of x's first element, for pool.c's range jobs
// (x not empty).
func f32p(x []float32) unsafe.Pointer { return unsafe.Pointer(&x[0]) }

// AddRepeatShared32 is AddRepeat32 run on SplitRange's chunks of a
// (bounds on multiples of len(b)) by the caller and the helpers in one
// cgo call (pool.c's pf_pool_range), the values of AddRepeat32 and of
// addRepeat; it reports whether it ran.
func AddRepeatShared32(a, b, y []float32) bool {
	if hasAVX2() == 0 || len(a) == 0 || len(b) == 0 || len(a)%len(b) != 0 || len(y) < len(a) {
		return false
	}
	poolRange(C.PF_RANGE_ADD_REPEAT, len(a), len(b), len(b), 0, [C.PF_RANGE_PTRS]unsafe.Pointer{f32p(a), f32p(b), f32p(y)})
	return true
}

// AddShared32 sets y = a + b over len(a) values, as AddRepeat32 on each of
// SplitRange's chunks (bounds on multiples of 8) with b's same chunk,
// shared as AddRepeatShared32 is; it reports whether it ran.
func AddShared32(a, b, y []float32) bool {
	if hasAVX2() == 0 || len(a) == 0 || len(b) < len(a) || len(y) < len(a) {
		return false
	}
	poolRange(C.PF_RANGE_ADD, len(a), 0, 8, 0, [C.PF_RANGE_PTRS]unsafe.Pointer{f32p(a), f32p(b), f32p(y)})
	return true
}

// MulShared32 is Mul32 on SplitRange's chunks (bounds on multiples of
// 8), shared as AddRepeatShared32 is; it reports whether it ran.
func MulShared32(a, b, y []float32) bool {
	if hasAVX2() == 0 || len(a) == 0 || len(b) < len(a) || len(y) < len(a) {
		return false
	}
	poolRange(C.PF_RANGE_MUL, len(a), 0, 8, 0, [C.PF_RANGE_PTRS]unsafe.Pointer{f32p(a), f32p(b), f32p(y)})
	return true
}

// ReluShared32 is Relu32 on SplitRange's chunks (bounds on multiples of
// 8), shared as AddRepeatShared32 is; it reports whether it ran.
func ReluShared32(x, y []float32) bool {
	if hasAVX2() == 0 || len(x) == 0 || len(y) < len(x) {
		return false
	}
	poolRange(C.PF_RANGE_RELU, len(x), 0, 8, 0, [C.PF_RANGE_PTRS]unsafe.Pointer{f32p(x), f32p(y)})
	return true
}

// ReluGradShared32 is ReluGrad32 on SplitRange's chunks (bounds on
// multiples of 8), shared as AddRepeatShared32 is; it reports whether it
// ran.
func ReluGradShared32(x, g, y []float32) bool {
	if hasAVX2() == 0 || len(x) == 0 || len(g) < len(x) || len(y) < len(x) {
		return false
	}
	poolRange(C.PF_RANGE_RELU_GRAD, len(x), 0, 8, 0, [C.PF_RANGE_PTRS]unsafe.Pointer{f32p(x), f32p(g), f32p(y)})
	return true
}

// pfColSum is pf_colsum of x [rows×d] on the calling thread alone, the
// reference TestColSumSharedSameBits compares ColSum32's shared blocks
// with.
func pfColSum(x []float32, rows, d int, s []float32) {
	C.pf_colsum((*C.float)(&x[0]), C.int(rows), C.int(d), (*C.float)(&s[0]))
}
