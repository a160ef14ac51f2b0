//go:build cgo && !purego

package kernels

// kernels.h comes through -I${SRCDIR} and angle brackets: cgo compiles
// its probe of the C names from a file in $TMPDIR, where a quoted include
// would find a stale kernels.h first.

// #cgo CFLAGS: -O3 -I${SRCDIR}
// #cgo LDFLAGS: -lm
// #include <kernels.h>
import "C"

import (
	"os"
	"runtime"
	"sync"
	"unsafe"
)

// hasAVX2 is whether this CPU runs the AVX2/FMA kernel of gemm.c; it is
// asked once.
var hasAVX2 = sync.OnceValue(func() C.int { return C.pf_has_avx2() })

// hasAVX512 is whether this CPU and its OS run gemm.c's AVX-512 kernel.
var hasAVX512 = sync.OnceValue(func() bool { return hasAVX2() != 0 && C.pf_has_avx512() != 0 })

// GemmEnv is the environment variable that, set to "avx2" when the
// process starts, keeps float32 products on gemm.c's AVX2 kernel on a CPU
// with AVX-512 (to time one against the other: their values are the same
// bit for bit). SIMDEnv=avx2 does so too, for every kernel at once.
const GemmEnv = "PROBFORMER_GEMM"

// gemmLevel is the float32 kernel gemm.c runs: 2 for the AVX-512 packed
// kernel (a CPU with AVX-512 F/VL/BW/DQ whose OS saves the zmm state), 1
// for AVX2/FMA, 0 for portable C. It is decided once.
var gemmLevel = sync.OnceValue(func() C.int {
	if hasAVX2() == 0 {
		return 0
	}
	if hasAVX512() && os.Getenv(GemmEnv) != "avx2" && os.Getenv(SIMDEnv) != "avx2" {
		return 2
	}
	return 1
})

// GemmKernelName names the float32 kernel Gemm runs: "avx512", "avx2" or
// "portable".
func GemmKernelName() string {
	return [...]string{"portable", "avx2", "avx512"}[gemmLevel()]
}

// gemmKernel runs gemm.c's kernel: AVX2 and FMA where the CPU has them,
// portable C otherwise. Build with -tags purego for gonum's pure-Go BLAS.
// A non-nil bias [n] makes it c ← bias + α·op(a)·op(b) on every row, with
// beta ignored.
func gemmKernel[T Float](tA, tB bool, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int, bias []T) {
	gemmKernelAt(gemmLevel(), tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, bias)
}

