package graph

import (
	"github.com/probformer/probformer/graph/graphtest"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"

	"gorgonia.org/tensor"
)

// projXentGraph compiles, on ps, the loss of hidden rows h [shape] under
// an output projection to v classes: ProjectedCrossEntropy when fused,
// else the composition it replaces, Linear + SoftmaxCrossEntropy + the
// masked mean. The targets are the index input "y" and the mask (when
// masked) the input "mask".
func projXentGraph(ps *Params, shape []int, v int, masked bool, eps float64, fused, train bool) (*Program, error) {
	return Compile(ps, func(b *Builder) error {
		d, rows := shape[len(shape)-1], shape[:len(shape)-1]
		h := b.Param("h", shape, Normal(1))
		w := b.Param("w", []int{d, v}, Normal(0.5))
		bias := b.Param("b", []int{v}, Normal(0.5))
		y := b.IndexInput("y", rows...)
		var m *Node
		if masked {
			m = b.Input("mask", rows...)
		}
		if fused {
			b.SetLoss(ProjectedCrossEntropy(h, w, bias, y, m, eps))
			return nil
		}
		perToken := SoftmaxCrossEntropy(Linear(h, w, bias), y, eps)
		if m == nil {
			b.SetLoss(Mean(perToken))
			return nil
		}
		b.SetLoss(Div(Sum(Mul(perToken, m)), Sum(m)))
		return nil
	}, train)
}

// runProjXent feeds targets and mask (nil: none) and runs p, returning its
// loss and, for a training program, its gradients.
func runProjXent(p *Program, targets []int, mask []float64) (float64, map[string][]float64, error) {
	if err := p.FeedIndices("y", targets); err != nil {
		return 0, nil, err
	}
	if mask != nil {
		if err := p.Feed("mask", mask); err != nil {
			return 0, nil, err
		}
	}
	if err := p.Run(); err != nil {
		return 0, nil, err
	}
	if !p.train {
		return p.Loss(), nil, nil
	}
	g, err := p.Gradients()
	return p.Loss(), g, err
}

// xentPadMask returns a [rows/t, t] mask whose sequence b keeps its first
// lens[b mod len(lens)] positions, as a batch of padded sentences.
func xentPadMask(rows, t int, lens ...int) []float64 {
	m := make([]float64, rows)
	for r := range m {
		if r%t < lens[(r/t)%len(lens)] {
			m[r] = 1
		}
	}
	return m
}

// xentTargets returns n token ids drawn uniformly from [0, v).
func xentTargets(rng *rand.Rand, n, v int) []int {
	y := make([]int, n)
	for i := range y {
		y[i] = rng.IntN(v)
	}
	return y
}

