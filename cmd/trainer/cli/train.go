package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/probformer/probformer/configs"
	"github.com/probformer/probformer/graph"
	"github.com/probformer/probformer/graph/ckpt"
	"github.com/probformer/probformer/graph/fileio"

	"github.com/probformer/probformer/cmd/trainer/train"
)

type trainFlags struct {
	config string
	out    string
	sets   []string
	resume string
	bar    string
	// loaded, if set, is the config of a new run, loaded already (a
	// sweep's variant); config and sets are not read then.
	loaded *configs.Config
	// gate, if set, lets the set-up's writes into the run directory
	// finish before the set-up is given up (setupUntilDone).
	gate *setupGate
}

// setupGate orders a set-up's writes into its run directory with its
// abandonment on a signal: a write under way finishes first (no
// temporary file is left), and none starts after.
type setupGate struct {
	mu        sync.Mutex
	abandoned bool
}

// errAbandoned is the error of a write that a given-up set-up would have
// made.
var errAbandoned = errors.New("set-up given up")

// write runs fn unless the set-up has been given up; a nil gate always
// runs it.
func (g *setupGate) write(fn func() error) error {
	if g == nil {
		return fn()
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.abandoned {
		return errAbandoned
	}
	return fn()
}

// abandon waits for a write under way, and refuses the later ones.
func (g *setupGate) abandon() {
	g.mu.Lock()
	g.abandoned = true
	g.mu.Unlock()
}

func newTrainCommand() *cobra.Command {
	var f trainFlags
	cmd := &cobra.Command{
		Use:   "train",
		Short: "Train a model from a preset or a YAML config",
		Long: `Train a model. --config takes a preset name (see 'trainer presets') or a
YAML file; --set key=value overrides any field, e.g. --set training.steps=500.
Checkpoints, config.yaml and metrics.jsonl go to --out (default
checkpoints/<preset>-<time>), a new or empty directory, or one that a
run failed or stopped in its set-up left (its .lock and config.yaml):
one holding other files is refused (status 2), and one holding a run is
continued with --resume. Ctrl-C saves a checkpoint and exits; --resume
DIR continues from it. Ctrl-C or SIGTERM before training starts (while
the config loads, the data is made or the model is built) ends the
command at once with status 130 or 143: nothing was trained, and the
command starts the run again in the same directory.

A run directory has one writer: a train or --resume holds a lock on
DIR/.lock (which records its pid) until it ends, and a second one on the
same directory is refused at once (status 2). Readers (eval, export,
inspect, board) take no lock.

Data paths written in a config file are relative to that file's directory;
paths given with --set are relative to the working directory. Checkpoints
store the config with no absolute path (an absolute one is made relative
to the working directory) and the task's vocabularies, so translate,
attention and export need no data file. --resume reads the training data
again: if it moved, pass --set data.train_file=… (and valid_file,
test_file).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.Flags().Changed("out") && f.out == "" {
				return badInput(errors.New(`--out "": give a run directory, or leave out --out for checkpoints/<preset>-<time>`))
			}
			// A resumed run goes on in its own directory with the config
			// its checkpoint holds: the two flags would be ignored.
			for _, flag := range []string{"config", "out"} {
				if f.resume != "" && cmd.Flags().Changed(flag) {
					return badInput(fmt.Errorf("--%s with --resume: a resumed run keeps its config and goes on in its own directory (--set changes what may change)", flag))
				}
			}
			ctx, stop := train.WithSignals(cmd.Context())
			defer stop()
			return runTrain(ctx, f, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().StringVar(&f.config, "config", configs.DefaultPreset, "preset name or YAML file")
	cmd.Flags().StringVar(&f.out, "out", "", "run directory, new or empty (default checkpoints/<preset>-<time>)")
	cmd.Flags().StringArrayVar(&f.sets, "set", nil, "override a config field: key=value (repeatable)")
	cmd.Flags().StringVar(&f.resume, "resume", "", "continue the run in DIR, or from checkpoint PATH")
	cmd.Flags().StringVar(&f.bar, "progress", "auto", "progress display: auto, bar or lines")
	return cmd
}

// resumableKeys are the only fields --set may change on --resume, with
// the task's file paths (configs.Config.Paths): the run is otherwise the
// one in the checkpoint. The data files may move: the vocabularies are in
// the checkpoint, so the model's ids do not change.
var resumableKeys = []string{"training.steps", "training.log_every", "training.eval_every",
	"training.checkpoint_every", "training.keep_checkpoints",
	"training.accumulate", "training.early_stop.patience", "training.early_stop.min_delta"}

// trainer is one run of a config: its task and the library loop that
// trains it.
type trainer struct {
	cfg    *configs.Config
	task   train.Task
	loop   *train.Loop
	params *graph.Params
	eval   *graph.Program
	dir    string
	step   int
	// release gives up the run directory's lock (train.LockRunDir),
	// held from before anything is written into it; nil if none is held.
	release func()
}

// releaseDir gives up the trainer's lock of its run directory, if it
// holds one.
func (t *trainer) releaseDir() {
	if t != nil && t.release != nil {
		t.release()
	}
}

func runTrain(ctx context.Context, f trainFlags, stdout, stderr io.Writer) error {
	t, err := setupUntilDone(ctx, f, stdout, stderr)
	if err != nil {
		return err
	}
	defer t.releaseDir()
	if err := t.loop.Run(ctx); err != nil {
		return err
	}
	if t.loop.Interrupted() && leader() {
		fmt.Fprintf(stdout, "resume with: trainer train --resume %s\n", t.dir)
	}
	return nil
}

// interruptedError is a run stopped by a signal before it trained: the
// command exits with status 128 + the signal's number (130 for SIGINT,
// 143 for SIGTERM), as a shell reports a process the signal killed.
type interruptedError struct {
	sig   os.Signal
	stage string
}

func (e *interruptedError) Error() string {
	return fmt.Sprintf("interrupted (%s) during %s; nothing was trained", train.SignalName(e.sig), e.stage)
}

// exitCode is the command's exit status.
func (e *interruptedError) exitCode() int {
	if s, ok := e.sig.(syscall.Signal); ok {
		return 128 + int(s)
	}
	return 130
}

// setupUntilDone is setupRun, given up as soon as ctx is done (Ctrl-C or
// SIGTERM during the config's loading, the data's making or the model's
// building, which can take minutes): it then returns an
// *interruptedError at once. The set-up goes on in the background until
// it ends, when a process exits with the command; in a test process, it
// gives its run directory's lock up when it finishes. Nothing it writes
// can be left half-written: every file of a run directory is written
// atomically.
func setupUntilDone(ctx context.Context, f trainFlags, stdout, stderr io.Writer) (*trainer, error) {
	type result struct {
		t        *trainer
		err      error
		panicked any
	}
	done := make(chan result, 1)
	f.gate = &setupGate{}
	go func() {
		defer func() {
			if r := recover(); r != nil {
				if os.Getenv("PROBFORMER_TRACE") != "" {
					stderr.Write(debug.Stack())
				}
				done <- result{panicked: r}
			}
		}()
		t, err := setupRun(f, stdout, stderr)
		done <- result{t: t, err: err}
	}()
	select {
	case r := <-done:
		if r.panicked != nil {
			panic(r.panicked) // runCommand reports it as an internal error
		}
		return r.t, r.err
	case <-ctx.Done():
		f.gate.abandon()
		go func() {
			if r := <-done; r.t != nil {
				r.t.releaseDir()
			}
		}()
		return nil, &interruptedError{sig: train.Interruption(ctx), stage: "set-up"}
	}
}

// setupRun builds a new run, or reloads one to resume. In an MPI job,
// rank 0 takes the run directory's lock (train.LockRunDir) before it
// reads or writes anything in it; the trainer holds it (release).
func setupRun(f trainFlags, stdout, stderr io.Writer) (_ *trainer, err error) {
	var (
		cfg *configs.Config
		ck  *ckpt.Checkpoint
		dir string
	)
	var release func()
	defer func() {
		if err != nil && release != nil {
			release()
		}
	}()
	if f.resume != "" {
		if leader() {
			if release, err = lockResumeDir(f.resume); err != nil {
				return nil, err
			}
		}
		ck, dir, cfg, err = loadResume(f, stderr)
		if err != nil {
			return nil, err
		}
	} else if cfg = f.loaded; cfg == nil {
		if cfg, err = configs.Load(f.config, f.sets); err != nil {
			return nil, badInput(err)
		}
	}
	if _, err := train.MicroBatch(cfg.Training.Batch, cfg.Training.Accumulate, comm()); err != nil {
		return nil, badInput(err)
	}
	if ck == nil {
		dir = f.out
		if dir == "" {
			dir = filepath.Join("checkpoints", cfg.Name+"-"+time.Now().Format("20060102-150405"))
		}
		// In an MPI job rank 0 alone touches the run directory.
		if leader() {
			// looked at before the lock is made, so that a directory
			// refused is left as it was, and again under the lock
			if err := train.RunDirInUse(dir); err != nil {
				return nil, badInput(err)
			}
			if err := checkNewRunDir(dir, cfg); err != nil {
				return nil, err
			}
			if release, err = lockRunDir(dir); err != nil {
				return nil, err
			}
			if err := f.gate.write(func() error { return newRunDir(dir, cfg) }); err != nil {
				return nil, err
			}
		}
	}
	var state map[string][]byte
	if ck != nil {
		state = ck.Extra
	}
	mode := f.bar
	if mode == "" {
		mode = train.ProgressAuto
	}
	var splits []string
	if ck != nil { // a new run's task has read its data already
		splits = []string{"train", "valid", "test"}
	}
	t, err := newTrainer(cfg, dir, state, splits, func(s *train.Settings, tk train.Task) {
		// A resumed run has its own encoder (init.go); in an MPI job the
		// other processes get rank 0's weights.
		if ck == nil && leader() {
			s.Init = func(params *graph.Params) error { return initEncoder(cfg, tk, params, stderr) }
		}
		s.Progress = train.NewProgress(mode, stderr, stdout)
		s.Out = stdout
		s.Comm = comm()
	})
	if err != nil {
		return nil, err
	}
	t.release = release
	if ck != nil {
		if err := f.gate.write(func() error { return t.loop.Restore(ck) }); err != nil {
			// A checkpoint that does not fit the run, a directory another
			// process writes, a run that stopped early: the user's to
			// change. A failed read or write of the run's files (a full
			// disk) is not.
			var ioErr *fs.PathError
			if errors.As(err, &ioErr) && !errors.Is(err, fileio.ErrNotRegular) {
				return nil, err
			}
			return nil, badInput(err)
		}
		t.step = ck.Step
		// Say so when this resume re-anchored the decay: the learning rate
		// then differs from what a fresh run of this length would use.
		if s := t.loop.Schedule(); s != nil && s.Anchor != nil && s.Anchor.Step == ck.Step && leader() {
			fmt.Fprintf(stderr, "resume: training.steps is now %d; the %s decay goes on from lr %.3g at step %d to optimizer.min_lr %.3g at step %d\n",
				cfg.Training.Steps, s.Kind, s.Anchor.LR, ck.Step, s.MinLR, cfg.Training.Steps)
		}
	}
	// Warned once the run is ready to start, not before a set-up error;
	// a resume after the warm-up is quiet (t.step is the resume step).
	if s := t.loop.Schedule(); s != nil && leader() {
		if w := s.WarmupWarningFrom(t.step, cfg.Training.Steps); w != "" {
			fmt.Fprintln(stderr, w)
		}
	}
	return t, nil
}

// lockRunDir creates a run directory if need be and takes its lock
// (train.LockRunDir): a directory another process writes is bad input.
func lockRunDir(dir string) (release func(), err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, badInput(fmt.Errorf("run directory: %w", err))
	}
	release, err = train.LockRunDir(dir)
	if err != nil {
		return nil, badInput(err)
	}
	return release, nil
}

// lockResumeDir takes the lock of the run directory that --resume PATH
// continues: PATH, or a checkpoint file's directory. A PATH that does not
// exist takes no lock: readResume reports it.
func lockResumeDir(path string) (release func(), err error) {
	info, err := os.Stat(path)
	if err != nil {
		return func() {}, nil
	}
	dir := path
	switch {
	case info.Mode().IsRegular():
		dir = filepath.Dir(path) // the run goes on in the checkpoint's directory
	case !info.IsDir():
		return nil, badInput(fmt.Errorf("--resume %s: %w", path, &fileio.NotRegularError{Path: path, Mode: info.Mode()}))
	}
	release, err = train.LockRunDir(dir)
	if err != nil {
		return nil, badInput(err)
	}
	return release, nil
}

// newRunDir creates a new run's directory and writes its config.yaml. The
// directory must be new or empty, as Hugging Face's example scripts want
// their output_dir: a run writes config.yaml, metrics.jsonl and best.ckpt,
// and a user's own files there would be replaced or appended to (and a
// symbolic link among them followed). It may hold what a run that failed
// or stopped in its set-up leaves, its lock and its config.yaml, so that
// the command, corrected, starts it again there; a run that went further
// (metrics, checkpoints) is refused, to be resumed or removed. The caller
// holds the directory's lock, so that no other process can start a run
// there between the check and the write.
func newRunDir(dir string, cfg *configs.Config) error {
	if err := checkNewRunDir(dir, cfg); err != nil {
		return err
	}
	return fileio.WriteFileAtomic(filepath.Join(dir, train.ConfigFile), func(w io.Writer) error {
		_, err := w.Write(portableConfig(cfg).YAML())
		return err
	})
}

// checkNewRunDir refuses dir as a new run's directory unless it does not
// exist yet or holds nothing but what newRunDir allows: the lock, and a
// config.yaml beside it (a config.yaml alone only if it is this run's, the
// same command again).
func checkNewRunDir(dir string, cfg *configs.Config) error {
	if steps, _ := train.StepCheckpoints(dir); len(steps) > 0 {
		return badInput(fmt.Errorf("%s already holds a run: continue it with --resume %s, or choose another --out", dir, dir))
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return badInput(fmt.Errorf("run directory: %w", err))
	}
	var lock, config bool
	var other []string
	for _, e := range entries {
		switch n := e.Name(); {
		case n == train.LockFile && e.Type().IsRegular():
			lock = true
		case n == train.ConfigFile && e.Type().IsRegular():
			config = true
		default:
			other = append(other, n)
		}
	}
	if config && !lock && !sameFile(filepath.Join(dir, train.ConfigFile), portableConfig(cfg).YAML()) {
		other = append(other, train.ConfigFile) // a config.yaml of the user's
	}
	switch {
	case len(other) == 0:
		return nil
	case lock && config:
		return badInput(fmt.Errorf("--out %s holds a run with no step checkpoint to continue (it holds %s): remove the directory to start again, or choose another --out", dir, other[0]))
	}
	return badInput(fmt.Errorf("--out %s: the directory is not empty (it holds %s) and is not a run; choose a new or empty directory", dir, other[0]))
}

// sameFile reports whether the regular file at path holds exactly text.
func sameFile(path string, text []byte) bool {
	f, size, err := fileio.OpenRegular(path)
	if err != nil {
		return false
	}
	defer f.Close()
	if size != int64(len(text)) {
		return false
	}
	got, err := io.ReadAll(io.LimitReader(f, size+1))
	return err == nil && bytes.Equal(got, text)
}

// readResume reads the checkpoint to resume from, and returns it with its
// run directory and path; in an MPI job, on rank 0 only (the others get
// a nil checkpoint).
func readResume(f trainFlags, stderr io.Writer) (ck *ckpt.Checkpoint, dir, path string, err error) {
	dir, path = f.resume, f.resume
	if !leader() {
		return nil, dir, path, nil
	}
	info, err := os.Stat(f.resume)
	if err != nil {
		return nil, "", "", badInput(fmt.Errorf("resume: %w", err))
	}
	if info.IsDir() {
		ck, path, err = train.LatestCheckpoint(f.resume, stderr)
		// a run that failed or stopped in its set-up left its config and
		// no checkpoint: the train command that started it starts it again
		if _, serr := os.Stat(filepath.Join(f.resume, train.ConfigFile)); errors.Is(err, train.ErrNoCheckpoint) && serr == nil {
			err = fmt.Errorf("%w; if its run stopped before its first checkpoint, run the train command that started it again (its --config and --set, with --out %s), or remove the directory", err, f.resume)
		}
	} else {
		dir = filepath.Dir(f.resume)
		ck, err = ckpt.ReadCheckpoint(f.resume)
	}
	if err != nil {
		return nil, "", "", badInput(err)
	}
	return ck, dir, path, nil
}

// loadResume reads the checkpoint to resume from and its config, with the
// allowed --set overrides applied.
func loadResume(f trainFlags, stderr io.Writer) (*ckpt.Checkpoint, string, *configs.Config, error) {
	ck, dir, path, err := readResume(f, stderr)
	if err != nil {
		return nil, "", nil, err
	}
	// In an MPI job rank 0 alone reads the run directory; the others get
	// its checkpoint.
	if ck, err = train.ShareCheckpoint(comm(), ck); err != nil {
		return nil, "", nil, err
	}
	cfg, err := checkpointConfig(ck, path)
	if err != nil {
		return nil, "", nil, err
	}
	cfg.Name = string(ck.Extra["config_name"])
	allowed := append(slices.Clone(resumableKeys), slices.Sorted(maps.Keys(cfg.Paths()))...)
	for _, s := range f.sets {
		key, _, _ := strings.Cut(s, "=")
		if !slices.Contains(allowed, key) {
			return nil, "", nil, badInput(fmt.Errorf("--set %s: a resumed run keeps its config; only %s may change", key, strings.Join(allowed, ", ")))
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

// newTrainer builds the config's task and a loop on fresh parameters.
// state is the task state of a checkpoint, or nil; splits are the data
// splits a task that reads its data lazily (splitLoader) reads up front,
// so that a missing file is bad input before the graphs compile; adjust,
// if not nil, completes the loop's settings before the loop is built.
func newTrainer(cfg *configs.Config, dir string, state map[string][]byte, splits []string, adjust func(*train.Settings, train.Task)) (*trainer, error) {
	tk, err := train.NewTask(cfg, state)
	if err != nil {
		return nil, badInput(err)
	}
	if l, ok := tk.(splitLoader); ok && len(splits) > 0 {
		if err := l.LoadSplits(splits...); err != nil {
			return nil, badInput(err)
		}
	}
	dt, err := graph.ParseDType(cfg.DType)
	if err != nil {
		return nil, badInput(err)
	}
	s, err := loopSettings(cfg, dir, dt)
	if err != nil {
		return nil, badInput(err)
	}
	if adjust != nil {
		adjust(&s, tk)
	}
	loop, err := train.New(tk, s)
	if err != nil {
		return nil, err
	}
	return &trainer{cfg: cfg, task: tk, loop: loop, params: loop.Params(), eval: loop.EvalProgram(), dir: dir}, nil
}

// loopSettings maps a config's optimizer and training sections to the
// loop's settings (train.SettingsFromConfig), with the config stored as
// checkpoints keep it: portable, and with its name.
func loopSettings(cfg *configs.Config, dir string, dt graph.DType) (train.Settings, error) {
	s, err := train.SettingsFromConfig(cfg, dir)
	if err != nil {
		return train.Settings{}, err
	}
	s.DType = dt
	s.Config = portableConfig(cfg).YAML()
	s.Extra = map[string][]byte{"config_name": []byte(cfg.Name)}
	return s, nil
}

// splitLoader is a task that reads its data splits on first use (the
// seq2seq task built from a checkpoint reads none until asked).
type splitLoader interface {
	LoadSplits(splits ...string) error
}

// pathKeys are the config's file paths: the task's data files
// (configs.Config.Paths) and the encoder's checkpoint.
func pathKeys(cfg *configs.Config) []*string {
	var out []*string
	for _, p := range cfg.Paths() {
		out = append(out, p)
	}
	return append(out, &cfg.Init.EncoderFrom)
}

// portableConfig is cfg as checkpoints and config.yaml store it: with no
// absolute path of this machine. A relative path stays as given (relative
// to the directory training runs in, where --resume finds it); an absolute
// one is made relative to the working directory, or cut to its base name
// if it has no such form (another volume).
func portableConfig(cfg *configs.Config) *configs.Config {
	c := cfg.Clone()
	wd, wdErr := os.Getwd()
	for _, p := range pathKeys(c) {
		if *p == "" || !filepath.IsAbs(*p) {
			continue
		}
		rel, err := filepath.Rel(wd, *p)
		if wdErr != nil || err != nil || filepath.IsAbs(rel) {
			rel = filepath.Base(*p)
		}
		*p = filepath.ToSlash(rel)
	}
	return c
}
