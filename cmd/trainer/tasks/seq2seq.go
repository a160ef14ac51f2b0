package tasks

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/probformer/probformer/cmd/trainer/train"
	"github.com/probformer/probformer/configs"
	"github.com/probformer/probformer/datasets"
	"github.com/probformer/probformer/graph"
	"github.com/probformer/probformer/layers"
	"github.com/probformer/probformer/losses"
)

// Seq2Seq translates sentences with a Transformer, scored by BLEU.
//
// A task built from a checkpoint's state (its vocabularies) reads no data
// file: translation needs only the vocabularies and the weights. Training
// and evaluation read their splits on first use, or up front through
// LoadSplits, which names the file that fails.
type Seq2Seq struct {
	cfg        *configs.Config
	dataCfg    *Seq2SeqData
	modelCfg   *TransformerModel
	corpus     datasets.ParallelCorpus
	loaded     map[string]bool // the splits of corpus read so far
	train      []datasets.Pair // training pairs within max_len
	src, tgt   *datasets.Vocab
	model      layers.Seq2Seq
	srcLen     int // padded source length
	tgtLen     int // padded decoder length: max_len words + <eos>
	translator *layers.Translator
	rows       int         // the translator's batch rows
	order      *epochOrder // data.sampling epochs: the training pairs' order
}

const seq2seqEvalBatch = 128

// seq2seqSplits are the splits LoadSplits reads, in order.
var seq2seqSplits = []string{"train", "valid", "test"}

// newSeq2Seq builds the task. With a checkpoint's state it takes the
// vocabularies from there and reads no data; a new run (state without
// vocabularies) reads all three splits and builds the vocabularies from
// the training split.
func newSeq2Seq(cfg *configs.Config, d *Seq2SeqData, m *TransformerModel, state map[string][]byte) (*Seq2Seq, error) {
	t := &Seq2Seq{cfg: cfg, dataCfg: d, modelCfg: m, srcLen: d.MaxLen, tgtLen: d.MaxLen + 1, loaded: map[string]bool{}}
	if state["src_vocab"] == nil {
		if err := t.LoadSplits(seq2seqSplits...); err != nil {
			return nil, err
		}
	}
	if err := t.vocabularies(state); err != nil {
		return nil, err
	}
	sc := layers.Seq2SeqConfig{DModel: m.Dim, Heads: m.Heads, FF: m.FF, EncLayers: m.EncLayers, DecLayers: m.DecLayers,
		Dropout: m.Dropout, PreLN: m.PreLN, FinalNorm: m.FinalNorm, TieOutput: m.TieOutput, SrcVocab: t.src.Size(), TgtVocab: t.tgt.Size(), MaxLen: t.tgtLen,
		Attention: m.Attention}
	if err := sc.Validate(); err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	t.model = layers.Seq2Seq{Config: sc}
	return t, nil
}

// LoadSplits reads the named splits ("train", "valid", "test") that are
// not read yet: with data.source tsv only their files (data.train_file,
// …), with toy the whole generated corpus. Errors name the config key and
// the file. Training needs "train" (and "valid" to select checkpoints),
// `trainer eval` only "test"; translation needs none.
func (t *Seq2Seq) LoadSplits(splits ...string) error {
	d := t.dataCfg.Corpus
	for _, split := range splits {
		if !slices.Contains(seq2seqSplits, split) {
			return fmt.Errorf("data: no split %q (train, valid or test)", split)
		}
		if t.loaded[split] {
			continue
		}
		if d.Source == "toy" {
			c, err := datasets.ToyLanguage(datasets.ToyLangConfig{Seed: t.cfg.Seed, Train: d.TrainPairs, Valid: d.ValidPairs, Test: d.TestPairs})
			if err != nil {
				return err
			}
			t.corpus = c
			for _, s := range seq2seqSplits {
				t.loaded[s] = true
			}
		} else {
			pairs, err := loadTSVSplit(d, split)
			if err != nil {
				return err
			}
			*t.splitPtr(split) = pairs
			t.loaded[split] = true
		}
		if err := t.trainingPairs(); err != nil {
			return err
		}
	}
	return nil
}

