package graph

import (
	"fmt"

	"gorgonia.org/tensor"
)

// DType is the floating-point type of a graph's values.
type DType int

const (
	// Float32 is the fast default for training.
	Float32 DType = iota
	// Float64 is used by gradient checks and reference comparisons.
	Float64
)

// ParseDType maps "float32" or "float64" to a DType.
func ParseDType(s string) (DType, error) {
	switch s {
	case "float32":
		return Float32, nil
	case "float64":
		return Float64, nil
	}
	return 0, fmt.Errorf("unknown dtype %q (want float32 or float64)", s)
}

// String returns "float32" or "float64".
func (d DType) String() string {
	if d == Float64 {
		return "float64"
	}
	return "float32"
}

func (d DType) tensorType() tensor.Dtype {
	if d == Float64 {
		return tensor.Float64
	}
	return tensor.Float32
}

// newDense returns a tensor of dtype d and the given shape holding values
// (converted); values may be nil for zeros.
func newDense(d DType, shape []int, values []float64) *tensor.Dense {
	n := shapeSize(shape)
	if d == Float64 {
		data := make([]float64, n)
		copy(data, values)
		return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(data))
	}
	data := make([]float32, n)
	for i, v := range values {
		data[i] = float32(v)
	}
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(data))
}

// copyInto writes src (converted) into the backing of dst, which must be a
// []float32 or []float64 of the same length.
func copyInto(dst any, src []float64) error {
	switch d := dst.(type) {
	case []float64:
		if len(d) != len(src) {
			return fmt.Errorf("have %d values, want %d", len(src), len(d))
		}
		copy(d, src)
	case []float32:
		if len(d) != len(src) {
			return fmt.Errorf("have %d values, want %d", len(src), len(d))
		}
		for i, v := range src {
			d[i] = float32(v)
		}
	default:
		return fmt.Errorf("unsupported backing %T", dst)
	}
	return nil
}

// toFloat64 returns a float64 copy of a []float32 or []float64 backing.
func toFloat64(data any) []float64 {
	switch d := data.(type) {
	case []float64:
		return append([]float64(nil), d...)
	case []float32:
		out := make([]float64, len(d))
		for i, v := range d {
			out[i] = float64(v)
		}
		return out
	case float64:
		return []float64{d}
	case float32:
		return []float64{float64(d)}
	}
	return nil
}

func shapeSize(shape []int) int {
	n := 1
	for _, s := range shape {
		n *= s
	}
	return n
}

// float is the element type of a graph's values (kernels.Float, the same
// type set).
type float interface{ float32 | float64 }
