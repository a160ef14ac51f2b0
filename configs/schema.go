package configs

// Config is one run: everything needed to reproduce it.
//
// Data and Model are the task's own sections, owned by the task: pointers
// to the struct types it registered (RegisterTask, which train.Register
// calls), filled from the data: and model: keys by Parse and Load. A
// task's code reads them as its own types (cfg.Data.(*MyData)), or gets
// them typed from train.Spec. Under a task that is not registered they
// hold the sections as plain maps (map[string]any), so that a config of
// another program's task still parses, prints and fails Validate with the
// names of the registered tasks.
type Config struct {
	// Name is the preset's name or the file's base name; set by Load.
	Name      string    `yaml:"-"`
	Task      string    `yaml:"task"`
	Seed      uint64    `yaml:"seed"`
	DType     string    `yaml:"dtype"`
	Data      any       `yaml:"data"`
	Model     any       `yaml:"model"`
	Optimizer Optimizer `yaml:"optimizer"`
	Training  Training  `yaml:"training"`
	Init      Init      `yaml:"init"`

	// ForInference marks a config read to use a trained model (eval,
	// translate, attention, export --format pytorch) rather than to train
	// one: a task's rules may hold it to what using the model needs
	// instead, as the built-in tasks' memory budget holds it to an
	// evaluation's estimate rather than a training step's, so that a
	// model trained on a larger machine still evaluates on a smaller one.
	// It is never stored.
	ForInference bool `yaml:"-"`

	// where holds where a value came from by dotted key, for Check's
	// messages: its line in the config file Load read, or fromSet. Set
	// replaces the map rather than changing it, so copies may share it.
	where map[string]int
}

// fromSet, in Config.where, marks a value given by Set.
const fromSet = -1

// Init starts a run from parameters trained elsewhere.
type Init struct {
	// EncoderFrom is a checkpoint (file or run directory) of a masked-LM
	// run whose encoder and source embedding start a seq2seq model.
	EncoderFrom string `yaml:"encoder_from"`
}

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
	// Accumulate is gradient accumulation: every optimizer step runs
	// accumulate micro-batches of batch/accumulate examples one after
	// the other and sums their gradients, weighed as the shards of a
	// data-parallel batch are, so batch stays the effective batch of a
	// step (in an MPI job too: each process's share is split). It must
	// divide batch (in an MPI job, batch/processes). 0 or 1: off. Written
	// to YAML only when set, as are the keys below.
	Accumulate int `yaml:"accumulate,omitempty"`
	// EarlyStop ends the run when the task's selection metric stops
	// improving; absent or a patience of 0: off.
	EarlyStop EarlyStop `yaml:"early_stop,omitempty"`
}

// EarlyStop is training.early_stop, e.g. {patience: 5, min_delta: 0}:
// the run stops after patience validations in a row in which the
// selection metric (valid_mse, valid_bleu, …, in its direction) did not
// beat its reference, the best so far by more than min_delta, by more
// than min_delta. best.ckpt keeps the best validation's weights.
type EarlyStop struct {
	// Patience counts validations (training.eval_every apart); 0: off.
	Patience int `yaml:"patience,omitempty"`
	// MinDelta is the smallest change, in the metric's units, that counts
	// as an improvement; 0: any.
	MinDelta float64 `yaml:"min_delta,omitempty"`
}
