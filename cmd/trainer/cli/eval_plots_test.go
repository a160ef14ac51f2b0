package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEvalPlotsDirectory: a --plots that is not a directory is refused
// before the evaluation runs, with exit 2; before, it failed with exit 1
// after the whole report.
func TestEvalPlotsDirectory(t *testing.T) {
	run := tinyRun(t)
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, plots := range []string{file, "/dev/null", filepath.Join(t.TempDir(), "missing", "dir")} {
		code, stdout, stderr := runCLI(t, "eval", "--checkpoint", run, "--plots", plots)
		if code != 2 || stdout != "" || !strings.Contains(stderr, "--plots "+plots) {
			t.Errorf("eval --plots %s: exit %d, stdout %d bytes, stderr %q; want 2 before any report", plots, code, len(stdout), stderr)
		}
	}
}
