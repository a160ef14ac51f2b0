package graph

import (
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"

	"github.com/probformer/probformer/graph/internal/kernels"
)

func TestNoiseInputs(t *testing.T) {
	t.Parallel()
	build := func(b *Builder) error {
		u := b.Noise("u", UniformNoise, 200, 50)
		e := b.Noise("e", NormalNoise, 200, 50)
		b.Output("u", u)
		b.Output("e", e)
		b.AddPenalty("kl", Mean(Square(e)))
		return nil
	}
	draw := func(seed uint64) ([]float64, []float64, map[string]float64) {
		prog, err := Compile(NewParams(Float32, 1), build, false)
		if err != nil {
			t.Fatal(err)
		}
		if !prog.HasNoise() {
			t.Fatal("no noise inputs")
		}
		prog.DrawNoise(rand.New(rand.NewPCG(seed, 1)))
		if err := prog.Run(); err != nil {
			t.Fatal(err)
		}
		u, _, _ := prog.Output("u")
		e, _, _ := prog.Output("e")
		return u, e, prog.PenaltyValues()
	}
	u, e, pen := draw(1)
	u2, e2, _ := draw(1)
	u3, _, _ := draw(2)
	if !slices.Equal(u, u2) || !slices.Equal(e, e2) {
		t.Fatal("the same seed drew different noise")
	}
	if slices.Equal(u, u3) {
		t.Fatal("different seeds drew the same noise")
	}
	var mu, me, ve float64
	for i := range u {
		if u[i] <= 0 || u[i] >= 1 {
			t.Fatalf("uniform draw %v outside (0, 1)", u[i])
		}
		mu += u[i]
		me += e[i]
		ve += e[i] * e[i]
	}
	n := float64(len(u))
	if math.Abs(mu/n-0.5) > 0.01 || math.Abs(me/n) > 0.03 || math.Abs(ve/n-1) > 0.03 {
		t.Fatalf("moments: uniform mean %v, normal mean %v, variance %v", mu/n, me/n, ve/n)
	}
	if math.Abs(pen["kl"]-ve/n) > 1e-5 {
		t.Fatalf("penalty %v, want %v", pen["kl"], ve/n)
	}
}

func TestPenaltyMustBeScalar(t *testing.T) {
	t.Parallel()
	_, err := Compile(NewParams(Float32, 1), func(b *Builder) error {
		b.AddPenalty("kl", b.Input("x", 3))
		return nil
	}, false)
	if err == nil {
		t.Fatal("a vector penalty was accepted")
	}
}

// TestUniformNoiseEndsStayOpenInFloat32: the extreme draws are neither 0
// nor 1 after rounding to float32.
func TestUniformNoiseEndsStayOpenInFloat32(t *testing.T) {
	t.Parallel()
	lo, hi := (0+0.5)/float64(1<<23), (float64(1<<23-1)+0.5)/float64(1<<23)
	if f := float32(lo); f <= 0 || f >= 1 {
		t.Fatalf("smallest draw rounds to %v", f)
	}
	if f := float32(hi); f <= 0 || f >= 1 {
		t.Fatalf("largest draw rounds to %v", f)
	}
}

// TestNoiseIndependentOfThreads: DrawNoise fills the same values whether
// one core or two share the work, for inputs that span several shares.
func TestNoiseIndependentOfThreads(t *testing.T) {
	build := func(b *Builder) error {
		b.Output("u", b.Noise("u", UniformNoise, 3, noiseChunk+7))
		b.Output("e", b.Noise("e", NormalNoise, 2*noiseChunk+3))
		return nil
	}
	draw := func(procs int) ([]float64, []float64) {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
		prog, err := Compile(NewParams(Float64, 1), build, false)
		if err != nil {
			t.Fatal(err)
		}
		prog.DrawNoise(rand.New(rand.NewPCG(9, 9)))
		if err := prog.Run(); err != nil {
			t.Fatal(err)
		}
		u, _, _ := prog.Output("u")
		e, _, _ := prog.Output("e")
		return u, e
	}
	u1, e1 := draw(1)
	u2, e2 := draw(2)
	if !slices.Equal(u1, u2) || !slices.Equal(e1, e2) {
		t.Fatal("noise depends on the number of threads")
	}
}

