package train

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/probformer/probformer/graph"
	"github.com/probformer/probformer/graph/ckpt"
	"github.com/probformer/probformer/graph/fileio"
	"github.com/probformer/probformer/graph/optim"
)

// Settings configure a Loop. Steps and Batch are required; a zero value
// elsewhere is a documented default.
type Settings struct {
	// Dir is the run directory (rundir.go); Run needs one, and creates it.
	Dir string
	// Steps is the step the run ends at; Batch the training batch size.
	Steps, Batch int
	// Seed draws the initial weights, the batches (through Task.Feed's
	// generator) and the dropout masks and noise, each from its own stream.
	Seed uint64
	// DType of the parameters and graphs (graph.Float32 is the zero value).
	DType graph.DType
	// Optimizer updates the weights; nil is optim.NewAdam(1e-3).
	Optimizer *optim.Adam
	// Schedule sets the optimizer's learning rate before every step; nil
	// leaves it as it is. A resumed run of another length re-anchors it
	// (Schedule.Resized).
	Schedule *Schedule
	// EMADecay > 0 keeps a weight average (WeightAverage) that validation
	// and the best checkpoint use.
	EMADecay float64
	// LogEvery steps (default 100) a metrics line is appended and the
	// progress display logs; the last step always logs.
	LogEvery int
	// EvalEvery steps the validation split is scored; 0 is only at the
	// last step. The best score's checkpoint is BestCheckpoint.
	EvalEvery int
	// CheckpointEvery steps a step checkpoint is written; 0 is only at the
	// last step.
	CheckpointEvery int
	// KeepCheckpoints is how many step checkpoints are kept (default 3).
	KeepCheckpoints int
	// Config is stored in every checkpoint (ckpt.Checkpoint.Config), the
	// run's config as its caller writes it, YAML for `trainer train`.
	// The trainer's commands (eval, export, translate, inspect, train
	// --resume) read it back with configs.Parse: a library run whose
	// checkpoints they are to read sets it to configs.Config.YAML()
	// (SettingsFromConfig does).
	Config []byte
	// Extra entries are stored in every checkpoint, beside the task's
	// state (Stateful) and the loop's own.
	Extra map[string][]byte
	// Init, if set, changes the initial weights of a new run before the
	// weight average starts (e.g. from a pretrained model). New calls it;
	// Restore overwrites its work.
	Init func(params *graph.Params) error
	// Progress displays the run; nil shows nothing.
	Progress Progress
	// Out receives the run's closing line (or the interruption's); nil
	// discards it.
	Out io.Writer
	// Clock, if set, replaces time.Now for the run's speeds and wall
	// times, so that tests can check them without timing anything.
	Clock func() time.Time
	// Comm, if set, makes the loop one process of a data-parallel run
	// (parallel.go): Batch is the global batch, split over Comm.Size()
	// processes, and only rank 0 writes to Dir, validates, and uses
	// Progress and Out. Every process must call New, Restore, Run and
	// TrainStep alike.
	Comm Comm
	// Accumulate > 1 takes every optimizer step on Accumulate
	// micro-batches of Batch/Accumulate examples, run one after the other
	// with their gradients summed (gradient accumulation, accumulate.go):
	// Batch stays the effective batch of a step, and Accumulate must
	// divide it (with Comm, divide each process's share). 0 and 1 are
	// off. A run may be resumed with another Accumulate.
	Accumulate int
	// EarlyStop, if its Patience is positive, ends the run once the
	// selection metric (Task.Selection) has not improved on its best by
	// more than MinDelta for Patience validations in a row (earlystop.go).
	EarlyStop EarlyStop
}

