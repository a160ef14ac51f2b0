package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// engFraDir is the shared English–French corpus beside the repository
// (CC BY 2.0 FR, see its README); it is never copied into the repository.
const engFraDir = "../../../../shared/data/eng-fra"

// TestEngFraLossFalls trains a tiny Transformer on the real English–French
// pairs for a few dozen steps and checks that the training loss falls.
func TestEngFraLossFalls(t *testing.T) {
	if _, err := os.Stat(filepath.Join(engFraDir, "simple.train.tsv")); err != nil {
		t.Skipf("English–French data not found at %s: %v", engFraDir, err)
	}
	dir := filepath.Join(t.TempDir(), "run")
	code, stdout, stderr := runCLI(t, "train", "--config", "seq2seq-tsv", "--out", dir,
		"--set", "data.train_file="+filepath.Join(engFraDir, "simple.train.tsv"),
		"--set", "data.valid_file="+filepath.Join(engFraDir, "simple.valid.tsv"),
		"--set", "data.test_file="+filepath.Join(engFraDir, "simple.test.tsv"),
		"--set", "model.dim=16", "--set", "model.heads=2", "--set", "model.ff=32",
		"--set", "model.enc_layers=1", "--set", "model.dec_layers=1",
		"--set", "training.steps=60", "--set", "training.batch=16", "--set", "training.log_every=10",
		"--set", "training.eval_every=0", "--set", "optimizer.warmup_steps=10")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	m := readMetrics(t, dir)
	var losses []float64
	for _, line := range m {
		if v, ok := line["train_loss"]; ok {
			losses = append(losses, v)
		}
	}
	if len(losses) < 2 || !(losses[len(losses)-1] < losses[0]-0.5) {
		t.Fatalf("training loss did not fall: %v\n%s", losses, stdout)
	}
	if !strings.Contains(stdout, "valid_bleu") {
		t.Errorf("no validation BLEU:\n%s", stdout)
	}
}
