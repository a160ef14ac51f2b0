package graph

import "github.com/probformer/probformer/graph/internal/kernels"

// MatMulFlops returns the floating-point operations of every float32 or
// float64 matrix product the fused ops have run in this process so far:
// 2·m·n·k per product, the products inside each attention head included.
// Benchmarks divide its growth over a step by the step's time to report
// GFLOP/s, the rate make bench sets beside the machine's sgemm peak.
// Gorgonia's own ops (those graph does not replace) are not counted.
func MatMulFlops() int64 { return kernels.MatMulFlops() }
