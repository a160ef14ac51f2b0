package main

import (
	"math"
	"path/filepath"
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
	if code, _, stderr := runCLI(t, "eval", "--checkpoint", soft, "--samples", "3"); code != 2 || !strings.Contains(stderr, "not sampled") {
		t.Errorf("--samples on softmax attention: exit %d, %q", code, stderr)
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