// loopState is the loop's own state, saved in checkpoints (Extra "loop")
// so a resumed run logs exactly what an uninterrupted one would.
type loopState struct {
	LossSum   float64 `json:"loss_sum"`
	LossCount int     `json:"loss_count"`
	// PenaltySums are the sums over the log interval of the model's
	// tracked values (graph.Builder.Track and AddPenaltyKind).
	PenaltySums map[string]float64 `json:"penalty_sums,omitempty"`
	Best        float64            `json:"best"`      // best validation score so far
	BestStep    int                `json:"best_step"` // 0 before the first evaluation
	// WallSec is the wall time in seconds of the run's training loop up to
	// the checkpoint (steps, validations and checkpoints; not loading),
	// summed over sessions when it is resumed.
	WallSec float64 `json:"wall_sec,omitempty"`
	// Steps is the run's length when the checkpoint was written (0 in
	// checkpoints older than it), and Anchor its schedule's re-anchoring:
	// a resume to another length continues the schedule from where it
	// was rather than restarting it.
	Steps  int     `json:"steps,omitempty"`
	Anchor *Anchor `json:"schedule_anchor,omitempty"`
	// StopBest is early stopping's reference score (the best by more
	// than min_delta), set at StopBestStep (0 before the first
	// validation); StopWait counts the validations since; StoppedAt is
	// the step early stopping ended the run at, 0 if it did not
	// (earlystop.go).
	StopBest     float64 `json:"stop_best,omitempty"`
	StopBestStep int     `json:"stop_best_step,omitempty"`
	StopWait     int     `json:"stop_wait,omitempty"`
	StoppedAt    int     `json:"stopped_at,omitempty"`
}

// Loop trains a Task: one run, new or resumed. It is not safe for
// concurrent use.
type Loop struct {
	set     Settings
	task    Task
	params  *graph.Params
	train   *graph.Program
	eval    *graph.Program
	opt     *optim.Adam
	dataSrc *rand.PCG
	dropSrc *rand.PCG
	data    *rand.Rand
	drop    *rand.Rand
	step    int
	loop    loopState
	metrics map[string]float64
	avg     *WeightAverage // nil unless EMADecay > 0
	// sched is Settings.Schedule, re-anchored if a resume changed the
	// run's length; nil if there is none.
	sched *Schedule
	log   io.Writer
	// started is when this session's training loop began.
	started     time.Time
	interrupted bool
	// lastGood is the newest step checkpoint known to be whole, "" if
	// there is none yet: what an error in the run points to.
	lastGood string
	// tracked are the tracked values of the last step, averaged over the
	// processes in a data-parallel run.
	tracked map[string]float64
	// reduceBuf is reused by every step's allreduce; reduceSec sums the
	// time spent in it since the last log line.
	reduceBuf []float64
	reduceSec float64
	// accum is the number of micro-batches of a step (Settings.Accumulate,
	// at least 1); global builds the graph of the step's whole batch,
	// which every micro-batch is a shard of (accumulate.go), and gradBuf
	// holds a micro-batch's weighted gradients.
	accum   int
	global  graph.BuildFunc
	gradBuf []float64
}

// New builds the task's training and evaluation programs on fresh
// parameters drawn from the seed, then runs Settings.Init.
func New(task Task, s Settings) (*Loop, error) {
	switch {
	case task == nil:
		return nil, errors.New("train: no task")
	case s.Steps <= 0:
		return nil, fmt.Errorf("train: %d steps: want a positive number", s.Steps)
	case s.Batch <= 0:
		return nil, fmt.Errorf("train: batch %d: want a positive number", s.Batch)
	case s.LogEvery < 0 || s.EvalEvery < 0 || s.CheckpointEvery < 0 || s.KeepCheckpoints < 0:
		return nil, errors.New("train: a negative cadence")
	case s.Accumulate < 0:
		return nil, fmt.Errorf("train: accumulate %d: want a positive number (1 or 0: off)", s.Accumulate)
	case s.EarlyStop.Patience < 0 || !(s.EarlyStop.MinDelta >= 0) || math.IsInf(s.EarlyStop.MinDelta, 0):
		return nil, fmt.Errorf("train: early stop %+v: want a patience ≥ 0 and a finite min delta ≥ 0", s.EarlyStop)
	case task.EvalBatch() <= 0:
		return nil, fmt.Errorf("train: evaluation batch %d: want a positive number", task.EvalBatch())
	}
	if s.LogEvery == 0 {
		s.LogEvery = 100
	}
	if s.KeepCheckpoints == 0 {
		s.KeepCheckpoints = 3
	}
	if s.Optimizer == nil {
		s.Optimizer = optim.NewAdam(1e-3)
	}
	if s.Out == nil {
		s.Out = io.Discard
	}
	if s.Clock == nil {
		s.Clock = time.Now
	}
	local, err := MicroBatch(s.Batch, s.Accumulate, s.Comm)
	if err != nil {
		return nil, err
	}
	if s.Comm != nil && s.Comm.Rank() != 0 { // rank 0 alone reports
		s.Progress, s.Out = nil, io.Discard
	}
	l := &Loop{set: s, task: task, opt: s.Optimizer, metrics: map[string]float64{},
		params:  graph.NewParams(s.DType, s.Seed),
		dataSrc: rand.NewPCG(s.Seed, 1), dropSrc: rand.NewPCG(s.Seed, 2),
		sched: s.Schedule, loop: loopState{Steps: s.Steps}, accum: max(s.Accumulate, 1),
	}
	l.data, l.drop = rand.New(l.dataSrc), rand.New(l.dropSrc)
	if l.train, err = graph.Compile(l.params, task.Build(local), true); err != nil {
		return nil, fmt.Errorf("build training graph: %w", err)
	}
	if l.eval, err = graph.Compile(l.params, task.Build(task.EvalBatch()), false); err != nil {
		return nil, fmt.Errorf("build evaluation graph: %w", err)
	}
	if s.Init != nil {
		if err := s.Init(l.params); err != nil {
			return nil, err
		}
	}
	if s.Comm != nil {
		if err := l.setupParallel(); err != nil {
			return nil, err
		}
	}
	if l.accum > 1 {
		if err := l.setupAccumulation(); err != nil {
			return nil, err
		}
	}
	if s.EMADecay > 0 { // the average starts from the initial weights
		l.avg = NewWeightAverage(l.params, s.EMADecay)
	}
	return l, nil
}

