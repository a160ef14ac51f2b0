package tasks

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"

	"github.com/probformer/probformer/cmd/trainer/train"
	"github.com/probformer/probformer/configs"
	"github.com/probformer/probformer/datasets"
	"github.com/probformer/probformer/graph"
	"github.com/probformer/probformer/layers"
	"github.com/probformer/probformer/losses"
)

// mlmTask pretrains a Transformer encoder as a masked language model
// (BERT, Devlin et al. 2019 §3.1) on the source side of a seq2seq corpus:
// a share data.mask_prob of the words is chosen, 80% of them become
// [MASK], 10% a random word and 10% stay, and the model predicts the
// original words there. Every sentence has at least one chosen word
// (datasets.MaskOptions.AtLeastOne), which raises the share on the toy
// language's short sentences (7.9 words on average) from 15% to about 19%.
//
// The source vocabulary is built exactly as task seq2seq builds it (same
// data, same options, so the same ids), and [MASK] takes the id past it,
// Size(); init.encoder_from then hands the encoder and the embedding's
// first Size() rows to a seq2seq run (init.go).
type mlmTask struct {
	cfg      *configs.Config
	modelCfg *TransformerModel
	corpus   datasets.ParallelCorpus
	train    [][]string // training sources within max_len, with a word each
	vocab    *datasets.Vocab
	model    layers.MaskedLM
	length   int // padded sentence length, data.max_len
	mask     datasets.MaskOptions
	unigram  int // the most frequent training word
	// valid and test are masked once, from fixed seeds, so that every
	// evaluation scores the same positions.
	valid, test mlmSplit
}

// mlmSplit is an evaluation split, masked and cut into eval batches.
type mlmSplit struct {
	sentences [][]string
	batches   []datasets.MaskedBatch
}

const mlmEvalBatch = 128

// PCG streams of the fixed maskings of the evaluation splits ("mlmvalid",
// "mlmtest").
const (
	mlmValidStream = 0x6d6c6d76616c6964
	mlmTestStream  = 0x6d6c6d74657374
)

func newMLMTask(cfg *configs.Config, d *MLMData, m *TransformerModel, state map[string][]byte) (*mlmTask, error) {
	t := &mlmTask{cfg: cfg, modelCfg: m, length: d.MaxLen}
	var err error
	if d.Source == "toy" {
		t.corpus, err = datasets.ToyLanguage(datasets.ToyLangConfig{Seed: cfg.Seed, Train: d.TrainPairs, Valid: d.ValidPairs, Test: d.TestPairs})
	} else {
		t.corpus, err = loadTSVCorpus(d.Corpus)
	}
	if err != nil {
		return nil, err
	}
	if t.vocab, err = mlmVocabulary(t.corpus.Train, d.MinCount, state); err != nil {
		return nil, err
	}
	t.mask = datasets.MaskOptions{Prob: d.MaskProb, MaskID: t.vocab.Size(), Vocab: t.vocab.Size(), AtLeastOne: true}
	t.train = t.maskable(t.corpus.Train)
	if len(t.train) == 0 {
		return nil, fmt.Errorf("data: no training sentence has a known word and at most data.max_len = %d tokens", d.MaxLen)
	}
	t.unigram = mostFrequentWord(t.train, t.vocab)
	for _, s := range []struct {
		dst    *mlmSplit
		pairs  []datasets.Pair
		stream uint64
		name   string
	}{{&t.valid, t.corpus.Valid, mlmValidStream, "validation"}, {&t.test, t.corpus.Test, mlmTestStream, "test"}} {
		if err := t.maskSplit(s.dst, s.pairs, rand.New(rand.NewPCG(cfg.Seed, s.stream))); err != nil {
			return nil, fmt.Errorf("%s set: %w", s.name, err)
		}
	}
	mc := layers.MaskedLMConfig{DModel: m.Dim, Heads: m.Heads, FF: m.FF, Layers: m.EncLayers, Dropout: m.Dropout,
		PreLN: m.PreLN, Vocab: t.vocab.Size(), MaxLen: t.length, Attention: m.Attention}
	if err := mc.Validate(); err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	t.model = layers.MaskedLM{Config: mc}
	return t, nil
}

