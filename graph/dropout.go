package graph

import (
	"math"
	"math/rand/v2"

	"github.com/probformer/probformer/graph/internal/kernels"
)

// dropoutMask is an input holding a fresh Bernoulli(1−p)/(1−p) mask each
// step. Gorgonia's Dropout scales its gradient by 1/p instead of 1/(1−p),
// merges equal calls into one node and seeds itself from the clock.
type dropoutMask struct {
	name string
	p    float64
}

// Dropout returns x ⊙ mask in a training graph, where mask holds
// Bernoulli(1−p)/(1−p) values drawn by Program.DrawDropout before each
// run; in an evaluation graph, or with p = 0, it returns x.
func (b *Builder) Dropout(name string, x *Node, p float64) *Node {
	if !b.train || p <= 0 {
		return x
	}
	if p >= 1 {
		fail("dropout %s: p = %g, want < 1", name, p)
	}
	mask := b.Input(name, Shape(x)...)
	b.dropouts = append(b.dropouts, dropoutMask{name: name, p: p})
	return apply(mulKernel{constB: true}, x, mask)
}

// maskChunk is how many mask units one task of DrawDropout fills. The
// masks are laid end to end and cut into chunks of this size, so the two
// cores get equal shares whatever the masks' sizes.
const maskChunk = 1 << 15

// DrawDropout fills every dropout mask of the program from rng. The
// training loop calls it before each Run, so the masks, like all the run's
// randomness, come from the run's own seeded generator.
//
// Each mask takes exactly one draw s = rng.Uint64(), in the order the
// masks were built, and is then filled from a counter-based stream: unit
// i (row-major) reads the 32-bit half u_i of
//
//	h_j = SplitMix64(s + (j+1)·γ),  j = ⌊i/2⌋,  γ = 0x9E3779B97F4A7C15,
//
// low half for even i, high half for odd i — h_j is the (j+1)-th output of
// the SplitMix64 generator seeded with s (Steele, Lea & Flood, "Fast
// splittable pseudorandom number generators", OOPSLA 2014, with the
// finaliser of Vigna's splitmix64.c: z ← (z ⊕ z≫30)·0xBF58476D1CE4E5B9,
// z ← (z ⊕ z≫27)·0x94D049BB133111EB, z ⊕ z≫31). The unit is 1/(1−p) when u_i < t = round((1−p)·2³²) and 0
// otherwise, so it is kept with probability t/2³², within 2⁻³² of 1−p.
//
// Since unit i depends only on s and i, the masks are split over the
// cores by index ranges (in C with AVX2 where available) and come out
// bit-identical for a given rng state on any machine, with any GOMAXPROCS,
// with or without cgo. Two masks' streams overlap only if their seeds
// differ by a multiple of γ below their length (odds about n·2⁻⁶³).
func (p *Program) DrawDropout(rng *rand.Rand) {
	type fill struct {
		data      any // []float32 or []float64
		seed, thr uint64
		keep      float64
		off, n    int // units before this mask and in it
		name      string
	}
	fills := make([]fill, len(p.dropouts))
	total := 0
	for i, d := range p.dropouts {
		keep := 1 - d.p
		data := p.inputs[d.name].value.Data()
		n := 0
		switch m := data.(type) {
		case []float32:
			n = len(m)
		case []float64:
			n = len(m)
		}
		fills[i] = fill{data: data, seed: rng.Uint64(), thr: uint64(math.Round(keep * (1 << 32))), keep: keep, off: total, n: n, name: d.name}
		total += n
	}
	kernels.ParallelFor((total+maskChunk-1)/maskChunk, func(_, c int) {
		lo, hi := c*maskChunk, min((c+1)*maskChunk, total)
		for _, f := range fills {
			a, b := max(lo, f.off), min(hi, f.off+f.n)
			if a >= b {
				continue
			}
			first := a - f.off
			switch m := f.data.(type) {
			case []float32:
				kernels.FillMask(m[first:b-f.off], f.seed, first+p.shard.offset(f.name, f.n), f.thr, float32(1/f.keep))
			case []float64:
				kernels.FillMask(m[first:b-f.off], f.seed, first+p.shard.offset(f.name, f.n), f.thr, 1/f.keep)
			}
		}
	})
}
