package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/probformer/probformer/cmd/trainer/train"
	"github.com/probformer/probformer/configs"
	"github.com/probformer/probformer/graph/fileio"
)

// A sweep trains one config several times, each variant with its own
// --set overrides, and tabulates the test metrics and the cost per step of
// every variant: the way to compare score functions, kernels or widths on
// the same task.
type sweepFlags struct {
	config   string
	out      string
	sets     []string
	variants []string
	bar      string
	timing   int
	retime   bool
}

// variant is one row of a sweep: a name, its overrides and its config,
// loaded once, when the sweep starts, with the sweep's --set and the
// variant's own overrides.
type variant struct {
	name string
	sets []string
	cfg  *configs.Config
}

// sweepResult is a finished variant, saved as result.json in its run
// directory so that an interrupted sweep picks up where it stopped.
type sweepResult struct {
	Variant   string             `json:"variant"`
	Sets      []string           `json:"sets"`
	Test      map[string]float64 `json:"test"`
	BestStep  int                `json:"best_step"`
	MsPerStep float64            `json:"ms_per_step"`
	TrainSec  float64            `json:"train_seconds"`
	// Config is the variant's whole config, so a sweep started again with
	// other overrides does not pass off an old result as the new one.
	Config string `json:"config"`
}

const sweepResultFile = "result.json"

func newSweepCommand() *cobra.Command {
	var f sweepFlags
	cmd := &cobra.Command{
		Use:   "sweep",
		Short: "Train a config once per variant and tabulate test metrics and ms/step",
		Long: `Train --config once per --variant and print a Markdown table of each
variant's test metrics (best validation checkpoint), its training wall time
and its milliseconds per training step (forward, backward and Adam, timed
on fresh weights after training, with nothing else running in this
process). A variant is NAME or NAME:key=value[,key=value…] (so a value
cannot hold a comma); --set applies to all of them. Each variant trains in --out/NAME; a sweep that is stopped
resumes unfinished runs and reuses finished ones when started again. The
table is also written to --out/results.md. --retime measures ms/step of
finished variants again without retraining them. A sweep holds the lock of
--out and of each variant's directory while it writes them (see 'trainer
train --help'): a second sweep, or a train, on the same directory is
refused.

  trainer sweep --config seq2seq-toy --out checkpoints/scores \
    --variant dot:model.attention.score=dot \
    --variant additive:model.attention.score=additive`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runSweep(f, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().StringVar(&f.config, "config", configs.DefaultPreset, "preset name or YAML file")
	cmd.Flags().StringVar(&f.out, "out", "", "directory of the variants' runs (required)")
	cmd.Flags().StringArrayVar(&f.sets, "set", nil, "override a config field in every variant: key=value (repeatable)")
	cmd.Flags().StringArrayVar(&f.variants, "variant", nil, "NAME[:key=value,…] (repeatable, at least one)")
	cmd.Flags().StringVar(&f.bar, "progress", "lines", "progress display: auto, bar or lines")
	cmd.Flags().IntVar(&f.timing, "timing-steps", 20, "training steps timed per variant for ms/step")
	cmd.Flags().BoolVar(&f.retime, "retime", false, "time the steps of finished variants again (on a quieter machine, say)")
	cmd.MarkFlagRequired("out")
	return cmd
}

var variantName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.+-]*$`)

// parseVariants reads --variant flags and loads every variant's config,
// so that a typo fails before hours of training.
func parseVariants(f sweepFlags) ([]variant, error) {
	if len(f.variants) == 0 {
		return nil, fmt.Errorf("--variant: give at least one")
	}
	if f.timing < 1 || f.timing > maxTimingSteps {
		return nil, fmt.Errorf("--timing-steps %d: want 1 to %d", f.timing, maxTimingSteps)
	}
	var out []variant
	seen := map[string]bool{}
	for _, spec := range f.variants {
		name, sets, _ := strings.Cut(spec, ":")
		if !variantName.MatchString(name) {
			return nil, fmt.Errorf("--variant %q: the name must start with a letter or digit, then letters, digits, '.', '_', '+' or '-'", spec)
		}
		if seen[name] {
			return nil, fmt.Errorf("--variant %q: name %s is used twice", spec, name)
		}
		seen[name] = true
		v := variant{name: name}
		if sets != "" {
			v.sets = strings.Split(sets, ",")
		}
		var err error
		if v.cfg, err = configs.Load(f.config, append(slices.Clone(f.sets), v.sets...)); err != nil {
			return nil, fmt.Errorf("--variant %s: %w", name, err)
		}
		out = append(out, v)
	}
	return out, nil
}

// maxTimingSteps bounds sweep --timing-steps, the steps timed per
// variant after its training: a billion ran for ever.
const maxTimingSteps = 100000

func runSweep(f sweepFlags, stdout, stderr io.Writer) error {
	if f.out == "" {
		return badInput(errors.New(`--out "": give the sweep's directory`))
	}
	variants, err := parseVariants(f)
	if err != nil {
		return badInput(err)
	}
	if err := os.MkdirAll(f.out, 0o755); err != nil {
		return badInput(fmt.Errorf("sweep directory: %w", err))
	}
	// One sweep at a time writes the directory (results.md), and each
	// variant's run directory has one writer (sweepVariant).
	release, err := lockRunDir(f.out)
	if err != nil {
		return err
	}
	defer release()
	var results []sweepResult
	for _, v := range variants {
		r, err := sweepVariant(f, v, stdout, stderr)
		if err != nil {
			return fmt.Errorf("variant %s: %w", v.name, err)
		}
		results = append(results, r)
	}
	table := sweepTable(results)
	if err := fileio.WriteFileAtomic(filepath.Join(f.out, "results.md"), func(w io.Writer) error {
		_, err := io.WriteString(w, table)
		return err
	}); err != nil {
		return err
	}
	_, err = io.WriteString(stdout, table)
	return err
}

