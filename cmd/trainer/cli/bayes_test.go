package cli

import (
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/probformer/probformer/cmd/trainer/train"
)

func TestBayesKLWeight(t *testing.T) {
	cases := []struct {
		weight       float64
		warmup, step int
		want         float64
	}{
		{1, 0, 1, 1},
		{2, 100, 0, 0},
		{2, 100, 25, 0.5},
		{2, 100, 100, 2},
		{2, 100, 5000, 2},
		{0.5, 4, 3, 0.375},
		{0, 10, 5, 0},
	}
	for _, c := range cases {
		got := train.KLWeight(c.weight, c.warmup, c.step)
		if math.Abs(got-c.want) > 1e-15 {
			t.Errorf("κ(%d) with kl_weight %v, kl_warmup %d = %v, want %v", c.step, c.weight, c.warmup, got, c.want)
		}
	}
}

// bayesTiny shrinks maxnorm-bayes like tiny does maxnorm.
var bayesTiny = append([]string{"--config", "maxnorm-bayes"}, tiny...)

// TestBayesMaxNormTrains runs maxnorm-bayes briefly: the loss falls, each
// layer's KL is logged finite, and evaluation runs.
func TestBayesMaxNormTrains(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	args := append([]string{"train", "--out", dir, "--set", "training.steps=40", "--set", "training.kl_warmup=10"}, bayesTiny...)
	code, _, stderr := runCLI(t, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	m := readMetrics(t, dir)
	var first, last float64
	var kls int
	for _, l := range m {
		v, ok := l["train_loss"]
		if !ok {
			continue
		}
		if first == 0 {
			first = v
		}
		last = v
		for name, kl := range l {
			if strings.HasPrefix(name, "train_") && strings.HasSuffix(name, ".kl") {
				kls++
				if !(kl > 0) || math.IsInf(kl, 0) {
					t.Errorf("%s = %v, want finite and > 0", name, kl)
				}
			}
		}
	}
	if kls == 0 {
		t.Fatalf("no train_*.kl in metrics %v", m)
	}
	for _, name := range []string{"train_nll", "train_kl"} {
		if _, ok := m[0][name]; !ok {
			t.Errorf("no %s in the first metrics line %v", name, m[0])
		}
	}
	if !(last < first) {
		t.Errorf("training loss did not fall: %v → %v", first, last)
	}
	if code, stdout, stderr := runCLI(t, "eval", "--checkpoint", dir); code != 0 || !strings.Contains(stdout, "MSE") {
		t.Fatalf("eval exit %d: %s\n%s", code, stderr, stdout)
	}
}
