package tasks

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/probformer/probformer/configs"
)

// TestEpochOrderVisitsEachOnce: each epoch is a permutation, epochs differ,
// and drawing from the middle (a resumed run) gives the same examples.
func TestEpochOrderVisitsEachOnce(t *testing.T) {
	const n = 37
	o := newEpochOrder(7, n)
	var draws []int
	for k := range 3 * n {
		draws = append(draws, o.at(k))
	}
	for e := range 3 {
		got := slices.Clone(draws[e*n : (e+1)*n])
		slices.Sort(got)
		for i, v := range got {
			if v != i {
				t.Fatalf("epoch %d is not a permutation of [0, %d): sorted %v", e, n, got)
			}
		}
	}
	if slices.Equal(draws[:n], draws[n:2*n]) {
		t.Fatal("epochs 0 and 1 have the same order")
	}
	resumed := newEpochOrder(7, n)
	for k := 50; k < 3*n; k++ {
		if got := resumed.at(k); got != draws[k] {
			t.Fatalf("draw %d: resumed order gives %d, straight %d", k, got, draws[k])
		}
	}
	if other := newEpochOrder(8, n); slices.Equal(draws[:n], func() []int {
		var d []int
		for k := range n {
			d = append(d, other.at(k))
		}
		return d
	}()) {
		t.Fatal("seeds 7 and 8 give the same order")
	}
}

// TestEpochSamplingDrawsEachPairOnce: with data.sampling epochs the
// batches of a seq2seq run's first epoch hold every training pair once,
// and the second epoch starts another order; with_replacement repeats
// some pairs within an epoch's worth of draws.
func TestEpochSamplingDrawsEachPairOnce(t *testing.T) {
	for _, c := range []struct {
		sampling string
		once     bool
	}{{"epochs", true}, {"with_replacement", false}} {
		cfg, err := configs.Load("seq2seq-toy", []string{"data.train_pairs=96", "data.valid_pairs=8", "data.test_pairs=8",
			"training.batch=8", "data.sampling=" + c.sampling})
		if err != nil {
			t.Fatal(err)
		}
		tk, err := newSeq2Seq(cfg, cfg.Data.(*Seq2SeqData), cfg.Model.(*TransformerModel), nil)
		if err != nil {
			t.Fatal(err)
		}
		n := len(tk.train)
		rng := rand.New(rand.NewPCG(1, 2))
		seen := map[string]int{}
		var draws []string
		for step := 1; len(draws) < 2*n; step++ {
			for _, p := range tk.batchPairs(rng, step) {
				draws = append(draws, strings.Join(p.Src, " ")+"\t"+strings.Join(p.Tgt, " "))
			}
		}
		for _, d := range draws[:n] {
			seen[d]++
		}
		distinct := map[string]bool{}
		for _, p := range tk.train {
			distinct[strings.Join(p.Src, " ")+"\t"+strings.Join(p.Tgt, " ")] = true
		}
		once := len(seen) == len(distinct)
		if once != c.once {
			t.Errorf("sampling %s: the first %d draws hold %d of %d distinct pairs", c.sampling, n, len(seen), len(distinct))
		}
		if c.once && slices.Equal(draws[:n], draws[n:2*n]) {
			t.Errorf("sampling %s: the second epoch repeats the first's order", c.sampling)
		}
	}
}