// Task returns the task the loop trains.
func (l *Loop) Task() Task { return l.task }

// Params returns the model's parameters.
func (l *Loop) Params() *graph.Params { return l.params }

// EvalProgram returns the evaluation program (batch Task.EvalBatch).
func (l *Loop) EvalProgram() *graph.Program { return l.eval }

// Schedule returns the learning-rate schedule the run follows, re-anchored
// if it was resumed with another length (Schedule.Resized); nil if it has
// none.
func (l *Loop) Schedule() *Schedule { return l.sched }

// Step returns the number of steps trained.
func (l *Loop) Step() int { return l.step }

// Metrics returns the latest value of every metric, logged or evaluated.
func (l *Loop) Metrics() map[string]float64 {
	out := make(map[string]float64, len(l.metrics))
	for k, v := range l.metrics {
		out[k] = v
	}
	return out
}

// Interrupted reports whether the last Run stopped at its context's end
// rather than at the last step.
func (l *Loop) Interrupted() bool { return l.interrupted }

// Restore puts a checkpoint's parameters, optimizer state, generators,
// weight average and loop state back, so that Run continues the run
// exactly. With a run directory, the metrics logged after the checkpoint's
// step are dropped and the temporary files of a killed run removed, under
// the directory's lock (LockRunDir): Restore fails with a *LockedError if
// another process writes the run.
func (l *Loop) Restore(ck *ckpt.Checkpoint) error {
	var loop loopState
	if err := json.Unmarshal(ck.Extra["loop"], &loop); err != nil {
		return fmt.Errorf("checkpoint loop state: %w", err)
	}
	if err := l.checkStoppedEarly(loop, ck.Step); err != nil {
		return err
	}
	loop.StoppedAt = 0 // a run let go on by a longer patience, or none
	if err := ck.Restore(l.params); err != nil {
		return err
	}
	l.opt.SetState(ck.Adam)
	if err := l.dataSrc.UnmarshalBinary(ck.RNG["data"]); err != nil {
		return fmt.Errorf("checkpoint data generator: %w", err)
	}
	if err := l.dropSrc.UnmarshalBinary(ck.RNG["dropout"]); err != nil {
		return fmt.Errorf("checkpoint dropout generator: %w", err)
	}
	l.loop = loop
	l.restoreSchedule(ck.Step)
	if l.avg != nil {
		data, ok := ck.Extra[AverageExtra]
		if !ok {
			return errors.New("checkpoint has no weight average, but training.ema_decay is set")
		}
		if err := l.avg.Decode(data); err != nil {
			return err
		}
	}
	l.step = ck.Step
	l.metrics = ck.Metrics
	if l.metrics == nil {
		l.metrics = map[string]float64{}
	}
	if l.set.Dir == "" || !l.lead() {
		return nil
	}
	if _, err := os.Stat(l.set.Dir); errors.Is(err, fs.ErrNotExist) {
		return nil // a run directory still to be made holds nothing to tidy
	}
	release, err := LockRunDir(l.set.Dir)
	if err != nil {
		return err
	}
	defer release()
	if err := TruncateMetrics(l.set.Dir, l.step); err != nil {
		return fmt.Errorf("resume: %w", err)
	}
	if err := RemoveStaleTemps(l.set.Dir); err != nil {
		return fmt.Errorf("resume: remove temporary files: %w", err)
	}
	return nil
}

