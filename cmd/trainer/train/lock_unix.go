//go:build unix

package train

import (
	"errors"
	"os"
	"syscall"
)

// openLockFile opens (creating) a run directory's lock file; a link is
// refused, so that the lock cannot be pointed at another file.
func openLockFile(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o644)
}

// tryLock takes f's exclusive flock without waiting; busy reports that
// another open file holds it.
func tryLock(f *os.File) (busy bool, err error) {
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case err == nil:
			return false, nil
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.EWOULDBLOCK):
			return true, nil
		}
		return false, err
	}
}

// unlock releases f's flock (closing f would too).
func unlock(f *os.File) { syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }
