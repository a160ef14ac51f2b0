package tasks

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"text/tabwriter"

	"github.com/probformer/probformer/cmd/trainer/internal/figure"
	"github.com/probformer/probformer/cmd/trainer/train"
	"github.com/probformer/probformer/configs"
	"github.com/probformer/probformer/datasets"
	"github.com/probformer/probformer/graph"
	"github.com/probformer/probformer/layers"
	"github.com/probformer/probformer/losses"
)

// segmentTask is interactive segmentation (issue 5): a Segmenter labels
// every pixel of a synthetic image from its colour and position and from
// a few clicked pixels whose labels an annotator gives. The clicks are the
// annotated units of em/MATH.md §5, so their labels reach the other pixels
// only through value propagation.
//
// Training clicks. Each training image gets k clicks, k uniform in
// 0..data.max_clicks, in two rounds, as an annotator would place them:
// ⌈k/2⌉ with no prediction to look at (one in the middle of each of the
// largest regions, see datasets.Clicks), then the rest in the largest
// regions that the model, given the first round, gets wrong. The second
// round needs the model's prediction before the training step, which a
// forward-only program of the training batch size computes; its weights
// are copied from the training program before each use (see predictor),
// since a task never sees the run's parameter set during training.
//
// Evaluation clicks come one at a time, each in the largest wrong region
// of the current prediction (interactive). Clicked pixels always show
// their given labels: a prediction is the model's argmax with the clicked
// pixels overwritten, so the curves with and without adaptation differ only
// by what the clicks do to the other pixels.
type segmentTask struct {
	cfg      *configs.Config
	dataCfg  *SegmentData
	modelCfg *SegmentModel
	data     *datasets.Segmentation
	model    layers.Segmenter
	valid    []datasets.SegBatch
	test     []datasets.SegBatch

	// ahead is the forward-only program that places the second round of
	// training clicks, on its own parameters (copies of the training
	// program's); nil until the first training step.
	ahead *graph.Program
	// plotDir is where report writes clicks.png; empty: no figure.
	plotDir string
}

// reportClicks are the click counts of `trainer eval`'s table and figure.
var reportClicks = []int{0, 1, 2, 5, 10}

// segmentClickStream seeds the tie-breaking of evaluation clicks, so that
// every evaluation of a checkpoint places the same clicks.
const segmentClickStream uint64 = 0x636c69636b73 // "clicks"

func newSegmentTask(cfg *configs.Config, d *SegmentData, m *SegmentModel) (*segmentTask, error) {
	data, err := datasets.NewSegmentation(datasets.Segmentation{Size: d.ImageSize, MinRegions: d.MinRegions,
		MaxRegions: d.MaxRegions, Classes: d.Classes, Noise: d.Noise, Confusable: d.Confusable})
	if err != nil {
		return nil, fmt.Errorf("data: %w", err)
	}
	sc := layers.SegmenterConfig{FeatDim: datasets.SegFeatDim, Classes: d.Classes, Dim: m.Dim, Heads: m.Heads,
		Encoder: m.EncLayers, Layers: m.Blocks, Attention: m.Attention}
	if err := sc.Validate(); err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	batch := cfg.Training.Batch
	count := func(n int) int { return (n + batch - 1) / batch }
	return &segmentTask{
		cfg:      cfg,
		dataCfg:  d,
		modelCfg: m,
		data:     data,
		model:    layers.Segmenter{Config: sc},
		valid:    data.Fixed(cfg.Seed, datasets.ValidStream, count(d.ValidSets), batch),
		test:     data.Fixed(cfg.Seed, datasets.TestStream, count(d.TestSets), batch),
	}, nil
}

// Build: x [B, P, 5], clicked [B, P], values [B, P, C] and labels [B, P]
// → logits [B, P, C] and the pixel cross-entropy over every pixel.
func (t *segmentTask) Build(batch int) graph.BuildFunc {
	P, C := t.data.Size*t.data.Size, t.data.Classes
	return func(b *graph.Builder) error {
		logits, err := t.model.Forward(b, b.Input("x", batch, P, datasets.SegFeatDim),
			b.Input("clicked", batch, P), b.Input("values", batch, P, C))
		if err != nil {
			return err
		}
		b.Output("logits", logits)
		loss, err := losses.TokenCrossEntropy(b, "loss", logits, b.IndexInput("labels", batch, P), nil, t.cfg.Training.LabelSmoothing)
		if err != nil {
			return err
		}
		b.SetLoss(loss)
		return nil
	}
}

