package configs_test

import (
	"os"
	"path/filepath"
	"testing"

	_ "github.com/probformer/probformer/cmd/trainer/tasks"
	"github.com/probformer/probformer/configs"
)

// TestPresetYAMLUnchanged: every preset, loaded, writes the YAML it wrote
// before each task owned its config sections (testdata/yaml, written by
// commit 0635119's code), byte for byte: run directories' config.yaml,
// checkpoints and sweeps' results compare configs by these bytes.
func TestPresetYAMLUnchanged(t *testing.T) {
	for _, name := range configs.Presets() {
		var sets []string
		if name == "seq2seq-tsv" { // the files the golden file was written with
			sets = []string{"data.train_file=a.tsv", "data.valid_file=b.tsv", "data.test_file=c.tsv"}
		}
		cfg, err := configs.Load(name, sets)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		want, err := os.ReadFile(filepath.Join("testdata", "yaml", name+".yaml"))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := cfg.YAML(); string(got) != string(want) {
			t.Errorf("%s: YAML changed:\n%s\nwant:\n%s", name, got, want)
		}
		// The old YAML, as stored in checkpoints, reads back to the same
		// config.
		back, err := configs.Parse(want)
		if err != nil {
			t.Fatalf("%s: stored YAML: %v", name, err)
		}
		if err := back.Validate(); err != nil {
			t.Errorf("%s: stored YAML: %v", name, err)
		}
		if string(back.YAML()) != string(want) {
			t.Errorf("%s: stored YAML does not round-trip", name)
		}
	}
}
