package graph

import (
	"math"
	"math/rand/v2"
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

// DrawDropout fills every dropout mask of the program from rng. The
// training loop calls it before each Run, so the masks, like all the run's
// randomness, come from the run's own seeded generator. Each 64-bit draw
// decides two units: a unit is kept when its 32-bit half is below
// (1−p)·2³², so it is kept with probability 1−p to within 2⁻³².
func (p *Program) DrawDropout(rng *rand.Rand) {
	for _, d := range p.dropouts {
		keep := 1 - d.p
		thr := uint64(math.Round(keep * (1 << 32)))
		switch m := p.inputs[d.name].value.Data().(type) {
		case []float32:
			fillMask(rng, m, thr, float32(1/keep))
		case []float64:
			fillMask(rng, m, thr, 1/keep)
		}
	}
}

// fillMask sets m[i] to scale where the i-th 32-bit half of rng's draws is
// below thr, and to 0 elsewhere, without branches (the outcome is random).
func fillMask[T float](rng *rand.Rand, m []T, thr uint64, scale T) {
	pick := func(u uint64) T {
		kept := T((u - thr) >> 63) // 1 when u < thr
		return scale * kept
	}
	i := 0
	for ; i+1 < len(m); i += 2 {
		u := rng.Uint64()
		m[i], m[i+1] = pick(u&0xFFFFFFFF), pick(u>>32)
	}
	if i < len(m) {
		m[i] = pick(rng.Uint64() & 0xFFFFFFFF)
	}
}