// gemmKernelAt is gemmKernel on float32 kernel level (see gemmLevel; the
// tests run both levels of a CPU with AVX-512). float64 runs AVX2 at
// level ≥ 1.
func gemmKernelAt[T Float](level C.int, tA, tB bool, m, n, k int, alpha T, a []T, lda int, b []T, ldb int, beta T, c []T, ldc int, bias []T) {
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
		C.pf_sgemm(level, cbool(tA), cbool(tB), C.int(m), C.int(n), C.int(k), C.float(alpha),
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
		C.pf_dgemm(min(level, 1), cbool(tA), cbool(tB), C.int(m), C.int(n), C.int(k), C.double(alpha),
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

// gemmShared is the scratch of one float32 product that threads share
// (gemm.c's pf_sgemm_par): each thread's packed B, and the counter from
// which the threads take blocks, 64 bytes whose first 8 pf_claim_rows
// reads as one 8-byte count (int64s, so 8-byte aligned).
type gemmShared struct {
	ctr [8]int64
	buf []float32
}

// gemmSharedPool keeps the scratch between products: a step runs
// hundreds, some at once (ParallelFor over heads), each taking its own.
var gemmSharedPool = sync.Pool{New: func() any { return new(gemmShared) }}

// packed returns n floats of s.buf starting on a 64-byte boundary, as
// gemm.c's aligned loads of packed B need.
func (s *gemmShared) packed(n int) *C.float {
	if cap(s.buf) < n+16 {
		s.buf = make([]float32, n+16)
	}
	s.buf = s.buf[:cap(s.buf)]
	off := int((64 - uintptr(unsafe.Pointer(&s.buf[0]))%64) % 64 / 4)
	return (*C.float)(unsafe.Pointer(&s.buf[off]))
}

// gemmSplit is how a float32 product is shared between threads, or ok =
// false to run it on one. mode 0 (many rows) hands out blocks of at most
// rb rows, smaller towards the end, each thread packing all of B for
// itself; mode 1 (at most 128 rows, two or more blocks of columns) hands
// out blocks of cw columns, each thread packing only its blocks of B, or
// tiles of rb rows × cw columns when the columns make fewer than 8 blocks
// and B is read in place (the AVX-512 kernel and a plain B: no tile packs
// more than a narrow last panel), as in the weight gradients' 64×64 over
// k = 1024, whose two column blocks left one thread idle while the other
// finished the second; mode 2 (the direct path's products, n < 16 or k <
// 32, 48 rows or more) hands out blocks of rows as mode 0, each thread
// copying a transposed B for itself. Blocks are many (≈8 or more), so
// that a thread whose core is taken by another process for a while
// leaves its share to the other.
func gemmSplit(level C.int, tB bool, m, n, k int) (mode, rb, cw int, ok bool) {
	if level < 1 || m*n*k < 1<<18 {
		return 0, 0, 0, false // portable C, or too small to repay a hand-over
	}
	if n < 16 || k < 32 {
		// The direct path: blocks of rows, multiples of 24 (whole
		// blocks of its 12-, 8- and 6-row kernels), ≈8 of them.
		if m < 48 {
			return 0, 0, 0, false
		}
		return 2, max(24, m/8/24*24), 0, true
	}
	nr := 16
	if level >= 2 {
		nr = 32
	}
	cw = nr * max(1, n/(8*nr))
	colBlocks := (n + cw - 1) / cw
	switch {
	case m <= 128 && colBlocks >= 2:
		if level >= 2 && !tB && colBlocks < 8 {
			// Tiles: enough row blocks for ≈8 tiles, multiples of 12
			// rows (the 12-row micro-kernel's blocks).
			rows := (8 + colBlocks - 1) / colBlocks
			rb = (m + rows - 1) / rows
			rb = max(12, (rb+11)/12*12)
			if rb < m {
				return 1, rb, cw, true
			}
		}
		return 1, 0, cw, true
	case m >= 24:
		// Multiples of 12 rows: whole blocks of both micro-kernels (12 and 6).
		return 0, min(192, max(12, m/8/12*12)), 0, true
	}
	return 0, 0, 0, false
}

// gemmShared32 computes a float32 product on up to GOMAXPROCS threads
// taking blocks from one counter (gemm.c's pf_sgemm_par), and reports
// false, computing nothing, where gemmSplit keeps it on one thread. Its
// values are pf_sgemm's on one thread, bit for bit.
func gemmShared32(tA, tB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int, bias []float32) bool {
	level := gemmLevel()
	mode, rb, cw, ok := gemmSplit(level, tB, m, n, k)
	workers := min(runtime.GOMAXPROCS(0), 8)
	if !ok || workers < 2 {
		return false
	}
	gemmSharedAt(level, workers, mode, rb, cw, tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, bias)
	return true
}

// gemmSharedAt runs pf_sgemm_par on kernel level (1 or 2) as workers
// shares, in the given mode with blocks of at most rb rows (modes 0 and
// 2), cw columns (mode 1 with rb = 0) or tiles of rb rows × cw columns
// (mode 1), cw a multiple of the level's panel width, 16 or 32, rb of 12:
// gemmShared32's choices, or a test's. Modes 0 and 1 need n ≥ 16 and k ≥ 32, the packed
// path's products; mode 2 is for the others (the direct path's). The shares run in one cgo call (pool.c's pf_pool_sgemm):
// worker 0 on the caller, the others on workers.go's helpers waiting in
// pool.c, or all on the caller when another product holds the pool. It
// returns how many shares the helpers ran.
func gemmSharedAt(level C.int, workers, mode, rb, cw int, tA, tB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int, bias []float32) int {
	s := gemmSharedPool.Get().(*gemmShared)
	defer gemmSharedPool.Put(s)
	s.ctr = [8]int64{}
	var bp *C.float
	switch mode {
	case 2:
		bp = s.packed(workers * k * n) // a transposed B, copied by each thread
	case 0:
		nr := 16
		if level >= 2 {
			nr = 32
		}
		bp = s.packed(workers * k * ((n + nr - 1) / nr * nr)) // all of B, for each thread
	default:
		bp = s.packed(workers * 128 * cw) // KC = 128 rows of each thread's block
	}
	var biasp *C.float
	if bias != nil {
		biasp = (*C.float)(unsafe.Pointer(&bias[0]))
	}
	ap, bq, cp := (*C.float)(unsafe.Pointer(&a[0])), (*C.float)(unsafe.Pointer(&b[0])), (*C.float)(unsafe.Pointer(&c[0]))
	ctr := (*C.int)(unsafe.Pointer(&s.ctr[0]))
	nh := poolHelpers(workers)
	return int(C.pf_pool_sgemm(C.int(workers), C.int(nh), level, C.int(mode), cbool(tA), cbool(tB), C.int(m), C.int(n), C.int(k), C.float(alpha),
		ap, C.int(lda), bq, C.int(ldb), C.float(beta), cp, C.int(ldc), biasp, bp, C.int(rb), C.int(cw), ctr))
}

// gemmSharesMeetAt is gemmSharedAt's product for the tests (modes 0 and
// 2), its two shares run one after the other on the calling thread and
// meeting at row x: the counter is set as if the front had taken rows
// [0, x), so worker 1 takes rows [x, m) from the back, and then as if
// the back had taken those, so worker 0 takes [0, x) from the front.
func gemmSharesMeetAt(level C.int, mode, rb int, tA, tB bool, m, n, k int, alpha float32, a []float32, lda int,
	b []float32, ldb int, beta float32, c []float32, ldc int, bias []float32, x int) {
	s := gemmSharedPool.Get().(*gemmShared)
	defer gemmSharedPool.Put(s)
	nr := 16
	if level >= 2 {
		nr = 32
	}
	bp := s.packed(2 * k * ((n + nr - 1) / nr * nr))
	var biasp *C.float
	if bias != nil {
		biasp = (*C.float)(unsafe.Pointer(&bias[0]))
	}
	ap, bq, cp := (*C.float)(unsafe.Pointer(&a[0])), (*C.float)(unsafe.Pointer(&b[0])), (*C.float)(unsafe.Pointer(&c[0]))
	ctr := (*C.int)(unsafe.Pointer(&s.ctr[0]))
	for _, w := range []int{1, 0} {
		s.ctr = [8]int64{}
		if w == 1 {
			s.ctr[0] = int64(x) // the front's rows
		} else {
			s.ctr[0] = int64(m-x) << 32 // the back's rows
		}
		C.pf_sgemm_par(level, C.int(mode), C.int(w), cbool(tA), cbool(tB), C.int(m), C.int(n), C.int(k), C.float(alpha),
			ap, C.int(lda), bq, C.int(ldb), C.float(beta), cp, C.int(ldc), biasp, bp, C.int(rb), 0, ctr)
	}
}

// cInt is a C int, for the tests (which cannot import "C").
func cInt(v int) C.int { return C.int(v) }

// GemmParts32 computes the weight gradients of parts that share their
// input x [k×m] (linear-concat's dwᵢ = xᵀ·gᵢ, gᵢ the columns i·d to
// (i+1)·d of g [k × parts·d]) as one shared product, dw [parts × m × d]
// each part's block whole after the previous one's, and, with db [parts·d]
// given, the column sums of g (the biases' gradients) in the same pass
// over g. It reports false, computing nothing, where the part's own
// product would not take gemm.c's packed path (d < 16 or k < 32, or no
// AVX2), so the caller runs its Gemm and colSum. Each value is the one
// Gemm(true, false, m, d, k, 1, x, m, gᵢ, parts·d, 0, dwᵢ, d) and the
// column sums give, bit for bit (pf_sgemm_par's mode 3).
func GemmParts32(m, k, parts, d int, x, g, dw, db []float32) bool {
	level := gemmLevel()
	if level < 1 || d < 16 || k < 32 || m < 1 || parts < 1 || len(x) < k*m || len(g) < k*parts*d ||
		len(dw) < parts*m*d || (db != nil && len(db) < parts*d) {
		return false
	}
	AddMatMulFlops(2 * m * parts * d * k)
	workers := min(runtime.GOMAXPROCS(0), 8)
	if m*parts*d*k < 1<<18 {
		workers = 1 // too small to repay a hand-over, as gemmSplit has it
	}
	gemmPartsAt(level, workers, m, k, parts, d, x, g, dw, db)
	return true
}

// gemmPartsAt is GemmParts32 on kernel level (1 or 2) and workers
// threads (the tests run both levels and 1–3 workers); its arguments
// already checked.
func gemmPartsAt(level C.int, workers, m, k, parts, d int, x, g, dw, db []float32) {
	n := parts * d
	nr := 16
	if level >= 2 {
		nr = 32
	}
	cw := nr * max(1, d/(8*nr)) // gemmSplit's column blocks of one part
	if workers < 2 {
		// One thread: a part a block, each pass over k tiling the whole
		// part as pf_sgemm does, so x is read once a part, not once a
		// block (2-8% slower at 64 rows with blocks of 32).
		cw = (d + nr - 1) / nr * nr
	}
	if workers >= 2 {
		gemmSharedAt(level, workers, 3, d, cw, true, false, m, n, k, 1, x, m, g, n, 0, dw, d, db)
		return
	}
	s := gemmSharedPool.Get().(*gemmShared)
	defer gemmSharedPool.Put(s)
	s.ctr = [8]int64{}
	var dbp *C.float
	if db != nil {
		dbp = (*C.float)(unsafe.Pointer(&db[0]))
	}
	C.pf_sgemm_par(level, 3, 0, 1, 0, C.int(m), C.int(n), C.int(k), 1, (*C.float)(unsafe.Pointer(&x[0])), C.int(m),
		(*C.float)(unsafe.Pointer(&g[0])), C.int(n), 0, (*C.float)(unsafe.Pointer(&dw[0])), C.int(d), dbp,
		s.packed(128*cw), C.int(d), C.int(cw), (*C.int)(unsafe.Pointer(&s.ctr[0])))
}
