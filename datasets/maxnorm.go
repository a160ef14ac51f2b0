package datasets

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// SetBatch is a batch of sets padded to a common size MaxN.
type SetBatch struct {
	Size, MaxN, Dim, OutDim int
	X                       []float64 // [Size, MaxN, Dim]; padding is 0
	Mask                    []float64 // [Size, MaxN]; 1 real, 0 padding
	Y                       []float64 // [Size, OutDim]
}

// MaxNorm kinds.
const (
	// GaussianOffset sets: x_i = z_i + 5·c with z_i, c ~ N(0, I) and the
	// offset c shared by the set.
	GaussianOffset = "gaussian-offset"
	// MaxRegression sets: scalars from U[0, 100] (Lee et al. 2019 §5.1).
	MaxRegression = "max-regression"
)

// MaxNorm is the max-norm task: the target of a set is its element with the
// largest L2 norm. Set sizes are uniform in [MinN, MaxN]; smaller sets are
// padded and masked.
type MaxNorm struct {
	Kind       string
	Dim        int
	MinN, MaxN int
}

// NewMaxNorm checks the task's settings. max-regression sets are scalars,
// so dim must be 1.
func NewMaxNorm(kind string, dim, minN, maxN int) (*MaxNorm, error) {
	switch kind {
	case GaussianOffset:
	case MaxRegression:
		if dim != 1 {
			return nil, fmt.Errorf("max-regression sets are scalars: dim must be 1, is %d", dim)
		}
	default:
		return nil, fmt.Errorf("unknown max-norm kind %q (want %s or %s)", kind, GaussianOffset, MaxRegression)
	}
	if dim <= 0 {
		return nil, fmt.Errorf("dim must be positive, is %d", dim)
	}
	if minN < 1 || maxN < minN {
		return nil, fmt.Errorf("set sizes [%d, %d]: want 1 ≤ min ≤ max", minN, maxN)
	}
	return &MaxNorm{Kind: kind, Dim: dim, MinN: minN, MaxN: maxN}, nil
}

// Batch draws size sets from rng.
func (m *MaxNorm) Batch(rng *rand.Rand, size int) SetBatch {
	b := SetBatch{Size: size, MaxN: m.MaxN, Dim: m.Dim, OutDim: m.Dim,
		X: make([]float64, size*m.MaxN*m.Dim), Mask: make([]float64, size*m.MaxN), Y: make([]float64, size*m.Dim)}
	offset := make([]float64, m.Dim)
	for s := range size {
		n := m.MinN + rng.IntN(m.MaxN-m.MinN+1)
		for d := range offset {
			offset[d] = 5 * rng.NormFloat64()
		}
		best, bestNorm := 0, -1.0
		for i := range n {
			row := b.X[(s*m.MaxN+i)*m.Dim : (s*m.MaxN+i+1)*m.Dim]
			var norm float64
			for d := range row {
				if m.Kind == MaxRegression {
					row[d] = 100 * rng.Float64()
				} else {
					row[d] = rng.NormFloat64() + offset[d]
				}
				norm += row[d] * row[d]
			}
			b.Mask[s*m.MaxN+i] = 1
			if norm > bestNorm {
				best, bestNorm = i, norm
			}
		}
		copy(b.Y[s*m.Dim:(s+1)*m.Dim], b.X[(s*m.MaxN+best)*m.Dim:])
	}
	return b
}

// Fixed returns count batches of the given size drawn from a generator
// seeded with (seed, stream): the same arguments always give the same sets.
// Validation and test sets use different streams.
func (m *MaxNorm) Fixed(seed, stream uint64, count, size int) []SetBatch {
	rng := rand.New(rand.NewPCG(seed, stream))
	out := make([]SetBatch, count)
	for i := range out {
		out[i] = m.Batch(rng, size)
	}
	return out
}

// Streams of the fixed evaluation sets.
const (
	ValidStream uint64 = 0x76616c6964 // "valid"
	TestStream  uint64 = 0x74657374   // "test"
)

// MeanPrediction returns, for each set, the mean of its real elements:
// the baseline a model must beat. [Size, Dim].
func (b SetBatch) MeanPrediction() []float64 {
	out := make([]float64, b.Size*b.Dim)
	for s := range b.Size {
		var n float64
		for i := range b.MaxN {
			if b.Mask[s*b.MaxN+i] == 0 {
				continue
			}
			n++
			for d := range b.Dim {
				out[s*b.Dim+d] += b.X[(s*b.MaxN+i)*b.Dim+d]
			}
		}
		for d := range b.Dim {
			out[s*b.Dim+d] /= math.Max(n, 1)
		}
	}
	return out
}
