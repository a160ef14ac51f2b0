package configs_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	_ "github.com/probformer/probformer/cmd/trainer/tasks"
	"github.com/probformer/probformer/configs"
)

// setInText replaces the value of key (dotted: "training.batch", or a
// top-level "seed") in a preset's text, written in block style, or adds
// the key first in its section if the preset leaves it out, and returns
// the new text and the line of the key.
func setInText(t *testing.T, text, key, value string) (string, int) {
	t.Helper()
	lines := strings.Split(text, "\n")
	parts := strings.Split(key, ".")
	depth, parent := 0, -1 // parts[:depth] found, the last at line parent
	for i, l := range lines {
		indent := strings.Repeat("  ", depth)
		switch {
		case parent >= 0 && !strings.HasPrefix(l, indent):
			i = parent + 1 // left the section: the key is not in it
		case !strings.HasPrefix(l, indent+parts[depth]+":"):
			continue
		case depth < len(parts)-1:
			depth, parent = depth+1, i
			continue
		default:
			lines[i] = indent + parts[depth] + ": " + value
			return strings.Join(lines, "\n"), i + 1
		}
		lines = slices.Insert(lines, i, indent+parts[depth]+": "+value)
		return strings.Join(lines, "\n"), i + 1
	}
	t.Fatalf("no section of %s in the preset", key)
	return "", 0
}

// TestStrictNumbers: an integer field refuses a fraction, a number out of
// its type's range, a negative count, NaN and an empty value, from a
// config file (naming the file, the line and the key) and from --set
// (naming the flag and the key); the shared fields and a task's own.
func TestStrictNumbers(t *testing.T) {
	const (
		intRange    = "want an integer in [-9223372036854775808, 9223372036854775807]"
		uint64Range = "want an integer in [0, 18446744073709551615]"
	)
	fields := []struct{ preset, key, negative string }{
		{"maxnorm", "training.batch", "want a positive integer"},
		{"maxnorm", "training.steps", "want a positive integer"},
		{"maxnorm", "training.eval_every", "want ≥ 0"},
		{"maxnorm", "optimizer.warmup_steps", "want ≥ 0"},
		{"maxnorm", "model.dim", "want a positive integer"},
		{"maxnorm", "data.min_set", "want a positive integer"},
		{"maxnorm", "model.inducing", "want an integer ≥ 0"},
		{"seq2seq-toy", "data.max_len", "want a positive integer"},
		{"seq2seq-toy", "model.ff", "want a positive integer"},
		{"mlm-toy", "data.train_pairs", "want a positive integer"},
		{"segment-em", "data.image_size", "want an integer ≥ 2"},
		{"segment-em", "model.attention.key_iters", "want ≥ 0"},
		{"maxnorm", "seed", uint64Range},
	}
	values := []struct {
		yaml, set string // the value in a file and on the command line
		want      string
	}{
		{"3.5", "3.5", "want an integer"},
		{"64.5", "64.5", "want an integer"},
		{"1e20", "1e20", intRange},
		{"-1", "-1", ""}, // the field's rule
		{".nan", ".nan", "want an integer"},
		{"NaN", "NaN", "want an integer"},
		{".inf", ".inf", "want an integer"},
		{`""`, "", "empty"},
		{`""`, `""`, "empty"},
		{"", "~", "empty"},
		{"true", "true", "want an integer"},
	}
	for _, f := range fields {
		base, err := configs.PresetYAML(f.preset)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range values {
			want := v.want
			if want == "" {
				want = f.negative
			}
			if f.key == "seed" && (v.yaml == "1e20" || v.yaml == "-1") {
				want = uint64Range
			}
			t.Run(fmt.Sprintf("%s %s=%s", f.preset, f.key, v.yaml), func(t *testing.T) {
				text, line := setInText(t, string(base), f.key, v.yaml)
				_, err := configs.Load(writeConfig(t, text), nil)
				checkRefused(t, err, "run.yaml", fmt.Sprintf("line %d: %s", line, f.key), want)
			})
			t.Run(fmt.Sprintf("%s --set %s=%s", f.preset, f.key, v.set), func(t *testing.T) {
				_, err := configs.Load(f.preset, []string{f.key + "=" + v.set})
				checkRefused(t, err, f.key, "--set", want)
			})
		}
	}
}

// checkRefused checks that err is one line that mentions every string of
// want.
func checkRefused(t *testing.T, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatal("accepted")
	}
	msg := err.Error()
	if strings.Contains(msg, "\n") {
		t.Errorf("error spans lines: %q", msg)
	}
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("error %q does not mention %q", msg, w)
		}
	}
}

