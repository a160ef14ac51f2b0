package configs

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// Validate checks every value and names the first bad field: first the
// parts every run shares (task, dtype, optimizer, training schedule), then
// the task's own (its registered Section).
func (c *Config) Validate() error {
	section, ok := lookupSection(c.Task)
	if err := c.Check(Rule{ok, "task", orList(Tasks())}); err != nil {
		return err
	}
	if err := c.Check(c.sharedRules()...); err != nil {
		return err
	}
	return section.Validate(c)
}

// sharedRules are the rules of the sections every task has.
func (c *Config) sharedRules() []Rule {
	o, t := c.Optimizer, c.Training
	return []Rule{
		{c.DType == "float32" || c.DType == "float64", "dtype", "float32 or float64"},
		{t.EMADecay >= 0 && t.EMADecay < 1, "training.ema_decay", "in [0, 1) (0: no weight average)"},
		{o.Name == "adam", "optimizer.name", "adam"},
		{o.LR > 0, "optimizer.lr", "a positive number"},
		{o.Beta1 >= 0 && o.Beta1 < 1, "optimizer.beta1", "in [0, 1)"},
		{o.Beta2 >= 0 && o.Beta2 < 1, "optimizer.beta2", "in [0, 1)"},
		{o.Eps > 0, "optimizer.eps", "a positive number"},
		{o.WeightDecay >= 0, "optimizer.weight_decay", "≥ 0"},
		{o.ClipNorm >= 0, "optimizer.clip_norm", "≥ 0"},
		{oneOf(o.Schedule, "constant", "cosine", "inverse_sqrt"), "optimizer.schedule", "constant, cosine or inverse_sqrt"},
		{o.WarmupSteps >= 0, "optimizer.warmup_steps", "≥ 0"},
		{o.Schedule != "inverse_sqrt" || o.WarmupSteps > 0, "optimizer.warmup_steps", "positive for inverse_sqrt"},
		{o.MinLR >= 0 && o.MinLR <= o.LR, "optimizer.min_lr", "in [0, optimizer.lr]"},
		{t.Steps > 0, "training.steps", "a positive integer"},
		{t.Batch > 0, "training.batch", "a positive integer"},
		{t.KLWeight >= 0, "training.kl_weight", "≥ 0 (0: no KL term)"},
		{t.KLWarmup >= 0, "training.kl_warmup", "≥ 0 (0: no warm-up)"},
		{t.LogEvery > 0, "training.log_every", "a positive integer"},
		{t.EvalEvery >= 0, "training.eval_every", "≥ 0 (0: only at the end)"},
		{t.CheckpointEvery >= 0, "training.checkpoint_every", "≥ 0 (0: only at the end)"},
		{t.KeepCheckpoints > 0, "training.keep_checkpoints", "a positive integer"},
	}
}

// attentionRules are the rules of model.attention.
func attentionRules(c *Config) []Rule {
	a := c.Model.Attention
	bayes := oneOf(a.Kind, "bayes-weibull", "bayes-lognormal")
	return []Rule{
		{oneOf(a.Kind, "softmax", "em", "bayes-weibull", "bayes-lognormal"), "model.attention.kind", "softmax, em, bayes-weibull or bayes-lognormal"},
		{a.KeyIters >= 0, "model.attention.key_iters", "≥ 0"},
		{a.ValueIters >= 0, "model.attention.value_iters", "≥ 0"},
		{a.PropagateIters >= 0, "model.attention.propagate_iters", "≥ 0"},
		{bayes || oneOf(a.Prior, "", "linked", "free"), "model.attention.prior", "linked or free"},
		{!bayes || oneOf(a.Prior, "", "contextual", "constant"), "model.attention.prior", "contextual or constant for Bayesian attention"},
		{a.K >= 0, "model.attention.k", "≥ 0 (0: the default, 10)"},
		{a.Sigma >= 0, "model.attention.sigma", "≥ 0 (0: the default, 1)"},
		{a.PriorRate >= 0, "model.attention.prior_rate", "≥ 0 (0: the default, 1)"},
		{a.PriorSigma >= 0, "model.attention.prior_sigma", "≥ 0 (0: the default, 1)"},
		{!bayes || oneOf(a.Score, "", "scaled_dot"), "model.attention.score", "scaled_dot for Bayesian attention"},
		{!bayes || a.RelativePositions == 0, "model.attention.relative_positions", "0 for Bayesian attention"},
		{oneOf(a.Score, "", "dot", "scaled_dot", "bilinear", "additive"), "model.attention.score", "dot, scaled_dot, bilinear or additive"},
		{a.RelativePositions >= 0, "model.attention.relative_positions", "≥ 0 (0: off)"},
		{a.HeadDiversity >= 0 && a.HeadDiversity <= math.MaxFloat64, "model.attention.head_diversity", "a finite number ≥ 0 (0: off)"},
		{a.Dropout >= 0 && a.Dropout < 1, "model.attention.dropout", "in [0, 1) (0: off)"},
		{a.Dropout == 0 || (a.Kind == "softmax" && oneOf(a.Score, "", "scaled_dot") && a.RelativePositions == 0), "model.attention.dropout",
			"0 unless kind softmax with score scaled_dot and no relative positions"},
	}
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
