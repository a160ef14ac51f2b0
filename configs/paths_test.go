package configs_test

import (
	"github.com/probformer/probformer/cmd/trainer/tasks"
	"github.com/probformer/probformer/configs"
	"os"
	"path/filepath"
	"testing"
)

// TestLoadResolvesDataPathsAgainstConfigDir: relative data paths in a
// config file are relative to the file's directory, absolute ones stay,
// and paths given with --set stay relative to the working directory.
func TestLoadResolvesDataPathsAgainstConfigDir(t *testing.T) {
	preset, err := configs.PresetYAML("seq2seq-tsv")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "cfgdir")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	abs := filepath.Join(t.TempDir(), "abs.test.tsv")
	cases := []struct {
		name                   string
		train, valid, test     string // as written in the file
		sets                   []string
		wantTrain, wantV, want string
	}{
		{"relative", "data/a.tsv", "./b.tsv", "../c.tsv", nil,
			filepath.Join(dir, "data/a.tsv"), filepath.Join(dir, "b.tsv"), filepath.Join(filepath.Dir(dir), "c.tsv")},
		{"absolute stays", "a.tsv", "b.tsv", abs, nil,
			filepath.Join(dir, "a.tsv"), filepath.Join(dir, "b.tsv"), abs},
		{"--set stays relative to the working directory", "a.tsv", "b.tsv", "c.tsv", []string{"data.test_file=cli/c.tsv"},
			filepath.Join(dir, "a.tsv"), filepath.Join(dir, "b.tsv"), "cli/c.tsv"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, "run.yaml")
			text := string(preset) + "\n"
			cfg, err := configs.Parse([]byte(text))
			if err != nil {
				t.Fatal(err)
			}
			d := cfg.Data.(*tasks.Seq2SeqData)
			d.TrainFile, d.ValidFile, d.TestFile = c.train, c.valid, c.test
			if err := os.WriteFile(path, cfg.YAML(), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := configs.Load(path, c.sets)
			if err != nil {
				t.Fatal(err)
			}
			if d := got.Data.(*tasks.Seq2SeqData); d.TrainFile != c.wantTrain || d.ValidFile != c.wantV || d.TestFile != c.want {
				t.Errorf("paths %q %q %q, want %q %q %q", d.TrainFile, d.ValidFile, d.TestFile, c.wantTrain, c.wantV, c.want)
			}
		})
	}
}

// TestLoadPresetPathsStayAsGiven: a preset has no directory; its data
// paths from --set are used as given.
func TestLoadPresetPathsStayAsGiven(t *testing.T) {
	cfg, err := configs.Load("seq2seq-tsv", []string{"data.train_file=x/a.tsv", "data.valid_file=b.tsv", "data.test_file=c.tsv"})
	if err != nil {
		t.Fatal(err)
	}
	if d := cfg.Data.(*tasks.Seq2SeqData); d.TrainFile != "x/a.tsv" || d.ValidFile != "b.tsv" || d.TestFile != "c.tsv" {
		t.Errorf("preset paths changed: %+v", d)
	}
}
