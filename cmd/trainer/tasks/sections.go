package tasks

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/probformer/probformer/configs"
	"github.com/probformer/probformer/layers"
)

// The built-in tasks' config sections. Each task owns the types of its
// data: and model: sections, registered with it (register.go), as a
// user's task does.
//
// Before each task owned its sections, every config held one shared data
// and one shared model section with every built-in task's keys, and
// config.yaml files and checkpoints were written with all of them. So
// that those files still read, each built-in section also holds the
// other built-in tasks' keys in unexported embedded structs (the v1
// types below) tagged config:"retired". They are retired: no task reads
// them, Config.YAML leaves them out (so a run's config.yaml lists its
// task's keys only, in their old order), and Check refuses any of them
// that is not zero ("data.image_size = 16: want it unset: task maxnorm
// has no such key"). A new task has none.

// MaxNormData is task maxnorm's data: sets of Dim-wide points, MinSet to
// MaxSet of them (smaller sets are padded), drawn afresh every step.
type MaxNormData struct {
	// Kind of max-norm sets: gaussian-offset or max-regression.
	Kind string `yaml:"kind"`
	// Dim is the width of a set element.
	Dim int `yaml:"dim"`
	// MinSet and MaxSet bound the set sizes.
	MinSet int `yaml:"min_set"`
	MaxSet int `yaml:"max_set"`
	// ValidSets and TestSets are the sizes of the fixed evaluation sets.
	ValidSets int `yaml:"valid_sets"`
	TestSets  int `yaml:"test_sets"`

	v1Corpus   `yaml:",inline" config:"retired"`
	v1Sampling `yaml:",inline" config:"retired"`
	v1Images   `yaml:",inline" config:"retired"`
	v1MaskProb `yaml:",inline" config:"retired"`
}

// MaxNormModel is task maxnorm's model: a Set Transformer
// (layers.SetTransformerConfig).
type MaxNormModel struct {
	// Kind is set-transformer.
	Kind string `yaml:"kind"`
	// Dim is the model width; Heads, of every attention layer, divide it.
	Dim   int `yaml:"dim"`
	Heads int `yaml:"heads"`
	// Encoder blocks, sab or isab: Blocks of them, with Inducing points
	// each for isab.
	Encoder  string `yaml:"encoder"`
	Blocks   int    `yaml:"blocks"`
	Inducing int    `yaml:"inducing"`
	// Seeds of the PMA pooling.
	Seeds int `yaml:"seeds"`
	// DecoderSAB adds a SAB after the pooling.
	DecoderSAB bool                   `yaml:"decoder_sab"`
	LayerNorm  bool                   `yaml:"layer_norm"`
	Attention  layers.AttentionConfig `yaml:"attention"`

	v1FF        `yaml:",inline" config:"retired"`
	v1EncLayers `yaml:",inline" config:"retired"`
	v1Decoder   `yaml:",inline" config:"retired"`
}

// Corpus is a parallel corpus, as tasks seq2seq and mlm read it: the
// built-in toy language (Source toy: TrainPairs, ValidPairs and TestPairs
// sentence pairs) or TSV files (Source tsv: source<TAB>target lines).
type Corpus struct {
	Source     string `yaml:"source"`
	TrainPairs int    `yaml:"train_pairs"`
	ValidPairs int    `yaml:"valid_pairs"`
	TestPairs  int    `yaml:"test_pairs"`
	TrainFile  string `yaml:"train_file" config:"path"`
	ValidFile  string `yaml:"valid_file" config:"path"`
	TestFile   string `yaml:"test_file" config:"path"`
	// Lowercase TSV text; SkipMalformed lines (counted) instead of failing.
	Lowercase     bool `yaml:"lowercase"`
	SkipMalformed bool `yaml:"skip_malformed"`
	// MaxLen is the most tokens of a sentence; longer training pairs are
	// left out (and counted), and it fixes the graphs' padded lengths.
	MaxLen int `yaml:"max_len"`
	// MinCount drops rarer training words from the vocabulary (<unk>).
	MinCount int `yaml:"min_count"`
}

