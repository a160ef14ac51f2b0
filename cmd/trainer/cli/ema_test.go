package cli

import (
	"bytes"
	"path/filepath"
	"slices"
	"testing"

	"github.com/probformer/probformer/cmd/trainer/train"
	"github.com/probformer/probformer/graph/ckpt"
)

// TestWeightAverageRun: with training.ema_decay, a run resumed halfway
// ends with the same weights and average, to the bit, as a straight one,
// and eval scores the averaged weights: the best checkpoint's validation
// score comes back when the checkpoint is loaded.
func TestWeightAverageRun(t *testing.T) {
	straight, _, a, b := straightAndResumed(t, tiny, "--set", "training.ema_decay=0.9")
	if len(a.Extra[train.AverageExtra]) == 0 || !bytes.Equal(a.Extra[train.AverageExtra], b.Extra[train.AverageExtra]) {
		t.Error("the weight average differs after resume")
	}
	for i := range a.Params {
		if !slices.Equal(a.Params[i].Values, b.Params[i].Values) {
			t.Fatalf("%s differs after resume", a.Params[i].Name)
		}
	}
	best, err := ckpt.ReadCheckpoint(filepath.Join(straight, train.BestCheckpoint))
	if err != nil {
		t.Fatal(err)
	}
	tr, _, err := loadForEval(straight)
	if err != nil {
		t.Fatal(err)
	}
	m, err := tr.task.Evaluate(tr.params, tr.eval, "valid")
	if err != nil {
		t.Fatal(err)
	}
	if m["valid_mse"] != best.Metrics["valid_mse"] {
		t.Errorf("loaded best checkpoint scores %v, training recorded %v", m["valid_mse"], best.Metrics["valid_mse"])
	}
	// The raw weights of the same checkpoint score differently: training
	// did evaluate the average.
	if err := best.Restore(tr.params); err != nil {
		t.Fatal(err)
	}
	m, err = tr.task.Evaluate(tr.params, tr.eval, "valid")
	if err != nil {
		t.Fatal(err)
	}
	if m["valid_mse"] == best.Metrics["valid_mse"] {
		t.Errorf("the raw weights score %v too: the average is not what was evaluated", m["valid_mse"])
	}
}
