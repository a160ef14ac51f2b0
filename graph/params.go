package graph

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"gorgonia.org/tensor"
)

// Init fills a new parameter of the given shape from rng.
type Init func(rng *rand.Rand, shape []int) []float64

// Glorot is the uniform Xavier initialiser U(−a, a), a = √(6/(fan_in+fan_out)),
// with the fans taken from the last two axes.
func Glorot(rng *rand.Rand, shape []int) []float64 {
	fanIn, fanOut := 1, 1
	switch len(shape) {
	case 0:
	case 1:
		fanIn, fanOut = shape[0], shape[0]
	default:
		fanIn, fanOut = shape[len(shape)-2], shape[len(shape)-1]
	}
	a := math.Sqrt(6 / float64(fanIn+fanOut))
	return Uniform(a)(rng, shape)
}

// Uniform returns the initialiser U(−a, a).
func Uniform(a float64) Init {
	return func(rng *rand.Rand, shape []int) []float64 {
		v := make([]float64, shapeSize(shape))
		for i := range v {
			v[i] = a * (2*rng.Float64() - 1)
		}
		return v
	}
}

// Normal returns the initialiser N(0, std²).
func Normal(std float64) Init {
	return func(rng *rand.Rand, shape []int) []float64 {
		v := make([]float64, shapeSize(shape))
		for i := range v {
			v[i] = std * rng.NormFloat64()
		}
		return v
	}
}

// Constant returns the initialiser that sets every element to c.
func Constant(c float64) Init {
	return func(_ *rand.Rand, shape []int) []float64 {
		v := make([]float64, shapeSize(shape))
		for i := range v {
			v[i] = c
		}
		return v
	}
}

// Zeros sets every element to 0.
func Zeros(rng *rand.Rand, shape []int) []float64 { return Constant(0)(rng, shape) }

// Ones sets every element to 1.
func Ones(rng *rand.Rand, shape []int) []float64 { return Constant(1)(rng, shape) }

// Param is one named learnable tensor.
type Param struct {
	Name  string
	Shape []int
	value *tensor.Dense
}

// Values returns a float64 copy of the parameter's values, row-major.
func (p *Param) Values() []float64 { return toFloat64(data(p.value)) }

// SetValues overwrites the parameter in place, so that every graph sharing
// it sees the new values.
func (p *Param) SetValues(v []float64) error {
	if err := copyInto(p.value.Data(), v); err != nil {
		return fmt.Errorf("set %s: %w", p.Name, err)
	}
	return nil
}

// Data returns the live backing, a []float32 or []float64. Writes to it
// change the parameter. It is read without Dense.Data's reflection
// (data), as an optimizer reads every parameter each step.
func (p *Param) Data() any { return data(p.value) }

// Params is the set of a model's parameters by hierarchical name. Layers ask
// for a parameter by name and shape; the first request creates it from the
// run's seeded RNG and later requests (from another graph, say an
// evaluation graph of another batch size) return the same tensor.
type Params struct {
	dtype  DType
	rng    *rand.Rand
	list   []*Param
	byName map[string]*Param
}

// NewParams returns an empty parameter set whose initial values come from a
// PCG generator seeded with seed.
func NewParams(dtype DType, seed uint64) *Params {
	return &Params{
		dtype:  dtype,
		rng:    rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15)),
		byName: map[string]*Param{},
	}
}

// DType is the type of every parameter.
func (ps *Params) DType() DType { return ps.dtype }

// List returns the parameters in creation order.
func (ps *Params) List() []*Param { return slices.Clone(ps.list) }

// Lookup returns the parameter called name, or nil.
func (ps *Params) Lookup(name string) *Param { return ps.byName[name] }

// Count returns the number of scalar parameters.
func (ps *Params) Count() int {
	n := 0
	for _, p := range ps.list {
		n += shapeSize(p.Shape)
	}
	return n
}

// get returns the parameter called name, creating it with init if new. A
// name reused with another shape is an error: two layers would otherwise
// silently share weights.
func (ps *Params) get(name string, shape []int, init Init) (*Param, error) {
	if name == "" {
		return nil, fmt.Errorf("parameter with empty name")
	}
	if p, ok := ps.byName[name]; ok {
		if !slices.Equal(p.Shape, shape) {
			return nil, fmt.Errorf("parameter %s: requested shape %v, exists with %v", name, shape, p.Shape)
		}
		return p, nil
	}
	for _, s := range shape {
		if s <= 0 {
			return nil, fmt.Errorf("parameter %s: bad shape %v", name, shape)
		}
	}
	p := &Param{Name: name, Shape: slices.Clone(shape), value: newDense(ps.dtype, shape, init(ps.rng, shape))}
	ps.list = append(ps.list, p)
	ps.byName[name] = p
	return p, nil
}
