package tasks

import (
	"github.com/probformer/probformer/cmd/trainer/train"
	"github.com/probformer/probformer/graph"
)

// setObjective makes a task's loss the graph's objective: the loss plus
// its layers' penalties (train.Objective: the ELBO's KL, the
// head-diversity term weighted by model.attention.head_diversity).
func setObjective(b *graph.Builder, loss *graph.Node, headDiversity float64) error {
	total, err := train.Objective(b, loss, headDiversity)
	if err != nil {
		return err
	}
	b.SetLoss(total)
	return nil
}
