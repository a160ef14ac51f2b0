package tasks

import (
	"testing"

	"github.com/probformer/probformer/cmd/trainer/train"
	"github.com/probformer/probformer/configs"
)

// TestTasksKnowTheirSizes checks the example counts the progress header
// prints: seq2seq counts its training and validation pairs, maxnorm its
// validation sets (its training sets are drawn afresh every step).
func TestTasksKnowTheirSizes(t *testing.T) {
	cases := []struct {
		preset       string
		sets         []string
		train, valid int // −1: no fixed size
	}{
		{"seq2seq-toy", tinySeq2Seq, 200, 20},
		{"maxnorm", tiny, -1, 64},
	}
	for _, c := range cases {
		cfg, err := configs.Load(c.preset, c.sets)
		if err != nil {
			t.Fatal(err)
		}
		tk, err := train.NewTask(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		sized, ok := tk.(train.Sized)
		if !ok {
			t.Fatalf("%s: task %T does not implement train.Sized", c.preset, tk)
		}
		for split, want := range map[string]int{"train": c.train, "valid": c.valid} {
			n, ok := sized.Examples(split)
			if (want < 0 && ok) || (want >= 0 && (!ok || n > want || n == 0)) {
				t.Errorf("%s: Examples(%q) = %d, %v; want %d", c.preset, split, n, ok, want)
			}
		}
	}
}
