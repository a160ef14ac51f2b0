package cli

import (
	"bytes"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/probformer/probformer/cmd/trainer/train"
	"github.com/probformer/probformer/graph/ckpt"
)

// TestEditedCheckpointConfig: a checkpoint whose stored config was edited
// to a width it does not hold (its checksum made again, as anyone can)
// is refused by eval and by export --format pytorch with the field, exit
// 2, before the model is built; before, both died with Go's "out of
// memory" trace.
func TestEditedCheckpointConfig(t *testing.T) {
	run := tinyRun(t)
	ck, err := ckpt.ReadCheckpoint(filepath.Join(run, train.CheckpointName(5)))
	if err != nil {
		t.Fatal(err)
	}
	for _, dim := range []string{"65536", "1000000000"} {
		edited := *ck
		edited.Config = regexp.MustCompile(`(?m)^(    dim: )8$`).ReplaceAll(ck.Config, []byte("${1}"+dim))
		if bytes.Equal(edited.Config, ck.Config) {
			t.Fatalf("no model.dim line in the config:\n%s", ck.Config)
		}
		path := filepath.Join(t.TempDir(), "edited.ckpt")
		if err := ckpt.WriteCheckpoint(path, &edited); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{
			{"eval", "--checkpoint", path},
			{"export", "--checkpoint", path, "--format", "pytorch", "--out", filepath.Join(t.TempDir(), "px")},
		} {
			code, _, stderr := runCLI(t, args...)
			if code != 2 || !strings.Contains(stderr, "model.dim = "+dim) {
				t.Errorf("%s with model.dim %s: exit %d, stderr %q; want 2 naming model.dim", args[0], dim, code, stderr)
			}
		}
	}
}
