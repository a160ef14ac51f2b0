package tasks

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/probformer/probformer/configs"
)

// TestPresetsFitTheBudget: every preset validates, and its memory
// estimate is far below any machine's memory (a preset is a laptop run).
func TestPresetsFitTheBudget(t *testing.T) {
	for _, name := range configs.Presets() {
		var sets []string
		if name == "seq2seq-tsv" || name == "bert-pairs-tsv" || name == "bert-pretrain-tsv" {
			sets = []string{"data.train_file=t.tsv", "data.valid_file=v.tsv", "data.test_file=e.tsv"}
		}
		cfg, err := configs.Load(name, sets)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		e, ok := estimateConfig(cfg)
		if !ok {
			t.Errorf("%s: no estimate for task %s", name, cfg.Task)
			continue
		}
		t.Logf("%s: %s", name, e.describe(false))
		if e.total() > 2<<30 || e.params <= 0 || e.activations <= 0 {
			t.Errorf("%s: estimate %s, want positive parts and under 2 GiB", name, e.describe(false))
		}
	}
}

// TestEstimateGrowsWithSizes: the estimate grows with every size it
// counts: at least twice the preset's at ten times the size (the parts
// that do not grow with it set the rest).
func TestEstimateGrowsWithSizes(t *testing.T) {
	cases := []struct{ preset, set string }{
		{"maxnorm", "model.dim=640"},
		{"maxnorm", "data.max_set=500"},
		{"maxnorm", "model.blocks=20"},
		{"maxnorm", "model.inducing=160"},
		{"maxnorm", "data.valid_sets=1e7"},
		{"maxnorm", "training.batch=640"},
		{"maxregression-paper", "data.max_set=100"},
		{"seq2seq-toy", "model.ff=2560"},
		{"seq2seq-toy", "model.dim=640"},
		{"seq2seq-toy", "data.max_len=150"},
		{"seq2seq-toy", "data.train_pairs=1e7"},
		{"seq2seq-toy", "training.beam=40"},
		{"seq2seq-toy", "model.enc_layers=20"},
		{"seq2seq-toy", "model.dec_layers=20"},
		{"mlm-toy", "model.enc_layers=20"},
		{"segment-em", "data.image_size=32"},
		{"segment-em", "model.blocks=10"},
		{"segment-em", "training.batch=80"},
	}
	for _, c := range cases {
		t.Run(c.preset+" "+c.set, func(t *testing.T) {
			base, err := configs.Load(c.preset, nil)
			if err != nil {
				t.Fatal(err)
			}
			big, err := configs.Load(c.preset, []string{c.set})
			if err != nil {
				t.Fatal(err)
			}
			b, _ := estimateConfig(base)
			e, _ := estimateConfig(big)
			if e.total() < 2*b.total() {
				t.Errorf("estimate %s, want at least twice the preset's %s", e.describe(false), b.describe(false))
			}
		})
	}
}

// TestBudgetNamesTheDominantSize: with a small budget, a config over it
// is refused naming the size whose reduction shrinks it most, the
// estimate and the budget.
func TestBudgetNamesTheDominantSize(t *testing.T) {
	old := memoryBudget
	t.Cleanup(func() { memoryBudget = old })
	memoryBudget = func() (float64, float64) { return 1 << 30, 2 << 30 }
	cases := []struct {
		preset string
		sets   []string
		field  string
	}{
		{"maxnorm", []string{"model.dim=8192"}, "model.dim"},
		{"maxnorm", []string{"training.batch=100000"}, "training.batch"},
		{"maxnorm", []string{"data.valid_sets=30000000"}, "data.valid_sets"},
		{"maxregression-paper", []string{"data.max_set=20000"}, "data.max_set"},
		{"seq2seq-toy", []string{"model.ff=200000", "model.dim=256"}, "model.ff"},
		{"seq2seq-toy", []string{"model.enc_layers=1000", "model.dec_layers=1000"}, "model.dec_layers"},
		{"seq2seq-toy", []string{"data.train_pairs=10000000"}, "data.train_pairs"},
		{"mlm-toy", []string{"data.max_len=4000"}, "data.max_len"},
		{"segment-em", []string{"data.image_size=256"}, "data.image_size"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.sets, " "), func(t *testing.T) {
			_, err := configs.Load(c.preset, c.sets)
			var fe *configs.FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("got %v, want a *configs.FieldError", err)
			}
			if fe.Field != c.field || !fe.Set {
				t.Errorf("refused %s (set %v), want %s from --set: %v", fe.Field, fe.Set, c.field, err)
			}
			for _, w := range []string{"would need about", "(estimate: ", "more than 1.0 GiB, half of this machine's 2.0 GiB"} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q does not say %q", err, w)
				}
			}
		})
	}
}

