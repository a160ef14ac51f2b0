package tasks

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"text/tabwriter"

	"github.com/probformer/probformer/cmd/trainer/train"
	"github.com/probformer/probformer/configs"
	"github.com/probformer/probformer/datasets"
	"github.com/probformer/probformer/em"
	"github.com/probformer/probformer/graph"
	"github.com/probformer/probformer/layers"
	"github.com/probformer/probformer/losses"
)

// maxNormTask regresses the element of largest norm of a set with a Set
// Transformer.
type maxNormTask struct {
	cfg      *configs.Config
	dataCfg  *MaxNormData
	modelCfg *MaxNormModel
	data     *datasets.MaxNorm
	model    layers.SetTransformer
	// valid and test hold every set of their split, scored in batches of
	// maxNormEvalBatch (evalSets).
	valid datasets.SetBatch
	test  datasets.SetBatch
}

const maxNormEvalBatch = 256

func newMaxNormTask(cfg *configs.Config, d *MaxNormData, m *MaxNormModel) (*maxNormTask, error) {
	data, err := datasets.NewMaxNorm(d.Kind, d.Dim, d.MinSet, d.MaxSet)
	if err != nil {
		return nil, fmt.Errorf("data: %w", err)
	}
	st := layers.SetTransformerConfig{
		DimIn: d.Dim, Dim: m.Dim, Heads: m.Heads, DimOut: d.Dim, Encoder: m.Encoder, Blocks: m.Blocks,
		Inducing: m.Inducing, Seeds: m.Seeds, DecoderSAB: m.DecoderSAB, LayerNorm: m.LayerNorm,
		Attention: m.Attention,
	}
	if err := st.Validate(); err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	return &maxNormTask{
		cfg:      cfg,
		dataCfg:  d,
		modelCfg: m,
		data:     data,
		model:    layers.SetTransformer{Config: st},
		valid:    data.Fixed(cfg.Seed, datasets.ValidStream, 1, d.ValidSets)[0],
		test:     data.Fixed(cfg.Seed, datasets.TestStream, 1, d.TestSets)[0],
	}, nil
}

func (t *maxNormTask) Build(batch int) graph.BuildFunc {
	n, dim := t.data.MaxN, t.data.Dim
	return func(b *graph.Builder) error {
		x := b.Input("x", batch, n, dim)
		mask := b.Input("mask", batch, n)
		y := b.Input("y", batch, dim)
		out := t.model.Forward(b, x, mask) // [B, seeds, dim]
		// Every seed predicts the target; with one seed this is the
		// prediction itself.
		pred := graph.Mean(out, 1)
		b.Output("pred", pred)
		loss, err := losses.Regression(t.cfg.Training.Loss, pred, y, nil)
		if err != nil {
			return err
		}
		return setObjective(b, loss, t.modelCfg.Attention.HeadDiversity)
	}
}

// klWeightInput is the input that carries the annealed KL weight κ(t).
const klWeightInput = "kl_weight"

func feedSets(prog *graph.Program, batch datasets.SetBatch) error {
	if err := prog.Feed("x", batch.X); err != nil {
		return err
	}
	if err := prog.Feed("mask", batch.Mask); err != nil {
		return err
	}
	return prog.Feed("y", batch.Y)
}

// Feed implements train.Task: a batch of fresh sets, as many as the
// program's batch (the whole step's, with data parallelism or gradient
// accumulation too).
func (t *maxNormTask) Feed(rng *rand.Rand, prog *graph.Program, _ int) error {
	return feedSets(prog, t.data.Batch(rng, prog.InputShape("y")[0]))
}

// evalSets runs prog over every set of set in batches of
// maxNormEvalBatch (train.RunEvalBatches): read reads each batch's
// outputs, of which the real rows count (train.EvalBatch.Keep).
func evalSets(prog *graph.Program, set datasets.SetBatch, read func(b train.EvalBatch) error) error {
	return train.RunEvalBatches(prog, set.Size, maxNormEvalBatch,
		func(b train.EvalBatch) error { return feedSets(prog, setRows(set, b)) }, read)
}

// setRows returns the rows of a batch of set.
func setRows(set datasets.SetBatch, b train.EvalBatch) datasets.SetBatch {
	return datasets.SetBatch{Size: b.Size, MaxN: set.MaxN, Dim: set.Dim, OutDim: set.OutDim,
		X: b.Gather(set.X, set.MaxN*set.Dim), Mask: b.Gather(set.Mask, set.MaxN), Y: b.Gather(set.Y, set.OutDim)}
}

func (t *maxNormTask) EvalBatch() int { return maxNormEvalBatch }

func (t *maxNormTask) Selection() (string, bool) { return "valid_" + t.cfg.Training.Loss, false }

func (t *maxNormTask) State() (map[string][]byte, error) { return nil, nil }