// trainingPairs keeps the training pairs within max_len once the training
// split is read, and orders them for data.sampling epochs.
func (t *Seq2Seq) trainingPairs() error {
	if !t.loaded["train"] || t.train != nil {
		return nil
	}
	for _, p := range t.corpus.Train {
		if len(p.Src) <= t.dataCfg.MaxLen && len(p.Tgt) <= t.dataCfg.MaxLen {
			t.train = append(t.train, p)
		}
	}
	if len(t.train) == 0 {
		return fmt.Errorf("data: no training pair has at most data.max_len = %d tokens a side", t.dataCfg.MaxLen)
	}
	t.order = newEpochOrder(t.cfg.Seed, len(t.train))
	return nil
}

// splitPtr is the corpus field of a split.
func (t *Seq2Seq) splitPtr(split string) *[]datasets.Pair {
	switch split {
	case "train":
		return &t.corpus.Train
	case "valid":
		return &t.corpus.Valid
	}
	return &t.corpus.Test
}

// loadTSVSplit reads the TSV file of one split; errors name its config key.
func loadTSVSplit(d Corpus, split string) ([]datasets.Pair, error) {
	path := map[string]string{"train": d.TrainFile, "valid": d.ValidFile, "test": d.TestFile}[split]
	opt := datasets.TSVOptions{Lowercase: d.Lowercase, SkipMalformed: d.SkipMalformed}
	pairs, _, err := datasets.LoadParallelTSV(path, opt)
	if err != nil {
		return nil, fmt.Errorf("data.%s_file: %w", split, err)
	}
	if len(pairs) == 0 {
		return nil, fmt.Errorf("data.%s_file: %s holds no sentence pair", split, path)
	}
	return pairs, nil
}

// loadTSVCorpus reads all three TSV splits (the masked-LM task's data).
func loadTSVCorpus(d Corpus) (datasets.ParallelCorpus, error) {
	var c datasets.ParallelCorpus
	for _, f := range []struct {
		split string
		dst   *[]datasets.Pair
	}{{"train", &c.Train}, {"valid", &c.Valid}, {"test", &c.Test}} {
		pairs, err := loadTSVSplit(d, f.split)
		if err != nil {
			return c, err
		}
		*f.dst = pairs
	}
	return c, nil
}

// vocabularies come from the checkpoint when resuming or evaluating, so the
// model's ids never change; a new run builds them from the training split.
func (t *Seq2Seq) vocabularies(state map[string][]byte) error {
	if state["src_vocab"] != nil {
		t.src, t.tgt = new(datasets.Vocab), new(datasets.Vocab)
		if err := json.Unmarshal(state["src_vocab"], t.src); err != nil {
			return fmt.Errorf("checkpoint source vocabulary (src_vocab): %w", err)
		}
		if err := json.Unmarshal(state["tgt_vocab"], t.tgt); err != nil {
			return fmt.Errorf("checkpoint target vocabulary (tgt_vocab): %w", err)
		}
		return nil
	}
	var srcs, tgts [][]string
	for _, p := range t.corpus.Train {
		srcs, tgts = append(srcs, p.Src), append(tgts, p.Tgt)
	}
	opt := datasets.VocabOptions{MinCount: t.dataCfg.MinCount}
	var err error
	if t.src, err = datasets.BuildVocab(srcs, opt); err != nil {
		return fmt.Errorf("source vocabulary: %w", err)
	}
	if t.tgt, err = datasets.BuildVocab(tgts, opt); err != nil {
		return fmt.Errorf("target vocabulary: %w", err)
	}
	return nil
}

// State implements train.Stateful: the source and target vocabularies.
func (t *Seq2Seq) State() (map[string][]byte, error) {
	src, err := json.Marshal(t.src)
	if err != nil {
		return nil, err
	}
	tgt, err := json.Marshal(t.tgt)
	if err != nil {
		return nil, err
	}
	return map[string][]byte{"src_vocab": src, "tgt_vocab": tgt}, nil
}

// Build implements train.Task: the teacher-forced Transformer and its
// label-smoothed cross-entropy, with the model's penalties (train.Objective).
func (t *Seq2Seq) Build(batch int) graph.BuildFunc {
	return t.buildModel(t.model, batch, false)
}

