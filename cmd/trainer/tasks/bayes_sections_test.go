package tasks

import (
	"strings"
	"testing"

	"github.com/probformer/probformer/configs"
)

func TestBayesAttentionValidation(t *testing.T) {
	cfg, err := configs.Load("maxnorm-bayes", nil)
	if err != nil {
		t.Fatal(err)
	}
	a, tr := cfg.Model.(*MaxNormModel).Attention, cfg.Training
	if a.Kind != "bayes-weibull" || a.K != 10 || a.Prior != "contextual" || a.PriorRate != 1 || tr.KLWeight != 1 || tr.KLWarmup != 500 {
		t.Fatalf("maxnorm-bayes: attention %+v, kl_weight %v, kl_warmup %d", a, tr.KLWeight, tr.KLWarmup)
	}
	for _, c := range []struct {
		preset string
		sets   []string
		want   string
	}{
		{"maxnorm-bayes", []string{"model.attention.k=-1"}, "model.attention.k = -1"},
		{"maxnorm-bayes", []string{"model.attention.sigma=-0.5"}, "model.attention.sigma = -0.5"},
		{"maxnorm-bayes", []string{"model.attention.prior_rate=-1"}, "model.attention.prior_rate = -1"},
		{"maxnorm-bayes", []string{"model.attention.prior_sigma=-1"}, "model.attention.prior_sigma = -1"},
		{"maxnorm-bayes", []string{"model.attention.prior=linked"}, "contextual or constant"},
		{"maxnorm-bayes", []string{"model.attention.score=additive"}, "scaled_dot for Bayesian attention"},
		{"maxnorm-bayes", []string{"training.kl_weight=-1"}, "training.kl_weight = -1"},
		{"maxnorm-bayes", []string{"training.kl_warmup=-1"}, "training.kl_warmup = -1"},
		{"maxnorm", []string{"model.attention.prior=constant"}, "linked or free"},
		{"maxnorm", []string{"model.attention.head_diversity=-0.1"}, "model.attention.head_diversity = -0.1"},
		{"seq2seq-toy", []string{"model.attention.head_diversity=.inf"}, "model.attention.head_diversity"},
		{"segment-em", []string{"model.attention.head_diversity=0.1"}, "0 for task segment"},
		{"seq2seq-toy", []string{"training.ema_decay=1"}, "training.ema_decay = 1"},
		{"maxnorm", []string{"training.ema_decay=-0.5"}, "training.ema_decay = -0.5"},
		{"segment-em", []string{"model.attention.kind=bayes-lognormal"}, "for task segment"},
	} {
		_, err := configs.Load(c.preset, c.sets)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s with %v: error %v, want one with %q", c.preset, c.sets, err, c.want)
		}
	}
	if _, err := configs.Load("maxnorm", []string{"model.attention.kind=bayes-lognormal", "model.attention.prior=constant", "model.attention.sigma=0.5"}); err != nil {
		t.Errorf("a log-normal maxnorm config: %v", err)
	}
}