// TestSizeCeilings: every size field just past its ceiling is refused
// with its range, by Load (the CLI's tests check the same through the
// command line).
func TestSizeCeilings(t *testing.T) {
	cases := []struct {
		preset, field string
		ceiling       int
	}{
		{"maxnorm", "training.batch", configs.MaxBatch},
		{"maxnorm", "data.dim", MaxDim},
		{"maxnorm", "data.max_set", MaxSetSize},
		{"maxnorm", "data.valid_sets", MaxExamples},
		{"maxnorm", "data.test_sets", MaxExamples},
		{"maxnorm", "model.dim", MaxDim},
		{"maxnorm", "model.blocks", MaxLayers},
		{"maxnorm", "model.inducing", MaxPoints},
		{"maxnorm", "model.seeds", MaxPoints},
		{"maxnorm-em", "model.attention.key_iters", configs.MaxAttentionIters},
		{"seq2seq-toy", "training.beam", configs.MaxBeam},
		{"seq2seq-toy", "data.train_pairs", MaxExamples},
		{"seq2seq-toy", "data.valid_pairs", MaxExamples},
		{"seq2seq-toy", "data.test_pairs", MaxExamples},
		{"seq2seq-toy", "data.max_len", MaxTokens},
		{"seq2seq-toy", "model.ff", MaxFF},
		{"seq2seq-toy", "model.enc_layers", MaxLayers},
		{"seq2seq-toy", "model.dec_layers", MaxLayers},
		{"seq2seq-toy", "model.attention.relative_positions", configs.MaxRelativePositions},
		{"mlm-toy", "model.dim", MaxDim},
		{"mlm-toy", "data.train_pairs", MaxExamples},
		{"segment-em", "data.image_size", MaxImageSize},
		{"segment-em", "data.classes", MaxClasses},
		{"segment-em", "data.max_clicks", MaxClicks},
		{"segment-em", "data.valid_clicks", MaxClicks},
		{"segment-em", "model.blocks", MaxLayers},
		{"segment-em", "model.enc_layers", MaxLayers},
	}
	for _, c := range cases {
		t.Run(c.preset+" "+c.field, func(t *testing.T) {
			_, err := configs.Load(c.preset, []string{fmt.Sprintf("%s=%d", c.field, c.ceiling+1)})
			var fe *configs.FieldError
			if !errors.As(err, &fe) || fe.Field != c.field {
				t.Fatalf("got %v, want a *configs.FieldError on %s", err, c.field)
			}
			if !strings.Contains(fe.Want, fmt.Sprintf(", %d]", c.ceiling)) {
				t.Errorf("%q does not give the range up to %d", err, c.ceiling)
			}
		})
	}
}

func TestBytesWord(t *testing.T) {
	for n, want := range map[float64]string{
		0: "0 B", 512: "512 B", 1536: "1.5 KiB", 6 << 20: "6.0 MiB", 12 << 30: "12 GiB",
		3.7 * (1 << 40): "3.7 TiB", 1e30: "827181 YiB",
	} {
		if got := bytesWord(n); got != want {
			t.Errorf("bytesWord(%g) = %q, want %q", n, got, want)
		}
	}
}

// TestMachineMemory: the machine's memory reads as something plausible.
func TestMachineMemory(t *testing.T) {
	if m := machineMemory(); m < 64<<20 || m > 1<<60 {
		t.Errorf("machine memory %s", bytesWord(m))
	}
}

// TestBudgetForInference: a config read to use a trained model
// (configs.Config.ForInference) is held to an evaluation's estimate, one
// copy of the weights and the evaluation graph, not a training step's:
// a model trained on a larger machine still evaluates on a smaller one,
// and a width no machine here can hold (a checkpoint whose config was
// edited) is refused before the model is built. Its sizes' ceilings
// still hold.
func TestBudgetForInference(t *testing.T) {
	old := memoryBudget
	t.Cleanup(func() { memoryBudget = old })
	memoryBudget = func() (float64, float64) { return 1 << 30, 2 << 30 }
	load := func(dim string, inference bool) *configs.Config {
		cfg, err := configs.Load("maxnorm", nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := cfg.Set("model.dim=" + dim); err != nil {
			t.Fatal(err)
		}
		cfg.ForInference = inference
		return cfg
	}
	if err := load("512", false).Validate(); err == nil {
		t.Error("width 512: over the budget for training, and accepted")
	}
	if err := load("512", true).Validate(); err != nil {
		t.Errorf("width 512 for inference: %v", err)
	}
	if err := load("8192", true).Validate(); err == nil || !strings.Contains(err.Error(), "the model would need") {
		t.Errorf("width 8192 for inference: %v; want refused by the estimate", err)
	}
	cfg := load("512", true)
	if err := cfg.Set("model.dim=1000000000"); err == nil {
		if err := cfg.Validate(); err == nil {
			t.Error("for inference, a width past its ceiling was accepted")
		}
	}
}