// restoreSchedule continues the schedule of the restored loop state at
// step: its anchor as saved, re-anchored if the run's length changed.
// Checkpoints written before loopState.Steps existed resume with the
// schedule of the new length, as they always did.
func (l *Loop) restoreSchedule(step int) {
	planned := l.loop.Steps
	if planned == 0 {
		planned = l.set.Steps
	}
	l.loop.Steps = l.set.Steps
	if l.set.Schedule == nil {
		return
	}
	c := *l.set.Schedule
	c.Anchor = l.loop.Anchor
	l.sched = c.Resized(step, planned, l.set.Steps)
	l.loop.Anchor = l.sched.Anchor
}

// Resume restores the newest step checkpoint of the run directory that
// loads (LatestCheckpoint; unloadable ones are named on warn, which may
// be nil). It returns the checkpoint's path. A directory that holds no
// step checkpoint, or does not exist, is an ErrNoCheckpoint (errors.Is;
// ResumeOrStart starts a new run then); a run that early stopping ended
// is an ErrStoppedEarly, unless Settings.EarlyStop lets it go on. A
// program that must be sure no other process writes the directory
// between the checkpoint's read and the run holds its lock (LockRunDir)
// from before Resume until Run returns.
func (l *Loop) Resume(warn io.Writer) (string, error) {
	if warn == nil {
		warn = io.Discard
	}
	if l.set.Dir == "" {
		return "", errors.New("resume: no run directory (Settings.Dir)")
	}
	ck, path, err := LatestCheckpoint(l.set.Dir, warn)
	if err != nil {
		return "", err
	}
	if ck.Step >= l.set.Steps {
		return "", fmt.Errorf("resume: the checkpoint is at step %d of %d", ck.Step, l.set.Steps)
	}
	if err := l.Restore(ck); err != nil {
		return "", fmt.Errorf("resume %s: %w", path, err)
	}
	return path, nil
}

// ResumeOrStart resumes the run in Settings.Dir when it holds a step
// checkpoint (Resume), and otherwise leaves the loop at step 0 to start a
// new run there, as `trainer train` with a fixed --out would like to:
// the metrics a run killed before its first checkpoint logged are
// dropped, and its temporary files removed. It reports whether it
// resumed; any error but ErrNoCheckpoint is Resume's (checkpoints that
// all fail to load, a finished or early-stopped run, a locked directory).
func (l *Loop) ResumeOrStart(warn io.Writer) (resumed bool, err error) {
	if _, err := l.Resume(warn); !errors.Is(err, ErrNoCheckpoint) {
		return err == nil, err
	}
	if _, err := os.Stat(l.set.Dir); errors.Is(err, fs.ErrNotExist) || !l.lead() {
		return false, nil // Run makes the directory
	}
	release, err := LockRunDir(l.set.Dir)
	if err != nil {
		return false, err
	}
	defer release()
	if err := TruncateMetrics(l.set.Dir, 0); err != nil {
		return false, fmt.Errorf("start: %w", err)
	}
	if err := RemoveStaleTemps(l.set.Dir); err != nil {
		return false, fmt.Errorf("start: remove temporary files: %w", err)
	}
	return false, nil
}

// wallSec is the wall time of the run's training loop so far, in
// seconds, validations and checkpoints included: the earlier sessions'
// and this one's.
func (l *Loop) wallSec() float64 {
	if l.started.IsZero() {
		return l.loop.WallSec
	}
	return l.loop.WallSec + l.set.Clock().Sub(l.started).Seconds()
}