// buildModel is model's teacher-forced graph and loss on a batch, with the
// logits as an output if asked. Without them the output projection is
// fused with the loss, which then skips the padded positions.
func (t *Seq2Seq) buildModel(model layers.Seq2Seq, batch int, logitsOut bool) graph.BuildFunc {
	return func(b *graph.Builder) error {
		src, srcMask := b.IndexInput("src", batch, t.srcLen), b.Input("src_mask", batch, t.srcLen)
		tgtIn, tgtMask := b.IndexInput("tgt_in", batch, t.tgtLen), b.Input("tgt_mask", batch, t.tgtLen)
		tgtOut, lossMask := b.IndexInput("tgt_out", batch, t.tgtLen), b.Input("loss_mask", batch, t.tgtLen)
		smoothing := t.cfg.Training.LabelSmoothing
		var loss *graph.Node
		var err error
		if logitsOut {
			logits := model.Forward(b, src, srcMask, tgtIn, tgtMask)
			b.Output("logits", logits)
			loss, err = losses.TokenCrossEntropy(b, "loss", logits, tgtOut, lossMask, smoothing)
		} else {
			h, w, bias := model.Decode(b, src, srcMask, tgtIn, tgtMask)
			loss, err = losses.ProjectedTokenCrossEntropy(b, h, w, bias, tgtOut, lossMask, smoothing)
		}
		if err != nil {
			return err
		}
		return setObjective(b, loss, t.modelCfg.Attention.HeadDiversity)
	}
}

func feedPairs(prog *graph.Program, batch datasets.Batch) error {
	for _, f := range []struct {
		name string
		ids  []int
	}{{"src", batch.Src}, {"tgt_in", batch.DecIn}, {"tgt_out", batch.DecOut}} {
		if err := prog.FeedIndices(f.name, f.ids); err != nil {
			return err
		}
	}
	for _, f := range []struct {
		name string
		v    []float64
	}{{"src_mask", batch.SrcMask}, {"tgt_mask", batch.TgtMask}, {"loss_mask", batch.TgtMask}} {
		if err := prog.Feed(f.name, f.v); err != nil {
			return err
		}
	}
	return nil
}

// Feed implements train.Task: the batch of training pairs of step.
func (t *Seq2Seq) Feed(rng *rand.Rand, prog *graph.Program, step int) error {
	if err := t.LoadSplits("train"); err != nil {
		return err
	}
	batch, err := datasets.EncodeBatch(t.batchPairs(rng, step), t.src, t.tgt, t.srcLen, t.tgtLen)
	if err != nil {
		return err
	}
	return feedPairs(prog, batch)
}

// batchPairs draws the training pairs of step (1-based): with data.sampling
// epochs the next ones of the epoch order, else uniformly from rng.
func (t *Seq2Seq) batchPairs(rng *rand.Rand, step int) []datasets.Pair {
	pairs := make([]datasets.Pair, t.cfg.Training.Batch)
	for i := range pairs {
		if t.dataCfg.Sampling == "epochs" {
			pairs[i] = t.train[t.order.at((step-1)*len(pairs)+i)]
			continue
		}
		pairs[i] = t.train[rng.IntN(len(t.train))]
	}
	return pairs
}

// EvalBatch implements train.Task.
func (t *Seq2Seq) EvalBatch() int { return seq2seqEvalBatch }

// AtStep implements train.StepAware: the annealed KL weight.
func (t *Seq2Seq) AtStep(prog *graph.Program, step, _ int) error {
	return train.FeedKLWeight(prog, t.cfg.Training.KLWeight, t.cfg.Training.KLWarmup, step)
}

// Selection implements train.Task: the highest validation BLEU.
func (t *Seq2Seq) Selection() (string, bool) { return "valid_bleu", true }

// split returns the pairs of split "valid" or "test", read on first use.
func (t *Seq2Seq) split(name string) ([]datasets.Pair, error) {
	if name != "test" {
		name = "valid"
	}
	if err := t.LoadSplits(name); err != nil {
		return nil, err
	}
	return *t.splitPtr(name), nil
}