// TestProjectedCrossEntropyMatchesComposition: loss and gradients equal
// those of Linear + SoftmaxCrossEntropy + masked mean, to rounding, over
// two runs with different masks (the op keeps its buffers between runs,
// and the number of live rows changes).
func TestProjectedCrossEntropyMatchesComposition(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		dt     DType
		shape  []int
		v      int
		masks  [][]float64 // one per run; nil entries: no mask
		eps    float64
		tol    float64 // loss
		gradTo float64 // gradients, relative norm
	}{
		{"f64-padded", Float64, []int{2, 3, 4}, 5, [][]float64{{1, 1, 0, 1, 0, 0}, {1, 0, 0, 1, 1, 1}}, 0, 1e-12, 1e-12},
		{"f64-padded-smoothed", Float64, []int{2, 3, 4}, 5, [][]float64{{1, 1, 0, 1, 0, 0}, {0, 1, 1, 1, 1, 0}}, 0.1, 1e-12, 1e-12},
		{"f64-weighted", Float64, []int{2, 3, 4}, 5, [][]float64{{0.5, 2, 0, 1, 0, 3}, {1, 1, 1, 1, 1, 1}}, 0.1, 1e-12, 1e-12},
		{"f64-no-mask", Float64, []int{2, 3, 4}, 5, [][]float64{nil}, 0.1, 1e-12, 1e-12},
		{"f64-rank2", Float64, []int{6, 8}, 17, [][]float64{{1, 0, 1, 1, 0, 1}}, 0.2, 1e-12, 1e-12},
		{"f64-wide", Float64, []int{8, 12, 64}, 600, [][]float64{xentPadMask(96, 12, 8, 12, 3), xentPadMask(96, 12, 5, 7)}, 0.1, 1e-12, 1e-12},
		{"f32-padded", Float32, []int{2, 3, 4}, 5, [][]float64{{1, 1, 0, 1, 0, 0}, {1, 0, 0, 1, 1, 1}}, 0.1, 1e-6, 1e-5},
		{"f32-wide", Float32, []int{8, 12, 64}, 600, [][]float64{xentPadMask(96, 12, 8, 12, 3), xentPadMask(96, 12, 5, 7)}, 0.1, 1e-6, 1e-5},
		{"f32-eng-fra-vocab", Float32, []int{4, 11, 64}, 4459, [][]float64{xentPadMask(44, 11, 7, 8, 11)}, 0.1, 1e-6, 1e-5},
	}
	for _, c := range cases {
		masked := c.masks[0] != nil
		ps := NewParams(c.dt, 7)
		fused, err := projXentGraph(ps, c.shape, c.v, masked, c.eps, true, true)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		ref, err := projXentGraph(ps, c.shape, c.v, masked, c.eps, false, true)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		rng := rand.New(rand.NewPCG(uint64(c.v), 1))
		for run, mask := range c.masks {
			y := xentTargets(rng, shapeSize(c.shape)/c.shape[len(c.shape)-1], c.v)
			lf, gf, err := runProjXent(fused, y, mask)
			if err != nil {
				t.Fatalf("%s run %d: %v", c.name, run, err)
			}
			lr, gr, err := runProjXent(ref, y, mask)
			if err != nil {
				t.Fatalf("%s run %d: reference: %v", c.name, run, err)
			}
			if d := math.Abs(lf - lr); d > c.tol*math.Max(1, math.Abs(lr)) {
				t.Errorf("%s run %d: loss %.17g, composition %.17g", c.name, run, lf, lr)
			}
			for _, p := range []string{"h", "w", "b"} {
				if e := graphtest.RelDiff(gf[p], gr[p]); e > c.gradTo {
					t.Errorf("%s run %d: ∂L/∂%s rel diff %.3g", c.name, run, p, e)
				}
			}
			if mask != nil {
				// Skipped rows get exactly zero gradient.
				d := c.shape[len(c.shape)-1]
				for r, m := range mask {
					if m == 0 && slices.ContainsFunc(gf["h"][r*d:(r+1)*d], func(x float64) bool { return x != 0 }) {
						t.Errorf("%s run %d: skipped row %d has a nonzero ∂L/∂h", c.name, run, r)
					}
				}
			}
		}
	}
}

// TestProjectedCrossEntropyGradients checks ∂L/∂h, ∂L/∂W, ∂L/∂b by
// central differences, with rows skipped, weighted, or all kept.
func TestProjectedCrossEntropyGradients(t *testing.T) {
	t.Parallel()
	targets := []int{1, 4, 4, 0, 2, 3} // repeats within a sequence
	for _, eps := range []float64{0, 0.1} {
		for _, mc := range []struct {
			name string
			mask []float64
		}{{"padded", []float64{1, 1, 0, 1, 0, 0}}, {"weighted", []float64{0.5, 0, 2, 1, 1, 0}}, {"none", nil}} {
			_, err := CheckGradients(NewParams(Float64, 3), func(b *Builder) *Node {
				h := b.Param("h", []int{2, 3, 4}, Normal(1))
				w := b.Param("w", []int{4, 5}, Normal(1))
				bias := b.Param("b", []int{5}, Normal(1))
				var m *Node
				if mc.mask != nil {
					m = b.Constant("mask", []int{2, 3}, mc.mask)
				}
				return ProjectedCrossEntropy(h, w, bias, b.IndexConstant("y", []int{2, 3}, targets), m, eps)
			}, GradCheckOptions{Seed: 5})
			if err != nil {
				t.Errorf("ε = %g, mask %s: %v", eps, mc.name, err)
			}
		}
	}
}

