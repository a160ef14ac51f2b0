//go:build unix

package datasets

import (
	"path/filepath"
	"syscall"
	"testing"
)

// TestLoadParallelTSVRefusesFIFO: a named pipe is refused with its name,
// not waited on for a writer.
func TestLoadParallelTSVRefusesFIFO(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pipe.tsv")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	expectRefusedSoon(t, path, "not a regular file but a named pipe (FIFO)")
}
