//go:build cgo && !purego

package kernels

import (
	"os"
	"sync"
)

// SIMDEnv is the environment variable that, set to "avx2" when the
// process starts, keeps every kernel with an AVX-512 path on its AVX2
// path on a CPU with AVX-512: the products (gemm.c), the attention heads
// (attention.c), the row softmax (softmax.c) and EM attention (em.c), to
// time one against the other. Their values are the same bit for bit.
// (GemmEnv=avx2 keeps only the products on AVX2.)
const SIMDEnv = "PROBFORMER_SIMD"

// simdLevel is the vector width the attention-head and row-softmax
// kernels run at: 2 for AVX-512 (a CPU with AVX-512 F/VL/BW/DQ whose
// OS saves the zmm state, as for gemm.c's kernel), 1 for AVX2/FMA, 0 for
// none (the callers take their Go loops). It is decided once, on the
// first call.
var simdLevel = sync.OnceValue(func() int {
	switch {
	case hasAVX2() == 0:
		return 0
	case hasAVX512() && os.Getenv(SIMDEnv) != "avx2":
		return 2
	}
	return 1
})

// SIMDName names the vector width of the attention-head and row-softmax
// kernels: "avx512", "avx2" or "none".
func SIMDName() string { return [...]string{"none", "avx2", "avx512"}[simdLevel()] }
