package cli

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/probformer/probformer/cmd/trainer/train"
	"github.com/probformer/probformer/configs"
)

// tinyBERT shrinks bert-toy to a few seconds: 5 steps of a width-8
// encoder on 200 stories.
var tinyBERT = []string{"--config", "bert-toy",
	"--set", "model.dim=8", "--set", "model.heads=2", "--set", "model.ff=16", "--set", "model.enc_layers=1",
	"--set", "data.train_pairs=200", "--set", "data.valid_pairs=20", "--set", "data.test_pairs=20",
	"--set", "training.steps=5", "--set", "training.batch=8", "--set", "training.eval_every=5", "--set", "training.log_every=5",
}

// TestBERTTrainAndEval: bert-toy trains 5 steps, logs both heads' validation
// losses and accuracies, and `trainer eval` prints both next to their
// baselines: NSP's chance and best achievable accuracy, MLM's unigram.
func TestBERTTrainAndEval(t *testing.T) {
	dir := trainRun(t, tinyBERT...)
	f, err := os.Open(filepath.Join(dir, train.MetricsFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	evaluated := false
	for sc := bufio.NewScanner(f); sc.Scan(); {
		var rec map[string]float64
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatal(err)
		}
		if _, ok := rec["valid_nsp_accuracy"]; !ok {
			continue
		}
		evaluated = true
		for _, k := range []string{"valid_mlm_accuracy", "valid_nsp_accuracy"} {
			if rec[k] < 0 || rec[k] > 1 {
				t.Errorf("%s = %g", k, rec[k])
			}
		}
		if rec["valid_mlm_loss"] <= 0 || rec["valid_nsp_loss"] <= 0 ||
			abs(rec["valid_loss"]-rec["valid_mlm_loss"]-rec["valid_nsp_loss"]) > 1e-9 {
			t.Errorf("validation losses %v: want positive heads that sum to valid_loss", rec)
		}
	}
	if !evaluated {
		t.Fatal("metrics.jsonl holds no valid_nsp_accuracy")
	}

	code, stdout, stderr := runCLI(t, "eval", "--checkpoint", dir)
	if code != 0 {
		t.Fatalf("eval: exit %d: %s", code, stderr)
	}
	for _, want := range []string{"20 sentence pairs [CLS] S [SEP] S′ [SEP]", "masked LM", "next sentence", "[CLS]", "[SEP]", "samples",
		"the generator's best expected accuracy is 0.9520"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("eval output lacks %q:\n%s", want, stdout)
		}
	}
	rows := map[string]string{
		"MLM model":        `(?s)masked LM.*?\n\s+model\s+([0-9.]+)\s`,
		"MLM unigram":      `(?m)^\s+unigram baseline \(always "[^"]+"\)\s+([0-9.]+)\s`,
		"NSP model":        `(?s)next sentence.*?\n\s+model\s+([0-9.]+)\s`,
		"NSP chance":       `(?m)^\s+chance \(always "follows"; loss of p = ½\)\s+([0-9.]+)\s+0\.6931$`,
		"NSP best (Bayes)": `(?m)^\s+best achievable \(Bayes rule of the generator\)\s+([0-9.]+)\s`,
	}
	for name, re := range rows {
		m := regexp.MustCompile(re).FindStringSubmatch(stdout)
		if m == nil {
			t.Errorf("eval output has no %s line (%s):\n%s", name, re, stdout)
			continue
		}
		if v, err := strconv.ParseFloat(m[1], 64); err != nil || v < 0 || v > 1 {
			t.Errorf("%s accuracy %q", name, m[1])
		}
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

func TestBERTPresetListed(t *testing.T) {
	code, stdout, _ := runCLI(t, "presets")
	if code != 0 || !regexp.MustCompile(`(?m)^bert-toy\s`).MatchString(stdout) {
		t.Fatalf("exit %d, presets:\n%s", code, stdout)
	}
	code, stdout, _ = runCLI(t, "presets", "bert-toy")
	if code != 0 || !strings.Contains(stdout, "task: bert") {
		t.Fatalf("exit %d:\n%s", code, stdout)
	}
}

// tinyBERTPairs shrinks bert-pairs-tsv to 5 steps of a width-8 encoder.
var tinyBERTPairs = []string{"--config", "bert-pairs-tsv",
	"--set", "model.dim=8", "--set", "model.heads=2", "--set", "model.ff=16", "--set", "model.enc_layers=1",
	"--set", "training.steps=5", "--set", "training.batch=8", "--set", "training.eval_every=5", "--set", "training.log_every=5",
}

// TestBERTPairsTSV: the pair classifier trains on a small TSV corpus,
// alone (mask_prob 0: no MLM metric) and with the masked LM over both
// languages, and `trainer eval` prints its accuracy next to chance.
func TestBERTPairsTSV(t *testing.T) {
	dir := t.TempDir()
	train := filepath.Join(dir, "train.tsv")
	if err := os.WriteFile(train, []byte(strings.Join(tsvPairs(), "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, mask := range []string{"0", "0.15"} {
		run := trainRun(t, append(append(slices.Clone(tinyBERTPairs), tsvFiles(t, dir, train)...), "--set", "data.mask_prob="+mask)...)
		m := readMetrics(t, run)
		var valid map[string]float64
		for _, rec := range m {
			if _, ok := rec["valid_nsp_accuracy"]; ok {
				valid = rec
			}
		}
		if valid == nil {
			t.Fatalf("mask_prob %s: no validation metrics", mask)
		}
		if _, ok := valid["valid_mlm_accuracy"]; ok != (mask != "0") {
			t.Errorf("mask_prob %s: validation metrics %v", mask, valid)
		}
		code, stdout, stderr := runCLI(t, "eval", "--checkpoint", run)
		if code != 0 {
			t.Fatalf("eval: exit %d: %s", code, stderr)
		}
		for _, want := range []string{"true translations", "is S′ the translation of S? (pairs)", "chance (always \"follows\""} {
			if !strings.Contains(stdout, want) {
				t.Errorf("mask_prob %s: eval output lacks %q:\n%s", mask, want, stdout)
			}
		}
		if strings.Contains(stdout, "masked LM") != (mask != "0") {
			t.Errorf("mask_prob %s: masked LM reported or not:\n%s", mask, stdout)
		}
	}
}

// TestBERTPairsEngFra: the pair classifier reads the English–French
// corpus, one vocabulary for both languages.
func TestBERTPairsEngFra(t *testing.T) {
	if _, err := os.Stat(filepath.Join(engFraDir, "simple.train.tsv")); err != nil {
		t.Skipf("English–French data not found at %s: %v", engFraDir, err)
	}
	run := trainRun(t, append(slices.Clone(tinyBERTPairs),
		"--set", "data.train_file="+filepath.Join(engFraDir, "simple.train.tsv"),
		"--set", "data.valid_file="+filepath.Join(engFraDir, "simple.valid.tsv"),
		"--set", "data.test_file="+filepath.Join(engFraDir, "simple.test.tsv"))...)
	code, stdout, stderr := runCLI(t, "eval", "--checkpoint", run)
	if code != 0 {
		t.Fatalf("eval: exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "test set: 586 sentence pairs") && !strings.Contains(stdout, "test set: 587 sentence pairs") {
		t.Errorf("eval output:\n%s", stdout)
	}
}

// TestBERTPairsFromPretrained: a bert-pairs-tsv run with the masked LM
// (pretraining over both languages) starts the pair classifier through
// init.encoder_from: the embeddings, encoder and NSP pooler are copied,
// the classifier and MLM head are not. A checkpoint of another
// vocabulary (bert-toy) or another task (mlm) is refused.
func TestBERTPairsFromPretrained(t *testing.T) {
	dir := t.TempDir()
	train := filepath.Join(dir, "train.tsv")
	if err := os.WriteFile(train, []byte(strings.Join(tsvPairs(), "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	files := tsvFiles(t, dir, train)
	pre := trainRun(t, append(append(slices.Clone(tinyBERTPairs), files...), "--set", "data.mask_prob=0.15")...)
	out := filepath.Join(t.TempDir(), "fine")
	code, _, stderr := runCLI(t, append(append([]string{"train", "--out", out}, tinyBERTPairs...), append(files, "--set", "init.encoder_from="+pre)...)...)
	if code != 0 {
		t.Fatalf("fine-tuning: exit %d: %s", code, stderr)
	}
	if !regexp.MustCompile(`init: embeddings, encoder and NSP pooler \(\d+ tensors\) from `).MatchString(stderr) {
		t.Errorf("stderr lacks the init line:\n%s", stderr)
	}
	for _, c := range []struct {
		from []string
		want string
	}{
		{tinyBERT, "vocabulary"},
		{tinyMLM, "want a BERT (task bert) checkpoint"},
	} {
		src := trainRun(t, c.from...)
		code, _, stderr := runCLI(t, append(append([]string{"train", "--out", filepath.Join(t.TempDir(), "x")}, tinyBERTPairs...),
			append(files, "--set", "init.encoder_from="+src)...)...)
		if code == 0 || !strings.Contains(stderr, c.want) {
			t.Errorf("from %s: exit %d, stderr %q, want an error mentioning %q", c.from[1], code, stderr, c.want)
		}
	}
}

// TestBERTPretrainTrueOnlyThenFineTune: the route of an honest
// comparison with a classifier from scratch. A pretraining that sees no
// pair label (data.pairs true_only: true pairs, the masked LM alone)
// reports its masked LM and no classifier; the pair classifier
// (mask_prob 0) starts from it with the embeddings and encoder copied and
// the pooler afresh: two tensors fewer (nsp.pool's weight and bias) than
// from a pretraining with the NSP head.
func TestBERTPretrainTrueOnlyThenFineTune(t *testing.T) {
	dir := t.TempDir()
	trainFile := filepath.Join(dir, "train.tsv")
	if err := os.WriteFile(trainFile, []byte(strings.Join(tsvPairs(), "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	files := tsvFiles(t, dir, trainFile)
	copied := map[string]int{}
	for _, pairs := range []string{"true_only", "nsp"} {
		pre := trainRun(t, append(append(slices.Clone(tinyBERTPairs), files...), "--set", "data.mask_prob=0.15", "--set", "data.pairs="+pairs)...)
		if pairs == "true_only" {
			for _, rec := range readMetrics(t, pre) {
				if _, ok := rec["valid_nsp_accuracy"]; ok {
					t.Errorf("true_only pretraining logged NSP metrics: %v", rec)
				}
			}
			code, stdout, stderr := runCLI(t, "eval", "--checkpoint", pre)
			if code != 0 {
				t.Fatalf("eval: exit %d: %s", code, stderr)
			}
			for _, want := range []string{"masked LM", "no pair classifier (data.pairs true_only)"} {
				if !strings.Contains(stdout, want) {
					t.Errorf("eval of the true_only pretraining lacks %q:\n%s", want, stdout)
				}
			}
			if strings.Contains(stdout, "is S′ the translation of S?") {
				t.Errorf("eval of the true_only pretraining reports a classifier:\n%s", stdout)
			}
		}
		out := filepath.Join(t.TempDir(), "fine")
		code, _, stderr := runCLI(t, append(append([]string{"train", "--out", out}, tinyBERTPairs...), append(files, "--set", "init.encoder_from="+pre)...)...)
		if code != 0 {
			t.Fatalf("fine-tuning from %s pretraining: exit %d: %s", pairs, code, stderr)
		}
		want := `init: embeddings, encoder and NSP pooler \((\d+) tensors\) from `
		if pairs == "true_only" {
			want = `init: embeddings and encoder \(no NSP pooler in the checkpoint: afresh\) \((\d+) tensors\) from `
		}
		m := regexp.MustCompile(want).FindStringSubmatch(stderr)
		if m == nil {
			t.Fatalf("from %s pretraining: stderr lacks %s:\n%s", pairs, want, stderr)
		}
		copied[pairs], _ = strconv.Atoi(m[1])
		code, stdout, stderr := runCLI(t, "eval", "--checkpoint", out)
		if code != 0 || !strings.Contains(stdout, "is S′ the translation of S? (pairs)") {
			t.Errorf("eval of the classifier from %s pretraining: exit %d: %s\n%s", pairs, code, stderr, stdout)
		}
	}
	if copied["nsp"]-copied["true_only"] != 2 {
		t.Errorf("copied %d tensors from the NSP pretraining, %d from the true_only one; want nsp.pool's 2 more", copied["nsp"], copied["true_only"])
	}
}

// TestBERTPairsStrict: data.pairs takes nsp or true_only, and a
// misspelt key exits 2 as every unknown key does.
func TestBERTPairsStrict(t *testing.T) {
	dir := t.TempDir()
	trainFile := filepath.Join(dir, "train.tsv")
	if err := os.WriteFile(trainFile, []byte(strings.Join(tsvPairs(), "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	files := tsvFiles(t, dir, trainFile)
	for _, c := range []struct {
		set  []string
		want string
	}{
		{[]string{"--set", "data.pairs=true"}, "data.pairs"},
		{[]string{"--set", "data.pair=true_only"}, "data.pair"},
		{[]string{"--set", "data.pairs=true_only", "--set", "data.mask_prob=0"}, "data.mask_prob"},
	} {
		args := append(append([]string{"train", "--out", filepath.Join(t.TempDir(), "x")}, tinyBERTPairs...), append(files, c.set...)...)
		expectBadInput(t, args, c.want)
	}
}

// TestMPIBERT: BERT's MLM + NSP objective, a mean over masked positions
// plus a mean over pairs, on 2 processes and on 2 processes of 2
// micro-batches each (shards holding unequal counts of masked positions,
// dropout on) follows one process of one batch, in float64.
func TestMPIBERT(t *testing.T) {
	bin := buildMPITrainer(t)
	args := append(append([]string{"train", "--progress", "lines", "--set", "dtype=float64"}, tinyBERT...),
		"--set", "training.steps=20", "--set", "training.log_every=1", "--set", "training.eval_every=20")
	one := filepath.Join(t.TempDir(), "one")
	runOut(t, exec.Command(bin, append(args, "--out", one)...))
	for _, accumulate := range []string{"1", "2"} {
		two := filepath.Join(t.TempDir(), "two")
		runOut(t, mpirun(2, bin, append(args, "--out", two, "--set", "training.accumulate="+accumulate)...))
		sameCurve(t, "bert-toy on 2 processes × "+accumulate+" micro-batches", lossCurve(t, two), lossCurve(t, one), 0, 20, 1e-10)
	}
}

// TestBERTPresetsDoNotWarn: no bert preset's warm-up is more than a
// tenth of its steps, so training one prints no warm-up warning.
func TestBERTPresetsDoNotWarn(t *testing.T) {
	files := []string{"data.train_file=a.tsv", "data.valid_file=b.tsv", "data.test_file=c.tsv"}
	for _, name := range configs.Presets() {
		if !strings.HasPrefix(name, "bert-") {
			continue
		}
		cfg, err := configs.Load(name, files)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		o := cfg.Optimizer
		s, err := train.NewSchedule(o.Schedule, o.LR, o.MinLR, o.WarmupSteps)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if w := s.WarmupWarning(cfg.Training.Steps); w != "" {
			t.Errorf("%s: %s", name, w)
		}
	}
}
