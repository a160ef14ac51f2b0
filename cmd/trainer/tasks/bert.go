package tasks

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/probformer/probformer/cmd/trainer/train"
	"github.com/probformer/probformer/configs"
	"github.com/probformer/probformer/datasets"
	"github.com/probformer/probformer/graph"
	"github.com/probformer/probformer/layers"
	"github.com/probformer/probformer/losses"
)

// bertTask pretrains a Transformer encoder as BERT does (Devlin et al.
// 2019, §3.1): masked LM and next-sentence prediction at once, on sentence
// pairs [CLS] S [SEP] S′ [SEP] with segment embeddings (layers.BERT). The
// pairs come from two-sentence toy stories (datasets.ToyStories), whose
// second sentence refers back to the first: half the pairs are a story's
// own two sentences (y = 1), half its first sentence and the second
// sentence of another story (y = 0), drawn afresh at every step. The
// masking is task mlm's (datasets.MaskTokens, 80/10/10, at least one
// word a pair); [CLS] is <bos> and [SEP] <eos>, which are never masked.
//
// The objective is the sum of the two means, the MLM cross-entropy over
// the masked positions and the NSP cross-entropy over the pairs, of the
// step's whole batch. Data-parallel shards and accumulated micro-batches
// (train: each a block of the whole batch, weighed by its loss weight)
// hold unequal counts of masked positions, so a shard's two means weighed
// by either count would be only close to it. Instead Feed, which draws
// the whole batch, feeds its pairs per masked position N/M (input
// mlm_scale), and a shard of n pairs, m of its positions masked, has the
// loss ((mean MLM loss)·m·N/M + Σ NSP losses)/n with loss weight n: the
// shards' weighed mean is then Σ MLM/M + Σ NSP/N, the whole batch's
// objective exactly (up to the order of the float sums).
//
// With data.source tsv the pairs are a parallel corpus's lines instead,
// both languages in one vocabulary: S the source side, S′ its own target
// (y = 1, "S′ is the translation of S") or the target of another line of
// the split (y = 0), segment 0 the source and 1 the target. data.mask_prob
// 0 then trains the pair classifier alone (BERT's fine-tuning, no MLM
// head); a positive one adds the masked LM over both sides. A positive
// data.train_pairs keeps the training file's first lines alone (a
// labelled subset; the lines are pairs drawn at random from it, and
// the negatives are drawn from it too), with the vocabulary of the
// whole file, so that a run on a subset and a pretraining on the whole
// file share it (init.encoder_from).
//
// With data.pairs true_only every pair is true (a line and its own
// translation, a story's own two sentences) and there is no NSP head: the
// masked LM alone, over both sentences (XLM's translation LM), a
// pretraining that sees no pair label. Its checkpoint starts a pair
// classifier through init.encoder_from, the pooler afresh.
type bertTask struct {
	cfg      *configs.Config
	modelCfg *TransformerModel
	train    []datasets.Story
	vocab    *datasets.Vocab
	model    layers.BERT
	length   int // padded pair length, data.max_len
	mask     datasets.MaskOptions
	unigram  int  // the most frequent training word
	toy      bool // toy stories, else a TSV corpus's translation pairs
	mlm      bool // the masked LM is trained (data.mask_prob > 0)
	nsp      bool // the pairs are labelled and the NSP head trained (data.pairs)
	// valid and test pair and mask their stories once, from fixed seeds.
	valid, test bertSplit
}

// bertSplit is an evaluation split: its pairs, masked and cut into eval
// batches.
type bertSplit struct {
	first, second [][]string // the pairs' sentences
	isNext        []int      // their labels, 1 for a true successor
	batches       []bertBatch
}

// bertBatch is a batch of pairs, row-major [B, Len].
type bertBatch struct {
	mb       datasets.MaskedBatch
	segments []int
	isNext   []int // [B]
	real     int   // the first real rows are pairs, the others fill up
}

