package main

import (
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/probformer/probformer/cmd/trainer/internal/figure"
	"github.com/probformer/probformer/cmd/trainer/train"
)

// curvesFlags compare one logged metric across runs.
type curvesFlags struct {
	metric string
	out    string
	labels []string
	reach  float64
}

func newCurvesCommand() *cobra.Command {
	var f curvesFlags
	f.reach = math.NaN()
	cmd := &cobra.Command{
		Use:   "curves RUN [RUN…]",
		Short: "Compare a metric of several runs: a table, a PNG, and the step each reaches a bar",
		Long: `Read --metric (valid_bleu, train_loss, …) from the metrics.jsonl of each
run directory and print it as a Markdown table by step, one column per run.
--out draws the curves as a PNG, each run at every step it logged (runs of
different cadences or lengths keep all their points), --label names the
runs (in order; default the directories' names), and --reach X adds the
first step at which each run's metric is X or more.

  trainer curves checkpoints/scratch checkpoints/pretrained \
    --metric valid_bleu --label scratch --label pretrained --reach 95 --out bleu.png`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, runs []string) error {
			return runCurves(f, runs, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&f.metric, "metric", "", "the metrics.jsonl field to compare (required)")
	cmd.Flags().StringVar(&f.out, "out", "", "write the curves to this PNG file")
	cmd.Flags().StringArrayVar(&f.labels, "label", nil, "name of the next run in the table and legend (repeatable)")
	cmd.Flags().Float64Var(&f.reach, "reach", math.NaN(), "report the first step at which each run's metric is ≥ this value")
	cmd.MarkFlagRequired("metric")
	return cmd
}

// series is one run's metric by step, and the run's training wall time
// (seconds) at the steps whose lines record it.
type series struct {
	label  string
	values map[int]float64
	wall   map[int]float64
}

func runCurves(f curvesFlags, runs []string, stdout io.Writer) error {
	if len(f.labels) > len(runs) {
		return badInput(fmt.Errorf("--label: %d labels for %d runs", len(f.labels), len(runs)))
	}
	all, err := loadSeries(f, runs)
	if err != nil {
		return badInput(err)
	}
	steps := stepsOf(all)
	var b strings.Builder
	fmt.Fprintf(&b, "| step |")
	for _, s := range all {
		fmt.Fprintf(&b, " %s |", s.label)
	}
	b.WriteString("\n|---:|" + strings.Repeat("---:|", len(all)) + "\n")
	for _, step := range steps {
		fmt.Fprintf(&b, "| %d |", step)
		for _, s := range all {
			if v, ok := s.values[step]; ok {
				fmt.Fprintf(&b, " %.4g |", v)
			} else {
				b.WriteString(" |")
			}
		}
		b.WriteString("\n")
	}
	if !math.IsNaN(f.reach) {
		fmt.Fprintf(&b, "\nfirst step with %s ≥ %g:\n", f.metric, f.reach)
		for _, s := range all {
			fmt.Fprintf(&b, "  %-12s %s\n", s.label, firstReach(s, f.reach))
		}
	}
	if _, err := io.WriteString(stdout, b.String()); err != nil {
		return err
	}
	if f.out == "" {
		return nil
	}
	xs, lines := curvePlot(all)
	return figure.WriteCurves(f.out, f.metric, "step", f.metric, xs, lines)
}

// curvePlot is what `curves --out` draws: the x values are every step at
// which any run logged the metric, and each run's line has its value at
// its own steps and NaN (a missing point, figure.Curve) at the others.
// Runs of different evaluation cadences or lengths thus keep all their
// points, as the table does.
func curvePlot(all []series) (xs []float64, lines []figure.Curve) {
	steps := stepsOf(all)
	xs = make([]float64, len(steps))
	for i, step := range steps {
		xs[i] = float64(step)
	}
	lines = make([]figure.Curve, len(all))
	for k, s := range all {
		lines[k] = figure.Curve{Name: s.label, Ys: make([]float64, len(steps))}
		for i, step := range steps {
			v, ok := s.values[step]
			if !ok {
				v = math.NaN()
			}
			lines[k].Ys[i] = v
		}
	}
	return xs, lines
}

// stepsOf is every step at which any of the runs has a value, in order.
func stepsOf(all []series) []int {
	var steps []int
	for _, s := range all {
		for step := range s.values {
			steps = append(steps, step)
		}
	}
	slices.Sort(steps)
	return slices.Compact(steps)
}

// loadSeries reads f.metric from each run, labelled by f.labels in order
// and by the directory's name after them.
func loadSeries(f curvesFlags, runs []string) ([]series, error) {
	var all []series
	for i, run := range runs {
		s, err := readSeries(run, f.metric)
		if err != nil {
			return nil, err
		}
		s.label = filepath.Base(filepath.Clean(run))
		if i < len(f.labels) {
			s.label = f.labels[i]
		}
		all = append(all, s)
	}
	return all, nil
}

// firstReach is the first step at which s's values are at least bar, with
// the wall time of training to it when the run logged it, or "never".
func firstReach(s series, bar float64) string {
	steps := make([]int, 0, len(s.values))
	for step := range s.values {
		steps = append(steps, step)
	}
	slices.Sort(steps)
	for _, step := range steps {
		if s.values[step] >= bar {
			at := fmt.Sprintf("step %d (%.4g)", step, s.values[step])
			if w, ok := s.wall[step]; ok {
				at += fmt.Sprintf(", after %s of training", time.Duration(w*float64(time.Second)).Round(time.Second))
			}
			return at
		}
	}
	return "never"
}

// readSeries reads metric from a run directory's metrics.jsonl.
func readSeries(run, metric string) (series, error) {
	path := filepath.Join(run, train.MetricsFile)
	values, err := train.ReadMetric(run, metric)
	if err != nil {
		return series{}, fmt.Errorf("curves: %w", err)
	}
	wall, err := train.ReadMetric(run, "wall_sec")
	if err != nil {
		return series{}, fmt.Errorf("curves: %w", err)
	}
	s := series{values: values, wall: wall}
	if len(s.values) == 0 {
		return s, fmt.Errorf("%s: no line has %q", path, metric)
	}
	return s, nil
}
