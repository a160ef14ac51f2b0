package graph

import "strings"

// PenaltyKind says how the objective weighs a penalty: the kind, not the
// penalty's name, decides which term of the loss it joins.
type PenaltyKind int

const (
	// PenaltyOther is a penalty the built-in objectives have no weight
	// for; a task that records one must weigh it itself.
	PenaltyOther PenaltyKind = iota
	// PenaltyKL is the KL divergence of a Bayesian layer, the KL term of
	// an ELBO (layers/BAYES.md §5).
	PenaltyKL
	// PenaltyDiversity is a head-diversity regulariser (Lin et al. 2017).
	PenaltyDiversity
)

// String returns the kind's name: kl, diversity or other.
func (k PenaltyKind) String() string {
	switch k {
	case PenaltyKL:
		return "kl"
	case PenaltyDiversity:
		return "diversity"
	}
	return "other"
}

// penalty is a named scalar term a layer asks the objective to include.
type penalty struct {
	name string
	kind PenaltyKind
	node *Node
}

// AddPenaltyKind records a scalar term of the given kind that the model's
// layers want in the objective, such as the KL divergence of Bayesian
// attention or the head-diversity regulariser. The task reads them with
// Penalties and PenaltyKinds and decides their weight; each is also
// tracked under its name (see Track).
func (b *Builder) AddPenaltyKind(kind PenaltyKind, name string, x *Node) {
	b.Track(name, x)
	b.penalties = append(b.penalties, penalty{name: name, kind: kind, node: x})
}

// AddPenalty is AddPenaltyKind with the kind read from the name's suffix,
// for callers written before penalties had kinds: ".kl" is PenaltyKL,
// ".diversity" PenaltyDiversity, anything else PenaltyOther. This is the
// one place where a name means a kind; new code passes the kind.
func (b *Builder) AddPenalty(name string, x *Node) {
	kind := PenaltyOther
	switch {
	case strings.HasSuffix(name, ".kl"):
		kind = PenaltyKL
	case strings.HasSuffix(name, ".diversity"):
		kind = PenaltyDiversity
	}
	b.AddPenaltyKind(kind, name, x)
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

// Penalties returns the nodes recorded with AddPenaltyKind or AddPenalty,
// in order.
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

// PenaltyKinds returns the kinds of the penalties, in the order of
// Penalties.
func (b *Builder) PenaltyKinds() []PenaltyKind {
	out := make([]PenaltyKind, len(b.penalties))
	for i, p := range b.penalties {
		out[i] = p.kind
	}
	return out
}

// PenaltyValues returns the value in the last run of every tracked
// scalar, penalties included, by name.
func (p *Program) PenaltyValues() map[string]float64 {
	out := map[string]float64{}
	for _, name := range p.tracked {
		if v, _, err := p.Output(name); err == nil && len(v) == 1 {
			out[name] = v[0]
		}
	}
	return out
}
