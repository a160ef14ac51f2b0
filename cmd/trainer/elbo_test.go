package main

import (
	"math"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"probformer/cmd/trainer/train"
	"probformer/configs"
	"probformer/graph"
)

// TestHeadDiversityObjective: with λ > 0 the loss is the task's loss plus
// λ times the sum of the layers' diversity penalties, and the progress
// values nll and diversity are tracked.
func TestHeadDiversityObjective(t *testing.T) {
	const lambda = 0.25
	var sets []string
	for i := 0; i < len(tiny); i += 2 {
		sets = append(sets, tiny[i+1])
	}
	cfg, err := configs.Load("maxnorm", append(sets, "dtype=float64", "model.attention.head_diversity=0.25"))
	if err != nil {
		t.Fatal(err)
	}
	tk, err := newMaxNormTask(cfg)
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

// TestHeadDiversityZeroChangesNothing: a run with λ = 0 is the run without
// the regulariser, to the bit: same losses, metrics and weights.
func TestHeadDiversityZeroChangesNothing(t *testing.T) {
	dir := t.TempDir()
	plain, zero := filepath.Join(dir, "plain"), filepath.Join(dir, "zero")
	base := append([]string{"train", "--set", "training.steps=15"}, tiny...)
	if code, _, stderr := runCLI(t, append(base, "--out", plain)...); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if code, _, stderr := runCLI(t, append(base, "--out", zero, "--set", "model.attention.head_diversity=0")...); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	a, b := readMetrics(t, plain), readMetrics(t, zero)
	for _, l := range b {
		delete(l, "steps_per_sec")
	}
	for _, l := range a {
		delete(l, "steps_per_sec")
	}
	if !reflect.DeepEqual(a, b) {
		t.Errorf("metrics differ:\n%v\n%v", a, b)
	}
	pa, err := graph.ReadCheckpoint(filepath.Join(plain, train.CheckpointName(15)))
	if err != nil {
		t.Fatal(err)
	}
	pb, err := graph.ReadCheckpoint(filepath.Join(zero, train.CheckpointName(15)))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(pa.Params, pb.Params) {
		t.Error("weights differ")
	}
}
