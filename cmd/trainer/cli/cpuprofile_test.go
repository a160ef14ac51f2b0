package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCPUProfileTarget: --cpuprofile refuses a device and a missing
// directory before the command runs, and writes the profile (atomically)
// when it ends.
func TestCPUProfileTarget(t *testing.T) {
	dir := t.TempDir()
	for _, path := range []string{"/dev/full", filepath.Join(dir, "missing", "cpu.prof")} {
		code, stdout, stderr := runCLI(t, "--cpuprofile", path, "presets")
		if code != 2 || stdout != "" || !strings.Contains(stderr, path) {
			t.Errorf("--cpuprofile %s: exit %d, stdout %d bytes, stderr %q; want 2 before the command, naming the path", path, code, len(stdout), stderr)
		}
	}
	path := filepath.Join(dir, "cpu.prof")
	if code, _, stderr := runCLI(t, "--cpuprofile", path, "presets"); code != 0 {
		t.Fatalf("--cpuprofile %s presets: exit %d: %s", path, code, stderr)
	}
	if data, err := os.ReadFile(path); err != nil || len(data) == 0 {
		t.Errorf("profile %s: %d bytes, %v; want a profile", path, len(data), err)
	}
}
