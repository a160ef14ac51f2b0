package cli

import (
	"bytes"
	"math"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/probformer/probformer/cmd/trainer/train"
)

func TestEvalSamples(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	args := append([]string{"train", "--config", "maxnorm-bayes", "--out", dir, "--set", "training.steps=5", "--set", "training.eval_every=5"}, tiny...)
	if code, _, stderr := runCLI(t, args...); code != 0 {
		t.Fatal(stderr)
	}
	code, stdout, stderr := runCLI(t, "eval", "--checkpoint", dir, "--samples", "3")
	if code != 0 {
		t.Fatal(stderr)
	}
	for _, w := range []string{"3 sampled passes", "predictive standard deviation", "correlation(std, error)"} {
		if !strings.Contains(stdout, w) {
			t.Errorf("output lacks %q:\n%s", w, stdout)
		}
	}
	if code, _, _ := runCLI(t, "eval", "--checkpoint", dir, "--samples", "1"); code != 2 {
		t.Errorf("--samples 1: exit %d, want 2", code)
	}
	soft := filepath.Join(t.TempDir(), "soft")
	if code, _, stderr := runCLI(t, append([]string{"train", "--out", soft, "--set", "training.steps=2"}, tiny...)...); code != 0 {
		t.Fatal(stderr)
	}
	if code, stdout, stderr := runCLI(t, "eval", "--checkpoint", soft, "--samples", "3"); code != 2 || !strings.Contains(stderr, "not sampled") || strings.Contains(stdout, "BLEU") {
		t.Errorf("--samples on softmax attention: exit %d, %q, stdout %q", code, stderr, stdout)
	}
}

// tinySeq2SeqBayes is tinySeq2Seq with Bayesian attention, trained long
// enough that its predictions are partly right.
var tinySeq2SeqBayes = append(append([]string{"--config", "seq2seq-toy-bayes"}, tinySeq2Seq[2:]...),
	"--set", "training.steps=30", "--set", "training.eval_every=30", "--set", "training.kl_warmup=10")

// TestEvalSamplesSeq2Seq: eval --samples on a translation model prints the
// token-level uncertainty block with finite numbers, the same twice, and
// fails with exit 2 on softmax attention before printing any report.
func TestEvalSamplesSeq2Seq(t *testing.T) {
	dir := trainRun(t, tinySeq2SeqBayes...)
	code, stdout, stderr := runCLI(t, "eval", "--checkpoint", dir, "--samples", "4")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	i := strings.Index(stdout, "\n4 sampled passes over the test set")
	if i < 0 {
		t.Fatalf("no sampled block:\n%s", stdout)
	}
	block := stdout[i:]
	for _, w := range []string{"token accuracy", "negative log-likelihood", "right", "wrong", "all", "AUROC", "entropy", "MI"} {
		if !strings.Contains(block, w) {
			t.Errorf("block lacks %q:\n%s", w, block)
		}
	}
	for _, f := range strings.Fields(block) {
		if v, err := strconv.ParseFloat(f, 64); err == nil && (math.IsNaN(v) || math.IsInf(v, 0) || v < 0) {
			t.Errorf("number %q in the block: want finite and ≥ 0:\n%s", f, block)
		}
	}
	// The test set is 20 pairs of at least a word and <eos> each.
	m := regexp.MustCompile(`; (\d+) target tokens`).FindStringSubmatch(block)
	if m == nil {
		t.Fatalf("no token count:\n%s", block)
	}
	if n, _ := strconv.Atoi(m[1]); n < 40 {
		t.Errorf("%d target tokens, want ≥ 40", n)
	}
	// A second run, in-process and without the BLEU report, repeats the
	// block exactly.
	tr, _, err := loadForEval(dir)
	if err != nil {
		t.Fatal(err)
	}
	var again bytes.Buffer
	if err := tr.task.(train.Sampler).SampleReport(&again, tr.params, 4, tr.cfg.Seed); err != nil {
		t.Fatal(err)
	}
	if again.String() != block {
		t.Errorf("a second run differs:\n%s\nvs\n%s", block, again.String())
	}
	soft := trainRun(t, tinySeq2Seq...)
	if code, stdout, stderr := runCLI(t, "eval", "--checkpoint", soft, "--samples", "3"); code != 2 || !strings.Contains(stderr, "not sampled") || strings.Contains(stdout, "BLEU") {
		t.Errorf("--samples on softmax attention: exit %d, %q, stdout %q", code, stderr, stdout)
	}
}
