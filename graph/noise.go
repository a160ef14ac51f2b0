package graph

import (
	"math"
	"math/rand/v2"
)

// Noise is the distribution of a noise input.
type Noise int

const (
	// UniformNoise draws from the open interval (0, 1), so log u and
	// log(1 − u) are finite.
	UniformNoise Noise = iota
	// NormalNoise draws from N(0, 1).
	NormalNoise
)

type noiseInput struct {
	name string
	dist Noise
}

// Noise declares an input that Program.DrawNoise fills with fresh draws
// before each run: the reparameterised randomness of a layer, such as the
// u of a Weibull sample. Gorgonia's random nodes merge when their shapes
// match and seed themselves from the clock; this noise comes from the
// run's own generator, so runs repeat and resume exactly.
func (b *Builder) Noise(name string, dist Noise, shape ...int) *Node {
	n := b.Input(name, shape...)
	b.noise = append(b.noise, noiseInput{name: name, dist: dist})
	return n
}

// DrawNoise fills every noise input of the program from rng. As
// DrawDropout does for its masks, each input takes exactly one draw
// s = rng.Uint64(), in the order the inputs were declared, and is then
// filled from the counter-based SplitMix64 stream of s: entries 2j and
// 2j+1 (row-major) come from h_j = SplitMix64(s + (j+1)·γ), its low and
// high 32-bit halves u, v. A uniform entry is (u ≫ 9 + ½)/2²³ (or v's),
// which lies in [2⁻²⁴, 1 − 2⁻²⁴] and so stays inside (0, 1) in float32;
// a normal pair is the Box–Muller transform of the two,
//
//	z₀ = √(−2 ln U) cos 2πV,  z₁ = √(−2 ln U) sin 2πV,
//
// with U, V the uniforms of u and v. An entry depends only on s and its
// index, so the inputs are filled on all cores, and come out the same for
// a given rng state with any GOMAXPROCS.
func (p *Program) DrawNoise(rng *rand.Rand) {
	type fill struct {
		data   any // []float32 or []float64
		seed   uint64
		dist   Noise
		off, n int // pairs before this input and in it
	}
	fills := make([]fill, len(p.noise))
	total := 0
	for i, ni := range p.noise {
		data := p.inputs[ni.name].value.Data()
		n := 0
		switch d := data.(type) {
		case []float32:
			n = len(d)
		case []float64:
			n = len(d)
		}
		pairs := (n + 1) / 2
		fills[i] = fill{data: data, seed: rng.Uint64(), dist: ni.dist, off: total, n: pairs}
		total += pairs
	}
	parallelFor((total+noiseChunk-1)/noiseChunk, func(_, c int) {
		lo, hi := c*noiseChunk, min((c+1)*noiseChunk, total)
		for _, f := range fills {
			a, b := max(lo, f.off), min(hi, f.off+f.n)
			if a >= b {
				continue
			}
			switch d := f.data.(type) {
			case []float32:
				fillNoise(d, f.seed, f.dist, a-f.off, b-f.off)
			case []float64:
				fillNoise(d, f.seed, f.dist, a-f.off, b-f.off)
			}
		}
	})
}

// noiseChunk is how many pairs of noise one share of DrawNoise fills.
const noiseChunk = 1 << 14

// fillNoise sets the entries of pairs j ∈ [lo, hi) of d from the noise
// stream of seed (see DrawNoise).
func fillNoise[T float](d []T, seed uint64, dist Noise, lo, hi int) {
	uniform := func(x uint64) float64 { return (float64(x>>9) + 0.5) / (1 << 23) }
	for j := lo; j < hi; j++ {
		h := splitMix64(seed + uint64(j+1)*maskGamma)
		u, v := uniform(h&0xFFFFFFFF), uniform(h>>32)
		if dist == NormalNoise {
			r := math.Sqrt(-2 * math.Log(u))
			sin, cos := math.Sincos(2 * math.Pi * v)
			u, v = r*cos, r*sin
		}
		d[2*j] = T(u)
		if 2*j+1 < len(d) {
			d[2*j+1] = T(v)
		}
	}
}

// HasNoise reports whether the program has noise inputs to draw.
func (p *Program) HasNoise() bool { return len(p.noise) > 0 }