// PCG streams of the fixed pairings and maskings of the evaluation splits
// ("bertval", "berttest").
const (
	bertValidStream = 0x6265727476616c
	bertTestStream  = 0x6265727474657374
)

func newBERTTask(cfg *configs.Config, d *BERTData, m *TransformerModel, state map[string][]byte) (*bertTask, error) {
	t := &bertTask{cfg: cfg, modelCfg: m, length: d.MaxLen, toy: d.Source == "toy", mlm: d.MaskProb > 0, nsp: d.nsp()}
	var corpus datasets.StoryCorpus
	var err error
	if t.toy {
		corpus, err = datasets.ToyStories(datasets.ToyStoryConfig{Seed: cfg.Seed, Train: d.TrainPairs, Valid: d.ValidPairs, Test: d.TestPairs})
	} else {
		corpus, err = translationPairs(d.Corpus)
	}
	if err != nil {
		return nil, err
	}
	t.train = corpus.Train
	if t.vocab, err = bertVocabulary(corpus.Train, d.MinCount, state); err != nil {
		return nil, err
	}
	if !t.toy && d.TrainPairs > 0 {
		// A labelled subset: the vocabulary stays the whole file's, the
		// pretraining's, as BERT's fine-tuning keeps its tokenizer.
		if d.TrainPairs > len(t.train) {
			return nil, fmt.Errorf("data.train_pairs = %d: the training file has %d pairs", d.TrainPairs, len(t.train))
		}
		t.train = t.train[:d.TrainPairs]
	}
	t.mask = datasets.MaskOptions{Prob: d.MaskProb, MaskID: t.vocab.Size(), Vocab: t.vocab.Size(), AtLeastOne: true}
	var sentences [][]string
	for _, s := range t.train {
		sentences = append(sentences, s.First, s.Second)
	}
	t.unigram = mostFrequentWord(sentences, t.vocab)
	for _, s := range []struct {
		dst     *bertSplit
		stories []datasets.Story
		stream  uint64
		name    string
	}{{&t.valid, corpus.Valid, bertValidStream, "validation"}, {&t.test, corpus.Test, bertTestStream, "test"}} {
		if len(s.stories) < 2 {
			return nil, fmt.Errorf("%s set: %d stories, want at least 2 to pair", s.name, len(s.stories))
		}
		if err := t.pairSplit(s.dst, s.stories, rand.New(rand.NewPCG(cfg.Seed, s.stream))); err != nil {
			return nil, fmt.Errorf("%s set: %w", s.name, err)
		}
	}
	mc := layers.MaskedLMConfig{DModel: m.Dim, Heads: m.Heads, FF: m.FF, Layers: m.EncLayers, Dropout: m.Dropout,
		PreLN: m.PreLN, Vocab: t.vocab.Size(), MaxLen: t.length, Attention: m.Attention}
	if err := mc.Validate(); err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	t.model = layers.BERT{Config: mc}
	return t, nil
}

// translationPairs reads a TSV parallel corpus as pairs S = source, S′ =
// its translation.
func translationPairs(d Corpus) (datasets.StoryCorpus, error) {
	pc, err := loadTSVCorpus(d)
	if err != nil {
		return datasets.StoryCorpus{}, err
	}
	conv := func(pairs []datasets.Pair) []datasets.Story {
		out := make([]datasets.Story, len(pairs))
		for i, p := range pairs {
			out[i] = datasets.Story{First: p.Src, Second: p.Tgt}
		}
		return out
	}
	return datasets.StoryCorpus{Train: conv(pc.Train), Valid: conv(pc.Valid), Test: conv(pc.Test)}, nil
}

// bertVocabulary is the checkpoint's vocabulary when there is one, else
// the words of the training stories.
func bertVocabulary(train []datasets.Story, minCount int, state map[string][]byte) (*datasets.Vocab, error) {
	if state["src_vocab"] != nil {
		v := new(datasets.Vocab)
		if err := json.Unmarshal(state["src_vocab"], v); err != nil {
			return nil, fmt.Errorf("checkpoint vocabulary: %w", err)
		}
		return v, nil
	}
	var sentences [][]string
	for _, s := range train {
		sentences = append(sentences, s.First, s.Second)
	}
	v, err := datasets.BuildVocab(sentences, datasets.VocabOptions{MinCount: minCount})
	if err != nil {
		return nil, fmt.Errorf("vocabulary: %w", err)
	}
	return v, nil
}

