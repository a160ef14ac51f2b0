package mpi_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/probformer/probformer/cmd/trainer/train"
	"github.com/probformer/probformer/cmd/trainer/train/mpi"
)

// The world is a train.Comm.
var _ train.Comm = (*mpi.World)(nil)

// MpirunArgs are the mpirun flags of the tests: processes on this
// machine over the loopback interface, as root too (CI runs as root), and
// more processes than cores if need be.
func mpirunArgs(np int) []string {
	args := []string{"-np", fmt.Sprint(np), "--oversubscribe",
		"--mca", "btl", "self,tcp", "--mca", "btl_tcp_if_include", "lo", "--mca", "oob_tcp_if_include", "lo"}
	if os.Geteuid() == 0 {
		args = append(args, "--allow-run-as-root")
	}
	return args
}

// TestWorldUnderMpirun builds this package's tests with the mpi tag and
// runs TestWorldCollectives in 3 processes under mpirun.
func TestWorldUnderMpirun(t *testing.T) {
	if os.Getenv("PROBFORMER_MPI_CHILD") != "" {
		t.Skip("a child of the mpirun test")
	}
	if _, err := exec.LookPath("mpirun"); err != nil {
		t.Skip("no mpirun: apt-get install -y openmpi-bin libopenmpi-dev to run the MPI tests")
	}
	if err := exec.Command("pkg-config", "--exists", "ompi-c").Run(); err != nil {
		t.Skip("no Open MPI headers (pkg-config ompi-c): apt-get install -y libopenmpi-dev")
	}
	bin := filepath.Join(t.TempDir(), "mpi.test")
	if out, err := exec.Command("go", "test", "-c", "-tags", "mpi", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go test -c -tags mpi: %v\n%s", err, out)
	}
	cmd := exec.Command("mpirun", append(mpirunArgs(3), bin, "-test.run", "^TestWorldCollectives$", "-test.v")...)
	cmd.Env = append(os.Environ(), "PROBFORMER_MPI_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("mpirun: %v\n%s", err, out)
	}
	if n := strings.Count(string(out), "--- PASS: TestWorldCollectives"); n != 3 {
		t.Fatalf("%d of 3 processes passed:\n%s", n, out)
	}
}

// TestWorldCollectives runs in each process of the mpirun test.
func TestWorldCollectives(t *testing.T) {
	if os.Getenv("PROBFORMER_MPI_CHILD") == "" {
		t.Skip("runs under mpirun (TestWorldUnderMpirun)")
	}
	w, err := mpi.Init()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Finalize()
	if size, ok := mpi.Launched(); !ok || size != w.Size() || w.Size() != 3 {
		t.Fatalf("size %d, launcher says %d (%v), want 3", w.Size(), size, ok)
	}
	r := float64(w.Rank())
	buf := []float64{1, r, r * r}
	if err := w.AllreduceSum(buf); err != nil {
		t.Fatal(err)
	}
	if want := []float64{3, 0 + 1 + 2, 0 + 1 + 4}; !slices.Equal(buf, want) {
		t.Fatalf("rank %d: allreduce %v, want %v", w.Rank(), buf, want)
	}
	msg := []byte("......")
	if w.Rank() == 2 {
		copy(msg, "hello!")
	}
	if err := w.Broadcast(msg, 2); err != nil {
		t.Fatal(err)
	}
	if string(msg) != "hello!" {
		t.Fatalf("rank %d: broadcast %q", w.Rank(), msg)
	}
	if err := w.Barrier(); err != nil {
		t.Fatal(err)
	}
}

func TestWithoutMPI(t *testing.T) {
	if os.Getenv("PROBFORMER_MPI_CHILD") != "" {
		t.Skip("a child of the mpirun test")
	}
	t.Setenv("OMPI_COMM_WORLD_SIZE", "4")
	t.Setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "2")
	if n, ok := mpi.Launched(); !ok || n != 4 {
		t.Errorf("Launched() = %d, %v under a launcher of 4", n, ok)
	}
	if n := mpi.LocalSize(); n != 2 {
		t.Errorf("LocalSize() = %d, want 2", n)
	}
	t.Setenv("OMPI_COMM_WORLD_SIZE", "")
	t.Setenv("PMIX_SIZE", "")
	t.Setenv("PMI_SIZE", "")
	t.Setenv("OMPI_COMM_WORLD_RANK", "")
	t.Setenv("PMIX_RANK", "")
	t.Setenv("PMI_RANK", "")
	t.Setenv("SLURM_NTASKS", "8") // an sbatch script, not one of its tasks
	if _, ok := mpi.Launched(); ok {
		t.Error("Launched() without a launcher")
	}
	t.Setenv("SLURM_NTASKS", "")
	t.Setenv("PMIX_RANK", "3") // Slurm's PMIx plugin: a rank, no size
	if n, ok := mpi.Launched(); !ok || n != 0 {
		t.Errorf("Launched() = %d, %v with a PMIx rank alone, want 0 (unknown), true", n, ok)
	}
}

// BenchmarkAllreduce times AllreduceSum of float64 buffers of the sizes
// of the models' gradients (maxnorm has about 70k parameters, seq2seq-toy
// about 400k), in every process of an mpirun job. Run it with a fixed
// count, so that every process makes the same calls (make bench-mpi):
//
//	go test -c -tags mpi -o mpi.test ./cmd/trainer/train/mpi
//	mpirun -np 2 mpi.test -test.run '^$' -test.bench Allreduce -test.benchtime 500x
func BenchmarkAllreduce(b *testing.B) {
	if _, ok := mpi.Launched(); !ok {
		b.Skip("runs under mpirun")
	}
	w, err := mpi.Init()
	if err != nil {
		b.Fatal(err)
	}
	defer w.Finalize()
	for _, n := range []int{1 << 10, 1 << 16, 1 << 18, 1 << 20} {
		b.Run(fmt.Sprintf("floats-%d", n), func(b *testing.B) {
			buf := make([]float64, n)
			b.SetBytes(int64(8 * n))
			for b.Loop() {
				if err := w.AllreduceSum(buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
