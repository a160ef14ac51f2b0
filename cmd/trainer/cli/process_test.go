package cli

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// asTrainerEnv, set to 1 in a child's environment, makes the test binary
// run as the trainer itself (TestMain calls main). Tests that must signal
// or kill a real process start the test binary that way: it is the
// trainer's code, already built, so they pay for no `go build` of their
// own.
const asTrainerEnv = "PROBFORMER_TEST_AS_TRAINER"

// TestMain runs the binary as the trainer when asTrainerEnv asks for it;
// otherwise it runs the tests, then removes the MPI binary they built.
func TestMain(m *testing.M) {
	if os.Getenv(asTrainerEnv) == "1" {
		Main()
		return
	}
	flag.Parse()
	early := !testing.Short() && haveMPI() == "" && wantsMPI()
	if early {
		go buildMPI()
	}
	code := m.Run()
	if early {
		buildMPI() // waits for the build, so its folder is complete to remove
	}
	if mpiBin != "" {
		os.RemoveAll(filepath.Dir(mpiBin))
	}
	os.Exit(code)
}

// wantsMPI says whether -test.run can select an MPI test.
func wantsMPI() bool {
	pattern := flag.Lookup("test.run").Value.String()
	return pattern == "" || strings.Contains(pattern, "MPI")
}

// trainerCommand returns the command that runs `trainer args…` as its own
// process (this test binary, as the trainer).
func trainerCommand(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	if testing.Short() {
		t.Skip("runs the trainer as a process; skipped with -short")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, args...)
	cmd.Env = append(os.Environ(), asTrainerEnv+"=1")
	return cmd
}

// startTrainer starts `trainer args…` as a process whose combined output
// goes to the returned buffer.
func startTrainer(t *testing.T, args ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	var out bytes.Buffer
	cmd := trainerCommand(t, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, &out
}