// feedSegments feeds a batch and its clicks (all clicks so far, per image).
func feedSegments(prog *graph.Program, batch datasets.SegBatch, clicks [][]int) error {
	mask, values, err := datasets.Annotate(batch, clicks)
	if err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		v    []float64
	}{{"x", batch.X}, {"clicked", mask}, {"values", values}} {
		if err := prog.Feed(f.name, f.v); err != nil {
			return err
		}
	}
	return prog.FeedIndices("labels", batch.Labels)
}

// predict runs prog on a batch with its clicks and returns the predicted
// class of every pixel, [Size·Pixels], the clicked pixels showing their
// given labels.
func predict(prog *graph.Program, batch datasets.SegBatch, clicks [][]int) ([]int, error) {
	if err := feedSegments(prog, batch, clicks); err != nil {
		return nil, err
	}
	if err := prog.Run(); err != nil {
		return nil, err
	}
	logits, _, err := prog.Output("logits")
	if err != nil {
		return nil, err
	}
	C := batch.Classes
	pred := make([]int, batch.Size*batch.Pixels)
	for p := range pred {
		row := logits[p*C : (p+1)*C]
		pred[p] = argmax(row)
	}
	showClicks(pred, batch, clicks)
	return pred, nil
}

// showClicks overwrites the prediction of every clicked pixel with its
// label.
func showClicks(pred []int, batch datasets.SegBatch, clicks [][]int) {
	for i, cs := range clicks {
		for _, p := range cs {
			pred[i*batch.Pixels+p] = batch.Labels[i*batch.Pixels+p]
		}
	}
}

func argmax(row []float64) int {
	best := 0
	for c, v := range row {
		if v > row[best] {
			best = c
		}
	}
	return best
}

func (t *segmentTask) Feed(rng *rand.Rand, prog *graph.Program, _ int) error {
	batch := t.data.Batch(rng, t.cfg.Training.Batch)
	P, W := batch.Pixels, batch.Width
	clicks := make([][]int, batch.Size)
	rest := make([]int, batch.Size)
	second := false
	for i := range clicks {
		k := rng.IntN(t.dataCfg.MaxClicks + 1)
		first := (k + 1) / 2
		c, err := datasets.Clicks(rng, batch.Labels[i*P:(i+1)*P], nil, nil, W, first)
		if err != nil {
			return err
		}
		clicks[i], rest[i] = c, k-first
		second = second || rest[i] > 0
	}
	if second {
		ahead, err := t.predictor(prog)
		if err != nil {
			return err
		}
		pred, err := predict(ahead, batch, clicks)
		if err != nil {
			return fmt.Errorf("place training clicks: %w", err)
		}
		for i := range clicks {
			c, err := datasets.Clicks(rng, batch.Labels[i*P:(i+1)*P], pred[i*P:(i+1)*P], clicks[i], W, rest[i])
			if err != nil {
				return err
			}
			clicks[i] = append(clicks[i], c...)
		}
	}
	return feedSegments(prog, batch, clicks)
}

// predictor returns the forward-only program of the training batch size
// with the training program's current weights. It is compiled once, on a
// parameter set of its own, and its weights are copied by name before
// every use: a few thousand numbers, next to a forward pass over every
// pair of pixels.
func (t *segmentTask) predictor(train *graph.Program) (*graph.Program, error) {
	if t.ahead == nil {
		dt, err := graph.ParseDType(t.cfg.DType)
		if err != nil {
			return nil, err
		}
		t.ahead, err = graph.Compile(graph.NewParams(dt, t.cfg.Seed), t.Build(t.cfg.Training.Batch), false)
		if err != nil {
			return nil, fmt.Errorf("build click-placing graph: %w", err)
		}
	}
	live := map[string]*graph.Param{}
	for _, p := range train.Params() {
		live[p.Name] = p
	}
	for _, p := range t.ahead.Params() {
		src := live[p.Name]
		if src == nil {
			return nil, fmt.Errorf("click-placing graph: parameter %s is not trained", p.Name)
		}
		if err := p.SetValues(src.Values()); err != nil {
			return nil, err
		}
	}
	return t.ahead, nil
}

// evalBatch is the training batch: the graphs hold [B, H, P, P] tensors,
// so the training batch is the one known to fit in memory.
func (t *segmentTask) EvalBatch() int { return t.cfg.Training.Batch }

