//go:build cgo && !purego

package kernels

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkEMPassesStep times the EM passes of a step of the width-32
// Set Transformer (BenchmarkEMAttentionRatioDim32's EM model: batch 32,
// 4 heads of 8, T_k = 1): its five layers' forward passes in order, then
// their backward passes in reverse, each layer's problems one pass
// (EMForwardPass32, EMBackwardPass32). So each layer's traces are
// written, then read back after the other layers' passes, as in a
// training step, where a benchmark of one problem finds them in L1.
// ns/problem is a forward and a backward, over the 640 problems.
func BenchmarkEMPassesStep(b *testing.B) {
	if !EMCAvailable() {
		b.Skip("no em.c on this machine")
	}
	const batch, heads, d = 32, 4, 8
	shapes := [][2]int{{16, 50}, {50, 16}, {16, 50}, {50, 16}, {1, 50}} // ISAB, ISAB, PMA: N queries, M keys
	s := EMSpec{KeyIters: 1}
	rng := rand.New(rand.NewPCG(5, 8))
	w := heads * d
	var passes []*EMPass32
	problems := 0
	for _, z := range shapes {
		n, m := z[0], z[1]
		p := &EMPass32{Spec: s, B: batch, H: heads, N: n, M: m, D: d, Dv: d,
			Q: to32(normal(0.5)(rng, []int{batch * n * w})), Ldq: w, QB: n * w, QH: d,
			Xi0: to32(normal(0.5)(rng, []int{batch * m * w})), Ldk: w, KB: m * w, KH: d,
			Mu0: to32(normal(0.5)(rng, []int{batch * m * w})), Ldv: w, VB: m * w, VH: d,
			Trace: make([]float32, batch*heads*EMTraceSize(s, n, m, d, d)),
			Out:   make([]float32, batch*n*w), Ldo: w, OB: n * w, OH: d,
			Seed: to32(normal(1)(rng, []int{batch * n * w})), Ldr: w, SB: n * w, SH: d,
			GQ: make([]float32, batch*n*w), GLdq: w, GQB: n * w, GQH: d,
			GXi0: make([]float32, batch*m*w), GLdk: w, GKB: m * w, GKH: d,
			GMu0: make([]float32, batch*m*w), GLdv: w, GVB: m * w, GVH: d,
			GH: make([]EMHyper[float32], batch*heads)}
		for _, i := range []int{HAlpha0, HBeta0, HThetaXi} {
			p.Hyper[i] = []float32{1, 1, 1, 1}
		}
		passes = append(passes, p)
		problems += batch * heads
	}
	for _, workers := range []int{1, 2} {
		b.Run(fmt.Sprintf("workers-%d", workers), func(b *testing.B) {
			for range b.N {
				for _, p := range passes {
					if !EMForwardPass32(p, workers) {
						b.Fatal("the pass does not fit")
					}
				}
				for i := len(passes) - 1; i >= 0; i-- {
					if !EMBackwardPass32(passes[i], workers) {
						b.Fatal("the backward pass does not fit")
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(problems), "ns/problem")
		})
	}
}