// Checkpoint captures the run as it is now.
func (l *Loop) Checkpoint() (*ckpt.Checkpoint, error) {
	ck := ckpt.NewCheckpoint(l.params, l.opt, l.step, l.set.Config)
	for k, v := range l.metrics {
		ck.Metrics[k] = v
	}
	var err error
	if ck.RNG["data"], err = l.dataSrc.MarshalBinary(); err != nil {
		return nil, err
	}
	if ck.RNG["dropout"], err = l.dropSrc.MarshalBinary(); err != nil {
		return nil, err
	}
	loop := l.loop
	loop.WallSec = l.wallSec()
	if ck.Extra["loop"], err = json.Marshal(loop); err != nil {
		return nil, err
	}
	for k, v := range l.set.Extra {
		ck.Extra[k] = v
	}
	if l.avg != nil {
		ck.Extra[AverageExtra] = l.avg.Encode()
	}
	st, err := taskState(l.task)
	if err != nil {
		return nil, fmt.Errorf("task state: %w", err)
	}
	for k, v := range st {
		ck.Extra[k] = v
	}
	return ck, nil
}

// save writes a step checkpoint and prunes old ones. In a data-parallel
// run every process calls it: they check that they agree, and rank 0
// writes.
func (l *Loop) save() (string, error) {
	if l.parallel() {
		if err := l.checkRanksAgree(); err != nil {
			return "", err
		}
	}
	if !l.lead() {
		return "", nil
	}
	ck, err := l.Checkpoint()
	if err != nil {
		return "", err
	}
	path := filepath.Join(l.set.Dir, CheckpointName(l.step))
	if err := ckpt.WriteCheckpoint(path, ck); err != nil {
		return "", err
	}
	return path, PruneCheckpoints(l.set.Dir, l.set.KeepCheckpoints)
}

// record appends one JSON line to metrics.jsonl. Its error (a full disk,
// say) names the step and the last checkpoint, which is what a resume
// would start from.
func (l *Loop) record(fields map[string]any) error {
	fields["step"] = l.step
	line, err := json.Marshal(fields)
	if err != nil {
		return fmt.Errorf("step %d: metrics: %w", l.step, err)
	}
	if _, err = l.log.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("step %d: metrics log: %w; %s", l.step, err, l.lastCheckpoint())
	}
	return nil
}

// lastCheckpoint says which step checkpoint a resume would start from.
func (l *Loop) lastCheckpoint() string {
	if l.lastGood == "" {
		return "no step checkpoint was written yet"
	}
	return "the last checkpoint is " + l.lastGood
}

// validate scores the validation split (with the weight average, if the
// run keeps one), records it, and saves best.ckpt on improvement. stop
// reports that early stopping ends the run here (earlystop.go).
func (l *Loop) validate() (m map[string]float64, stop bool, err error) {
	m, err = l.Evaluate("valid")
	if err != nil {
		return nil, false, fmt.Errorf("step %d: evaluate: %w", l.step, err)
	}
	// wall_sec times the run (loop, validations and checkpoints), as the
	// validation curves of PyTorch baselines are reported in minutes;
	// tests ignore it.
	fields := map[string]any{"wall_sec": l.wallSec()}
	for k, v := range m {
		l.metrics[k] = v
		fields[k] = v
	}
	if err := l.record(fields); err != nil {
		return nil, false, err
	}
	name, maximize := l.task.Selection()
	sel, ok := m[name]
	if !ok {
		return nil, false, fmt.Errorf("step %d: evaluate: no selection metric %s among %s", l.step, name, FormatMetrics(m))
	}
	if l.loop.BestStep == 0 || (maximize && sel > l.loop.Best) || (!maximize && sel < l.loop.Best) {
		l.loop.Best, l.loop.BestStep = sel, l.step
		ck, err := l.Checkpoint()
		if err != nil {
			return nil, false, err
		}
		if err := ckpt.WriteCheckpoint(filepath.Join(l.set.Dir, BestCheckpoint), ck); err != nil {
			return nil, false, err
		}
	}
	return m, l.watchEarlyStop(sel, maximize), nil
}

// Evaluate scores a split with the evaluation program, with the weight
// average swapped in when the run keeps one.
func (l *Loop) Evaluate(split string) (m map[string]float64, err error) {
	if l.avg == nil {
		return l.task.Evaluate(l.params, l.eval, split)
	}
	if err := l.avg.SwapIn(); err != nil {
		return nil, err
	}
	defer func() {
		if e := l.avg.SwapOut(); err == nil {
			err = e
		}
	}()
	return l.task.Evaluate(l.params, l.eval, split)
}

