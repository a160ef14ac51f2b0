package graph

import "math/rand/v2"

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

// DrawNoise fills every noise input of the program from rng.
func (p *Program) DrawNoise(rng *rand.Rand) {
	for _, ni := range p.noise {
		switch data := p.inputs[ni.name].value.Data().(type) {
		case []float32:
			for i := range data {
				data[i] = float32(draw(rng, ni.dist))
			}
		case []float64:
			for i := range data {
				data[i] = draw(rng, ni.dist)
			}
		}
	}
}

func draw(rng *rand.Rand, dist Noise) float64 {
	if dist == NormalNoise {
		return rng.NormFloat64()
	}
	// (k + 0.5)/2^23 for k < 2^23 lies in [2^-24, 1 − 2^-24], which
	// float32 holds exactly: both ends stay inside (0, 1).
	return (float64(rng.Uint32()>>9) + 0.5) / (1 << 23)
}

// HasNoise reports whether the program has noise inputs to draw.
func (p *Program) HasNoise() bool { return len(p.noise) > 0 }
