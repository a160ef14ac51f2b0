package graph

import (
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Builder adds nodes to one graph. It binds parameters from a shared Params
// and records the graph's inputs, outputs and loss for Compile.
type Builder struct {
	g       *G.ExprGraph
	params  *Params
	train   bool
	nodes   map[string]*Node // every named node: params, inputs, constants
	used    []*Param         // params bound in this graph, in first-use order
	usedN   []*Node
	inputs  map[string]*input
	outputs []output
	loss    *Node
	// lossWeight is the count the loss is a mean over (SetLossWeight).
	lossWeight *Node
	dropouts   []dropoutMask
	noise      []noiseInput
	penalties  []penalty
	tracked    []string
}

type input struct {
	node  *Node
	value *tensor.Dense
}

type output struct {
	name string
	node *Node
}

// Training reports whether the graph being built computes gradients, so a
// layer can switch dropout on.
func (b *Builder) Training() bool { return b.train }

// DType is the graph's float type.
func (b *Builder) DType() DType { return b.params.dtype }

func (b *Builder) claim(name string) {
	if name == "" {
		fail("node with empty name")
	}
	if _, dup := b.nodes[name]; dup {
		fail("two nodes named %q in one graph", name)
	}
}

// Param returns the node for the parameter called name, creating the
// parameter with init the first time any graph asks for it. Asking twice in
// one graph returns the same node.
func (b *Builder) Param(name string, shape []int, init Init) *Node {
	p, err := b.params.get(name, shape, init)
	if err != nil {
		panic(buildError{err})
	}
	if n, ok := b.nodes[name]; ok {
		return n
	}
	n := G.NewTensor(b.g, b.params.dtype.tensorType(), len(shape),
		G.WithShape(shape...), G.WithName(name), G.WithValue(p.value))
	b.nodes[name] = n
	b.used = append(b.used, p)
	b.usedN = append(b.usedN, n)
	return n
}

// Input declares a float input fed before each run with Program.Feed.
func (b *Builder) Input(name string, shape ...int) *Node {
	b.claim(name)
	v := newDense(b.params.dtype, shape, nil)
	n := G.NewTensor(b.g, b.params.dtype.tensorType(), len(shape),
		G.WithShape(shape...), G.WithName(name), G.WithValue(v))
	b.nodes[name] = n
	b.inputs[name] = &input{node: n, value: v}
	return n
}

// IndexInput declares an integer input (token ids) of the given shape, fed
// with Program.FeedIndices.
func (b *Builder) IndexInput(name string, shape ...int) *Node {
	b.claim(name)
	v := tensor.New(tensor.WithShape(shape...), tensor.WithBacking(make([]int, shapeSize(shape))))
	n := G.NewTensor(b.g, tensor.Int, len(shape), G.WithShape(shape...), G.WithName(name), G.WithValue(v))
	b.nodes[name] = n
	b.inputs[name] = &input{node: n, value: v}
	return n
}

// Constant returns a node with fixed values (row-major). It is a graph
// node, not a Gorgonia constant, so it works as a Broadcast operand.
func (b *Builder) Constant(name string, shape []int, values []float64) *Node {
	b.claim(name)
	if len(values) != shapeSize(shape) {
		fail("constant %s: %d values for shape %v", name, len(values), shape)
	}
	n := G.NewTensor(b.g, b.params.dtype.tensorType(), len(shape),
		G.WithShape(shape...), G.WithName(name), G.WithValue(newDense(b.params.dtype, shape, values)))
	b.nodes[name] = n
	return n
}

// Tile repeats x [d...] n times along a new leading axis: [n, d...].
func (b *Builder) Tile(name string, x *Node, n int) *Node {
	shape := append([]int{n}, Shape(x)...)
	axes := []byte{0}
	return BroadcastAdd(b.Constant(name, shape, make([]float64, shapeSize(shape))), x, axes...)
}

// Output marks x to be read after each run as Program.Output(name).
func (b *Builder) Output(name string, x *Node) {
	for _, o := range b.outputs {
		if o.name == name {
			fail("two outputs named %q", name)
		}
	}
	b.outputs = append(b.outputs, output{name: name, node: x})
}

// SetLoss marks the scalar x as the objective that a training program
// differentiates.
func (b *Builder) SetLoss(x *Node) {
	if x.Shape().TotalSize() != 1 {
		fail("loss must be a scalar, has shape %v", x.Shape())
	}
	b.loss = x
}

// BuildFunc adds a model to a graph.
type BuildFunc func(b *Builder) error

func build(params *Params, train bool, fn BuildFunc) (b *Builder, err error) {
	b = &Builder{
		g:      G.NewGraph(),
		params: params,
		train:  train,
		nodes:  map[string]*Node{},
		inputs: map[string]*input{},
	}
	defer func() {
		if r := recover(); r != nil {
			err = recovered("build graph", r)
		}
	}()
	if err := fn(b); err != nil {
		return nil, err
	}
	return b, nil
}

// Fail stops building with err: Compile returns it as its error, as it
// returns the errors of the package's own ops. Layers call it for a bad
// configuration or mismatched inputs found while they build, where a
// BuildFunc has no error to return; a plain panic is taken for a bug and
// reported with its stack.
func (b *Builder) Fail(err error) {
	panic(buildError{err})
}