// mlmVocabulary is the checkpoint's vocabulary when there is one, else
// the one task seq2seq builds from the same training sources.
func mlmVocabulary(train []datasets.Pair, minCount int, state map[string][]byte) (*datasets.Vocab, error) {
	if state["src_vocab"] != nil {
		v := new(datasets.Vocab)
		if err := json.Unmarshal(state["src_vocab"], v); err != nil {
			return nil, fmt.Errorf("checkpoint source vocabulary: %w", err)
		}
		return v, nil
	}
	srcs := make([][]string, len(train))
	for i, p := range train {
		srcs[i] = p.Src
	}
	v, err := datasets.BuildVocab(srcs, datasets.VocabOptions{MinCount: minCount})
	if err != nil {
		return nil, fmt.Errorf("source vocabulary: %w", err)
	}
	return v, nil
}

// maskable keeps the sources of at most max_len tokens that hold a word
// of the vocabulary, the only ones a masked LM can learn from.
func (t *mlmTask) maskable(pairs []datasets.Pair) [][]string {
	var out [][]string
	for _, p := range pairs {
		if len(p.Src) > t.length {
			continue
		}
		for _, id := range t.vocab.Encode(p.Src) {
			if id >= datasets.NumSpecial {
				out = append(out, p.Src)
				break
			}
		}
	}
	return out
}

// mostFrequentWord is the word id seen most often in sentences, the
// lowest id among ties.
func mostFrequentWord(sentences [][]string, v *datasets.Vocab) int {
	counts := make([]int, v.Size())
	for _, s := range sentences {
		for _, id := range v.Encode(s) {
			counts[id]++
		}
	}
	best := datasets.NumSpecial
	for id := datasets.NumSpecial; id < len(counts); id++ {
		if counts[id] > counts[best] {
			best = id
		}
	}
	return best
}

// encodeRows encodes sentences as rows of [len(sentences), length] ids and
// their padding mask; longer sentences are cut.
func encodeRows(sentences [][]string, v *datasets.Vocab, length int) ([]int, []float64) {
	ids, mask := make([]int, len(sentences)*length), make([]float64, len(sentences)*length)
	for r, s := range sentences {
		for i, id := range v.Encode(s[:min(len(s), length)]) {
			ids[r*length+i], mask[r*length+i] = id, 1
		}
	}
	return ids, mask
}

// maskSplit masks a split's maskable sources once, in batches of
// mlmEvalBatch rows; the last batch is filled up with copies of its first
// sentence, which predict nothing.
func (t *mlmTask) maskSplit(dst *mlmSplit, pairs []datasets.Pair, rng *rand.Rand) error {
	dst.sentences = t.maskable(pairs)
	if len(dst.sentences) == 0 {
		return fmt.Errorf("no sentence has a known word and at most data.max_len = %d tokens", t.length)
	}
	for start := 0; start < len(dst.sentences); start += mlmEvalBatch {
		chunk := dst.sentences[start:min(start+mlmEvalBatch, len(dst.sentences))]
		rows := append([][]string{}, chunk...)
		for len(rows) < mlmEvalBatch {
			rows = append(rows, chunk[0])
		}
		ids, mask := encodeRows(rows, t.vocab, t.length)
		mb, err := datasets.MaskTokens(rng, ids, mask, t.length, t.mask)
		if err != nil {
			return err
		}
		for i := len(chunk) * t.length; i < len(mb.LossMask); i++ {
			mb.LossMask[i] = 0
		}
		dst.batches = append(dst.batches, mb)
	}
	return nil
}

func (t *mlmTask) State() (map[string][]byte, error) {
	v, err := json.Marshal(t.vocab)
	if err != nil {
		return nil, err
	}
	return map[string][]byte{"src_vocab": v}, nil
}

func (t *mlmTask) Build(batch int) graph.BuildFunc {
	return func(b *graph.Builder) error {
		src, srcMask := b.IndexInput("src", batch, t.length), b.Input("src_mask", batch, t.length)
		targets, lossMask := b.IndexInput("targets", batch, t.length), b.Input("loss_mask", batch, t.length)
		smoothing := t.cfg.Training.LabelSmoothing
		var loss *graph.Node
		var err error
		if b.Training() {
			// The head is fused with the loss, which scores only the
			// masked positions (about 15%).
			h, w, bias := t.model.Encode(b, src, srcMask)
			loss, err = losses.ProjectedTokenCrossEntropy(b, h, w, bias, targets, lossMask, smoothing)
		} else {
			logits := t.model.Forward(b, src, srcMask)
			b.Output("logits", logits) // [B, S, Vocab]
			loss, err = losses.TokenCrossEntropy(b, "loss", logits, targets, lossMask, smoothing)
		}
		if err != nil {
			return err
		}
		return setObjective(b, loss, t.modelCfg.Attention.HeadDiversity)
	}
}

