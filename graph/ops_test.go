package graph

import (
	"math"
	"math/rand/v2"
	"testing"
)

// randParam declares a float64 parameter of the given shape filled from a
// fixed seed, for use as a differentiable test input.
func randParam(b *Builder, name string, shape ...int) *Node {
	return b.Param(name, shape, Normal(1))
}

func TestOpGradients(t *testing.T) {
	t.Parallel()
	mask := []float64{1, 1, 0, 1, 1, 1, 1, 0} // [2, 4]
	cases := []struct {
		name string
		fn   func(b *Builder) *Node
	}{
		{"linear2d", func(b *Builder) *Node {
			return Linear(randParam(b, "x", 3, 4), randParam(b, "w", 4, 5), randParam(b, "b", 5))
		}},
		{"linear3d", func(b *Builder) *Node {
			return Linear(randParam(b, "x", 2, 3, 4), randParam(b, "w", 4, 5), randParam(b, "b", 5))
		}},
		{"linear-relu", func(b *Builder) *Node {
			return LinearReLU(randParam(b, "x", 2, 3, 4), randParam(b, "w", 4, 5), randParam(b, "b", 5))
		}},
		{"linear-relu-nobias", func(b *Builder) *Node {
			return LinearReLU(randParam(b, "x", 3, 4), randParam(b, "w", 4, 5), nil)
		}},
		{"linear4d-nobias", func(b *Builder) *Node {
			return Linear(randParam(b, "x", 2, 2, 3, 4), randParam(b, "w", 4, 2), nil)
		}},
		{"layernorm", func(b *Builder) *Node {
			return LayerNorm(randParam(b, "x", 2, 3, 4), randParam(b, "g", 4), randParam(b, "b", 4), 1e-5)
		}},
		{"softmax-last", func(b *Builder) *Node { return Softmax(Scale(randParam(b, "x", 2, 3, 4), 3), 2) }},
		{"softmax-mid", func(b *Builder) *Node { return Softmax(randParam(b, "x", 2, 3, 4), 1) }},
		{"logsoftmax", func(b *Builder) *Node { return LogSoftmax(randParam(b, "x", 2, 3, 4), 2) }},
		{"logsumexp", func(b *Builder) *Node { return LogSumExp(randParam(b, "x", 2, 3, 4), 2) }},
		{"logsumexp-axis0", func(b *Builder) *Node { return LogSumExp(randParam(b, "x", 3, 4), 0) }},
		{"masked-softmax", func(b *Builder) *Node {
			return MaskedSoftmax(randParam(b, "s", 2, 3, 2, 4), b.Constant("mask", []int{2, 4}, mask))
		}},
		{"reshape-then-inplace", func(b *Builder) *Node {
			// The aliasing trap: an in-place op after a reshape of a value
			// whose backward still needs it.
			x := Tanh(randParam(b, "x", 2, 6))
			y := Reshape(x, 3, 4)
			return Add(Square(AddScalar(y, -1)), Reshape(x, 3, 4))
		}},
		{"reshape-param", func(b *Builder) *Node {
			return Mean(Square(AddScalar(Reshape(randParam(b, "w", 2, 6), 12), -1)))
		}},
		{"inv-sqrt", func(b *Builder) *Node { return InvSqrt(AddScalar(Square(randParam(b, "x", 3, 4)), 0.5)) }},
		{"pow", func(b *Builder) *Node { return Pow(AddScalar(Square(randParam(b, "x", 3, 4)), 0.5), -0.5) }},
		{"concat", func(b *Builder) *Node {
			return Concat(1, randParam(b, "a", 2, 3), randParam(b, "c", 2, 2))
		}},
		{"concat-one", func(b *Builder) *Node {
			return Square(Concat(0, Exp(randParam(b, "a", 2, 3))))
		}},
		{"slice", func(b *Builder) *Node { return Exp(SliceAxis(randParam(b, "x", 2, 5, 3), 1, 1, 4)) }},
		{"bmm-4d-transposed", func(b *Builder) *Node {
			return BatchedMatMul(randParam(b, "a", 2, 2, 3, 4), randParam(b, "c", 2, 2, 5, 4), false, true)
		}},
		{"transpose-heads", func(b *Builder) *Node {
			x := Reshape(randParam(b, "x", 2, 3, 4), 2, 3, 2, 2)
			return Sigmoid(Transpose(x, 0, 2, 1, 3))
		}},
		{"tile", func(b *Builder) *Node { return Tanh(b.Tile("tile", randParam(b, "s", 2, 3), 4)) }},
		{"broadcast", func(b *Builder) *Node {
			x := randParam(b, "x", 2, 3, 4)
			return BroadcastDiv(BroadcastMul(x, randParam(b, "v", 4), 0, 1), AddScalar(Square(randParam(b, "r", 2, 3)), 1), 2)
		}},
		{"unary", func(b *Builder) *Node {
			x := randParam(b, "x", 3, 4)
			return Add(Add(Softplus(x), Log1p(Square(x))), Add(Abs(AddScalar(x, 3)), Neg(ReLU(Sub(x, Scale(x, 0.5))))))
		}},
		{"add-mul", func(b *Builder) *Node {
			x, y := randParam(b, "x", 2, 3, 4), randParam(b, "y", 2, 3, 4)
			return Mul(Add(x, Tanh(y)), Add(Mul(x, x), y))
		}},
		{"scale", func(b *Builder) *Node { return Tanh(Scale(randParam(b, "x", 2, 3), -1.5)) }},
		{"broadcast-add-leading", func(b *Builder) *Node {
			x := randParam(b, "x", 2, 3, 4)
			return Tanh(BroadcastAdd(BroadcastAdd(x, randParam(b, "m", 3, 4), 0), randParam(b, "v", 4), 0, 1))
		}},
		{"maximum", func(b *Builder) *Node { return Maximum(randParam(b, "a", 3, 4), randParam(b, "c", 3, 4)) }},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ps := NewParams(Float64, uint64(i+1))
			res, err := CheckGradients(ps, c.fn, GradCheckOptions{Seed: uint64(i)})
			if err != nil {
				t.Fatal(err)
			}
			if len(res) == 0 {
				t.Fatal("no parameter checked")
			}
		})
	}
}

