package optim

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/probformer/probformer/graph"
	"github.com/probformer/probformer/graph/internal/kernels"
)

// TestAdamKernelMatchesGo: vec.c's Adam update on float32 weights (where the
// build and CPU have it) gives bit for bit what adamLoop gives.
func TestAdamKernelMatchesGo(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(8, 8))
	a := NewAdam(0.003)
	a.WeightDecay = 0.01
	for _, n := range []int{1, 3, 4, 5, 17, 1000} {
		w := to32(graph.Normal(1)(rng, []int{n}))
		g := to32(graph.Normal(1)(rng, []int{n}))
		m, v := graph.Normal(0.1)(rng, []int{n}), graph.Normal(0.1)(rng, []int{n})
		for i := range v {
			v[i] = math.Abs(v[i])
		}
		w2, m2, v2 := append([]float32(nil), w...), append([]float64(nil), m...), append([]float64(nil), v...)
		scale, bc1, bc2, decay := 0.7, 0.19, 0.002, 1-a.LR*a.WeightDecay
		adamLoop(a, w, g, m, v, scale, bc1, bc2, decay)
		c := [10]float64{scale, a.LR, a.Beta1, 1 - a.Beta1, a.Beta2, 1 - a.Beta2, bc1, bc2, a.Eps, decay}
		if !kernels.Adam32(w2, g, m2, v2, &c) {
			t.Skip("no fast path in this build")
		}
		for j := range w {
			if w[j] != w2[j] || m[j] != m2[j] || v[j] != v2[j] {
				t.Fatalf("adam n=%d: element %d is w %v m %v v %v, Go gives %v %v %v", n, j, w2[j], m2[j], v2[j], w[j], m[j], v[j])
			}
		}
	}
}

func to32(v []float64) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}