// Run trains until Settings.Steps, appending to the run directory's
// metrics.jsonl, validating and checkpointing at the configured cadences
// and at the last step. When ctx is done it saves a step checkpoint and
// returns nil (Interrupted then reports true). It holds the run
// directory's lock (LockRunDir) while it runs, and fails at once with a
// *LockedError if another process writes the directory; a program that
// writes the directory itself before Run (a config file, say) takes the
// lock first and holds it until Run returns. A non-finite loss or
// gradient stops it with an error naming the step and the last good
// checkpoint (see Divergence).
func (l *Loop) Run(ctx context.Context) (err error) {
	if l.set.Dir == "" {
		return errors.New("train: no run directory (Settings.Dir)")
	}
	if !l.lead() { // the other processes of a parallel run write nothing
		l.log = io.Discard
		return l.run(ctx, nopProgress{})
	}
	if err := os.MkdirAll(l.set.Dir, 0o755); err != nil {
		return fmt.Errorf("run directory: %w", err)
	}
	release, err := LockRunDir(l.set.Dir)
	if err != nil {
		return err
	}
	defer release()
	f, err := appendMetrics(filepath.Join(l.set.Dir, MetricsFile))
	if err != nil {
		return err
	}
	defer func() {
		if e := f.Close(); err == nil && e != nil {
			err = fmt.Errorf("step %d: metrics log: %w; %s", l.step, e, l.lastCheckpoint())
		}
	}()
	l.log = f
	p := l.set.Progress
	if p == nil {
		p = nopProgress{}
	}
	p.Start(l.runInfo())
	return l.run(ctx, p)
}

