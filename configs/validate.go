package configs

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// check is one rule: ok, or field should be want.
type check struct {
	ok    bool
	field string
	want  string
}

// Validate checks every value and names the first bad field.
func (c *Config) Validate() error {
	checks := []check{
		{oneOf(c.Task, "maxnorm", "seq2seq", "segment", "mlm"), "task", "maxnorm, seq2seq, segment or mlm"},
		{c.DType == "float32" || c.DType == "float64", "dtype", "float32 or float64"},
		{c.Init.EncoderFrom == "" || c.Task == "seq2seq", "init.encoder_from", "empty: only task seq2seq starts from a pretrained encoder"},
		{c.Data.Sampling == "" || c.Task == "seq2seq", "data.sampling", "empty: only task seq2seq reads it"},
		{!c.Model.FinalNorm || c.Task == "seq2seq", "model.final_norm", "false: only task seq2seq has it"},
		{!c.Model.TieOutput || c.Task == "seq2seq", "model.tie_output", "false: only task seq2seq has it"},
	}
	switch c.Task {
	case "maxnorm":
		checks = append(checks, c.maxNormChecks()...)
	case "seq2seq":
		checks = append(checks, c.seq2seqChecks()...)
	case "segment":
		checks = append(checks, c.segmentChecks()...)
	case "mlm":
		checks = append(checks, c.mlmChecks()...)
	}
	a := c.Model.Attention
	bayes := oneOf(a.Kind, "bayes-weibull", "bayes-lognormal")
	checks = append(checks, []check{
		{c.Model.Dim > 0, "model.dim", "a positive integer"},
		{c.Model.Heads > 0 && c.Model.Dim%max(c.Model.Heads, 1) == 0, "model.heads", "a positive divisor of model.dim"},
		{oneOf(a.Kind, "softmax", "em", "bayes-weibull", "bayes-lognormal"), "model.attention.kind", "softmax, em, bayes-weibull or bayes-lognormal"},
		{!bayes || c.Task != "segment", "model.attention.kind", "softmax or em for task segment"},
		{a.HeadDiversity == 0 || c.Task != "segment", "model.attention.head_diversity", "0 for task segment (its EM layers have no multi-head rows)"},
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
		{c.Training.EMADecay >= 0 && c.Training.EMADecay < 1, "training.ema_decay", "in [0, 1) (0: no weight average)"},
		{c.Optimizer.Name == "adam", "optimizer.name", "adam"},
		{c.Optimizer.LR > 0, "optimizer.lr", "a positive number"},
		{c.Optimizer.Beta1 >= 0 && c.Optimizer.Beta1 < 1, "optimizer.beta1", "in [0, 1)"},
		{c.Optimizer.Beta2 >= 0 && c.Optimizer.Beta2 < 1, "optimizer.beta2", "in [0, 1)"},
		{c.Optimizer.Eps > 0, "optimizer.eps", "a positive number"},
		{c.Optimizer.WeightDecay >= 0, "optimizer.weight_decay", "≥ 0"},
		{c.Optimizer.ClipNorm >= 0, "optimizer.clip_norm", "≥ 0"},
		{oneOf(c.Optimizer.Schedule, "constant", "cosine", "inverse_sqrt"), "optimizer.schedule", "constant, cosine or inverse_sqrt"},
		{c.Optimizer.WarmupSteps >= 0, "optimizer.warmup_steps", "≥ 0"},
		{c.Optimizer.Schedule != "inverse_sqrt" || c.Optimizer.WarmupSteps > 0, "optimizer.warmup_steps", "positive for inverse_sqrt"},
		{c.Optimizer.MinLR >= 0 && c.Optimizer.MinLR <= c.Optimizer.LR, "optimizer.min_lr", "in [0, optimizer.lr]"},
		{c.Training.Steps > 0, "training.steps", "a positive integer"},
		{c.Training.Batch > 0, "training.batch", "a positive integer"},
		{c.Training.KLWeight >= 0, "training.kl_weight", "≥ 0 (0: no KL term)"},
		{c.Training.KLWarmup >= 0, "training.kl_warmup", "≥ 0 (0: no warm-up)"},
		{c.Training.LogEvery > 0, "training.log_every", "a positive integer"},
		{c.Training.EvalEvery >= 0, "training.eval_every", "≥ 0 (0: only at the end)"},
		{c.Training.CheckpointEvery >= 0, "training.checkpoint_every", "≥ 0 (0: only at the end)"},
		{c.Training.KeepCheckpoints > 0, "training.keep_checkpoints", "a positive integer"},
	}...)
	for _, ch := range checks {
		if !ch.ok {
			v, _ := c.Get(ch.field)
			return fmt.Errorf("%s = %s: want %s", ch.field, show(v), ch.want)
		}
	}
	return nil
}

func (c *Config) maxNormChecks() []check {
	d, m := c.Data, c.Model
	return []check{
		{oneOf(d.Kind, "gaussian-offset", "max-regression"), "data.kind", "gaussian-offset or max-regression"},
		{d.Dim > 0, "data.dim", "a positive integer"},
		{d.Kind != "max-regression" || d.Dim == 1, "data.dim", "1 for max-regression (its sets are scalars)"},
		{d.MinSet > 0, "data.min_set", "a positive integer"},
		{d.MaxSet >= d.MinSet, "data.max_set", "at least data.min_set"},
		{d.ValidSets > 0, "data.valid_sets", "a positive integer"},
		{d.TestSets > 0, "data.test_sets", "a positive integer"},
		{m.Kind == "set-transformer", "model.kind", "set-transformer for task maxnorm"},
		{oneOf(m.Encoder, "sab", "isab"), "model.encoder", "sab or isab"},
		{m.Blocks >= 0, "model.blocks", "an integer ≥ 0"},
		{m.Encoder != "isab" || m.Inducing > 0, "model.inducing", "a positive integer for an isab encoder"},
		{m.Seeds > 0, "model.seeds", "a positive integer"},
		{oneOf(c.Training.Loss, "mse", "mae", "euclidean"), "training.loss", "mse, mae or euclidean"},
	}
}

