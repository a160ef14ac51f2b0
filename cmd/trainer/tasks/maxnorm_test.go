package tasks

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/probformer/probformer/cmd/trainer/train"
	"github.com/probformer/probformer/configs"
	"github.com/probformer/probformer/graph"
)

// TestBayesMaxNormLoss: the training loss is the regression loss plus
// κ times the mean of the layers' KL penalties, with κ fed by atStep; the
// evaluation graph has no penalties.
func TestBayesMaxNormLoss(t *testing.T) {
	cfg, err := configs.Load("maxnorm-bayes", append(slices.Clone(tiny), "dtype=float64", "training.kl_weight=2", "training.kl_warmup=10"))
	if err != nil {
		t.Fatal(err)
	}
	tk, err := newMaxNormTask(cfg, cfg.Data.(*MaxNormData), cfg.Model.(*MaxNormModel))
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

// TestHeadDiversityObjective: with λ > 0 the loss is the task's loss plus
// λ times the sum of the layers' diversity penalties, and the progress
// values nll and diversity are tracked.
func TestHeadDiversityObjective(t *testing.T) {
	const lambda = 0.25
	cfg, err := configs.Load("maxnorm", append(slices.Clone(tiny), "dtype=float64", "model.attention.head_diversity=0.25"))
	if err != nil {
		t.Fatal(err)
	}
	tk, err := newMaxNormTask(cfg, cfg.Data.(*MaxNormData), cfg.Model.(*MaxNormModel))
	if err != nil {
		t.Fatal(err)
	}
	trainProg, err := graph.Compile(graph.NewParams(graph.Float64, cfg.Seed), tk.Build(cfg.Training.Batch), true)
	if err != nil {
		t.Fatal(err)
	}
	if err := tk.Feed(rand.New(rand.NewPCG(1, 2)), trainProg, 1); err != nil {
		t.Fatal(err)
	}
	if err := trainProg.Run(); err != nil {
		t.Fatal(err)
	}
	tracked := trainProg.PenaltyValues()
	var sum float64
	var layers int
	for name, v := range tracked {
		if strings.HasSuffix(name, ".diversity") {
			sum += v
			layers++
		}
	}
	if layers < 3 {
		t.Fatalf("tracked %v: want a diversity penalty per attention layer", tracked)
	}
	if math.Abs(tracked["diversity"]-sum) > 1e-12*sum {
		t.Errorf("tracked diversity %.15g, want the layers' sum %.15g", tracked["diversity"], sum)
	}
	want := tracked["nll"] + lambda*sum
	if got := trainProg.Loss(); math.Abs(got-want) > 1e-12*want {
		t.Errorf("loss %.15g, want nll + λ·Σ diversity = %.15g", got, want)
	}
}
