package graph

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/probformer/probformer/graph/graphtest"
)

// embedTokensGraph is (scale·table[ids] + pos) ⊙ D, composed of
// Embedding, Scale, BroadcastAdd and the dropout product, or fused
// (EmbedTokens' kernel); pos or drop nil leave that step out.
func embedTokensGraph(b *Builder, v, bt, t, d int, ids []int, pos, drop []float64, fused bool) *Node {
	table := b.Param("table", []int{v, d}, Normal(1))
	idn := b.IndexConstant("ids", []int{bt, t}, ids)
	var posN, dropN *Node
	if pos != nil {
		posN = b.Constant("pos", []int{t, d}, pos)
	}
	if drop != nil {
		dropN = b.Constant("drop", []int{bt, t, d}, drop)
	}
	const scale = 2.5
	if fused {
		k := tokenEmbedKernel{scale: scale, pos: pos != nil, dropout: drop != nil}
		in := []*Node{table, idn}
		if posN != nil {
			in = append(in, posN)
		}
		if dropN != nil {
			in = append(in, dropN)
		}
		return apply(k, in...)
	}
	x := Scale(Embedding(table, idn), scale)
	if posN != nil {
		x = BroadcastAdd(x, posN, 0)
	}
	if dropN != nil {
		x = apply(mulKernel{constB: true}, x, dropN)
	}
	return x
}

// TestEmbedTokensIsComposed: the fused input layer gives the composed
// ops' output and table gradient bit for bit, in float64 and float32,
// with ids used several times, with and without the positional encoding
// and dropout.
func TestEmbedTokensIsComposed(t *testing.T) {
	t.Parallel()
	const v, bt, tt, d = 7, 5, 6, 16
	rng := rand.New(rand.NewPCG(4, 4))
	ids := make([]int, bt*tt)
	for i := range ids {
		ids[i] = rng.IntN(v)
	}
	pos := Normal(1)(rng, []int{tt * d})
	drop := reluDropMask(bt*tt*d, 5)
	r := Normal(1)(rng, []int{bt * tt * d})
	for _, withPos := range []bool{true, false} {
		for _, withDrop := range []bool{true, false} {
			p, dr := pos, drop
			if !withPos {
				p = nil
			}
			if !withDrop {
				dr = nil
			}
			for _, dt := range []DType{Float64, Float32} {
				run := func(fused bool) graphtest.Result {
					prog, err := Compile(NewParams(dt, 2), func(b *Builder) error {
						y := embedTokensGraph(b, v, bt, tt, d, ids, p, dr, fused)
						b.Output("y", y)
						b.SetLoss(Sum(Mul(y, b.Constant("r", []int{bt, tt, d}, r))))
						return nil
					}, true)
					if err != nil {
						t.Fatal(err)
					}
					return graphtest.Run(t, prog, "y")
				}
				graphtest.ExpectRunsClose(t, fmt.Sprintf("pos=%v dropout=%v %v", withPos, withDrop, dt), run(true), run(false), 0, nil)
			}
		}
	}
}

// TestEmbedTokensGradients: float64 finite differences.
func TestEmbedTokensGradients(t *testing.T) {
	t.Parallel()
	ids := []int{0, 2, 2, 1, 0, 3}
	pos := []float64{0.1, -0.2, 0.3, 0.4, 0.5, -0.6, 0.7, 0.8, 0.9}
	drop := []float64{0, 2, 2, 2, 0, 2, 2, 2, 2, 0, 2, 2, 2, 2, 2, 0, 2, 2}
	fn := func(b *Builder) *Node { return Tanh(embedTokensGraph(b, 4, 2, 3, 3, ids, pos, drop, true)) }
	if _, err := CheckGradients(NewParams(Float64, 90), fn, GradCheckOptions{Seed: 1}); err != nil {
		t.Fatal(err)
	}
}

// TestEmbedTokensBadID: an id outside [0, V) fails the run with an error
// naming it; a training graph declares the dropout mask input, an
// evaluation graph none.
func TestEmbedTokensBadID(t *testing.T) {
	t.Parallel()
	for _, train := range []bool{true, false} {
		p, err := Compile(NewParams(Float32, 1), func(b *Builder) error {
			y := b.EmbedTokens("emb.drop", b.Param("table", []int{4, 8}, Normal(1)), b.IndexInput("ids", 2, 3), 2, nil, 0.1)
			b.Output("y", y)
			b.SetLoss(Sum(y))
			return nil
		}, train)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Feed("emb.drop", make([]float64, 48)); (err == nil) != train {
			t.Fatalf("train=%v: feeding the mask: %v", train, err)
		}
		if err := p.FeedIndices("ids", []int{0, 1, 2, 3, 4, 0}); err != nil {
			t.Fatal(err)
		}
		if err := p.Run(); err == nil || !strings.Contains(err.Error(), "index 4") {
			t.Fatalf("train=%v: run with id 4 of 4: %v", train, err)
		}
	}
}
