package configs_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/probformer/probformer/cmd/trainer/tasks"
	"github.com/probformer/probformer/configs"
)

// loadPreset loads a preset, with the files the golden files were
// written with for seq2seq-tsv, whose files are the user's.
func loadPreset(t *testing.T, name string) *configs.Config {
	t.Helper()
	var sets []string
	if name == "seq2seq-tsv" || name == "bert-pairs-tsv" || name == "bert-pretrain-tsv" {
		sets = []string{"data.train_file=a.tsv", "data.valid_file=b.tsv", "data.test_file=c.tsv"}
	}
	cfg, err := configs.Load(name, sets)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return cfg
}

// TestPresetYAML: every preset, loaded, writes the YAML of
// testdata/config byte for byte (run directories' config.yaml,
// checkpoints and sweeps' results compare configs by these bytes): its
// task's keys and the shared ones, and none of the other tasks' keys
// that configs were written with before each task owned its sections
// (testdata/yaml, written by commit 0635119's code). Such an old config,
// as stored in checkpoints, still reads, validates and is the same
// config.
func TestPresetYAML(t *testing.T) {
	for _, name := range configs.Presets() {
		cfg := loadPreset(t, name)
		want, err := os.ReadFile(filepath.Join("testdata", "config", name+".yaml"))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := cfg.YAML(); string(got) != string(want) {
			t.Errorf("%s: YAML changed:\n%s\nwant:\n%s", name, got, want)
		}
		for _, stored := range []string{"config", "yaml"} {
			text, err := os.ReadFile(filepath.Join("testdata", stored, name+".yaml"))
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			back, err := configs.Parse(text)
			if err != nil {
				t.Fatalf("%s: stored YAML (testdata/%s): %v", name, stored, err)
			}
			if err := back.Validate(); err != nil {
				t.Errorf("%s: stored YAML (testdata/%s): %v", name, stored, err)
			}
			if string(back.YAML()) != string(want) {
				t.Errorf("%s: stored YAML (testdata/%s) reads as another config:\n%s", name, stored, back.YAML())
			}
		}
	}
}

// TestYAMLHasTaskKeysOnly: a maxnorm run's config lists no key of the
// other tasks (it listed train_file: "", image_size: 0, ff: 0, …), every
// key of its preset is in it, and a retired key that is set, which
// Validate refuses, is still written, so that the YAML is the config.
func TestYAMLHasTaskKeysOnly(t *testing.T) {
	cfg := loadPreset(t, "maxnorm")
	text := string(cfg.YAML())
	for _, other := range []string{"train_file", "image_size", "mask_prob", "sampling", "ff", "enc_layers", "pre_ln", "tie_output"} {
		if strings.Contains(text, " "+other+":") {
			t.Errorf("maxnorm's YAML lists %s:\n%s", other, text)
		}
	}
	preset, _ := configs.PresetYAML("maxnorm")
	for _, line := range strings.Split(string(preset), "\n") {
		key, _, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && !strings.HasPrefix(key, "#") && !strings.Contains(text, key+":") {
			t.Errorf("maxnorm's YAML lacks the preset's key %s", key)
		}
	}

	cfg.Model.(*tasks.MaxNormModel).Attention.Kind = "em"
	if err := cfg.Set("model.ff=32"); err != nil {
		t.Fatal(err)
	}
	back, err := configs.Parse(cfg.YAML())
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := back.Get("model.ff"); v != 32 {
		t.Errorf("a retired key that is set does not round-trip: model.ff = %v", v)
	}
	if err := back.Validate(); err == nil || !strings.Contains(err.Error(), "model.ff = 32: want it unset") {
		t.Errorf("Validate: %v", err)
	}
}

// TestPresetDescriptions: every preset has a one-line description, and
// only presets have one; the presets are listed in alphabetical order.
func TestPresetDescriptions(t *testing.T) {
	names := configs.Presets()
	if !slices.IsSorted(names) {
		t.Errorf("presets not sorted: %v", names)
	}
	for _, name := range names {
		d := configs.PresetDescription(name)
		if d == "" || strings.ContainsAny(d, "\n\t") || len([]rune(d)) > 100 {
			t.Errorf("%s: description %q, want one line of at most 100 characters", name, d)
		}
	}
	if d := configs.PresetDescription("maxnrom"); d != "" {
		t.Errorf("a preset that does not exist has a description %q", d)
	}
}
