package graph

// penalty is a named scalar term a layer asks the objective to include.
type penalty struct {
	name string
	node *Node
}

// AddPenalty records a scalar term that the model's layers want in the
// objective, such as the KL divergence of Bayesian attention or the
// head-diversity regulariser. The task reads them with Penalties and
// decides their weight; each is also tracked (see Track).
func (b *Builder) AddPenalty(name string, x *Node) {
	b.Track(name, x)
	b.penalties = append(b.penalties, penalty{name: name, node: x})
}

// Track records a scalar to be logged after every run, under its name,
// without adding it to the objective: the NLL part of an ELBO, say.
func (b *Builder) Track(name string, x *Node) {
	if x.Shape().TotalSize() != 1 {
		fail("tracked value %s must be a scalar, has shape %v", name, x.Shape())
	}
	b.tracked = append(b.tracked, name)
	b.Output(name, x)
}

// Penalties returns the nodes recorded with AddPenalty, in order.
func (b *Builder) Penalties() []*Node {
	out := make([]*Node, len(b.penalties))
	for i, p := range b.penalties {
		out[i] = p.node
	}
	return out
}

// PenaltyNames returns the names of the penalties, in the order of
// Penalties.
func (b *Builder) PenaltyNames() []string {
	out := make([]string, len(b.penalties))
	for i, p := range b.penalties {
		out[i] = p.name
	}
	return out
}

// PenaltyValues returns the value in the last run of every tracked
// scalar, penalties included, by name.
func (p *Program) PenaltyValues() map[string]float64 {
	out := map[string]float64{}
	for _, name := range p.tracked {
		if v, _ := p.Output(name); len(v) == 1 {
			out[name] = v[0]
		}
	}
	return out
}
