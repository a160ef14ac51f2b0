package datasets

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestMaxNormTargetIsLargestElement(t *testing.T) {
	for _, kind := range []string{GaussianOffset, MaxRegression} {
		dim, minN, maxN := 2, 50, 50
		if kind == MaxRegression {
			dim, minN, maxN = 1, 1, 10
		}
		m, err := NewMaxNorm(kind, dim, minN, maxN)
		if err != nil {
			t.Fatal(err)
		}
		b := m.Batch(rand.New(rand.NewPCG(1, 2)), 200)
		sizes := map[int]bool{}
		for s := range b.Size {
			n, best := 0, -1.0
			for i := range b.MaxN {
				if b.Mask[s*b.MaxN+i] == 0 {
					for d := range dim {
						if b.X[(s*b.MaxN+i)*dim+d] != 0 {
							t.Fatalf("%s: padding holds a value", kind)
						}
					}
					continue
				}
				if i != n {
					t.Fatalf("%s: padding before a real element", kind)
				}
				n++
				var norm float64
				for d := range dim {
					v := b.X[(s*b.MaxN+i)*dim+d]
					if kind == MaxRegression && (v < 0 || v >= 100) {
						t.Fatalf("value %v outside [0, 100)", v)
					}
					norm += v * v
				}
				best = math.Max(best, norm)
			}
			sizes[n] = true
			var ty float64
			for d := range dim {
				ty += b.Y[s*dim+d] * b.Y[s*dim+d]
			}
			if ty != best {
				t.Fatalf("%s: target norm² %v, largest element norm² %v", kind, ty, best)
			}
		}
		if kind == MaxRegression && len(sizes) != 10 {
			t.Fatalf("set sizes %v, want all of 1..10", sizes)
		}
	}
}

func TestGaussianOffsetIsShared(t *testing.T) {
	m, _ := NewMaxNorm(GaussianOffset, 2, 2000, 2000)
	b := m.Batch(rand.New(rand.NewPCG(3, 4)), 3)
	means := b.MeanPrediction()
	// With n = 2000 the set mean is the offset 5c to within ~0.03, and
	// offsets differ between sets by ~7: the spread is the shared offset.
	for s := range 3 {
		var v float64
		for i := range b.MaxN {
			for d := range 2 {
				x := b.X[(s*b.MaxN+i)*2+d] - means[s*2+d]
				v += x * x
			}
		}
		if sd := math.Sqrt(v / float64(2*b.MaxN)); math.Abs(sd-1) > 0.05 {
			t.Fatalf("within-set sd %v, want 1", sd)
		}
	}
}

func TestFixedSetsAreReproducible(t *testing.T) {
	m, _ := NewMaxNorm(MaxRegression, 1, 1, 10)
	a := m.Fixed(7, ValidStream, 2, 16)
	b := m.Fixed(7, ValidStream, 2, 16)
	c := m.Fixed(7, TestStream, 2, 16)
	if !slices.Equal(a[1].X, b[1].X) || !slices.Equal(a[1].Y, b[1].Y) {
		t.Fatal("same seed and stream gave different sets")
	}
	if slices.Equal(a[0].X, c[0].X) {
		t.Fatal("validation and test sets are equal")
	}
}

func TestMaxNormRejectsBadSettings(t *testing.T) {
	for _, c := range []struct {
		kind           string
		dim, minN, max int
	}{
		{"nope", 2, 1, 2}, {MaxRegression, 2, 1, 10}, {GaussianOffset, 0, 1, 2}, {GaussianOffset, 2, 0, 2}, {GaussianOffset, 2, 5, 4},
	} {
		if _, err := NewMaxNorm(c.kind, c.dim, c.minN, c.max); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}

func TestMeanPrediction(t *testing.T) {
	b := SetBatch{Size: 1, MaxN: 3, Dim: 1, X: []float64{1, 2, 99}, Mask: []float64{1, 1, 0}}
	if got := b.MeanPrediction(); got[0] != 1.5 {
		t.Fatalf("mean %v, want 1.5", got)
	}
}