// fitPair cuts a pair to fit [CLS] a [SEP] b [SEP] in length tokens,
// dropping the last token of the longer sentence first, as BERT's
// truncate_seq_pair; length must be at least 5.
func fitPair(a, b []int, length int) ([]int, []int) {
	for len(a)+len(b)+3 > length {
		if len(a) > len(b) {
			a = a[:len(a)-1]
		} else {
			b = b[:len(b)-1]
		}
	}
	return a, b
}

// encodePairs lays out and masks a batch of pairs.
func (t *bertTask) encodePairs(rng *rand.Rand, first, second [][]string, isNext []int) (bertBatch, error) {
	n := len(first)
	ids, segs, mask := make([]int, 0, n*t.length), make([]int, 0, n*t.length), make([]float64, 0, n*t.length)
	for r := range n {
		a, b := fitPair(t.vocab.Encode(first[r]), t.vocab.Encode(second[r]), t.length)
		i, s, m, _ := datasets.EncodePair(a, b, datasets.BOSID, datasets.EOSID, t.length)
		ids, segs, mask = append(ids, i...), append(segs, s...), append(mask, m...)
	}
	if !t.mlm {
		mb := datasets.MaskedBatch{B: n, Len: t.length, Inputs: ids, Targets: ids, Mask: mask,
			LossMask: make([]float64, len(ids)), Kind: make([]datasets.Corruption, len(ids))}
		return bertBatch{mb: mb, segments: segs, isNext: isNext, real: n}, nil
	}
	mb, err := datasets.MaskTokens(rng, ids, mask, t.length, t.mask)
	if err != nil {
		return bertBatch{}, err
	}
	return bertBatch{mb: mb, segments: segs, isNext: isNext, real: n}, nil
}

// pairSplit pairs a split's stories once (t.pair) and masks the pairs, in
// batches of mlmEvalBatch rows; the last batch is filled up with copies of
// its first pair, which count for nothing.
func (t *bertTask) pairSplit(dst *bertSplit, stories []datasets.Story, rng *rand.Rand) error {
	for i := range stories {
		a, b, next := t.pair(rng, stories, i)
		dst.first, dst.second = append(dst.first, a), append(dst.second, b)
		dst.isNext = append(dst.isNext, boolInt(next))
	}
	for start := 0; start < len(stories); start += mlmEvalBatch {
		end := min(start+mlmEvalBatch, len(stories))
		first, second, isNext := dst.first[start:end:end], dst.second[start:end:end], dst.isNext[start:end:end]
		for len(first) < mlmEvalBatch {
			first, second, isNext = append(first, first[0]), append(second, second[0]), append(isNext, isNext[0])
		}
		bb, err := t.encodePairs(rng, first, second, isNext)
		if err != nil {
			return err
		}
		bb.real = end - start
		for i := bb.real * t.length; i < len(bb.mb.LossMask); i++ {
			bb.mb.LossMask[i] = 0
		}
		dst.batches = append(dst.batches, bb)
	}
	return nil
}

