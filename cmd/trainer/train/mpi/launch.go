package mpi

import (
	"errors"
	"os"
	"strconv"
)

// ErrNotBuilt is Init's error in a binary built without the mpi tag.
var ErrNotBuilt = errors.New("this binary was built without MPI: build it with `make build-mpi` (go build -tags mpi)")

// Launched reports whether an MPI launcher started this process (Open
// MPI's mpirun, or a PMI/PMIx launcher such as Slurm's srun), and the
// number of processes of the job when the environment says so (0 when
// it does not: Slurm's PMIx plugin sets a rank but no size, so MPI must
// be asked). It needs no MPI library.
func Launched() (size int, ok bool) {
	for _, key := range []string{"OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "PMI_SIZE", "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"} {
		if n, err := strconv.Atoi(os.Getenv(key)); err == nil && n > 0 {
			if key[:5] == "SLURM" && !rankSet() {
				continue // an sbatch script's own process, not a task of srun
			}
			return n, true
		}
	}
	return 0, rankSet()
}

// rankSet reports whether a launcher gave this process a rank.
func rankSet() bool {
	for _, key := range []string{"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"} {
		if os.Getenv(key) != "" {
			return true
		}
	}
	return false
}

// LocalSize returns how many processes of the job run on this machine
// (Open MPI's OMPI_COMM_WORLD_LOCAL_SIZE), or 1 if the launcher does not
// say: a process may use its share of the cores.
func LocalSize() int {
	if n, err := strconv.Atoi(os.Getenv("OMPI_COMM_WORLD_LOCAL_SIZE")); err == nil && n > 0 {
		return n
	}
	return 1
}
