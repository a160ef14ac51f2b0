package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/probformer/probformer/cmd/trainer/tasks"
	"github.com/probformer/probformer/cmd/trainer/train"
	"github.com/probformer/probformer/configs"
	"github.com/probformer/probformer/datasets"
	"github.com/probformer/probformer/graph"
	"github.com/probformer/probformer/graph/ckpt"
)

// encoderPrefixes name the parameters a masked LM hands to a seq2seq
// model: the source embedding and the encoder stack (layers.MaskedLM).
var encoderPrefixes = []string{"src_emb.", "enc."}

// bertPrefixes name the parameters a BERT run hands to another (task
// bert, layers.BERT): the encoder's and the segment embedding, as BERT's
// fine-tuning starts them from pretraining; the MLM head and the 2-way
// classifier start afresh. The NSP pooler (bertPooler) is copied when the
// checkpoint has one, trained by NSP; a pretraining without the NSP head
// (data.pairs true_only) has none, and the pooler starts afresh, as
// Hugging Face's BertForSequenceClassification initialises a pooler its
// checkpoint lacks.
var bertPrefixes = []string{"src_emb.", "seg_emb.", "enc."}

// bertPooler is the prefix of the NSP pooler's parameters (layers.NSPHead).
const bertPooler = "nsp.pool."

// initEncoder starts a new seq2seq run's source embedding and encoder
// from the masked-LM checkpoint init.encoder_from names (a file, or a run
// directory whose best checkpoint is used, as `trainer eval` resolves
// it). The checkpoint must come from task mlm with the same encoder
// (model.dim, heads, ff, enc_layers, pre_ln, attention) and the same source
// vocabulary; every src_emb.* and enc.* parameter is copied, the
// embedding without its last row, [MASK]. The decoder and the output
// layer keep their fresh initial values.
//
// A run of task bert starts from a checkpoint of task bert instead, with
// the same encoder and vocabulary: its bertPrefixes parameters are
// copied, src_emb.table whole, and the NSP pooler if the checkpoint has
// one.
//
// Only a new run calls it: a resumed run restores every parameter from
// its own checkpoint, so init.encoder_from, kept in its config, is
// ignored then. Errors are bad input (exit status 2).
func initEncoder(cfg *configs.Config, tk train.Task, params *graph.Params, stderr io.Writer) error {
	from := cfg.Init.EncoderFrom
	if from == "" {
		return nil
	}
	file, err := resolveCheckpoint(from, true)
	if err != nil {
		return fmt.Errorf("init.encoder_from: %w", err)
	}
	fail := func(format string, args ...any) error {
		return badInput(fmt.Errorf("init.encoder_from %s: "+format, append([]any{file}, args...)...))
	}
	ck, err := ckpt.ReadCheckpoint(file)
	if err != nil {
		return badInput(fmt.Errorf("init.encoder_from: %w", err))
	}
	if err := train.UseAverage(ck); err != nil {
		return fail("%v", err)
	}
	src, err := checkpointConfig(ck, file)
	if err != nil {
		return fmt.Errorf("init.encoder_from: %w", err)
	}
	prefixes, what := encoderPrefixes, "source embedding and encoder"
	switch {
	case cfg.Task == "bert" && src.Task != "bert":
		return fail("a checkpoint of task %q; want a BERT (task bert) checkpoint", src.Task)
	case cfg.Task == "bert":
		prefixes, what = bertPrefixes, "embeddings and encoder (no NSP pooler in the checkpoint: afresh)"
		if slices.ContainsFunc(ck.Params, func(p ckpt.Tensor) bool { return strings.HasPrefix(p.Name, bertPooler) }) {
			prefixes, what = append(slices.Clone(bertPrefixes), bertPooler), "embeddings, encoder and NSP pooler"
		}
	case src.Task != "mlm":
		return fail("a checkpoint of task %q; want a masked-LM (task mlm) checkpoint", src.Task)
	}
	ckModel, ok := src.Model.(*tasks.TransformerModel)
	if !ok {
		return fail("config: model section of type %T, want a Transformer's", src.Model)
	}
	runModel, ok := cfg.Model.(*tasks.TransformerModel)
	if !ok {
		return fail("this run's model is not a Transformer (task %s)", cfg.Task)
	}
	if err := sameEncoder(*ckModel, *runModel); err != nil {
		return fail("%v", err)
	}
	if err := sameVocabulary(ck.Extra["src_vocab"], tk); err != nil {
		return fail("%v", err)
	}
	copied, err := copyEncoder(ck, params, prefixes)
	if err != nil {
		return fail("%v", err)
	}
	fmt.Fprintf(stderr, "init: %s (%d tensors) from %s, step %d\n", what, copied, file, ck.Step)
	return nil
}

