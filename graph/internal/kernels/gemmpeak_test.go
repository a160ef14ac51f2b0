package kernels

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// BenchmarkGemmPeak times the float32 product at 2048³ on both threads,
// the machine's sgemm peak that make bench sets a step's rate beside when
// ../shared/bench/gemm_ref.py (OpenBLAS) cannot run. It reports the rate
// of the fastest run, as gemm_ref.py does.
func BenchmarkGemmPeak(b *testing.B) {
	const n = 2048
	rng := rand.New(rand.NewPCG(1, 3))
	a := to32(normal(1)(rng, []int{n * n}))
	bb := to32(normal(1)(rng, []int{n * n}))
	c := make([]float32, n*n)
	runs := make([]time.Duration, b.N)
	for i := range b.N {
		t0 := time.Now()
		Gemm(false, false, n, n, n, 1, a, n, bb, n, 0, c, n)
		runs[i] = time.Since(t0)
	}
	slices.Sort(runs)
	b.ReportMetric(2*n*n*n/runs[0].Seconds()/1e9, "best-GFLOP/s")
}

// TestMatMulFlopsCounts: a product adds its 2·m·n·k to MatMulFlops.
func TestMatMulFlopsCounts(t *testing.T) {
	a := make([]float32, 6*5)
	b := make([]float32, 5*7)
	c := make([]float32, 6*7)
	before := MatMulFlops()
	Gemm(false, false, 6, 7, 5, 1, a, 5, b, 7, 0, c, 7)
	if got := MatMulFlops() - before; got != 2*6*7*5 {
		t.Fatalf("MatMulFlops grew by %d for a 6×5·5×7 product, want %d", got, 2*6*7*5)
	}
}
