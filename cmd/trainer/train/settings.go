package train

import (
	"fmt"

	"github.com/probformer/probformer/configs"
	"github.com/probformer/probformer/graph"
	"github.com/probformer/probformer/graph/optim"
)

// SettingsFromConfig maps a config's dtype, optimizer and training
// sections to the Settings of a Loop in run directory dir, as `trainer
// train` does: Adam with its betas, eps, weight decay and clipping, the
// learning-rate schedule, the cadences, gradient accumulation
// (training.accumulate), early stopping (training.early_stop), and
// Config, the config's YAML, which the trainer's commands (eval, export,
// translate, inspect, --resume) read from the run's checkpoints: a run
// whose checkpoints hold no config cannot be read by them. The caller
// adds what a config does not say: Progress, Out, Comm, Init, Extra.
func SettingsFromConfig(cfg *configs.Config, dir string) (Settings, error) {
	dt, err := graph.ParseDType(cfg.DType)
	if err != nil {
		return Settings{}, err
	}
	o, tr := cfg.Optimizer, cfg.Training
	opt := optim.NewAdam(o.LR)
	opt.Beta1, opt.Beta2, opt.Eps = o.Beta1, o.Beta2, o.Eps
	opt.WeightDecay, opt.ClipNorm = o.WeightDecay, o.ClipNorm
	schedule, err := NewSchedule(o.Schedule, o.LR, o.MinLR, o.WarmupSteps)
	if err != nil {
		return Settings{}, fmt.Errorf("optimizer: %w", err)
	}
	return Settings{
		Dir: dir, Steps: tr.Steps, Batch: tr.Batch, Seed: cfg.Seed, DType: dt,
		Optimizer: opt, Schedule: schedule, EMADecay: tr.EMADecay,
		LogEvery: tr.LogEvery, EvalEvery: tr.EvalEvery, CheckpointEvery: tr.CheckpointEvery, KeepCheckpoints: tr.KeepCheckpoints,
		Accumulate: tr.Accumulate, EarlyStop: EarlyStop(tr.EarlyStop),
		Config: cfg.YAML(),
	}, nil
}
