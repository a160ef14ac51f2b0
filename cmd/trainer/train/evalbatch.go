package train

import (
	"fmt"

	"github.com/probformer/probformer/graph"
)

// Evaluation over a split of any size. The evaluation program has a
// fixed batch, Task.EvalBatch rows, and a split of n examples rarely
// fills a whole number of them. EvalBatches cuts the split into batches
// of that shape, the last one padded, and an EvalBatch says which rows
// are real, so that a task's Evaluate is written for one batch and
// never pads by hand:
//
//	var means train.Means
//	err := train.RunEvalBatches(prog, len(ys), t.EvalBatch(),
//		func(b train.EvalBatch) error { // feed the batch
//			if err := prog.Feed("x", b.Gather(xs, 8)); err != nil { // 8 values an example
//				return err
//			}
//			if err := prog.Feed("y", b.Gather(ys, 1)); err != nil {
//				return err
//			}
//			return prog.Feed("mask", b.Mask()) // 0 on padding rows
//		},
//		func(b train.EvalBatch) error { // read it, after prog.Run
//			means.AddLoss(split+"_mse", prog) // the loss's mean, weighed by its weight
//			pred, _, err := prog.Output("pred")
//			preds = append(preds, b.Keep(pred)...) // the real rows only
//			return err
//		})
//
// A padding row repeats the batch's first example, so the model computes
// ordinary values there; what it computes is dropped. Metrics are means
// over the real examples only, weighed by how many each batch holds: a
// metric read from outputs keeps their real rows (Keep) and is computed
// over the whole split at once, or per batch and averaged with Means; a
// loss read with Means.AddLoss counts the real rows only if the graph's
// loss masks the padding (the Mask input) and sets its loss weight to the
// real count (graph.Builder.SetLossWeight: Σ mask), as a padded token
// batch's cross-entropy does already. Either way the split's metric
// equals the metric of all n examples run at once, up to the order of
// the float sums.

// EvalBatch is one batch of an evaluation split of n examples, in the
// evaluation program's shape: its rows [0, Real) are the split's
// examples [Start, Start+Real), and its rows [Real, Size) padding.
type EvalBatch struct {
	// Start is the split's index of the batch's first example.
	Start int
	// Real is the number of real rows, 1 … Size.
	Real int
	// Size is the program's batch, Task.EvalBatch.
	Size int
}

// EvalBatches cuts a split of n examples into batches of size rows, the
// last one padded: ⌈n/size⌉ batches, none for n = 0.
func EvalBatches(n, size int) []EvalBatch {
	if size <= 0 {
		panic(fmt.Sprintf("train.EvalBatches: batch %d", size))
	}
	var out []EvalBatch
	for start := 0; start < n; start += size {
		out = append(out, EvalBatch{Start: start, Real: min(size, n-start), Size: size})
	}
	return out
}

// Padded reports whether the batch has padding rows.
func (b EvalBatch) Padded() bool { return b.Real < b.Size }

// Examples returns the split's index of each of the batch's Size rows:
// Start … Start+Real−1, then Start again for every padding row.
func (b EvalBatch) Examples() []int {
	out := make([]int, b.Size)
	for r := range out {
		out[r] = b.Start
		if r < b.Real {
			out[r] += r
		}
	}
	return out
}

// Mask returns 1 for each real row and 0 for each padding row: Size
// values, to feed a [Size] or [Size, 1] mask input.
func (b EvalBatch) Mask() []float64 { return b.RowMask(1) }

// RowMask is Mask with each row's value repeated per times, for a mask
// input of per values a row ([Size, per], or a flattened [Size·per]).
func (b EvalBatch) RowMask(per int) []float64 {
	out := make([]float64, b.Size*per)
	for i := range b.Real * per {
		out[i] = 1
	}
	return out
}

// Gather returns the batch's rows of a split's values, per values an
// example (row-major, example after example): Size·per values, the
// padding rows copies of the first.
func (b EvalBatch) Gather(values []float64, per int) []float64 { return gather(b, values, per) }

// GatherIndices is Gather for index inputs (graph.Program.FeedIndices).
func (b EvalBatch) GatherIndices(ids []int, per int) []int { return gather(b, ids, per) }

func gather[T any](b EvalBatch, values []T, per int) []T {
	if need := (b.Start + b.Real) * per; len(values) < need {
		panic(fmt.Sprintf("train.EvalBatch.Gather: %d values, want at least %d", len(values), need))
	}
	out := make([]T, 0, b.Size*per)
	out = append(out, values[b.Start*per:(b.Start+b.Real)*per]...)
	for range b.Size - b.Real {
		out = append(out, values[b.Start*per:(b.Start+1)*per]...)
	}
	return out
}

// Keep returns the real rows of an output of the batch's Size rows (its
// first axis is the batch, as graph.Program.Output gives it): the first
// Real/Size of its values.
func (b EvalBatch) Keep(output []float64) []float64 {
	return output[:len(output)/b.Size*b.Real]
}

// RunEvalBatches evaluates prog over a split of n examples in batches of
// size rows (EvalBatches): for each, feed feeds the batch's inputs, prog
// runs, and read reads what it needs of the outputs or the loss. read
// may be nil.
func RunEvalBatches(prog *graph.Program, n, size int, feed, read func(b EvalBatch) error) error {
	for _, b := range EvalBatches(n, size) {
		if err := feed(b); err != nil {
			return fmt.Errorf("examples %d–%d: %w", b.Start, b.Start+b.Real-1, err)
		}
		if err := prog.Run(); err != nil {
			return fmt.Errorf("examples %d–%d: %w", b.Start, b.Start+b.Real-1, err)
		}
		if read != nil {
			if err := read(b); err != nil {
				return fmt.Errorf("examples %d–%d: %w", b.Start, b.Start+b.Real-1, err)
			}
		}
	}
	return nil
}

// Means averages per-batch means into a split's: each metric's batch
// means weighed by the counts they are means over (a batch's real
// examples, its real tokens). The zero value is empty and ready.
type Means struct {
	sums, weights map[string]float64
}

// Add counts a batch's mean of a metric, a mean over weight units.
func (m *Means) Add(name string, mean, weight float64) {
	if m.sums == nil {
		m.sums, m.weights = map[string]float64{}, map[string]float64{}
	}
	m.sums[name] += mean * weight
	m.weights[name] += weight
}

// AddLoss counts the loss of prog's last run, weighed by its loss weight
// (graph.Program.LossWeight: the real count when the graph sets it, else
// 1, which is right only for batches without padding).
func (m *Means) AddLoss(name string, prog *graph.Program) {
	m.Add(name, prog.Loss(), prog.LossWeight())
}

// Metrics returns each metric's weighted mean; a metric whose weights
// sum to 0 is left out.
func (m *Means) Metrics() map[string]float64 {
	out := make(map[string]float64, len(m.sums))
	for name, sum := range m.sums {
		if w := m.weights[name]; w != 0 {
			out[name] = sum / w
		}
	}
	return out
}
