package graph

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/probformer/probformer/graph/graphtest"
)

// reluDropGraph is Dropout(LinearReLU(x, w, b)) over parameters, with a
// fixed mask: composed of LinearReLU and the dropout product, or fused.
func reluDropGraph(b *Builder, rows, din, dout int, bias, fused bool, drop []float64) *Node {
	x, w := b.Param("x", []int{rows, 3, din}, Normal(1)), b.Param("w", []int{din, dout}, Normal(1))
	var bn *Node
	if bias {
		bn = b.Param("b", []int{dout}, Normal(1))
	}
	mask := b.Constant("drop", []int{rows, 3, dout}, drop)
	if !fused {
		return apply(mulKernel{constB: true}, LinearReLU(x, w, bn), mask)
	}
	if bias {
		return apply(linearKernel{bias: true, relu: true, dropout: true}, x, w, bn, mask)
	}
	return apply(linearKernel{relu: true, dropout: true}, x, w, mask)
}

func reluDropMask(n int, seed uint64) []float64 {
	rng := rand.New(rand.NewPCG(seed, 3))
	d := make([]float64, n)
	for i := range d {
		if rng.Float64() > 0.3 {
			d[i] = 1 / 0.7
		}
	}
	return d
}

// TestLinearReLUDropoutIsDropoutOfLinearReLU: the fused op gives the
// composed op's output and gradients, to 1e-12 in float64 and 1e-6 in
// float32, with and without bias, at sizes of the C paths and not.
func TestLinearReLUDropoutIsDropoutOfLinearReLU(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ rows, din, dout int }{{4, 5, 7}, {64, 64, 256}} {
		drop := reluDropMask(c.rows*3*c.dout, uint64(c.dout))
		r := Normal(1)(rand.New(rand.NewPCG(9, 9)), []int{c.rows * 3 * c.dout})
		for _, bias := range []bool{true, false} {
			for _, dt := range []DType{Float64, Float32} {
				run := func(fused bool) graphtest.Result {
					p, err := Compile(NewParams(dt, 6), func(b *Builder) error {
						y := reluDropGraph(b, c.rows, c.din, c.dout, bias, fused, drop)
						b.Output("y", y)
						b.SetLoss(Sum(Mul(y, b.Constant("r", []int{c.rows, 3, c.dout}, r))))
						return nil
					}, true)
					if err != nil {
						t.Fatal(err)
					}
					return graphtest.Run(t, p, "y")
				}
				tol := 1e-12
				if dt == Float32 {
					tol = 1e-6
				}
				graphtest.ExpectRunsClose(t, fmt.Sprintf("%+v bias=%v %v", c, bias, dt), run(true), run(false), tol, nil)
			}
		}
	}
}

// TestLinearReLUDropoutGradients: float64 finite differences.
func TestLinearReLUDropoutGradients(t *testing.T) {
	t.Parallel()
	drop := reluDropMask(2*3*5, 1)
	for i, bias := range []bool{true, false} {
		fn := func(b *Builder) *Node { return reluDropGraph(b, 2, 4, 5, bias, true, drop) }
		if _, err := CheckGradients(NewParams(Float64, uint64(i+70)), fn, GradCheckOptions{Seed: uint64(i)}); err != nil {
			t.Fatalf("bias=%v: %v", bias, err)
		}
	}
}

// TestLinearReLUDropoutMask: a training graph declares the mask input of
// the output's shape; an evaluation graph is LinearReLU and has none.
func TestLinearReLUDropoutMask(t *testing.T) {
	t.Parallel()
	for _, train := range []bool{true, false} {
		p, err := Compile(NewParams(Float32, 1), func(b *Builder) error {
			y := b.LinearReLUDropout("ff.drop", b.Input("x", 2, 3, 4), b.Param("w", []int{4, 6}, Normal(1)), b.Param("b", []int{6}, Zeros), 0.5)
			b.Output("y", y)
			b.SetLoss(Sum(y))
			return nil
		}, train)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Feed("ff.drop", make([]float64, 36)); (err == nil) != train {
			t.Fatalf("train=%v: feeding the mask: %v", train, err)
		}
	}
}
