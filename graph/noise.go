package graph

import (
	"math"
	"math/rand/v2"

	"github.com/probformer/probformer/graph/internal/kernels"
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
// a normal entry is the ziggurat draw of u (or v) as 32 random bits
// (zigguratNormal), several times cheaper than an inverse CDF or
// Box–Muller's log, root and sine. An entry depends only on s and its
// index, so the inputs are filled on all cores, and come out the same for
// a given rng state with any GOMAXPROCS.
func (p *Program) DrawNoise(rng *rand.Rand) {
	type fill struct {
		data   any // []float32 or []float64
		seed   uint64
		dist   Noise
		off, n int // pairs before this input and in it
		name   string
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
		fills[i] = fill{data: data, seed: rng.Uint64(), dist: ni.dist, off: total, n: pairs, name: ni.name}
		total += pairs
	}
	kernels.ParallelFor((total+noiseChunk-1)/noiseChunk, func(_, c int) {
		lo, hi := c*noiseChunk, min((c+1)*noiseChunk, total)
		for _, f := range fills {
			a, b := max(lo, f.off), min(hi, f.off+f.n)
			if a >= b {
				continue
			}
			switch d := f.data.(type) {
			case []float32:
				fillNoise(d, f.seed, f.dist, a-f.off, b-f.off, p.shard.offset(f.name, f.n))
			case []float64:
				fillNoise(d, f.seed, f.dist, a-f.off, b-f.off, p.shard.offset(f.name, f.n))
			}
		}
	})
}

// noiseChunk is how many pairs of noise one share of DrawNoise fills.
const noiseChunk = 1 << 14

// fillNoise sets the entries of pairs j ∈ [lo, hi) of d from pairs
// first+j of the noise stream of seed (see DrawNoise); first is not 0
// only in a shard of a data-parallel program (Program.Shard). Uniform
// float32 noise takes bayes.c's AVX-512 loop where the CPU has it
// (kernels.UniformNoise32: eight hashes at a time, the same bits), and
// normal float32 noise its ziggurat there (fillNormalC);
// everything else fillNoiseGo.
func fillNoise[T float](d []T, seed uint64, dist Noise, lo, hi, first int) {
	if d32, ok := any(d).([]float32); ok && dist == UniformNoise && kernels.UniformNoise32(d32, seed, lo, hi, first) {
		return
	}
	if d32, ok := any(d).([]float32); ok && dist == NormalNoise && fillNormalC(d32, seed, lo, hi, first) {
		return
	}
	fillNoiseGo(d, seed, dist, lo, hi, first)
}

// normalBlock is how many pairs of normal noise one call to C fills.
const normalBlock = 1024

// fillNormalC is fillNoise's float32 normal noise with bayes.c's AVX-512
// loop (kernels.NormalNoise32), which takes the ziggurat's first tries
// and, eight at a time, the 2.7% of draws they reject; the few it leaves (the
// base layer's tail, about 6 draws in 10⁴, and near-ties of the
// rejection test) are drawn here by zigguratNormal, each from its own
// hash as in fillNoiseGo, so the values are the Go loop's bit for bit.
// It reports false, having written nothing, where the loop does not run.
func fillNormalC(d []float32, seed uint64, lo, hi, first int) bool {
	var rej []int32
	for a := lo; a < hi; a += normalBlock {
		b := min(hi, a+normalBlock)
		if rej == nil {
			rej = make([]int32, 2*normalBlock)
		}
		n, ok := kernels.NormalNoise32(d, seed, a, b, first, zig.w[:], zig.k[:], zig.f[:], rej)
		if !ok {
			return false // only the first block can fail: the checks depend on nothing a block changes
		}
		for _, e := range rej[:n] {
			j := int(e) / 2
			g := j + first
			h := kernels.SplitMix64(seed + uint64(g+1)*kernels.MaskGamma)
			if e%2 == 0 {
				d[e] = float32(zigguratNormal(uint32(h), h^uint64(g)<<1))
			} else {
				d[e] = float32(zigguratNormal(uint32(h>>32), h^(uint64(g)<<1|1)))
			}
		}
	}
	return true
}

// fillNoiseGo is fillNoise in Go, the reference for every type and
// distribution.
func fillNoiseGo[T float](d []T, seed uint64, dist Noise, lo, hi, first int) {
	uniform := func(x uint64) float64 { return (float64(x>>9) + 0.5) / (1 << 23) }
	for j := lo; j < hi; j++ {
		g := j + first
		h := kernels.SplitMix64(seed + uint64(g+1)*kernels.MaskGamma)
		var u, v float64
		if dist == NormalNoise {
			u, v = zigguratNormal(uint32(h), h^uint64(g)<<1), zigguratNormal(uint32(h>>32), h^(uint64(g)<<1|1))
		} else {
			u, v = uniform(h&0xFFFFFFFF), uniform(h>>32)
		}
		d[2*j] = T(u)
		if 2*j+1 < len(d) {
			d[2*j+1] = T(v)
		}
	}
}

// HasNoise reports whether the program has noise inputs to draw.
func (p *Program) HasNoise() bool { return len(p.noise) > 0 }

// zigguratNormal turns the 32 random bits bits into a draw from N(0, 1)
// by Marsaglia and Tsang's ziggurat ("The ziggurat method for generating
// random variables", J. Stat. Softw. 5(8), 2000; 128 layers, the method of
// math/rand's NormFloat64): 97% of the draws take one multiplication and
// one comparison. A rejected draw needs more bits, which come from the
// SplitMix64 stream seeded with more, so that an entry still depends only
// on its own hash.
func zigguratNormal(bits uint32, more uint64) float64 {
	next := func() uint32 {
		more += kernels.MaskGamma
		return uint32(kernels.SplitMix64(more) >> 32)
	}
	uniform := func() float64 { return (float64(next()>>8) + 0.5) / (1 << 24) }
	const r = 3.442619855899
	for {
		hz := int32(bits)
		i := hz & 127
		x := float64(hz) * zig.w[i]
		if absInt32(hz) < zig.k[i] {
			return x
		}
		if i == 0 { // the tail beyond r
			for {
				x = -math.Log(uniform()) / r
				y := -math.Log(uniform())
				if y+y >= x*x {
					break
				}
			}
			if hz > 0 {
				return r + x
			}
			return -r - x
		}
		if zig.f[i]+uniform()*(zig.f[i-1]-zig.f[i]) < math.Exp(-0.5*x*x) {
			return x
		}
		bits = next()
	}
}

// absInt32 is |x| without a branch: the sign of a random draw is a coin
// toss, which a branch mispredicts every other time (half the cost of a
// normal draw).
func absInt32(x int32) uint32 {
	s := x >> 31
	return uint32((x ^ s) - s)
}

// zig holds the ziggurat's layer tables, computed once from its
// constants (Marsaglia and Tsang's setup); they never change after.
var zig = func() (t struct {
	k    [128]uint32
	w, f [128]float64
}) {
	const m1 = 2147483648.0
	dn, tn, vn := 3.442619855899, 3.442619855899, 9.91256303526217e-3
	q := vn / math.Exp(-0.5*dn*dn)
	t.k[0] = uint32(dn / q * m1)
	t.k[1] = 0
	t.w[0], t.w[127] = q/m1, dn/m1
	t.f[0], t.f[127] = 1, math.Exp(-0.5*dn*dn)
	for i := 126; i >= 1; i-- {
		dn = math.Sqrt(-2 * math.Log(vn/dn+math.Exp(-0.5*dn*dn)))
		t.k[i+1] = uint32(dn / tn * m1)
		tn = dn
		t.f[i] = math.Exp(-0.5 * dn * dn)
		t.w[i] = dn / m1
	}
	return t
}()
