package main

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/probformer/probformer/cmd/trainer/train"
	"github.com/probformer/probformer/configs"
	"github.com/probformer/probformer/graph"
	"github.com/probformer/probformer/layers"
)

func newEvalCommand() *cobra.Command {
	var path, plots string
	var samples int
	var sets []string
	cmd := &cobra.Command{
		Use:   "eval",
		Short: "Score a checkpoint on the test set, next to simple baselines",
		Long: `Score a checkpoint on its task's test set. --checkpoint takes a checkpoint
file or a run directory (whose best checkpoint is used). Tasks that draw
figures (segment: clicks.png) write them to --plots, by default the
checkpoint's directory.

The model, its vocabularies and its config come from the checkpoint; a
seq2seq task reads only its test set, data.test_file as saved in the
checkpoint (relative to the directory training ran in), or the file that
--set data.test_file=PATH names, relative to the working directory.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			t, file, err := loadCheckpoint(path, sets, []string{"test"})
			if err != nil {
				return err
			}
			if ft, ok := t.task.(train.Plotter); ok {
				if plots == "" {
					plots = filepath.Dir(file)
				}
				ft.SetPlotDir(plots)
			}
			if samples < 0 || samples == 1 {
				return badInput(fmt.Errorf("--samples %d: want 0 (the mean weights) or at least 2", samples))
			}
			sm, canSample := t.task.(train.Sampler)
			if samples > 1 && !canSample {
				return badInput(fmt.Errorf("--samples: task %s has no sampled evaluation yet", t.cfg.Task))
			}
			// Fail before the report, which can take minutes (beam search);
			// SampleReport checks the compiled graph for noise as well.
			if kind, _ := t.cfg.Get("model.attention.kind"); samples > 1 && kind != layers.KindBayesWeibull && kind != layers.KindBayesLogNormal {
				return badInput(fmt.Errorf("--samples: the model's attention is not sampled (attention.kind is %v)", kind))
			}
			fmt.Fprintf(cmd.OutOrStdout(), "checkpoint %s (step %d, config %s)\n", file, t.step, t.cfg.Name)
			rep, ok := t.task.(train.Reporter)
			if !ok {
				return badInput(fmt.Errorf("task %s has no report", t.cfg.Task))
			}
			if err := rep.Report(cmd.OutOrStdout(), t.params, t.eval); err != nil {
				return err
			}
			if samples > 1 {
				if err := sm.SampleReport(cmd.OutOrStdout(), t.params, samples, t.cfg.Seed); err != nil {
					return badInput(err)
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&path, "checkpoint", "", "checkpoint file or run directory (required)")
	cmd.Flags().StringVar(&plots, "plots", "", "directory for the task's figures (default: the checkpoint's)")
	cmd.Flags().IntVar(&samples, "samples", 0, "with Bayesian attention: sampled passes to measure the predictive spread (maxnorm, seq2seq)")
	cmd.Flags().StringArrayVar(&sets, "set", nil, "override the checkpoint's config: only data.test_file=PATH (a TSV task's test set)")
	cmd.MarkFlagRequired("checkpoint")
	return cmd
}

// evalKeys are the only config fields `trainer eval --set` may change.
var evalKeys = []string{"data.test_file"}

// loadForEval rebuilds the model a checkpoint was trained with and loads
// its weights; a task that reads its data lazily reads splits up front.
// Translation needs no split: the vocabularies are in the checkpoint.
func loadForEval(path string, splits ...string) (*trainer, string, error) {
	return loadCheckpoint(path, nil, splits)
}

// loadCheckpoint is loadForEval with --set overrides (evalKeys) of the
// checkpoint's config applied first.
func loadCheckpoint(path string, sets, splits []string) (*trainer, string, error) {
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
	for _, s := range sets {
		key, _, _ := strings.Cut(s, "=")
		if !slices.Contains(evalKeys, key) {
			return nil, "", badInput(fmt.Errorf("--set %s: eval keeps the checkpoint's config; only %s may change", key, strings.Join(evalKeys, ", ")))
		}
		if source, _ := cfg.Get("data.source"); source != "tsv" {
			return nil, "", badInput(fmt.Errorf("--set %s: checkpoint %s is a %s run on data.source %q, which reads no TSV file", key, file, cfg.Task, fmt.Sprint(source)))
		}
		if err := cfg.Set(s); err != nil {
			return nil, "", badInput(err)
		}
	}
	if err := cfg.Validate(); err != nil {
		return nil, "", badInput(fmt.Errorf("checkpoint %s: config: %w", file, err))
	}
	t, err := newTrainer(cfg, "", ck.Extra, splits, nil)
	if err != nil {
		return nil, "", err
	}
	if err := train.UseAverage(ck); err != nil {
		return nil, "", badInput(fmt.Errorf("checkpoint %s: %w", file, err))
	}
	if err := ck.Restore(t.params); err != nil {
		return nil, "", badInput(fmt.Errorf("checkpoint %s: %w", file, err))
	}
	t.step = ck.Step
	return t, file, nil
}

// resolveCheckpoint is train.ResolveCheckpoint, its errors bad input.
func resolveCheckpoint(path string, preferBest bool) (string, error) {
	file, err := train.ResolveCheckpoint(path, preferBest)
	return file, badInput(err)
}