// TestProjectedCrossEntropySkippedTargets: the target of a skipped row is
// never read, so any value there (even one out of range) leaves the loss
// and gradients bit for bit as they were.
func TestProjectedCrossEntropySkippedTargets(t *testing.T) {
	t.Parallel()
	mask := []float64{1, 0, 1, 0, 1, 0}
	base := []int{3, 0, 2, 1, 4, 0}
	for _, dt := range []DType{Float64, Float32} {
		p, err := projXentGraph(NewParams(dt, 2), []int{2, 3, 4}, 5, true, 0.1, true, true)
		if err != nil {
			t.Fatal(err)
		}
		l0, g0, err := runProjXent(p, base, mask)
		if err != nil {
			t.Fatal(err)
		}
		for _, skipped := range [][3]int{{4, 4, 4}, {1, 2, 3}, {-1, 5, 1 << 40}} {
			y := slices.Clone(base)
			y[1], y[3], y[5] = skipped[0], skipped[1], skipped[2]
			l, g, err := runProjXent(p, y, mask)
			if err != nil {
				t.Fatalf("%v skipped targets %v: %v", dt, skipped, err)
			}
			if l != l0 {
				t.Errorf("%v skipped targets %v: loss %v, was %v", dt, skipped, l, l0)
			}
			for _, name := range []string{"h", "w", "b"} {
				if !slices.Equal(g[name], g0[name]) {
					t.Errorf("%v skipped targets %v: ∂L/∂%s changed", dt, skipped, name)
				}
			}
		}
	}
}

// TestProjectedCrossEntropyErrors: a bad target on a live row or a batch
// with no live row fails the run; bad shapes or smoothing fail the build.
func TestProjectedCrossEntropyErrors(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		targets []int
		mask    []float64
	}{
		{"target V on a live row", []int{0, 5, 1, 2, 3, 4}, []float64{1, 1, 0, 1, 1, 1}},
		{"target −1 on a live row", []int{0, 1, 1, 2, 3, -1}, []float64{1, 1, 0, 1, 1, 1}},
		{"target V without a mask", []int{0, 1, 1, 2, 3, 5}, nil},
		{"every row masked", []int{0, 1, 1, 2, 3, 4}, []float64{0, 0, 0, 0, 0, 0}},
		{"weights summing to zero", []int{0, 1, 1, 2, 3, 4}, []float64{1, -1, 0, 0, 0, 0}},
	} {
		for _, train := range []bool{false, true} {
			p, err := projXentGraph(NewParams(Float64, 1), []int{2, 3, 4}, 5, c.mask != nil, 0, true, train)
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := runProjXent(p, c.targets, c.mask); err == nil {
				t.Errorf("%s (train %v): run succeeded", c.name, train)
			}
		}
	}
	for _, c := range []struct {
		name                string
		h, w, bias, y, mask []int
		eps                 float64
	}{
		{"w rows ≠ d", []int{2, 3, 4}, []int{5, 5}, []int{5}, []int{2, 3}, []int{2, 3}, 0},
		{"bias ≠ V", []int{2, 3, 4}, []int{4, 5}, []int{4}, []int{2, 3}, []int{2, 3}, 0},
		{"targets of another shape", []int{2, 3, 4}, []int{4, 5}, []int{5}, []int{3, 2}, []int{3, 2}, 0},
		{"mask of another shape", []int{2, 3, 4}, []int{4, 5}, []int{5}, []int{2, 3}, []int{6}, 0},
		{"h of rank 1", []int{4}, []int{4, 5}, []int{5}, []int{1}, []int{1}, 0},
		{"smoothing 1", []int{2, 3, 4}, []int{4, 5}, []int{5}, []int{2, 3}, []int{2, 3}, 1},
		{"smoothing < 0", []int{2, 3, 4}, []int{4, 5}, []int{5}, []int{2, 3}, []int{2, 3}, -0.1},
	} {
		_, err := Compile(NewParams(Float64, 1), func(b *Builder) error {
			h := b.Param("h", c.h, Normal(1))
			w := b.Param("w", c.w, Normal(1))
			bias := b.Param("b", c.bias, Normal(1))
			b.SetLoss(ProjectedCrossEntropy(h, w, bias, b.IndexInput("y", c.y...), b.Input("mask", c.mask...), c.eps))
			return nil
		}, true)
		if err == nil {
			t.Errorf("%s: compiled", c.name)
		}
	}
}

