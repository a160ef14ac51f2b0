package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/probformer/probformer/cmd/trainer/train"
	"github.com/probformer/probformer/configs"
	"github.com/probformer/probformer/graph/ckpt"
	"github.com/probformer/probformer/graph/fileio"
	"github.com/probformer/probformer/layers"
)

// evalResultsFile is the name of the JSON file of `trainer eval`'s
// results in the checkpoint's directory, as Hugging Face names it.
const evalResultsFile = "eval_results.json"

// evalFlags are the flags of `trainer eval`.
type evalFlags struct {
	path, plots, out, predictions string
	samples                       int
	sets                          []string
}

func newEvalCommand() *cobra.Command {
	var f evalFlags
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
--set data.test_file=PATH names, relative to the working directory.

The numbers printed are also written, as JSON, to eval_results.json in the
checkpoint's directory, or to --out FILE: the checkpoint (relative to the
JSON file's directory), its step, config and task, "metrics" (the model's:
test_bleu, test_mse, ... as metrics.jsonl names valid_bleu, valid_mse;
test_samples counts the test examples), "baselines" (each baseline's metrics by its name) and the
files --predictions wrote (relative to the JSON file's directory too). A
metric that is not a number is null. A task with a report that returns
no results (a train.Reporter that is not a train.ResultReporter) writes no
JSON and takes no --out. A task with no report of its own (a program's
task, say) prints the metrics its Evaluate returns on the "test" split and
writes them to the JSON file; it has no --predictions.

--predictions FILE writes the model's outputs on the test set, in test-set
order, as the printed scores computed them:
  seq2seq  FILE holds the greedy translations (test_bleu), one a line;
           FILE.src the sources, FILE.ref the references and FILE.beam the
           beam translations (training.beam; test_bleu_beam), all tokenized
           as the model reads them. trainer bleu --tokenize none FILE
           FILE.ref prints the greedy BLEU again.
  maxnorm  a TSV file: a header, then index, target and prediction of each
           test set (vectors of data.dim numbers separated by spaces).
  mlm      a TSV file: a header, then sentence, position, input, target
           and prediction of each chosen (masked) position.
  segment  a TSV file: a header, then image, clicks, and the true and the
           adapted model's predicted classes of the image's pixels, row by
           row, for each test image and each click count of the table.
Files are replaced atomically.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runEval(f, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().StringVar(&f.path, "checkpoint", "", "checkpoint file or run directory (required)")
	cmd.Flags().StringVar(&f.plots, "plots", "", "directory for the task's figures (default: the checkpoint's)")
	cmd.Flags().IntVar(&f.samples, "samples", 0, "with Bayesian attention: sampled passes to measure the predictive spread (maxnorm, seq2seq)")
	cmd.Flags().StringArrayVar(&f.sets, "set", nil, "override the checkpoint's config: only data.test_file=PATH (a TSV task's test set)")
	cmd.Flags().StringVar(&f.out, "out", "", "JSON file of the results (default: "+evalResultsFile+" in the checkpoint's directory)")
	cmd.Flags().StringVar(&f.predictions, "predictions", "", "write the model's test-set outputs to this file (seq2seq: and its .src, .ref and .beam siblings)")
	cmd.MarkFlagRequired("checkpoint")
	return cmd
}

// maxSamples bounds eval --samples: each sample is a pass over the test
// set, and a billion ran for ever (the spread's estimate is settled long
// before a thousand).
const maxSamples = 10000

// runEval is `trainer eval`; warn receives the warning of a checkpoint
// fallback (loadCheckpointWarn).
func runEval(f evalFlags, w, warn io.Writer) error {
	for _, p := range []struct{ flag, path string }{{"--out", f.out}, {"--predictions", f.predictions}} {
		if err := checkOutputDir(p.flag, p.path); err != nil {
			return err
		}
	}
	if f.samples < 0 || f.samples == 1 || f.samples > maxSamples {
		return badInput(fmt.Errorf("--samples %d: want 0 (the mean weights) or 2 to %d", f.samples, maxSamples))
	}
	if f.plots != "" { // before the report, which can take minutes
		if err := checkPlotDir(f.plots); err != nil {
			return err
		}
	}
	t, file, err := loadCheckpointWarn(f.path, f.sets, []string{"test"}, warn)
	if err != nil {
		return err
	}
	if ft, ok := t.task.(train.Plotter); ok {
		if f.plots == "" {
			f.plots = filepath.Dir(file)
		}
		ft.SetPlotDir(f.plots)
	}
	sm, canSample := t.task.(train.Sampler)
	if f.samples > 1 && !canSample {
		return badInput(fmt.Errorf("--samples: task %s has no sampled evaluation yet", t.cfg.Task))
	}
	// Fail before the report, which can take minutes (beam search);
	// SampleReport checks the compiled graph for noise as well.
	if kind, _ := t.cfg.Get("model.attention.kind"); f.samples > 1 && kind != layers.KindBayesWeibull && kind != layers.KindBayesLogNormal {
		return badInput(fmt.Errorf("--samples: the model's attention is not sampled (attention.kind is %v)", kind))
	}
	// A task with no report of its own (a program's task, say) is scored
	// by its Evaluate on the test split: its metrics are printed and
	// written as a report's are.
	rep, isReporter := t.task.(train.Reporter)
	rr, hasResults := t.task.(train.ResultReporter)
	if isReporter && !hasResults && (f.out != "" || f.predictions != "") {
		return badInput(fmt.Errorf("task %s returns no results to write (--out, --predictions)", t.cfg.Task))
	}
	if !isReporter && f.predictions != "" {
		return badInput(fmt.Errorf("--predictions %s: task %s has no predictions to write (it has no train.ResultReporter report)", f.predictions, t.cfg.Task))
	}
	name := t.cfg.Name
	if name == "" {
		name = "of task " + t.cfg.Task
	}
	fmt.Fprintf(w, "checkpoint %s (step %d, config %s)\n", file, t.step, name)
	var res train.Results
	switch {
	case hasResults:
		res, err = rr.ReportResults(w, t.params, t.eval)
	case isReporter:
		if err := rep.Report(w, t.params, t.eval); err != nil {
			return err
		}
		return sampleReport(sm, t, f.samples, w)
	default:
		res, err = evaluateTest(w, t)
	}
	if err != nil {
		return err
	}
	// The files before the sampled passes, which they do not cover: the
	// sampled block stays the last of the output.
	out := f.out
	if out == "" {
		out = filepath.Join(filepath.Dir(file), evalResultsFile)
	}
	written, err := writePredictions(f.predictions, res.Predictions, t.cfg.Task, w)
	if err != nil {
		return err
	}
	if err := writeEvalResults(out, file, t, res, written); err != nil {
		return err
	}
	fmt.Fprintf(w, "wrote %s\n", out)
	return sampleReport(sm, t, f.samples, w)
}

// evaluateTest is eval's report on a task that has none of its own
// (not a train.Reporter): its Evaluate metrics on the "test" split,
// printed one a line.
func evaluateTest(w io.Writer, t *trainer) (train.Results, error) {
	metrics, err := t.task.Evaluate(t.params, t.eval, "test")
	if err != nil {
		return train.Results{}, fmt.Errorf("task %s: test split: %w", t.cfg.Task, err)
	}
	if len(metrics) == 0 {
		return train.Results{}, fmt.Errorf("task %s: Evaluate returned no metrics on the test split", t.cfg.Task)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, k := range slices.Sorted(maps.Keys(metrics)) {
		fmt.Fprintf(tw, "  %s\t%.6g\n", k, metrics[k])
	}
	if err := tw.Flush(); err != nil {
		return train.Results{}, err
	}
	return train.Results{Metrics: metrics}, nil
}

// sampleReport runs --samples passes if asked.
func sampleReport(sm train.Sampler, t *trainer, samples int, w io.Writer) error {
	if samples <= 1 {
		return nil
	}
	if err := sm.SampleReport(w, t.params, samples, t.cfg.Seed); err != nil {
		return badInput(err)
	}
	return nil
}

// checkOutputDir fails early, before a report that can take minutes, if
// the directory of an output file given with flag does not exist.
func checkOutputDir(flag, path string) error {
	if path == "" {
		return nil
	}
	dir := filepath.Dir(path)
	st, err := os.Stat(dir)
	if err != nil {
		return badInput(fmt.Errorf("%s %s: %w", flag, path, err))
	}
	if !st.IsDir() {
		return badInput(fmt.Errorf("%s %s: %s is not a directory", flag, path, dir))
	}
	return nil
}

// checkPlotDir refuses a --plots that is not an existing directory.
func checkPlotDir(dir string) error {
	st, err := os.Stat(dir)
	if err != nil {
		return badInput(fmt.Errorf("--plots %s: %w", dir, err))
	}
	if !st.IsDir() {
		return badInput(fmt.Errorf("--plots %s: not a directory (the figures' directory; it must exist)", dir))
	}
	return nil
}

// predictionFile is a file `trainer eval --predictions` wrote, as
// eval_results.json lists it.
type predictionFile struct {
	File     string `json:"file"`
	Contents string `json:"contents"`
}

// writePredictions writes a report's prediction files at path (nothing
// if path is empty), prints one line naming them, and returns them.
func writePredictions(path string, preds []train.Predictions, task string, w io.Writer) ([]predictionFile, error) {
	if path == "" {
		return nil, nil
	}
	if len(preds) == 0 {
		return nil, badInput(fmt.Errorf("--predictions %s: task %s has no predictions to write", path, task))
	}
	var files []predictionFile
	var names []string
	for _, p := range preds {
		name := path + p.Suffix
		if err := fileio.WriteFileAtomic(name, p.Write); err != nil {
			return nil, fmt.Errorf("predictions: %w", err)
		}
		files = append(files, predictionFile{File: name, Contents: p.Contents})
		names = append(names, fmt.Sprintf("%s (%s)", name, p.Contents))
	}
	fmt.Fprintf(w, "wrote predictions %s\n", strings.Join(names, ", "))
	return files, nil
}

// evalResults is the JSON of eval_results.json.
type evalResults struct {
	// Checkpoint and the Predictions' files are relative to the JSON
	// file's directory when they can be.
	Checkpoint  string                    `json:"checkpoint"`
	Step        int                       `json:"step"`
	Config      string                    `json:"config"`
	Task        string                    `json:"task"`
	Metrics     map[string]any            `json:"metrics"`
	Baselines   map[string]map[string]any `json:"baselines,omitempty"`
	Predictions []predictionFile          `json:"predictions,omitempty"`
}

// writeEvalResults writes the results of a report on checkpoint file as
// JSON to out, atomically.
func writeEvalResults(out, file string, t *trainer, res train.Results, preds []predictionFile) error {
	dir := filepath.Dir(out)
	r := evalResults{Checkpoint: relativeTo(dir, file), Step: t.step, Config: t.cfg.Name, Task: t.cfg.Task,
		Metrics: jsonNumbers(res.Metrics)}
	for _, p := range preds {
		r.Predictions = append(r.Predictions, predictionFile{File: relativeTo(dir, p.File), Contents: p.Contents})
	}
	for name, m := range res.Baselines {
		if r.Baselines == nil {
			r.Baselines = map[string]map[string]any{}
		}
		r.Baselines[name] = jsonNumbers(m)
	}
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("results %s: %w", out, err)
	}
	if err := fileio.WriteFileAtomic(out, func(w io.Writer) error {
		_, err := w.Write(append(data, '\n'))
		return err
	}); err != nil {
		return fmt.Errorf("results: %w", err)
	}
	return nil
}

// relativeTo is path relative to directory dir if it can be, else path.
func relativeTo(dir, path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return path
	}
	absDir, err := filepath.Abs(dir)
	if err != nil {
		return path
	}
	rel, err := filepath.Rel(absDir, abs)
	if err != nil {
		return path
	}
	return rel
}

// jsonNumbers is m with NaN and infinities as nil (JSON null), which JSON
// numbers cannot hold.
func jsonNumbers(m map[string]float64) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			out[k] = nil
			continue
		}
		out[k] = v
	}
	return out
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
	return loadCheckpointWarn(path, sets, splits, os.Stderr)
}