// appendMetrics opens the metrics log at path to append to it, creating
// it if need be. The open does not block: a FIFO with no reader would
// hang it, and a FIFO, socket or directory is no log, so each is refused
// with a *fileio.NotRegularError. A device is written as a file is (a log
// sent to /dev/null is discarded, one sent to /dev/full fails at its
// first line, naming the step).
func appendMetrics(path string) (*os.File, error) {
	refused := func(mode fs.FileMode) bool {
		return mode&(fs.ModeNamedPipe|fs.ModeSocket|fs.ModeDir) != 0
	}
	if info, err := os.Stat(path); err == nil && refused(info.Mode()) {
		return nil, fmt.Errorf("%s: %w", path, &fileio.NotRegularError{Path: path, Mode: info.Mode()})
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY|syscall.O_NONBLOCK, 0o644)
	if err != nil {
		return nil, fmt.Errorf("metrics log: %w", err)
	}
	info, err := f.Stat()
	if err == nil && refused(info.Mode()) {
		err = fmt.Errorf("%s: %w", path, &fileio.NotRegularError{Path: path, Mode: info.Mode()})
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// runInfo describes the run to the progress display.
func (l *Loop) runInfo() RunInfo {
	info := RunInfo{Steps: l.set.Steps, From: l.step, Params: l.params.Count(),
		Dir: l.set.Dir, Threads: runtime.GOMAXPROCS(0), Processes: 1}
	if l.set.Comm != nil {
		info.Processes = l.set.Comm.Size()
	}
	if sized, ok := l.task.(Sized); ok {
		for _, split := range []string{"train", "valid"} {
			if n, ok := sized.Examples(split); ok {
				if info.Examples == nil {
					info.Examples = map[string]int{}
				}
				info.Examples[split] = n
			}
		}
	}
	return info
}

func (l *Loop) run(ctx context.Context, p Progress) error {
	s := l.set
	if err := l.checkStoppedEarly(l.loop, l.step); err != nil {
		return fmt.Errorf("train: %w", err)
	}
	l.interrupted = false
	l.lastGood = ""
	if steps, _ := StepCheckpoints(s.Dir); len(steps) > 0 {
		l.lastGood = steps[len(steps)-1]
	}
	start := s.Clock()
	l.started = start
	startStep := l.step
	for l.step < s.Steps {
		stop := ctx.Err() != nil
		if l.parallel() {
			var err error
			if stop, err = l.agreeToStop(stop); err != nil {
				return err
			}
		}
		if stop {
			path, err := l.save()
			if err != nil {
				return fmt.Errorf("interrupted at step %d; saving failed: %w", l.step, err)
			}
			// The display stops where the run did, not at 100%.
			p.Finish(l.step)
			l.interrupted = true
			fmt.Fprintf(s.Out, "interrupted at step %d: saved checkpoint %s\n", l.step, path)
			return nil
		}
		next := l.step + 1
		loss, norm, err := l.TrainStep(next)
		var div *Divergence
		if errors.As(err, &div) {
			return diverged(next, div, l.lastGood)
		}
		if err != nil {
			return err
		}
		l.step = next
		l.loop.LossSum += loss
		l.loop.LossCount++
		for name, v := range l.tracked {
			if l.loop.PenaltySums == nil {
				l.loop.PenaltySums = map[string]float64{}
			}
			l.loop.PenaltySums[name] += v
		}
		p.Update(l.step, loss)

		last := l.step == s.Steps
		if l.step%s.LogEvery == 0 || last {
			mean := l.loop.LossSum / float64(l.loop.LossCount)
			// The speed of this session: a resumed run's earlier steps
			// took no time here.
			rate := float64(l.step-startStep) / s.Clock().Sub(start).Seconds()
			l.metrics["train_loss"] = mean
			fields := map[string]any{"train_loss": mean, "lr": l.opt.LR, "grad_norm": norm, "steps_per_sec": rate}
			if l.parallel() {
				// The allreduce's time per step, waiting for the slowest
				// process included: what data parallelism costs.
				fields["allreduce_ms"] = 1000 * l.reduceSec / float64(l.loop.LossCount)
				l.reduceSec = 0
			}
			penalties := map[string]float64{}
			for name, sum := range l.loop.PenaltySums {
				penalties[name] = sum / float64(l.loop.LossCount)
				fields["train_"+name] = penalties[name]
				l.metrics["train_"+name] = penalties[name]
			}
			if err := l.record(fields); err != nil {
				return err
			}
			p.Log(l.step, mean, l.opt.LR, rate, headline(penalties))
			l.loop.LossSum, l.loop.LossCount, l.loop.PenaltySums = 0, 0, nil
		}
		if (s.EvalEvery > 0 && l.step%s.EvalEvery == 0) || last {
			stop := false
			if l.lead() {
				var m map[string]float64
				if m, stop, err = l.validate(); err != nil {
					return err
				}
				p.Eval(l.step, m)
			}
			if l.parallel() && s.EarlyStop.Patience > 0 { // rank 0's decision
				if stop, err = l.agreeToStop(stop); err != nil {
					return err
				}
			}
			if stop {
				return l.stopEarly(p)
			}
		}
		if (s.CheckpointEvery > 0 && l.step%s.CheckpointEvery == 0) || last {
			path, err := l.save()
			if err != nil {
				return fmt.Errorf("step %d: %w", l.step, err)
			}
			if path != "" {
				l.lastGood = path
			}
		}
	}
	p.Finish(l.step)
	name, _ := l.task.Selection()
	io.WriteString(s.Out, doneLine(l.step, s.Clock().Sub(start), name, l.loop.Best, l.loop.BestStep, s.Dir))
	return nil
}

// doneLine is the closing line of a finished run of steps steps that
// took took in this session: the best validation score (name = best at
// bestStep) and the run directory.
func doneLine(steps int, took time.Duration, name string, best float64, bestStep int, dir string) string {
	return fmt.Sprintf("done: %d %s in %s; best %s = %.6g at step %d\ncheckpoints: %s\n",
		steps, plural(steps, "step"), took.Round(time.Second), name, best, bestStep, dir)
}

func diverged(step int, div *Divergence, lastGood string) error {
	if lastGood == "" {
		return fmt.Errorf("step %d: %w; no checkpoint was written yet", step, div)
	}
	return fmt.Errorf("step %d: %w; the last good checkpoint is %s", step, div, lastGood)
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

// nopProgress shows nothing.
type nopProgress struct{}

func (nopProgress) Start(RunInfo)                                          {}
func (nopProgress) Update(int, float64)                                    {}
func (nopProgress) Log(int, float64, float64, float64, map[string]float64) {}
func (nopProgress) Eval(int, map[string]float64)                           {}
func (nopProgress) Finish(int)                                             {}