func (t *segmentTask) Selection() (string, bool) { return "valid_accuracy", true }

func (t *segmentTask) State() (map[string][]byte, error) { return nil, nil }

func (t *segmentTask) split(name string) []datasets.SegBatch {
	if name == "test" {
		return t.test
	}
	return t.valid
}

// Evaluate scores a split at data.valid_clicks interactive clicks.
func (t *segmentTask) Evaluate(_ *graph.Params, prog *graph.Program, split string) (map[string]float64, error) {
	n := t.dataCfg.ValidClicks
	scores, _, err := t.interactive(prog, t.split(split), []int{n}, false)
	if err != nil {
		return nil, err
	}
	return map[string]float64{split + "_accuracy": scores.accuracy[0], split + "_miou": scores.miou[0]}, nil
}

// clickScores holds pixel accuracy and mean IoU at a list of click counts,
// and the predictions behind them: pred[k] holds the predicted class of
// every pixel of every image after counts[k] clicks, as labels does the
// true ones.
type clickScores struct {
	accuracy, miou []float64
	pred           [][]int
	labels         []int
}

// interactive simulates an annotator on set: one click per round per
// image, in the largest wrong region of the current prediction, and
// scores the predictions after counts[k] clicks (counts ascending).
//
// adapt is the model given every click so far. With baseline set, fixed
// is the annotator working on the 0-click prediction without the model:
// each click sets its pixel to its label and changes nothing else, and
// the next click goes to the largest wrong region of that.
func (t *segmentTask) interactive(prog *graph.Program, set []datasets.SegBatch, counts []int, baseline bool) (adapt, fixed clickScores, err error) {
	if len(set) == 0 || !slices.IsSorted(counts) || counts[0] < 0 {
		return adapt, fixed, fmt.Errorf("interactive evaluation of %d batches at clicks %v", len(set), counts)
	}
	rng := rand.New(rand.NewPCG(t.cfg.Seed, segmentClickStream))
	predA := make([][]int, len(counts))
	predF := make([][]int, len(counts))
	var labels []int
	for _, batch := range set {
		labels = append(labels, batch.Labels...)
		clicksA := make([][]int, batch.Size)
		clicksF := make([][]int, batch.Size)
		pa, err := predict(prog, batch, clicksA)
		if err != nil {
			return adapt, fixed, err
		}
		pf := slices.Clone(pa)
		next := 0
		for round := 0; next < len(counts); round++ {
			if round > 0 {
				if err := clickOnce(rng, batch, pa, clicksA); err != nil {
					return adapt, fixed, err
				}
				if pa, err = predict(prog, batch, clicksA); err != nil {
					return adapt, fixed, err
				}
				if baseline {
					if err := clickOnce(rng, batch, pf, clicksF); err != nil {
						return adapt, fixed, err
					}
					showClicks(pf, batch, clicksF)
				}
			}
			for ; next < len(counts) && counts[next] == round; next++ {
				predA[next] = append(predA[next], pa...)
				predF[next] = append(predF[next], pf...)
			}
		}
	}
	score := func(preds [][]int) (clickScores, error) {
		s := clickScores{pred: preds, labels: labels}
		for _, pred := range preds {
			acc, err := datasets.PixelAccuracy(pred, labels)
			if err != nil {
				return s, err
			}
			miou, err := datasets.MeanIoU(pred, labels, t.data.Size*t.data.Size, t.data.Classes)
			if err != nil {
				return s, err
			}
			s.accuracy, s.miou = append(s.accuracy, acc), append(s.miou, miou)
		}
		return s, nil
	}
	if adapt, err = score(predA); err != nil || !baseline {
		return adapt, fixed, err
	}
	fixed, err = score(predF)
	return adapt, fixed, err
}

// clickOnce adds one click per image of batch, in the largest wrong region
// of pred.
func clickOnce(rng *rand.Rand, batch datasets.SegBatch, pred []int, clicks [][]int) error {
	next, err := batch.Clicks(rng, pred, clicks, 1)
	if err != nil {
		return err
	}
	for i, c := range next {
		clicks[i] = append(clicks[i], c...)
	}
	return nil
}

// SetPlotDir implements train.Plotter.
func (t *segmentTask) SetPlotDir(dir string) { t.plotDir = dir }

// Report implements train.Reporter: ReportResults without the results.
func (t *segmentTask) Report(w io.Writer, params *graph.Params, prog *graph.Program) error {
	_, err := t.ReportResults(w, params, prog)
	return err
}

