package optim

import (
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"

	"github.com/probformer/probformer/graph"
)

// wideModel is a float32 loss whose parameters span several of Adam's
// chunks: Σ (w ⊙ c)² + Σ u², gradients 2c²⊙w and 2u.
func wideModel(b *graph.Builder) error {
	normal := func(r *rand.Rand, s []int) []float64 {
		n := 1
		for _, d := range s {
			n *= d
		}
		v := make([]float64, n)
		for i := range v {
			v[i] = r.NormFloat64()
		}
		return v
	}
	w := b.Param("w", []int{96, 100}, normal)
	u := b.Param("u", []int{3000}, normal)
	cs := make([]float64, 96*100)
	for i := range cs {
		cs[i] = float64(i%17)/8 - 1
	}
	c := b.Constant("c", []int{96, 100}, cs)
	b.SetLoss(graph.Add(graph.Sum(graph.Square(graph.Mul(w, c))), graph.Sum(graph.Square(u))))
	return nil
}

// TestAdamNormOverlapSameBits checks that the update without clipping,
// whose norm one goroutine sums while the others update, gives the
// norms and weights of the path that sums the norm first (a clip too
// large to act), bit for bit, on one thread and on two.
func TestAdamNormOverlapSameBits(t *testing.T) {
	run := func(procs int, clip float64) ([]float64, []float64) {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
		ps := graph.NewParams(graph.Float32, 7)
		prog, err := graph.Compile(ps, wideModel, true)
		if err != nil {
			t.Fatal(err)
		}
		opt := NewAdam(0.01)
		opt.WeightDecay = 0.1
		opt.ClipNorm = clip
		var norms []float64
		for range 4 {
			if err := prog.Run(); err != nil {
				t.Fatal(err)
			}
			norm, err := opt.Step(prog)
			if err != nil {
				t.Fatal(err)
			}
			norms = append(norms, norm)
		}
		return norms, append(ps.Lookup("w").Values(), ps.Lookup("u").Values()...)
	}
	refN, refW := run(1, 1e300)
	for _, procs := range []int{1, 2, 3} {
		for _, clip := range []float64{0, 1e300} {
			n, w := run(procs, clip)
			for i := range refN {
				if math.Float64bits(n[i]) != math.Float64bits(refN[i]) {
					t.Fatalf("GOMAXPROCS %d, clip %g: norm %d is %v, want %v", procs, clip, i, n[i], refN[i])
				}
			}
			for i := range refW {
				if math.Float64bits(w[i]) != math.Float64bits(refW[i]) {
					t.Fatalf("GOMAXPROCS %d, clip %g: weight %d is %v, want %v", procs, clip, i, w[i], refW[i])
				}
			}
		}
	}
}

// TestAdamRefusesNaNGradient32 is TestAdamRefusesNaNGradient in float32,
// where the update without clipping checks the gradients with Finite32.
func TestAdamRefusesNaNGradient32(t *testing.T) {
	ps := graph.NewParams(graph.Float32, 1)
	prog, err := graph.Compile(ps, func(b *graph.Builder) error {
		u := b.Param("u", []int{2}, graph.Ones)
		w := b.Param("w", []int{2}, graph.Ones)
		b.SetLoss(graph.Add(graph.Sum(graph.Square(u)), graph.Sum(graph.Sqrt(graph.Scale(w, -1)))))
		return nil
	}, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := prog.Run(); err != nil {
		t.Fatal(err)
	}
	norm, err := NewAdam(0.1).Step(prog)
	if err == nil || !strings.Contains(err.Error(), "gradient of w ") || norm != 0 {
		t.Fatalf("want an error naming w and norm 0, got %v, %v", err, norm)
	}
	for _, name := range []string{"u", "w"} {
		if v := ps.Lookup(name).Values(); v[0] != 1 || v[1] != 1 {
			t.Fatalf("%s changed to %v on a NaN gradient", name, v)
		}
	}
}

// BenchmarkAdamStep times Adam.Step alone on float32 parameters of about
// the Set Transformer step's size (90 000 values), without clipping (the
// norm summed beside the update) and with a clip too large to act (the
// norm summed first, on one core, as before): the two paths' values are
// the same (TestAdamNormOverlapSameBits).
func BenchmarkAdamStep(b *testing.B) {
	for _, bc := range []struct {
		name string
		clip float64
	}{{"overlap", 0}, {"normfirst", 1e300}} {
		b.Run(bc.name, func(b *testing.B) {
			ps := graph.NewParams(graph.Float32, 7)
			prog, err := graph.Compile(ps, func(bd *graph.Builder) error {
				w := bd.Param("w", []int{300, 300}, graph.Ones)
				bd.SetLoss(graph.Sum(graph.Square(w)))
				return nil
			}, true)
			if err != nil {
				b.Fatal(err)
			}
			if err := prog.Run(); err != nil {
				b.Fatal(err)
			}
			opt := NewAdam(1e-6)
			opt.ClipNorm = bc.clip
			b.ResetTimer()
			for range b.N {
				if _, err := opt.Step(prog); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
