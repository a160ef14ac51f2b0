package graph

import (
	"errors"
	"fmt"
	"io"
	"log"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// timeline, set only by tests (timeline_test.go), gives the programs
// compiled while it is set a tape machine that logs each instruction to
// it as the instruction starts ("PC n"), for a timeline of a step; nil
// otherwise, so that no run times or logs anything.
var timeline io.Writer

// Program is a compiled graph: its inputs by name, its outputs, its loss,
// and a tape machine to run it. A training program also computes the
// gradient of the loss with respect to every parameter it uses. Programs
// built from the same Params share the parameter tensors, so a training
// program and an evaluation program of another batch shape see the same
// weights. Programs sharing Params must run one at a time.
type Program struct {
	params   *Params
	vm       G.VM
	runs     *G.ExprGraph // the graph vm runs: b.g less the sums stepgradsum.go replaced
	train    bool
	used     []*Param
	usedN    []*Node
	inputs   map[string]*input
	outputs  map[string]int
	shapes   [][]int
	taps     []G.Value
	values   [][]float64
	lossTap  G.Value
	hasLoss  bool
	loss     float64
	ran      bool
	dropouts []dropoutMask
	noise    []noiseInput
	tracked  []string
	// shard is this program's part of a data-parallel batch (shard.go);
	// the zero value is the whole batch.
	shard shard
	// weightTap reads the loss weight (Builder.SetLossWeight), if set.
	weightTap G.Value
	hasWeight bool
	weight    float64
}

// Compile builds fn into a program. With train set, the graph also
// computes the gradient of the loss (which fn must set with SetLoss).
func Compile(params *Params, fn BuildFunc, train bool) (*Program, error) {
	return compile(params, fn, train, train)
}

// CompileSampler builds fn as a training graph — layers add their noise
// inputs and dropout masks (Builder.Training is true) — but computes no
// gradient: a forward pass that draws, for sampled evaluation such as
// Bayesian attention's predictive spread.
func CompileSampler(params *Params, fn BuildFunc) (*Program, error) {
	return compile(params, fn, true, false)
}

func compile(params *Params, fn BuildFunc, trainLayers, differentiate bool) (*Program, error) {
	b, err := build(params, trainLayers, fn)
	if err != nil {
		return nil, err
	}
	p := &Program{
		params:   params,
		train:    differentiate,
		used:     b.used,
		usedN:    b.usedN,
		inputs:   b.inputs,
		dropouts: b.dropouts,
		noise:    b.noise,
		outputs:  map[string]int{},
		taps:     make([]G.Value, len(b.outputs)),
		values:   make([][]float64, len(b.outputs)),
	}
	p.tracked = b.tracked
	if err := p.finish(b); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *Program) finish(b *Builder) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("compile graph: %v", r)
		}
	}()
	for i, o := range b.outputs {
		p.outputs[o.name] = i
		p.shapes = append(p.shapes, Shape(o.node))
		G.Read(o.node, &p.taps[i])
	}
	if b.loss != nil {
		p.hasLoss = true
		G.Read(b.loss, &p.lossTap)
	}
	if b.lossWeight != nil {
		p.hasWeight = true
		G.Read(b.lossWeight, &p.weightTap)
	}
	var grads []*Node // the parameters' gradients, which the program must compute
	if p.train {
		if b.loss == nil {
			return errors.New("compile training graph: no loss set")
		}
		if len(p.usedN) == 0 {
			return errors.New("compile training graph: no parameters")
		}
		var err error
		if grads, err = G.Grad(b.loss, p.usedN...); err != nil {
			deadSums.take(b.g) // forget the sums replaced before the error
			return fmt.Errorf("differentiate loss: %w", err)
		}
	}
	p.runs = liveGraph(b.g, grads)
	if timeline != nil {
		p.vm = G.NewTapeMachine(p.runs, G.WithLogger(log.New(timeline, "", 0)))
	} else {
		p.vm = G.NewTapeMachine(p.runs)
	}
	return nil
}

// Feed copies values (row-major, converted to the graph's dtype) into the
// input called name.
func (p *Program) Feed(name string, values []float64) error {
	in, ok := p.inputs[name]
	if !ok {
		return fmt.Errorf("feed: no input %q", name)
	}
	values, err := shardOf(p.shard, name, values, in.value.Shape().TotalSize())
	if err != nil {
		return fmt.Errorf("feed %s %v: %w", name, in.value.Shape(), err)
	}
	if err := copyInto(in.value.Data(), values); err != nil {
		return fmt.Errorf("feed %s %v: %w", name, in.value.Shape(), err)
	}
	return nil
}

