package cli

import (
	"os"
	"testing"

	"github.com/probformer/probformer/cmd/trainer/train"
)

// TestResumeLocksOnlyRunDirectories: --resume of a device is refused
// before a lock file is made beside it (a run goes on in the directory of
// the checkpoint file it resumes, which it locks; /dev is none).
func TestResumeLocksOnlyRunDirectories(t *testing.T) {
	if code, _, stderr := runCLI(t, "train", "--resume", "/dev/null"); code != 2 {
		t.Errorf("--resume /dev/null: exit %d: %s", code, stderr)
	}
	if _, err := os.Lstat("/dev/" + train.LockFile); err == nil {
		t.Errorf("--resume /dev/null made /dev/%s", train.LockFile)
	}
}
