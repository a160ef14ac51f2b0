package main

import (
	"bytes"
	"math"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
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

func TestCorrelation(t *testing.T) {
	x := []float64{1, 2, 3, 4}
	if r := correlation(x, []float64{2, 4, 6, 8}); math.Abs(r-1) > 1e-15 {
		t.Fatalf("r = %v, want 1", r)
	}
	if r := correlation(x, []float64{4, 3, 2, 1}); math.Abs(r+1) > 1e-15 {
		t.Fatalf("r = %v, want −1", r)
	}
	if r := correlation(x, []float64{5, 5, 5, 5}); r != 0 {
		t.Fatalf("r = %v for a constant, want 0", r)
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
	if err := tr.task.(sampler).sampleReport(&again, tr.params, 4, tr.cfg.Seed); err != nil {
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

// TestPredictiveUncertainty checks p̄, H[p̄], E[H], the mutual information
// and the disagreement on hand-made samples.
func TestPredictiveUncertainty(t *testing.T) {
	ln2, ln3 := math.Log(2), math.Log(3)
	cases := []struct {
		name    string
		samples [][]float64
		ref     int
		want    tokenUncertainty
	}{
		{"confident and agreeing", [][]float64{{1, 0}, {1, 0}}, 0,
			tokenUncertainty{right: true, logProb: 0, entropy: 0, expected: 0, disagree: 0}},
		{"confident, disagreeing", [][]float64{{1, 0}, {0, 1}}, 1,
			tokenUncertainty{right: false, logProb: -ln2, entropy: ln2, expected: 0, disagree: 0.5}},
		{"unsure alike", [][]float64{{0.5, 0.5}, {0.5, 0.5}}, 0,
			tokenUncertainty{right: true, logProb: -ln2, entropy: ln2, expected: ln2, disagree: 0}},
		// H[.7 .2 .1] = 0.8018185525433373, H[.2 .6 .2] = 0.9502705392332347;
		// p̄ is uniform, its argmax the first class.
		{"three classes", [][]float64{{0.7, 0.2, 0.1}, {0.1, 0.2, 0.7}, {0.2, 0.6, 0.2}}, 1,
			tokenUncertainty{right: false, logProb: -ln3, entropy: ln3, expected: 0.8513025481066364, disagree: 2.0 / 3}},
	}
	for _, c := range cases {
		p := predictive{sum: make([]float64, len(c.samples[0])), meanLogProb: -1, meanRight: true}
		for _, s := range c.samples {
			p.add(s)
		}
		got := p.summary(c.ref)
		c.want.meanLogProb, c.want.meanRight = -1, true
		close := func(a, b float64) bool { return math.Abs(a-b) <= 1e-15 }
		if got.right != c.want.right || got.meanRight != c.want.meanRight || !close(got.logProb, c.want.logProb) ||
			!close(got.meanLogProb, c.want.meanLogProb) || !close(got.entropy, c.want.entropy) ||
			!close(got.expected, c.want.expected) || !close(got.disagree, c.want.disagree) {
			t.Errorf("%s: got %+v, want %+v", c.name, got, c.want)
		}
		if mi, want := got.mutualInformation(), c.want.entropy-c.want.expected; !close(mi, want) {
			t.Errorf("%s: MI = %v, want %v", c.name, mi, want)
		}
	}
}

func TestSoftmaxValues(t *testing.T) {
	// Shifting by ±1000 costs the logits' difference about 1e-13 of
	// precision; the result must not overflow or lose more.
	for _, shift := range []float64{0, 1000, -1000} {
		tol := 1e-15 + 1e-12*math.Abs(shift)/1000
		logits := []float64{shift, shift + math.Log(3)}
		dst := make([]float64, 2)
		softmaxInto(dst, logits)
		if math.Abs(dst[0]-0.25) > tol || math.Abs(dst[1]-0.75) > tol {
			t.Errorf("softmax(%v) = %v, want [0.25 0.75]", logits, dst)
		}
		if got, want := logSoftmaxAt(logits, 1), math.Log(0.75); math.Abs(got-want) > tol {
			t.Errorf("log softmax(%v)[1] = %v, want %v", logits, got, want)
		}
	}
}

func TestAUROC(t *testing.T) {
	cases := []struct {
		pos, neg []float64
		want     float64
	}{
		{[]float64{3, 4}, []float64{1, 2}, 1},
		{[]float64{1, 2}, []float64{3, 4}, 0},
		{[]float64{1, 2}, []float64{1, 2}, 0.5},
		{[]float64{2}, []float64{1, 2, 3}, 0.5},
		// 0.9 beats all three; 0.4 beats 0.1, ties 0.4, loses to 0.5: 4.5/6.
		{[]float64{0.9, 0.4}, []float64{0.1, 0.4, 0.5}, 0.75},
	}
	for _, c := range cases {
		if got := auroc(c.pos, c.neg); math.Abs(got-c.want) > 1e-15 {
			t.Errorf("auroc(%v, %v) = %v, want %v", c.pos, c.neg, got, c.want)
		}
	}
	if got := auroc(nil, []float64{1}); !math.IsNaN(got) {
		t.Errorf("auroc with no positives = %v, want NaN", got)
	}
}
