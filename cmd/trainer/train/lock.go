package train

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// LockFile is the lock file of a run directory (LockRunDir). It stays in
// the directory after a run; only a live process's lock on it counts, and
// what it holds (the last writer's pid) is read only while that lock is
// held.
const LockFile = ".lock"

// LockedError is the error of LockRunDir when another process writes
// the run directory.
type LockedError struct {
	// Dir is the run directory.
	Dir string
	// PID is the process that holds its lock, or 0 if it could not be
	// read (its holder had not written it yet).
	PID int
}

func (e *LockedError) Error() string {
	holder := "another process"
	if e.PID > 0 {
		holder = fmt.Sprintf("another process (pid %d)", e.PID)
	}
	return fmt.Sprintf("run directory %s is in use by %s: a run directory has one writer", e.Dir, holder)
}

// heldLock is a run directory's lock held by this process, and how many
// holders within the process share it.
type heldLock struct {
	file  *os.File
	count int
}

// held are the run directories this process holds, by their absolute
// path with links resolved.
var held = struct {
	sync.Mutex
	dirs map[string]*heldLock
}{dirs: map[string]*heldLock{}}

// LockRunDir takes the writer's lock of the run directory dir, which must
// exist: an advisory lock (flock(2), exclusive and non-blocking) on
// dir/.lock, which records the holder's pid. A process that writes a run
// directory (a Loop's Run and Restore, `trainer train`, `--resume`, each
// run of a sweep) holds it, so that two writers never mix their
// checkpoints and metrics: the second is refused at once with a
// *LockedError that names the holder's pid. Readers (eval, export,
// inspect) take no lock.
//
// The lock is held until release is called, or until the process ends,
// however it ends: the kernel releases it. Within one process it is
// re-entrant (a program that holds it can run a Loop on the directory,
// which takes it too); release must be called once per successful call.
//
// On systems without flock (not Unix) it only counts holders within the
// process, and excludes no other process.
//
// The lock is advisory and lives on DIR/.lock: removing that file, or
// the directory, while a run holds it lets a second writer in, as with
// any flock; trainer never removes it.
func LockRunDir(dir string) (release func(), err error) {
	info, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("lock run directory: %w", err)
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("lock run directory: %s is not a directory", dir)
	}
	key, err := lockKey(dir)
	if err != nil {
		return nil, fmt.Errorf("lock run directory: %w", err)
	}
	held.Lock()
	defer held.Unlock()
	h := held.dirs[key]
	if h == nil {
		path := filepath.Join(dir, LockFile)
		f, err := openLockFile(path)
		if err != nil {
			return nil, fmt.Errorf("lock run directory %s: %w", dir, err)
		}
		busy, err := tryLock(f)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("lock run directory %s: %w", dir, err)
		}
		if busy {
			f.Close()
			return nil, &LockedError{Dir: dir, PID: holderPID(path)}
		}
		// The lock file may have been removed, or replaced, between the
		// open and the flock, by a holder's clean-up or a user: a lock on
		// a file no longer at the path excludes nobody.
		if !samePathFile(f, path) {
			unlock(f)
			f.Close()
			return nil, fmt.Errorf("lock run directory %s: %s was replaced while it was being locked; try again", dir, LockFile)
		}
		if err := recordPID(f); err != nil {
			unlock(f)
			f.Close()
			return nil, fmt.Errorf("lock run directory %s: %s: %w", dir, LockFile, err)
		}
		h = &heldLock{file: f}
		held.dirs[key] = h
	}
	h.count++
	var once sync.Once
	return func() {
		once.Do(func() {
			held.Lock()
			defer held.Unlock()
			if h.count--; h.count == 0 {
				delete(held.dirs, key)
				unlock(h.file)
				h.file.Close()
			}
		})
	}, nil
}

// lockKey is dir as held keys it: its absolute path, links resolved.
func lockKey(dir string) (string, error) {
	key, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	return filepath.EvalSymlinks(key)
}

// RunDirInUse returns a *LockedError if another process holds dir's lock
// (LockRunDir), and nil if none does or dir has no lock file. It writes
// nothing: the lock file is opened read-only, locked and unlocked at once,
// so that a command can tell a run in progress from a directory it
// refuses for what it holds, and leave that directory as it was.
func RunDirInUse(dir string) error {
	path := filepath.Join(dir, LockFile)
	if key, err := lockKey(dir); err == nil {
		held.Lock()
		mine := held.dirs[key] != nil
		held.Unlock()
		if mine {
			return nil // this process writes it
		}
	}
	info, err := os.Lstat(path)
	if err != nil || !info.Mode().IsRegular() {
		return nil
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil
	}
	defer f.Close()
	busy, err := tryLock(f)
	if err != nil {
		return nil
	}
	if busy {
		return &LockedError{Dir: dir, PID: holderPID(path)}
	}
	unlock(f)
	return nil
}

// samePathFile reports whether f is still the file at path.
func samePathFile(f *os.File, path string) bool {
	a, errA := f.Stat()
	b, errB := os.Lstat(path)
	return errA == nil && errB == nil && os.SameFile(a, b)
}

// recordPID replaces the lock file's content with this process's pid.
func recordPID(f *os.File) error {
	if err := f.Truncate(0); err != nil {
		return err
	}
	_, err := f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return err
}

// holderPID reads the pid that the lock file's holder recorded, waiting
// briefly for a holder that has just taken the lock to write it; 0 if
// there is none.
func holderPID(path string) int {
	for try := 0; try < 20; try++ {
		data, err := os.ReadFile(path)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return 0
		}
		if s := strings.TrimSpace(string(data)); strings.HasSuffix(string(data), "\n") {
			if pid, err := strconv.Atoi(s); err == nil && pid > 0 {
				return pid
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	return 0
}
