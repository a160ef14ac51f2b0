package train

import (
	"io"
	"math/rand/v2"

	"github.com/probformer/probformer/graph"
)

// Task is what a Loop trains: data, a model and its loss, and how to
// score the model. A Loop knows nothing else about it.
type Task interface {
	// Build returns the function that adds the model and its loss
	// (graph.Builder.SetLoss) for batches of the given size. The Loop
	// compiles it twice on the same parameters: a training program of
	// the Settings' batch (of a micro-batch, with Settings.Accumulate,
	// or of a process's share, with Settings.Comm) and an evaluation
	// program of EvalBatch. A layer's attention config with an empty
	// kind is softmax attention (package layers). A loss that is a mean
	// over a count other than the batch's examples (the real tokens of a
	// padded batch) sets it as the loss weight
	// (graph.Builder.SetLossWeight), so that data-parallel shards and
	// accumulated micro-batches are weighed right.
	Build(batch int) graph.BuildFunc
	// Feed draws the batch of training step step (1-based) from rng, a
	// math/rand/v2 generator (the run's data stream, seeded from
	// Settings.Seed), into prog's inputs. It learns the batch size from
	// the program, prog.InputShape(name)[0] of a batched input, which is
	// the step's whole batch even when prog keeps only a shard of it
	// (a process's share, a micro-batch): Feed always feeds the whole
	// batch, and the program keeps its part. Drawing only from rng and
	// step keeps runs reproducible and resumable; with gradient
	// accumulation Feed is called once per micro-batch, each time with
	// rng at the same state, and must draw the same batch each time.
	Feed(rng *rand.Rand, prog *graph.Program, step int) error
	// EvalBatch is the batch size of the evaluation program.
	EvalBatch() int
	// Evaluate scores the evaluation program on a split, "valid" or
	// "test"; metric names should start with the split ("valid_mse").
	// A split of any size is scored in batches of EvalBatch with
	// RunEvalBatches (evalbatch.go), which pads the last batch and says
	// which rows are real, and Means, which averages the batches over
	// the real examples.
	Evaluate(params *graph.Params, prog *graph.Program, split string) (map[string]float64, error)
	// Selection names the validation metric that picks the best
	// checkpoint (and that early stopping watches), and whether higher is
	// better.
	Selection() (metric string, maximize bool)
}

// Stateful is a Task that must carry state in its checkpoints to be
// rebuilt (a vocabulary, say). The entries go into the checkpoint's
// Extra by name; Spec.New gets them back.
type Stateful interface {
	State() (map[string][]byte, error)
}

// StepAware is a Task whose inputs depend on the step, such as an
// annealed KL weight (see FeedKLWeight). AtStep runs before every
// training step, after Feed.
type StepAware interface {
	AtStep(prog *graph.Program, step, steps int) error
}

// Sized is a Task that knows how many examples its splits hold, for the
// header of the progress display. Examples returns the count of a split
// ("train", "valid"), and false when the split has no fixed size (data
// drawn afresh at every step, say).
type Sized interface {
	Examples(split string) (n int, ok bool)
}

// Reporter is a Task that prints a human summary of a checkpoint's test
// metrics, next to baselines (`trainer eval`).
type Reporter interface {
	Report(w io.Writer, params *graph.Params, prog *graph.Program) error
}

// ResultReporter is a Reporter that also returns what it printed, for
// `trainer eval` to write down (eval_results.json, --predictions): the
// same numbers, not computed a second time. Report should be
// ReportResults with the Results dropped.
type ResultReporter interface {
	Reporter
	ReportResults(w io.Writer, params *graph.Params, prog *graph.Program) (Results, error)
}

// Results are the numbers a report printed and the model's outputs behind
// them.
type Results struct {
	// Metrics are the model's test metrics, named like Evaluate's
	// ("test_bleu"); counts such as "test_samples" may join them.
	Metrics map[string]float64
	// Baselines holds the metrics of each baseline the report printed
	// next to the model's, by the baseline's name ("predict zero").
	Baselines map[string]map[string]float64
	// Predictions are the text files of the model's outputs on the test
	// set, in test-set order; nil if the task has none.
	Predictions []Predictions
}

// Predictions is one text file of a model's test-set outputs (or the
// inputs and targets beside them). `trainer eval --predictions FILE`
// writes it as FILE followed by Suffix.
type Predictions struct {
	// Suffix follows the --predictions path: "" for the model's outputs,
	// ".src" and ".ref" for a translation's sources and references, say.
	Suffix string
	// Contents says what a line holds, for the command's help and output.
	Contents string
	// Write writes the file's text to w.
	Write func(w io.Writer) error
}

// Plotter is a Reporter that also draws figures, into a directory its
// caller chooses before Report.
type Plotter interface {
	SetPlotDir(dir string)
}

// Sampler is a Reporter whose model can also be run with its attention
// weights sampled, as Bayesian attention's training graph does, to
// measure the model's uncertainty (`trainer eval --samples`).
type Sampler interface {
	// SampleReport runs the test set samples times with fresh noise from
	// a generator seeded with seed, and prints the spread of the
	// predictions; a model without sampled attention is an error.
	SampleReport(w io.Writer, params *graph.Params, samples int, seed uint64) error
}

// taskState returns a task's checkpoint state, or nil if it keeps none.
func taskState(t Task) (map[string][]byte, error) {
	if s, ok := t.(Stateful); ok {
		return s.State()
	}
	return nil, nil
}
