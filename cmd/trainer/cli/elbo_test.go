package cli

import (
	"path/filepath"
	"reflect"
	"testing"

	"github.com/probformer/probformer/cmd/trainer/train"
	"github.com/probformer/probformer/graph/ckpt"
)

// TestHeadDiversityZeroChangesNothing: a run with λ = 0 is the run without
// the regulariser, to the bit: same losses, metrics and weights.
func TestHeadDiversityZeroChangesNothing(t *testing.T) {
	dir := t.TempDir()
	plain, zero := filepath.Join(dir, "plain"), filepath.Join(dir, "zero")
	base := append([]string{"train", "--set", "training.steps=15"}, tiny...)
	if code, _, stderr := runCLI(t, append(base, "--out", plain)...); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if code, _, stderr := runCLI(t, append(base, "--out", zero, "--set", "model.attention.head_diversity=0")...); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	a, b := readMetrics(t, plain), readMetrics(t, zero)
	for _, l := range b {
		delete(l, "steps_per_sec")
	}
	for _, l := range a {
		delete(l, "steps_per_sec")
	}
	if !reflect.DeepEqual(a, b) {
		t.Errorf("metrics differ:\n%v\n%v", a, b)
	}
	pa, err := ckpt.ReadCheckpoint(filepath.Join(plain, train.CheckpointName(15)))
	if err != nil {
		t.Fatal(err)
	}
	pb, err := ckpt.ReadCheckpoint(filepath.Join(zero, train.CheckpointName(15)))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(pa.Params, pb.Params) {
		t.Error("weights differ")
	}
}