// TestCheckGradientsCatchesWrongGradient makes sure the checker can fail:
// Gorgonia's own InverseSqrt has a wrong gradient.
func TestCheckGradientsCatchesWrongGradient(t *testing.T) {
	t.Parallel()
	ps := NewParams(Float64, 1)
	_, err := CheckGradients(ps, func(b *Builder) *Node {
		x := AddScalar(Square(randParam(b, "x", 3)), 1)
		return must(gInverseSqrt(x))
	}, GradCheckOptions{})
	if err == nil {
		t.Fatal("a wrong gradient passed the check")
	}
}

func runForward(t *testing.T, dt DType, fn func(b *Builder) *Node) ([]float64, []int) {
	t.Helper()
	var shape []int
	outs, err := Evaluate(NewParams(dt, 1), func(b *Builder) error {
		out := fn(b)
		shape = Shape(out)
		b.Output("out", out)
		return nil
	}, "out")
	if err != nil {
		t.Fatal(err)
	}
	return outs[0], shape
}

func refSoftmax(row []float64) []float64 {
	m := math.Inf(-1)
	for _, v := range row {
		m = math.Max(m, v)
	}
	out := make([]float64, len(row))
	var s float64
	for i, v := range row {
		out[i] = math.Exp(v - m)
		s += out[i]
	}
	for i := range out {
		out[i] /= s
	}
	return out
}

