package em

import (
	"errors"
	"fmt"
	"math"
)

// Inputs holds what one example gives one head's EM: the queries, the
// memory units' initial parameters, the masks and the annotated values.
// N is the number of query units, M of memory units, d the key dimension
// and m the value dimension; padded rows keep their full length.
type Inputs struct {
	// Q holds the queries q_i: [N, d].
	Q [][]float64
	// QueryMask marks the real query units: [N]; nil means all are real.
	QueryMask []bool

	// Xi0 holds the initial keys ξ_j⁰: [M, d]. They are also the means of
	// the key prior of §4.
	Xi0 [][]float64
	// Mu0 holds the initial values μ_j⁰: [M, m]. They are also the means of
	// the value prior of §5.
	Mu0 [][]float64
	// Alpha0 holds the initial key precisions α_j⁰ > 0: [M].
	Alpha0 []float64
	// Beta0 holds the initial value precisions β_j⁰ ≥ 0: [M]. Zero is the
	// β → 0 limit of MATH.md §2; it is valid wherever the value
	// likelihood is not evaluated (see InferValues and Propagate).
	Beta0 []float64
	// PiLogits holds the free prior's logits: [M]; log π⁰ is their log-softmax
	// over the real memory units. Only FreePrior reads it.
	PiLogits []float64
	// MemoryMask marks the real memory units: [M]; nil means all are real.
	// At least one memory unit must be real.
	MemoryMask []bool

	// Annotated marks the query units i ∈ S whose value is known (§5): [N];
	// nil means S is empty. A padded query unit is never in S.
	Annotated []bool
	// V holds the known values v_i: [N, m]. Only the rows of annotated real
	// query units are read; V may be nil when S is empty.
	V [][]float64
}

// Mixture is the state of one head's memory, the mixture of MATH.md §1:
// the parameters that EM adapts. Padded memory units keep whatever they
// hold, except LogPi, which is −Inf there.
type Mixture struct {
	// Xi holds the keys ξ_j: [M, d].
	Xi [][]float64
	// Alpha holds the key precisions α_j ≥ 0: [M].
	Alpha []float64
	// Mu holds the expected values μ_j: [M, m].
	Mu [][]float64
	// Beta holds the value precisions β_j ≥ 0: [M].
	Beta []float64
	// LogPi holds the log mixing prior log π_j: [M]. It is kept in log form
	// because the linked prior of §2 is a log-softmax, and −Inf marks units
	// with π_j = 0 (all padded units).
	LogPi []float64
}

// Pi returns the mixing prior π_j = exp(LogPi_j): [M].
func (mix Mixture) Pi() []float64 {
	pi := make([]float64, len(mix.LogPi))
	for j, l := range mix.LogPi {
		pi[j] = math.Exp(l)
	}
	return pi
}

// clone returns a deep copy, so that the exported functions never write to
// their caller's slices.
func (mix Mixture) clone() Mixture {
	return Mixture{
		Xi:    cloneMatrix(mix.Xi),
		Alpha: append([]float64(nil), mix.Alpha...),
		Mu:    cloneMatrix(mix.Mu),
		Beta:  append([]float64(nil), mix.Beta...),
		LogPi: append([]float64(nil), mix.LogPi...),
	}
}

func cloneMatrix(a [][]float64) [][]float64 {
	if a == nil {
		return nil
	}
	c := make([][]float64, len(a))
	for i, row := range a {
		c[i] = append([]float64(nil), row...)
	}
	return c
}

// problem is a validated Inputs with its sizes and its masks made explicit.
type problem struct {
	in Inputs

	nQuery, nMemory   int // N, M
	keyDim, valueDim  int // d, m
	queryReal         []bool
	memoryReal        []bool
	annotated         []bool // i ∈ S: annotated and real
	nRealMemory, nInS int    // number of real memory units, |S|
}

