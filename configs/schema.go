package configs

import "github.com/probformer/probformer/layers"

// Config is one run: everything needed to reproduce it.
type Config struct {
	// Name is the preset's name or the file's base name; set by Load.
	Name      string    `yaml:"-"`
	Task      string    `yaml:"task"`
	Seed      uint64    `yaml:"seed"`
	DType     string    `yaml:"dtype"`
	Data      Data      `yaml:"data"`
	Model     Model     `yaml:"model"`
	Optimizer Optimizer `yaml:"optimizer"`
	Training  Training  `yaml:"training"`
	Init      Init      `yaml:"init"`
}

// Init starts a run from parameters trained elsewhere.
type Init struct {
	// EncoderFrom is a checkpoint (file or run directory) of a masked-LM
	// run whose encoder and source embedding start a seq2seq model.
	EncoderFrom string `yaml:"encoder_from"`
}

// Data describes the task's data.
type Data struct {
	// Kind of max-norm sets: gaussian-offset or max-regression.
	Kind string `yaml:"kind"`
	// Dim is the width of a set element.
	Dim int `yaml:"dim"`
	// MinSet and MaxSet bound the set sizes; smaller sets are padded.
	MinSet int `yaml:"min_set"`
	MaxSet int `yaml:"max_set"`
	// ValidSets and TestSets are the sizes of the fixed evaluation sets.
	ValidSets int `yaml:"valid_sets"`
	TestSets  int `yaml:"test_sets"`

	// Seq2seq data. Source is toy (the built-in language, TrainPairs,
	// ValidPairs and TestPairs sentences) or tsv (TrainFile, ValidFile,
	// TestFile: source<TAB>target lines).
	Source     string `yaml:"source"`
	TrainPairs int    `yaml:"train_pairs"`
	ValidPairs int    `yaml:"valid_pairs"`
	TestPairs  int    `yaml:"test_pairs"`
	TrainFile  string `yaml:"train_file"`
	ValidFile  string `yaml:"valid_file"`
	TestFile   string `yaml:"test_file"`
	// Lowercase TSV text; SkipMalformed lines (counted) instead of failing.
	Lowercase     bool `yaml:"lowercase"`
	SkipMalformed bool `yaml:"skip_malformed"`
	// MaxLen is the most tokens of a sentence; longer training pairs are
	// left out (and counted), and it fixes the graphs' padded lengths.
	MaxLen int `yaml:"max_len"`
	// MinCount drops rarer training words from the vocabulary (<unk>).
	MinCount int `yaml:"min_count"`
	// Sampling is how seq2seq training batches are drawn: with_replacement
	// (the default, also empty: each pair uniformly at random) or epochs
	// (every pair once an epoch, reshuffled each epoch, as a PyTorch
	// DataLoader with shuffle=True).
	Sampling string `yaml:"sampling"`

	// Segmentation images (task segment, datasets.Segmentation):
	// ImageSize×ImageSize pixels cut into MinRegions to MaxRegions regions,
	// each of a distinct class of Classes; colour Noise (a standard
	// deviation) and the probability Confusable that a region copies the
	// colour of another. ValidSets and TestSets count images.
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

	// MaskProb is the share of source tokens a masked-LM batch predicts
	// (task mlm; BERT's 15%): of them 80% become [MASK], 10% a random
	// word and 10% stay unchanged.
	MaskProb float64 `yaml:"mask_prob"`
}

