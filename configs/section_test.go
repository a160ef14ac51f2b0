package configs

import (
	"strings"
	"testing"
)

// userSection is a task's section defined outside the built-in ones: it
// reads data.dim and training.loss.
type userSection struct{}

func (userSection) Validate(c *Config) error {
	return c.Check(
		Rule{c.Data.Dim > 0, "data.dim", "a positive integer"},
		Rule{c.Training.Loss == "mae", "training.loss", "mae for task section-test"},
	)
}

// TestRegisterTask: a registered task validates by its own rules, with no
// change to this package, after the shared parts; an unknown task's error
// lists the registered ones.
func TestRegisterTask(t *testing.T) {
	if err := RegisterTask("section-test", userSection{}); err != nil {
		t.Fatal(err)
	}
	if err := RegisterTask("section-test", userSection{}); err == nil {
		t.Error("a second registration of a name accepted")
	}
	if err := RegisterTask("", userSection{}); err == nil {
		t.Error("an empty name accepted")
	}
	base := []string{"task=section-test", "data.dim=3", "training.loss=mae"}
	cases := []struct {
		sets []string
		want string // "" accepts
	}{
		{nil, ""},
		{[]string{"training.loss=mse"}, `training.loss = "mse": want mae for task section-test`},
		{[]string{"data.dim=0"}, "data.dim = 0: want a positive integer"},
		{[]string{"training.steps=0"}, "training.steps = 0: want a positive integer"},
		{[]string{"task=nope"}, `task = "nope": want maxnorm, seq2seq, segment, mlm or section-test`},
	}
	for _, c := range cases {
		_, err := Load("maxnorm", append(append([]string{}, base...), c.sets...))
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%v: %v", c.sets, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%v: error %v, want %q", c.sets, err, c.want)
		}
	}
}

// TestAttentionRulesAreLayers: model.attention is checked by
// layers.AttentionConfig.Validate, its errors named as the config has them.
func TestAttentionRulesAreLayers(t *testing.T) {
	cases := []struct {
		sets []string
		want string
	}{
		{[]string{"model.attention.kind=nope"}, `model.attention.kind = "nope": want softmax, em, bayes-weibull or bayes-lognormal`},
		{[]string{"model.attention.kind="}, "--set model.attention.kind=: want a string"},
		{[]string{"model.attention.key_iters=-1"}, "model.attention.key_iters = -1: want ≥ 0"},
		{[]string{"model.attention.kind=bayes-weibull", "model.attention.score=additive"}, `model.attention.score = "additive": want scaled_dot for Bayesian attention`},
		{[]string{"model.attention.kind=em", "model.attention.dropout=0.1"}, "model.attention.dropout = 0.1: want 0 unless kind softmax"},
		{[]string{"model.attention.prior=weird"}, `model.attention.prior = "weird": want linked or free`},
	}
	for _, c := range cases {
		_, err := Load("maxnorm", c.sets)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want %q", c.sets, err, c.want)
		}
	}
	if _, err := Load("segment-em", []string{"model.attention.kind=bayes-weibull"}); err == nil || !strings.Contains(err.Error(), "for task segment") {
		t.Errorf("segment with Bayesian attention: %v", err)
	}
}
