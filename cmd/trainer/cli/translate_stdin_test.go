package cli

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

// TestTranslateBoundsStandardInput: translate reads at most
// maxTranslateInput bytes of standard input; an input that never ends
// is refused instead of read until memory runs out.
func TestTranslateBoundsStandardInput(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a seq2seq model")
	}
	dir := filepath.Join(t.TempDir(), "s2s")
	if code, _, stderr := runCLI(t, "train", "--config", "seq2seq-toy", "--out", dir, "--set", "training.steps=2",
		"--set", "model.dim=8", "--set", "model.heads=2", "--set", "model.ff=16", "--set", "data.train_pairs=64",
		"--set", "data.valid_pairs=16", "--set", "data.test_pairs=16", "--set", "training.batch=8",
		"--set", "optimizer.warmup_steps=1"); code != 0 {
		t.Fatalf("train: exit %d: %s", code, stderr)
	}
	var errOut bytes.Buffer
	root := NewRootCommand(&bytes.Buffer{}, &errOut)
	root.SetIn(endless{})
	code, _ := execute(root, []string{"translate", "--checkpoint", dir})
	if code != 2 || !strings.Contains(errOut.String(), "standard input: more than 16 MiB") {
		t.Errorf("translate of an endless input: exit %d, stderr %q; want 2 and the bound", code, errOut.String())
	}
}

// endless is a reader that never ends, as /dev/zero.
type endless struct{}

func (endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'a'
	}
	return len(p), nil
}
