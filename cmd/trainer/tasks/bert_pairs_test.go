package tasks

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/probformer/probformer/cmd/trainer/train"
	"github.com/probformer/probformer/configs"
	"github.com/probformer/probformer/datasets"
	"github.com/probformer/probformer/graph"
)

// tinyBERT shrinks preset bert-toy to a 5-step run of a width-8 encoder
// on 200 stories.
var tinyBERT = []string{
	"model.dim=8", "model.heads=2", "model.ff=16", "model.enc_layers=1",
	"data.train_pairs=200", "data.valid_pairs=20", "data.test_pairs=20",
	"training.steps=5", "training.batch=8", "training.eval_every=5", "training.log_every=5",
}

// TestBERTPairsConfig: data.pairs is nsp, empty (an older config's) or
// true_only; true_only needs the masked LM, its only loss.
func TestBERTPairsConfig(t *testing.T) {
	if !(&BERTData{}).nsp() {
		t.Error("a config without data.pairs (an older checkpoint's) has no NSP head")
	}
	for _, c := range []struct {
		sets []string
		want string // "" valid, else a word of the error
	}{
		{[]string{"data.pairs=nsp"}, ""},
		{[]string{"data.pairs=true_only"}, ""},
		{[]string{"data.pairs=true"}, "data.pairs"},
		{[]string{"data.pairs=TRUE_ONLY"}, "data.pairs"},
		{[]string{"data.pairs=true_only", "data.mask_prob=0"}, "data.mask_prob"},
	} {
		cfg, err := configs.Load("bert-toy", append(slices.Clone(tinyBERT), c.sets...))
		if err == nil {
			_, err = train.NewTask(cfg, nil)
		}
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%v: %v", c.sets, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%v: error %v, want one naming %s", c.sets, err, c.want)
		}
	}
}

// TestBERTTrueOnly: with data.pairs true_only every pair, in training and
// evaluation, is a story's own two sentences, the model has no NSP head
// (no nsp.* parameter, no is_next input) and the metrics are the masked
// LM's alone, its loss the objective.
func TestBERTTrueOnly(t *testing.T) {
	tk, loop := trainTiny(t, "bert-toy", append(slices.Clone(tinyBERT), "data.pairs=true_only", "dtype=float64")...)
	task := tk.(*bertTask)
	for _, s := range []*bertSplit{&task.valid, &task.test} {
		for i, y := range s.isNext {
			if y != 1 {
				t.Fatalf("pair %d labelled %d, want every pair true", i, y)
			}
		}
	}
	for _, p := range loop.Params().List() {
		if strings.HasPrefix(p.Name, "nsp.") {
			t.Errorf("parameter %s without an NSP head", p.Name)
		}
	}
	prog, err := graph.Compile(loop.Params(), task.Build(4), true)
	if err != nil {
		t.Fatal(err)
	}
	if prog.HasInput("is_next") || prog.HasInput(bertMLMScaleInput) {
		t.Error("a training program without NSP reads is_next or mlm_scale")
	}
	m := loop.Metrics()
	if _, ok := m["valid_nsp_accuracy"]; ok {
		t.Errorf("NSP metrics without an NSP head: %v", m)
	}
	if m["valid_mlm_loss"] <= 0 || m["valid_loss"] != m["valid_mlm_loss"] {
		t.Errorf("valid_loss %g, valid_mlm_loss %g: want the MLM's loss as the objective", m["valid_loss"], m["valid_mlm_loss"])
	}
}

// writePairsTSV writes n lines "wK xK<TAB>yK zK" (every line its own
// words) to a file in dir and returns its path.
func writePairsTSV(t *testing.T, dir, name string, n int) string {
	t.Helper()
	var b strings.Builder
	for k := range n {
		fmt.Fprintf(&b, "w%d x%d\ty%d z%d\n", k, k, k, k)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestBERTLabelledSubset: with data.source tsv a positive
// data.train_pairs keeps the first lines of the training file alone,
// with the vocabulary of the whole file (a pretraining's on it); 1 pair,
// which pairs with no other, and more pairs than the file holds are
// refused.
func TestBERTLabelledSubset(t *testing.T) {
	dir := t.TempDir()
	files := []string{"data.train_file=" + writePairsTSV(t, dir, "train.tsv", 40),
		"data.valid_file=" + writePairsTSV(t, dir, "valid.tsv", 4), "data.test_file=" + writePairsTSV(t, dir, "test.tsv", 4)}
	task := func(sets ...string) (*bertTask, error) {
		cfg, err := configs.Load("bert-pairs-tsv", append(append(slices.Clone(files), "model.dim=8", "model.heads=2", "model.ff=16"), sets...))
		if err != nil {
			return nil, err
		}
		tk, err := train.NewTask(cfg, nil)
		if err != nil {
			return nil, err
		}
		return tk.(*bertTask), nil
	}
	all, err := task()
	if err != nil {
		t.Fatal(err)
	}
	sub, err := task("data.train_pairs=10")
	if err != nil {
		t.Fatal(err)
	}
	if len(all.train) != 40 || len(sub.train) != 10 || !slices.Equal(sub.train[9].First, all.train[9].First) {
		t.Fatalf("%d and %d training pairs, want 40 and the first 10", len(all.train), len(sub.train))
	}
	if !slices.Equal(sub.vocab.Words(), all.vocab.Words()) || sub.vocab.Size() != datasets.NumSpecial+160 {
		t.Errorf("the subset's vocabulary has %d ids, the whole file's %d; want the whole file's %d", sub.vocab.Size(), all.vocab.Size(), datasets.NumSpecial+160)
	}
	for _, c := range []struct{ set, want string }{
		{"data.train_pairs=1", "data.train_pairs"},
		{"data.train_pairs=41", "the training file has 40 pairs"},
	} {
		if _, err := task(c.set); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one naming %q", c.set, err, c.want)
		}
	}
}