// TestZigguratNormal checks the normal draws of DrawNoise against the
// standard normal CDF: the largest gap between the empirical CDF of 10⁶
// draws and Φ (Kolmogorov–Smirnov) stays below 1.63/√n, the 1% level.
func TestZigguratNormal(t *testing.T) {
	t.Parallel()
	const n = 1 << 20
	z := make([]float64, n)
	for j := range n / 2 {
		h := kernels.SplitMix64(7 + uint64(j+1)*kernels.MaskGamma)
		z[2*j], z[2*j+1] = zigguratNormal(uint32(h), h^uint64(j)<<1), zigguratNormal(uint32(h>>32), h^(uint64(j)<<1|1))
	}
	slices.Sort(z)
	var gap float64
	for i, x := range z {
		cdf := 0.5 * math.Erfc(-x/math.Sqrt2)
		gap = math.Max(gap, math.Max(math.Abs(cdf-float64(i)/n), math.Abs(cdf-float64(i+1)/n)))
	}
	if limit := 1.63 / math.Sqrt(n); gap > limit {
		t.Errorf("Kolmogorov–Smirnov distance %.3g, above %.3g", gap, limit)
	}
	if z[0] > -4 || z[n-1] < 4 { // each side holds about 33 draws beyond 4σ
		t.Errorf("extremes %v, %v: the tails are not reached", z[0], z[n-1])
	}
}

// TestUniformNoiseC holds fillNoise's float32 uniform and normal noise
// (bayes.c's AVX-512 loops where the CPU has them) to fillNoiseGo bit for
// bit: odd and even lengths, shares starting and ending anywhere, more
// than one of fillNormalC's blocks, shard offsets.
func TestUniformNoiseC(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 5))
	for _, n := range []int{1, 2, 15, 16, 17, 31, 33, 100, 1001, 4096, 5000} {
		for _, dist := range []Noise{UniformNoise, NormalNoise} {
			pairs := (n + 1) / 2
			for range 8 {
				seed := rng.Uint64()
				lo := rng.IntN(pairs + 1)
				hi := lo + rng.IntN(pairs-lo+1)
				first := rng.IntN(3) * rng.IntN(1<<20)
				got, want := make([]float32, n), make([]float32, n)
				for i := range got {
					got[i], want[i] = -7, -7 // untouched entries must stay so
				}
				fillNoise(got, seed, dist, lo, hi, first)
				fillNoiseGo(want, seed, dist, lo, hi, first)
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("noise %d, n %d, pairs [%d, %d), first %d: entry %d is %v, want %v", dist, n, lo, hi, first, i,
							got[i], want[i])
					}
				}
			}
		}
	}
	if !kernels.UniformNoise32(make([]float32, 4), 1, 0, 2, 0) {
		t.Log("no AVX-512 here: fillNoise took the Go loop")
	}
}

// TestNormalNoiseRetriesInC holds a million float32 normal draws of
// bayes.c's loop, whose retries of rejected first tries run in C, to
// fillNoiseGo bit for bit, and checks that C leaves Go only the base
// layer's tail draws and near-ties: fewer than 1 in 1000 (the tail is
// about 6 in 10⁴), where the rejected first tries are about 2.7%.
func TestNormalNoiseRetriesInC(t *testing.T) {
	t.Parallel()
	const n = 1 << 20
	got, want := make([]float32, n), make([]float32, n)
	rej := make([]int32, n)
	left, ok := kernels.NormalNoise32(got, 11, 0, n/2, 5, zig.w[:], zig.k[:], zig.f[:], rej)
	if !ok {
		t.Skip("no AVX-512 here: fillNoise takes the Go loop")
	}
	if left > n/1000 {
		t.Errorf("C left %d of %d draws to Go, want at most %d", left, n, n/1000)
	}
	for _, e := range rej[:left] {
		if got[e] != 0 {
			t.Fatalf("entry %d left to Go was written (%v)", e, got[e])
		}
	}
	fillNoise(got, 11, NormalNoise, 0, n/2, 5)
	fillNoiseGo(want, 11, NormalNoise, 0, n/2, 5)
	firstTry := 0
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("entry %d is %v, want %v", i, got[i], want[i])
		}
		g := uint64(i/2 + 5)
		h := kernels.SplitMix64(11 + (g+1)*kernels.MaskGamma)
		bits := int32(h)
		if i%2 == 1 {
			bits = int32(h >> 32)
		}
		if absInt32(bits) < zig.k[bits&127] {
			firstTry++
		}
	}
	if rejected := n - firstTry; rejected < n/200 {
		t.Errorf("only %d first tries rejected: the retries are not exercised", rejected)
	}
}

// BenchmarkFillNoise fills, on one thread, the 832 000 float32 draws a
// maxnorm-bayes training step takes (the step's five noise inputs),
// uniform for the Weibull kernel and normal for the log-normal one.
func BenchmarkFillNoise(b *testing.B) {
	d := make([]float32, 64*4*(4*16*50+50))
	for _, dist := range []struct {
		name string
		n    Noise
	}{{"uniform", UniformNoise}, {"normal", NormalNoise}} {
		b.Run(dist.name, func(b *testing.B) {
			for i := range b.N {
				fillNoise(d, uint64(i), dist.n, 0, len(d)/2, 0)
			}
		})
	}
}