// runWallSec is the training wall time of the run in dir: the wall_sec
// its metrics.jsonl logged last, which a resumed run carries over from
// its checkpoint, where this session's time (session) counted only the
// resumed part (0 s for a run that had finished before a signal stopped
// the sweep); session when the run logged none (no validation).
func runWallSec(dir string, session float64) float64 {
	wall, err := train.ReadMetric(dir, "wall_sec")
	last, at := 0.0, -1
	for step, w := range wall {
		if step > at {
			last, at = w, step
		}
	}
	if err != nil || at < 0 {
		return session
	}
	return max(last, session)
}

// sweepVariant trains (or resumes, or reuses) one variant and measures it.
func sweepVariant(f sweepFlags, v variant, stdout, stderr io.Writer) (sweepResult, error) {
	dir := filepath.Join(f.out, v.name)
	resultPath := filepath.Join(dir, sweepResultFile)
	// The variant's directory is locked before it is looked at, and until
	// its result is written: its run (runTrain) takes the lock again.
	release, err := lockRunDir(dir)
	if err != nil {
		return sweepResult{}, err
	}
	defer release()
	cfg := v.cfg
	want := string(cfg.YAML())
	if data, err := os.ReadFile(resultPath); err == nil {
		var r sweepResult
		if err := json.Unmarshal(data, &r); err != nil {
			return r, badInput(fmt.Errorf("%s: %w (delete it to measure the variant again)", resultPath, err))
		}
		if r.Config != want {
			return r, badInput(fmt.Errorf("%s was measured with another config than this sweep's; delete %s, or choose another --out", resultPath, dir))
		}
		fmt.Fprintf(stderr, "== %s: finished earlier (%s)\n", v.name, resultPath)
		if !f.retime {
			return r, nil
		}
		var err error
		if r.MsPerStep, err = timeSteps(cfg, f.timing); err != nil {
			return r, err
		}
		return r, writeSweepResult(resultPath, r)
	}
	tf := trainFlags{loaded: cfg, out: dir, bar: f.bar}
	if steps, _ := train.StepCheckpoints(dir); len(steps) > 0 {
		if saved, err := os.ReadFile(filepath.Join(dir, train.ConfigFile)); err != nil || string(saved) != want {
			return sweepResult{}, badInput(fmt.Errorf("%s holds a run of another config than this sweep's; delete it, or choose another --out", dir))
		}
		tf = trainFlags{resume: dir, bar: f.bar}
		fmt.Fprintf(stderr, "== %s: resuming %s\n", v.name, dir)
	} else {
		fmt.Fprintf(stderr, "== %s: training in %s\n", v.name, dir)
	}
	start := time.Now()
	if err := runTrain(context.Background(), tf, stdout, stderr); err != nil {
		return sweepResult{}, err
	}
	r := sweepResult{Variant: v.name, Sets: v.sets, TrainSec: runWallSec(dir, time.Since(start).Seconds()), Config: want}
	t, _, err := loadCheckpointWarn(dir, nil, []string{"test"}, stderr)
	if err != nil {
		return r, err
	}
	if r.Test, err = t.task.Evaluate(t.params, t.eval, "test"); err != nil {
		return r, err
	}
	r.BestStep = t.step
	if r.MsPerStep, err = timeSteps(t.cfg, f.timing); err != nil {
		return r, err
	}
	return r, writeSweepResult(resultPath, r)
}

func writeSweepResult(path string, r sweepResult) error {
	return fileio.WriteFileAtomic(path, func(w io.Writer) error {
		return json.NewEncoder(w).Encode(r)
	})
}

// timeSteps returns the mean milliseconds of a training step of cfg on
// fresh weights, after two untimed steps that warm the caches.
func timeSteps(cfg *configs.Config, steps int) (float64, error) {
	t, err := newTrainer(cfg, "", nil, nil, nil)
	if err != nil {
		return 0, err
	}
	var start time.Time
	for i := -2; i < steps; i++ {
		if i == 0 {
			start = time.Now()
		}
		if _, _, err := t.loop.TrainStep(i + 3); err != nil {
			return 0, err
		}
	}
	return float64(time.Since(start).Microseconds()) / 1e3 / float64(steps), nil
}

// sweepTable is the Markdown table of a sweep: one row per variant, one
// column per test metric, then the best step, wall time and ms/step.
func sweepTable(results []sweepResult) string {
	var metrics []string
	for _, r := range results {
		for k := range r.Test {
			if !slices.Contains(metrics, k) {
				metrics = append(metrics, k)
			}
		}
	}
	slices.Sort(metrics)
	var b bytes.Buffer
	b.WriteString("| variant | overrides |")
	for _, m := range metrics {
		fmt.Fprintf(&b, " %s |", m)
	}
	b.WriteString(" best step | train time | ms/step |\n|---|---|")
	for range metrics {
		b.WriteString("---:|")
	}
	b.WriteString("---:|---:|---:|\n")
	for _, r := range results {
		sets := strings.Join(r.Sets, ", ")
		if sets == "" {
			sets = "(preset)"
		}
		fmt.Fprintf(&b, "| %s | `%s` |", r.Variant, sets)
		for _, m := range metrics {
			if v, ok := r.Test[m]; ok {
				fmt.Fprintf(&b, " %.4g |", v)
			} else {
				b.WriteString(" |")
			}
		}
		fmt.Fprintf(&b, " %d | %s | %.1f |\n", r.BestStep, time.Duration(r.TrainSec*float64(time.Second)).Round(time.Second), r.MsPerStep)
	}
	return b.String()
}
