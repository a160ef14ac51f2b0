package graph

import "math/rand/v2"

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
	return Mul(x, mask)
}

// DrawDropout fills every dropout mask of the program from rng. The
// training loop calls it before each Run, so the masks, like all the run's
// randomness, come from the run's own seeded generator.
func (p *Program) DrawDropout(rng *rand.Rand) {
	for _, d := range p.dropouts {
		keep := 1 - d.p
		switch m := p.inputs[d.name].value.Data().(type) {
		case []float32:
			for i := range m {
				m[i] = 0
				if rng.Float64() < keep {
					m[i] = float32(1 / keep)
				}
			}
		case []float64:
			for i := range m {
				m[i] = 0
				if rng.Float64() < keep {
					m[i] = 1 / keep
				}
			}
		}
	}
}
