package cli

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/probformer/probformer/cmd/trainer/train"
)

// tinyMLM shrinks mlm-toy to the data and encoder of tinySeq2Seq, so that
// its checkpoints start tinySeq2Seq runs.
var tinyMLM = []string{"--config", "mlm-toy",
	"--set", "model.dim=8", "--set", "model.heads=2", "--set", "model.ff=16", "--set", "model.enc_layers=1",
	"--set", "data.train_pairs=200", "--set", "data.valid_pairs=20", "--set", "data.test_pairs=20",
	"--set", "training.steps=5", "--set", "training.batch=8", "--set", "training.eval_every=5", "--set", "training.log_every=5",
}

func TestMLMTrainAndEval(t *testing.T) {
	dir := trainRun(t, tinyMLM...)
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
		if acc, ok := rec["valid_accuracy"]; ok {
			evaluated = true
			if acc < 0 || acc > 1 || rec["valid_loss"] <= 0 {
				t.Errorf("validation metrics %v", rec)
			}
		}
	}
	if !evaluated {
		t.Fatal("metrics.jsonl holds no valid_accuracy")
	}

	code, stdout, stderr := runCLI(t, "eval", "--checkpoint", dir)
	if code != 0 {
		t.Fatalf("eval: exit %d: %s", code, stderr)
	}
	for _, want := range []string{"test set: ", "masked positions", "[MASK]", "samples"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("eval output lacks %q:\n%s", want, stdout)
		}
	}
	// The accuracies are numbers in [0, 1], the baseline's a word.
	for _, re := range []string{`(?m)^\s+model\s+([0-9.]+)\s`, `(?m)^\s+unigram baseline \(always "[^"]+"\)\s+([0-9.]+)\s`} {
		m := regexp.MustCompile(re).FindStringSubmatch(stdout)
		if m == nil {
			t.Fatalf("eval output has no line matching %s:\n%s", re, stdout)
		}
		if v, err := strconv.ParseFloat(m[1], 64); err != nil || v < 0 || v > 1 {
			t.Errorf("accuracy %q in %s", m[1], re)
		}
	}
}

// TestMLMEvalIsFixed: the validation maskings do not depend on training,
// so two evaluations of one checkpoint agree, and a resumed run's scores
// are comparable with earlier ones.
func TestMLMEvalIsFixed(t *testing.T) {
	dir := trainRun(t, tinyMLM...)
	_, a, _ := runCLI(t, "eval", "--checkpoint", dir)
	_, b, _ := runCLI(t, "eval", "--checkpoint", dir)
	if a == "" || a[strings.Index(a, "\n"):] != b[strings.Index(b, "\n"):] {
		t.Fatalf("two evaluations differ:\n%s\n%s", a, b)
	}
}

func TestMLMPresetListed(t *testing.T) {
	code, stdout, _ := runCLI(t, "presets")
	if code != 0 || !regexp.MustCompile(`(?m)^mlm-toy\s`).MatchString(stdout) {
		t.Fatalf("exit %d, presets:\n%s", code, stdout)
	}
	code, stdout, _ = runCLI(t, "presets", "mlm-toy")
	if code != 0 || !strings.Contains(stdout, "task: mlm") {
		t.Fatalf("exit %d:\n%s", code, stdout)
	}
}
