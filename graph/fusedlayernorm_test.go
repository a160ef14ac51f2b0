package graph

import (
	"fmt"
	"github.com/probformer/probformer/graph/graphtest"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/probformer/probformer/graph/internal/kernels"
)

// TestLayerNormFloat32MatchesFloat64: the float32 layer norm (layernorm.c
// where the build and CPU have it, for rows a multiple of 8 long; the Go
// loops otherwise) agrees with the float64 one in value and in every
// gradient, over two runs of one program (the second reusing buffers).
func TestLayerNormFloat32MatchesFloat64(t *testing.T) {
	t.Parallel()
	for _, d := range []int{8, 64, 12} {
		const rows = 37
		rng := rand.New(rand.NewPCG(uint64(d), 1))
		fn := func(b *Builder) error {
			x := b.Input("x", rows, d)
			y := LayerNorm(x, b.Param("g", []int{d}, Normal(1)), b.Param("b", []int{d}, Normal(1)), 1e-5)
			y = LayerNorm(Linear(y, b.Param("w", []int{d, d}, Glorot), nil), b.Param("g2", []int{d}, Ones), b.Param("b2", []int{d}, Zeros), 1e-5)
			b.Output("y", y)
			b.SetLoss(Mean(Square(Sub(y, b.Input("t", rows, d)))))
			return nil
		}
		progs := compileBothDTypes(t, fn, 9)
		for run := range 2 {
			x, tgt := make([]float64, rows*d), make([]float64, rows*d)
			for i := range x {
				x[i] = rng.NormFloat64()*3 + 1
				tgt[i] = rng.NormFloat64()
			}
			expectFloat32MatchesFloat64(t, progs, map[string][]float64{"x": x, "t": tgt}, fmt.Sprintf("d=%d run %d", d, run))
		}
	}
}

// expectFloat32MatchesFloat64 feeds the float32 and the float64 program
// the same inputs, runs both, and checks that output "y" agrees to 1e-5
// and every gradient to 1e-4 (relative norms).
// compileBothDTypes compiles fn as a training program in float32 and in
// float64, with parameters drawn from seed, for expectFloat32MatchesFloat64.
func compileBothDTypes(t *testing.T, fn BuildFunc, seed uint64) map[DType]*Program {
	t.Helper()
	progs := map[DType]*Program{}
	for _, dt := range []DType{Float32, Float64} {
		p, err := Compile(NewParams(dt, seed), fn, true)
		if err != nil {
			t.Fatal(err)
		}
		progs[dt] = p
	}
	return progs
}

func expectFloat32MatchesFloat64(t *testing.T, progs map[DType]*Program, feeds map[string][]float64, what string) {
	t.Helper()
	runs := map[DType]graphtest.Result{}
	for dt, p := range progs {
		for name, v := range feeds {
			if p.HasInput(name) {
				if err := p.Feed(name, v); err != nil {
					t.Fatal(err)
				}
			}
		}
		runs[dt] = graphtest.Run(t, p, "y")
	}
	outs := map[DType][]float64{Float32: runs[Float32].Out["y"], Float64: runs[Float64].Out["y"]}
	grads := map[DType]map[string][]float64{Float32: runs[Float32].Grads, Float64: runs[Float64].Grads}
	if e := graphtest.RelDiff(outs[Float32], outs[Float64]); e > 1e-5 {
		t.Fatalf("%s: output rel diff %g", what, e)
	}
	for name, g64 := range grads[Float64] {
		if e := graphtest.RelDiff(grads[Float32][name], g64); e > 1e-4 {
			t.Fatalf("%s: gradient of %s rel diff %g", what, name, e)
		}
	}
}

// TestLayerNormBwdRowsSplit: the float32 backward over two halves of the
// rows gives the same bits with one core or two, and matches the
// one-pass kernel to float32 rounding.
func TestLayerNormBwdRowsSplit(t *testing.T) {
	const rows, d = 512, 64
	rng := rand.New(rand.NewPCG(5, 5))
	x := to32(Normal(1)(rng, []int{rows * d}))
	gam := to32(Normal(1)(rng, []int{d}))
	bet := to32(Normal(1)(rng, []int{d}))
	gOut := to32(Normal(1)(rng, []int{rows * d}))
	y := make([]float32, rows*d)
	mean, rstd := make([]float32, rows), make([]float32, rows)
	if !layerNormFwdRows32(x, gam, bet, y, 1e-5, mean, rstd) {
		t.Skip("no AVX2 layer norm kernel")
	}
	run := func(procs int) []float32 {
		prev := runtime.GOMAXPROCS(procs)
		defer runtime.GOMAXPROCS(prev)
		out := make([]float32, rows*d+2*d)
		if !layerNormBwdRows32(x, gam, gOut, nil, mean, rstd, out[:rows*d], out[rows*d:rows*d+d], out[rows*d+d:]) {
			t.Fatal("split backward declined")
		}
		return out
	}
	one, two := run(1), run(2)
	whole := make([]float32, rows*d+2*d)
	kernels.LayerNormBwd32(x, gam, gOut, nil, mean, rstd, whole[:rows*d], whole[rows*d:rows*d+d], whole[rows*d+d:])
	for i := range one {
		if one[i] != two[i] {
			t.Fatalf("element %d: %v with one core, %v with two", i, one[i], two[i])
		}
		if diff := math.Abs(float64(one[i] - whole[i])); diff > 1e-4*(1+math.Abs(float64(whole[i]))) {
			t.Fatalf("element %d: %v split, %v in one pass", i, one[i], whole[i])
		}
	}
}