// TestProjectedCrossEntropyThreads: loss and gradients are bit-identical
// on one core and on two, at a size where every matrix product and the
// row loop split between workers.
func TestProjectedCrossEntropyThreads(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	shape, v := []int{8, 12, 64}, 600
	mask := xentPadMask(96, 12, 8, 12, 3, 10)
	y := xentTargets(rand.New(rand.NewPCG(4, 4)), 96, v)
	for _, dt := range []DType{Float32, Float64} {
		p, err := projXentGraph(NewParams(dt, 9), shape, v, true, 0.1, true, true)
		if err != nil {
			t.Fatal(err)
		}
		var losses []float64
		var grads []map[string][]float64
		for _, procs := range []int{1, 2, 1} {
			runtime.GOMAXPROCS(procs)
			l, g, err := runProjXent(p, y, mask)
			if err != nil {
				t.Fatal(err)
			}
			losses, grads = append(losses, l), append(grads, g)
		}
		for i := 1; i < len(losses); i++ {
			if losses[i] != losses[0] {
				t.Errorf("%v: loss %v on run %d, %v on run 0", dt, losses[i], i, losses[0])
			}
			for _, name := range []string{"h", "w", "b"} {
				if !slices.Equal(grads[i][name], grads[0][name]) {
					t.Errorf("%v: ∂L/∂%s of run %d differs from run 0", dt, name, i)
				}
			}
		}
	}
}

// TestProjectedCrossEntropyNaN: a NaN in a live row of h makes the loss
// NaN, in float32 too, so the trainer's divergence check sees it; a NaN
// in a skipped row is never read.
func TestProjectedCrossEntropyNaN(t *testing.T) {
	t.Parallel()
	mask := []float64{1, 0, 1, 1, 0, 1}
	for _, dt := range []DType{Float32, Float64} {
		for _, c := range []struct {
			row     int
			wantNaN bool
		}{{0, true}, {5, true}, {1, false}, {4, false}} {
			ps := NewParams(dt, 1)
			p, err := projXentGraph(ps, []int{2, 3, 4}, 5, true, 0.1, true, true)
			if err != nil {
				t.Fatal(err)
			}
			h := ps.Lookup("h").Values()
			h[c.row*4+2] = math.NaN()
			if err := ps.Lookup("h").SetValues(h); err != nil {
				t.Fatal(err)
			}
			l, _, err := runProjXent(p, []int{0, 1, 2, 3, 4, 0}, mask)
			if err != nil {
				t.Fatal(err)
			}
			if math.IsNaN(l) != c.wantNaN {
				t.Errorf("%v: NaN in row %d (mask %v): loss %v", dt, c.row, mask[c.row], l)
			}
		}
	}
}

// TestProjectedCrossEntropyBackwardRecomputes: a backward pass with no
// forward pass of its own run before it (a second backward, here)
// recomputes the forward instead of reading stale or consumed state, and
// gives the same gradients.
func TestProjectedCrossEntropyBackwardRecomputes(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(6, 6))
	dense := func(shape ...int) *tensor.Dense {
		return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(Normal(1)(rng, shape)))
	}
	in := []*tensor.Dense{
		dense(2, 3, 4), dense(4, 5), dense(5),
		tensor.New(tensor.WithShape(2, 3), tensor.WithBacking([]int{1, 4, 0, 2, 3, 3})),
		tensor.New(tensor.WithShape(2, 3), tensor.WithBacking([]float64{1, 0, 1, 1, 0.5, 0})),
		tensor.New(tensor.WithShape(1), tensor.WithBacking([]float64{1.5})),
	}
	k := projXentKernel{smoothing: 0.1, masked: true, saved: &projXentState{}}
	if err := k.do(in[:5], dense(1)); err != nil {
		t.Fatal(err)
	}
	var grads [2][3][]float64
	for run := range grads {
		outs := []*tensor.Dense{dense(4, 5), dense(2, 3, 4), dense(5)}
		kernels := []kernel{projXentGradW{k}, projXentGradH{k: k, shape: fix(tensor.Shape{2, 3, 4})}, projXentGradB{k}}
		args := [][]*tensor.Dense{in, {in[1], outs[0]}, {outs[0]}}
		for i, kn := range kernels {
			if err := kn.do(args[i], outs[i]); err != nil {
				t.Fatalf("backward %d, %s: %v", run, kn.name(), err)
			}
			grads[run][i] = slices.Clone(outs[i].Data().([]float64))
		}
	}
	for i := range grads[0] {
		if !slices.Equal(grads[0][i], grads[1][i]) {
			t.Errorf("gradient %d: %v after the forward, %v recomputed", i, grads[0][i], grads[1][i])
		}
	}
}