func feedMasked(prog *graph.Program, mb datasets.MaskedBatch) error {
	if err := prog.FeedIndices("src", mb.Inputs); err != nil {
		return err
	}
	if err := prog.FeedIndices("targets", mb.Targets); err != nil {
		return err
	}
	if err := prog.Feed("src_mask", mb.Mask); err != nil {
		return err
	}
	return prog.Feed("loss_mask", mb.LossMask)
}

// Feed draws the batch's sentences and its masking from rng, the
// run's data generator, so a resumed run masks as an uninterrupted one.
func (t *mlmTask) Feed(rng *rand.Rand, prog *graph.Program, _ int) error {
	rows := make([][]string, t.cfg.Training.Batch)
	for i := range rows {
		rows[i] = t.train[rng.IntN(len(t.train))]
	}
	ids, mask := encodeRows(rows, t.vocab, t.length)
	mb, err := datasets.MaskTokens(rng, ids, mask, t.length, t.mask)
	if err != nil {
		return err
	}
	return feedMasked(prog, mb)
}

func (t *mlmTask) EvalBatch() int { return mlmEvalBatch }

func (t *mlmTask) AtStep(prog *graph.Program, step, _ int) error {
	return train.FeedKLWeight(prog, t.cfg.Training.KLWeight, t.cfg.Training.KLWarmup, step)
}

func (t *mlmTask) Selection() (string, bool) { return "valid_accuracy", true }

func (t *mlmTask) split(name string) *mlmSplit {
	if name == "test" {
		return &t.test
	}
	return &t.valid
}

// mlmScores counts a split's masked-token predictions.
type mlmScores struct {
	loss, positions  float64                         // loss summed over positions
	correct, unigram float64                         // right model and unigram guesses
	copyUnigram      float64                         // right copy-else-unigram guesses
	byKind           [4]struct{ correct, n float64 } // by datasets.Corruption
	predictions      [][]int                         // [batch][B·S] argmax ids; nil: not run
}

// score runs the evaluation program over a split's fixed maskings.
func (t *mlmTask) score(prog *graph.Program, s *mlmSplit) (mlmScores, error) {
	var sc mlmScores
	for _, mb := range s.batches {
		var w float64
		for _, m := range mb.LossMask {
			w += m
		}
		if w == 0 {
			sc.predictions = append(sc.predictions, nil)
			continue
		}
		if err := feedMasked(prog, mb); err != nil {
			return sc, err
		}
		if err := prog.Run(); err != nil {
			return sc, err
		}
		sc.loss += prog.Loss() * w
		sc.positions += w
		logits, shape, err := prog.Output("logits")
		if err != nil {
			return mlmScores{}, err
		}
		v := shape[len(shape)-1]
		pred := make([]int, len(mb.Targets))
		for i, y := range mb.Targets {
			pred[i] = argmax(logits[i*v : (i+1)*v])
			if mb.LossMask[i] == 0 {
				continue
			}
			k := &sc.byKind[mb.Kind[i]]
			k.n++
			if pred[i] == y {
				sc.correct++
				k.correct++
			}
			if t.unigram == y {
				sc.unigram++
			}
			guess := mb.Inputs[i]
			if guess == t.mask.MaskID {
				guess = t.unigram
			}
			if guess == y {
				sc.copyUnigram++
			}
		}
		sc.predictions = append(sc.predictions, pred)
	}
	return sc, nil
}

// Evaluate reports the loss and the accuracy at the masked positions.
func (t *mlmTask) Evaluate(_ *graph.Params, prog *graph.Program, split string) (map[string]float64, error) {
	sc, err := t.score(prog, t.split(split))
	if err != nil {
		return nil, err
	}
	return map[string]float64{split + "_loss": sc.loss / sc.positions, split + "_accuracy": sc.correct / sc.positions}, nil
}

// Report implements train.Reporter: ReportResults without the results.
func (t *mlmTask) Report(w io.Writer, params *graph.Params, prog *graph.Program) error {
	_, err := t.ReportResults(w, params, prog)
	return err
}

// mlmCorruptions are the kinds of chosen positions, as the report names
// them, and their metric names.
var mlmCorruptions = []struct {
	kind         datasets.Corruption
	name, metric string
}{{datasets.Masked, "[MASK]", "masked"}, {datasets.Replaced, "random word", "replaced"}, {datasets.Unchanged, "unchanged", "unchanged"}}