// TestStrictFloats: a float field refuses NaN, ±Inf and an empty value
// from a file and from --set; the learning rate and the weight decay
// have upper bounds.
func TestStrictFloats(t *testing.T) {
	base, _ := configs.PresetYAML("maxnorm")
	cases := []struct {
		key, value, want string
	}{
		{"optimizer.lr", ".nan", "want a finite number"},
		{"optimizer.lr", ".inf", "want a finite number"},
		{"optimizer.lr", "-.Inf", "want a finite number"},
		{"optimizer.lr", `""`, "empty"},
		{"optimizer.lr", "fast", "want a finite number"},
		{"optimizer.lr", "1e39", "a positive number ≤ 3.4e38"},
		{"optimizer.lr", "0", "a positive number"},
		{"optimizer.eps", ".inf", "want a finite number"},
		{"optimizer.weight_decay", ".nan", "want a finite number"},
		{"optimizer.weight_decay", "1000", "below 1/optimizer.lr"},
		{"optimizer.weight_decay", "-0.1", "≥ 0"},
		{"optimizer.clip_norm", ".inf", "want a finite number"},
		{"optimizer.min_lr", ".nan", "want a finite number"},
		{"training.kl_weight", ".inf", "want a finite number"},
		{"training.length_penalty", "-1", "≥ 0"},
		{"training.label_smoothing", "1.5", "in [0, 1)"},
		{"model.attention.k", ".inf", "want a finite number"},
	}
	for _, c := range cases {
		t.Run(c.key+"="+c.value, func(t *testing.T) {
			text, line := setInText(t, string(base), c.key, c.value)
			_, err := configs.Load(writeConfig(t, text), nil)
			checkRefused(t, err, "run.yaml", fmt.Sprintf("line %d: %s", line, c.key), c.want)
			_, err = configs.Load("maxnorm", []string{c.key + "=" + c.value})
			checkRefused(t, err, c.key, "--set", c.want)
		})
	}
}

// TestNumbersAccepted: integers in other notations, an integral float,
// and a float field given an integer still read.
func TestNumbersAccepted(t *testing.T) {
	cfg, err := configs.Load("maxnorm", []string{
		"training.steps=1e3", "training.batch=64.0", "training.log_every=0x10",
		"training.eval_every=1_000", "optimizer.lr=1", "seed=18446744073709551615",
	})
	if err != nil {
		t.Fatal(err)
	}
	tr := cfg.Training
	if tr.Steps != 1000 || tr.Batch != 64 || tr.LogEvery != 16 || tr.EvalEvery != 1000 || cfg.Optimizer.LR != 1 || cfg.Seed != 1<<64-1 {
		t.Errorf("read %+v, lr %g, seed %d", tr, cfg.Optimizer.LR, cfg.Seed)
	}
	if _, err := configs.Load("maxnorm", []string{"training.steps=9007199254740993.0"}); err == nil ||
		!strings.Contains(err.Error(), "without a decimal point") {
		t.Errorf("an integer past 2⁵³ in float notation: %v", err)
	}
}

// TestNumbersThroughAliases: a value from an anchor or a merge key is
// held to the field it fills, and named at the line that uses it.
func TestNumbersThroughAliases(t *testing.T) {
	base, _ := configs.PresetYAML("maxnorm")
	// A float field's value, fine there, used by an integer field.
	text := strings.Replace(string(base), "  beta1: 0.9", "  beta1: &half 0.5", 1)
	text, line := setInText(t, text, "training.batch", "*half")
	_, err := configs.Load(writeConfig(t, text), nil)
	checkRefused(t, err, fmt.Sprintf("line %d: training.batch = 0.5", line), "want an integer")

	merged := strings.Replace(string(base), "training:\n  steps: 3000\n", "training:\n  <<: {steps: 2.5}\n", 1)
	_, err = configs.Load(writeConfig(t, merged), nil)
	checkRefused(t, err, "training.steps = 2.5", "want an integer")
	overridden := strings.Replace(string(base), "training:\n  steps: 3000\n", "training:\n  <<: {steps: 7}\n  steps: 30\n", 1)
	cfg, err := configs.Load(writeConfig(t, overridden), nil)
	if err != nil || cfg.Training.Steps != 30 {
		t.Errorf("a merge key under an explicit one: %v, %v", err, cfg)
	}
	// An alias as a key would name training.batch only once resolved:
	// refused, rather than let 3.5 through as 3.
	aliasKey := strings.Replace(string(base), "training:\n  steps: 3000\n", "training:\n  <<: {&k batch: 64}\n  *k: 3.5\n  steps: 3000\n", 1)
	_, err = configs.Load(writeConfig(t, aliasKey), nil)
	checkRefused(t, err, "an alias (*k) cannot be a key")
}
