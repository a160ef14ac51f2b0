package tasks

import (
	"bufio"
	"bytes"
	"cmp"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/probformer/probformer/configs"
	"github.com/probformer/probformer/datasets"
	"github.com/probformer/probformer/layers"
)

// Every size of a built-in task's config has a ceiling, and the sizes
// together must fit in memory: both are checked by the tasks' rules
// (sections.go), so before `trainer train`, `eval`, `translate` or a
// sweep allocates anything, and a checkpoint's config is held to them as
// a new one is. Before, --set model.dim=1e9 died in a second with
// "fatal error: runtime: out of memory" and a goroutine dump, and
// model.blocks=100000 built a graph for minutes.
//
// The ceilings are far above any run this trainer is for (the presets
// use widths of 32 to 256, two to four layers, sets of 50): they refuse
// the absurd with the range, and leave the rest to the memory estimate.
// configs has the shared ones (training.batch ≤ configs.MaxBatch,
// training.beam ≤ configs.MaxBeam, the attention's iterations and
// relative positions).
const (
	// MaxDim bounds every width: model.dim and data.dim.
	MaxDim = 1 << 16
	// MaxFF bounds the Transformer's feed-forward width model.ff.
	MaxFF = 1 << 18
	// MaxLayers bounds every depth: model.blocks, model.enc_layers and
	// model.dec_layers.
	MaxLayers = 1024
	// MaxPoints bounds the learned points of a Set Transformer:
	// model.inducing and model.seeds.
	MaxPoints = 1 << 16
	// MaxSetSize bounds the elements of a set, data.max_set (and so
	// data.min_set).
	MaxSetSize = 1 << 20
	// MaxTokens bounds a sentence, data.max_len.
	MaxTokens = 4096
	// MaxExamples bounds every count of examples generated or held:
	// data.valid_sets, data.test_sets, data.train_pairs, data.valid_pairs
	// and data.test_pairs.
	MaxExamples = 100_000_000
	// MaxImageSize bounds segment's image side, data.image_size (a
	// million pixels).
	MaxImageSize = 1024
	// MaxClasses bounds segment's classes, data.classes.
	MaxClasses = 1 << 16
	// MaxClicks bounds segment's clicks, data.max_clicks and
	// data.valid_clicks (as many as an image of MaxImageSize has pixels).
	MaxClicks = MaxImageSize * MaxImageSize
)

// The memory estimate (estimate below) is an order of magnitude, not an
// accounting: it counts the values a run holds, each 4 bytes (float32)
// or 8 (float64), and refuses a config whose count would take more than
// half of the machine's memory (memoryBudget). It has three parts:
//
//   - parameters: the weights of the model, counted layer by layer (a
//     dense layer din×dout, an embedding table vocab×dim, …), each held
//     five times: the weights, their gradients, Adam's two moments and
//     the copy a checkpoint is written from; six with an EMA of the
//     weights (training.ema_decay);
//   - activations: the values of one training step's graph, each held
//     twice (forward value and gradient), plus one forward pass of the
//     evaluation graph (its batch is the task's evaluation batch, times
//     training.beam for seq2seq's beam search). A layer's values are its
//     inputs, projections and outputs (a few per position and width:
//     the constants below) and its attention scores, batch × heads ×
//     queries × keys, three times (scores, weights, readout's gradient
//     path), times the unrolled iterations of EM attention;
//   - data: what the task holds in memory: maxnorm's and segment's fixed
//     evaluation sets (float64 features), the toy corpus's pairs (about
//     1 KiB each, with the generator's set of the sentences seen).
//
// A corpus read from TSV files counts no data (its files are bounded
// where they are read) and a vocabulary of tsvVocab words a side; the
// toy language's is below toyVocab.
const (
	// paramCopies: weights, gradients, Adam's m and v, the checkpoint's.
	paramCopies = 5
	// toyVocab and tsvVocab are the vocabulary sizes assumed for the
	// output layers and embeddings.
	toyVocab = 1024
	tsvVocab = 32768
	// toyPairBytes is the memory of one generated toy sentence pair.
	toyPairBytes = 1024
	// datasetValueBytes: evaluation sets hold float64 values.
	datasetValueBytes = 8
)

// estimate is a run's memory need in bytes, by part (see above).
type estimate struct {
	params, activations, data float64
}

func (e estimate) total() float64 { return e.params + e.activations + e.data }