// Seq2SeqData is task seq2seq's data: a parallel corpus, and how its
// training batches are drawn.
type Seq2SeqData struct {
	v1SetShape   `yaml:",inline" config:"retired"`
	v1SplitSizes `yaml:",inline" config:"retired"`
	Corpus       `yaml:",inline"`
	// Sampling is with_replacement (the default, also empty: each pair
	// uniformly at random) or epochs (every pair once an epoch,
	// reshuffled each epoch, as a PyTorch DataLoader with shuffle=True).
	Sampling string `yaml:"sampling"`

	v1Images   `yaml:",inline" config:"retired"`
	v1MaskProb `yaml:",inline" config:"retired"`
}

// MLMData is task mlm's data: the source side of a parallel corpus, of
// which a share MaskProb of the tokens is predicted (BERT's 15%): of
// them 80% become [MASK], 10% a random word and 10% stay unchanged.
type MLMData struct {
	v1SetShape   `yaml:",inline" config:"retired"`
	v1SplitSizes `yaml:",inline" config:"retired"`
	Corpus       `yaml:",inline"`
	v1Sampling   `yaml:",inline" config:"retired"`
	v1Images     `yaml:",inline" config:"retired"`
	MaskProb     float64 `yaml:"mask_prob"`
}

// BERTData is task bert's data: two-sentence toy stories
// (datasets.ToyStories; data.source toy), train_pairs, valid_pairs and
// test_pairs of them, paired for next-sentence prediction and masked as
// task mlm masks (MaskProb); or a TSV parallel corpus (data.source tsv,
// as task seq2seq reads it), whose lines pair a source sentence with its
// translation or another line's (MaskProb 0: no masked LM), the first
// TrainPairs lines of the training file when positive (0: all of them;
// the vocabulary is always the whole file's). MaxLen bounds
// a pair's tokens, [CLS] and the two [SEP] included (longer pairs are cut,
// the longer sentence first); 29 holds every toy pair.
type BERTData struct {
	Corpus   `yaml:",inline"`
	MaskProb float64 `yaml:"mask_prob"`
	// Pairs is nsp (also empty, the default): half the pairs true, half
	// with another line's second sentence, and the NSP head trained on
	// the label; or true_only: every pair true and no NSP head, the masked
	// LM alone over both sentences (XLM's translation LM on a parallel
	// corpus), a pretraining that never sees a pair label, so that
	// fine-tuning the classifier from it is compared honestly with one
	// from scratch.
	Pairs string `yaml:"pairs,omitempty"`
}

// nsp reports whether the pairs are labelled and the NSP head trained.
func (d *BERTData) nsp() bool { return d.Pairs != "true_only" }

// TransformerModel is the model of tasks seq2seq and mlm: an
// encoder–decoder Transformer (layers.Seq2SeqConfig), of which a masked
// LM has the encoder (layers.MaskedLMConfig), so that an mlm run can
// start a seq2seq one (init.encoder_from).
type TransformerModel struct {
	// Kind is transformer.
	Kind  string `yaml:"kind"`
	Dim   int    `yaml:"dim"`
	Heads int    `yaml:"heads"`

	v1Encoder   `yaml:",inline" config:"retired"`
	v1Blocks    `yaml:",inline" config:"retired"`
	v1SetBlocks `yaml:",inline" config:"retired"`

	Attention layers.AttentionConfig `yaml:"attention"`
	// FF is the feed-forward width; EncLayers and DecLayers the stack
	// depths (mlm has no decoder); Dropout on every sub-layer and
	// embedding; PreLN puts LayerNorm before each sub-layer.
	FF        int     `yaml:"ff"`
	EncLayers int     `yaml:"enc_layers"`
	DecLayers int     `yaml:"dec_layers"`
	Dropout   float64 `yaml:"dropout"`
	PreLN     bool    `yaml:"pre_ln"`
	// FinalNorm adds a LayerNorm after the encoder and decoder stacks with
	// post-LN too, as PyTorch's nn.Transformer has (pre-LN always has it).
	// TieOutput shares the target embedding table with the output
	// projection. Both are seq2seq's only.
	FinalNorm bool `yaml:"final_norm"`
	TieOutput bool `yaml:"tie_output"`
}

// SegmentData is task segment's data (datasets.Segmentation): its
// Images and the sizes of the evaluation sets.
type SegmentData struct {
	v1SetShape `yaml:",inline" config:"retired"`
	// ValidSets and TestSets count the fixed evaluation images.
	ValidSets int `yaml:"valid_sets"`
	TestSets  int `yaml:"test_sets"`

	v1Corpus   `yaml:",inline" config:"retired"`
	v1Sampling `yaml:",inline" config:"retired"`

	Images `yaml:",inline"`

	v1MaskProb `yaml:",inline" config:"retired"`
}

