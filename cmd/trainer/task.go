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
	// feedTrain draws the next training batch from rng into prog.
	feedTrain(rng *rand.Rand, prog *graph.Program) error
	// evalBatch is the batch size of evaluation programs.
	evalBatch() int
	// evaluate scores an evaluation program on the "valid" or "test" set.
	evaluate(prog *graph.Program, split string) (map[string]float64, error)
	// selectionMetric is the validation metric that picks the best
	// checkpoint (lower is better).
	selectionMetric() string
	// report prints a human summary of a checkpoint's test metrics.
	report(w io.Writer, prog *graph.Program) error
}

// newTask wires a validated config to its task.
func newTask(cfg *configs.Config) (task, error) {
	switch cfg.Task {
	case "maxnorm":
		return newMaxNormTask(cfg)
	}
	return nil, fmt.Errorf("unknown task %q", cfg.Task)
}