// describe words e as "3.7 TiB (estimate: 3.7 TiB of parameters and
// optimizer state, 12 MiB of activations, 6.0 MiB of data)".
func (e estimate) describe(inference bool) string {
	state := "of parameters and optimizer state"
	if inference {
		state = "of parameters"
	}
	return fmt.Sprintf("%s (estimate: %s %s, %s of activations, %s of data)",
		bytesWord(e.total()), bytesWord(e.params), state, bytesWord(e.activations), bytesWord(e.data))
}

// bytesWord writes a byte count in binary units with two or three
// significant digits: "512 B", "6.0 MiB", "3.7 TiB".
func bytesWord(n float64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB"}
	i := 0
	for n >= 1024 && i < len(units)-1 {
		n /= 1024
		i++
	}
	switch {
	case i == 0:
		return fmt.Sprintf("%.0f B", n)
	case n < 10:
		return fmt.Sprintf("%.1f %s", n, units[i])
	}
	return fmt.Sprintf("%.0f %s", n, units[i])
}

// memoryFallback is the memory assumed when neither /proc/meminfo nor
// the cgroup's limit can be read.
const memoryFallback = 8 << 30

// machineMemory is the memory this process may use, in bytes: the
// smaller of MemTotal (/proc/meminfo) and the cgroup v2 limit
// (/sys/fs/cgroup/memory.max), or memoryFallback if neither reads.
var machineMemory = sync.OnceValue(func() float64 {
	mem := math.Inf(1)
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(data))
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) >= 2 && f[0] == "MemTotal:" {
				if kb, err := strconv.ParseFloat(f[1], 64); err == nil && kb > 0 {
					mem = kb * 1024
				}
			}
		}
	}
	if data, err := os.ReadFile("/sys/fs/cgroup/memory.max"); err == nil {
		if limit, err := strconv.ParseFloat(strings.TrimSpace(string(data)), 64); err == nil && limit > 0 {
			mem = min(mem, limit)
		}
	}
	if math.IsInf(mem, 1) {
		return memoryFallback
	}
	return mem
})

// memoryBudget is what a config's estimate may reach: half the machine's
// memory, so that an estimate off by 2× still leaves the run room. A
// variable, for tests.
var memoryBudget = func() (budget, machine float64) {
	m := machineMemory()
	return m / 2, m
}

// size is one size field of a task's config: its dotted key, a pointer to
// it (in a copy of the config's section, so that checkBudget may change
// it to see what it costs), its lowest valid value, its ceiling (0: none
// here, as for training.batch, whose ceiling the shared rules have) and
// a typical value (the presets'), against which checkBudget measures
// which sizes make a config too large.
type size struct {
	key         string
	p           *int
	lo, hi, ref int
}

// ceilingRules are the rules that every size is at most its ceiling;
// the lower bounds are the tasks' own rules.
func ceilingRules(sizes []size) []configs.Rule {
	var rules []configs.Rule
	for _, s := range sizes {
		if s.hi > 0 {
			rules = append(rules, want(*s.p <= s.hi, s.key, fmt.Sprintf("an integer in [%d, %d]", s.lo, s.hi)))
		}
	}
	return rules
}

// checkBudget refuses a config whose memory estimate (est, computed from
// the copies the sizes point into) exceeds memoryBudget. It names the
// size that, brought down to its typical value, would shrink the
// estimate most, and the others that would shrink it at least tenfold;
// if none is above its typical value, the one that shrinks it most at
// its lowest value. Every size must be within its ceiling (ceilingRules)
// first, so that the estimate is finite.
func checkBudget(c *configs.Config, sizes []size, est func() estimate) error {
	// A model used, not trained (configs.Config.ForInference), is held
	// to an evaluation's estimate: one copy of the weights and the
	// evaluation graph (paramBytes, activationBytes), so that a model
	// trained on a larger machine still evaluates here, and a checkpoint
	// whose stored config asks for a width it does not hold (one edited,
	// its checksum made again) is refused before the model is built.
	e := est()
	budget, machine := memoryBudget()
	if e.total() <= budget {
		return nil
	}
	type cost struct {
		key    string
		shrink float64 // how many times smaller the estimate is with the size at its reference
	}
	costs := func(typical bool) []cost {
		var out []cost
		for _, s := range sizes {
			old := *s.p
			*s.p = s.lo
			if typical {
				*s.p = max(min(old, s.ref), s.lo)
			}
			out = append(out, cost{s.key, e.total() / max(est().total(), 1)})
			*s.p = old
		}
		slices.SortStableFunc(out, func(a, b cost) int { return cmp.Compare(b.shrink, a.shrink) })
		return out
	}
	ranked := costs(true)
	if ranked[0].shrink <= 1 {
		ranked = costs(false)
	}
	var others []string
	for _, k := range ranked[1:] {
		if k.shrink >= 10 {
			others = append(others, k.key)
		}
	}
	also, what := "", "run"
	if c.ForInference {
		what = "model"
	}
	if len(others) > 0 {
		also = " (" + strings.Join(others, ", ") + " too)"
	}
	return c.Check(want(false, ranked[0].key, fmt.Sprintf(
		"a smaller value%s: the %s would need about %s, more than %s, half of this machine's %s of memory",
		also, what, e.describe(c.ForInference), bytesWord(budget), bytesWord(machine))))
}

