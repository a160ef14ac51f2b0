package optim

import (
	"fmt"
	"math"
	"runtime"
	"sync/atomic"

	"github.com/probformer/probformer/graph"
	"github.com/probformer/probformer/graph/internal/kernels"
)

// Adam is the Adam optimizer (Kingma & Ba 2015) with decoupled weight decay
// (Loshchilov & Hutter 2019) and optional global-norm gradient clipping,
// as torch.optim.AdamW computes it:
//
//	g ← g · min(1, clip/‖g‖)           (‖g‖ over all parameters)
//	w ← w − lr·λ·w
//	m ← β₁m + (1−β₁)g,  v ← β₂v + (1−β₂)g²
//	w ← w − lr · (m/(1−β₁ᵗ)) / (√(v/(1−β₂ᵗ)) + ε)
//
// Gorgonia's solvers keep their moments unexported, so a run could not
// resume exactly; its AdamW never updates the weights at all.
type Adam struct {
	LR          float64 // learning rate; the trainer may change it every step
	Beta1       float64
	Beta2       float64
	Eps         float64
	WeightDecay float64 // decoupled; 0 turns it off
	ClipNorm    float64 // global gradient-norm clip; 0 turns it off

	state AdamState
}

// AdamState is everything Adam carries between steps, by parameter name.
type AdamState struct {
	Step int
	M, V map[string][]float64
}

// NewAdam returns Adam with PyTorch's defaults and the given learning rate.
func NewAdam(lr float64) *Adam {
	return &Adam{LR: lr, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8,
		state: AdamState{M: map[string][]float64{}, V: map[string][]float64{}}}
}

// State returns a deep copy of the optimizer's moments and step count.
func (a *Adam) State() AdamState {
	s := AdamState{Step: a.state.Step, M: map[string][]float64{}, V: map[string][]float64{}}
	for k, v := range a.state.M {
		s.M[k] = append([]float64(nil), v...)
	}
	for k, v := range a.state.V {
		s.V[k] = append([]float64(nil), v...)
	}
	return s
}

// SetState restores moments saved by State.
func (a *Adam) SetState(s AdamState) {
	a.state = AdamState{Step: s.Step, M: map[string][]float64{}, V: map[string][]float64{}}
	for k, v := range s.M {
		a.state.M[k] = append([]float64(nil), v...)
	}
	for k, v := range s.V {
		a.state.V[k] = append([]float64(nil), v...)
	}
}

// stepGrads returns the gradients of prog's last run and their global norm.
func (a *Adam) stepGrads(prog *graph.Program, used []*graph.Param) ([]any, float64, error) {
	grads := make([]any, len(used))
	var sq float64
	for i, prm := range used {
		g, err := prog.GradientData(i)
		if err != nil {
			return nil, 0, err
		}
		grads[i] = g
		switch d := g.(type) {
		case []float32:
			// A float32 square is below 1.2e77, so the float64 sum is
			// finite exactly when every value is: no separate check.
			s := sq
			for _, x := range d {
				s += float64(x) * float64(x)
			}
			if math.IsNaN(s) || math.IsInf(s, 0) {
				return nil, 0, fmt.Errorf("gradient of %s is not finite", prm.Name)
			}
			sq = s
		case []float64:
			if !finite(g) {
				return nil, 0, fmt.Errorf("gradient of %s is not finite", prm.Name)
			}
			for _, x := range d {
				sq += x * x
			}
		}
	}
	return grads, math.Sqrt(sq), nil
}

// Step updates every parameter that prog uses from the gradients of prog's
// last run, and returns the gradient norm before clipping. A gradient with
// a NaN or Inf is an error, and then no parameter changes.
func (a *Adam) Step(prog *graph.Program) (float64, error) {
	if !prog.Training() {
		return 0, fmt.Errorf("optimizer step on an evaluation program")
	}
	used := prog.Params()
	// Without clipping the update does not need the norm, only to know
	// that every gradient is finite, which a fast check tells. The norm's
	// sum is then one thread's serial chain (its order fixed: it is
	// returned), run by the first goroutine of the update while the
	// others update, where it held both cores for its length before the
	// update began. The same sum and updates, so the same values.
	if a.ClipNorm == 0 {
		grads, ok, err := finiteGrads32(prog, used)
		if err != nil {
			return 0, err
		}
		if ok {
			var norm float64
			a.update(used, grads, 1, func() { norm = gradNorm32(grads) })
			return norm, nil
		}
	}
	grads, norm, err := a.stepGrads(prog, used)
	if err != nil {
		return norm, err
	}
	scale := 1.0
	if a.ClipNorm > 0 && norm > a.ClipNorm {
		scale = a.ClipNorm / norm
	}
	a.update(used, grads, scale, nil)
	return norm, nil
}

