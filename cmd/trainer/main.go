// Command trainer trains, evaluates and exports probformer models.
//
//	trainer train --config maxnorm
//	trainer eval --checkpoint checkpoints/maxnorm-20261121-063000
//
// Bad input (an unknown config key, a missing file, a corrupt checkpoint,
// a run directory another trainer writes) exits with status 2 and a
// one-line error; a failure during a run exits with status 1; Ctrl-C or
// SIGTERM before a run starts training exits with status 130 or 143
// (once it trains, the run saves a checkpoint and exits with status 0).
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"runtime/pprof"
	"time"

	"github.com/spf13/cobra"

	"github.com/probformer/probformer/cmd/trainer/train"
	"github.com/probformer/probformer/graph"
)

func main() {
	if err := joinWorld(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "trainer: %v\n", err)
		os.Exit(2)
	}
	code, err := runCommand(os.Args[1:], os.Stdout, os.Stderr)
	os.Exit(leaveWorld(code, err, os.Stderr))
}

// run executes the command line and returns the exit status. No panic
// escapes it: a user sees one line, never a stack trace.
func run(args []string, stdout, stderr io.Writer) int {
	code, _ := runCommand(args, stdout, stderr)
	return code
}

// runCommand is run, and also returns the error it printed.
func runCommand(args []string, stdout, stderr io.Writer) (code int, err error) {
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(stderr, "trainer: %sinternal error: %v\n", rankPrefix(), r)
			if os.Getenv("PROBFORMER_TRACE") != "" {
				stderr.Write(debug.Stack())
			}
			code, err = 1, fmt.Errorf("internal error: %v", r)
		}
	}()
	root, stopProfile := newRootCommand(stdout, stderr)
	defer stopProfile()
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
	if errors.As(err, &bad) || errors.Is(err, graph.ErrNotRegular) || !started {
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

// newRootCommand returns the command tree, and a function that finishes a
// CPU profile if --cpuprofile started one.
func newRootCommand(stdout, stderr io.Writer) (*cobra.Command, func()) {
	var profile string
	stop := func() {}
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
		f, err := os.Create(profile)
		if err != nil {
			return badInput(fmt.Errorf("--cpuprofile: %w", err))
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return badInput(fmt.Errorf("--cpuprofile: %w", err))
		}
		stop = func() {
			pprof.StopCPUProfile()
			f.Close()
		}
		return nil
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return badInput(err) })
	root.AddCommand(newTrainCommand(), newEvalCommand(), newInspectCommand(), newExportCommand(), newPresetsCommand(), newBLEUCommand(), newTranslateCommand(), newAttentionCommand(), newSweepCommand(), newCurvesCommand(), newBoardCommand())
	return root, func() { stop() }
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