// TestProjectedCrossEntropyKeepsBuffers: after the first step, a
// forward and backward pass allocate next to nothing (goroutines and
// their closures), not the [rows, V] exponentials or the live rows again,
// whatever the number of live rows.
func TestProjectedCrossEntropyKeepsBuffers(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	dense := func(shape ...int) *tensor.Dense {
		return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(Normal(1)(rng, shape)))
	}
	const rows, d, v = 96, 64, 600 // e: 460 KB
	masks := [][]float64{xentPadMask(rows, 12, 8, 12, 3), xentPadMask(rows, 12, 5, 7), xentPadMask(rows, 12, 12)}
	mask := tensor.New(tensor.WithShape(rows), tensor.WithBacking(slices.Clone(masks[0])))
	in := []*tensor.Dense{
		dense(rows, d), dense(d, v), dense(v),
		tensor.New(tensor.WithShape(rows), tensor.WithBacking(xentTargets(rng, rows, v))),
		mask, tensor.New(tensor.WithShape(1), tensor.WithBacking([]float64{1})),
	}
	k := projXentKernel{smoothing: 0.1, masked: true, saved: &projXentState{}}
	loss, dW, dh, db := dense(1), dense(d, v), dense(rows, d), dense(v)
	step := func(i int) {
		copy(mask.Data().([]float64), masks[i%len(masks)])
		for _, err := range []error{
			k.do(in[:5], loss),
			projXentGradW{k}.do(in, dW),
			projXentGradH{k: k, shape: fix(tensor.Shape{rows, d})}.do([]*tensor.Dense{in[1], dW}, dh),
			projXentGradB{k}.do([]*tensor.Dense{dW}, db),
		} {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	step(0)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	const steps = 12
	for i := range steps {
		step(i + 1)
	}
	runtime.ReadMemStats(&after)
	perStep := (after.TotalAlloc - before.TotalAlloc) / steps
	if perStep > 64<<10 {
		t.Errorf("%d bytes allocated per step", perStep)
	}
	t.Logf("%d bytes allocated per step", perStep)
}

// BenchmarkProjectedCrossEntropy times a training step's forward and
// backward of the output layer at the eng-fra shape: 64 sentences of 11
// target positions (704 rows, 32% padding), d_model 64, a 4,459-word
// vocabulary, float32. "fused" is ProjectedCrossEntropy; "composed" is
// Linear + SoftmaxCrossEntropy + the masked mean, as the trainer builds
// it today.
func BenchmarkProjectedCrossEntropy(b *testing.B) {
	full := make([]float64, 1024)
	for i := range full {
		full[i] = 1
	}
	for _, sz := range []struct {
		name  string
		shape []int
		v     int
		mask  []float64
	}{
		// English→French: 480 live rows of 704, 31.8% padding.
		{"engfra", []int{64, 11, 64}, 4459, xentPadMask(704, 11, 7, 8)},
		// BenchmarkSeq2SeqStep's output layer: no padding.
		{"bench64", []int{64, 16, 64}, 64, full},
	} {
		rows := sz.shape[0] * sz.shape[1]
		y := xentTargets(rand.New(rand.NewPCG(1, 1)), rows, sz.v)
		for _, c := range []struct {
			name  string
			fused bool
		}{{"fused", true}, {"composed", false}} {
			b.Run(sz.name+"/"+c.name, func(b *testing.B) {
				p, err := projXentGraph(NewParams(Float32, 1), sz.shape, sz.v, true, 0.1, c.fused, true)
				if err != nil {
					b.Fatal(err)
				}
				if err := p.FeedIndices("y", y); err != nil {
					b.Fatal(err)
				}
				if err := p.Feed("mask", sz.mask); err != nil {
					b.Fatal(err)
				}
				for b.Loop() {
					if err := p.Run(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
