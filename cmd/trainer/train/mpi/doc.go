// Package mpi runs a training loop as one process of an MPI job: a small
// cgo binding of the MPI calls data-parallel training needs (init, rank
// and size, allreduce, broadcast, abort, finalize), over the MPI library
// of the machine (Open MPI from Debian: apt-get install openmpi-bin
// libopenmpi-dev). World implements train.Comm.
//
// The binding is compiled only with the build tag mpi (go build -tags mpi,
// or make build-mpi), so that a default build and the tests need no MPI
// library; without it Init returns ErrNotBuilt, and Launched still tells
// whether the process was started by mpirun, so that a binary without MPI
// can refuse to run as N independent copies.
//
// Every call must come from the goroutine that called Init (it is locked
// to its OS thread), one at a time, as MPI_THREAD_SERIALIZED allows.
package mpi
