package tasks

import (
	"context"
	"testing"

	"github.com/probformer/probformer/cmd/trainer/train"
	"github.com/probformer/probformer/configs"
	"github.com/probformer/probformer/graph"
)

// tiny shrinks preset maxnorm so a run takes a second or two (the
// overrides of cmd/trainer's tests).
var tiny = []string{
	"model.dim=8", "model.heads=2", "model.inducing=4",
	"data.min_set=6", "data.max_set=8", "data.valid_sets=64", "data.test_sets=64",
	"training.batch=8", "training.log_every=5", "optimizer.warmup_steps=5",
}

// tinySeq2Seq shrinks preset seq2seq-toy to a 5-step run.
var tinySeq2Seq = []string{
	"model.dim=8", "model.heads=2", "model.ff=16", "model.enc_layers=1", "model.dec_layers=2",
	"data.train_pairs=200", "data.valid_pairs=20", "data.test_pairs=20", "data.lowercase=true",
	"training.steps=5", "training.batch=8", "training.eval_every=5", "training.log_every=5",
}

// trainTiny trains a preset with overrides through the library alone, as
// a user's program would (train.NewTask, train.New, Loop.Run), in a
// temporary run directory, and returns the task and the finished loop.
func trainTiny(t *testing.T, preset string, sets ...string) (train.Task, *train.Loop) {
	t.Helper()
	cfg, err := configs.Load(preset, sets)
	if err != nil {
		t.Fatal(err)
	}
	tk, err := train.NewTask(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	dt, err := graph.ParseDType(cfg.DType)
	if err != nil {
		t.Fatal(err)
	}
	tr := cfg.Training
	loop, err := train.New(tk, train.Settings{Dir: t.TempDir(), Steps: tr.Steps, Batch: tr.Batch, Seed: cfg.Seed, DType: dt,
		LogEvery: tr.LogEvery, EvalEvery: tr.EvalEvery, Config: cfg.YAML()})
	if err != nil {
		t.Fatal(err)
	}
	if err := loop.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	return tk, loop
}
