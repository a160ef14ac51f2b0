package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"runtime/debug"
	"runtime/pprof"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/probformer/probformer/cmd/trainer/train"
	"github.com/probformer/probformer/graph/fileio"
)

// Main runs the trainer's command line on os.Args and exits with its
// status: 0, 1 for a failure during a run, 2 for bad input, 128+N for a
// run stopped by signal N before it trained. Started by an MPI launcher
// (mpirun -np N) for `train`, the process joins the MPI job first (with a
// binary built with -tags mpi). The commands work on every task
// registered in the program (train.Register). Main does not return.
func Main() {
	MainCommand(NewRootCommand(os.Stdout, os.Stderr))
}

// MainCommand is Main for a command tree of the program's own: root is
// NewRootCommand's tree, to which the program may have added commands
// (root.AddCommand) or flags. Main is MainCommand(NewRootCommand(os.Stdout,
// os.Stderr)). MainCommand does not return.
func MainCommand(root *cobra.Command) {
	stderr := root.ErrOrStderr()
	if err := joinWorld(os.Args[1:]); err != nil {
		fmt.Fprintf(stderr, "trainer: %v\n", err)
		os.Exit(2)
	}
	code, err := execute(root, os.Args[1:])
	os.Exit(leaveWorld(code, err, stderr))
}

// Run runs the command line args (without the program's name) in this
// process, writing to stdout and stderr, and returns the exit status Main
// would exit with. No panic escapes it: a user sees one line, never a
// stack trace. Run does not join an MPI job; it is for tests and for
// programs that run the trainer's commands among their own work.
func Run(args []string, stdout, stderr io.Writer) int {
	code, _ := execute(NewRootCommand(stdout, stderr), args)
	return code
}

// run is Run, for the tests.
func run(args []string, stdout, stderr io.Writer) int { return Run(args, stdout, stderr) }

// execute runs root on args and maps its error to an exit status.
func execute(root *cobra.Command, args []string) (code int, err error) {
	stderr := root.ErrOrStderr()
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(stderr, "trainer: %sinternal error: %v\n", rankPrefix(), r)
			if os.Getenv("PROBFORMER_TRACE") != "" {
				stderr.Write(debug.Stack())
			}
			code, err = 1, fmt.Errorf("internal error: %v", r)
		}
	}()
	// a profile that cannot be written fails a command that succeeded
	defer func() {
		if perr := stopProfile(root); perr != nil {
			fmt.Fprintf(stderr, "trainer: --cpuprofile: %v\n", perr)
			if code == 0 {
				code, err = 1, perr
			}
		}
	}()
	root.SetArgs(args)
	// An error before a command starts running is a usage error: an
	// unknown command, a missing required flag, extra arguments.
	started := false
	markStart(root, &started)
	err = root.Execute()
	if err == nil {
		return 0, nil
	}
	reportError(stderr, err)
	var stopped *interruptedError
	if errors.As(err, &stopped) {
		return stopped.exitCode(), err
	}
	// A write refused because its target is not a regular file (a
	// device, a FIFO, a directory) is the user's path, whichever command
	// wrote it.
	var bad *inputError
	if errors.As(err, &bad) || errors.Is(err, fileio.ErrNotRegular) || !started {
		return 2, err
	}
	return 1, err
}

// reportError prints a command's error. In an MPI job, rank 0 prints as
// a single process does, and another rank names itself, but stays quiet
// about an error that every process meets at once (rank 0 reports it).
func reportError(stderr io.Writer, err error) {
	if world == nil || world.Rank() == 0 {
		fmt.Fprintf(stderr, "trainer: %v\n", err)
		return
	}
	var div *train.Divergence
	if errors.As(err, &div) || errors.Is(err, train.ErrRanksDiffer) {
		return
	}
	// An error rank 0 meets too (a bad config, say) is rank 0's to print:
	// its abort ends this process within the wait. One that only this
	// rank meets is printed after it, while rank 0 waits in a collective.
	time.Sleep(3 * time.Second)
	fmt.Fprintf(stderr, "trainer: rank %d: %v\n", world.Rank(), err)
}

// rankPrefix is "rank R: " on a process of an MPI job other than rank 0.
func rankPrefix() string {
	if world == nil || world.Rank() == 0 {
		return ""
	}
	return fmt.Sprintf("rank %d: ", world.Rank())
}

func markStart(c *cobra.Command, started *bool) {
	if run := c.RunE; run != nil {
		c.RunE = func(cmd *cobra.Command, args []string) error {
			*started = true
			return run(cmd, args)
		}
	}
	for _, sub := range c.Commands() {
		markStart(sub, started)
	}
}

// profiles holds, for a root command whose --cpuprofile started a
// profile, the function that finishes it.
var profiles sync.Map // *cobra.Command → func() error

// stopProfile finishes the CPU profile root's --cpuprofile started, if
// any, and returns the error of writing it.
func stopProfile(root *cobra.Command) error {
	if stop, ok := profiles.LoadAndDelete(root); ok {
		return stop.(func() error)()
	}
	return nil
}

// NewRootCommand returns the trainer's command tree (train, eval, export,
// inspect, …), writing to stdout and stderr. Its commands find a config's
// task in the registry (train.Register), so they work on the tasks of the
// program that calls it. Errors are returned by Execute, not printed
// (SilenceErrors): run the tree with MainCommand to get the trainer's
// one-line errors and exit statuses.
func NewRootCommand(stdout, stderr io.Writer) *cobra.Command {
	var profile string
	root := &cobra.Command{
		Use:           "trainer",
		Short:         "Train and study attention models: softmax, EM and Bayesian attention",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVar(&profile, "cpuprofile", "", "write a CPU profile of the command to this file (go tool pprof)")
	root.PersistentPreRunE = func(*cobra.Command, []string) error {
		if profile == "" {
			return nil
		}
		if world != nil && world.Rank() != 0 {
			profile += fmt.Sprintf(".rank%d", world.Rank()) // each process profiles itself
		}
		// The profile is kept in memory and written atomically when the
		// command ends (a device, a named pipe or a full disk must not
		// take it, or the run, silently); the path is looked at now, so
		// that a bad one fails before the command runs.
		if info, err := os.Stat(profile); err == nil && !info.Mode().IsRegular() {
			return badInput(fmt.Errorf("--cpuprofile %s: %w", profile, &fileio.NotRegularError{Path: profile, Mode: info.Mode()}))
		} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return badInput(fmt.Errorf("--cpuprofile: %w", err))
		}
		if err := checkOutputDir("--cpuprofile", profile); err != nil {
			return err
		}
		var buf bytes.Buffer
		if err := pprof.StartCPUProfile(&buf); err != nil {
			return badInput(fmt.Errorf("--cpuprofile: %w", err))
		}
		path := profile
		profiles.Store(root, func() error {
			pprof.StopCPUProfile()
			return fileio.WriteFileAtomic(path, func(w io.Writer) error {
				_, err := w.Write(buf.Bytes())
				return err
			})
		})
		return nil
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return badInput(err) })
	root.AddCommand(newTrainCommand(), newEvalCommand(), newInspectCommand(), newExportCommand(), newPresetsCommand(), newBLEUCommand(), newTranslateCommand(), newAttentionCommand(), newSweepCommand(), newCurvesCommand(), newBoardCommand())
	return root
}

// inputError marks an error caused by the user's input: exit status 2.
type inputError struct{ err error }

func (e *inputError) Error() string { return e.err.Error() }
func (e *inputError) Unwrap() error { return e.err }

func badInput(err error) error {
	if err == nil {
		return nil
	}
	return &inputError{err}
}
