package graph

import (
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/probformer/probformer/graph/internal/kernels"
)

// BenchmarkEMAttention times one forward and backward pass of an EM
// attention op in float32 the size of a Set Transformer block's: B = 64,
// H = 4, N = 32 query units, M = 16 memory units, d = dv = 16, with T_k
// key iterations (α adapted when "alpha") and T_v value iterations, next
// to the fused softmax attention op of the same size. The "go" rows run
// the Go path that em.c replaces.
func BenchmarkEMAttention(b *testing.B) {
	const batch, heads, n, m, d = 64, 4, 32, 16, 16
	k1 := EMSpec{KeyIters: 1, Heads: heads}
	k2 := EMSpec{KeyIters: 2, ValueIters: 1, AdaptAlpha: true, Heads: heads}
	for _, path := range []struct {
		name    string
		spec    EMSpec
		c       bool
		softmax bool
	}{{"softmax", k1, true, true}, {"em-k1-v0", k1, true, false}, {"em-k2-alpha-v1", k2, true, false}, {"em-k2-alpha-v1-go", k2, false, false}} {
		spec := path.spec
		b.Run(path.name, func(b *testing.B) {
			defer func(u bool) { kernels.EMUseC = u }(kernels.EMUseC)
			kernels.EMUseC = path.c
			rng := rand.New(rand.NewPCG(1, 2))
			prog, err := Compile(NewParams(Float32, 1), func(bd *Builder) error {
				hp := func(name string, c float64, use bool) *Node {
					if !use {
						return nil
					}
					return bd.Param(name, []int{heads}, Constant(c))
				}
				q := bd.Param("q", []int{batch, n, heads * d}, Normal(0.5))
				k := bd.Param("k", []int{batch, m, heads * d}, Normal(0.5))
				v := bd.Param("v", []int{batch, m, heads * d}, Normal(0.5))
				var res EMResult
				if path.softmax {
					res.Readout = Attention(q, k, v, nil, heads, false)
				} else {
					res = EMAttention(spec, EMInputs{Q: q, K: k, V: v,
						Alpha0: hp("alpha0", 1, true), Beta0: hp("beta0", 1, true), ThetaXi: hp("theta_xi", 1, true),
						AAlphaExtra: hp("a_alpha", 1, spec.AdaptAlpha), BAlpha: hp("b_alpha", 1, spec.AdaptAlpha),
					}, EMReadout)
				}
				coef := make([]float64, batch*n*heads*d)
				for i := range coef {
					coef[i] = rng.NormFloat64()
				}
				bd.SetLoss(Sum(Mul(res.Readout, bd.Constant("coef", Shape(res.Readout), coef))))
				return nil
			}, true)
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for range b.N {
				if err := prog.Run(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkEMProblem times one problem (one example and head) of EM
// attention, forward and backward, on one thread, at the shapes of the
// maxnorm model's blocks (d = dv = 16): an ISAB's inducing points
// attending to the set (N = 16, M = 50), the set attending to them
// (N = 50, M = 16), and PMA's seed (N = 1, M = 50), and at the heads of 8
// of the width-32 model ("d8" rows); "go" rows run the Go path.
func BenchmarkEMProblem(b *testing.B) {
	specs := []struct {
		name string
		spec EMSpec
	}{
		{"k1-v0", EMSpec{KeyIters: 1, Heads: 1}},
		{"k2-alpha-v1", EMSpec{KeyIters: 2, ValueIters: 1, AdaptAlpha: true, Heads: 1}},
	}
	for _, z := range [][3]int{{16, 50, 16}, {50, 16, 16}, {1, 50, 16}, {16, 50, 8}, {50, 16, 8}, {1, 50, 8}} {
		for _, sp := range specs {
			for _, useC := range []bool{true, false} {
				name := fmt.Sprintf("%s/n%dm%d", sp.name, z[0], z[1])
				if z[2] != 16 {
					name += fmt.Sprintf("d%d", z[2])
				}
				if !useC {
					name += "-go"
				}
				b.Run(name, func(b *testing.B) {
					defer func(u bool) { kernels.EMUseC = u }(kernels.EMUseC)
					kernels.EMUseC = useC
					benchEMProblem(b, sp.spec, z[0], z[1], z[2], z[2])
				})
			}
		}
	}
}

func benchEMProblem(b *testing.B, spec EMSpec, n, m, d, dv int) {
	s := spec.kernel()
	rng := rand.New(rand.NewPCG(3, 4))
	rnd := func(k int, scale float32) []float32 {
		x := make([]float32, k)
		for i := range x {
			x[i] = scale * float32(rng.NormFloat64())
		}
		return x
	}
	p := &kernels.EMProblem[float32]{N: n, M: m, D: d, Dv: dv, Q: rnd(n*d, 0.5), Xi0: rnd(m*d, 0.5), Mu0: rnd(m*dv, 0.5),
		Ldq: d, Ldk: d, Ldv: dv, RealMemory: float32(m)}
	for i := range p.H {
		p.H[i] = 1
	}
	buf := make([]float32, kernels.EMTraceSize(s, n, m, d, dv))
	sc := make([]float32, kernels.EMScratchSize(n, m))
	bsc := make([]float32, kernels.EMBackScratchSize(n, m, d, dv))
	seed := &kernels.EMSeeds[float32]{Readout: rnd(n*dv, 1), Ldr: dv}
	var h kernels.EMHyper[float32]
	g := &kernels.EMGrads[float32]{Q: make([]float32, n*d), Xi0: make([]float32, m*d), Mu0: make([]float32, m*dv),
		Ldq: d, Ldk: d, Ldv: dv, H: &h}
	tr, bs := kernels.CutTrace(s, n, m, d, dv, buf), kernels.CutBackScratch[float32](n, m, d, dv, bsc)
	// EM_BENCH_ALONE=1 leaves the yardstick out, for profiles of em.c;
	// EM_BENCH_VS=avx2 makes em.c's AVX2 build the yardstick of its
	// AVX-512 build.
	useC := kernels.EMUseC && os.Getenv("EM_BENCH_ALONE") == ""
	vsAVX2 := useC && os.Getenv("EM_BENCH_VS") == "avx2" && kernels.EMAVX512()
	var tc, tg time.Duration
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		kernels.EMForward(s, p, tr, sc)
		kernels.EMBackward(s, p, tr, seed, g, bs)
		if useC {
			// the Go path (or the AVX2 build) alternating with it, as a
			// yardstick that drifts with the machine's speed as em.c does
			mid := time.Now()
			if vsAVX2 {
				kernels.EMUseAVX512 = false
			} else {
				kernels.EMUseC = false
			}
			kernels.EMForward(s, p, tr, sc)
			kernels.EMBackward(s, p, tr, seed, g, bs)
			kernels.EMUseC, kernels.EMUseAVX512 = true, true
			tc += mid.Sub(start)
			tg += time.Since(mid)
		}
	}
	if useC {
		b.ReportMetric(float64(tc.Nanoseconds())/float64(b.N), "ns-c")
		if vsAVX2 {
			b.ReportMetric(float64(tc)/float64(tg), "x-avx2")
		} else {
			b.ReportMetric(float64(tc)/float64(tg), "x-go")
		}
	}
}
