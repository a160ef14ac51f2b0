package graph

import (
	"fmt"
	"testing"
)

// TestSoftplusShiftIsComposed: SoftplusShift's values and gradient are
// AddScalar(Softplus(x), c)'s, bit for bit, in float32 and float64, at
// values on both sides of every cut-off of Gorgonia's softplus and
// sigmoid, with the gradient of a loss that weighs each element
// differently and a second consumer of the output (so the incoming
// gradient is a sum).
func TestSoftplusShiftIsComposed(t *testing.T) {
	xs := []float64{-800, -710, -708.5, -200, -104, -103, -102.5, -89, -88, -87.5, -30, -3.25, -1e-3, 0, 1e-7, 0.5,
		2.75, 13.9, 14, 14.1, 15, 15.5, 16, 16.5, 19, 19.5, 25, 300}
	w := make([]float64, len(xs))
	for i := range w {
		w[i] = 0.37*float64(i) - 4.1
	}
	for _, dt := range []DType{Float32, Float64} {
		for _, c := range []float64{1e-6, 1e-3, 0.5} {
			build := func(fused bool) BuildFunc {
				return func(b *Builder) error {
					x := b.Param("x", []int{len(xs)}, Constant(0))
					var y *Node
					if fused {
						y = SoftplusShift(x, c)
					} else {
						y = AddScalar(Softplus(x), c)
					}
					b.Output("y", y)
					b.SetLoss(Add(Sum(Mul(y, b.Constant("w", []int{len(w)}, w))), Sum(Square(y))))
					return nil
				}
			}
			run := func(fused bool) ([]float64, map[string][]float64) {
				ps := NewParams(dt, 1)
				p, err := Compile(ps, build(fused), true)
				if err != nil {
					t.Fatal(err)
				}
				if err := ps.Lookup("x").SetValues(xs); err != nil {
					t.Fatal(err)
				}
				if err := p.Run(); err != nil {
					t.Fatal(err)
				}
				y, _, err := p.Output("y")
				if err != nil {
					t.Fatal(err)
				}
				g, err := p.Gradients()
				if err != nil {
					t.Fatal(err)
				}
				return y, g
			}
			wantY, wantG := run(false)
			gotY, gotG := run(true)
			label := fmt.Sprintf("%v c %g", dt, c)
			expectSameGradients(t, label+" output", map[string][]float64{"y": gotY}, map[string][]float64{"y": wantY})
			expectSameGradients(t, label, gotG, wantG)
		}
	}
}

// TestSoftplusShiftGradient checks SoftplusShift's gradient against
// finite differences in float64.
func TestSoftplusShiftGradient(t *testing.T) {
	fn := func(b *Builder) *Node {
		return Sum(Square(SoftplusShift(b.Param("x", []int{3, 4}, Normal(2)), 0.25)))
	}
	if _, err := CheckGradients(NewParams(Float64, 5), fn, GradCheckOptions{Seed: 2}); err != nil {
		t.Fatal(err)
	}
}