// Evaluate implements train.Task: the teacher-forced loss and the greedy
// BLEU of a split.
func (t *Seq2Seq) Evaluate(params *graph.Params, prog *graph.Program, split string) (map[string]float64, error) {
	pairs, err := t.split(split)
	if err != nil {
		return nil, err
	}
	batches, err := t.paddedBatches(pairs, seq2seqEvalBatch)
	if err != nil {
		return nil, err
	}
	var lossSum, weight float64
	for _, batch := range batches {
		if err := feedPairs(prog, batch); err != nil {
			return nil, err
		}
		if err := prog.Run(); err != nil {
			return nil, fmt.Errorf("evaluate %s: %w", split, err)
		}
		var w float64
		for _, m := range batch.TgtMask {
			w += m
		}
		lossSum += prog.Loss() * w
		weight += w
	}
	bleu, _, err := t.bleu(params, pairs, 1)
	if err != nil {
		return nil, err
	}
	return map[string]float64{split + "_loss": lossSum / weight, split + "_bleu": bleu.Score}, nil
}

// paddedBatches encodes pairs in batches of rows pairs each, the last one
// padded with copies of its first pair whose target mask is 0, so that
// they do not count.
func (t *Seq2Seq) paddedBatches(pairs []datasets.Pair, rows int) ([]datasets.Batch, error) {
	var out []datasets.Batch
	for start := 0; start < len(pairs); start += rows {
		chunk := pairs[start:min(start+rows, len(pairs))]
		padded := append(append([]datasets.Pair{}, chunk...), make([]datasets.Pair, rows-len(chunk))...)
		for i := len(chunk); i < len(padded); i++ {
			padded[i] = chunk[0]
		}
		batch, err := datasets.EncodeBatch(padded, t.src, t.tgt, t.srcLen, t.tgtLen)
		if err != nil {
			return nil, err
		}
		for i := len(chunk) * t.tgtLen; i < len(batch.TgtMask); i++ {
			batch.TgtMask[i] = 0
		}
		out = append(out, batch)
	}
	return out, nil
}

// decoder returns the translator, compiled once over the run's parameters.
func (t *Seq2Seq) decoder(params *graph.Params, rows int) (*layers.Translator, error) {
	if t.translator == nil || t.rows != rows {
		tr, err := layers.NewTranslator(params, t.model, rows, t.srcLen, t.tgtLen)
		if err != nil {
			return nil, err
		}
		t.translator, t.rows = tr, rows
	}
	return t.translator, nil
}

// decode translates sources with greedy search (beam 1) or beam search.
func (t *Seq2Seq) decode(params *graph.Params, srcs [][]string, beam int) ([][]string, error) {
	out := make([][]string, len(srcs))
	ids := make([][]int, len(srcs))
	for i, s := range srcs {
		if len(s) > t.srcLen {
			s = s[:t.srcLen]
		}
		ids[i] = t.src.Encode(s)
	}
	if beam <= 1 {
		tr, err := t.decoder(params, seq2seqEvalBatch)
		if err != nil {
			return nil, err
		}
		for start := 0; start < len(ids); start += seq2seqEvalBatch {
			hyps, err := layers.Greedy(tr, ids[start:min(start+seq2seqEvalBatch, len(ids))], t.tgtLen)
			if err != nil {
				return nil, err
			}
			for i, h := range hyps {
				out[start+i] = t.tgt.Decode(h.Tokens)
			}
		}
		return out, nil
	}
	// The beams of several sentences fill each batch of the translator.
	rows := beam * max(1, seq2seqEvalBatch/beam)
	tr, err := t.decoder(params, rows)
	if err != nil {
		return nil, err
	}
	hyps, err := layers.BeamSearchBatch(tr, ids, layers.BeamOptions{Size: beam, MaxLen: t.tgtLen, Alpha: t.cfg.Training.LengthPenalty}, rows)
	if err != nil {
		return nil, err
	}
	for i, h := range hyps {
		out[i] = t.tgt.Decode(h[0].Tokens)
	}
	return out, nil
}

// bleu decodes pairs and scores them against their targets, on text that
// is already tokenized.
func (t *Seq2Seq) bleu(params *graph.Params, pairs []datasets.Pair, beam int) (losses.BLEUScore, [][]string, error) {
	srcs := make([][]string, len(pairs))
	refs := make([]string, len(pairs))
	for i, p := range pairs {
		srcs[i], refs[i] = p.Src, strings.Join(p.Tgt, " ")
	}
	hyps, err := t.decode(params, srcs, beam)
	if err != nil {
		return losses.BLEUScore{}, nil, err
	}
	text := make([]string, len(hyps))
	for i, h := range hyps {
		text[i] = strings.Join(h, " ")
	}
	score, err := losses.CorpusBLEU(text, [][]string{refs}, losses.BLEUOptions{Tokenize: losses.TokenizerNone})
	return score, hyps, err
}

