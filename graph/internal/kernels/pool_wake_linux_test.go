//go:build cgo && !purego

package kernels

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// TestPoolWakeAwayRestoresCPUs: a product that wakes the sleeping helper
// keeps it off the caller's CPU for the wake-up (pool.c's pf_pool_wake
// narrows its CPUs), and the helper, awake, takes back every CPU it had:
// after rounds of wake-ups, no thread of the process is left with fewer
// CPUs than the process. The products keep their one-thread values.
func TestPoolWakeAwayRestoresCPUs(t *testing.T) {
	if hasAVX2() == 0 {
		t.Skip("no AVX2 on this CPU")
	}
	want, err := cpusAllowed("/proc/self/status")
	if err != nil {
		t.Skipf("no CPU list for the process: %v", err)
	}
	if !strings.ContainsAny(want, ",-") {
		t.Skipf("the process may run on CPU %s only: no other CPU to wake the helper on", want)
	}
	prev := runtime.GOMAXPROCS(max(2, runtime.GOMAXPROCS(0)))
	defer runtime.GOMAXPROCS(prev)
	level := gemmLevel()
	rng := rand.New(rand.NewPCG(53, 59))
	m, n, k := 512, 256, 64
	a := to32(normal(1)(rng, []int{m * k}))
	b := to32(normal(1)(rng, []int{k * n}))
	one := make([]float32, m*n)
	gemmKernelAt(level, false, false, m, n, k, 1, a, k, b, n, 0, one, n, nil)
	if err := setOwnCPUs(want); err != nil {
		t.Skipf("the OS refuses to set a thread's CPUs: %v", err)
	}
	// The helper exists, and has run a share, before the rounds (run
	// alone, this test is the first to share a product).
	for try := 0; try < 200; try++ {
		if gemmSharedAt(level, 2, 0, 24, 16*int(level), false, false, m, n, k, 1, a, k, b, n, 0, make([]float32, m*n), n, nil) > 0 {
			break
		}
	}
	w := poolWords(0)
	CountPool(true)
	defer CountPool(false)
	for round := 0; round < 20; round++ {
		// Asleep first (it polls for tens of µs after its last share).
		for end := time.Now().Add(10 * time.Second); atomic.LoadInt32(&w[2]) == 0; time.Sleep(100 * time.Microsecond) {
			if time.Now().After(end) {
				t.Fatalf("round %d: the helper still polls 10 s after the last product", round)
			}
		}
		got := make([]float32, m*n)
		gemmSharedAt(level, 2, 0, 24, 16*int(level), false, false, m, n, k, 1, a, k, b, n, 0, got, n, nil)
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(one[i]) {
				t.Fatalf("round %d: element %d is %v through the pool, %v on one thread", round, i, got[i], one[i])
			}
		}
	}
	if s := ReadPoolStats(); s.WokeAway == 0 {
		t.Fatalf("20 products posted to a sleeping helper, %d wake-ups, none sent off the caller's CPU", s.Wakes)
	}
	// A woken helper restores its CPUs as it wakes, before it runs
	// anything; the deadline only bounds a failure.
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		narrow, err := narrowedThreads(want)
		if err != nil {
			t.Fatal(err)
		}
		if len(narrow) == 0 {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("10 s after the last wake-up, threads still have fewer CPUs than the process's %s: %v", want, narrow)
		}
	}
}

// cpusAllowed is the Cpus_allowed_list line of a /proc status file.
func cpusAllowed(status string) (string, error) {
	b, err := os.ReadFile(status)
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
			return strings.TrimSpace(v), nil
		}
	}
	return "", fmt.Errorf("%s: no Cpus_allowed_list", status)
}

// setOwnCPUs sets the calling thread's CPUs to list (a Cpus_allowed_list,
// "0-1" or "0,2-3"), as pool.c's helper does when it wakes: it fails where
// a sandbox refuses sched_setaffinity.
func setOwnCPUs(list string) error {
	var mask [16]uint64 // 1024 CPUs, glibc's cpu_set_t
	for _, part := range strings.Split(list, ",") {
		lo, hi, ok := strings.Cut(part, "-")
		if !ok {
			hi = lo
		}
		a, err1 := strconv.Atoi(lo)
		z, err2 := strconv.Atoi(hi)
		if err1 != nil || err2 != nil || a < 0 || z >= 64*len(mask) || a > z {
			return fmt.Errorf("CPU list %q", list)
		}
		for c := a; c <= z; c++ {
			mask[c/64] |= 1 << (c % 64)
		}
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	_, _, errno := syscall.RawSyscall(syscall.SYS_SCHED_SETAFFINITY, 0, unsafe.Sizeof(mask), uintptr(unsafe.Pointer(&mask[0])))
	if errno != 0 {
		return errno
	}
	return nil
}

// narrowedThreads lists the process's threads whose CPUs are not want,
// as "tid: list".
func narrowedThreads(want string) ([]string, error) {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil, err
	}
	var narrow []string
	for _, task := range tasks {
		got, err := cpusAllowed("/proc/self/task/" + task.Name() + "/status")
		if errors.Is(err, os.ErrNotExist) {
			continue // the thread exited
		}
		if err != nil {
			return nil, err
		}
		if got != want {
			narrow = append(narrow, task.Name()+": "+got)
		}
	}
	return narrow, nil
}
