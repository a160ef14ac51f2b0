package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"probformer/configs"
	"probformer/graph"
)

type trainFlags struct {
	config string
	out    string
	sets   []string
	resume string
	bar    string
}

func newTrainCommand() *cobra.Command {
	var f trainFlags
	cmd := &cobra.Command{
		Use:   "train",
		Short: "Train a model from a preset or a YAML config",
		Long: `Train a model. --config takes a preset name (see 'trainer presets') or a
YAML file; --set key=value overrides any field, e.g. --set training.steps=500.
Checkpoints, config.yaml and metrics.jsonl go to --out (default
checkpoints/<preset>-<time>). Ctrl-C saves a checkpoint and exits;
--resume DIR continues from it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runTrain(ctx, f, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().StringVar(&f.config, "config", configs.DefaultPreset, "preset name or YAML file")
	cmd.Flags().StringVar(&f.out, "out", "", "run directory (default checkpoints/<preset>-<time>)")
	cmd.Flags().StringArrayVar(&f.sets, "set", nil, "override a config field: key=value (repeatable)")
	cmd.Flags().StringVar(&f.resume, "resume", "", "continue the run in DIR, or from checkpoint PATH")
	cmd.Flags().StringVar(&f.bar, "progress", "auto", "progress display: auto, bar or lines")
	return cmd
}

// resumableKeys are the only fields --set may change on --resume: the run
// is otherwise the one in the checkpoint.
var resumableKeys = []string{"training.steps", "training.log_every", "training.eval_every",
	"training.checkpoint_every", "training.keep_checkpoints"}

// loopState is the training loop's own state, saved in checkpoints so a
// resumed run logs exactly what an uninterrupted one would.
type loopState struct {
	LossSum   float64 `json:"loss_sum"`
	LossCount int     `json:"loss_count"`
	// PenaltySums are the sums over the log interval of the model's
	// penalty terms (graph.Builder.AddPenalty), such as a KL divergence.
	PenaltySums map[string]float64 `json:"penalty_sums,omitempty"`
	Best        float64            `json:"best"`      // best validation score so far
	BestStep    int                `json:"best_step"` // 0 before the first evaluation
	// WallSec is the wall time in seconds of the run's training loop up to
	// the checkpoint (steps, validations and checkpoints; not loading),
	// summed over sessions when it is resumed.
	WallSec float64 `json:"wall_sec,omitempty"`
}

// trainer is one run in progress.
type trainer struct {
	cfg     *configs.Config
	task    task
	dir     string
	params  *graph.Params
	train   *graph.Program
	eval    *graph.Program
	opt     *graph.Adam
	dataSrc *rand.PCG
	dropSrc *rand.PCG
	data    *rand.Rand
	drop    *rand.Rand
	step    int
	loop    loopState
	metrics map[string]float64
	avg     *weightAverage // nil unless training.ema_decay > 0
	out     io.Writer
	log     *os.File
	// started is when this session's training loop began.
	started time.Time
}

// wallSec is the wall time of the run's training loop so far, in
// seconds, validations and checkpoints included: the earlier sessions'
// and this one's.
func (t *trainer) wallSec() float64 {
	if t.started.IsZero() {
		return t.loop.WallSec
	}
	return t.loop.WallSec + time.Since(t.started).Seconds()
}

func runTrain(ctx context.Context, f trainFlags, stdout, stderr io.Writer) error {
	t, err := setupRun(f, stderr)
	if err != nil {
		return err
	}
	defer t.log.Close()
	t.out = stdout
	return t.run(ctx, newProgress(f.bar, stderr, stdout, t.cfg.Training.Steps, t.step))
}

// setupRun builds a new run, or reloads one to resume.
func setupRun(f trainFlags, stderr io.Writer) (*trainer, error) {
	var (
		cfg *configs.Config
		ck  *graph.Checkpoint
		dir string
		err error
	)
	if f.resume != "" {
		ck, dir, cfg, err = loadResume(f, stderr)
		if err != nil {
			return nil, err
		}
	} else {
		if cfg, err = configs.Load(f.config, f.sets); err != nil {
			return nil, badInput(err)
		}
		dir = f.out
		if dir == "" {
			dir = filepath.Join("checkpoints", cfg.Name+"-"+time.Now().Format("20060102-150405"))
		}
		if steps, _ := stepCheckpoints(dir); len(steps) > 0 {
			return nil, badInput(fmt.Errorf("%s already holds a run: continue it with --resume %s, or choose another --out", dir, dir))
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, badInput(fmt.Errorf("run directory: %w", err))
		}
		if err := graph.WriteFileAtomic(filepath.Join(dir, configFile), func(w io.Writer) error {
			_, err := w.Write(cfg.YAML())
			return err
		}); err != nil {
			return nil, err
		}
	}
	var state map[string][]byte
	if ck != nil {
		state = ck.Extra
	}
	t, err := newTrainer(cfg, dir, state)
	if err != nil {
		return nil, err
	}
	if ck == nil { // a resumed run has its own encoder (init.go)
		if err := initEncoder(t, stderr); err != nil {
			return nil, err
		}
		if t.avg != nil { // the average starts from the initial weights
			t.avg = newWeightAverage(t.params, cfg.Training.EMADecay)
		}
	}
	if ck != nil {
		if err := t.restore(ck); err != nil {
			return nil, badInput(err)
		}
		if err := truncateMetrics(dir, t.step); err != nil {
			return nil, err
		}
		removeStaleTemps(dir)
	}
	t.log, err = os.OpenFile(filepath.Join(dir, metricsFile), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	return t, nil
}

// loadResume reads the checkpoint to resume from and its config, with the
// allowed --set overrides applied.
func loadResume(f trainFlags, stderr io.Writer) (*graph.Checkpoint, string, *configs.Config, error) {
	info, err := os.Stat(f.resume)
	if err != nil {
		return nil, "", nil, badInput(fmt.Errorf("resume: %w", err))
	}
	var (
		ck   *graph.Checkpoint
		dir  = f.resume
		path string
	)
	if info.IsDir() {
		ck, path, err = loadLatestGood(f.resume, stderr)
	} else {
		path, dir = f.resume, filepath.Dir(f.resume)
		ck, err = graph.ReadCheckpoint(f.resume)
	}
	if err != nil {
		return nil, "", nil, badInput(err)
	}
	cfg, err := configs.Parse(ck.Config)
	if err != nil {
		return nil, "", nil, badInput(fmt.Errorf("checkpoint %s: config: %w", path, err))
	}
	cfg.Name = string(ck.Extra["config_name"])
	for _, s := range f.sets {
		key, _, _ := strings.Cut(s, "=")
		if !contains(resumableKeys, key) {
			return nil, "", nil, badInput(fmt.Errorf("--set %s: a resumed run keeps its config; only %s may change", key, strings.Join(resumableKeys, ", ")))
		}
		if err := cfg.Set(s); err != nil {
			return nil, "", nil, badInput(err)
		}
	}
	if err := cfg.Validate(); err != nil {
		return nil, "", nil, badInput(err)
	}
	if cfg.Training.Steps <= ck.Step {
		return nil, "", nil, badInput(fmt.Errorf("resume: the checkpoint is at step %d of %d; raise training.steps with --set training.steps=N", ck.Step, cfg.Training.Steps))
	}
	return ck, dir, cfg, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// newTrainer builds the task's programs on fresh parameters. state is the
// task state of a checkpoint, or nil.
func newTrainer(cfg *configs.Config, dir string, state map[string][]byte) (*trainer, error) {
	tk, err := newTask(cfg, state)
	if err != nil {
		return nil, badInput(err)
	}
	dt, err := graph.ParseDType(cfg.DType)
	if err != nil {
		return nil, badInput(err)
	}
	t := &trainer{cfg: cfg, task: tk, dir: dir, metrics: map[string]float64{},
		params:  graph.NewParams(dt, cfg.Seed),
		dataSrc: rand.NewPCG(cfg.Seed, 1), dropSrc: rand.NewPCG(cfg.Seed, 2),
	}
	t.data, t.drop = rand.New(t.dataSrc), rand.New(t.dropSrc)
	if t.train, err = graph.Compile(t.params, tk.build(cfg.Training.Batch), true); err != nil {
		return nil, fmt.Errorf("build training graph: %w", err)
	}
	if t.eval, err = graph.Compile(t.params, tk.build(tk.evalBatch()), false); err != nil {
		return nil, fmt.Errorf("build evaluation graph: %w", err)
	}
	if cfg.Training.EMADecay > 0 {
		t.avg = newWeightAverage(t.params, cfg.Training.EMADecay)
	}
	o := cfg.Optimizer
	t.opt = graph.NewAdam(o.LR)
	t.opt.Beta1, t.opt.Beta2, t.opt.Eps = o.Beta1, o.Beta2, o.Eps
	t.opt.WeightDecay, t.opt.ClipNorm = o.WeightDecay, o.ClipNorm
	return t, nil
}

// restore puts a checkpoint's parameters, optimizer, generators and loop
// state back.
func (t *trainer) restore(ck *graph.Checkpoint) error {
	if err := ck.Restore(t.params); err != nil {
		return err
	}
	t.opt.SetState(ck.Adam)
	if err := t.dataSrc.UnmarshalBinary(ck.RNG["data"]); err != nil {
		return fmt.Errorf("checkpoint data generator: %w", err)
	}
	if err := t.dropSrc.UnmarshalBinary(ck.RNG["dropout"]); err != nil {
		return fmt.Errorf("checkpoint dropout generator: %w", err)
	}
	if err := json.Unmarshal(ck.Extra["loop"], &t.loop); err != nil {
		return fmt.Errorf("checkpoint loop state: %w", err)
	}
	if t.avg != nil {
		data, ok := ck.Extra[emaExtra]
		if !ok {
			return errors.New("checkpoint has no weight average, but training.ema_decay is set")
		}
		if err := t.avg.decode(data); err != nil {
			return err
		}
	}
	t.step = ck.Step
	t.metrics = ck.Metrics
	return nil
}

// checkpoint captures the run as it is now.
func (t *trainer) checkpoint() (*graph.Checkpoint, error) {
	ck := graph.NewCheckpoint(t.params, t.opt, t.step, t.cfg.YAML())
	for k, v := range t.metrics {
		ck.Metrics[k] = v
	}
	var err error
	if ck.RNG["data"], err = t.dataSrc.MarshalBinary(); err != nil {
		return nil, err
	}
	if ck.RNG["dropout"], err = t.dropSrc.MarshalBinary(); err != nil {
		return nil, err
	}
	loop := t.loop
	loop.WallSec = t.wallSec()
	if ck.Extra["loop"], err = json.Marshal(loop); err != nil {
		return nil, err
	}
	ck.Extra["config_name"] = []byte(t.cfg.Name)
	if t.avg != nil {
		ck.Extra[emaExtra] = t.avg.encode()
	}
	st, err := t.task.state()
	if err != nil {
		return nil, err
	}
	for k, v := range st {
		ck.Extra[k] = v
	}
	return ck, nil
}

// save writes a step checkpoint and prunes old ones.
func (t *trainer) save() (string, error) {
	ck, err := t.checkpoint()
	if err != nil {
		return "", err
	}
	path := filepath.Join(t.dir, stepCheckpointName(t.step))
	if err := graph.WriteCheckpoint(path, ck); err != nil {
		return "", err
	}
	return path, pruneCheckpoints(t.dir, t.cfg.Training.KeepCheckpoints)
}

// record appends one JSON line to metrics.jsonl.
func (t *trainer) record(fields map[string]any) error {
	fields["step"] = t.step
	line, err := json.Marshal(fields)
	if err != nil {
		return err
	}
	_, err = t.log.Write(append(line, '\n'))
	return err
}

// evaluate scores the validation set (with the weight average, if the run
// keeps one), records it, and saves best.ckpt on improvement.
func (t *trainer) evaluate() (map[string]float64, error) {
	m, err := t.scoreValid()
	if err != nil {
		return nil, fmt.Errorf("step %d: evaluate: %w", t.step, err)
	}
	// wall_sec times the run (loop, validations and checkpoints), as the
	// validation curves of PyTorch baselines are reported in minutes;
	// tests ignore it.
	fields := map[string]any{"wall_sec": t.wallSec()}
	for k, v := range m {
		t.metrics[k] = v
		fields[k] = v
	}
	if err := t.record(fields); err != nil {
		return nil, err
	}
	name, maximize := t.task.selection()
	sel := m[name]
	if t.loop.BestStep == 0 || (maximize && sel > t.loop.Best) || (!maximize && sel < t.loop.Best) {
		t.loop.Best, t.loop.BestStep = sel, t.step
		ck, err := t.checkpoint()
		if err != nil {
			return nil, err
		}
		if err := graph.WriteCheckpoint(filepath.Join(t.dir, bestCheckpoint), ck); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// scoreValid runs the task's validation with the averaged weights swapped
// in, when there are any.
func (t *trainer) scoreValid() (m map[string]float64, err error) {
	if t.avg == nil {
		return t.task.evaluate(t.params, t.eval, "valid")
	}
	if err := t.avg.swapIn(); err != nil {
		return nil, err
	}
	defer func() {
		if e := t.avg.swapOut(); err == nil {
			err = e
		}
	}()
	return t.task.evaluate(t.params, t.eval, "valid")
}

func (t *trainer) run(ctx context.Context, p progress) error {
	tr := t.cfg.Training
	lastGood := ""
	if steps, _ := stepCheckpoints(t.dir); len(steps) > 0 {
		lastGood = steps[len(steps)-1]
	}
	start := time.Now()
	t.started = start
	startStep := t.step
	for t.step < tr.Steps {
		select {
		case <-ctx.Done():
			path, err := t.save()
			if err != nil {
				return fmt.Errorf("interrupted at step %d; saving failed: %w", t.step, err)
			}
			p.finish()
			fmt.Fprintf(t.out, "interrupted at step %d: checkpoint %s\nresume with: trainer train --resume %s\n", t.step, path, t.dir)
			return nil
		default:
		}
		next := t.step + 1
		loss, norm, err := t.trainStep(next)
		var div *divergence
		if errors.As(err, &div) {
			return t.diverged(next, div.why, lastGood)
		}
		if err != nil {
			return err
		}
		t.step = next
		t.loop.LossSum += loss
		t.loop.LossCount++
		for name, v := range t.train.PenaltyValues() {
			if t.loop.PenaltySums == nil {
				t.loop.PenaltySums = map[string]float64{}
			}
			t.loop.PenaltySums[name] += v
		}
		p.update(t.step, loss)

		last := t.step == tr.Steps
		if t.step%tr.LogEvery == 0 || last {
			mean := t.loop.LossSum / float64(t.loop.LossCount)
			rate := float64(t.step-startStep) / time.Since(start).Seconds()
			t.metrics["train_loss"] = mean
			fields := map[string]any{"train_loss": mean, "lr": t.opt.LR, "grad_norm": norm, "steps_per_sec": rate}
			penalties := map[string]float64{}
			for name, sum := range t.loop.PenaltySums {
				penalties[name] = sum / float64(t.loop.LossCount)
				fields["train_"+name] = penalties[name]
				t.metrics["train_"+name] = penalties[name]
			}
			if err := t.record(fields); err != nil {
				return err
			}
			p.log(t.step, mean, t.opt.LR, rate, headline(penalties))
			t.loop.LossSum, t.loop.LossCount, t.loop.PenaltySums = 0, 0, nil
		}
		if (tr.EvalEvery > 0 && t.step%tr.EvalEvery == 0) || last {
			m, err := t.evaluate()
			if err != nil {
				return err
			}
			p.eval(t.step, m)
		}
		if (tr.CheckpointEvery > 0 && t.step%tr.CheckpointEvery == 0) || last {
			path, err := t.save()
			if err != nil {
				return fmt.Errorf("step %d: %w", t.step, err)
			}
			lastGood = path
		}
	}
	p.finish()
	name, _ := t.task.selection()
	fmt.Fprintf(t.out, "done: %d steps in %s; best %s = %.6g at step %d\ncheckpoints: %s\n",
		t.step, time.Since(start).Round(time.Second), name, t.loop.Best, t.loop.BestStep, t.dir)
	return nil
}

func (t *trainer) diverged(step int, why, lastGood string) error {
	if lastGood == "" {
		return fmt.Errorf("step %d: %s; no checkpoint was written yet", step, why)
	}
	return fmt.Errorf("step %d: %s; the last good checkpoint is %s", step, why, lastGood)
}

// headline keeps the parts of the loss a progress line has room for: the
// whole-model values (nll, kl, diversity), not each layer's, which
// metrics.jsonl holds.
func headline(tracked map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for name, v := range tracked {
		if !strings.Contains(name, ".") {
			out[name] = v
		}
	}
	return out
}
