package layers

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/probformer/probformer/graph"
)

func tinyMLMConfig(preLN bool) MaskedLMConfig {
	return MaskedLMConfig{DModel: 4, Heads: 2, FF: 6, Layers: 2, PreLN: preLN, Vocab: 7, MaxLen: 8}
}

func TestMaskedLMGradients(t *testing.T) {
	for i, preLN := range []bool{false, true} {
		// Id 7 is [MASK]; row 2 of the batch ends in padding.
		fn := func(b *graph.Builder) *graph.Node {
			return MaskedLM{Config: tinyMLMConfig(preLN)}.Forward(b,
				b.IndexConstant("ids", []int{2, 4}, []int{4, 7, 6, 5, 7, 4, 0, 0}),
				b.Constant("mask", []int{2, 4}, srcMaskBS))
		}
		res, err := graph.CheckGradients(graph.NewParams(graph.Float64, uint64(i+1)), fn,
			graph.GradCheckOptions{Seed: uint64(i), MaxPerParam: 6})
		if err != nil {
			t.Fatalf("pre-LN %v: %v", preLN, err)
		}
		names := make([]string, len(res))
		for j, r := range res {
			names[j] = r.Param
		}
		for _, want := range []string{"src_emb.table", "enc.1.ff2.w", "mlm.out.w"} {
			if !slices.Contains(names, want) {
				t.Errorf("pre-LN %v: %s not checked (checked %v)", preLN, want, names)
			}
		}
	}
}

// TestMaskedLMSharesSeq2SeqEncoder pins what init.encoder_from relies on:
// every encoder parameter of a Seq2Seq has a MaskedLM parameter of the same
// name and shape, but for the embedding's extra [MASK] row, and the masked
// LM has nothing else but its head.
func TestMaskedLMSharesSeq2SeqEncoder(t *testing.T) {
	for _, preLN := range []bool{false, true} {
		mc := tinyMLMConfig(preLN)
		sc := Seq2SeqConfig{DModel: mc.DModel, Heads: mc.Heads, FF: mc.FF, EncLayers: mc.Layers, DecLayers: 1,
			PreLN: preLN, SrcVocab: mc.Vocab, TgtVocab: 5, MaxLen: mc.MaxLen}
		seq := graph.NewParams(graph.Float64, 1)
		if _, err := graph.Compile(seq, seq2seqBuild(sc, 2, 4, 3), false); err != nil {
			t.Fatal(err)
		}
		mlm := graph.NewParams(graph.Float64, 1)
		if _, err := graph.Compile(mlm, func(b *graph.Builder) error {
			b.Output("logits", MaskedLM{Config: mc}.Forward(b, b.IndexInput("ids", 2, 4), b.Input("mask", 2, 4)))
			return nil
		}, false); err != nil {
			t.Fatal(err)
		}
		shared := 0
		for _, p := range seq.List() {
			if !strings.HasPrefix(p.Name, "src_emb.") && !strings.HasPrefix(p.Name, "enc.") {
				continue
			}
			shared++
			q := mlm.Lookup(p.Name)
			if q == nil {
				t.Fatalf("pre-LN %v: the masked LM has no %s", preLN, p.Name)
			}
			want := slices.Clone(p.Shape)
			if p.Name == "src_emb.table" {
				want[0]++
			}
			if !slices.Equal(q.Shape, want) {
				t.Errorf("%s: masked LM shape %v, want %v", p.Name, q.Shape, want)
			}
		}
		if len(mlm.List()) != shared+2 || mlm.Lookup("mlm.out.w") == nil || mlm.Lookup("mlm.out.b") == nil {
			t.Errorf("pre-LN %v: masked LM has %d parameters, want the %d shared ones and mlm.out", preLN, len(mlm.List()), shared)
		}
		if preLN != (mlm.Lookup("enc.ln.g") != nil) {
			t.Errorf("pre-LN %v: enc.ln present is %v", preLN, !preLN)
		}
	}
}

// TestMaskedLMIgnoresPadding: what stands at a padded position changes no
// real position's logits.
func TestMaskedLMIgnoresPadding(t *testing.T) {
	prog, err := graph.Compile(graph.NewParams(graph.Float64, 3), func(b *graph.Builder) error {
		b.Output("logits", MaskedLM{Config: tinyMLMConfig(false)}.Forward(b, b.IndexInput("ids", 1, 4), b.Input("mask", 1, 4)))
		return nil
	}, false)
	if err != nil {
		t.Fatal(err)
	}
	logits := func(ids []int) []float64 {
		if err := prog.FeedIndices("ids", ids); err != nil {
			t.Fatal(err)
		}
		if err := prog.Feed("mask", []float64{1, 1, 0, 0}); err != nil {
			t.Fatal(err)
		}
		if err := prog.Run(); err != nil {
			t.Fatal(err)
		}
		out, shape, _ := prog.Output("logits")
		if !slices.Equal(shape, []int{1, 4, 7}) {
			t.Fatalf("logits shape %v, want [1 4 7]", shape)
		}
		return slices.Clone(out[:2*7])
	}
	a, b := logits([]int{4, 7, 0, 0}), logits([]int{4, 7, 5, 6})
	for i := range a {
		if math.Abs(a[i]-b[i]) > 1e-12 {
			t.Fatalf("logit %d: %g with padding, %g with words there", i, a[i], b[i])
		}
	}
}

func TestMaskedLMConfigValidate(t *testing.T) {
	cases := []struct {
		name string
		edit func(*MaskedLMConfig)
		want string
	}{
		{"layers", func(c *MaskedLMConfig) { c.Layers = 0 }, "layers"},
		{"vocab", func(c *MaskedLMConfig) { c.Vocab = 0 }, "vocab"},
		{"heads", func(c *MaskedLMConfig) { c.Heads = 3 }, "heads"},
		{"max len", func(c *MaskedLMConfig) { c.MaxLen = 0 }, "max_len"},
	}
	for _, c := range cases {
		cfg := tinyMLMConfig(false)
		c.edit(&cfg)
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one mentioning %q", c.name, err, c.want)
		}
	}
	if err := tinyMLMConfig(true).Validate(); err != nil {
		t.Fatal(err)
	}
}
