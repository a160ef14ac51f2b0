package main

import (
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"probformer/configs"
	"probformer/graph"
)

func newEvalCommand() *cobra.Command {
	var path, plots string
	cmd := &cobra.Command{
		Use:   "eval",
		Short: "Score a checkpoint on the test set, next to simple baselines",
		Long: `Score a checkpoint on its task's test set. --checkpoint takes a checkpoint
file or a run directory (whose best checkpoint is used). Tasks that draw
figures (segment: clicks.png) write them to --plots, by default the
checkpoint's directory.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			t, file, err := loadForEval(path)
			if err != nil {
				return err
			}
			if ft, ok := t.task.(figureTask); ok {
				if plots == "" {
					plots = filepath.Dir(file)
				}
				ft.setPlotDir(plots)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "checkpoint %s (step %d, config %s)\n", file, t.step, t.cfg.Name)
			return t.task.report(cmd.OutOrStdout(), t.params, t.eval)
		},
	}
	cmd.Flags().StringVar(&path, "checkpoint", "", "checkpoint file or run directory (required)")
	cmd.Flags().StringVar(&plots, "plots", "", "directory for the task's figures (default: the checkpoint's)")
	cmd.MarkFlagRequired("checkpoint")
	return cmd
}

// loadForEval rebuilds the model a checkpoint was trained with and loads
// its weights.
func loadForEval(path string) (*trainer, string, error) {
	file, err := resolveCheckpoint(path, true)
	if err != nil {
		return nil, "", err
	}
	ck, err := graph.ReadCheckpoint(file)
	if err != nil {
		return nil, "", badInput(err)
	}
	cfg, err := configs.Parse(ck.Config)
	if err != nil {
		return nil, "", badInput(fmt.Errorf("checkpoint %s: config: %w", file, err))
	}
	cfg.Name = string(ck.Extra["config_name"])
	if err := cfg.Validate(); err != nil {
		return nil, "", badInput(fmt.Errorf("checkpoint %s: config: %w", file, err))
	}
	t, err := newTrainer(cfg, "", ck.Extra)
	if err != nil {
		return nil, "", err
	}
	if err := ck.Restore(t.params); err != nil {
		return nil, "", badInput(fmt.Errorf("checkpoint %s: %w", file, err))
	}
	t.step = ck.Step
	return t, file, nil
}