// ReportResults implements train.ResultReporter: it prints the accuracy
// and loss at the test set's chosen positions next to two baselines, the
// accuracy by kind of corruption, and a few samples. The predictions are
// a TSV file with a header line, then one line per chosen position:
// the sentence's index among the test sentences the task keeps, the
// position in it (0-based), the input token there ([MASK], a random word
// or the word itself), the original word and the model's prediction.
func (t *mlmTask) ReportResults(w io.Writer, _ *graph.Params, prog *graph.Program) (train.Results, error) {
	sc, err := t.score(prog, &t.test)
	if err != nil {
		return train.Results{}, err
	}
	fmt.Fprintf(w, "test set: %d sentences, %.0f masked positions (mask_prob %g, seed %d); vocabulary %d ids + [MASK]\n",
		len(t.test.sentences), sc.positions, t.mask.Prob, t.cfg.Seed, t.vocab.Size())
	fmt.Fprintf(w, "%34s  %8s  %7s\n", "", "accuracy", "loss")
	fmt.Fprintf(w, "%34s  %8.4f  %7.4f\n", "model", sc.correct/sc.positions, sc.loss/sc.positions)
	unigram := fmt.Sprintf("unigram baseline (always %q)", t.vocab.Word(t.unigram))
	fmt.Fprintf(w, "%34s  %8.4f  %7s\n", unigram, sc.unigram/sc.positions, "—")
	fmt.Fprintf(w, "%34s  %8.4f  %7s\n", "copy the input, unigram at [MASK]", sc.copyUnigram/sc.positions, "—")
	res := train.Results{
		Metrics: map[string]float64{
			"test_accuracy": sc.correct / sc.positions, "test_loss": sc.loss / sc.positions,
			"test_positions": sc.positions, "test_samples": float64(len(t.test.sentences)),
		},
		Baselines: map[string]map[string]float64{
			"unigram":                       {"test_accuracy": sc.unigram / sc.positions},
			"copy input, unigram at [MASK]": {"test_accuracy": sc.copyUnigram / sc.positions},
		},
		Predictions: []train.Predictions{{
			Contents: "TSV: sentence, position, input, target, prediction of each chosen position",
			Write:    t.predictionTSV(sc.predictions),
		}},
	}
	fmt.Fprintf(w, "model accuracy by corruption:")
	for _, k := range mlmCorruptions {
		c := sc.byKind[k.kind]
		if c.n > 0 {
			fmt.Fprintf(w, "  %s %.4f (%d)", k.name, c.correct/c.n, int(c.n))
			res.Metrics["test_accuracy_"+k.metric] = c.correct / c.n
		}
	}
	fmt.Fprintf(w, "\n\nsamples (*chosen* positions):\n")
	mb, pred := t.test.batches[0], sc.predictions[0]
	for r := range min(5, len(t.test.sentences), len(pred)/t.length) {
		var in, truth, model []string
		for i := r * t.length; i < (r+1)*t.length && mb.Mask[i] == 1; i++ {
			tok := t.token
			if mb.LossMask[i] == 0 {
				in, truth, model = append(in, tok(mb.Inputs[i])), append(truth, tok(mb.Targets[i])), append(model, tok(mb.Inputs[i]))
				continue
			}
			in = append(in, "*"+tok(mb.Inputs[i])+"*")
			truth = append(truth, "*"+tok(mb.Targets[i])+"*")
			model = append(model, "*"+tok(pred[i])+"*")
		}
		fmt.Fprintf(w, "  input: %s\n  truth: %s\n  model: %s\n\n", strings.Join(in, " "), strings.Join(truth, " "), strings.Join(model, " "))
	}
	return res, nil
}

// token is the word of id, or [MASK].
func (t *mlmTask) token(id int) string {
	if id == t.mask.MaskID {
		return "[MASK]"
	}
	return t.vocab.Word(id)
}

// predictionTSV writes the model's predictions at the test set's chosen
// positions (ReportResults), from score's predictions of the test batches.
func (t *mlmTask) predictionTSV(predictions [][]int) func(io.Writer) error {
	return func(w io.Writer) error {
		bw := bufio.NewWriter(w)
		bw.WriteString("sentence\tposition\tinput\ttarget\tprediction\n")
		for b, pred := range predictions {
			mb := t.test.batches[b]
			for i := range pred {
				if mb.LossMask[i] == 0 {
					continue
				}
				fmt.Fprintf(bw, "%d\t%d\t%s\t%s\t%s\n", b*mlmEvalBatch+i/t.length, i%t.length,
					t.token(mb.Inputs[i]), t.token(mb.Targets[i]), t.token(pred[i]))
			}
		}
		return bw.Flush()
	}
}
