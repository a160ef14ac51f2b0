package cli

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
	// direction is "min" (lower is better), "max" (higher is better), or
	// "auto" or "": lowerIsBetter's reading of the metric's name.
	direction string
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
first step at which each run's metric reaches X: is X or less for a metric
where lower is better (a loss: the name holds loss, mse, mae, error,
perplexity or ppl, nll, kl, euclidean, …), X or more for any other (a
score: bleu, accuracy, …). --direction min or max says which when the name
does not; the output names the direction it used. The PNG of a metric
where lower is better has a log-scale y axis when every value is positive,
and --out prints where it wrote the PNG on stderr (the table alone goes to
stdout).

  trainer curves checkpoints/scratch checkpoints/pretrained \
    --metric valid_bleu --label scratch --label pretrained --reach 95 --out bleu.png
  trainer curves checkpoints/scratch --metric train_loss --reach 0.1`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, runs []string) error {
			return runCurves(f, runs, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().StringVar(&f.metric, "metric", "", "the metrics.jsonl field to compare (required)")
	cmd.Flags().StringVar(&f.out, "out", "", "write the curves to this PNG file")
	cmd.Flags().StringArrayVar(&f.labels, "label", nil, "name of the next run in the table and legend (repeatable)")
	cmd.Flags().Float64Var(&f.reach, "reach", math.NaN(), "report the first step at which each run's metric reaches this value (≤ it where lower is better, else ≥ it)")
	cmd.Flags().StringVar(&f.direction, "direction", "auto", "which way is better for --reach and the log-scale plot: min (lower is better), max (higher), or auto (min for a loss/error name)")
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

// runCurves prints the table (and the --reach steps) of f.metric over the
// runs on stdout, and writes the --out PNG, saying so on stderr.
func runCurves(f curvesFlags, runs []string, stdout, stderr io.Writer) error {
	if len(f.labels) > len(runs) {
		return badInput(fmt.Errorf("--label: %d labels for %d runs", len(f.labels), len(runs)))
	}
	lower, why, err := metricDirection(f.metric, f.direction)
	if err != nil {
		return badInput(err)
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
		op, better := "≥", "higher is better"
		if lower {
			op, better = "≤", "lower is better"
		}
		fmt.Fprintf(&b, "\nfirst step with %s %s %g (%s, %s):\n", f.metric, op, f.reach, better, why)
		for _, s := range all {
			fmt.Fprintf(&b, "  %-12s %s\n", s.label, firstReach(s, f.reach, lower))
		}
	}
	if _, err := io.WriteString(stdout, b.String()); err != nil {
		return err
	}
	if f.out == "" {
		return nil
	}
	xs, lines := curvePlot(all)
	logY := lower && allPositive(all)
	yLabel, scale := f.metric, "linear y axis"
	if logY {
		yLabel, scale = f.metric+" (log scale)", "log-scale y axis"
	}
	if err := figure.WriteCurvesWith(f.out, f.metric, "step", yLabel, xs, lines, figure.CurveOptions{LogY: logY}); err != nil {
		return err
	}
	_, err = fmt.Fprintf(stderr, "wrote %s: %s of %s at %s, %s\n", f.out, f.metric, curvesCount(len(all), "run"), curvesCount(len(xs), "step"), scale)
	return err
}

// curvesCount is "1 run", "2 runs".
func curvesCount(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// metricDirection reads --direction: whether lower values of metric are
// better, and why, for the output. "min" and "max" say so; "auto" (or
// "") asks lowerIsBetter.
func metricDirection(metric, direction string) (lower bool, why string, err error) {
	switch strings.ToLower(direction) {
	case "min":
		return true, "--direction min", nil
	case "max":
		return false, "--direction max", nil
	case "auto", "":
		if lowerIsBetter(metric) {
			return true, "by its name; --direction max if not", nil
		}
		return false, "by its name; --direction min if not", nil
	}
	return false, "", fmt.Errorf("--direction: %q is not min, max or auto", direction)
}

// lossWords mark a metric where lower is better when one is a word of its
// name (split at anything not a letter or digit, digits at the end of a
// word ignored): train_loss, valid_mse, test_euclidean, valid_ppl. The
// longer ones also count inside a word (trainloss, errors).
var (
	lossWords   = []string{"mse", "rmse", "mae", "nll", "ppl", "kl", "wer", "cer", "ter", "bpc", "bpd", "err"}
	lossInWords = []string{"loss", "error", "perplexity", "euclidean", "distance", "divergence", "regret"}
)

// lowerIsBetter reports whether a metric's name says it is a loss (lower
// is better) rather than a score (higher is better): see lossWords.
func lowerIsBetter(metric string) bool {
	words := strings.FieldsFunc(strings.ToLower(metric), func(r rune) bool {
		return !('a' <= r && r <= 'z' || '0' <= r && r <= '9')
	})
	for _, w := range words {
		if slices.Contains(lossWords, w) || slices.Contains(lossWords, strings.TrimRight(w, "0123456789")) {
			return true
		}
		for _, l := range lossInWords {
			if strings.Contains(w, l) {
				return true
			}
		}
	}
	return false
}

// allPositive reports whether every value of every series is above zero,
// so the values fit a log scale.
func allPositive(all []series) bool {
	for _, s := range all {
		for _, v := range s.values {
			if !(v > 0) {
				return false
			}
		}
	}
	return true
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

// firstReach is the first step at which s's values reach bar: at most
// bar when lower is better, else at least bar; with the wall time of
// training to it when the run logged it, or "never".
func firstReach(s series, bar float64, lower bool) string {
	steps := make([]int, 0, len(s.values))
	for step := range s.values {
		steps = append(steps, step)
	}
	slices.Sort(steps)
	for _, step := range steps {
		if v := s.values[step]; (lower && v <= bar) || (!lower && v >= bar) {
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
