package configs_test

import (
	"fmt"
	_ "github.com/probformer/probformer/cmd/trainer/tasks"
	"github.com/probformer/probformer/configs"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// nested returns YAML of depth levels of block mappings under task:.
func nested(depth int) string {
	var b strings.Builder
	for i := range depth {
		fmt.Fprintf(&b, "%sa:\n", strings.Repeat(" ", i))
	}
	return b.String()
}

// TestLoadLimits: files that would make the decoder run long, or ask for
// more than any config needs, are refused within a second by an error
// that names the file (and the line, where there is one).
func TestLoadLimits(t *testing.T) {
	base, _ := configs.PresetYAML("maxnorm")
	cases := []struct {
		name string
		yaml string
		want []string // substrings of the one-line error
	}{
		{"10 MB file", string(base) + "# " + strings.Repeat("x", 10<<20) + "\n", []string{"run.yaml", "more than the 1 MiB"}},
		{"1 MiB + 1 byte", strings.Repeat("#", configs.MaxConfigBytes) + "\n", []string{"run.yaml", "more than the 1 MiB"}},
		{"10,000-deep flow nesting", "task: " + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + "\n", []string{"run.yaml", "line 1", "deep"}},
		{"10,000-deep flow mappings", "task: " + strings.Repeat("{a: ", 10000) + strings.Repeat("}", 10000) + "\n", []string{"run.yaml", "line 1", "deep"}},
		{"33-deep block nesting", nested(configs.MaxDepth + 1), []string{"run.yaml", fmt.Sprintf("line %d: nested more than %d deep", configs.MaxDepth+1, configs.MaxDepth)}},
		{"1,000,000-element list", "task: [" + strings.Repeat("0,", 1_000_000) + "0]\n", []string{"run.yaml", "more than the 1 MiB"}},
		{"1,001-element list", "task: maxnorm\ndata:\n  dim: [" + strings.Repeat("0,", 1000) + "0]\n", []string{"run.yaml", "line 3: a list of 1001 items, more than 1000"}},
		{"1,001-key section", "data:\n" + func() string {
			var b strings.Builder
			for i := range 1001 {
				fmt.Fprintf(&b, "  k%d: 1\n", i)
			}
			return b.String()
		}(), []string{"run.yaml", "line 2: a section of 1001 keys, more than 1000"}},
		{"duplicate keys", string(base) + "training:\n  steps: 1\n", []string{"run.yaml", `key "training" already defined at line`}},
		{"1,000 equal keys", "training:\n" + strings.Repeat("  steps: 1\n", 1000), []string{"run.yaml", `line 3: key "steps" already defined at line 2`}},
		{"4,000 equal flow keys", "{" + strings.Repeat("a,", 4000) + "}", []string{"run.yaml", "line 1: a section of 4000 keys"}},
		{"aliases expanded past MaxNodes", "x: &a [" + strings.Repeat("0,", 900) + "0]\ny: [" + strings.Repeat("*a,", 20) + "*a]\n",
			[]string{"run.yaml", "line 2: alias *a makes the config more than 10000 values"}},
		{"merged mapping used 1,000 times", "task: maxnorm\ntraining: &t {" + strings.Repeat("steps: 1, ", 1) + "batch: 2}\nmodel:\n  <<: [" + strings.Repeat("*t, ", 999) + "*t]\n",
			[]string{"run.yaml", `line 2: unknown key "steps" in model`}},
		{"aliases nested past MaxDepth", "x: &a " + strings.Repeat("[", 20) + strings.Repeat("]", 20) + "\ny: " + strings.Repeat("[", 20) + "*a" + strings.Repeat("]", 20) + "\n",
			[]string{"run.yaml", "line 2: alias *a nests its value more than 32 deep"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := writeConfig(t, c.yaml)
			start := time.Now()
			_, err := configs.Load(path, nil)
			if d := time.Since(start); d > time.Second {
				t.Errorf("took %v", d)
			}
			if err == nil {
				t.Fatal("accepted")
			}
			msg := err.Error()
			if len(msg) > 300 || strings.Contains(msg, "\n") {
				t.Errorf("error is not one short line: %.300q", msg)
			}
			for _, w := range append([]string{filepath.Base(path)}, c.want...) {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not mention %q", msg, w)
				}
			}
		})
	}
}

// TestSetLimits: a --set value is held to the same limits as a file.
func TestSetLimits(t *testing.T) {
	cases := []struct {
		name, value string
	}{
		{"4,000 equal keys", "{" + strings.Repeat("a,", 4000) + "}"},
		{"1,000 equal keys", "{" + strings.Repeat("a,", 1000) + "}"},
		{"10,000-deep nesting", strings.Repeat("[", 10000)},
		{"2 MB value", strings.Repeat("1", 2<<20)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := configs.Load("maxnorm", nil)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			err = cfg.Set("training.steps=" + c.value)
			if d := time.Since(start); d > time.Second {
				t.Errorf("took %v", d)
			}
			if err == nil || !strings.Contains(err.Error(), "--set training.steps=") || !strings.Contains(err.Error(), "want an integer") {
				t.Fatalf("error %.200v, want a --set error asking for an integer", err)
			}
			if len(err.Error()) > 200 {
				t.Errorf("error quotes the whole value: %d bytes", len(err.Error()))
			}
		})
	}
}

// TestParseLimitsAccept: configs within the limits still load, anchors
// and merge keys included.
func TestParseLimitsAccept(t *testing.T) {
	base, _ := configs.PresetYAML("maxnorm")
	cases := []struct {
		name, yaml string
	}{
		{"preset", string(base)},
		{"long comment", string(base) + "# " + strings.Repeat("x", configs.MaxConfigBytes-len(base)-3) + "\n"},
		{"anchor and alias", strings.Replace(strings.Replace(string(base), "lr: 1.0e-3", "lr: &lr 1.0e-3", 1), "min_lr: 1.0e-5", "min_lr: *lr", 1)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if len(c.yaml) > configs.MaxConfigBytes || (strings.Contains(c.name, "alias") && !strings.Contains(c.yaml, "*lr")) {
				t.Fatalf("test input of %d bytes, or without its alias", len(c.yaml))
			}
			cfg, err := configs.Load(writeConfig(t, c.yaml), nil)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Task != "maxnorm" {
				t.Errorf("task %q", cfg.Task)
			}
		})
	}
}
