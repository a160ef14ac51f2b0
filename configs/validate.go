package configs

import (
	"fmt"
	"slices"
	"strings"
)

// Validate checks every value and names the first bad field.
func (c *Config) Validate() error {
	checks := []struct {
		ok    bool
		field string
		want  string
	}{
		{c.Task == "maxnorm", "task", "maxnorm"},
		{c.DType == "float32" || c.DType == "float64", "dtype", "float32 or float64"},
		{oneOf(c.Data.Kind, "gaussian-offset", "max-regression"), "data.kind", "gaussian-offset or max-regression"},
		{c.Data.Dim > 0, "data.dim", "a positive integer"},
		{c.Data.Kind != "max-regression" || c.Data.Dim == 1, "data.dim", "1 for max-regression (its sets are scalars)"},
		{c.Data.MinSet > 0, "data.min_set", "a positive integer"},
		{c.Data.MaxSet >= c.Data.MinSet, "data.max_set", "at least data.min_set"},
		{c.Data.ValidSets > 0, "data.valid_sets", "a positive integer"},
		{c.Data.TestSets > 0, "data.test_sets", "a positive integer"},
		{c.Model.Kind == "set-transformer", "model.kind", "set-transformer"},
		{c.Model.Dim > 0, "model.dim", "a positive integer"},
		{c.Model.Heads > 0 && c.Model.Dim%max(c.Model.Heads, 1) == 0, "model.heads", "a positive divisor of model.dim"},
		{oneOf(c.Model.Encoder, "sab", "isab"), "model.encoder", "sab or isab"},
		{c.Model.Blocks >= 0, "model.blocks", "an integer ≥ 0"},
		{c.Model.Encoder != "isab" || c.Model.Inducing > 0, "model.inducing", "a positive integer for an isab encoder"},
		{c.Model.Seeds > 0, "model.seeds", "a positive integer"},
		{oneOf(c.Model.Attention.Kind, "softmax", "em"), "model.attention.kind", "softmax or em"},
		{c.Model.Attention.KeyIters >= 0, "model.attention.key_iters", "≥ 0"},
		{c.Model.Attention.ValueIters >= 0, "model.attention.value_iters", "≥ 0"},
		{c.Model.Attention.PropagateIters >= 0, "model.attention.propagate_iters", "≥ 0"},
		{oneOf(c.Model.Attention.Prior, "", "linked", "free"), "model.attention.prior", "linked or free"},
		{c.Optimizer.Name == "adam", "optimizer.name", "adam"},
		{c.Optimizer.LR > 0, "optimizer.lr", "a positive number"},
		{c.Optimizer.Beta1 >= 0 && c.Optimizer.Beta1 < 1, "optimizer.beta1", "in [0, 1)"},
		{c.Optimizer.Beta2 >= 0 && c.Optimizer.Beta2 < 1, "optimizer.beta2", "in [0, 1)"},
		{c.Optimizer.Eps > 0, "optimizer.eps", "a positive number"},
		{c.Optimizer.WeightDecay >= 0, "optimizer.weight_decay", "≥ 0"},
		{c.Optimizer.ClipNorm >= 0, "optimizer.clip_norm", "≥ 0"},
		{oneOf(c.Optimizer.Schedule, "constant", "cosine"), "optimizer.schedule", "constant or cosine"},
		{c.Optimizer.WarmupSteps >= 0, "optimizer.warmup_steps", "≥ 0"},
		{c.Optimizer.MinLR >= 0 && c.Optimizer.MinLR <= c.Optimizer.LR, "optimizer.min_lr", "in [0, optimizer.lr]"},
		{c.Training.Steps > 0, "training.steps", "a positive integer"},
		{c.Training.Batch > 0, "training.batch", "a positive integer"},
		{oneOf(c.Training.Loss, "mse", "mae", "euclidean"), "training.loss", "mse, mae or euclidean"},
		{c.Training.LogEvery > 0, "training.log_every", "a positive integer"},
		{c.Training.EvalEvery >= 0, "training.eval_every", "≥ 0 (0: only at the end)"},
		{c.Training.CheckpointEvery >= 0, "training.checkpoint_every", "≥ 0 (0: only at the end)"},
		{c.Training.KeepCheckpoints > 0, "training.keep_checkpoints", "a positive integer"},
	}
	for _, ch := range checks {
		if !ch.ok {
			v, _ := c.Get(ch.field)
			return fmt.Errorf("%s = %s: want %s", ch.field, show(v), ch.want)
		}
	}
	return nil
}

func oneOf(s string, options ...string) bool { return slices.Contains(options, s) }

func show(v any) string {
	if s, ok := v.(string); ok {
		if s == "" {
			return "(missing)"
		}
		return fmt.Sprintf("%q", s)
	}
	return strings.TrimSpace(fmt.Sprint(v))
}
