package configs

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/probformer/probformer/layers"
)

// Validate checks every value and names the first bad field: first the
// parts every run shares (task, dtype, optimizer, training schedule), then
// the task's own sections, by the rules its registration gave.
func (c *Config) Validate() error {
	s, ok := lookupSection(c.Task)
	want := orList(Tasks())
	if want == "" {
		want = "a registered task (none is: import the package that registers it; the presets' tasks are github.com/probformer/probformer/cmd/trainer/tasks)"
	}
	if err := c.Check(Rule{ok, "task", want}); err != nil {
		return err
	}
	if err := c.Check(c.sharedRules()...); err != nil {
		return err
	}
	return s.validate(c)
}

// MaxLR is the largest optimizer.lr: a float32's largest value. A larger
// learning rate is +Inf in a float32 run's Adam step, which makes its
// weights NaN; no smaller one is refused, so that a run can be made to
// diverge on purpose.
const MaxLR = math.MaxFloat32

// Ceilings of the sizes every task shares; a task's own sizes have
// theirs in its rules (the built-in tasks': cmd/trainer/tasks/budget.go,
// with the memory estimate). They refuse, before anything is allocated,
// sizes no run of this trainer needs: a batch of a billion rows died in
// a second with "fatal error: runtime: out of memory".
const (
	// MaxBatch bounds training.batch.
	MaxBatch = 1 << 20
	// MaxBeam bounds training.beam (and translate's --beam).
	MaxBeam = 64
	// MaxAttentionIters bounds each of model.attention's key_iters,
	// value_iters and propagate_iters: EM attention unrolls them into the
	// graph, one copy of its tensors each.
	MaxAttentionIters = 100
	// MaxRelativePositions bounds model.attention.relative_positions, the
	// clip distance δ: a layer holds a (2δ+1)-row table and a
	// [length, 2δ+1, length] gather.
	MaxRelativePositions = 4096
)

// sharedRules are the rules of the sections every task has. Every float
// must be finite; a config file or --set cannot give a NaN or an Inf (the
// decoder refuses them), but a Config built in Go can.
func (c *Config) sharedRules() []Rule {
	o, t := c.Optimizer, c.Training
	return []Rule{
		{c.DType == "float32" || c.DType == "float64", "dtype", "float32 or float64"},
		{t.EMADecay >= 0 && t.EMADecay < 1, "training.ema_decay", "in [0, 1) (0: no weight average)"},
		{o.Name == "adam", "optimizer.name", "adam"},
		{o.LR > 0 && o.LR <= MaxLR, "optimizer.lr", "a positive number ≤ 3.4e38 (a float32's largest)"},
		{o.Beta1 >= 0 && o.Beta1 < 1, "optimizer.beta1", "in [0, 1)"},
		{o.Beta2 >= 0 && o.Beta2 < 1, "optimizer.beta2", "in [0, 1)"},
		{o.Eps > 0 && finite(o.Eps), "optimizer.eps", "a finite positive number"},
		// Each step multiplies the weights by 1 − lr·weight_decay: at
		// lr·weight_decay ≥ 1 it zeroes or flips them, past 2 they grow
		// without bound.
		{o.WeightDecay >= 0 && o.LR*o.WeightDecay < 1, "optimizer.weight_decay",
			"≥ 0 and below 1/optimizer.lr (each step scales the weights by 1 − lr·weight_decay)"},
		{o.ClipNorm >= 0 && finite(o.ClipNorm), "optimizer.clip_norm", "a finite number ≥ 0 (0: no clipping)"},
		{oneOf(o.Schedule, "constant", "cosine", "inverse_sqrt"), "optimizer.schedule", "constant, cosine or inverse_sqrt"},
		{o.WarmupSteps >= 0, "optimizer.warmup_steps", "≥ 0"},
		{o.Schedule != "inverse_sqrt" || o.WarmupSteps > 0, "optimizer.warmup_steps", "positive for inverse_sqrt"},
		{o.MinLR >= 0 && o.MinLR <= o.LR, "optimizer.min_lr", "in [0, optimizer.lr]"},
		{t.Steps > 0, "training.steps", "a positive integer"},
		{t.Batch > 0, "training.batch", "a positive integer"},
		{t.Batch <= MaxBatch, "training.batch", fmt.Sprintf("an integer in [1, %d]", MaxBatch)},
		{t.LabelSmoothing >= 0 && t.LabelSmoothing < 1, "training.label_smoothing", "in [0, 1)"},
		{t.Beam >= 0, "training.beam", "≥ 0"},
		{t.Beam <= MaxBeam, "training.beam", fmt.Sprintf("an integer in [0, %d]", MaxBeam)},
		{t.LengthPenalty >= 0 && finite(t.LengthPenalty), "training.length_penalty", "a finite number ≥ 0"},
		{t.KLWeight >= 0 && finite(t.KLWeight), "training.kl_weight", "a finite number ≥ 0 (0: no KL term)"},
		{t.KLWarmup >= 0, "training.kl_warmup", "≥ 0 (0: no warm-up)"},
		{t.LogEvery > 0, "training.log_every", "a positive integer"},
		{t.EvalEvery >= 0, "training.eval_every", "≥ 0 (0: only at the end)"},
		{t.CheckpointEvery >= 0, "training.checkpoint_every", "≥ 0 (0: only at the end)"},
		{t.KeepCheckpoints > 0, "training.keep_checkpoints", "a positive integer"},
		{t.Accumulate >= 0 && t.Accumulate <= MaxBatch, "training.accumulate",
			fmt.Sprintf("an integer in [0, %d] (0 or 1: no gradient accumulation)", MaxBatch)},
		{t.Accumulate <= 1 || t.Batch%t.Accumulate == 0, "training.accumulate",
			fmt.Sprintf("a divisor of training.batch = %d (a step runs accumulate micro-batches of batch/accumulate examples)", t.Batch)},
		{t.EarlyStop.Patience >= 0, "training.early_stop.patience", "an integer ≥ 0 (validations without improvement; 0: off)"},
		{t.EarlyStop.MinDelta >= 0 && finite(t.EarlyStop.MinDelta), "training.early_stop.min_delta", "a finite number ≥ 0"},
	}
}

// finite reports whether x is neither NaN nor infinite.
func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// CheckAttention checks the attention settings a at the dotted key (say
// "model.attention") by layers' own rules (layers.AttentionConfig.Validate),
// naming a bad field as the config has it: "model.attention.k = -1: want
// ≥ 0". A config must name the kind. layers owns the rules, so a task
// with attention checks them here rather than repeating them.
func (c *Config) CheckAttention(key string, a layers.AttentionConfig) error {
	if err := c.Check(Rule{a.Kind != "", key + ".kind", "softmax, em, bayes-weibull or bayes-lognormal"}); err != nil {
		return err
	}
	var fe *layers.AttentionFieldError
	if err := a.Validate(); errors.As(err, &fe) {
		return c.Check(Rule{false, key + "." + fe.Field, fe.Want})
	} else if err != nil {
		return fmt.Errorf("%s: %w", key, err)
	}
	iters := fmt.Sprintf("an integer in [0, %d]", MaxAttentionIters)
	return c.Check(
		Rule{a.KeyIters <= MaxAttentionIters, key + ".key_iters", iters},
		Rule{a.ValueIters <= MaxAttentionIters, key + ".value_iters", iters},
		Rule{a.PropagateIters <= MaxAttentionIters, key + ".propagate_iters", iters},
		Rule{a.RelativePositions <= MaxRelativePositions, key + ".relative_positions",
			fmt.Sprintf("an integer in [0, %d] (0: off)", MaxRelativePositions)},
	)
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
