package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/probformer/probformer/cmd/trainer/train"
	"github.com/probformer/probformer/cmd/trainer/train/mpi"
)

// world is this process's MPI job when mpirun (or another MPI launcher)
// started it with more than one process, and nil otherwise. It is
// package state because MPI's world is: initialised once per process,
// before the command runs, and finalised once when it ends.
var world *mpi.World

// joinWorld initialises MPI when an MPI launcher started this process
// with other processes. It fails when the binary has no MPI (the N
// processes would otherwise each train the whole run into one
// directory), and for any command but train. Unless GOMAXPROCS is set,
// an unpinned process takes its share of the machine's cores, so that N
// processes use N cores, not N²; a process the launcher pinned to some
// cores (Open MPI binds each process to a core or socket by default) uses
// those.
func joinWorld(args []string) error {
	size, launched := mpi.Launched()
	if !launched || size == 1 {
		return nil
	}
	processes := "several processes"
	if size > 1 {
		processes = fmt.Sprintf("%d processes", size)
	}
	if cmd := commandOf(args); cmd != "train" {
		if size == 0 {
			return nil // a launcher that does not say how many: run as one
		}
		return fmt.Errorf("started by an MPI launcher as one of %s: only `trainer train` runs data-parallel, not %q", processes, cmd)
	}
	w, err := mpi.Init()
	if errors.Is(err, mpi.ErrNotBuilt) {
		return fmt.Errorf("started by an MPI launcher as one of %s, but %w", processes, err)
	}
	if err != nil {
		return err
	}
	if w.Size() <= 1 { // a launcher of one process: an ordinary run
		return w.Finalize()
	}
	world = w
	if os.Getenv("GOMAXPROCS") == "" && runtime.NumCPU() >= onlineCPUs() {
		runtime.GOMAXPROCS(max(1, runtime.NumCPU()/mpi.LocalSize()))
	}
	return nil
}

// onlineCPUs counts the machine's online CPUs (Linux's
// /sys/devices/system/cpu/online, "0-15" or "0,2-7"); runtime.NumCPU
// counts those this process may run on, fewer when it is pinned. Where
// the file is missing it returns 0, and the process counts as unpinned.
func onlineCPUs() int {
	data, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		return 0
	}
	n := 0
	for _, part := range strings.Split(strings.TrimSpace(string(data)), ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, errA := strconv.Atoi(lo)
		b, errB := a, error(nil)
		if isRange {
			b, errB = strconv.Atoi(hi)
		}
		if errA != nil || errB != nil || b < a {
			return 0
		}
		n += b - a + 1
	}
	return n
}

// commandOf returns the command a command line names: its first word
// that is not a flag or a flag's value.
func commandOf(args []string) string {
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "--cpuprofile":
			i++ // its value
		case strings.HasPrefix(a, "-"):
		default:
			return a
		}
	}
	return ""
}

// comm is the world as the training loop's Comm, or nil.
func comm() train.Comm {
	if world == nil {
		return nil
	}
	return world
}

// leader reports whether this process writes files and reports: the only
// process, or rank 0 of an MPI job.
func leader() bool { return world == nil || world.Rank() == 0 }

// leaveWorld ends this process's part of an MPI job with the command's
// exit code. A process that failed takes the job down (MPI_Abort), since
// the others would wait for it forever; rank 0 has printed its error by
// then. An error every process meets at the same step (a diverged loss,
// replicas that differ) is printed once, by rank 0: the others wait for
// its abort.
func leaveWorld(code int, err error, stderr io.Writer) int {
	if world == nil {
		return code
	}
	if code == 0 {
		if err := world.Finalize(); err != nil {
			fmt.Fprintf(stderr, "trainer: rank %d: %v\n", world.Rank(), err)
			return 1
		}
		return 0
	}
	if world.Rank() != 0 {
		var div *train.Divergence
		if errors.As(err, &div) || errors.Is(err, train.ErrRanksDiffer) {
			time.Sleep(10 * time.Second) // rank 0 reports and aborts first
		}
	}
	world.Abort(code)
	return code
}
