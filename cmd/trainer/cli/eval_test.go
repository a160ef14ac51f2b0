package cli

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/probformer/probformer/cmd/trainer/train"
	"github.com/probformer/probformer/graph/ckpt"
)

// TestMaxNormEMTrainsAndReportsPriors: the maxnorm-em preset, shrunk,
// trains (its loss falls) and `trainer eval` prints the priors of every
// EM layer and head.
func TestMaxNormEMTrainsAndReportsPriors(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	args := append([]string{"train", "--config", "maxnorm-em", "--out", dir, "--set", "training.steps=60"}, tiny...)
	if code, _, stderr := runCLI(t, args...); code != 0 {
		t.Fatalf("train exit %d: %s", code, stderr)
	}
	var first, last float64
	for _, m := range readMetrics(t, dir) {
		if v, ok := m["train_loss"]; ok {
			if first == 0 {
				first = v
			}
			last = v
		}
	}
	if !(last < first) {
		t.Errorf("training loss did not fall: %v → %v", first, last)
	}
	code, stdout, stderr := runCLI(t, "eval", "--checkpoint", dir)
	if code != 0 {
		t.Fatalf("eval exit %d: %s", code, stderr)
	}
	ck, err := ckpt.ReadCheckpoint(filepath.Join(dir, train.BestCheckpoint))
	if err != nil {
		t.Fatal(err)
	}
	var layerNames []string
	for _, p := range ck.Params {
		if name, ok := strings.CutSuffix(p.Name, ".em.alpha0"); ok {
			layerNames = append(layerNames, name)
		}
	}
	if len(layerNames) < 2 {
		t.Fatalf("EM layers %v in the checkpoint", layerNames)
	}
	checkPriorsTable(t, stdout, layerNames, 2)
}