// finiteGrads32 returns the gradients of prog's last run when all are
// float32, with ok, or an error naming the first that is not finite, as
// stepGrads would; ok is false (and no error) when one is not float32.
func finiteGrads32(prog *graph.Program, used []*graph.Param) (grads []any, ok bool, err error) {
	grads = make([]any, len(used))
	for i, prm := range used {
		g, err := prog.GradientData(i)
		if err != nil {
			return nil, false, err
		}
		d, is32 := g.([]float32)
		if !is32 {
			return nil, false, nil
		}
		if !kernels.Finite32(d) {
			return nil, false, fmt.Errorf("gradient of %s is not finite", prm.Name)
		}
		grads[i] = g
	}
	return grads, true, nil
}

// gradNorm32 is the global norm of float32 gradients, the float64 sum of
// squares in stepGrads' order.
func gradNorm32(grads []any) float64 {
	var sq float64
	for _, g := range grads {
		for _, x := range g.([]float32) {
			sq += float64(x) * float64(x)
		}
	}
	return math.Sqrt(sq)
}

// update runs the Adam update of every used parameter with its gradient
// scaled by scale, and norm, when not nil, on the first goroutine to
// start, before it takes any chunk.
func (a *Adam) update(used []*graph.Param, grads []any, scale float64, norm func()) {
	a.state.Step++
	t := float64(a.state.Step)
	bc1 := 1 - math.Pow(a.Beta1, t)
	bc2 := 1 - math.Pow(a.Beta2, t)
	// The update is element-wise: chunks of every parameter are shared
	// between the cores, each goroutine taking the next chunk from a
	// counter, so one whose core another process holds for a while takes
	// fewer (a fixed split would leave the caller to run a late helper's
	// whole share). Which goroutine updates a chunk does not change its
	// values.
	type chunk struct{ i, lo, hi int }
	var chunks []chunk
	ms, vs := make([][]float64, len(used)), make([][]float64, len(used))
	for i, prm := range used {
		n := shapeSize(prm.Shape)
		m, v := a.state.M[prm.Name], a.state.V[prm.Name]
		if m == nil {
			m, v = make([]float64, n), make([]float64, n)
			a.state.M[prm.Name], a.state.V[prm.Name] = m, v
		}
		ms[i], vs[i] = m, v
		for lo := 0; lo < n; lo += adamChunk {
			chunks = append(chunks, chunk{i, lo, min(lo+adamChunk, n)})
		}
	}
	tasks := len(chunks)
	if norm != nil {
		tasks++
	}
	var next atomic.Int32
	var normTaken atomic.Bool
	kernels.RunShares(min(runtime.GOMAXPROCS(0), tasks), func(int) {
		if norm != nil && normTaken.CompareAndSwap(false, true) {
			norm()
		}
		for {
			c := int(next.Add(1)) - 1
			if c >= len(chunks) {
				return
			}
			ch := chunks[c]
			m, v := ms[ch.i][ch.lo:ch.hi], vs[ch.i][ch.lo:ch.hi]
			switch w := used[ch.i].Data().(type) {
			case []float32:
				adamUpdate(a, w[ch.lo:ch.hi], grads[ch.i].([]float32)[ch.lo:ch.hi], m, v, scale, bc1, bc2)
			case []float64:
				adamUpdate(a, w[ch.lo:ch.hi], grads[ch.i].([]float64)[ch.lo:ch.hi], m, v, scale, bc1, bc2)
			}
		}
	})
}

// adamChunk is how many values of a parameter one task of Adam.Step
// updates.
const adamChunk = 4096

func adamUpdate[T float32 | float64](a *Adam, w, g []T, m, v []float64, scale, bc1, bc2 float64) {
	decay := 1 - a.LR*a.WeightDecay
	if w32, ok := any(w).([]float32); ok {
		c := [10]float64{scale, a.LR, a.Beta1, 1 - a.Beta1, a.Beta2, 1 - a.Beta2, bc1, bc2, a.Eps, decay}
		if kernels.Adam32(w32, any(g).([]float32), m, v, &c) {
			return
		}
	}
	adamLoop(a, w, g, m, v, scale, bc1, bc2, decay)
}

// adamLoop is adamUpdate in Go, element by element.
func adamLoop[T float32 | float64](a *Adam, w, g []T, m, v []float64, scale, bc1, bc2, decay float64) {
	for j := range w {
		gj := float64(g[j]) * scale
		m[j] = a.Beta1*m[j] + (1-a.Beta1)*gj
		v[j] = a.Beta2*v[j] + (1-a.Beta2)*gj*gj
		wj := float64(w[j]) * decay
		w[j] = T(wj - a.LR*(m[j]/bc1)/(math.Sqrt(v[j]/bc2)+a.Eps))
	}
}

// shapeSize is the number of elements of a tensor of the given shape.
func shapeSize(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// finite reports whether every element of a float backing is finite.
func finite(data any) bool {
	switch d := data.(type) {
	case []float32:
		for _, v := range d {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return false
			}
		}
	case []float64:
		for _, v := range d {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return false
			}
		}
	}
	return true
}