// Images are segment's images and clicks: ImageSize×ImageSize pixels cut
// into MinRegions to MaxRegions regions, each of a distinct class of
// Classes; colour Noise (a standard deviation) and the probability
// Confusable that a region copies the colour of another.
type Images struct {
	ImageSize  int     `yaml:"image_size"`
	MinRegions int     `yaml:"min_regions"`
	MaxRegions int     `yaml:"max_regions"`
	Classes    int     `yaml:"classes"`
	Noise      float64 `yaml:"noise"`
	Confusable float64 `yaml:"confusable"`
	// MaxClicks bounds the clicks of a training image (0 to MaxClicks,
	// uniformly); ValidClicks is the number of clicks at which validation
	// scores the model.
	MaxClicks   int `yaml:"max_clicks"`
	ValidClicks int `yaml:"valid_clicks"`
}

// SegmentModel is task segment's model (layers.SegmenterConfig): a
// per-pixel MLP of EncLayers layers, then Blocks EM attention layers.
type SegmentModel struct {
	// Kind is segmenter.
	Kind  string `yaml:"kind"`
	Dim   int    `yaml:"dim"`
	Heads int    `yaml:"heads"`

	v1Encoder `yaml:",inline" config:"retired"`

	Blocks int `yaml:"blocks"`

	v1SetBlocks `yaml:",inline" config:"retired"`

	Attention layers.AttentionConfig `yaml:"attention"`

	v1FF `yaml:",inline" config:"retired"`

	EncLayers int `yaml:"enc_layers"`

	v1Decoder `yaml:",inline" config:"retired"`
}

// The retired keys (see the top of this file), in the groups in which
// they sit between a task's own keys.
type (
	v1SetShape struct {
		Kind   string `yaml:"kind"`
		Dim    int    `yaml:"dim"`
		MinSet int    `yaml:"min_set"`
		MaxSet int    `yaml:"max_set"`
	}
	v1SplitSizes struct {
		ValidSets int `yaml:"valid_sets"`
		TestSets  int `yaml:"test_sets"`
	}
	v1Corpus   Corpus
	v1Sampling struct {
		Sampling string `yaml:"sampling"`
	}
	v1Images   Images
	v1MaskProb struct {
		MaskProb float64 `yaml:"mask_prob"`
	}
	v1Encoder struct {
		Encoder string `yaml:"encoder"`
	}
	v1Blocks struct {
		Blocks int `yaml:"blocks"`
	}
	v1SetBlocks struct {
		Inducing   int  `yaml:"inducing"`
		Seeds      int  `yaml:"seeds"`
		DecoderSAB bool `yaml:"decoder_sab"`
		LayerNorm  bool `yaml:"layer_norm"`
	}
	v1FF struct {
		FF int `yaml:"ff"`
	}
	v1EncLayers struct {
		EncLayers int `yaml:"enc_layers"`
	}
	v1Decoder struct {
		DecLayers int     `yaml:"dec_layers"`
		Dropout   float64 `yaml:"dropout"`
		PreLN     bool    `yaml:"pre_ln"`
		FinalNorm bool    `yaml:"final_norm"`
		TieOutput bool    `yaml:"tie_output"`
	}
)

// retired returns a failing rule for the first retired key of a section
// (the fields of its embedded structs tagged config:"retired") that is
// not zero, or none.
func retired(task, section string, value any) []configs.Rule {
	v := reflect.ValueOf(value).Elem()
	for i := range v.NumField() {
		if v.Type().Field(i).Tag.Get("config") != "retired" {
			continue
		}
		old := v.Field(i)
		for j := range old.NumField() {
			if !old.Field(j).IsZero() {
				key, _, _ := strings.Cut(old.Type().Field(j).Tag.Get("yaml"), ",")
				return []configs.Rule{want(false, section+"."+key, "it unset: task "+task+" has no such key")}
			}
		}
	}
	return nil
}

// want is a configs.Rule: ok, or field should be what.
func want(ok bool, field, what string) configs.Rule {
	return configs.Rule{OK: ok, Field: field, Want: what}
}

func oneOf(s string, options ...string) bool { return slices.Contains(options, s) }

