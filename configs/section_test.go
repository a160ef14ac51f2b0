package configs_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/probformer/probformer/cmd/trainer/tasks"
	"github.com/probformer/probformer/configs"
	"github.com/probformer/probformer/layers"
)

// userData and userModel are the sections of a task defined outside
// probformer: its own keys, a file path among them, attention settings,
// and a nested section.
type userData struct {
	Dim    int    `yaml:"dim"`
	File   string `yaml:"file" config:"path"`
	Window struct {
		Size int `yaml:"size"`
	} `yaml:"window"`
}

type userModel struct {
	Width     int                    `yaml:"width"`
	Attention layers.AttentionConfig `yaml:"attention"`
}

func checkUser(c *configs.Config, d *userData, m *userModel) error {
	if err := c.Check(
		configs.Rule{OK: d.Dim > 0, Field: "data.dim", Want: "a positive integer"},
		configs.Rule{OK: d.Window.Size >= 0, Field: "data.window.size", Want: "≥ 0"},
		configs.Rule{OK: m.Width > 0, Field: "model.width", Want: "a positive integer"},
		configs.Rule{OK: c.Training.Loss == "mae", Field: "training.loss", Want: "mae for task section-test"},
	); err != nil {
		return err
	}
	return c.CheckAttention("model.attention", m.Attention)
}

const userConfig = `task: section-test
seed: 3
dtype: float64
data:
  dim: 3
  file: sets.bin
  window:
    size: 2
model:
  width: 16
  attention:
    kind: softmax
optimizer: {name: adam, lr: 1.0e-3, beta1: 0.9, beta2: 0.999, eps: 1.0e-8, schedule: constant}
training: {steps: 10, batch: 4, loss: mae, log_every: 5, keep_checkpoints: 1}
`