func (t *maxNormTask) AtStep(prog *graph.Program, step, _ int) error {
	return train.FeedKLWeight(prog, t.cfg.Training.KLWeight, t.cfg.Training.KLWarmup, step)
}

// predictions runs prog over a fixed set and returns its predictions
// and targets.
func (t *maxNormTask) predictions(prog *graph.Program, set datasets.SetBatch) (pred, target []float64, err error) {
	err = evalSets(prog, set, func(b train.EvalBatch) error {
		p, _, err := prog.Output("pred")
		pred = append(pred, b.Keep(p)...)
		return err
	})
	return pred, set.Y, err
}

func (t *maxNormTask) split(name string) datasets.SetBatch {
	if name == "test" {
		return t.test
	}
	return t.valid
}

func (t *maxNormTask) Evaluate(_ *graph.Params, prog *graph.Program, split string) (map[string]float64, error) {
	pred, target, err := t.predictions(prog, t.split(split))
	if err != nil {
		return nil, err
	}
	return regressionMetrics(split, pred, target, t.data.Dim)
}

func regressionMetrics(prefix string, pred, target []float64, dim int) (map[string]float64, error) {
	out := map[string]float64{}
	for _, kind := range []string{losses.MSE, losses.MAE, losses.Euclidean} {
		v, err := losses.RegressionValue(kind, pred, target, nil, dim)
		if err != nil {
			return nil, err
		}
		out[prefix+"_"+kind] = v
	}
	return out, nil
}

// Report implements train.Reporter: ReportResults without the results.
func (t *maxNormTask) Report(w io.Writer, params *graph.Params, prog *graph.Program) error {
	_, err := t.ReportResults(w, params, prog)
	return err
}

// ReportResults implements train.ResultReporter: it prints the test
// metrics of the model next to two baselines, predicting zero and
// predicting the set's mean, then the learned priors of any EM attention
// layer. The predictions are a TSV file with a header line, then one line
// per test set: its index, the target and the model's prediction, each a
// vector of data.dim numbers separated by spaces.
func (t *maxNormTask) ReportResults(w io.Writer, params *graph.Params, prog *graph.Program) (train.Results, error) {
	pred, target, err := t.predictions(prog, t.test)
	if err != nil {
		return train.Results{}, err
	}
	zero, mean := make([]float64, len(target)), t.test.MeanPrediction()
	rows := []struct {
		name string
		pred []float64
	}{{"model", pred}, {"predict zero", zero}, {"predict set mean", mean}}
	sets := len(target) / t.data.Dim
	fmt.Fprintf(w, "test set: %d sets (seed %d)\n", sets, t.cfg.Seed)
	res := train.Results{Baselines: map[string]map[string]float64{}}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\tMSE\tMAE\tEuclidean\t")
	for _, r := range rows {
		m, err := regressionMetrics("test", r.pred, target, t.data.Dim)
		if err != nil {
			return train.Results{}, err
		}
		fmt.Fprintf(tw, "%s\t%.4f\t%.4f\t%.4f\t\n", r.name, m["test_mse"], m["test_mae"], m["test_euclidean"])
		if r.name == "model" {
			m["test_samples"] = float64(sets)
			res.Metrics = m
		} else {
			res.Baselines[r.name] = m
		}
	}
	if err := tw.Flush(); err != nil {
		return train.Results{}, err
	}
	res.Predictions = []train.Predictions{{
		Contents: "TSV: index, target, prediction of each test set",
		Write:    vectorTSV(target, pred, t.data.Dim),
	}}
	return res, printPriors(w, params, em.DefaultRawParams(t.modelCfg.Dim/t.modelCfg.Heads))
}

// vectorTSV writes the header index, target, prediction, then one line per
// example of dim numbers each, in the shortest form that reads back as the
// same float64.
func vectorTSV(target, pred []float64, dim int) func(io.Writer) error {
	return func(w io.Writer) error {
		bw := bufio.NewWriter(w)
		bw.WriteString("index\ttarget\tprediction\n")
		vector := func(v []float64) {
			for d, x := range v {
				if d > 0 {
					bw.WriteByte(' ')
				}
				bw.WriteString(strconv.FormatFloat(x, 'g', -1, 64))
			}
		}
		for i := range len(target) / dim {
			bw.WriteString(strconv.Itoa(i))
			bw.WriteByte('\t')
			vector(target[i*dim : (i+1)*dim])
			bw.WriteByte('\t')
			vector(pred[i*dim : (i+1)*dim])
			bw.WriteByte('\n')
		}
		return bw.Flush()
	}
}

// Examples implements train.Sized: training sets are drawn afresh at
// every step, so only the validation set has a size.
func (t *maxNormTask) Examples(split string) (int, bool) {
	if split == "valid" {
		return t.dataCfg.ValidSets, true
	}
	return 0, false
}
