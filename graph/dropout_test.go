package graph

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
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

// TestSplitMix64 pins the stream's hash to SplitMix64's published outputs
// for seed 1234567: h_j = SplitMix64(s + (j+1)·γ) is its (j+1)-th output.
func TestSplitMix64(t *testing.T) {
	want := []uint64{6457827717110365317, 3203168211198807973, 9817491932198370423, 4593380528125082431, 16408922859458223821}
	for j, w := range want {
		if got := splitMix64(1234567 + uint64(j+1)*maskGamma); got != w {
			t.Fatalf("output %d: %d, want %d", j+1, got, w)
		}
	}
	// Units 0 and 1 of the stream are the halves of the first output.
	m := make([]float64, 2)
	fillMaskGo(m, 1234567, 0, 1<<31, 1)
	kept := func(u uint64) float64 {
		if u < 1<<31 {
			return 1
		}
		return 0
	}
	if h := want[0]; m[0] != kept(h&0xFFFFFFFF) || m[1] != kept(h>>32) {
		t.Fatalf("units %v from output %#x", m, h)
	}
}

// TestMaskKernelsMatchGo: dropout.c's kernels (portable and AVX2) give
// exactly fillMaskGo's masks, for odd and even starts, lengths off the
// 8-unit groups, and thresholds up to 2³² (p → 0).
func TestMaskKernelsMatchGo(t *testing.T) {
	kernels := append(maskKernels(), maskKernel{"fillMask",
		fillMask[float32], fillMask[float64]})
	const seed = 0xDEADBEEFCAFEF00D
	for _, k := range kernels {
		for _, thr := range []uint64{0, 1, 1 << 31, uint64(math.Round(0.9 * (1 << 32))), 1<<32 - 1, 1 << 32} {
			for _, first := range []int{0, 1, 2, 7, 8, 12345} {
				for _, n := range []int{0, 1, 2, 3, 7, 8, 9, 15, 16, 17, 1001} {
					w32, g32 := make([]float32, n), make([]float32, n)
					fillMaskGo(w32, seed, first, thr, float32(1/0.9))
					k.f32(g32, seed, first, thr, float32(1/0.9))
					w64, g64 := make([]float64, n), make([]float64, n)
					fillMaskGo(w64, seed, first, thr, 1/0.9)
					k.f64(g64, seed, first, thr, 1/0.9)
					for i := range n {
						if math.Float32bits(g32[i]) != math.Float32bits(w32[i]) || math.Float64bits(g64[i]) != math.Float64bits(w64[i]) {
							t.Fatalf("%s thr %d first %d n %d: unit %d is %v/%v, Go %v/%v",
								k.name, thr, first, n, i, g32[i], g64[i], w32[i], w64[i])
						}
					}
				}
			}
		}
	}
}

// TestMaskStreamSplits: filling a mask piece by piece, at any cut points,
// gives the mask filled whole — what lets DrawDropout split it over cores.
func TestMaskStreamSplits(t *testing.T) {
	const n, seed, thr = 5000, 42, 1 << 31
	whole := make([]float32, n)
	fillMask(whole, seed, 0, thr, 2)
	rng := rand.New(rand.NewPCG(3, 4))
	for range 20 {
		pieces := make([]float32, n)
		for a := 0; a < n; {
			b := min(n, a+1+rng.IntN(700))
			fillMask(pieces[a:b], seed, a, thr, 2)
			a = b
		}
		if !slices.Equal(pieces, whole) {
			t.Fatal("piecewise fill differs from the whole")
		}
	}
}

// TestDrawDropoutValues: over 10⁶ units the kept fraction is within 5σ of
// 1−p, kept units are exactly 1/(1−p) in the mask's dtype, dropped ones 0.
func TestDrawDropoutValues(t *testing.T) {
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
			fillMaskGo(want, ref.Uint64(), 0, uint64(math.Round(0.7*(1<<32))), scale)
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