// Report implements train.Reporter: ReportResults without the results.
func (t *Seq2Seq) Report(w io.Writer, params *graph.Params, prog *graph.Program) error {
	_, err := t.ReportResults(w, params, prog)
	return err
}

// ReportResults implements train.ResultReporter: it prints test BLEU with
// greedy and beam decoding (training.beam) and a few sample translations,
// and returns both scores, test_bleu (greedy, as Evaluate scores it) and
// test_bleu_beam, with the translations behind them. The predictions are
// the greedy translations, one a line in test-set order, then as
// siblings the sources (.src), the references (.ref) and the beam
// translations (.beam), tokenized as the model reads them, so that
// `trainer bleu --tokenize none FILE FILE.ref` prints test_bleu and
// `trainer bleu --tokenize none FILE.beam FILE.ref` test_bleu_beam.
func (t *Seq2Seq) ReportResults(w io.Writer, params *graph.Params, _ *graph.Program) (train.Results, error) {
	if err := t.LoadSplits("test"); err != nil {
		return train.Results{}, err
	}
	test := t.corpus.Test
	fmt.Fprintf(w, "test set: %d sentence pairs; vocabularies %d source, %d target words\n",
		len(test), t.src.Size(), t.tgt.Size())
	greedy, hyps, err := t.bleu(params, test, 1)
	if err != nil {
		return train.Results{}, err
	}
	beam, beamHyps, err := t.bleu(params, test, t.cfg.Training.Beam)
	if err != nil {
		return train.Results{}, err
	}
	fmt.Fprintf(w, "greedy:          %s\n", greedy)
	fmt.Fprintf(w, "beam %d (lp %.1f): %s\n", t.cfg.Training.Beam, t.cfg.Training.LengthPenalty, beam)
	fmt.Fprintf(w, "signature: %s\n\nsamples (greedy):\n", greedy.Signature)
	for i := range min(5, len(hyps)) {
		p := test[i]
		fmt.Fprintf(w, "  src: %s\n  ref: %s\n  hyp: %s\n\n", strings.Join(p.Src, " "), strings.Join(p.Tgt, " "), strings.Join(hyps[i], " "))
	}
	srcs, refs := make([][]string, len(test)), make([][]string, len(test))
	for i, p := range test {
		srcs[i], refs[i] = p.Src, p.Tgt
	}
	return train.Results{
		Metrics: map[string]float64{
			"test_bleu": greedy.Score, "test_bleu_beam": beam.Score,
			"test_beam": float64(t.cfg.Training.Beam), "test_samples": float64(len(test)),
		},
		Predictions: []train.Predictions{
			{Suffix: "", Contents: "greedy translations, scored as test_bleu", Write: sentenceLines(hyps)},
			{Suffix: ".src", Contents: "sources", Write: sentenceLines(srcs)},
			{Suffix: ".ref", Contents: "references", Write: sentenceLines(refs)},
			{Suffix: ".beam", Contents: fmt.Sprintf("beam-%d translations, scored as test_bleu_beam", t.cfg.Training.Beam), Write: sentenceLines(beamHyps)},
		},
	}, nil
}

// sentenceLines writes tokenized sentences one a line, their words
// joined by spaces, as the BLEU of the report scores them.
func sentenceLines(sentences [][]string) func(io.Writer) error {
	return func(w io.Writer) error {
		bw := bufio.NewWriter(w)
		for _, s := range sentences {
			bw.WriteString(strings.Join(s, " "))
			bw.WriteByte('\n')
		}
		return bw.Flush()
	}
}

// Examples implements train.Sized: the training pairs within max_len and
// the validation pairs, once read.
func (t *Seq2Seq) Examples(split string) (int, bool) {
	if !t.loaded[split] {
		return 0, false
	}
	switch split {
	case "train":
		return len(t.train), true
	case "valid":
		return len(t.corpus.Valid), true
	}
	return 0, false
}