// newProblem validates in. Only real units' entries must be finite; padded
// rows must still have the right length, as in a statically shaped graph.
func newProblem(in Inputs) (*problem, error) {
	p := &problem{in: in, nQuery: len(in.Q), nMemory: len(in.Xi0)}
	if p.nMemory == 0 {
		return nil, errors.New("no memory units")
	}
	p.keyDim = len(in.Xi0[0])
	if p.keyDim == 0 {
		return nil, errors.New("key dimension d = 0")
	}
	if len(in.Mu0) != p.nMemory {
		return nil, fmt.Errorf("%d initial values μ⁰ for %d memory units", len(in.Mu0), p.nMemory)
	}
	p.valueDim = len(in.Mu0[0])
	if p.valueDim == 0 {
		return nil, errors.New("value dimension m = 0")
	}

	var err error
	if p.memoryReal, err = maskOrAll(in.MemoryMask, p.nMemory, "memory mask"); err != nil {
		return nil, err
	}
	if p.queryReal, err = maskOrAll(in.QueryMask, p.nQuery, "query mask"); err != nil {
		return nil, err
	}
	for _, isReal := range p.memoryReal {
		if isReal {
			p.nRealMemory++
		}
	}
	if p.nRealMemory == 0 {
		return nil, errors.New("every memory unit is padded")
	}

	if err := checkRows("query", in.Q, p.keyDim, p.queryReal); err != nil {
		return nil, err
	}
	if err := checkRows("initial key ξ⁰", in.Xi0, p.keyDim, p.memoryReal); err != nil {
		return nil, err
	}
	if err := checkRows("initial value μ⁰", in.Mu0, p.valueDim, p.memoryReal); err != nil {
		return nil, err
	}
	if err := checkVector("initial key precision α⁰", in.Alpha0, p.nMemory, p.memoryReal, isPositive, "finite and > 0"); err != nil {
		return nil, err
	}
	if err := checkVector("initial value precision β⁰", in.Beta0, p.nMemory, p.memoryReal, isNonNegative, "finite and ≥ 0"); err != nil {
		return nil, err
	}
	if in.PiLogits != nil {
		if err := checkVector("prior logit", in.PiLogits, p.nMemory, p.memoryReal, isFinite, "finite"); err != nil {
			return nil, err
		}
	}

	p.annotated = make([]bool, p.nQuery)
	if in.Annotated != nil {
		if len(in.Annotated) != p.nQuery {
			return nil, fmt.Errorf("annotation mask has %d entries for %d query units", len(in.Annotated), p.nQuery)
		}
		for i, a := range in.Annotated {
			p.annotated[i] = a && p.queryReal[i]
			if p.annotated[i] {
				p.nInS++
			}
		}
	}
	if p.nInS > 0 {
		if len(in.V) != p.nQuery {
			return nil, fmt.Errorf("%d value rows for %d query units", len(in.V), p.nQuery)
		}
		for i, row := range in.V {
			if !p.annotated[i] {
				continue // only the rows of S are read, so others may be empty
			}
			if err := checkRows("annotated value", [][]float64{row}, p.valueDim, []bool{true}); err != nil {
				return nil, fmt.Errorf("query unit %d: %w", i, err)
			}
		}
	}
	return p, nil
}

// maskOrAll returns mask, or an all-true mask of length n when mask is nil.
func maskOrAll(mask []bool, n int, name string) ([]bool, error) {
	if mask == nil {
		all := make([]bool, n)
		for i := range all {
			all[i] = true
		}
		return all, nil
	}
	if len(mask) != n {
		return nil, fmt.Errorf("%s has %d entries, want %d", name, len(mask), n)
	}
	return mask, nil
}

// checkRows checks that every row of a has length width and that the rows
// selected by check hold finite numbers.
func checkRows(name string, a [][]float64, width int, check []bool) error {
	if len(a) != len(check) {
		return fmt.Errorf("%d %s rows, want %d", len(a), name, len(check))
	}
	for i, row := range a {
		if len(row) != width {
			return fmt.Errorf("%s row %d has length %d, want %d", name, i, len(row), width)
		}
		if !check[i] {
			continue
		}
		for k, x := range row {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return fmt.Errorf("%s [%d][%d] = %v, want finite", name, i, k, x)
			}
		}
	}
	return nil
}

// checkVector checks that a has length n and that ok holds for its entries
// selected by check; want describes ok for the error message.
func checkVector(name string, a []float64, n int, check []bool, ok func(float64) bool, want string) error {
	if len(a) != n {
		return fmt.Errorf("%d entries of %s, want %d", len(a), name, n)
	}
	for j, x := range a {
		if check[j] && !ok(x) {
			return fmt.Errorf("%s [%d] = %v, want %s", name, j, x, want)
		}
	}
	return nil
}

func isPositive(x float64) bool    { return x > 0 && !math.IsInf(x, 1) }
func isNonNegative(x float64) bool { return x >= 0 && !math.IsInf(x, 1) }
func isFinite(x float64) bool      { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// isLogProbability admits log π = −Inf (π = 0) and tiny positive values,
// which the π update of §5 can produce by rounding.
func isLogProbability(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 1) }

// checkMixture checks that mix has the shapes of p and that its real units
// hold valid parameters.
func (p *problem) checkMixture(mix Mixture) error {
	if err := checkRows("mixture key ξ", mix.Xi, p.keyDim, p.memoryReal); err != nil {
		return err
	}
	if err := checkRows("mixture value μ", mix.Mu, p.valueDim, p.memoryReal); err != nil {
		return err
	}
	if err := checkVector("mixture key precision α", mix.Alpha, p.nMemory, p.memoryReal, isNonNegative, "finite and ≥ 0"); err != nil {
		return err
	}
	if err := checkVector("mixture value precision β", mix.Beta, p.nMemory, p.memoryReal, isNonNegative, "finite and ≥ 0"); err != nil {
		return err
	}
	if err := checkVector("mixture log π", mix.LogPi, p.nMemory, p.memoryReal, isLogProbability, "< +Inf"); err != nil {
		return err
	}
	return nil
}
