//go:build !mpi || !cgo

package mpi

// World is MPI_COMM_WORLD; without the mpi build tag there is none.
type World struct{}

// Init returns ErrNotBuilt: this binary has no MPI.
func Init() (*World, error) { return nil, ErrNotBuilt }

// Rank is 0.
func (w *World) Rank() int { return 0 }

// Size is 1.
func (w *World) Size() int { return 1 }

// AllreduceSum returns ErrNotBuilt.
func (w *World) AllreduceSum([]float64) error { return ErrNotBuilt }

// Broadcast returns ErrNotBuilt.
func (w *World) Broadcast([]byte, int) error { return ErrNotBuilt }

// Barrier returns ErrNotBuilt.
func (w *World) Barrier() error { return ErrNotBuilt }

// Abort does nothing.
func (w *World) Abort(int) {}

// Finalize returns ErrNotBuilt.
func (w *World) Finalize() error { return ErrNotBuilt }
