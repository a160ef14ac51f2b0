package graph

import (
	"math"
	"strings"
	"testing"
)

// embeddingIDs are [2, 3] ids into a table of 5 rows; ids 1 and 4 repeat,
// so their table rows collect two and three gradient contributions.
var embeddingIDs = []int{1, 4, 1, 4, 0, 4}

func TestEmbeddingGradient(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		fn   func(b *Builder) *Node
	}{
		{"ids-2d", func(b *Builder) *Node {
			return Embedding(b.Param("table", []int{5, 3}, Normal(1)), b.IndexConstant("ids", []int{2, 3}, embeddingIDs))
		}},
		{"ids-1d", func(b *Builder) *Node {
			return Embedding(b.Param("table", []int{5, 3}, Normal(1)), b.IndexConstant("ids", []int{6}, embeddingIDs))
		}},
		{"then-inplace", func(b *Builder) *Node {
			// An in-place op on the lookup must not write into the table.
			e := Embedding(b.Param("table", []int{5, 3}, Normal(1)), b.IndexConstant("ids", []int{2, 3}, embeddingIDs))
			return Square(AddScalar(e, -1))
		}},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := CheckGradients(NewParams(Float64, uint64(i+1)), c.fn, GradCheckOptions{Seed: uint64(i)}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestEmbeddingScatterAdd checks the gradient of Σ out ⊙ R against the
// scatter-add written out: row v of the gradient is the sum of R's rows at
// the positions whose id is v; unused rows get 0.
func TestEmbeddingScatterAdd(t *testing.T) {
	t.Parallel()
	for _, dt := range []DType{Float32, Float64} {
		ps := NewParams(dt, 3)
		r := []float64{
			1, 2, 3, 4, 5, 6, 7, 8, 9,
			10, 11, 12, 13, 14, 15, 16, 17, 18,
		}
		prog, err := Compile(ps, func(b *Builder) error {
			e := Embedding(b.Param("table", []int{5, 3}, Normal(1)), b.IndexInput("ids", 2, 3))
			b.Output("e", e)
			b.SetLoss(Sum(Mul(e, b.Constant("r", []int{2, 3, 3}, r))))
			return nil
		}, true)
		if err != nil {
			t.Fatal(err)
		}
		if err := prog.FeedIndices("ids", embeddingIDs); err != nil {
			t.Fatal(err)
		}
		// Run twice: the second run must not add to the first's gradient.
		for range 2 {
			if err := prog.Run(); err != nil {
				t.Fatal(err)
			}
		}
		table := ps.Lookup("table").Values()
		out, shape, _ := prog.Output("e")
		if len(shape) != 3 || shape[0] != 2 || shape[1] != 3 || shape[2] != 3 {
			t.Fatalf("%v: output shape %v, want [2 3 3]", dt, shape)
		}
		for p, id := range embeddingIDs {
			for c := range 3 {
				if got, want := out[p*3+c], table[id*3+c]; got != want {
					t.Fatalf("%v: out[%d,%d] = %v, want table[%d,%d] = %v", dt, p, c, got, id, c, want)
				}
			}
		}
		grads, err := prog.Gradients()
		if err != nil {
			t.Fatal(err)
		}
		want := []float64{
			13, 14, 15, // id 0 at position 4
			1 + 7, 2 + 8, 3 + 9, // id 1 at positions 0, 2
			0, 0, 0,
			0, 0, 0,
			4 + 10 + 16, 5 + 11 + 17, 6 + 12 + 18, // id 4 at positions 1, 3, 5
		}
		for i, g := range grads["table"] {
			if math.Abs(g-want[i]) > 0 {
				t.Fatalf("%v: gradient %v, want %v", dt, grads["table"], want)
			}
		}
	}
}

func TestIndexConstantSizeMismatch(t *testing.T) {
	t.Parallel()
	_, err := Compile(NewParams(Float64, 1), func(b *Builder) error {
		b.IndexConstant("ids", []int{2, 3}, []int{1, 2})
		return nil
	}, false)
	if err == nil {
		t.Fatal("IndexConstant accepted 2 ids for shape [2 3]")
	}
}

// TestEmbeddingIDOutOfRange: an id past the table fails the run with an
// error instead of reading another row.
func TestEmbeddingIDOutOfRange(t *testing.T) {
	t.Parallel()
	prog, err := Compile(NewParams(Float64, 1), func(b *Builder) error {
		b.Output("e", Embedding(b.Param("table", []int{5, 3}, Normal(1)), b.IndexInput("ids", 2, 3)))
		return nil
	}, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, ids := range [][]int{{0, 1, 2, 3, 4, 5}, {0, 1, -1, 3, 4, 0}} {
		if err := prog.FeedIndices("ids", ids); err != nil {
			t.Fatal(err)
		}
		if err := prog.Run(); err == nil || !strings.Contains(err.Error(), "outside [0, 5)") {
			t.Errorf("ids %v into 5 rows: error %v", ids, err)
		}
	}
	// The program still runs on good ids after a failed run.
	if err := prog.FeedIndices("ids", []int{4, 3, 2, 1, 0, 4}); err != nil {
		t.Fatal(err)
	}
	if err := prog.Run(); err != nil {
		t.Fatal(err)
	}
}