func concat(lists ...[]configs.Rule) []configs.Rule {
	var out []configs.Rule
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

// noEncoderFrom: only tasks seq2seq and bert start from a pretrained
// encoder.
func noEncoderFrom(c *configs.Config) configs.Rule {
	return want(c.Init.EncoderFrom == "", "init.encoder_from", "empty: only tasks seq2seq and bert start from a pretrained encoder")
}

// widthRules are the model width and heads every built-in model has;
// the width's ceiling comes before the heads, which must divide it.
func widthRules(dim, heads int) []configs.Rule {
	return []configs.Rule{
		want(dim > 0, "model.dim", "a positive integer"),
		want(dim <= MaxDim, "model.dim", fmt.Sprintf("an integer in [1, %d]", MaxDim)),
		want(heads > 0 && dim%max(heads, 1) == 0, "model.heads", fmt.Sprintf("a positive divisor of model.dim (1 to %d)", max(dim, 1))),
	}
}

func checkMaxNorm(c *configs.Config, d *MaxNormData, m *MaxNormModel) error {
	if err := c.Check(concat(
		[]configs.Rule{noEncoderFrom(c)}, retired("maxnorm", "data", d), retired("maxnorm", "model", m),
		[]configs.Rule{
			want(oneOf(d.Kind, "gaussian-offset", "max-regression"), "data.kind", "gaussian-offset or max-regression"),
			want(d.Dim > 0, "data.dim", "a positive integer"),
			want(d.Kind != "max-regression" || d.Dim == 1, "data.dim", "1 for max-regression (its sets are scalars)"),
			want(d.MinSet > 0, "data.min_set", "a positive integer"),
			want(d.MaxSet >= d.MinSet, "data.max_set", "at least data.min_set"),
			want(d.ValidSets > 0, "data.valid_sets", "a positive integer"),
			want(d.TestSets > 0, "data.test_sets", "a positive integer"),
			want(m.Kind == "set-transformer", "model.kind", "set-transformer for task maxnorm"),
			want(oneOf(m.Encoder, "sab", "isab"), "model.encoder", "sab or isab"),
			want(m.Blocks >= 0, "model.blocks", "an integer ≥ 0"),
			want(m.Inducing >= 0, "model.inducing", "an integer ≥ 0"),
			want(m.Encoder != "isab" || m.Inducing > 0, "model.inducing", "a positive integer for an isab encoder"),
			want(m.Seeds > 0, "model.seeds", "a positive integer"),
			want(oneOf(c.Training.Loss, "mse", "mae", "euclidean"), "training.loss", "mse, mae or euclidean"),
		},
		widthRules(m.Dim, m.Heads))...); err != nil {
		return err
	}
	if err := c.CheckAttention("model.attention", m.Attention); err != nil {
		return err
	}
	return maxNormSizes(c, d, m)
}

func checkSeq2Seq(c *configs.Config, d *Seq2SeqData, m *TransformerModel) error {
	t := c.Training
	if err := c.Check(concat(
		retired("seq2seq", "data", d), retired("seq2seq", "model", m),
		corpusRules(d.Corpus),
		[]configs.Rule{
			want(m.Kind == "transformer", "model.kind", "transformer for task seq2seq"),
			want(m.FF > 0, "model.ff", "a positive integer"),
			want(m.EncLayers > 0, "model.enc_layers", "a positive integer"),
			want(m.DecLayers > 0, "model.dec_layers", "a positive integer"),
			want(m.Dropout >= 0 && m.Dropout < 1, "model.dropout", "in [0, 1)"),
			want(t.Loss == "cross_entropy", "training.loss", "cross_entropy for task seq2seq"),
			want(t.LabelSmoothing >= 0 && t.LabelSmoothing < 1, "training.label_smoothing", "in [0, 1)"),
			want(t.Beam > 0, "training.beam", "a positive integer"),
			want(t.LengthPenalty >= 0, "training.length_penalty", "≥ 0"),
			want(oneOf(d.Sampling, "", "with_replacement", "epochs"), "data.sampling", "with_replacement or epochs"),
		},
		widthRules(m.Dim, m.Heads))...); err != nil {
		return err
	}
	if err := c.CheckAttention("model.attention", m.Attention); err != nil {
		return err
	}
	return transformerSizes(c, &d.Corpus, m, true)
}

// unreadForTSV: a TSV corpus's pairs are its files' lines.
const unreadForTSV = "≥ 0 with data.source tsv, which does not read it"

// corpusRules are the data checks of the tasks that read a parallel
// corpus: seq2seq, and mlm on its source side.
func corpusRules(d Corpus) []configs.Rule {
	toy := d.Source == "toy"
	return []configs.Rule{
		want(oneOf(d.Source, "toy", "tsv"), "data.source", "toy or tsv"),
		want(d.TrainPairs > 0 || !toy && d.TrainPairs >= 0, "data.train_pairs", "a positive integer ("+unreadForTSV+")"),
		want(d.ValidPairs > 0 || !toy && d.ValidPairs >= 0, "data.valid_pairs", "a positive integer ("+unreadForTSV+")"),
		want(d.TestPairs > 0 || !toy && d.TestPairs >= 0, "data.test_pairs", "a positive integer ("+unreadForTSV+")"),
		want(toy || d.TrainFile != "", "data.train_file", "a TSV file (set it with --set data.train_file=PATH)"),
		want(toy || d.ValidFile != "", "data.valid_file", "a TSV file (set it with --set data.valid_file=PATH)"),
		want(toy || d.TestFile != "", "data.test_file", "a TSV file (set it with --set data.test_file=PATH)"),
		want(d.MaxLen > 0, "data.max_len", "a positive integer"),
		want(d.MinCount >= 0, "data.min_count", "≥ 0"),
	}
}

// checkBERT: BERT pretrains a Transformer encoder (task mlm's model) on
// sentence pairs, with MLM and NSP; init.encoder_from may start it from
// another bert run (cmd/trainer/cli/init.go).
func checkBERT(c *configs.Config, d *BERTData, m *TransformerModel) error {
	t := c.Training
	if err := c.Check(concat(
		[]configs.Rule{
			want(!m.FinalNorm, "model.final_norm", "false: only task seq2seq has it"),
			want(!m.TieOutput, "model.tie_output", "false: only task seq2seq has it"),
		},
		corpusRules(d.Corpus),
		[]configs.Rule{
			want(d.ValidPairs >= 2 || d.Source != "toy", "data.valid_pairs", "at least 2 (a story pairs with another's sentence)"),
			want(d.TestPairs >= 2 || d.Source != "toy", "data.test_pairs", "at least 2 (a story pairs with another's sentence)"),
			want(d.TrainPairs >= 2 || d.Source != "toy" && d.TrainPairs == 0, "data.train_pairs",
				"at least 2 (a story pairs with another's sentence); with data.source tsv 0 (every line) or at least 2 (the first lines, a labelled subset)"),
			want(d.MaxLen >= 5, "data.max_len", "at least 5 ([CLS] a word [SEP] a word [SEP]); 29 holds every toy pair"),
			want(d.MaskProb > 0 && d.MaskProb < 1 || d.Source == "tsv" && d.MaskProb == 0, "data.mask_prob",
				"in (0, 1), BERT's is 0.15; or 0 with data.source tsv (the pair classifier alone)"),
			want(oneOf(d.Pairs, "", "nsp", "true_only"), "data.pairs", "nsp (labelled pairs, NSP head) or true_only (true pairs, masked LM alone)"),
			want(d.nsp() || d.MaskProb > 0, "data.mask_prob", "positive with data.pairs true_only (the masked LM is its only loss)"),
			want(m.Kind == "transformer", "model.kind", "transformer for task bert"),
			want(m.FF > 0, "model.ff", "a positive integer"),
			want(m.EncLayers > 0, "model.enc_layers", "a positive integer"),
			want(m.DecLayers >= 0, "model.dec_layers", "an integer ≥ 0 (task bert does not read it)"),
			want(m.Dropout >= 0 && m.Dropout < 1, "model.dropout", "in [0, 1)"),
			want(t.Loss == "cross_entropy", "training.loss", "cross_entropy for task bert"),
			want(t.LabelSmoothing >= 0 && t.LabelSmoothing < 1, "training.label_smoothing", "in [0, 1)"),
		},
		widthRules(m.Dim, m.Heads))...); err != nil {
		return err
	}
	if err := c.CheckAttention("model.attention", m.Attention); err != nil {
		return err
	}
	return bertSizes(c, d, m)
}

// checkMLM: a masked LM pretrains the encoder of task seq2seq's
// Transformer (model.dec_layers, beam and length_penalty are not read).
func checkMLM(c *configs.Config, d *MLMData, m *TransformerModel) error {
	t := c.Training
	if err := c.Check(concat(
		[]configs.Rule{noEncoderFrom(c)}, retired("mlm", "data", d), retired("mlm", "model", m),
		[]configs.Rule{
			want(!m.FinalNorm, "model.final_norm", "false: only task seq2seq has it"),
			want(!m.TieOutput, "model.tie_output", "false: only task seq2seq has it"),
		},
		corpusRules(d.Corpus),
		[]configs.Rule{
			want(d.MaskProb > 0 && d.MaskProb < 1, "data.mask_prob", "in (0, 1); BERT's is 0.15"),
			want(m.Kind == "transformer", "model.kind", "transformer for task mlm"),
			want(m.FF > 0, "model.ff", "a positive integer"),
			want(m.EncLayers > 0, "model.enc_layers", "a positive integer"),
			want(m.DecLayers >= 0, "model.dec_layers", "an integer ≥ 0 (task mlm does not read it)"),
			want(m.Dropout >= 0 && m.Dropout < 1, "model.dropout", "in [0, 1)"),
			want(t.Loss == "cross_entropy", "training.loss", "cross_entropy for task mlm"),
			want(t.LabelSmoothing >= 0 && t.LabelSmoothing < 1, "training.label_smoothing", "in [0, 1)"),
		},
		widthRules(m.Dim, m.Heads))...); err != nil {
		return err
	}
	if err := c.CheckAttention("model.attention", m.Attention); err != nil {
		return err
	}
	return transformerSizes(c, &d.Corpus, m, false)
}

func checkSegment(c *configs.Config, d *SegmentData, m *SegmentModel) error {
	t, a := c.Training, m.Attention
	if err := c.Check(concat(
		[]configs.Rule{noEncoderFrom(c)}, retired("segment", "data", d), retired("segment", "model", m),
		[]configs.Rule{
			want(d.ImageSize >= 2, "data.image_size", "an integer ≥ 2"),
			want(d.MinRegions >= 1, "data.min_regions", "a positive integer"),
			want(d.MaxRegions >= d.MinRegions, "data.max_regions", "at least data.min_regions"),
			want(d.ImageSize < 2 || (d.MaxRegions-1)/d.ImageSize < d.ImageSize, "data.max_regions", "at most data.image_size² (one pixel per region)"),
			want(d.Classes >= d.MaxRegions && d.Classes >= 2, "data.classes", "at least data.max_regions and 2 (each region has its own class)"),
			want(d.Noise >= 0, "data.noise", "≥ 0"),
			want(d.Confusable >= 0 && d.Confusable <= 1, "data.confusable", "a probability in [0, 1]"),
			want(d.ValidSets > 0, "data.valid_sets", "a positive integer (images)"),
			want(d.TestSets > 0, "data.test_sets", "a positive integer (images)"),
			want(d.MaxClicks >= 0, "data.max_clicks", "≥ 0"),
			want(d.ValidClicks >= 0, "data.valid_clicks", "≥ 0"),
			want(m.Kind == "segmenter", "model.kind", "segmenter for task segment"),
			want(m.EncLayers > 0, "model.enc_layers", "a positive integer (layers of the pixel MLP)"),
			want(m.Blocks > 0, "model.blocks", "a positive integer (EM attention layers)"),
			want(a.Kind == "em", "model.attention.kind", "em for task segment (clicks are em's annotated units)"),
			want(t.Loss == "cross_entropy", "training.loss", "cross_entropy for task segment"),
			want(t.LabelSmoothing >= 0 && t.LabelSmoothing < 1, "training.label_smoothing", "in [0, 1)"),
		},
		widthRules(m.Dim, m.Heads),
		[]configs.Rule{
			want(!oneOf(a.Kind, "bayes-weibull", "bayes-lognormal"), "model.attention.kind", "softmax or em for task segment"),
			want(a.HeadDiversity == 0, "model.attention.head_diversity", "0 for task segment (its EM layers have no multi-head rows)"),
		})...); err != nil {
		return err
	}
	if err := c.CheckAttention("model.attention", a); err != nil {
		return err
	}
	return segmentSizes(c, d, m)
}
