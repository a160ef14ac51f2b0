package kernels

import "sync/atomic"

// matMulFlops counts the floating-point operations of the matrix
// products this process has run: 2·m·n·k for each Gemm and for each
// product inside an attention head's forward and backward pass. It is
// package-level because those products run deep under Gorgonia's tape
// machine, where no per-run value reaches them. It only grows, and no
// computation reads it, so results never depend on it; one atomic add per
// product or head costs nothing next to the product.
var matMulFlops atomic.Int64

// AddMatMulFlops adds n floating-point operations to MatMulFlops: for
// callers whose products run in a kernel other than Gemm (attention.c's
// heads), counted once per op.
func AddMatMulFlops(n int) {
	if n != 0 {
		matMulFlops.Add(int64(n))
	}
}

// MatMulFlops returns the floating-point operations of every matrix
// product run so far in this process (see matMulFlops). The difference
// between two calls, divided by the time between them, is the rate a
// training step reaches, the figure make bench sets beside the machine's
// sgemm peak.
func MatMulFlops() int64 { return matMulFlops.Load() }
