package configs_test

import (
	"github.com/probformer/probformer/cmd/trainer/tasks"
	"github.com/probformer/probformer/configs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPresetsLoadAndValidate(t *testing.T) {
	if len(configs.Presets()) < 2 {
		t.Fatalf("presets %v", configs.Presets())
	}
	for _, name := range configs.Presets() {
		var sets []string
		if name == "seq2seq-tsv" || name == "bert-pairs-tsv" || name == "bert-pretrain-tsv" { // its files are the user's
			sets = []string{"data.train_file=a.tsv", "data.valid_file=b.tsv", "data.test_file=c.tsv"}
		}
		cfg, err := configs.Load(name, sets)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if cfg.Name != name {
			t.Errorf("name %q, want %q", cfg.Name, name)
		}
	}
	paper, _ := configs.Load("maxregression-paper", nil)
	m := paper.Model.(*tasks.MaxNormModel)
	if m.Encoder != "sab" || m.Blocks != 2 || m.Dim != 64 || m.Heads != 4 || m.Seeds != 1 ||
		paper.Optimizer.LR != 1e-3 || paper.Training.Batch != 128 || paper.Training.Steps != 20000 || paper.Training.Loss != "mae" {
		t.Fatalf("maxregression-paper is not the paper's setup: %+v", paper)
	}
}

func writeConfig(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "run.yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoadErrors(t *testing.T) {
	base, _ := configs.PresetYAML("maxnorm")
	text := string(base)
	cases := []struct {
		name string
		yaml string
		sets []string
		want []string // substrings of the one-line error
	}{
		{"unknown key", strings.Replace(text, "  lr: 1.0e-3", "  lrate: 1.0e-3", 1), nil,
			[]string{"run.yaml", "line 28", `unknown key "lrate" in optimizer`}},
		{"unknown top-level key", text + "epochs: 3\n", nil, []string{"run.yaml", `unknown key "epochs" in the top level`}},
		{"wrong type", strings.Replace(text, "steps: 3000", "steps: many", 1), nil,
			[]string{"run.yaml", "line 38", `"many"`, "integer"}},
		{"zero steps", strings.Replace(text, "steps: 3000", "steps: 0", 1), nil, []string{"training.steps = 0"}},
		{"negative steps", text, []string{"training.steps=-5"}, []string{"training.steps = -5"}},
		{"bad heads", text, []string{"model.heads=5"}, []string{"model.heads = 5", "divisor"}},
		{"unknown set key", text, []string{"training.stepz=5"}, []string{"--set training.stepz", `unknown key "stepz" in training`}},
		{"set wrong type", text, []string{"training.batch=big"}, []string{"--set training.batch=big", "integer"}},
		{"set a section", text, []string{"model=3"}, []string{"model is a section"}},
		{"set without value", text, []string{"training.steps"}, []string{"key=value"}},
		{"sampling outside seq2seq", text, []string{"data.sampling=epochs"}, []string{`data.sampling = "epochs"`, "task maxnorm has no such key"}},
		{"final norm outside seq2seq", text, []string{"model.final_norm=true"}, []string{"model.final_norm = true"}},
		{"attention dropout with EM", text, []string{"model.attention.kind=em", "model.attention.dropout=0.1"}, []string{"model.attention.dropout = 0.1", "scaled_dot"}},
		{"missing field", strings.Replace(text, "  loss: mse\n", "", 1), nil, []string{"training.loss = (missing)"}},
		{"two documents", text + "---\ntask: maxnorm\n", nil, []string{"second YAML document"}},
		{"bad yaml", "task: [maxnorm\n", nil, []string{"run.yaml", "line"}},
		{"empty", "", nil, []string{"empty config"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := configs.Load(writeConfig(t, c.yaml), c.sets)
			if err == nil {
				t.Fatal("accepted")
			}
			msg := err.Error()
			if strings.Contains(msg, "\n") {
				t.Errorf("error spans lines: %q", msg)
			}
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not mention %q", msg, w)
				}
			}
		})
	}
}

// TestSeq2SeqSampling: data.sampling takes with_replacement or epochs.
func TestSeq2SeqSampling(t *testing.T) {
	for _, c := range []struct {
		value string
		ok    bool
	}{{"with_replacement", true}, {"epochs", true}, {"epoch", false}} {
		_, err := configs.Load("seq2seq-toy", []string{"data.sampling=" + c.value})
		if (err == nil) != c.ok {
			t.Errorf("data.sampling=%q: error %v, want ok = %v", c.value, err, c.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "with_replacement or epochs") {
			t.Errorf("data.sampling=%q: error %q does not list the choices", c.value, err)
		}
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := configs.Load("no/such/run.yaml", nil)
	if err == nil || !strings.Contains(err.Error(), "no/such/run.yaml") {
		t.Fatalf("error %v does not name the path", err)
	}
	_, err = configs.Load("maxnrom", nil)
	if err == nil || !strings.Contains(err.Error(), "maxnorm") {
		t.Fatalf("error %v does not list the presets", err)
	}
}

func TestSetOverrides(t *testing.T) {
	cfg, err := configs.Load("maxnorm", []string{"training.steps=10", "optimizer.lr=0.01", "model.layer_norm=false", "data.kind=max-regression", "data.dim=1", "model.attention.kind=softmax"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Training.Steps != 10 || cfg.Optimizer.LR != 0.01 || cfg.Model.(*tasks.MaxNormModel).LayerNorm || cfg.Data.(*tasks.MaxNormData).Kind != "max-regression" {
		t.Fatalf("overrides not applied: %+v", cfg)
	}
}

func TestYAMLRoundTrip(t *testing.T) {
	cfg, _ := configs.Load("maxregression-paper", []string{"seed=42"})
	back, err := configs.Parse(cfg.YAML())
	if err != nil {
		t.Fatal(err)
	}
	back.Name = cfg.Name
	if string(back.YAML()) != string(cfg.YAML()) || back.Seed != 42 {
		t.Fatalf("round trip changed the config:\n%s\nvs\n%s", back.YAML(), cfg.YAML())
	}
}
