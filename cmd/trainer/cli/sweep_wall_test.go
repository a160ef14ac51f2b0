package cli

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/probformer/probformer/cmd/trainer/train"
)

// TestRunWallSec: a sweep variant's train time is its run's last logged
// wall_sec, which a resumed run carries over, not only the resumed
// session's time (once 0 s for a run that had finished before a signal);
// a run that logged none keeps the session's time.
func TestRunWallSec(t *testing.T) {
	dir := t.TempDir()
	if got := runWallSec(dir, 3); got != 3 {
		t.Errorf("no metrics: %v, want the session's 3", got)
	}
	lines := `{"step":10,"train_loss":1}` + "\n" + `{"step":100,"wall_sec":42.5,"valid_mse":1}` + "\n" + `{"step":50,"wall_sec":20,"valid_mse":2}` + "\n"
	if err := os.WriteFile(filepath.Join(dir, train.MetricsFile), []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := runWallSec(dir, 0); got != 42.5 {
		t.Errorf("resumed run: %v, want the last step's wall_sec 42.5", got)
	}
	if got := runWallSec(dir, 60); got != 60 {
		t.Errorf("a session longer than the logged time: %v, want 60", got)
	}
}
