package graph

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// shardModel is a small model with everything a shard must split: a
// batched input, an unbatched one, a dropout mask, noise, and a loss that
// is a mean over masked rows (weighted, SetLossWeight).
func shardModel(batch int) BuildFunc {
	return func(b *Builder) error {
		x := b.Input("x", batch, 3)
		m := b.Input("m", batch, 1)
		scale := b.Input("scale", 4)
		w := b.Param("w", []int{3, 4}, Glorot)
		h := b.Dropout("drop", MatMul(x, w), 0.3) // [batch, 4]
		e := b.Noise("e", NormalNoise, batch, 4)
		y := Add(h, BroadcastMul(e, scale, 0))
		b.Output("drop_mask", b.nodes["drop"])
		b.Output("noise", e)
		perRow := Mul(Sum(Square(y), 1), Reshape(m, batch)) // [batch]
		weight := Sum(m)
		b.SetLoss(Div(Sum(perRow), weight))
		b.SetLossWeight(weight)
		return nil
	}
}

// TestShardsAddUpToTheBatch checks that two shards of a batch, fed the
// whole batch and drawing from the same generators, keep their own rows
// and their parts of the masks and noise, and that their gradients
// weighted by their loss weights add up to the gradient of the whole
// batch, in float64 to rounding.
func TestShardsAddUpToTheBatch(t *testing.T) {
	t.Parallel()
	const batch, parts = 6, 2
	x := make([]float64, batch*3)
	for i := range x {
		x[i] = math.Sin(float64(i) + 0.5)
	}
	mask := []float64{1, 1, 0, 1, 1, 1} // shards of unequal real counts
	run := func(prog *Program) {
		t.Helper()
		for _, f := range []struct {
			name string
			v    []float64
		}{{"x", x}, {"m", mask}, {"scale", []float64{0.25, -0.5, 1, 2}}} {
			if err := prog.Feed(f.name, f.v); err != nil {
				t.Fatal(err)
			}
		}
		prog.DrawDropout(rand.New(rand.NewPCG(7, 1)))
		prog.DrawNoise(rand.New(rand.NewPCG(7, 2)))
		if err := prog.Run(); err != nil {
			t.Fatal(err)
		}
	}
	params := NewParams(Float64, 3)
	whole, err := Compile(params, shardModel(batch), true)
	if err != nil {
		t.Fatal(err)
	}
	run(whole)
	want, err := whole.AppendGradients(nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	wantMask, _, _ := whole.Output("drop_mask")
	wantNoise, _, _ := whole.Output("noise")

	sum := make([]float64, len(want))
	var lossSum, weightSum float64
	var gotMask, gotNoise []float64
	for part := range parts {
		prog, err := Compile(params, shardModel(batch/parts), true)
		if err != nil {
			t.Fatal(err)
		}
		if err := prog.Shard(part, parts, shardModel(batch)); err != nil {
			t.Fatal(err)
		}
		run(prog)
		w := prog.LossWeight()
		g, err := prog.AppendGradients(nil, w)
		if err != nil {
			t.Fatal(err)
		}
		for i := range g {
			sum[i] += g[i]
		}
		lossSum += w * prog.Loss()
		weightSum += w
		m, _, _ := prog.Output("drop_mask")
		n, _, _ := prog.Output("noise")
		gotMask, gotNoise = append(gotMask, m...), append(gotNoise, n...)
	}
	if weightSum != 4+1 {
		t.Fatalf("loss weights sum to %v, want 5", weightSum)
	}
	if !slices.Equal(gotMask, wantMask) || !slices.Equal(gotNoise, wantNoise) {
		t.Fatal("the shards' dropout masks and noise are not the whole batch's")
	}
	if d := math.Abs(lossSum/weightSum - whole.Loss()); d > 1e-14 {
		t.Fatalf("weighted shard loss %v, whole batch %v", lossSum/weightSum, whole.Loss())
	}
	for i := range want {
		if d := math.Abs(sum[i]/weightSum - want[i]); d > 1e-14*(1+math.Abs(want[i])) {
			t.Fatalf("gradient %d: shards %v, whole batch %v", i, sum[i]/weightSum, want[i])
		}
	}

	// The averaged gradient set back is what the optimizer steps on.
	prog, err := Compile(params, shardModel(batch/parts), true)
	if err != nil {
		t.Fatal(err)
	}
	if err := prog.Shard(1, parts, shardModel(batch)); err != nil {
		t.Fatal(err)
	}
	run(prog)
	rest, err := prog.SetGradients(append(sum, 42), 1/weightSum)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rest, []float64{42}) {
		t.Fatalf("SetGradients left %v, want [42]", rest)
	}
	back, _ := prog.AppendGradients(nil, 1)
	for i := range back {
		if math.Abs(back[i]-want[i]) > 1e-14*(1+math.Abs(want[i])) {
			t.Fatalf("set gradient %d = %v, want %v", i, back[i], want[i])
		}
	}
}

func TestShardErrors(t *testing.T) {
	t.Parallel()
	params := NewParams(Float32, 1)
	prog, err := Compile(params, shardModel(3), true)
	if err != nil {
		t.Fatal(err)
	}
	if err := prog.Shard(2, 2, shardModel(6)); err == nil {
		t.Fatal("part 2 of 2 accepted")
	}
	if err := prog.Shard(0, 2, shardModel(5)); err == nil {
		t.Fatal("a global graph of batch 5 accepted for 2 shards of 3")
	}
	if err := prog.Shard(0, 2, shardModel(6)); err != nil {
		t.Fatal(err)
	}
	if s := prog.InputShape("x"); !slices.Equal(s, []int{6, 3}) {
		t.Fatalf("a shard's batched input has shape %v, want the global [6 3]", s)
	}
	if s := prog.InputShape("scale"); !slices.Equal(s, []int{4}) {
		t.Fatalf("a shard's unbatched input has shape %v, want [4]", s)
	}
	if err := prog.Feed("x", make([]float64, 9)); err == nil || !strings.Contains(err.Error(), "global batch") {
		t.Fatalf("a shard fed its own share of a batched input: %v, want an error naming the global batch", err)
	}
	if err := prog.Feed("scale", make([]float64, 4)); err != nil {
		t.Fatal(err)
	}
	odd := func(n int) BuildFunc {
		return func(b *Builder) error {
			w := b.Param("v", []int{n, 3}, Glorot)
			e := b.Noise("e", UniformNoise, n, 3)
			b.SetLoss(Sum(Mul(e, w)))
			return nil
		}
	}
	p3, err := Compile(NewParams(Float32, 1), odd(1), true)
	if err != nil {
		t.Fatal(err)
	}
	if err := p3.Shard(0, 2, odd(2)); err == nil {
		t.Fatal("an odd noise input accepted")
	}
	eval, err := Compile(NewParams(Float32, 1), odd(2), false)
	if err != nil {
		t.Fatal(err)
	}
	if err := eval.Shard(0, 2, odd(4)); err == nil {
		t.Fatal("an evaluation program sharded")
	}
}