// FeedIndices copies ids into the integer input called name.
func (p *Program) FeedIndices(name string, ids []int) error {
	in, ok := p.inputs[name]
	if !ok {
		return fmt.Errorf("feed: no input %q", name)
	}
	dst, ok := in.value.Data().([]int)
	if !ok {
		return fmt.Errorf("feed %s: not an index input", name)
	}
	ids, err := shardOf(p.shard, name, ids, len(dst))
	if err != nil {
		return fmt.Errorf("feed %s %v: %w", name, in.value.Shape(), err)
	}
	if len(dst) != len(ids) {
		return fmt.Errorf("feed %s %v: have %d ids, want %d", name, in.value.Shape(), len(ids), len(dst))
	}
	copy(dst, ids)
	return nil
}

// HasInput reports whether the program has an input called name.
func (p *Program) HasInput(name string) bool { _, ok := p.inputs[name]; return ok }

// InputShape returns the shape of the input called name, or nil; in a
// data-parallel shard (Shard), a batched input's global shape, the one
// it is fed.
func (p *Program) InputShape(name string) []int {
	if in, ok := p.inputs[name]; ok {
		shape := []int(in.value.Shape().Clone())
		if _, batched := p.shard.global[name]; batched {
			shape[0] *= p.shard.parts // a shard is fed the global batch
		}
		return shape
	}
	return nil
}

// Run executes the graph once on the fed inputs: forward, and backward for
// a training program. Outputs and the loss are read during the run, since
// the backward pass reuses intermediate buffers.
func (p *Program) Run() (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = recovered("run graph", r)
		}
	}()
	if p.ran {
		// RunAll without Reset silently does nothing.
		p.vm.Reset()
	}
	p.ran = true
	if err := p.vm.RunAll(); err != nil {
		return fmt.Errorf("run graph: %w", err)
	}
	for i, v := range p.taps {
		p.values[i] = toFloat64(v.Data())
	}
	if p.hasLoss {
		p.loss = toFloat64(p.lossTap.Data())[0]
	}
	if p.hasWeight {
		p.weight = toFloat64(p.weightTap.Data())[0]
	}
	return nil
}

// Output returns the values read from the output called name in the last
// run, row-major, and its shape; an error names an output the program
// does not have (a misspelt name would otherwise read as no values).
func (p *Program) Output(name string) ([]float64, []int, error) {
	i, ok := p.outputs[name]
	if !ok {
		return nil, nil, fmt.Errorf("program has no output %q", name)
	}
	return p.values[i], p.shapes[i], nil
}

// Loss returns the loss of the last run.
func (p *Program) Loss() float64 { return p.loss }

// Params returns the parameters this program uses, in first-use order.
func (p *Program) Params() []*Param { return p.used }

// Training reports whether the program was compiled for training
// (Compile's train argument), so that its runs leave gradients.
func (p *Program) Training() bool { return p.train }

// GradientData returns the live gradient of Params()[i] from the last run
// of a training program: the []float32 or []float64 backing itself, not a
// copy (Gradients copies). It is what an optimizer (graph/optim) reads to
// update the parameter in place through Param.Data; it must not be written
// to or kept past the next Run, which overwrites it.
func (p *Program) GradientData(i int) (any, error) { return p.gradient(i) }

// gradient returns the live gradient backing of the i-th used parameter.
func (p *Program) gradient(i int) (any, error) {
	g, err := p.usedN[i].Grad()
	if err != nil {
		return nil, fmt.Errorf("gradient of %s: %w", p.used[i].Name, err)
	}
	if d, ok := g.(*tensor.Dense); ok {
		return data(d), nil // without Data's reflection, as the ops read theirs
	}
	return g.Data(), nil
}

// Gradients returns a float64 copy of each used parameter's gradient from
// the last run of a training program, by parameter name.
func (p *Program) Gradients() (map[string][]float64, error) {
	if !p.train {
		return nil, errors.New("gradients of an evaluation program")
	}
	out := map[string][]float64{}
	for i, prm := range p.used {
		g, err := p.gradient(i)
		if err != nil {
			return nil, err
		}
		out[prm.Name] = toFloat64(g)
	}
	return out, nil
}
