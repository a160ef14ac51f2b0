package cli

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestConfigFromNamedPipe: a named pipe given as --config is refused at
// once; before, train and sweep waited for a writer for ever.
func TestConfigFromNamedPipe(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatalf("mkfifo: %v", err)
	}
	for _, args := range [][]string{
		{"train", "--config", fifo, "--out", filepath.Join(dir, "r")},
		{"sweep", "--config", fifo, "--out", filepath.Join(dir, "s"), "--variant", "a"},
		{"train", "--config", "/dev/zero", "--out", filepath.Join(dir, "z")},
	} {
		code, _, stderr, _ := runWithin(t, 20*time.Second, args...)
		if code != 2 || !strings.Contains(stderr, args[2]) || !strings.Contains(stderr, "not a regular file") {
			t.Errorf("%q: exit %d, stderr %q; want 2 naming the file as not a regular file", args, code, stderr)
		}
	}
}