func (c *Config) seq2seqChecks() []check {
	m, t := c.Model, c.Training
	return append(c.corpusChecks(),
		check{m.Kind == "transformer", "model.kind", "transformer for task seq2seq"},
		check{m.FF > 0, "model.ff", "a positive integer"},
		check{m.EncLayers > 0, "model.enc_layers", "a positive integer"},
		check{m.DecLayers > 0, "model.dec_layers", "a positive integer"},
		check{m.Dropout >= 0 && m.Dropout < 1, "model.dropout", "in [0, 1)"},
		check{t.Loss == "cross_entropy", "training.loss", "cross_entropy for task seq2seq"},
		check{t.LabelSmoothing >= 0 && t.LabelSmoothing < 1, "training.label_smoothing", "in [0, 1)"},
		check{t.Beam > 0, "training.beam", "a positive integer"},
		check{t.LengthPenalty >= 0, "training.length_penalty", "≥ 0"},
		check{oneOf(c.Data.Sampling, "", "with_replacement", "epochs"), "data.sampling", "with_replacement or epochs"},
	)
}

// corpusChecks are the data checks of the tasks that read a seq2seq
// corpus: seq2seq, and mlm on its source side.
func (c *Config) corpusChecks() []check {
	d := c.Data
	toy := d.Source == "toy"
	return []check{
		{oneOf(d.Source, "toy", "tsv"), "data.source", "toy or tsv"},
		{!toy || d.TrainPairs > 0, "data.train_pairs", "a positive integer"},
		{!toy || d.ValidPairs > 0, "data.valid_pairs", "a positive integer"},
		{!toy || d.TestPairs > 0, "data.test_pairs", "a positive integer"},
		{toy || d.TrainFile != "", "data.train_file", "a TSV file (set it with --set data.train_file=PATH)"},
		{toy || d.ValidFile != "", "data.valid_file", "a TSV file (set it with --set data.valid_file=PATH)"},
		{toy || d.TestFile != "", "data.test_file", "a TSV file (set it with --set data.test_file=PATH)"},
		{d.MaxLen > 0, "data.max_len", "a positive integer"},
		{d.MinCount >= 0, "data.min_count", "≥ 0"},
	}
}

// mlmChecks: a masked LM pretrains the encoder of task seq2seq's
// Transformer (model.dec_layers, beam and length_penalty are not read).
func (c *Config) mlmChecks() []check {
	d, m, t := c.Data, c.Model, c.Training
	return append(c.corpusChecks(),
		check{d.MaskProb > 0 && d.MaskProb < 1, "data.mask_prob", "in (0, 1); BERT's is 0.15"},
		check{m.Kind == "transformer", "model.kind", "transformer for task mlm"},
		check{m.FF > 0, "model.ff", "a positive integer"},
		check{m.EncLayers > 0, "model.enc_layers", "a positive integer"},
		check{m.Dropout >= 0 && m.Dropout < 1, "model.dropout", "in [0, 1)"},
		check{t.Loss == "cross_entropy", "training.loss", "cross_entropy for task mlm"},
		check{t.LabelSmoothing >= 0 && t.LabelSmoothing < 1, "training.label_smoothing", "in [0, 1)"},
	)
}

func (c *Config) segmentChecks() []check {
	d, m, t := c.Data, c.Model, c.Training
	return []check{
		{d.ImageSize >= 2, "data.image_size", "an integer ≥ 2"},
		{d.MinRegions >= 1, "data.min_regions", "a positive integer"},
		{d.MaxRegions >= d.MinRegions, "data.max_regions", "at least data.min_regions"},
		{d.MaxRegions <= d.ImageSize*d.ImageSize, "data.max_regions", "at most data.image_size² (one pixel per region)"},
		{d.Classes >= d.MaxRegions && d.Classes >= 2, "data.classes", "at least data.max_regions and 2 (each region has its own class)"},
		{d.Noise >= 0, "data.noise", "≥ 0"},
		{d.Confusable >= 0 && d.Confusable <= 1, "data.confusable", "a probability in [0, 1]"},
		{d.ValidSets > 0, "data.valid_sets", "a positive integer (images)"},
		{d.TestSets > 0, "data.test_sets", "a positive integer (images)"},
		{d.MaxClicks >= 0, "data.max_clicks", "≥ 0"},
		{d.ValidClicks >= 0, "data.valid_clicks", "≥ 0"},
		{m.Kind == "segmenter", "model.kind", "segmenter for task segment"},
		{m.EncLayers > 0, "model.enc_layers", "a positive integer (layers of the pixel MLP)"},
		{m.Blocks > 0, "model.blocks", "a positive integer (EM attention layers)"},
		{m.Attention.Kind == "em", "model.attention.kind", "em for task segment (clicks are em's annotated units)"},
		{t.Loss == "cross_entropy", "training.loss", "cross_entropy for task segment"},
		{t.LabelSmoothing >= 0 && t.LabelSmoothing < 1, "training.label_smoothing", "in [0, 1)"},
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
