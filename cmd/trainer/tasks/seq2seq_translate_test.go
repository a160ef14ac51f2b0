package tasks

import (
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/probformer/probformer/datasets"
)

func TestSourceTokens(t *testing.T) {
	cases := []struct {
		line      string
		lowercase bool
		want      []string
	}{
		{"The Dog  sees\tthe CAT", false, []string{"The", "Dog", "sees", "the", "CAT"}},
		{"The Dog  sees\tthe CAT", true, []string{"the", "dog", "sees", "the", "cat"}},
		{"  ", true, nil},
		{"Ärger ÜBER", true, []string{"ärger", "über"}},
	}
	for _, c := range cases {
		task := &Seq2Seq{dataCfg: &Seq2SeqData{Corpus: Corpus{Lowercase: c.lowercase}}}
		if got := task.SourceTokens(c.line); !slices.Equal(got, c.want) {
			t.Errorf("SourceTokens(%q), lowercase %v = %q, want %q", c.line, c.lowercase, got, c.want)
		}
	}
}

// TestCrossAttentionWeights checks the matrix the heat map draws: one row
// per generated token, <eos> included when the sentence ended, one column
// per source word, each row a distribution, the tokens those of greedy
// translation.
func TestCrossAttentionWeights(t *testing.T) {
	tk, loop := trainTiny(t, "seq2seq-toy", tinySeq2Seq...)
	task, params := tk.(*Seq2Seq), loop.Params()
	words := strings.Fields("the dog sees a big cat")
	src := task.src.Encode(words)
	greedy, err := task.Translate(params, [][]string{words}, 1)
	if err != nil {
		t.Fatal(err)
	}
	check := func(name string, layer int, wantFinished bool) {
		t.Helper()
		out, weights, err := task.crossAttention(params, src, layer)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if finished := len(out) > 0 && out[len(out)-1] == datasets.EOSID; finished != wantFinished {
			t.Fatalf("%s: tokens %v: ended %v, want %v", name, out, finished, wantFinished)
		}
		if len(out) == 0 || len(out) > task.tgtLen || slices.Contains(out[:len(out)-1], datasets.EOSID) {
			t.Fatalf("%s: tokens %v", name, out)
		}
		if len(weights) != task.model.Config.Heads {
			t.Fatalf("%s: %d heads", name, len(weights))
		}
		for h, w := range weights {
			if len(w) != len(out) {
				t.Fatalf("%s: head %d has %d rows for %d tokens", name, h, len(w), len(out))
			}
			for i, row := range w {
				if len(row) != len(src) {
					t.Fatalf("%s: head %d row %d has %d columns for %d source words", name, h, i, len(row), len(src))
				}
				var sum float64
				for _, v := range row {
					sum += v
				}
				if math.Abs(sum-1) > 1e-5 { // a float32 model
					t.Errorf("%s: head %d row %d sums to %v", name, h, i, sum)
				}
			}
		}
		a, err := task.CrossAttention(params, words, layer)
		if err != nil {
			t.Fatalf("%s: CrossAttention: %v", name, err)
		}
		if !reflect.DeepEqual(a.Weights, weights) || len(a.Output) != len(out) || len(a.Source) != len(src) ||
			!slices.Equal(a.Translation, task.tgt.Decode(out)) {
			t.Errorf("%s: CrossAttention gives %+v, want the weights and tokens of %v", name, a, out)
		}
		if name == "trained" && !slices.Equal(task.tgt.Decode(out), greedy[0]) {
			t.Errorf("%s: tokens %q, greedy translation %q", name, task.tgt.Decode(out), greedy[0])
		}
	}
	// After 5 steps the model runs to the length limit.
	check("trained", 0, false)
	check("trained", 1, false)
	// A large <eos> bias ends every sentence at once: a single row.
	bias := params.Lookup("out.b")
	b := bias.Values()
	b[datasets.EOSID] = 100
	if err := bias.SetValues(b); err != nil {
		t.Fatal(err)
	}
	check("eos", 1, true)
}

func TestUnknownWords(t *testing.T) {
	src, err := datasets.BuildVocab([][]string{{"the", "dog", "sees", "a", "cat"}}, datasets.VocabOptions{})
	if err != nil {
		t.Fatal(err)
	}
	task := &Seq2Seq{src: src}
	cases := []struct {
		words, want []string
	}{
		{strings.Fields("the dog sees a cat"), nil},
		{strings.Fields("the dog eats the apple"), []string{"eats", "apple"}},
		{strings.Fields("apple Dog apple <unk>"), []string{"apple", "Dog", "apple", "<unk>"}},
		{nil, nil},
	}
	for _, c := range cases {
		if got := task.UnknownWords(c.words); !slices.Equal(got, c.want) {
			t.Errorf("UnknownWords(%q) = %q, want %q", c.words, got, c.want)
		}
	}
}
