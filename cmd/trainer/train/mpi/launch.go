package mpi

import (
	"errors"
	"os"
	"strconv"
)

// ErrNotBuilt is Init's error in a binary built without the mpi tag.
var ErrNotBuilt = errors.New("this binary was built without MPI: build it with `make build-mpi` (go build -tags mpi)")

// Launched returns the number of processes of the job that started this
// process, from the environment an MPI launcher sets (Open MPI's mpirun,
// or a PMI/PMIx launcher such as Slurm's srun); ok is false when no
// launcher started it. It needs no MPI library.
func Launched() (size int, ok bool) {
	for _, key := range []string{"OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "PMI_SIZE"} {
		if n, err := strconv.Atoi(os.Getenv(key)); err == nil && n > 0 {
			return n, true
		}
	}
	return 0, false
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
