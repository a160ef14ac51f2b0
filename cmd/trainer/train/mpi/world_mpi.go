//go:build mpi && cgo

package mpi

// #cgo pkg-config: ompi-c
// #include <mpi.h>
// #include <stdlib.h>
//
// static int pf_init(int *provided) {
//     int err = MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, provided);
//     if (err == MPI_SUCCESS) MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
//     return err;
// }
// static int pf_rank(int *r) { return MPI_Comm_rank(MPI_COMM_WORLD, r); }
// static int pf_size(int *n) { return MPI_Comm_size(MPI_COMM_WORLD, n); }
// static int pf_allreduce_sum(double *buf, int n) {
//     return MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
// }
// static int pf_bcast(void *buf, int n, int root) { return MPI_Bcast(buf, n, MPI_BYTE, root, MPI_COMM_WORLD); }
// static int pf_barrier(void) { return MPI_Barrier(MPI_COMM_WORLD); }
// static int pf_abort(int code) { return MPI_Abort(MPI_COMM_WORLD, code); }
// static int pf_finalize(void) { return MPI_Finalize(); }
// static void pf_error_string(int code, char *s) {
//     int len = 0;
//     if (MPI_Error_string(code, s, &len) != MPI_SUCCESS) len = 0;
//     s[len] = 0;
// }
import "C"

import (
	"fmt"
	"runtime"
	"unsafe"
)

// chunk bounds the count of one MPI call, whose counts are C ints.
const chunk = 1 << 28

// World is MPI_COMM_WORLD: every process of the job.
type World struct {
	rank, size int
}

// Init initialises MPI (MPI_Init_thread, serialized) and returns the
// world. It locks the calling goroutine to its OS thread: make every
// other call from it.
func Init() (*World, error) {
	runtime.LockOSThread()
	var provided C.int
	if err := check("init", C.pf_init(&provided)); err != nil {
		return nil, err
	}
	var r, n C.int
	if err := check("rank", C.pf_rank(&r)); err != nil {
		return nil, err
	}
	if err := check("size", C.pf_size(&n)); err != nil {
		return nil, err
	}
	return &World{rank: int(r), size: int(n)}, nil
}

// Rank is this process's rank in the world.
func (w *World) Rank() int { return w.rank }

// Size is the number of processes.
func (w *World) Size() int { return w.size }

// AllreduceSum replaces buf on every process with the element-wise sum
// over the processes (MPI_Allreduce, MPI_SUM, in place).
func (w *World) AllreduceSum(buf []float64) error {
	for lo := 0; lo < len(buf); lo += chunk {
		part := buf[lo:min(lo+chunk, len(buf))]
		if err := check("allreduce", C.pf_allreduce_sum((*C.double)(unsafe.Pointer(&part[0])), C.int(len(part)))); err != nil {
			return err
		}
	}
	return nil
}

// Broadcast replaces buf on every process with root's (MPI_Bcast).
func (w *World) Broadcast(buf []byte, root int) error {
	for lo := 0; lo < len(buf); lo += chunk {
		part := buf[lo:min(lo+chunk, len(buf))]
		if err := check("broadcast", C.pf_bcast(unsafe.Pointer(&part[0]), C.int(len(part)), C.int(root))); err != nil {
			return err
		}
	}
	return nil
}

// Barrier returns once every process has called it.
func (w *World) Barrier() error { return check("barrier", C.pf_barrier()) }

// Abort ends every process of the job with exit code code (MPI_Abort);
// it does not return.
func (w *World) Abort(code int) { C.pf_abort(C.int(code)) }

// Finalize ends MPI in this process; call it once every process is done.
func (w *World) Finalize() error { return check("finalize", C.pf_finalize()) }

// check turns an MPI return code into an error.
func check(what string, code C.int) error {
	if code == C.MPI_SUCCESS {
		return nil
	}
	s := (*C.char)(C.malloc(C.MPI_MAX_ERROR_STRING + 1))
	defer C.free(unsafe.Pointer(s))
	C.pf_error_string(code, s)
	return fmt.Errorf("mpi %s: %s (error %d)", what, C.GoString(s), int(code))
}
