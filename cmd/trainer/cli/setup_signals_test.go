package cli

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/probformer/probformer/cmd/trainer/train"
)

// slowSetup makes the maxnorm model's build take seconds (about 6 s for
// 100 blocks on a 2-core machine; 3000 blocks would take minutes and
// tens of GB): a signal 200 ms in arrives during set-up.
var slowSetup = []string{"--set", "model.blocks=100"}

// TestSignalDuringSetupExits: SIGTERM or Ctrl-C while the model is still
// being built ends the process within a second, with status 143 or 130
// and one line saying nothing was trained; no checkpoint is written.
func TestSignalDuringSetupExits(t *testing.T) {
	t.Parallel() // waits on its own processes
	for _, c := range []struct {
		sig  syscall.Signal
		name string
		code int
	}{{syscall.SIGTERM, "SIGTERM", 143}, {syscall.SIGINT, "SIGINT", 130}} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "run")
			cmd, out := startTrainer(t, append([]string{"train", "--out", dir, "--progress", "lines"}, slowSetup...)...)
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			t.Cleanup(func() {
				cmd.Process.Kill()
				<-exited
			})
			// 200 ms in, and not before the trainer listens for signals: it
			// does before it locks the run directory.
			time.Sleep(200 * time.Millisecond)
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				if _, err := os.Stat(filepath.Join(dir, train.LockFile)); err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("no lock file 30 s in:\n%s", out)
				}
			}
			if err := cmd.Process.Signal(c.sig); err != nil {
				t.Fatal(err)
			}
			sent := time.Now()
			select {
			case <-exited:
				exited <- nil // for the cleanup
			case <-time.After(30 * time.Second):
				t.Fatalf("still running 30 s after %s:\n%s", c.name, out)
			}
			if took := time.Since(sent); took > time.Second {
				t.Errorf("the process ended %v after %s, want within a second", took, c.name)
			}
			if code := cmd.ProcessState.ExitCode(); code != c.code {
				t.Errorf("exit %d after %s, want %d:\n%s", code, c.name, c.code, out)
			}
			want := "trainer: interrupted (" + c.name + ") during set-up; nothing was trained"
			if got := strings.TrimSpace(out.String()); got != want {
				t.Errorf("output %q, want the one line %q", got, want)
			}
			if steps, _ := train.StepCheckpoints(dir); len(steps) > 0 {
				t.Errorf("checkpoints written: %v", steps)
			}
			entries, _ := os.ReadDir(dir)
			for _, e := range entries {
				if strings.Contains(e.Name(), ".tmp-") {
					t.Errorf("temporary file %s left", e.Name())
				}
			}
		})
	}
}
