package tasks

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"sort"

	"github.com/probformer/probformer/cmd/trainer/train"
	"github.com/probformer/probformer/graph"
)

// SampleReport runs the test set through the training graph (sampled
// attention weights, no optimizer step) samples times, and reports the
// mean prediction's error next to the predictive spread: the standard
// deviation over samples of each set's prediction, and how it tracks the
// error of the mean prediction.
func (t *maxNormTask) SampleReport(w io.Writer, params *graph.Params, samples int, seed uint64) error {
	prog, err := graph.CompileSampler(params, t.Build(maxNormEvalBatch))
	if err != nil {
		return err
	}
	if !prog.HasNoise() {
		return fmt.Errorf("--samples: the model's attention is not sampled (attention.kind is %s)", t.modelCfg.Attention.Kind)
	}
	rng := rand.New(rand.NewPCG(seed, 0x73616d706c65))
	dim := t.data.Dim
	var errs, stds []float64
	for _, b := range train.EvalBatches(t.test.Size, maxNormEvalBatch) {
		batch := setRows(t.test, b)
		if err := feedSets(prog, batch); err != nil {
			return err
		}
		if err := train.FeedKLWeight(prog, t.cfg.Training.KLWeight, t.cfg.Training.KLWarmup, t.cfg.Training.Steps); err != nil {
			return err
		}
		sum := make([]float64, len(batch.Y))
		sq := make([]float64, len(batch.Y))
		for range samples {
			prog.DrawNoise(rng)
			if err := prog.Run(); err != nil {
				return err
			}
			pred, _, err := prog.Output("pred")
			if err != nil {
				return err
			}
			for i, v := range pred {
				sum[i] += v
				sq[i] += v * v
			}
		}
		for s := range b.Real { // the padding rows are not the test set's
			var e2, v float64
			for d := range dim {
				i := s*dim + d
				mean := sum[i] / float64(samples)
				e2 += (mean - batch.Y[i]) * (mean - batch.Y[i])
				v += math.Max(0, sq[i]/float64(samples)-mean*mean)
			}
			errs = append(errs, math.Sqrt(e2))
			stds = append(stds, math.Sqrt(v/float64(dim)))
		}
	}
	med := median(errs)
	var right, wrong []float64
	for i, e := range errs {
		if e > med {
			wrong = append(wrong, stds[i])
		} else {
			right = append(right, stds[i])
		}
	}
	fmt.Fprintf(w, "\n%d sampled passes over the test set:\n", samples)
	fmt.Fprintf(w, "  Euclidean error of the mean prediction  %.4f\n", meanOf(errs))
	fmt.Fprintf(w, "  predictive standard deviation           %.4f\n", meanOf(stds))
	fmt.Fprintf(w, "  correlation(std, error)                 %.3f\n", correlation(stds, errs))
	fmt.Fprintf(w, "  std where the error is above its median %.4f, below %.4f\n", meanOf(wrong), meanOf(right))
	return nil
}

func meanOf(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x
	}
	return s / float64(max(len(v), 1))
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}

// correlation is Pearson's r of x and y.
func correlation(x, y []float64) float64 {
	mx, my := meanOf(x), meanOf(y)
	var sxy, sxx, syy float64
	for i := range x {
		sxy += (x[i] - mx) * (y[i] - my)
		sxx += (x[i] - mx) * (x[i] - mx)
		syy += (y[i] - my) * (y[i] - my)
	}
	if sxx == 0 || syy == 0 {
		return 0
	}
	return sxy / math.Sqrt(sxx*syy)
}
