package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/probformer/probformer/cmd/trainer/tasks"
	"github.com/probformer/probformer/configs"
)

// sizeDeadline bounds each refused command: generous, since the point is
// that it fails before allocating anything (it takes milliseconds), not
// how fast.
const sizeDeadline = 10 * time.Second

// TestSizesHaveCeilings: every size field of every built-in task, at 1e9
// and just past its ceiling, is refused by `trainer train` before
// anything is allocated: exit 2, one line that gives the field and its
// range, no goroutine dump, no run directory. Before, training.batch,
// model.dim, model.inducing, data.dim, data.max_set and seq2seq's
// model.ff and model.dim at 1e9 died with "fatal error: runtime: out of
// memory", model.blocks=100000 built for minutes and
// data.valid_sets=1e9 reached 21 GB.
func TestSizesHaveCeilings(t *testing.T) {
	t.Parallel()
	type field struct {
		preset, key string
		ceiling     int
		want        string // in the message at 1e9, besides the key
	}
	rangeTo := func(hi int) string { return fmt.Sprintf(", %d]", hi) }
	fields := []field{
		{"maxnorm", "training.batch", configs.MaxBatch, ""},
		{"maxnorm", "data.dim", tasks.MaxDim, ""},
		{"maxnorm", "data.max_set", tasks.MaxSetSize, ""},
		{"maxnorm", "data.valid_sets", tasks.MaxExamples, ""},
		{"maxnorm", "data.test_sets", tasks.MaxExamples, ""},
		{"maxnorm", "model.dim", tasks.MaxDim, ""},
		{"maxnorm", "model.blocks", tasks.MaxLayers, ""},
		{"maxnorm", "model.inducing", tasks.MaxPoints, ""},
		{"maxnorm", "model.seeds", tasks.MaxPoints, ""},
		{"maxnorm-em", "model.attention.key_iters", configs.MaxAttentionIters, ""},
		{"maxnorm-em", "model.attention.value_iters", configs.MaxAttentionIters, ""},
		{"maxnorm-em", "model.attention.propagate_iters", configs.MaxAttentionIters, ""},
		{"seq2seq-toy", "training.batch", configs.MaxBatch, ""},
		{"seq2seq-toy", "training.beam", configs.MaxBeam, ""},
		{"seq2seq-toy", "data.train_pairs", tasks.MaxExamples, ""},
		{"seq2seq-toy", "data.valid_pairs", tasks.MaxExamples, ""},
		{"seq2seq-toy", "data.test_pairs", tasks.MaxExamples, ""},
		{"seq2seq-toy", "data.max_len", tasks.MaxTokens, ""},
		{"seq2seq-toy", "model.dim", tasks.MaxDim, ""},
		{"seq2seq-toy", "model.ff", tasks.MaxFF, ""},
		{"seq2seq-toy", "model.enc_layers", tasks.MaxLayers, ""},
		{"seq2seq-toy", "model.dec_layers", tasks.MaxLayers, ""},
		{"seq2seq-toy", "model.attention.relative_positions", configs.MaxRelativePositions, ""},
		{"mlm-toy", "training.batch", configs.MaxBatch, ""},
		{"mlm-toy", "data.train_pairs", tasks.MaxExamples, ""},
		{"mlm-toy", "data.valid_pairs", tasks.MaxExamples, ""},
		{"mlm-toy", "data.test_pairs", tasks.MaxExamples, ""},
		{"mlm-toy", "data.max_len", tasks.MaxTokens, ""},
		{"mlm-toy", "model.dim", tasks.MaxDim, ""},
		{"mlm-toy", "model.ff", tasks.MaxFF, ""},
		{"mlm-toy", "model.enc_layers", tasks.MaxLayers, ""},
		{"segment-em", "training.batch", configs.MaxBatch, ""},
		{"segment-em", "data.image_size", tasks.MaxImageSize, ""},
		{"segment-em", "data.classes", tasks.MaxClasses, ""},
		{"segment-em", "data.max_clicks", tasks.MaxClicks, ""},
		{"segment-em", "data.valid_clicks", tasks.MaxClicks, ""},
		{"segment-em", "data.valid_sets", tasks.MaxExamples, ""},
		{"segment-em", "data.test_sets", tasks.MaxExamples, ""},
		{"segment-em", "model.dim", tasks.MaxDim, ""},
		{"segment-em", "model.enc_layers", tasks.MaxLayers, ""},
		{"segment-em", "model.blocks", tasks.MaxLayers, ""},
		// The heads divide the width, so they are at most model.dim.
		{"maxnorm", "model.heads", 64, "a positive divisor of model.dim (1 to 64)"},
		{"seq2seq-toy", "model.heads", 64, "a positive divisor of model.dim (1 to 64)"},
		{"segment-em", "model.heads", 32, "a positive divisor of model.dim (1 to 32)"},
	}
	for _, f := range fields {
		for _, v := range []int{1e9, f.ceiling + 1} {
			t.Run(fmt.Sprintf("%s %s=%d", f.preset, f.key, v), func(t *testing.T) {
				t.Parallel()
				out := filepath.Join(t.TempDir(), "run")
				want := []string{fmt.Sprintf("%s = %d (--set)", f.key, v)}
				if f.want != "" {
					want = append(want, f.want)
				} else {
					want = append(want, "want an integer in [", rangeTo(f.ceiling))
				}
				expectBadInputWithin(t, sizeDeadline,
					[]string{"train", "--config", f.preset, "--out", out, "--set", fmt.Sprintf("%s=%d", f.key, v)}, want...)
				if _, err := os.Stat(out); err == nil {
					t.Errorf("a refused config left a run directory")
				}
			})
		}
	}
}

