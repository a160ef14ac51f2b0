package main

import (
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"probformer/cmd/trainer/train"
	"probformer/configs"
	"probformer/graph"
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

// TestBayesMaxNormLoss: the training loss is the regression loss plus
// κ times the mean of the layers' KL penalties, with κ fed by atStep; the
// evaluation graph has no penalties.
func TestBayesMaxNormLoss(t *testing.T) {
	var sets []string
	for i := 2; i < len(bayesTiny); i += 2 {
		sets = append(sets, bayesTiny[i+1])
	}
	cfg, err := configs.Load("maxnorm-bayes", append(sets, "dtype=float64", "training.kl_weight=2", "training.kl_warmup=10"))
	if err != nil {
		t.Fatal(err)
	}
	tk, err := newMaxNormTask(cfg)
	if err != nil {
		t.Fatal(err)
	}
	params := graph.NewParams(graph.Float64, cfg.Seed)
	trainProg, err := graph.Compile(params, tk.Build(cfg.Training.Batch), true)
	if err != nil {
		t.Fatal(err)
	}
	eval, err := graph.Compile(params, tk.Build(4), false)
	if err != nil {
		t.Fatal(err)
	}
	if eval.HasInput(train.KLWeightInput) || len(eval.PenaltyValues()) != 0 || eval.HasNoise() {
		t.Fatal("the evaluation graph has a KL weight, penalties or noise")
	}
	if err := tk.Feed(rand.New(rand.NewPCG(1, 2)), trainProg, 1); err != nil {
		t.Fatal(err)
	}
	loss := map[int]float64{}
	var penalties map[string]float64
	for _, step := range []int{0, 5, 10} {
		trainProg.DrawNoise(rand.New(rand.NewPCG(3, 4))) // the same sample each time
		if err := tk.AtStep(trainProg, step, cfg.Training.Steps); err != nil {
			t.Fatal(err)
		}
		if err := trainProg.Run(); err != nil {
			t.Fatal(err)
		}
		loss[step] = trainProg.Loss()
		penalties = trainProg.PenaltyValues()
	}
	var mean float64
	var layers int
	for name, v := range penalties {
		if !strings.HasSuffix(name, ".kl") {
			continue
		}
		if !(v > 0) || math.IsInf(v, 0) {
			t.Errorf("penalty %s = %v, want a finite, positive KL", name, v)
		}
		mean += v
		layers++
	}
	if layers < 2 {
		t.Fatalf("penalties %v, want one KL per attention layer", penalties)
	}
	mean /= float64(layers)
	if math.Abs(penalties["kl"]-mean) > 1e-12*mean {
		t.Errorf("tracked kl = %.15g, want the layers' mean %.15g", penalties["kl"], mean)
	}
	if penalties["nll"] != loss[0] {
		t.Errorf("tracked nll = %.15g, want the loss at κ = 0, %.15g", penalties["nll"], loss[0])
	}
	for _, step := range []int{5, 10} {
		want := loss[0] + train.KLWeight(cfg.Training.KLWeight, cfg.Training.KLWarmup, step)*mean
		if math.Abs(loss[step]-want) > 1e-12*math.Abs(want) {
			t.Errorf("loss at step %d = %.15g, want NLL %.15g + κ·KL̄ = %.15g", step, loss[step], loss[0], want)
		}
	}
}

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
