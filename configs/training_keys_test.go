package configs_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/probformer/probformer/configs"
)

// TestAccumulateAndEarlyStopKeys: training.accumulate and
// training.early_stop load from a file and from --set, survive the YAML
// a checkpoint stores, are left out of it when unset (configs written
// before them read the same), and are checked: accumulate must divide
// the batch, the patience and min_delta must not be negative.
func TestAccumulateAndEarlyStopKeys(t *testing.T) {
	plain, err := configs.Load("maxnorm", nil)
	if err != nil {
		t.Fatal(err)
	}
	if tr := plain.Training; tr.Accumulate != 0 || tr.EarlyStop != (configs.EarlyStop{}) {
		t.Fatalf("preset maxnorm: accumulate %d, early_stop %+v, want both off", tr.Accumulate, tr.EarlyStop)
	}
	if y := string(plain.YAML()); strings.Contains(y, "accumulate") || strings.Contains(y, "early_stop") {
		t.Errorf("unset keys are written:\n%s", y)
	}

	cfg, err := configs.Load("maxnorm", []string{"training.batch=64", "training.accumulate=4",
		"training.early_stop.patience=5", "training.early_stop.min_delta=0.01"})
	if err != nil {
		t.Fatal(err)
	}
	want := configs.EarlyStop{Patience: 5, MinDelta: 0.01}
	if tr := cfg.Training; tr.Accumulate != 4 || tr.EarlyStop != want {
		t.Fatalf("--set: accumulate %d, early_stop %+v", tr.Accumulate, tr.EarlyStop)
	}
	back, err := configs.Parse(cfg.YAML())
	if err != nil {
		t.Fatal(err)
	}
	if tr := back.Training; tr.Accumulate != 4 || tr.EarlyStop != want {
		t.Errorf("YAML round trip: accumulate %d, early_stop %+v\n%s", tr.Accumulate, tr.EarlyStop, cfg.YAML())
	}

	// The flow style of the issue, in a file.
	dir := t.TempDir()
	file := filepath.Join(dir, "run.yaml")
	text := strings.Replace(string(plain.YAML()), "training:\n", "training:\n    early_stop: {patience: 3, min_delta: 0}\n    accumulate: 2\n", 1)
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	fromFile, err := configs.Load(file, nil)
	if err != nil {
		t.Fatal(err)
	}
	if tr := fromFile.Training; tr.Accumulate != 2 || tr.EarlyStop.Patience != 3 {
		t.Errorf("file: accumulate %d, early_stop %+v", tr.Accumulate, tr.EarlyStop)
	}

	for _, c := range []struct {
		sets []string
		want string
	}{
		{[]string{"training.batch=64", "training.accumulate=3"}, "training.accumulate = 3 (--set): want a divisor of training.batch = 64"},
		{[]string{"training.accumulate=-1"}, "training.accumulate = -1 (--set): want an integer in [0,"},
		{[]string{"training.early_stop.patience=-2"}, "training.early_stop.patience = -2 (--set): want an integer ≥ 0"},
		{[]string{"training.early_stop.min_delta=-0.5"}, "training.early_stop.min_delta = -0.5 (--set): want a finite number ≥ 0"},
	} {
		_, err := configs.Load("maxnorm", c.sets)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.sets, err, c.want)
		}
	}
}
