package configs

// The built-in tasks' sections. They share the Data and Model structs, so
// that the configs and checkpoints written before keep reading and
// writing byte for byte, but each task has its own rules, registered
// through RegisterTask as a user's task registers its own.
func init() {
	for _, t := range []struct {
		name string
		s    Section
	}{{"maxnorm", maxNormSection{}}, {"seq2seq", seq2seqSection{}}, {"segment", segmentSection{}}, {"mlm", mlmSection{}}} {
		if err := RegisterTask(t.name, t.s); err != nil {
			panic(err) // a programming error, found by every test
		}
	}
}

// maxNormSection is task maxnorm's: max-norm sets and a Set Transformer.
type maxNormSection struct{}

func (maxNormSection) Validate(c *Config) error {
	if err := c.Check(concat(notSeq2Seq(c), maxNormRules(c), modelRules(c))...); err != nil {
		return err
	}
	return validateAttention(c)
}

// seq2seqSection is task seq2seq's: a parallel corpus and a Transformer,
// optionally started from a masked-LM encoder (init.encoder_from).
type seq2seqSection struct{}

func (seq2seqSection) Validate(c *Config) error {
	if err := c.Check(concat(seq2seqRules(c), modelRules(c))...); err != nil {
		return err
	}
	return validateAttention(c)
}

// segmentSection is task segment's: segmentation images and a Segmenter
// with EM attention.
type segmentSection struct{}

func (segmentSection) Validate(c *Config) error {
	a := c.Model.Attention
	if err := c.Check(concat(notSeq2Seq(c), segmentRules(c), modelRules(c), []Rule{
		{!oneOf(a.Kind, "bayes-weibull", "bayes-lognormal"), "model.attention.kind", "softmax or em for task segment"},
		{a.HeadDiversity == 0, "model.attention.head_diversity", "0 for task segment (its EM layers have no multi-head rows)"},
	})...); err != nil {
		return err
	}
	return validateAttention(c)
}

// mlmSection is task mlm's: the source side of a parallel corpus and a
// Transformer encoder.
type mlmSection struct{}

func (mlmSection) Validate(c *Config) error {
	if err := c.Check(concat(notSeq2Seq(c), mlmRules(c), modelRules(c))...); err != nil {
		return err
	}
	return validateAttention(c)
}

func concat(lists ...[]Rule) []Rule {
	var out []Rule
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

// notSeq2Seq: the fields of the shared structs that only task seq2seq
// reads stay empty for the other built-in tasks.
func notSeq2Seq(c *Config) []Rule {
	return []Rule{
		{c.Init.EncoderFrom == "", "init.encoder_from", "empty: only task seq2seq starts from a pretrained encoder"},
		{c.Data.Sampling == "", "data.sampling", "empty: only task seq2seq reads it"},
		{!c.Model.FinalNorm, "model.final_norm", "false: only task seq2seq has it"},
		{!c.Model.TieOutput, "model.tie_output", "false: only task seq2seq has it"},
	}
}

// modelRules are the model width and heads every built-in model has.
func modelRules(c *Config) []Rule {
	return []Rule{
		{c.Model.Dim > 0, "model.dim", "a positive integer"},
		{c.Model.Heads > 0 && c.Model.Dim%max(c.Model.Heads, 1) == 0, "model.heads", "a positive divisor of model.dim"},
	}
}

func maxNormRules(c *Config) []Rule {
	d, m := c.Data, c.Model
	return []Rule{
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

func seq2seqRules(c *Config) []Rule {
	m, t := c.Model, c.Training
	return append(corpusRules(c),
		Rule{m.Kind == "transformer", "model.kind", "transformer for task seq2seq"},
		Rule{m.FF > 0, "model.ff", "a positive integer"},
		Rule{m.EncLayers > 0, "model.enc_layers", "a positive integer"},
		Rule{m.DecLayers > 0, "model.dec_layers", "a positive integer"},
		Rule{m.Dropout >= 0 && m.Dropout < 1, "model.dropout", "in [0, 1)"},
		Rule{t.Loss == "cross_entropy", "training.loss", "cross_entropy for task seq2seq"},
		Rule{t.LabelSmoothing >= 0 && t.LabelSmoothing < 1, "training.label_smoothing", "in [0, 1)"},
		Rule{t.Beam > 0, "training.beam", "a positive integer"},
		Rule{t.LengthPenalty >= 0, "training.length_penalty", "≥ 0"},
		Rule{oneOf(c.Data.Sampling, "", "with_replacement", "epochs"), "data.sampling", "with_replacement or epochs"},
	)
}

// corpusRules are the data checks of the tasks that read a seq2seq
// corpus: seq2seq, and mlm on its source side.
func corpusRules(c *Config) []Rule {
	d := c.Data
	toy := d.Source == "toy"
	return []Rule{
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

// mlmRules: a masked LM pretrains the encoder of task seq2seq's
// Transformer (model.dec_layers, beam and length_penalty are not read).
func mlmRules(c *Config) []Rule {
	d, m, t := c.Data, c.Model, c.Training
	return append(corpusRules(c),
		Rule{d.MaskProb > 0 && d.MaskProb < 1, "data.mask_prob", "in (0, 1); BERT's is 0.15"},
		Rule{m.Kind == "transformer", "model.kind", "transformer for task mlm"},
		Rule{m.FF > 0, "model.ff", "a positive integer"},
		Rule{m.EncLayers > 0, "model.enc_layers", "a positive integer"},
		Rule{m.Dropout >= 0 && m.Dropout < 1, "model.dropout", "in [0, 1)"},
		Rule{t.Loss == "cross_entropy", "training.loss", "cross_entropy for task mlm"},
		Rule{t.LabelSmoothing >= 0 && t.LabelSmoothing < 1, "training.label_smoothing", "in [0, 1)"},
	)
}

func segmentRules(c *Config) []Rule {
	d, m, t := c.Data, c.Model, c.Training
	return []Rule{
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
