package graph

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"

	"github.com/probformer/probformer/graph/internal/kernels"
)

// maskProgram returns a program holding only dropout masks of the given
// dtype and shapes, each with drop probability p, named drop.0, drop.1, ….
func maskProgram(dt DType, p float64, shapes ...[]int) *Program {
	prog := &Program{inputs: map[string]*input{}}
	for i, s := range shapes {
		name := fmt.Sprintf("drop.%d", i)
		prog.inputs[name] = &input{value: newDense(dt, s, nil)}
		prog.dropouts = append(prog.dropouts, dropoutMask{name: name, p: p})
	}
	return prog
}

// masks returns copies of prog's masks as float64, in build order.
func masks(prog *Program) [][]float64 {
	var out [][]float64
	for _, d := range prog.dropouts {
		out = append(out, toFloat64(prog.inputs[d.name].value.Data()))
	}
	return out
}

// TestDrawDropoutValues: over 10⁶ units the kept fraction is within 5σ of
// 1−p, kept units are exactly 1/(1−p) in the mask's dtype, dropped ones 0.
func TestDrawDropoutValues(t *testing.T) {
	t.Parallel()
	const n = 1_000_000
	for _, tc := range []struct {
		dt DType
		p  float64
	}{{Float32, 0.1}, {Float32, 0.5}, {Float64, 0.1}, {Float64, 0.5}} {
		prog := maskProgram(tc.dt, tc.p, []int{1000, 600}, []int{400, 1000})
		prog.DrawDropout(rand.New(rand.NewPCG(5, 6)))
		scale := 1 / (1 - tc.p)
		if tc.dt == Float32 {
			scale = float64(float32(scale))
		}
		kept := 0
		for _, m := range masks(prog) {
			for _, v := range m {
				switch v {
				case scale:
					kept++
				case 0:
				default:
					t.Fatalf("%v p=%g: unit %v, want 0 or %v", tc.dt, tc.p, v, scale)
				}
			}
		}
		sigma := math.Sqrt(tc.p * (1 - tc.p) / n)
		if frac := float64(kept) / n; math.Abs(frac-(1-tc.p)) > 5*sigma {
			t.Fatalf("%v p=%g: kept %v, want %v ± %v", tc.dt, tc.p, frac, 1-tc.p, 5*sigma)
		}
	}
}

// TestDrawDropoutStreams: each mask takes one draw of rng and is the
// stream of that seed; two masks of one program differ; the same seed
// gives the same masks; GOMAXPROCS 1 and 2 give the same masks.
func TestDrawDropoutStreams(t *testing.T) {
	for _, dt := range []DType{Float32, Float64} {
		shapes := [][]int{{300, 500}, {300, 500}, {7, 3}, {1}, {257, 129}}
		draw := func(procs int) [][]float64 {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
			prog := maskProgram(dt, 0.3, shapes...)
			rng := rand.New(rand.NewPCG(7, 8))
			prog.DrawDropout(rng)
			after := rand.New(rand.NewPCG(7, 8))
			for range shapes {
				after.Uint64()
			}
			if rng.Uint64() != after.Uint64() {
				t.Fatalf("%v: DrawDropout took other than one draw per mask", dt)
			}
			return masks(prog)
		}
		one, two, again := draw(1), draw(2), draw(2)
		ref := rand.New(rand.NewPCG(7, 8))
		scale := 1 / 0.7
		if dt == Float32 {
			scale = float64(float32(scale))
		}
		for i, m := range two {
			if !slices.Equal(m, one[i]) || !slices.Equal(m, again[i]) {
				t.Fatalf("%v: mask %d depends on GOMAXPROCS or the run", dt, i)
			}
			want := make([]float64, len(m))
			kernels.FillMaskGo(want, ref.Uint64(), 0, uint64(math.Round(0.7*(1<<32))), scale)
			if !slices.Equal(m, want) {
				t.Fatalf("%v: mask %d is not the stream of its seed", dt, i)
			}
		}
		if slices.Equal(two[0], two[1]) {
			t.Fatalf("%v: two masks of one program are equal", dt)
		}
	}
}

// BenchmarkDrawDropout draws the masks of an English→French Transformer
// step: a dozen float32 masks [212, 512], 1.3 M units in all.
func BenchmarkDrawDropout(b *testing.B) {
	shapes := make([][]int, 12)
	for i := range shapes {
		shapes[i] = []int{212, 512}
	}
	prog := maskProgram(Float32, 0.1, shapes...)
	rng := rand.New(rand.NewPCG(1, 2))
	b.SetBytes(12 * 212 * 512 * 4)
	for b.Loop() {
		prog.DrawDropout(rng)
	}
}
