//go:build unix

package train_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/probformer/probformer/cmd/trainer/train"
	"github.com/probformer/probformer/graph"
)

// holdForeign locks dir/.lock through a file of its own, as another
// process would (flock locks of two open files exclude each other even
// within a process), with pid recorded; it returns the unlock.
func holdForeign(t *testing.T, dir string, pid int) func() {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, train.LockFile), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(strconv.Itoa(pid) + "\n"); err != nil {
		t.Fatal(err)
	}
	unlocked := false
	unlock := func() {
		if !unlocked {
			unlocked = true
			f.Close()
		}
	}
	t.Cleanup(unlock)
	return unlock
}

// TestLockRunDir: a directory another writer holds is refused at once,
// naming it and the holder's pid, and so are the stale-temp cleanup and
// the metrics truncation, which delete nothing; once it is free, the lock
// is taken, records this pid, is re-entrant within the process, and is
// free again after the last release.
func TestLockRunDir(t *testing.T) {
	dir := t.TempDir()
	temp := filepath.Join(dir, ".metrics.jsonl.tmp-123")
	os.WriteFile(temp, []byte("a live writer's"), 0o644)
	os.WriteFile(filepath.Join(dir, train.MetricsFile), []byte(`{"step":5}`+"\n"+`{"step":10}`+"\n"), 0o644)
	unlock := holdForeign(t, dir, 4242)

	start := time.Now()
	_, err := train.LockRunDir(dir)
	var locked *train.LockedError
	if !errors.As(err, &locked) || locked.PID != 4242 {
		t.Fatalf("LockRunDir of a held directory: %v, want a *LockedError naming pid 4242", err)
	}
	if msg := err.Error(); !strings.Contains(msg, dir) || !strings.Contains(msg, "pid 4242") {
		t.Errorf("error %q names neither the directory nor the pid", msg)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("refusal took %v", took)
	}
	if err := train.RemoveStaleTemps(dir); !errors.As(err, &locked) {
		t.Errorf("RemoveStaleTemps under another writer's lock: %v, want a *LockedError", err)
	}
	if _, err := os.Stat(temp); err != nil {
		t.Errorf("a live writer's temporary file was removed: %v", err)
	}
	if err := train.TruncateMetrics(dir, 5); !errors.As(err, &locked) {
		t.Errorf("TruncateMetrics under another writer's lock: %v, want a *LockedError", err)
	}

	unlock()
	release, err := train.LockRunDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(filepath.Join(dir, train.LockFile))
	if strings.TrimSpace(string(data)) != strconv.Itoa(os.Getpid()) {
		t.Errorf("lock file holds %q, want this pid %d", data, os.Getpid())
	}
	again, err := train.LockRunDir(dir) // re-entrant: the cleanup takes it too
	if err != nil {
		t.Fatalf("second lock in one process: %v", err)
	}
	if err := train.RemoveStaleTemps(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(temp); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stale temporary file left under the lock: %v", err)
	}
	again()
	f, _ := os.Open(filepath.Join(dir, train.LockFile))
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err == nil {
		t.Fatal("the lock was free while one holder had not released it")
	}
	release()
	release() // a second call is harmless
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatalf("the lock is still held after the last release: %v", err)
	}
}

// TestLoopRefusesLockedDir: a Loop's Run and Restore on a directory that
// another process writes fail with a *LockedError, and write nothing.
func TestLoopRefusesLockedDir(t *testing.T) {
	dir := t.TempDir()
	holdForeign(t, dir, 999999)
	l, err := train.New(setSum{}, train.Settings{Dir: dir, Steps: 10, Batch: 4, Seed: 1, DType: graph.Float64})
	if err != nil {
		t.Fatal(err)
	}
	var locked *train.LockedError
	if err := l.Run(context.Background()); !errors.As(err, &locked) {
		t.Fatalf("Run: %v, want a *LockedError", err)
	}
	os.WriteFile(filepath.Join(dir, train.MetricsFile), []byte(`{"step":1}`+"\n"), 0o644)
	ck, err := l.Checkpoint()
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Restore(ck); !errors.As(err, &locked) {
		t.Fatalf("Restore: %v, want a *LockedError", err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("the directory holds %d entries, want only the lock and metrics files", len(entries))
	}
}

// TestRunDirInUse: a directory whose lock another writer holds is
// reported with the holder's pid, and neither that nor a free or absent
// lock file changes the directory: the probe writes nothing.
func TestRunDirInUse(t *testing.T) {
	dir := t.TempDir()
	if err := train.RunDirInUse(dir); err != nil {
		t.Errorf("no lock file: %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("the probe of a directory without a lock made %d entries", len(entries))
	}
	unlock := holdForeign(t, dir, 4242)
	var locked *train.LockedError
	if err := train.RunDirInUse(dir); !errors.As(err, &locked) || locked.PID != 4242 {
		t.Errorf("held by pid 4242: %v", err)
	}
	unlock()
	if err := train.RunDirInUse(dir); err != nil {
		t.Errorf("free again: %v", err)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, train.LockFile)); string(data) != "4242\n" {
		t.Errorf("the lock file holds %q after the probes, want the holder's pid as it wrote it", data)
	}
	release, err := train.LockRunDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if err := train.RunDirInUse(dir); err != nil {
		t.Errorf("held by this process: %v", err)
	}
}