// loadCheckpointWarn is loadCheckpoint, with the warning of a fallback on
// warn: a run directory whose best checkpoint does not load gives its
// newest step checkpoint that does (readCheckpoint).
func loadCheckpointWarn(path string, sets, splits []string, warn io.Writer) (*trainer, string, error) {
	ck, file, err := readCheckpoint(path, true, warn)
	if err != nil {
		return nil, "", err
	}
	cfg, err := checkpointConfig(ck, file)
	if err != nil {
		return nil, "", err
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
	cfg.ForInference = true // the model is used, not trained
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

// readCheckpoint reads the checkpoint path names (a file, or a run
// directory's best checkpoint when preferBest, else its newest step
// checkpoint), falling back to the directory's newest checkpoint that
// loads, with a one-line warning on warn, when that one does not
// (train.ReadRunCheckpoint); its errors are bad input.
func readCheckpoint(path string, preferBest bool, warn io.Writer) (*ckpt.Checkpoint, string, error) {
	ck, file, err := train.ReadRunCheckpoint(path, preferBest, warn)
	return ck, file, badInput(err)
}

// checkpointConfig parses the config checkpoint file holds, its errors
// bad input. A checkpoint of a library run that did not store its config
// (train.Settings.Config left empty) says what to set.
func checkpointConfig(ck *ckpt.Checkpoint, file string) (*configs.Config, error) {
	if len(bytes.TrimSpace(ck.Config)) == 0 {
		return nil, badInput(fmt.Errorf("checkpoint %s holds no config: a library run must set train.Settings.Config (the config's YAML, as train.SettingsFromConfig does) for trainer commands to read it", file))
	}
	cfg, err := configs.Parse(ck.Config)
	if err != nil {
		return nil, badInput(fmt.Errorf("checkpoint %s: config: %w", file, err))
	}
	return cfg, nil
}

// resolveCheckpoint is train.ResolveCheckpoint, its errors bad input.
func resolveCheckpoint(path string, preferBest bool) (string, error) {
	file, err := train.ResolveCheckpoint(path, preferBest)
	return file, badInput(err)
}
