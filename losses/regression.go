package losses

import (
	"fmt"
	"math"

	"github.com/probformer/probformer/graph"
)

// Regression losses between a prediction and a target of shape [..., D],
// averaged over the rows whose mask is 1. mask has the shape of the leading
// axes [...] and may be nil (every row counts).
//
//	MSE       = Σ_i m_i ‖p_i − y_i‖² / (D Σ_i m_i)
//	MAE       = Σ_i m_i ‖p_i − y_i‖₁ / (D Σ_i m_i)
//	Euclidean = Σ_i m_i ‖p_i − y_i‖₂ / Σ_i m_i
const (
	MSE       = "mse"
	MAE       = "mae"
	Euclidean = "euclidean"
)

// euclidEps keeps the gradient of ‖·‖₂ finite at a perfect prediction.
const euclidEps = 1e-12

// Regression returns the named loss as a scalar node.
// pred, target: [..., D]; mask: [...] or nil.
func Regression(kind string, pred, target, mask *graph.Node) (*graph.Node, error) {
	diff := graph.Sub(pred, target)
	last := pred.Dims() - 1
	var perRow *graph.Node // [...]
	switch kind {
	case MSE:
		perRow = graph.Mean(graph.Square(diff), last)
	case MAE:
		perRow = graph.Mean(graph.Abs(diff), last)
	case Euclidean:
		perRow = graph.Sqrt(graph.AddScalar(graph.Sum(graph.Square(diff), last), euclidEps))
	default:
		return nil, fmt.Errorf("unknown regression loss %q (want mse, mae or euclidean)", kind)
	}
	if mask == nil {
		return graph.Mean(perRow), nil
	}
	return graph.Div(graph.Sum(graph.Mul(perRow, mask)), graph.Sum(mask)), nil
}

// RegressionValue computes the named loss on plain values: pred and target
// [rows, dim], mask [rows] or nil.
func RegressionValue(kind string, pred, target, mask []float64, dim int) (float64, error) {
	if len(pred) != len(target) || dim <= 0 || len(pred)%dim != 0 {
		return 0, fmt.Errorf("%s of %d predictions and %d targets of width %d", kind, len(pred), len(target), dim)
	}
	rows := len(pred) / dim
	if mask != nil && len(mask) != rows {
		return 0, fmt.Errorf("%s: mask has %d rows, want %d", kind, len(mask), rows)
	}
	var total, weight float64
	for r := range rows {
		m := 1.0
		if mask != nil {
			m = mask[r]
		}
		if m == 0 {
			continue
		}
		var row float64
		for d := range dim {
			e := pred[r*dim+d] - target[r*dim+d]
			switch kind {
			case MSE:
				row += e * e / float64(dim)
			case MAE:
				row += math.Abs(e) / float64(dim)
			case Euclidean:
				row += e * e
			default:
				return 0, fmt.Errorf("unknown regression loss %q (want mse, mae or euclidean)", kind)
			}
		}
		if kind == Euclidean {
			row = math.Sqrt(row)
		}
		total += m * row
		weight += m
	}
	if weight == 0 {
		return 0, fmt.Errorf("%s: every row is masked", kind)
	}
	return total / weight, nil
}