// TestSoftmaxExtremes covers the rows on which Gorgonia's SoftMax returns
// NaN: a row far from the tensor's first element, large negative rows, and
// rows whose keys are all masked.
func TestSoftmaxExtremes(t *testing.T) {
	t.Parallel()
	rows := [][]float64{
		{100, 0, 0},
		{-200, -200, -200},
		{-1000, -999, -1001},
		{0, 1, 2},
		{-1e9, -1e9, -1e9},
		{800, -800, 0},
	}
	var flat []float64
	for _, r := range rows {
		flat = append(flat, r...)
	}
	for _, dt := range []DType{Float32, Float64} {
		got, _ := runForward(t, dt, func(b *Builder) *Node {
			return Softmax(b.Constant("x", []int{len(rows), 3}, flat), 1)
		})
		for i, r := range rows {
			want := refSoftmax(r)
			for j := range want {
				if g := got[i*3+j]; math.Abs(g-want[j]) > 1e-6 || math.IsNaN(g) {
					t.Errorf("%v row %v: got %v, want %v", dt, r, got[i*3:i*3+3], want)
					break
				}
			}
		}
	}
}

func TestMaskedSoftmaxZeroesPadding(t *testing.T) {
	t.Parallel()
	scores := []float64{1, 2, 3, 4, 5, 6, 7, 8} // [2, 1, 1, 4]
	mask := []float64{1, 1, 0, 0, 0, 0, 0, 0}   // second example all padding
	got, _ := runForward(t, Float64, func(b *Builder) *Node {
		return MaskedSoftmax(b.Constant("s", []int{2, 1, 1, 4}, scores), b.Constant("m", []int{2, 4}, mask))
	})
	want := []float64{0.268941421369995, 0.731058578630005, 0, 0}
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-15 {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
	var s float64
	for _, v := range got[4:] {
		if math.IsNaN(v) {
			t.Fatalf("fully masked row is NaN: %v", got)
		}
		s += v
	}
	if math.Abs(s-1) > 1e-12 {
		t.Fatalf("fully masked row sums to %v", s)
	}
}

func TestLogSumExpAndLogSoftmax(t *testing.T) {
	t.Parallel()
	x := []float64{1000, 1000, -1000, 0.5, 0.25, -3}
	lse, _ := runForward(t, Float64, func(b *Builder) *Node { return LogSumExp(b.Constant("x", []int{2, 3}, x), 1) })
	want := []float64{1000.693147180559945, 1.092773192865781}
	for i := range want {
		if math.Abs(lse[i]-want[i]) > 1e-12 {
			t.Fatalf("logsumexp: got %v, want %v", lse, want)
		}
	}
	ls, _ := runForward(t, Float64, func(b *Builder) *Node { return LogSoftmax(b.Constant("x", []int{2, 3}, x), 1) })
	for i := range x {
		if w := x[i] - want[i/3]; math.Abs(ls[i]-w) > 1e-12 {
			t.Fatalf("logsoftmax[%d]: got %v, want %v", i, ls[i], w)
		}
	}
}

func TestLayerNormForward(t *testing.T) {
	t.Parallel()
	x := []float64{1, 2, 3, 4, -1, 0, 1, 10}
	got, _ := runForward(t, Float64, func(b *Builder) *Node {
		return LayerNorm(b.Constant("x", []int{2, 4}, x), b.Param("g", []int{4}, Ones), b.Param("b", []int{4}, Zeros), 0)
	})
	want := []float64{
		-1.341640786499874, -0.447213595499958, 0.447213595499958, 1.341640786499874,
		-0.797724035217466, -0.56980288229819, -0.341881729378914, 1.70940864689457,
	}
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-14 {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
}

func TestLinearForward(t *testing.T) {
	t.Parallel()
	got, shape := runForward(t, Float64, func(b *Builder) *Node {
		x := b.Constant("x", []int{1, 2, 3}, []float64{1, 2, 3, 4, 5, 6})
		w := b.Constant("w", []int{3, 2}, []float64{1, 0, 0, 1, 1, 1})
		return Linear(x, w, b.Constant("b", []int{2}, []float64{10, 20}))
	})
	want := []float64{14, 25, 20, 31}
	if len(shape) != 3 || shape[2] != 2 {
		t.Fatalf("shape %v", shape)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
}

func TestDropout(t *testing.T) {
	t.Parallel()
	ps := NewParams(Float64, 1)
	fn := func(b *Builder) error {
		x := b.Param("x", []int{100, 100}, Ones)
		y := b.Dropout("drop", x, 0.25)
		b.Output("y", y)
		b.SetLoss(Sum(y))
		return nil
	}
	train, err := Compile(ps, fn, true)
	if err != nil {
		t.Fatal(err)
	}
	train.DrawDropout(rand.New(rand.NewPCG(1, 2)))
	if err := train.Run(); err != nil {
		t.Fatal(err)
	}
	y, _, _ := train.Output("y")
	zeros := 0
	for _, v := range y {
		switch {
		case v == 0:
			zeros++
		case math.Abs(v-4.0/3) > 1e-15:
			t.Fatalf("kept unit scaled to %v, want 4/3", v)
		}
	}
	if frac := float64(zeros) / 1e4; math.Abs(frac-0.25) > 0.02 {
		t.Fatalf("dropped fraction %v, want 0.25", frac)
	}
	g, _ := train.Gradients()
	for i, v := range g["x"] {
		if v != y[i] {
			t.Fatalf("gradient %v at %d, want mask value %v", v, i, y[i])
		}
	}
	outs, err := Evaluate(ps, fn, "y")
	if err != nil {
		t.Fatal(err)
	}
	if y := outs[0]; y[0] != 1 || y[len(y)-1] != 1 {
		t.Fatal("dropout active in an evaluation graph")
	}
}

// TestReductionsOverMiddleAxes: Gorgonia's own Sum, Mean and Max are wrong
// over axes 2 … rank−2; these wrappers are not.
func TestReductionsOverMiddleAxes(t *testing.T) {
	t.Parallel()
	x := make([]float64, 2*2*3*2*2)
	for i := range x {
		x[i] = float64((i * 7) % 11)
	}
	shape := []int{2, 2, 3, 2, 2}
	ref := func(axes map[int]bool, op string) []float64 {
		var out []float64
		idx := make([]int, 5)
		acc := map[string][]float64{}
		var order []string
		for i := range x {
			r := i
			for a := 4; a >= 0; a-- {
				idx[a] = r % shape[a]
				r /= shape[a]
			}
			key := ""
			for a := range 5 {
				if !axes[a] {
					key += string(rune('0' + idx[a]))
				}
			}
			if _, ok := acc[key]; !ok {
				order = append(order, key)
			}
			acc[key] = append(acc[key], x[i])
		}
		for _, k := range order {
			v := acc[k]
			switch op {
			case "sum", "mean":
				var s float64
				for _, e := range v {
					s += e
				}
				if op == "mean" {
					s /= float64(len(v))
				}
				out = append(out, s)
			case "max":
				m := v[0]
				for _, e := range v {
					m = math.Max(m, e)
				}
				out = append(out, m)
			}
		}
		return out
	}
	for _, axes := range [][]int{{2}, {3}, {1}, {2, 3}, {1, 3}, {0, 2}} {
		set := map[int]bool{}
		for _, a := range axes {
			set[a] = true
		}
		for _, op := range []string{"sum", "mean", "max"} {
			if op == "max" && len(axes) > 1 {
				continue
			}
			got, _ := runForward(t, Float64, func(b *Builder) *Node {
				c := b.Constant("x", shape, x)
				switch op {
				case "sum":
					return Sum(c, axes...)
				case "mean":
					return Mean(c, axes...)
				}
				return Max(c, axes[0])
			})
			want := ref(set, op)
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("%s over %v: got %v, want %v", op, axes, got, want)
				}
			}
		}
	}
	if _, err := CheckGradients(NewParams(Float64, 3), func(b *Builder) *Node {
		return Square(Sum(b.Param("x", []int{2, 2, 3, 2}, Normal(1)), 2))
	}, GradCheckOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err := Compile(NewParams(Float64, 1), func(b *Builder) error {
		BroadcastAdd(b.Input("a", 2, 3, 4, 5), b.Input("c", 2, 3, 5), 2)
		return nil
	}, false)
	if err == nil {
		t.Fatal("a broadcast over a middle axis was accepted")
	}
}