// pair is the pair of story i: datasets.NSPPair's, or with data.pairs
// true_only the story's own two sentences, drawing nothing.
func (t *bertTask) pair(rng *rand.Rand, stories []datasets.Story, i int) (first, second []string, isNext bool) {
	if !t.nsp {
		return stories[i].First, stories[i].Second, true
	}
	return datasets.NSPPair(rng, stories, i)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (t *bertTask) State() (map[string][]byte, error) {
	v, err := json.Marshal(t.vocab)
	if err != nil {
		return nil, err
	}
	// Named as task mlm's, for init.encoder_from (cmd/trainer/cli).
	return map[string][]byte{"src_vocab": v}, nil
}

func (t *bertTask) Build(batch int) graph.BuildFunc {
	return func(b *graph.Builder) error {
		src, segs := b.IndexInput("src", batch, t.length), b.IndexInput("segments", batch, t.length)
		srcMask := b.Input("src_mask", batch, t.length)
		smoothing := t.cfg.Training.LabelSmoothing
		z := t.model.Encode(b, src, segs, srcMask)
		var nsp *graph.Node
		if t.nsp {
			isNext := b.IndexInput("is_next", batch, 1)
			nspLogits := layers.NSPHead(b, z) // [B, 2]
			if !b.Training() {
				b.Output("nsp_logits", nspLogits)
			}
			// A mean over the pairs, without a mask: no loss weight,
			// equal shards weigh the same.
			var err error
			nsp, err = losses.TokenCrossEntropy(b, "nsp", graph.Reshape(nspLogits, batch, 1, layers.NSPClasses), isNext, nil, smoothing)
			if err != nil {
				return err
			}
			if !t.mlm {
				return setObjective(b, nsp, t.modelCfg.Attention.HeadDiversity)
			}
		}
		targets, lossMask := b.IndexInput("targets", batch, t.length), b.Input("loss_mask", batch, t.length)
		w, bias := t.model.MLMHead(b, z)
		var mlm *graph.Node
		var err error
		if b.Training() {
			// The head is fused with the loss, which scores only the
			// masked positions.
			mlm, err = losses.ProjectedTokenCrossEntropy(b, z, w, bias, targets, lossMask, smoothing)
		} else {
			logits := graph.Linear(z, w, bias)
			b.Output("mlm_logits", logits) // [B, S, Vocab]
			mlm, err = losses.TokenCrossEntropy(b, "mlm", logits, targets, lossMask, smoothing)
		}
		if err != nil {
			return err
		}
		if !t.nsp {
			// One mean over the masked positions, weighed by their count.
			return setObjective(b, mlm, t.modelCfg.Attention.HeadDiversity)
		}
		if b.Training() {
			// The whole batch's two means from this shard's part
			// (bertTask): (mean MLM·m·N/M + Σ NSP)/n, loss weight n.
			scale := graph.Sum(b.Input(bertMLMScaleInput, 1))     // N/M
			pairs := graph.Sum(graph.SliceAxis(srcMask, 1, 0, 1)) // n: every [CLS] is real
			mlm = graph.Div(graph.Mul(graph.Mul(mlm, graph.Sum(lossMask)), scale), pairs)
			b.SetLossWeight(pairs)
		}
		return setObjective(b, graph.Add(mlm, nsp), t.modelCfg.Attention.HeadDiversity)
	}
}

// bertMLMScaleInput is the input [1] of a training program with both
// heads: the whole batch's pairs per masked position, N/M (bertTask).
const bertMLMScaleInput = "mlm_scale"

func feedBERT(prog *graph.Program, bb bertBatch) error {
	for _, in := range []struct {
		name string
		ids  []int
	}{{"src", bb.mb.Inputs}, {"targets", bb.mb.Targets}, {"segments", bb.segments}, {"is_next", bb.isNext}} {
		if !prog.HasInput(in.name) && (in.name == "targets" || in.name == "is_next") {
			continue // no MLM, or no NSP head
		}
		if err := prog.FeedIndices(in.name, in.ids); err != nil {
			return err
		}
	}
	if err := prog.Feed("src_mask", bb.mb.Mask); err != nil {
		return err
	}
	if !prog.HasInput("loss_mask") {
		return nil
	}
	if prog.HasInput(bertMLMScaleInput) {
		var masked float64
		for _, m := range bb.mb.LossMask {
			masked += m
		}
		if masked == 0 {
			return fmt.Errorf("bert: a training batch of %d pairs with no masked position", bb.mb.B)
		}
		if err := prog.Feed(bertMLMScaleInput, []float64{float64(bb.mb.B) / masked}); err != nil {
			return err
		}
	}
	return prog.Feed("loss_mask", bb.mb.LossMask)
}

// Feed draws the batch's stories, their pairing and their masking from
// rng, the run's data generator, so a resumed run trains as an
// uninterrupted one. It draws the whole batch, also for a shard
// (graph.Program.InputShape), whose count of masked positions weighs the
// MLM term (bertTask).
func (t *bertTask) Feed(rng *rand.Rand, prog *graph.Program, _ int) error {
	n := prog.InputShape("src")[0]
	first, second, isNext := make([][]string, n), make([][]string, n), make([]int, n)
	for r := range n {
		a, b, next := t.pair(rng, t.train, rng.IntN(len(t.train)))
		first[r], second[r], isNext[r] = a, b, boolInt(next)
	}
	bb, err := t.encodePairs(rng, first, second, isNext)
	if err != nil {
		return err
	}
	return feedBERT(prog, bb)
}

func (t *bertTask) EvalBatch() int { return mlmEvalBatch }

func (t *bertTask) AtStep(prog *graph.Program, step, _ int) error {
	return train.FeedKLWeight(prog, t.cfg.Training.KLWeight, t.cfg.Training.KLWarmup, step)
}

// Selection: the validation loss, MLM + NSP, the objective.
func (t *bertTask) Selection() (string, bool) { return "valid_loss", false }

func (t *bertTask) split(name string) *bertSplit {
	if name == "test" {
		return &t.test
	}
	return &t.valid
}

// bertScores counts a split's predictions.
type bertScores struct {
	mlmLoss, positions float64 // MLM loss summed over the masked positions
	mlmCorrect         float64
	unigram, copyUni   float64 // right unigram and copy-else-unigram guesses
	nspLoss, pairs     float64 // NSP loss summed over the pairs
	nspCorrect, follow float64 // right model guesses; true successors
	pFollows           []float64
	mlmPred            [][]int // [batch][B·S] argmax ids
}

// score runs the evaluation program over a split's fixed pairs.
func (t *bertTask) score(prog *graph.Program, s *bertSplit) (bertScores, error) {
	var sc bertScores
	smoothing := t.cfg.Training.LabelSmoothing
	for _, bb := range s.batches {
		if err := feedBERT(prog, bb); err != nil {
			return sc, err
		}
		if err := prog.Run(); err != nil {
			return sc, err
		}
		if t.nsp {
			nsp, _, err := prog.Output("nsp_logits")
			if err != nil {
				return sc, err
			}
			if err := t.scoreNSP(&sc, bb, nsp); err != nil {
				return sc, err
			}
		} else {
			sc.pairs += float64(bb.real)
			sc.follow += float64(bb.real)
		}
		if !t.mlm {
			continue
		}
		logits, shape, err := prog.Output("mlm_logits")
		if err != nil {
			return sc, err
		}
		v := shape[len(shape)-1]
		mb := bb.mb
		var w float64
		for _, m := range mb.LossMask {
			w += m
		}
		if w > 0 {
			l, err := losses.TokenCrossEntropyValue(logits, mb.Targets, mb.LossMask, v, smoothing)
			if err != nil {
				return sc, err
			}
			sc.mlmLoss += l * w
			sc.positions += w
		}
		pred := make([]int, len(mb.Targets))
		for i, y := range mb.Targets {
			if mb.LossMask[i] == 0 {
				continue
			}
			pred[i] = argmax(logits[i*v : (i+1)*v])
			if pred[i] == y {
				sc.mlmCorrect++
			}
			if t.unigram == y {
				sc.unigram++
			}
			guess := mb.Inputs[i]
			if guess == t.mask.MaskID {
				guess = t.unigram
			}
			if guess == y {
				sc.copyUni++
			}
		}
		sc.mlmPred = append(sc.mlmPred, pred)
	}
	return sc, nil
}

// scoreNSP counts a batch's pair predictions.
func (t *bertTask) scoreNSP(sc *bertScores, bb bertBatch, nsp []float64) error {
	k := layers.NSPClasses
	l, err := losses.TokenCrossEntropyValue(nsp[:bb.real*k], bb.isNext[:bb.real], nil, k, t.cfg.Training.LabelSmoothing)
	if err != nil {
		return err
	}
	sc.nspLoss += l * float64(bb.real)
	sc.pairs += float64(bb.real)
	for r := range bb.real {
		row := nsp[r*k : (r+1)*k]
		if argmax(row) == bb.isNext[r] {
			sc.nspCorrect++
		}
		sc.follow += float64(bb.isNext[r])
		sc.pFollows = append(sc.pFollows, 1/(1+math.Exp(row[0]-row[1])))
	}
	return nil
}

// metrics are a split's metrics: the objective's loss, and each head's
// (NSP's alone without MLM, MLM's alone without NSP).
func (sc bertScores) metrics(split string, mlm, nsp bool) map[string]float64 {
	m := map[string]float64{split + "_loss": 0}
	if nsp {
		l := sc.nspLoss / sc.pairs
		m[split+"_loss"], m[split+"_nsp_loss"], m[split+"_nsp_accuracy"] = l, l, sc.nspCorrect/sc.pairs
	}
	if mlm {
		m[split+"_mlm_loss"] = sc.mlmLoss / sc.positions
		m[split+"_mlm_accuracy"] = sc.mlmCorrect / sc.positions
		m[split+"_loss"] += m[split+"_mlm_loss"]
	}
	return m
}

// Evaluate reports the objective (MLM + NSP loss) and both heads' losses
// and accuracies.
func (t *bertTask) Evaluate(_ *graph.Params, prog *graph.Program, split string) (map[string]float64, error) {
	sc, err := t.score(prog, t.split(split))
	if err != nil {
		return nil, err
	}
	if t.mlm && sc.positions == 0 {
		return nil, fmt.Errorf("%s set: no masked position", split)
	}
	return sc.metrics(split, t.mlm, t.nsp), nil
}

// Report implements train.Reporter: ReportResults without the results.
func (t *bertTask) Report(w io.Writer, params *graph.Params, prog *graph.Program) error {
	_, err := t.ReportResults(w, params, prog)
	return err
}

// ReportResults implements train.ResultReporter: the test set's MLM
// accuracy and loss at the masked positions next to task mlm's two
// baselines, and its NSP accuracy and loss next to chance (always
// "follows"; a uniform guess's loss ln 2) and the best achievable, the
// Bayes-optimal rule of the story generator on the same pairs
// (datasets.ToyStoryBayesFollows; datasets.ToyStoryBestNSPAccuracy in
// expectation). The predictions are a TSV file with a header line, then
// one line per test pair: its index, the label (1: S′ follows S), the
// model's p(follows), its guess, S and S′.
func (t *bertTask) ReportResults(w io.Writer, _ *graph.Params, prog *graph.Program) (train.Results, error) {
	sc, err := t.score(prog, &t.test)
	if err != nil {
		return train.Results{}, err
	}
	if t.mlm && sc.positions == 0 {
		return train.Results{}, fmt.Errorf("test set: no masked position")
	}
	m := sc.metrics("test", t.mlm, t.nsp)
	m["test_pairs"] = sc.pairs
	res := train.Results{Metrics: m, Baselines: map[string]map[string]float64{}}
	if t.nsp {
		res.Baselines["always follows"] = map[string]float64{"test_nsp_accuracy": sc.follow / sc.pairs, "test_nsp_loss": math.Ln2}
		res.Predictions = []train.Predictions{{
			Contents: "TSV: pair, label (1: S′ follows S), p(follows), guess, S, S′ of each test pair",
			Write:    t.predictionTSV(sc.pFollows),
		}}
	}
	follows := "true successors"
	if !t.toy {
		follows = "true translations"
	}
	fmt.Fprintf(w, "test set: %.0f sentence pairs [CLS] S [SEP] S′ [SEP], %.0f of them %s (seed %d); vocabulary %d ids + [MASK]\n",
		sc.pairs, sc.follow, follows, t.cfg.Seed, t.vocab.Size())
	if t.mlm {
		fmt.Fprintf(w, "%.0f masked positions (mask_prob %g)\n", sc.positions, t.mask.Prob)
	}
	fmt.Fprintln(w)
	if t.mlm {
		m["test_positions"] = sc.positions
		fmt.Fprintf(w, "%-46s  %8s  %7s\n", "masked LM (masked positions)", "accuracy", "loss")
		fmt.Fprintf(w, "%-46s  %8.4f  %7.4f\n", "  model", m["test_mlm_accuracy"], m["test_mlm_loss"])
		unigram := fmt.Sprintf("  unigram baseline (always %q)", t.vocab.Word(t.unigram))
		fmt.Fprintf(w, "%-46s  %8.4f  %7s\n", unigram, sc.unigram/sc.positions, "—")
		fmt.Fprintf(w, "%-46s  %8.4f  %7s\n", "  copy the input, unigram at [MASK]", sc.copyUni/sc.positions, "—")
		res.Baselines["unigram"] = map[string]float64{"test_mlm_accuracy": sc.unigram / sc.positions}
		res.Baselines["copy input, unigram at [MASK]"] = map[string]float64{"test_mlm_accuracy": sc.copyUni / sc.positions}
	}
	if t.nsp {
		if err := t.reportNSP(w, sc, m, res); err != nil {
			return train.Results{}, err
		}
	} else {
		fmt.Fprintf(w, "no pair classifier (data.pairs true_only): every pair is true, the masked LM alone\n")
	}
	if t.mlm && t.nsp {
		fmt.Fprintf(w, "objective (MLM + NSP loss): %.4f\n", m["test_loss"])
	}
	switch {
	case t.mlm && t.nsp:
		fmt.Fprintf(w, "\nsamples (*masked* positions; p = the model's p(follows)):\n")
	case t.mlm:
		fmt.Fprintf(w, "\nsamples (*masked* positions):\n")
	default:
		fmt.Fprintf(w, "\nsamples (p = the model's p(follows)):\n")
	}
	bb := t.test.batches[0]
	for r := range min(5, bb.real) {
		var in, model []string
		for i := r * t.length; i < (r+1)*t.length && bb.mb.Mask[i] == 1; i++ {
			tok := t.token(bb.mb.Inputs[i])
			if bb.mb.LossMask[i] == 0 {
				in, model = append(in, tok), append(model, tok)
				continue
			}
			in = append(in, "*"+tok+"*")
			model = append(model, "*"+t.token(sc.mlmPred[0][i])+"*")
		}
		fmt.Fprintf(w, "  input: %s\n", strings.Join(in, " "))
		if t.mlm {
			fmt.Fprintf(w, "  model: %s\n", strings.Join(model, " "))
		}
		if t.nsp {
			fmt.Fprintf(w, "  follows: %v, p = %.3f\n", bb.isNext[r] == 1, sc.pFollows[r])
		}
		fmt.Fprintln(w)
	}
	return res, nil
}

// reportNSP prints the pair classifier's test accuracy and loss next to
// chance, and on toy stories the Bayes rule's, recorded in res.
func (t *bertTask) reportNSP(w io.Writer, sc bertScores, m map[string]float64, res train.Results) error {
	head := "next sentence (pairs)"
	if !t.toy {
		head = "is S′ the translation of S? (pairs)"
	}
	fmt.Fprintf(w, "%-46s  %8s  %7s\n", head, "accuracy", "loss")
	fmt.Fprintf(w, "%-46s  %8.4f  %7.4f\n", "  model", m["test_nsp_accuracy"], m["test_nsp_loss"])
	fmt.Fprintf(w, "%-46s  %8.4f  %7.4f\n", "  chance (always \"follows\"; loss of p = ½)", sc.follow/sc.pairs, math.Ln2)
	if t.toy {
		var bayes float64
		for i := range t.test.first {
			g, err := datasets.ToyStoryBayesFollows(t.test.first[i], t.test.second[i])
			if err != nil {
				return err
			}
			if boolInt(g) == t.test.isNext[i] {
				bayes++
			}
		}
		fmt.Fprintf(w, "%-46s  %8.4f  %7s\n", "  best achievable (Bayes rule of the generator)", bayes/sc.pairs, "—")
		fmt.Fprintf(w, "  (the generator's best expected accuracy is %.4f)\n", datasets.ToyStoryBestNSPAccuracy())
		res.Baselines["Bayes rule of the toy generator"] = map[string]float64{"test_nsp_accuracy": bayes / sc.pairs}
	}
	return nil
}

// token is the word of id, [MASK], [CLS] or [SEP].
func (t *bertTask) token(id int) string {
	switch id {
	case t.mask.MaskID:
		return "[MASK]"
	case datasets.BOSID:
		return "[CLS]"
	case datasets.EOSID:
		return "[SEP]"
	}
	return t.vocab.Word(id)
}

func (t *bertTask) predictionTSV(pFollows []float64) func(io.Writer) error {
	return func(w io.Writer) error {
		bw := bufio.NewWriter(w)
		bw.WriteString("pair\tlabel\tp_follows\tguess\tfirst\tsecond\n")
		for i, p := range pFollows {
			fmt.Fprintf(bw, "%d\t%d\t%.4f\t%d\t%s\t%s\n", i, t.test.isNext[i], p, boolInt(p > 0.5),
				strings.Join(t.test.first[i], " "), strings.Join(t.test.second[i], " "))
		}
		return bw.Flush()
	}
}

// bertSizes checks the sizes of task bert: task mlm's, over pairs of
// data.max_len tokens.
func bertSizes(c *configs.Config, d *BERTData, m *TransformerModel) error {
	t, dd, mm := c.Training, *d, *m
	return checkSizes(c, []size{
		{"training.batch", &t.Batch, 1, 0, 64},
		{"data.train_pairs", &dd.TrainPairs, 0, MaxExamples, 20000},
		{"data.valid_pairs", &dd.ValidPairs, 0, MaxExamples, 500},
		{"data.test_pairs", &dd.TestPairs, 0, MaxExamples, 1000},
		{"data.max_len", &dd.MaxLen, 1, MaxTokens, 29},
		{"model.dim", &mm.Dim, 1, MaxDim, 64},
		{"model.ff", &mm.FF, 1, MaxFF, 256},
		{"model.enc_layers", &mm.EncLayers, 1, MaxLayers, 2},
		{"model.dec_layers", &mm.DecLayers, 0, MaxLayers, 2},
	}, func() estimate { return bertEstimate(c, t, dd, mm) })
}

// bertEstimate is the masked LM's estimate (the NSP head adds one
// [B, dim] row), without the MLM head's [B, S, vocab] scores when
// data.mask_prob is 0. With the masked LM, training scores only the
// masked rows (losses.ProjectedTokenCrossEntropy): a share mask_prob of a
// pair's S positions and the one AtLeastOne may add, where
// transformerEstimate counts all S; evaluation scores every position.
func bertEstimate(c *configs.Config, t configs.Training, d BERTData, m TransformerModel) estimate {
	e := transformerEstimate(c, t, d.Corpus, m, false, mlmEvalBatch, 0)
	vocab := float64(tsvVocab)
	if d.Source == "toy" {
		vocab = toyVocab
	}
	scores := func(rows int) float64 { return 3 * float64(rows*d.MaxLen) * vocab }
	if d.MaskProb == 0 {
		e.activations -= activationBytes(c, scores(t.Batch), scores(mlmEvalBatch))
	} else {
		unscored := 1 - min(1, d.MaskProb+1/float64(d.MaxLen))
		e.activations -= activationBytes(c, unscored*scores(t.Batch), 0)
	}
	return e
}