// TestRegisterTask: a task defined outside probformer owns its sections:
// a config of it decodes into its types, strictly, validates by its own
// rules after the shared ones, and overrides, Get, path resolution and
// the YAML round trip work on its keys; an unknown task's error lists the
// registered ones.
func TestRegisterTask(t *testing.T) {
	if err := configs.RegisterTask("section-test", checkUser); err != nil {
		t.Fatal(err)
	}
	if err := configs.RegisterTask("section-test", checkUser); err == nil {
		t.Error("a second registration of a name accepted")
	}
	if err := configs.RegisterTask("", checkUser); err == nil {
		t.Error("an empty name accepted")
	}
	if err := configs.RegisterTask[int, userModel]("section-int", nil); err == nil || !strings.Contains(err.Error(), "not a struct") {
		t.Errorf("an int section: %v", err)
	}
	type badTag struct {
		X int `yaml:"x,sideways"`
	}
	if err := configs.RegisterTask[badTag, userModel]("section-bad-tag", nil); err == nil || !strings.Contains(err.Error(), "sideways") {
		t.Errorf("a section with a bad yaml tag: %v", err)
	}

	dir := t.TempDir()
	path := filepath.Join(dir, "user.yaml")
	if err := os.WriteFile(path, []byte(userConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := configs.Load(path, []string{"data.window.size=5", "model.attention.kind=em"})
	if err != nil {
		t.Fatal(err)
	}
	d, ok := cfg.Data.(*userData)
	if !ok {
		t.Fatalf("data section %T", cfg.Data)
	}
	if m := cfg.Model.(*userModel); d.Dim != 3 || d.Window.Size != 5 || m.Width != 16 || m.Attention.Kind != "em" {
		t.Errorf("sections %+v %+v", d, m)
	}
	if d.File != filepath.Join(dir, "sets.bin") {
		t.Errorf("data.file %q: not resolved against the config's directory", d.File)
	}
	if v, err := cfg.Get("data.window.size"); err != nil || v != 5 {
		t.Errorf("Get data.window.size: %v, %v", v, err)
	}
	back, err := configs.Parse(cfg.YAML())
	if err != nil || string(back.YAML()) != string(cfg.YAML()) {
		t.Errorf("round trip: %v\n%s", err, cfg.YAML())
	}
	clone := cfg.Clone()
	clone.Data.(*userData).Dim = 9
	if d.Dim != 3 {
		t.Error("Clone shares the data section")
	}

	cases := []struct {
		name string
		text string
		sets []string
		want string // "" accepts
	}{
		{"as written", userConfig, nil, ""},
		{"rule", userConfig, []string{"data.dim=0"}, "data.dim = 0 (--set): want a positive integer"},
		{"rule in the file", strings.Replace(userConfig, "  dim: 3", "  dim: 0", 1), nil, "user.yaml: line 5: data.dim = 0: want a positive integer"},
		{"nested rule", userConfig, []string{"data.window.size=-1"}, "data.window.size = -1 (--set): want ≥ 0"},
		{"nested rule in the file", strings.Replace(userConfig, "size: 2", "size: -1", 1), nil, "line 8: data.window.size = -1: want ≥ 0"},
		{"shared rule first", userConfig, []string{"data.dim=0", "training.steps=0"}, "training.steps = 0 (--set): want a positive integer"},
		{"shared field the task reads", userConfig, []string{"training.loss=mse"}, `training.loss = "mse" (--set): want mae for task section-test`},
		{"shared field in a flow mapping", strings.Replace(userConfig, "loss: mae", "loss: mse", 1), nil, `line 14: training.loss = "mse": want mae for task section-test`},
		{"attention by layers' rules", userConfig, []string{"model.attention.key_iters=-1"}, "model.attention.key_iters = -1 (--set): want ≥ 0"},
		{"attention rule in the file", strings.Replace(userConfig, "kind: softmax", "kind: softmax\n    key_iters: -1", 1), nil, "line 13: model.attention.key_iters = -1: want ≥ 0"},
		{"a fraction", strings.Replace(userConfig, "size: 2", "size: 2.5", 1), nil, "line 8: data.window.size = 2.5: want an integer"},
		{"unknown key", strings.Replace(userConfig, "  dim: 3", "  dims: 3", 1), nil, `user.yaml: line 5: unknown key "dims" in data`},
		{"unknown nested key", strings.Replace(userConfig, "    size: 2", "    sise: 2", 1), nil, `line 8: unknown key "sise" in data.window`},
		{"unknown attention key", strings.Replace(userConfig, "    kind: softmax", "    kind: softmax\n    kinds: em", 1), nil, `line 13: unknown key "kinds" in model.attention`},
		{"wrong type", strings.Replace(userConfig, "width: 16", "width: wide", 1), nil, `line 10: model.width = "wide": want an integer`},
		{"a section where a value goes", strings.Replace(userConfig, "  dim: 3", "  dim: {a: 1}", 1), nil, "line 5"},
		{"a value where a section goes", strings.Replace(userConfig, "  window:\n    size: 2", "  window: 2", 1), nil, `"2" is a int, want a section (data.window)`},
		{"unknown set key", userConfig, []string{"data.kind=x"}, `--set data.kind: unknown key "kind" in data`},
		{"another task's key", userConfig, []string{"task=maxnorm"}, `unknown key "file"`},
		{"unknown task", userConfig, []string{"task=nope"}, `task = "nope" (--set): want maxnorm, seq2seq, segment, mlm, bert or section-test`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := os.WriteFile(path, []byte(c.text), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := configs.Load(path, c.sets)
			switch {
			case c.want == "" && err != nil:
				t.Errorf("%v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Errorf("error %v, want %q", err, c.want)
			}
		})
	}
}

// TestUnregisteredTask: a config of a task this program does not know
// still parses, its sections as maps, and writes them back; Validate
// names the registered tasks.
func TestUnregisteredTask(t *testing.T) {
	text := "task: elsewhere\ndata:\n  b: 2\n  a: [1, 2]\nmodel:\n  width: 3\n"
	cfg, err := configs.Parse([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := cfg.Data.(map[string]any); !ok {
		t.Errorf("data %T, want a map", cfg.Data)
	}
	back, err := configs.Parse(cfg.YAML())
	if err != nil || string(back.YAML()) != string(cfg.YAML()) {
		t.Errorf("round trip: %v", err)
	}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), `task = "elsewhere": want maxnorm`) {
		t.Errorf("Validate: %v", err)
	}
}