// Model is the network's architecture.
type Model struct {
	// Kind of network: set-transformer (task maxnorm), transformer
	// (task seq2seq) or segmenter (task segment).
	Kind string `yaml:"kind"`
	// Dim is the model width (d_model).
	Dim int `yaml:"dim"`
	// Heads of every attention layer; must divide Dim.
	Heads int `yaml:"heads"`
	// Encoder blocks: sab or isab.
	Encoder string `yaml:"encoder"`
	// Blocks of the set encoder; for a segmenter, its EM attention layers.
	Blocks int `yaml:"blocks"`
	// Inducing points of each ISAB block.
	Inducing int `yaml:"inducing"`
	// Seeds of the PMA pooling.
	Seeds int `yaml:"seeds"`
	// DecoderSAB adds a SAB after the pooling.
	DecoderSAB bool      `yaml:"decoder_sab"`
	LayerNorm  bool      `yaml:"layer_norm"`
	Attention  Attention `yaml:"attention"`

	// Transformer: FF is the feed-forward width; EncLayers and DecLayers
	// the stack depths; Dropout on every sub-layer and embedding; PreLN
	// puts LayerNorm before each sub-layer. Segmenter: EncLayers is the
	// depth of the per-pixel MLP.
	FF        int     `yaml:"ff"`
	EncLayers int     `yaml:"enc_layers"`
	DecLayers int     `yaml:"dec_layers"`
	Dropout   float64 `yaml:"dropout"`
	PreLN     bool    `yaml:"pre_ln"`
	// FinalNorm adds a LayerNorm after the encoder and decoder stacks with
	// post-LN too, as PyTorch's nn.Transformer has (pre-LN always has it).
	FinalNorm bool `yaml:"final_norm"`
	// TieOutput shares the target embedding table with the output
	// projection (seq2seq).
	TieOutput bool `yaml:"tie_output"`
}

// Attention selects the attention kernel of every layer. It is
// layers.AttentionConfig itself, whose fields and YAML names are the
// model.attention section: layers owns the attention settings, and
// configs reads them into the layers' type, so there is nothing to copy.
type Attention = layers.AttentionConfig

// Optimizer is Adam with decoupled weight decay and a learning-rate
// schedule.
type Optimizer struct {
	Name        string  `yaml:"name"` // adam
	LR          float64 `yaml:"lr"`
	Beta1       float64 `yaml:"beta1"`
	Beta2       float64 `yaml:"beta2"`
	Eps         float64 `yaml:"eps"`
	WeightDecay float64 `yaml:"weight_decay"`
	// ClipNorm clips the global gradient norm; 0 turns it off.
	ClipNorm float64 `yaml:"clip_norm"`
	// Schedule: constant, cosine (to MinLR at the last step) or
	// inverse_sqrt (lr·√(warmup/step), as in Vaswani et al.), after
	// WarmupSteps of linear warm-up.
	Schedule    string  `yaml:"schedule"`
	WarmupSteps int     `yaml:"warmup_steps"`
	MinLR       float64 `yaml:"min_lr"`
}

// Training is the loop's schedule.
type Training struct {
	Steps int `yaml:"steps"`
	Batch int `yaml:"batch"`
	// Loss: mse, mae or euclidean (maxnorm); cross_entropy (seq2seq,
	// segment).
	Loss string `yaml:"loss"`
	// LabelSmoothing of the cross-entropy (seq2seq).
	LabelSmoothing float64 `yaml:"label_smoothing"`
	// Beam and LengthPenalty of beam-search decoding in evaluation
	// (seq2seq); validation uses greedy decoding.
	Beam          int     `yaml:"beam"`
	LengthPenalty float64 `yaml:"length_penalty"`
	// KLWeight is the weight κ of the KL term of Bayesian attention's
	// ELBO, loss = NLL + κ(t)·KL̄ (layers/BAYES.md §5), reached by a
	// linear warm-up over KLWarmup steps (0: none). 0 leaves the KL out.
	KLWeight float64 `yaml:"kl_weight"`
	KLWarmup int     `yaml:"kl_warmup"`
	// EMADecay keeps an exponential moving average of the weights with
	// this decay (e.g. 0.999; 0: none), warmed up as min(decay,
	// (1+t)/(10+t)); validation, the best checkpoint's selection, eval,
	// translate and export then use the averaged weights.
	EMADecay float64 `yaml:"ema_decay"`
	// LogEvery steps a progress line is printed (when not on a terminal)
	// and a metrics line appended.
	LogEvery int `yaml:"log_every"`
	// EvalEvery steps the validation set is scored; 0: only at the end.
	EvalEvery int `yaml:"eval_every"`
	// CheckpointEvery steps a checkpoint is written; 0: only at the end.
	CheckpointEvery int `yaml:"checkpoint_every"`
	// KeepCheckpoints is how many recent checkpoints are kept, besides the
	// best one.
	KeepCheckpoints int `yaml:"keep_checkpoints"`
}