// sameEncoder compares the fields that fix the encoder's parameters.
func sameEncoder(ck, run tasks.TransformerModel) error {
	for _, f := range []struct {
		name    string
		ck, run any
	}{
		{"model.dim", ck.Dim, run.Dim},
		{"model.heads", ck.Heads, run.Heads},
		{"model.ff", ck.FF, run.FF},
		{"model.enc_layers", ck.EncLayers, run.EncLayers},
		{"model.pre_ln", ck.PreLN, run.PreLN},
		{"model.final_norm", ck.FinalNorm, run.FinalNorm},
	} {
		if f.ck != f.run {
			return fmt.Errorf("%s = %v in the checkpoint, %v in this run; the encoders must match", f.name, f.ck, f.run)
		}
	}
	// The regulariser's weight and attention dropout add no parameter.
	a, b := ck.Attention, run.Attention
	a.HeadDiversity, b.HeadDiversity = 0, 0
	a.Dropout, b.Dropout = 0, 0
	if a != b {
		return fmt.Errorf("model.attention is %+v in the checkpoint, %+v in this run; the encoders must match", a, b)
	}
	return nil
}

// sameVocabulary checks that the checkpoint's source vocabulary is the
// run's word for word, so that embedding rows mean the same words.
func sameVocabulary(saved []byte, tk train.Task) error {
	if saved == nil {
		return fmt.Errorf("the checkpoint has no source vocabulary")
	}
	var ckVocab datasets.Vocab
	if err := json.Unmarshal(saved, &ckVocab); err != nil {
		return fmt.Errorf("source vocabulary: %w", err)
	}
	stateful, ok := tk.(train.Stateful)
	if !ok {
		return fmt.Errorf("this run's task keeps no vocabulary")
	}
	st, err := stateful.State()
	if err != nil {
		return err
	}
	var runVocab datasets.Vocab
	if err := json.Unmarshal(st["src_vocab"], &runVocab); err != nil {
		return fmt.Errorf("this run's source vocabulary: %w", err)
	}
	a, b := ckVocab.Words(), runVocab.Words()
	if slices.Equal(a, b) {
		return nil
	}
	i := 0
	for i < min(len(a), len(b)) && a[i] == b[i] {
		i++
	}
	return fmt.Errorf("its source vocabulary (%d ids) differs from this run's (%d ids) from id %d on (%q there, %q here); pretrain on the same data (data.source, seed, train_pairs or train_file, min_count)",
		len(a), len(b), i, ckVocab.Word(i), runVocab.Word(i))
}

// copyEncoder copies the checkpoint's tensors whose names start with one
// of prefixes (src_emb.* and enc.*, say) into params, shape-checked;
// src_emb.table may have one more row ([MASK]), which is left out. Every
// such parameter of params must be covered. It returns the number of
// tensors copied.
func copyEncoder(ck *ckpt.Checkpoint, params *graph.Params, prefixes []string) (int, error) {
	isEncoder := func(name string) bool {
		return slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(name, p) })
	}
	seen := map[string]bool{}
	for _, tensor := range ck.Params {
		if !isEncoder(tensor.Name) {
			continue
		}
		p := params.Lookup(tensor.Name)
		if p == nil {
			return 0, fmt.Errorf("parameter %s has no counterpart in this run's model", tensor.Name)
		}
		values := tensor.Values
		if tensor.Name == "src_emb.table" && len(p.Shape) == 2 && slices.Equal(tensor.Shape, []int{p.Shape[0] + 1, p.Shape[1]}) {
			values = values[:p.Shape[0]*p.Shape[1]] // drop the [MASK] row
		} else if !slices.Equal(tensor.Shape, p.Shape) {
			return 0, fmt.Errorf("parameter %s: shape %v in the checkpoint, %v in this run", tensor.Name, tensor.Shape, p.Shape)
		}
		if err := p.SetValues(values); err != nil {
			return 0, fmt.Errorf("parameter %s: %w", tensor.Name, err)
		}
		seen[tensor.Name] = true
	}
	for _, p := range params.List() {
		if isEncoder(p.Name) && !seen[p.Name] {
			return 0, fmt.Errorf("this run's parameter %s is missing from the checkpoint", p.Name)
		}
	}
	return len(seen), nil
}