// TestSizesOverMemory: sizes within their ceilings that together would
// not fit in memory are refused with the estimate, naming the size that
// dominates. The estimate needs terabytes or more for each (far above
// any machine this runs on), so the test does not depend on the machine.
func TestSizesOverMemory(t *testing.T) {
	t.Parallel()
	cases := []struct {
		preset string
		sets   []string
		field  string
	}{
		{"maxnorm", []string{"model.dim=65536"}, "model.dim = 65536"},
		{"maxnorm", []string{"training.batch=1048576"}, "training.batch = 1048576"},
		{"maxnorm", []string{"model.blocks=1024", "model.dim=4096"}, "model.blocks = 1024 (--set): want a smaller value (model.dim too)"},
		{"maxregression-paper", []string{"data.max_set=1048576"}, "data.max_set = 1048576"},
		{"seq2seq-toy", []string{"model.dim=65536"}, "model.dim = 65536"},
		{"seq2seq-toy", []string{"model.ff=262144", "model.dim=8192", "model.enc_layers=64", "model.dec_layers=64"}, "model.ff = 262144"},
		{"seq2seq-toy", []string{"data.max_len=4096", "training.batch=4096"}, "data.max_len = 4096"},
		{"mlm-toy", []string{"model.enc_layers=1024", "model.dim=16384"}, "model.dim = 16384"},
		{"segment-em", []string{"data.image_size=1024"}, "data.image_size = 1024"},
	}
	for _, c := range cases {
		t.Run(fmt.Sprint(c.preset, c.sets), func(t *testing.T) {
			t.Parallel()
			args := []string{"train", "--config", c.preset, "--out", filepath.Join(t.TempDir(), "run")}
			for _, s := range c.sets {
				args = append(args, "--set", s)
			}
			expectBadInputWithin(t, sizeDeadline, args, c.field, "(--set)", "want a smaller value", "would need about",
				"iB (estimate: ", "of parameters and optimizer state", "of this machine's")
		})
	}
}

// TestTranslateBeamBounds: translate's --beam is at most 64
// (configs.MaxBeam), refused before the checkpoint is read, and at most
// the model's target vocabulary. Before, --beam 1000000 was accepted and
// decoded for ages.
func TestTranslateBeamBounds(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "none.ckpt")
	for _, beam := range []string{"1000000", "65", "0", "-3"} {
		expectBadInputWithin(t, sizeDeadline, []string{"translate", "--checkpoint", missing, "--beam", beam, "--text", "a"},
			"--beam "+beam, "want a beam in [1, 64]")
	}
	// A model of a few words: a beam wider than its target vocabulary is
	// refused too.
	dir := trainRun(t, append(append([]string{}, tinySeq2Seq...), "--set", "data.train_pairs=3", "--set", "training.steps=2",
		"--set", "training.eval_every=2", "--set", "training.log_every=1")...)
	_, task, err := loadSeq2Seq(dir)
	if err != nil {
		t.Fatal(err)
	}
	words := task.ModelConfig().TgtVocab
	if words >= configs.MaxBeam {
		t.Fatalf("a 3-pair corpus has %d target words; want fewer than %d for this test", words, configs.MaxBeam)
	}
	expectBadInputWithin(t, sizeDeadline, []string{"translate", "--checkpoint", dir, "--beam", fmt.Sprint(words + 1), "--text", "a"},
		fmt.Sprintf("--beam %d", words+1), fmt.Sprintf("want a beam in [1, %d], the model's target vocabulary", words))
	if code, _, stderr := runCLI(t, "translate", "--checkpoint", dir, "--beam", fmt.Sprint(words), "--text", "a"); code != 0 {
		t.Errorf("--beam %d (the vocabulary): exit %d: %s", words, code, stderr)
	}
}