// checkSizes applies the ceilings of sizes, then the memory budget.
func checkSizes(c *configs.Config, sizes []size, est func() estimate) error {
	if err := c.Check(ceilingRules(sizes)...); err != nil {
		return err
	}
	return checkBudget(c, sizes, est)
}

// valueBytes is the size of one value of the config's dtype.
func valueBytes(c *configs.Config) float64 {
	if c.DType == "float64" {
		return 8
	}
	return 4
}

// paramBytes is the memory of n parameters (paramCopies of each, one
// more with an EMA of the weights).
func paramBytes(c *configs.Config, n float64) float64 {
	copies := float64(paramCopies)
	if c.Training.EMADecay > 0 {
		copies++
	}
	if c.ForInference {
		copies = 1
	}
	return n * copies * valueBytes(c)
}

// activationBytes is the memory of a training graph of train values
// (each with its gradient) and an evaluation graph of eval values.
func activationBytes(c *configs.Config, train, eval float64) float64 {
	if c.ForInference {
		train = 0
	}
	return (2*train + eval) * valueBytes(c)
}

// attentionFactor is how many score-sized tensors an attention kind
// holds per score tensor of softmax attention: EM unrolls its
// iterations, the Bayesian kinds sample and hold their prior's.
func attentionFactor(a layers.AttentionConfig) float64 {
	switch a.Kind {
	case "em":
		return float64(2 + a.KeyIters + a.ValueIters + a.PropagateIters)
	case layers.KindBayesWeibull, layers.KindBayesLogNormal:
		return 4
	}
	return 1
}

// mabValues are the values of one multi-head attention block of batch b,
// nq queries, nk keys, width d and h heads: projections, residuals,
// norms and the feed-forward (a dozen per query and width, two per key)
// and the scores (three per batch, head, query and key).
func mabValues(b, nq, nk, d, h, kf float64) float64 {
	return b*(10*nq+2*nk)*d + 3*b*h*nq*nk*kf
}

// mabParams are the parameters of a multi-head attention block of width
// d: four projections and a feed-forward layer, with biases and norms.
func mabParams(d float64) float64 { return 5*d*d + 8*d }

// roundUp is n rounded up to a multiple of batch.
func roundUp(n, batch int) float64 {
	batch = max(batch, 1)
	return float64((n + batch - 1) / batch * batch)
}

// maxNormEstimate estimates task maxnorm's Set Transformer.
func maxNormEstimate(c *configs.Config, t configs.Training, d MaxNormData, m MaxNormModel) estimate {
	n, din, dim := float64(d.MaxSet), float64(d.Dim), float64(m.Dim)
	h, ind, seeds, kf := float64(m.Heads), float64(m.Inducing), float64(m.Seeds), attentionFactor(m.Attention)
	params := 3*din*dim + mabParams(dim) + seeds*dim + dim*din
	if m.DecoderSAB {
		params += mabParams(dim)
	}
	values := func(b float64) float64 {
		v := b*n*din + mabValues(b, seeds, n, dim, h, kf) + b*seeds*din
		for range m.Blocks {
			if m.Encoder == "isab" {
				v += mabValues(b, ind, n, dim, h, kf) + mabValues(b, n, ind, dim, h, kf)
			} else {
				v += mabValues(b, n, n, dim, h, kf)
			}
		}
		if m.DecoderSAB {
			v += mabValues(b, seeds, seeds, dim, h, kf)
		}
		return v
	}
	perBlock := mabParams(dim)
	if m.Encoder == "isab" {
		perBlock = 2*mabParams(dim) + ind*dim
	}
	params += float64(m.Blocks) * perBlock
	sets := roundUp(d.ValidSets, maxNormEvalBatch) + roundUp(d.TestSets, maxNormEvalBatch) + float64(t.Batch)
	return estimate{
		params:      paramBytes(c, params),
		activations: activationBytes(c, values(float64(t.Batch)), values(maxNormEvalBatch)),
		data:        sets * (n*(din+1) + din) * datasetValueBytes,
	}
}

