package graph

import (
	"errors"
	"fmt"
	"slices"
)

// Data-parallel training splits every global batch of B examples over P
// processes, each running the same graph on B/P of them. The pieces here
// let a training program be one such shard without its model or task
// knowing: the task feeds the whole batch and the program keeps its part,
// the dropout masks and noise are this part of the masks and noise a
// single program of batch B would draw, and the gradients can be packed
// into one buffer, summed over the processes and unpacked again.
//
// A shard's part of an input is a contiguous block of its row-major
// values, which is its examples exactly when the input's first axis is
// the batch: [B, …] or a flattened [B·T, …]. Every input of the project's
// layers and tasks is laid out so.

// shard is a program's part of a data-parallel batch: part of parts,
// and the global sizes of its batched inputs by name. The zero value is
// the whole batch.
type shard struct {
	part, parts int
	global      map[string]int
}

// of returns the values of input name that a program of shard s keeps,
// from the values fed (all of them, or block part of parts); n is the
// input's own size.
func shardOf[T any](s shard, name string, values []T, n int) ([]T, error) {
	g, batched := s.global[name]
	switch {
	case s.parts <= 1 || !batched:
		return values, nil
	case len(values) != g:
		return nil, fmt.Errorf("have %d values, want %d: a data-parallel shard is fed the global batch and keeps its part", len(values), g)
	}
	return values[s.part*n : (s.part+1)*n], nil
}

// offset is where the program's part of input name starts in the global
// input of n values per part: 0 for an input that is not batched.
func (s shard) offset(name string, n int) int {
	if _, batched := s.global[name]; !batched {
		return 0
	}
	return s.part * n
}

// Shard makes the training program part (0-based) of parts equal shards
// of a global batch, parts times the batch it was built for. global
// builds the graph of the global batch (the same model's BuildFunc at the
// global batch size); it is built, not compiled, to tell the batched
// inputs, whose first axis is parts times as long there, from the others,
// which must have the same shape in both. Then:
//
//   - InputShape reports a batched input's global shape, and Feed and
//     FeedIndices take its global values, of which they keep block part;
//     an input that is not batched (a KL weight, say) is fed as before;
//   - DrawDropout and DrawNoise fill block part of the masks and noise a
//     program of the global batch would draw from the same generator, so
//     that the shards of a step together draw exactly what one process
//     would, and differ from each other.
//
// Shard fails if the program is not a training program, or if a noise
// input's size is odd (its noise pairs would straddle two shards).
//
// A program already cut into parts shards only moves to another part:
// the global batch's layout depends on parts and the graph, not on part,
// so it is not built again (gradient accumulation moves a program
// through its micro-batches every step). global must then be the same
// function as before.
func (p *Program) Shard(part, parts int, global BuildFunc) error {
	if !p.train {
		return errors.New("shard: an evaluation program")
	}
	if parts < 1 || part < 0 || part >= parts {
		return fmt.Errorf("shard: part %d of %d", part, parts)
	}
	if parts > 1 && p.shard.parts == parts {
		p.shard.part = part
		return nil
	}
	s := shard{part: part, parts: parts, global: map[string]int{}}
	if parts > 1 {
		b, err := build(p.params, true, global)
		if err != nil {
			return fmt.Errorf("shard: the global batch's graph: %w", err)
		}
		for name, in := range p.inputs {
			local := []int(in.value.Shape())
			gin, ok := b.inputs[name]
			if !ok {
				return fmt.Errorf("shard: input %s is not in the global batch's graph", name)
			}
			g := []int(gin.value.Shape())
			switch {
			case slices.Equal(g, local):
			case len(g) == len(local) && len(g) > 0 && g[0] == parts*local[0] && slices.Equal(g[1:], local[1:]):
				s.global[name] = gin.value.Shape().TotalSize()
			default:
				return fmt.Errorf("shard: input %s is %v here and %v in the global batch's graph; want the same shape, or a first axis %d times as long", name, local, g, parts)
			}
		}
		for _, ni := range p.noise {
			if n := p.inputs[ni.name].value.Shape().TotalSize(); n%2 != 0 && s.global[ni.name] > 0 {
				return fmt.Errorf("shard: noise input %s has %d values; sharding needs an even count", ni.name, n)
			}
		}
	}
	p.shard = s
	return nil
}

// SetLossWeight records the count the loss is a mean over, when it is
// not the batch's examples: the real tokens of a padded batch, say. x is
// a scalar node. Data-parallel training weighs each shard's loss and
// gradient by it, so that the mean over the global batch comes out as
// one process computes it even when the shards hold unequal counts.
func (b *Builder) SetLossWeight(x *Node) {
	if x.Shape().TotalSize() != 1 {
		fail("loss weight must be a scalar, has shape %v", x.Shape())
	}
	b.lossWeight = x
}

// LossWeight returns the loss weight of the last run (SetLossWeight), or
// 1 when the graph sets none: then the loss is a mean over examples, and
// equal shards weigh the same.
func (p *Program) LossWeight() float64 {
	if !p.hasWeight {
		return 1
	}
	return p.weight
}

// GradientSize is the number of values AppendGradients appends: the
// gradients of every parameter the program uses.
func (p *Program) GradientSize() int {
	n := 0
	for _, prm := range p.used {
		n += shapeSize(prm.Shape)
	}
	return n
}

// AppendGradients appends scale times the gradient of every parameter
// the program uses, in Params order, to buf as float64, and returns the
// extended buffer. Programs compiled from the same build function pack
// the same layout.
func (p *Program) AppendGradients(buf []float64, scale float64) ([]float64, error) {
	if !p.train {
		return nil, errors.New("gradients of an evaluation program")
	}
	for i := range p.used {
		g, err := p.gradient(i)
		if err != nil {
			return nil, err
		}
		switch d := g.(type) {
		case []float32:
			for _, x := range d {
				buf = append(buf, scale*float64(x))
			}
		case []float64:
			for _, x := range d {
				buf = append(buf, scale*x)
			}
		}
	}
	return buf, nil
}

// SetGradients overwrites the gradient of every parameter the program
// uses with scale times the values of buf, in the layout of
// AppendGradients (converted to the graph's dtype), so that the
// optimizer steps on them. It returns what follows the gradients in buf.
func (p *Program) SetGradients(buf []float64, scale float64) ([]float64, error) {
	if !p.train {
		return nil, errors.New("gradients of an evaluation program")
	}
	if len(buf) < p.GradientSize() {
		return nil, fmt.Errorf("set gradients: have %d values, want %d", len(buf), p.GradientSize())
	}
	for i := range p.used {
		g, err := p.gradient(i)
		if err != nil {
			return nil, err
		}
		switch d := g.(type) {
		case []float32:
			for j := range d {
				d[j] = float32(scale * buf[j])
			}
			buf = buf[len(d):]
		case []float64:
			for j := range d {
				d[j] = scale * buf[j]
			}
			buf = buf[len(d):]
		}
	}
	return buf, nil
}
