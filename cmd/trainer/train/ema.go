package train

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/probformer/probformer/graph"
	"github.com/probformer/probformer/graph/ckpt"
)

// AverageExtra is the checkpoint entry (ckpt.Checkpoint.Extra) that
// holds the averaged weights.
const AverageExtra = "ema"

// WeightAverage is an exponential moving average of the parameters
// (Polyak averaging, as timm's ModelEmaV2 keeps it): after step t,
//
//	ē ← d_t·ē + (1 − d_t)·w,   d_t = min(decay, (1 + t)/(10 + t)),
//
// the warm-up letting early averages follow the weights. A Loop with
// Settings.EMADecay > 0 keeps one: validation and the best checkpoint's
// selection use ē, training updates w, and `trainer eval`, translate and
// export read ē (UseAverage). The average is kept in float64 whatever the parameters'
// dtype, and saved in checkpoints, so a resumed run averages exactly as an
// uninterrupted one.
type WeightAverage struct {
	decay  float64
	params []*graph.Param
	avg    [][]float64 // ē, in params' order
	saved  [][]float64 // w while ē is swapped in
}

// NewWeightAverage starts the average at the parameters' current values.
func NewWeightAverage(params *graph.Params, decay float64) *WeightAverage {
	a := &WeightAverage{decay: decay, params: params.List()}
	for _, p := range a.params {
		a.avg = append(a.avg, p.Values())
		a.saved = append(a.saved, make([]float64, len(a.avg[len(a.avg)-1])))
	}
	return a
}

// Update folds in the weights after step t (1-based).
func (a *WeightAverage) Update(step int) {
	d := min(a.decay, float64(1+step)/float64(10+step))
	for i, p := range a.params {
		avg := a.avg[i]
		switch w := p.Data().(type) {
		case []float32:
			for j, v := range w {
				avg[j] = d*avg[j] + (1-d)*float64(v)
			}
		case []float64:
			for j, v := range w {
				avg[j] = d*avg[j] + (1-d)*v
			}
		}
	}
}

// SwapIn puts ē into the parameters, keeping w; SwapOut puts w back.
func (a *WeightAverage) SwapIn() error {
	for i, p := range a.params {
		copy(a.saved[i], p.Values())
		if err := p.SetValues(a.avg[i]); err != nil {
			return err
		}
	}
	return nil
}

// SwapOut puts back the weights that SwapIn kept.
func (a *WeightAverage) SwapOut() error {
	for i, p := range a.params {
		if err := p.SetValues(a.saved[i]); err != nil {
			return err
		}
	}
	return nil
}

// Encode is ē as little-endian float64s, parameter after parameter.
func (a *WeightAverage) Encode() []byte {
	var n int
	for _, v := range a.avg {
		n += len(v)
	}
	out := make([]byte, 0, 8*n)
	for _, v := range a.avg {
		for _, x := range v {
			out = binary.LittleEndian.AppendUint64(out, math.Float64bits(x))
		}
	}
	return out
}

// Decode restores ē from Encode's bytes.
func (a *WeightAverage) Decode(data []byte) error {
	return decodeFloats(data, a.avg)
}

// UseAverage replaces a checkpoint's parameters by its weight average, if
// it has one: the weights that evaluation, export and init.encoder_from
// read. The entries follow ck.Params's order, as Encode writes them.
func UseAverage(ck *ckpt.Checkpoint) error {
	data, ok := ck.Extra[AverageExtra]
	if !ok {
		return nil
	}
	dst := make([][]float64, len(ck.Params))
	for i, p := range ck.Params {
		dst[i] = p.Values
	}
	return decodeFloats(data, dst)
}

// decodeFloats fills dst, slice after slice, from little-endian float64s.
func decodeFloats(data []byte, dst [][]float64) error {
	var n int
	for _, v := range dst {
		n += len(v)
	}
	if len(data) != 8*n {
		return fmt.Errorf("checkpoint weight average: %d bytes for %d values", len(data), n)
	}
	for _, v := range dst {
		for j := range v {
			v[j] = math.Float64frombits(binary.LittleEndian.Uint64(data))
			data = data[8:]
		}
	}
	return nil
}