// transformerEstimate estimates tasks seq2seq's (decoder true) and mlm's
// Transformer on corpus d, evaluated in batches of evalRows (and, for
// seq2seq, decoded in beamRows hypotheses).
func transformerEstimate(c *configs.Config, t configs.Training, d Corpus, m TransformerModel, decoder bool, evalRows, beamRows int) estimate {
	dim, ff, h, kf := float64(m.Dim), float64(m.FF), float64(m.Heads), attentionFactor(m.Attention)
	S, T := float64(d.MaxLen), float64(d.MaxLen+1)
	vocab, data := float64(tsvVocab), 0.0
	if d.Source == "toy" {
		vocab = toyVocab
		data = float64(d.TrainPairs+d.ValidPairs+d.TestPairs) * toyPairBytes
	}
	rel := float64(2*m.Attention.RelativePositions + 1)
	if m.Attention.RelativePositions == 0 {
		rel = 0
	}
	enc, dec := float64(m.EncLayers), float64(m.DecLayers)
	if !decoder {
		dec, T = 0, 0
	}
	params := 2*vocab*dim + dim*vocab + enc*(4*dim*dim+2*dim*ff+9*dim) + dec*(8*dim*dim+2*dim*ff+13*dim) +
		(enc+dec)*2*rel*dim/max(h, 1)
	if m.TieOutput || !decoder { // one table less: shared, or no target side
		params -= dim * vocab
	}
	// values of a graph of batch b whose output layer scores out
	// positions.
	values := func(b, out float64) float64 {
		v := 3 * b * (S + T) * dim
		v += enc * (b*S*(12*dim+3*ff) + 3*b*h*S*S*kf + 2*b*h*S*rel + S*S*rel)
		v += dec * (b*T*(18*dim+3*ff) + 3*b*h*(T*T+T*S)*kf + 2*b*h*T*rel + T*T*rel)
		return v + 3*b*out*vocab
	}
	train, eval := values(float64(t.Batch), T), values(float64(evalRows), T)
	if !decoder {
		train, eval = values(float64(t.Batch), S), values(float64(evalRows), S)
	} else {
		// Beam search decodes beamRows hypotheses, scoring one position
		// a step.
		eval = max(eval, values(float64(beamRows), 1))
	}
	return estimate{
		params:      paramBytes(c, params),
		activations: activationBytes(c, train, eval),
		data:        data,
	}
}

// segmentEstimate estimates task segment's segmenter: its EM attention
// relates every pixel to every pixel, batch × heads × pixels² scores.
func segmentEstimate(c *configs.Config, t configs.Training, d SegmentData, m SegmentModel) estimate {
	P, C, dim, h := float64(d.ImageSize*d.ImageSize), float64(d.Classes), float64(m.Dim), float64(m.Heads)
	hc, kf, L, E := h*C, attentionFactor(m.Attention), float64(m.Blocks), float64(m.EncLayers)
	feat := float64(datasets.SegFeatDim)
	params := feat*dim + max(E-1, 0)*dim*dim + L*(2*dim*dim+dim*hc+4*h) + max(L-1, 0)*(dim+hc)*dim + hc*dim + dim*C
	values := func(b float64) float64 {
		return b*P*(feat+C+hc) + 2*E*b*P*dim + L*(2*b*P*(3*dim+hc)+3*b*h*P*P*kf) + 3*b*P*(dim+C)
	}
	B := float64(t.Batch)
	images := roundUp(d.ValidSets, t.Batch) + roundUp(d.TestSets, t.Batch) + B
	return estimate{
		params: paramBytes(c, params),
		// Evaluation runs at the training batch, with a second forward
		// graph that places the clicks.
		activations: activationBytes(c, values(B), 2*values(B)),
		data:        images * P * (feat + C + 2) * datasetValueBytes,
	}
}

