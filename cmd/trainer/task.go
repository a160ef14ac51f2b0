package main

import (
	"fmt"
	"io"
	"math/rand/v2"

	"probformer/configs"
	"probformer/graph"
)

// task is what a config's `task` names: data, a model, a loss and
// metrics. The training loop knows nothing else about it.
type task interface {
	// build adds the model and its loss for a batch of the given size.
	build(batch int) graph.BuildFunc
	// feedTrain draws the batch of training step step (1-based) from rng
	// into prog.
	feedTrain(rng *rand.Rand, prog *graph.Program, step int) error
	// evalBatch is the batch size of evaluation programs.
	evalBatch() int
	// evaluate scores an evaluation program on the "valid" or "test" set.
	evaluate(params *graph.Params, prog *graph.Program, split string) (map[string]float64, error)
	// selection is the validation metric that picks the best checkpoint,
	// and whether higher is better.
	selection() (metric string, maximize bool)
	// report prints a human summary of a checkpoint's test metrics.
	report(w io.Writer, params *graph.Params, prog *graph.Program) error
	// state is what a checkpoint must carry to rebuild the task (a
	// vocabulary, say), by name.
	state() (map[string][]byte, error)
}

// newTask wires a validated config to its task; state, from a checkpoint,
// is nil for a new run.
func newTask(cfg *configs.Config, state map[string][]byte) (task, error) {
	switch cfg.Task {
	case "maxnorm":
		return newMaxNormTask(cfg)
	case "seq2seq":
		return newSeq2SeqTask(cfg, state)
	case "segment":
		return newSegmentTask(cfg)
	case "mlm":
		return newMLMTask(cfg, state)
	}
	return nil, fmt.Errorf("unknown task %q", cfg.Task)
}

// figureTask is a task whose report also draws figures, into a directory
// that `trainer eval` chooses.
type figureTask interface {
	setPlotDir(dir string)
}

// stepAware tasks feed inputs that depend on the step before each
// training run, such as an annealed KL weight.
type stepAware interface {
	atStep(prog *graph.Program, step, steps int) error
}
