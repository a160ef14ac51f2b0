package tasks

import (
	"strings"
	"testing"

	"github.com/probformer/probformer/configs"
)

// TestMLMPresetMatchesSeq2SeqToy: mlm-toy pretrains the encoder that
// seq2seq-toy's init.encoder_from takes, so the two must read the same
// corpus (hence the same source vocabulary) and build the same encoder.
func TestMLMPresetMatchesSeq2SeqToy(t *testing.T) {
	mlm, err := configs.Load("mlm-toy", nil)
	if err != nil {
		t.Fatal(err)
	}
	seq, err := configs.Load("seq2seq-toy", nil)
	if err != nil {
		t.Fatal(err)
	}
	d, e := mlm.Data.(*MLMData), seq.Data.(*Seq2SeqData)
	if mlm.Task != "mlm" || d.MaskProb != 0.15 {
		t.Fatalf("mlm-toy: task %q, mask_prob %g", mlm.Task, d.MaskProb)
	}
	if mlm.Seed != seq.Seed || d.Source != e.Source || d.TrainPairs != e.TrainPairs || d.ValidPairs != e.ValidPairs ||
		d.TestPairs != e.TestPairs || d.MaxLen != e.MaxLen || d.MinCount != e.MinCount {
		t.Errorf("data differ: mlm-toy seed %d %+v, seq2seq-toy seed %d %+v", mlm.Seed, d, seq.Seed, e)
	}
	m, n := mlm.Model.(*TransformerModel), seq.Model.(*TransformerModel)
	if m.Kind != n.Kind || m.Dim != n.Dim || m.Heads != n.Heads || m.FF != n.FF || m.EncLayers != n.EncLayers ||
		m.PreLN != n.PreLN || m.Attention != n.Attention || mlm.DType != seq.DType {
		t.Errorf("encoders differ: mlm-toy %+v, seq2seq-toy %+v", m, n)
	}
}

func TestValidateMLMAndInit(t *testing.T) {
	cases := []struct {
		preset string
		sets   []string
		want   string // "" accepts
	}{
		{"mlm-toy", nil, ""},
		{"mlm-toy", []string{"data.mask_prob=0"}, "data.mask_prob = 0"},
		{"mlm-toy", []string{"data.mask_prob=1"}, "data.mask_prob = 1"},
		{"mlm-toy", []string{"data.source=tsv"}, "data.train_file"},
		{"mlm-toy", []string{"data.max_len=0"}, "data.max_len"},
		{"mlm-toy", []string{"model.enc_layers=0"}, "model.enc_layers"},
		{"mlm-toy", []string{"model.kind=segmenter"}, "transformer for task mlm"},
		{"mlm-toy", []string{"training.loss=mse"}, "cross_entropy for task mlm"},
		{"mlm-toy", []string{"init.encoder_from=run"}, "init.encoder_from"},
		{"maxnorm", []string{"init.encoder_from=run"}, "init.encoder_from"},
		{"seq2seq-toy", []string{"init.encoder_from=run"}, ""},
		{"seq2seq-toy", []string{"task=gpt"}, "mlm"},
	}
	for _, c := range cases {
		_, err := configs.Load(c.preset, c.sets)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s %v: %v", c.preset, c.sets, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s %v: error %v, want one mentioning %q", c.preset, c.sets, err, c.want)
		}
	}
}