// maxNormSizes checks the sizes of task maxnorm.
func maxNormSizes(c *configs.Config, d *MaxNormData, m *MaxNormModel) error {
	t, dd, mm := c.Training, *d, *m
	return checkSizes(c, []size{
		{"training.batch", &t.Batch, 1, 0, 64},
		{"data.dim", &dd.Dim, 1, MaxDim, 2},
		{"data.max_set", &dd.MaxSet, 1, MaxSetSize, 50},
		{"data.valid_sets", &dd.ValidSets, 1, MaxExamples, 1024},
		{"data.test_sets", &dd.TestSets, 1, MaxExamples, 4096},
		{"model.dim", &mm.Dim, 1, MaxDim, 64},
		{"model.blocks", &mm.Blocks, 0, MaxLayers, 2},
		{"model.inducing", &mm.Inducing, 1, MaxPoints, 16},
		{"model.seeds", &mm.Seeds, 1, MaxPoints, 1},
	}, func() estimate { return maxNormEstimate(c, t, dd, mm) })
}

// transformerSizes checks the sizes of tasks seq2seq (decoder true) and
// mlm.
func transformerSizes(c *configs.Config, d *Corpus, m *TransformerModel, decoder bool) error {
	t, dd, mm := c.Training, *d, *m
	sizes := []size{
		{"training.batch", &t.Batch, 1, 0, 64},
		{"data.train_pairs", &dd.TrainPairs, 0, MaxExamples, 20000},
		{"data.valid_pairs", &dd.ValidPairs, 0, MaxExamples, 500},
		{"data.test_pairs", &dd.TestPairs, 0, MaxExamples, 1000},
		{"data.max_len", &dd.MaxLen, 1, MaxTokens, 15},
		{"model.dim", &mm.Dim, 1, MaxDim, 64},
		{"model.ff", &mm.FF, 1, MaxFF, 256},
		{"model.enc_layers", &mm.EncLayers, 1, MaxLayers, 2},
		{"model.dec_layers", &mm.DecLayers, 0, MaxLayers, 2},
	}
	if decoder {
		sizes[len(sizes)-1].lo = 1
		sizes = append(sizes, size{"training.beam", &t.Beam, 1, 0, 4})
	}
	return checkSizes(c, sizes, func() estimate {
		// Evaluation decodes seq2seq's test set with a beam of
		// training.beam hypotheses per sentence.
		if decoder {
			return transformerEstimate(c, t, dd, mm, true, seq2seqEvalBatch, seq2seqEvalBatch*max(t.Beam, 1))
		}
		return transformerEstimate(c, t, dd, mm, false, mlmEvalBatch, 0)
	})
}

// segmentSizes checks the sizes of task segment.
func segmentSizes(c *configs.Config, d *SegmentData, m *SegmentModel) error {
	t, dd, mm := c.Training, *d, *m
	return checkSizes(c, []size{
		{"training.batch", &t.Batch, 1, 0, 64},
		{"data.image_size", &dd.ImageSize, 2, MaxImageSize, 16},
		{"data.classes", &dd.Classes, 2, MaxClasses, 4},
		{"data.max_clicks", &dd.MaxClicks, 0, MaxClicks, 10},
		{"data.valid_clicks", &dd.ValidClicks, 0, MaxClicks, 5},
		{"data.valid_sets", &dd.ValidSets, 1, MaxExamples, 1024},
		{"data.test_sets", &dd.TestSets, 1, MaxExamples, 4096},
		{"model.dim", &mm.Dim, 1, MaxDim, 64},
		{"model.enc_layers", &mm.EncLayers, 1, MaxLayers, 2},
		{"model.blocks", &mm.Blocks, 1, MaxLayers, 1},
	}, func() estimate { return segmentEstimate(c, t, dd, mm) })
}

// estimateConfig is the memory estimate of a built-in task's config, or
// false for another task's.
func estimateConfig(c *configs.Config) (estimate, bool) {
	switch d := c.Data.(type) {
	case *MaxNormData:
		if m, ok := c.Model.(*MaxNormModel); ok {
			return maxNormEstimate(c, c.Training, *d, *m), true
		}
	case *Seq2SeqData:
		if m, ok := c.Model.(*TransformerModel); ok {
			return transformerEstimate(c, c.Training, d.Corpus, *m, true, seq2seqEvalBatch, seq2seqEvalBatch*max(c.Training.Beam, 1)), true
		}
	case *MLMData:
		if m, ok := c.Model.(*TransformerModel); ok {
			return transformerEstimate(c, c.Training, d.Corpus, *m, false, mlmEvalBatch, 0), true
		}
	case *BERTData:
		if m, ok := c.Model.(*TransformerModel); ok {
			return bertEstimate(c, c.Training, *d, *m), true
		}
	case *SegmentData:
		if m, ok := c.Model.(*SegmentModel); ok {
			return segmentEstimate(c, c.Training, *d, *m), true
		}
	}
	return estimate{}, false
}