// ReportResults implements train.ResultReporter: it prints pixel accuracy
// and mean IoU on the test set against the number of clicks, with
// adaptation (the model given the clicks) and without (the baseline "not
// adapted": the 0-click prediction with the clicked pixels set), draws
// both as <plot dir>/clicks.png, and prints the learned priors. Metric
// names carry the click count: test_accuracy_5_clicks. The predictions
// are a TSV file with a header line, then one line per test image and
// click count: the image's index, the clicks, and the true and the
// adapted model's predicted class of every pixel, row by row, separated
// by spaces.
func (t *segmentTask) ReportResults(w io.Writer, params *graph.Params, prog *graph.Program) (train.Results, error) {
	adapt, fixed, err := t.interactive(prog, t.test, reportClicks, true)
	if err != nil {
		return train.Results{}, err
	}
	images := len(t.test) * t.cfg.Training.Batch
	fmt.Fprintf(w, "test set: %d images of %d×%d pixels (seed %d); clicks one at a time in the largest wrong region\n",
		images, t.data.Size, t.data.Size, t.cfg.Seed)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "clicks\taccuracy adapted\taccuracy not adapted\tmIoU adapted\tmIoU not adapted\t")
	res := train.Results{
		Metrics:   map[string]float64{"test_samples": float64(images)},
		Baselines: map[string]map[string]float64{"not adapted": {}},
		Predictions: []train.Predictions{{
			Contents: fmt.Sprintf("TSV: image, clicks, target, prediction of each test image and click count, %d×%d pixel classes each", t.data.Size, t.data.Size),
			Write:    t.predictionTSV(adapt),
		}},
	}
	for k, n := range reportClicks {
		fmt.Fprintf(tw, "%d\t%.4f\t%.4f\t%.4f\t%.4f\t\n", n, adapt.accuracy[k], fixed.accuracy[k], adapt.miou[k], fixed.miou[k])
		acc, miou := fmt.Sprintf("test_accuracy_%d_clicks", n), fmt.Sprintf("test_miou_%d_clicks", n)
		res.Metrics[acc], res.Metrics[miou] = adapt.accuracy[k], adapt.miou[k]
		res.Baselines["not adapted"][acc], res.Baselines["not adapted"][miou] = fixed.accuracy[k], fixed.miou[k]
	}
	if err := tw.Flush(); err != nil {
		return train.Results{}, err
	}
	if t.plotDir != "" {
		path := filepath.Join(t.plotDir, "clicks.png")
		xs := make([]float64, len(reportClicks))
		for k, n := range reportClicks {
			xs[k] = float64(n)
		}
		series := []figure.Curve{
			{Name: "accuracy, adapted", Ys: adapt.accuracy},
			{Name: "accuracy, not adapted", Ys: fixed.accuracy},
			{Name: "mIoU, adapted", Ys: adapt.miou},
			{Name: "mIoU, not adapted", Ys: fixed.miou},
		}
		title := fmt.Sprintf("interactive segmentation, %d test images", images)
		if err := figure.WriteCurves(path, title, "clicks", "pixel accuracy, mean IoU", xs, series); err != nil {
			return train.Results{}, err
		}
		fmt.Fprintf(w, "wrote %s\n", path)
	}
	return res, printPriors(w, params, layers.SegmenterPriors(t.modelCfg.Dim/t.modelCfg.Heads))
}

// predictionTSV writes the adapted predictions of ReportResults: a line
// per test image and report click count.
func (t *segmentTask) predictionTSV(s clickScores) func(io.Writer) error {
	return func(w io.Writer) error {
		P := t.data.Size * t.data.Size
		bw := bufio.NewWriter(w)
		bw.WriteString("image\tclicks\ttarget\tprediction\n")
		classes := func(v []int) {
			for p, c := range v {
				if p > 0 {
					bw.WriteByte(' ')
				}
				bw.WriteString(strconv.Itoa(c))
			}
		}
		for i := range len(s.labels) / P {
			for k, n := range reportClicks {
				fmt.Fprintf(bw, "%d\t%d\t", i, n)
				classes(s.labels[i*P : (i+1)*P])
				bw.WriteByte('\t')
				classes(s.pred[k][i*P : (i+1)*P])
				bw.WriteByte('\n')
			}
		}
		return bw.Flush()
	}
}
