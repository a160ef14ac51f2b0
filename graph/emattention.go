package graph

import (
	"fmt"
	"runtime"

	"gorgonia.org/tensor"

	"github.com/probformer/probformer/graph/internal/kernels"
)

// EMSpec sets what EMAttention computes: the iteration counts and options
// of em/MATH.md §3–§6, and how heads are laid out.
type EMSpec struct {
	// KeyIters, PropagateIters and ValueIters are T_k (§4), T_p (§5) and
	// T_v (§3).
	KeyIters, PropagateIters, ValueIters int
	// AdaptAlpha adds the α update to key adaptation; AdaptBeta and
	// AdaptPi add the β and π updates to value propagation.
	AdaptAlpha, AdaptBeta, AdaptPi bool
	// FreePrior takes log π⁰ from EMInputs.PiLogits; otherwise π⁰ is the
	// norm-linked prior of §2.
	FreePrior bool
	// Heads is H.
	Heads int
	// SplitHeads lays q, k, v and the annotated values out as
	// [B, H, ·, ·], and the readout as [B, H, N, dv]. Otherwise they are
	// [B, ·, H·w] with each head a strided view (as Attention takes
	// them), so that no transposes are needed, and the readout is
	// [B, N, H·dv].
	SplitHeads bool
	// PackedKV takes the keys and values as one input K
	// [B, M, H·d + H·d] (the keys of every head, then the values, as a
	// linear-concat of the two projections makes them) read in place
	// through strided rows, with V nil: the projections are one product,
	// and their gradient one [B, M, 2·H·d] without a copy. It needs the
	// unsplit layout and dv = d.
	PackedKV bool
	// Residual makes the readout q + v_i (Set Transformer's residual
	// connection around attention, as ResidualAttentionPacked has it):
	// each row adds its queries to its readout, and the backward pass the
	// readout's gradient to the queries', so no Add op and no gradient sum
	// is left to Gorgonia. The same values as Add(q, readout): a sum of
	// two terms does not depend on their order. It needs dv = d, and at
	// padded query units the readout is q + 0.
	Residual bool
}

// EMInputs holds the inputs of EMAttention. Q, K and V are required, and
// Alpha0; the others are nil when unused. Masks hold 1 for a real (or
// annotated) unit and 0 otherwise; entries of padded units must be finite.
type EMInputs struct {
	Q *Node // queries q_i: [B, H, N, d] or [B, N, H·d]
	K *Node // initial keys ξ⁰_j: [B, H, M, d] or [B, M, H·d]
	V *Node // initial values μ⁰_j: [B, H, M, dv] or [B, M, H·dv]

	KeyMask   *Node // real memory units: [B, M]
	QueryMask *Node // real query units: [B, N]; padded ones drop out of every sum over i
	Annotated *Node // the annotated units S: [B, N]; with Values
	Values    *Node // their known values: [B, H, N, dv] or [B, N, H·dv]
	PiLogits  *Node // the free prior's logits: [B, H, M] per example or [H, M] per head

	// The per-head prior hyperparameters, already constrained, each [H]:
	// α⁰ and β⁰, θ_ξ, a_α − 1, b_α, θ_μ, a_β − 1, b_β and θ_π − 1.
	Alpha0, Beta0, ThetaXi, AAlphaExtra, BAlpha, ThetaMu, ABetaExtra, BBeta, PiExtra *Node

	// HyperShift, when set, makes the nine hyperparameters above raw
	// parameters r, in their order: the op uses softplus(r) + HyperShift[i]
	// for each, the values of SoftplusShift(r, HyperShift[i]) bit for bit,
	// and passes their gradients back through σ(r) as SoftplusShift's
	// backward pass does. A layer's positivity transforms then cost no ops
	// of their own: as SoftplusShift ops they were 30 of the maxnorm-em
	// model's instructions a step, each with the tape machine's work
	// around it.
	HyperShift *[kernels.EMHyperCount]float64
}

// EMOutput selects outputs of EMAttention.
type EMOutput uint8

const (
	EMReadout EMOutput = 1 << iota // the inferred values v_i
	EMWeights                      // the weights that formed them
	EMMixture                      // the adapted ξ, α, μ, β and log π
)

// EMResult holds the outputs EMAttention was asked for; the others are nil.
type EMResult struct {
	Readout *Node // [B, H, N, dv] or [B, N, H·dv]; 0 at padded query units
	Weights *Node // [B, H, N, M]; 0 at padded query units
	Xi      *Node // ξ: [B, H, M, d]
	Alpha   *Node // α: [B, H, M]
	Mu      *Node // μ: [B, H, M, dv]
	Beta    *Node // β: [B, H, M]
	LogPi   *Node // log π: [B, H, M]; MaskNegInf at padded memory units
}

// EMAttention is probabilistic attention, em/MATH.md §1–§6, as one fused
// op: per example and head, the initial prior π⁰ (§2), T_k iterations of
// key adaptation from the real query units (§4), T_p iterations of value
// propagation from the annotated ones (§5; skipped for an example whose S
// is empty), and the readout of every query unit with T_v value
// iterations (§3). It computes exactly what em's composed graph computes
// (em.Attend builds it, and its tests compare them), including the choice
// to leave out the last β update when T_v = 0.
//
// The forward pass keeps what the backward pass reads, and the backward
// pass is the analytic adjoint of every step (kernels.EMBackward), so the
// gradient reaches q, ξ⁰, μ⁰, the annotated values, the free prior's
// logits and every hyperparameter through all the unrolled iterations.
// The B·H problems run on all cores, each computed the same way whatever
// the core count; matrix products go to gemm.c.
//
// Padded memory units get weight exactly 0 and keep their initial
// parameters; padded query units leave every sum over i and read out 0.
// An example whose memory units are all padded has nothing to attend to:
// it reads out 0 (weights and mixture 0 too) and takes no gradient, so
// that it cannot turn the per-head gradients of the batch into NaN.
func EMAttention(spec EMSpec, in EMInputs, want EMOutput) EMResult {
	k, inputs := newEMKernel(spec, in, want)
	node := apply(k, inputs...)
	if want == EMReadout {
		return EMResult{Readout: node}
	}
	var res EMResult
	off := 0
	part := func(s tensor.Shape) *Node {
		p := apply(emPartKernel{offset: off, shape: fix(s), total: k.packedSize()}, node)
		off += s.TotalSize()
		return p
	}
	d := k.dims
	if want&EMReadout != 0 {
		res.Readout = part(k.readoutShape())
	}
	if want&EMWeights != 0 {
		res.Weights = part(tensor.Shape{d.b, d.h, d.n, d.m})
	}
	if want&EMMixture != 0 {
		res.Xi = part(tensor.Shape{d.b, d.h, d.m, d.d})
		res.Alpha = part(tensor.Shape{d.b, d.h, d.m})
		res.Mu = part(tensor.Shape{d.b, d.h, d.m, d.dv})
		res.Beta = part(tensor.Shape{d.b, d.h, d.m})
		res.LogPi = part(tensor.Shape{d.b, d.h, d.m})
	}
	return res
}

// Input slots of the EM op; absent optional inputs take no slot.
const (
	emQ = iota
	emK
	emV
	emKeyMask
	emQueryMask
	emAnnotated
	emValues
	emPiLogits
	emHyper0 // the nine hyperparameters, in kernels.EMHyper's order
	emSlots  = emHyper0 + kernels.EMHyperCount
)

type emDims struct{ b, h, n, m, d, dv, g int }

// emKernel is the EM op. at[slot] is the input position of a slot, or −1.
type emKernel struct {
	spec      EMSpec
	at        [emSlots]int8
	want      EMOutput
	perHeadPi bool // PiLogits is [H, M]
	dims      emDims
	saved     *emSaved
	// raw says the hyperparameter inputs are raw (EMInputs.HyperShift),
	// each shifted by its shift after the softplus
	raw   bool
	shift [kernels.EMHyperCount]float64
}

// emSaved holds the traces of an EM node's last forward run for its
// backward pass (as savedWeights does for Attention).
type emSaved struct {
	trace any // []float32 or []float64
	fresh bool
	// The forward's and the backward's per-worker state
	// ([]*emFwdWorker[T], []*emBwdWorker[T]) and the backward's
	// per-problem hyperparameter gradients ([]kernels.EMHyper[T]), kept
	// from one run to the next: made each run (about 50 KB a step at the
	// maxnorm-em-k1v0 sizes, most of the EM model's allocations beyond its
	// softmax twin's), they were garbage the runtime collected and pages
	// it returned to the OS and faulted in again. No value carries over:
	// a worker's fields are set for each problem before they are read,
	// and hyper is cleared each run.
	fwd, bwd, hyper any
	// hyperIn holds the raw hyperparameters' transformed values
	// ([]T, H for each slot), made each run from the raw inputs
	hyperIn any
	// pass is the pf_em_job pass's description, kept for its workers'
	// scratch (emPassOf)
	pass *kernels.EMPass32
}

// emFwdWorker is a forward worker's state: the Go path's scratch, the
// annotated queries' row, the problem and the trace's headers.
type emFwdWorker[T float] struct {
	scratch, inS []T
	p            kernels.EMProblem[T]
	tr           kernels.EMTrace[T]
	hdr          [][]T
}

// emBwdWorker is a backward worker's state, as emFwdWorker, with the
// seeds, the gradients' headers and the Go path's scratch.
type emBwdWorker[T float] struct {
	inS  []T
	p    kernels.EMProblem[T]
	tr   kernels.EMTrace[T]
	hdr  [][]T
	seed kernels.EMSeeds[T]
	gr   kernels.EMGrads[T]
	sc   *kernels.EMBackScratch[T]
}

// emKept returns *at as a []E of length n, made (and kept in *at) when
// it is not one; a kept slice keeps its values.
func emKept[E any](at *any, n int) []E {
	x, ok := (*at).([]E)
	if !ok || len(x) != n {
		x = make([]E, n)
		*at = x
	}
	return x
}

func newEMKernel(spec EMSpec, in EMInputs, want EMOutput) (emKernel, []*Node) {
	k := emKernel{spec: spec, want: want, saved: &emSaved{}}
	if in.HyperShift != nil {
		k.raw, k.shift = true, *in.HyperShift
	}
	if want == 0 || want&^(EMReadout|EMWeights|EMMixture) != 0 {
		fail("em attention: no valid output asked for (%d)", want)
	}
	if spec.KeyIters < 0 || spec.PropagateIters < 0 || spec.ValueIters < 0 {
		fail("em attention: negative iteration count in %+v", spec)
	}
	if spec.Heads < 1 {
		fail("em attention: %d heads", spec.Heads)
	}
	if in.Q == nil || in.K == nil || (in.V == nil) != spec.PackedKV || in.Alpha0 == nil {
		fail("em attention: q, k, v (or the packed keys and values alone) and α⁰ are required")
	}
	if spec.PackedKV && spec.SplitHeads {
		fail("em attention: packed keys and values need the unsplit layout")
	}
	if spec.Residual && want&EMReadout == 0 {
		fail("em attention: the residual connection needs the readout")
	}
	slots := [emSlots]*Node{in.Q, in.K, in.V, in.KeyMask, in.QueryMask, in.Annotated, in.Values, in.PiLogits,
		in.Alpha0, in.Beta0, in.ThetaXi, in.AAlphaExtra, in.BAlpha, in.ThetaMu, in.ABetaExtra, in.BBeta, in.PiExtra}
	var inputs []*Node
	for s, x := range slots {
		k.at[s] = -1
		if x != nil {
			k.at[s] = int8(len(inputs))
			inputs = append(inputs, x)
		}
	}
	shapes := make([]tensor.Shape, len(inputs))
	for i, x := range inputs {
		shapes[i] = x.Shape()
	}
	if err := k.check(shapes); err != nil {
		fail("em attention: %v", err)
	}
	return k, inputs
}

// check validates the inputs' shapes, the presence of what spec needs, and
// sets k.dims and k.perHeadPi.
func (k *emKernel) check(in []tensor.Shape) error {
	s := k.spec
	shape := func(slot int) tensor.Shape {
		if k.at[slot] < 0 {
			return nil
		}
		return in[k.at[slot]]
	}
	q, key, v := shape(emQ), shape(emK), shape(emV)
	var d emDims
	if s.SplitHeads {
		if len(q) != 4 || len(key) != 4 || len(v) != 4 {
			return fmt.Errorf("q %v, k %v, v %v: want 4-D [B, H, ·, ·]", q, key, v)
		}
		d = emDims{b: q[0], h: q[1], n: q[2], d: q[3], m: key[2], dv: v[3]}
		if q[1] != s.Heads || !key.Eq(tensor.Shape{d.b, d.h, d.m, d.d}) || !v.Eq(tensor.Shape{d.b, d.h, d.m, d.dv}) {
			return fmt.Errorf("q %v, k %v, v %v do not fit [B, %d, N, d], [B, %d, M, d], [B, %d, M, dv]", q, key, v, s.Heads, s.Heads, s.Heads)
		}
	} else if s.PackedKV {
		if len(q) != 3 || len(key) != 3 || q[2]%s.Heads != 0 {
			return fmt.Errorf("q %v, kv %v: want 3-D [B, ·, H·w] that split into %d heads", q, key, s.Heads)
		}
		d = emDims{b: q[0], h: s.Heads, n: q[1], d: q[2] / s.Heads, m: key[1], dv: q[2] / s.Heads}
		if !key.Eq(tensor.Shape{d.b, d.m, 2 * q[2]}) {
			return fmt.Errorf("q %v, kv %v do not fit [B, N, H·d], [B, M, 2·H·d]", q, key)
		}
	} else {
		if len(q) != 3 || len(key) != 3 || len(v) != 3 {
			return fmt.Errorf("q %v, k %v, v %v: want 3-D [B, ·, H·w]", q, key, v)
		}
		if q[2]%s.Heads != 0 || v[2]%s.Heads != 0 {
			return fmt.Errorf("q %v and v %v do not split into %d heads", q, v, s.Heads)
		}
		d = emDims{b: q[0], h: s.Heads, n: q[1], d: q[2] / s.Heads, m: key[1], dv: v[2] / s.Heads}
		if !key.Eq(tensor.Shape{d.b, d.m, q[2]}) || v[0] != d.b || v[1] != d.m {
			return fmt.Errorf("q %v, k %v, v %v do not fit [B, N, H·d], [B, M, H·d], [B, M, H·dv]", q, key, v)
		}
	}
	d.g = d.b * d.h
	if s.Residual && d.dv != d.d {
		return fmt.Errorf("the residual connection needs values as wide as the queries, not %d and %d", d.dv, d.d)
	}
	if d.n < 1 || d.m < 1 || d.d < 1 || d.dv < 1 {
		return fmt.Errorf("empty dimension in %+v", d)
	}
	k.dims = d
	want := func(slot int, name string, need bool, shapes ...tensor.Shape) error {
		got := shape(slot)
		if got == nil {
			if need {
				return fmt.Errorf("%s is required", name)
			}
			return nil
		}
		for _, w := range shapes {
			if got.Eq(w) {
				return nil
			}
		}
		return fmt.Errorf("%s has shape %v, want %v", name, got, shapes[0])
	}
	valueShape := tensor.Shape{d.b, d.n, d.h * d.dv}
	if s.SplitHeads {
		valueShape = tensor.Shape{d.b, d.h, d.n, d.dv}
	}
	propagate := s.PropagateIters > 0 && k.at[emAnnotated] >= 0
	if (k.at[emAnnotated] < 0) != (k.at[emValues] < 0) {
		return fmt.Errorf("annotation mask and annotated values must come together")
	}
	hyper := []struct {
		slot int
		name string
		need bool
	}{
		{emHyper0 + kernels.HAlpha0, "α⁰", true},
		{emHyper0 + kernels.HBeta0, "β⁰", !s.FreePrior || propagate || s.ValueIters > 0},
		{emHyper0 + kernels.HThetaXi, "θ_ξ", s.KeyIters > 0},
		{emHyper0 + kernels.HAAlpha, "a_α − 1", s.KeyIters > 0 && s.AdaptAlpha},
		{emHyper0 + kernels.HBAlpha, "b_α", s.KeyIters > 0 && s.AdaptAlpha},
		{emHyper0 + kernels.HThetaMu, "θ_μ", propagate},
		{emHyper0 + kernels.HABeta, "a_β − 1", propagate && s.updateBeta(0)},
		{emHyper0 + kernels.HBBeta, "b_β", propagate && s.updateBeta(0)},
		{emHyper0 + kernels.HPi, "θ_π − 1", propagate && s.AdaptPi},
	}
	for _, c := range hyper {
		if err := want(c.slot, c.name, c.need, tensor.Shape{d.h}); err != nil {
			return err
		}
	}
	for _, c := range []struct {
		slot   int
		name   string
		need   bool
		shapes []tensor.Shape
	}{
		{emKeyMask, "key mask", false, []tensor.Shape{{d.b, d.m}}},
		{emQueryMask, "query mask", false, []tensor.Shape{{d.b, d.n}}},
		{emAnnotated, "annotation mask", false, []tensor.Shape{{d.b, d.n}}},
		{emValues, "annotated values", false, []tensor.Shape{valueShape}},
		{emPiLogits, "prior logits", s.FreePrior, []tensor.Shape{{d.b, d.h, d.m}, {d.h, d.m}}},
	} {
		if err := want(c.slot, c.name, c.need, c.shapes...); err != nil {
			return err
		}
	}
	if !s.FreePrior && k.at[emPiLogits] >= 0 {
		return fmt.Errorf("prior logits given to the linked prior")
	}
	k.perHeadPi = k.at[emPiLogits] >= 0 && len(shape(emPiLogits)) == 2
	return nil
}

func (k emKernel) name() string {
	return fmt.Sprintf("em-attention(%+v,at=%v,want=%d)", k.spec, k.at, k.want)
}

func (k emKernel) readoutShape() tensor.Shape {
	d := k.dims
	if k.spec.SplitHeads {
		return tensor.Shape{d.b, d.h, d.n, d.dv}
	}
	return tensor.Shape{d.b, d.n, d.h * d.dv}
}

// packedSize is the length of the op's output when it packs several.
func (k emKernel) packedSize() int {
	d := k.dims
	size := 0
	if k.want&EMReadout != 0 {
		size += d.g * d.n * d.dv
	}
	if k.want&EMWeights != 0 {
		size += d.g * d.n * d.m
	}
	if k.want&EMMixture != 0 {
		size += d.g * (d.m*d.d + 4*d.m + d.m*d.dv)
	}
	return size
}

func (k emKernel) outShape(in []tensor.Shape) (tensor.Shape, error) {
	if err := k.check(in); err != nil {
		return nil, fmt.Errorf("em attention: %w", err)
	}
	if k.want == EMReadout {
		return k.readoutShape(), nil
	}
	return tensor.Shape{k.packedSize()}, nil
}

// constInput: masks take no gradient.
func (k emKernel) constInput(i int) bool {
	return i == int(k.at[emKeyMask]) || i == int(k.at[emQueryMask]) || i == int(k.at[emAnnotated])
}

func (k emKernel) do(in []*tensor.Dense, out *tensor.Dense) error {
	switch o := out.Data().(type) {
	case []float32:
		emRunForward(k, in, o)
	case []float64:
		emRunForward(k, in, o)
	default:
		return fmt.Errorf("unsupported dtype %T", o)
	}
	return nil
}

// emData holds the data of an op's inputs by slot (nil when absent),
// taken once per pass: tensor.Dense.Data goes through reflection, which
// cost a visible part of a problem when it ran per problem and slot.
type emData[T float] [emSlots][]T

func emDataOf[T float](k emKernel, in []*tensor.Dense) *emData[T] {
	var x emData[T]
	for slot := range emSlots {
		if k.at[slot] >= 0 {
			x[slot] = in[k.at[slot]].Data().([]T)
		}
	}
	if k.raw {
		// softplus(r) + shift, as SoftplusShift computes it
		hyper := emKept[T](&k.saved.hyperIn, kernels.EMHyperCount*k.dims.h)
		for i := range kernels.EMHyperCount {
			raw := x[emHyper0+i]
			if raw == nil {
				continue
			}
			y := hyper[i*k.dims.h : (i+1)*k.dims.h]
			for h, r := range raw[:len(y)] {
				y[h] = softplusShift(r, k.shift[i])
			}
			x[emHyper0+i] = y
		}
	}
	return &x
}

// problem returns the views of problem g = b·H + h of the inputs.
//
// It fills p, and inS [N] when the problem has annotated units, so that a
// worker reuses one of each for all its problems.
func emProblemOf[T float](k emKernel, x *emData[T], g int, p *kernels.EMProblem[T], inS []T) *kernels.EMProblem[T] {
	d := k.dims
	b, h := g/d.h, g%d.h
	data := func(slot int) []T { return x[slot] }
	*p = kernels.EMProblem[T]{N: d.n, M: d.m, D: d.d, Dv: d.dv}
	if k.spec.SplitHeads {
		p.Q, p.Ldq = data(emQ)[g*d.n*d.d:], d.d
		p.Xi0, p.Ldk = data(emK)[g*d.m*d.d:], d.d
		p.Mu0, p.Ldv = data(emV)[g*d.m*d.dv:], d.dv
		if x := data(emValues); x != nil {
			p.Vals, p.Ldx = x[g*d.n*d.dv:], d.dv
		}
	} else if k.spec.PackedKV {
		w := d.h * (d.d + d.dv)
		p.Q, p.Ldq = data(emQ)[b*d.n*d.h*d.d+h*d.d:], d.h*d.d
		p.Xi0, p.Ldk = data(emK)[b*d.m*w+h*d.d:], w
		p.Mu0, p.Ldv = data(emK)[b*d.m*w+d.h*d.d+h*d.dv:], w
		if x := data(emValues); x != nil {
			p.Vals, p.Ldx = x[b*d.n*d.h*d.dv+h*d.dv:], d.h*d.dv
		}
	} else {
		p.Q, p.Ldq = data(emQ)[b*d.n*d.h*d.d+h*d.d:], d.h*d.d
		p.Xi0, p.Ldk = data(emK)[b*d.m*d.h*d.d+h*d.d:], d.h*d.d
		p.Mu0, p.Ldv = data(emV)[b*d.m*d.h*d.dv+h*d.dv:], d.h*d.dv
		if x := data(emValues); x != nil {
			p.Vals, p.Ldx = x[b*d.n*d.h*d.dv+h*d.dv:], d.h*d.dv
		}
	}
	if x := data(emKeyMask); x != nil {
		p.KeyMask = x[b*d.m : (b+1)*d.m]
	}
	if x := data(emQueryMask); x != nil {
		p.QueryMask = x[b*d.n : (b+1)*d.n]
	}
	if x := data(emPiLogits); x != nil {
		if k.perHeadPi {
			p.Logits = x[h*d.m : (h+1)*d.m]
		} else {
			p.Logits = x[g*d.m : (g+1)*d.m]
		}
	}
	for i := range kernels.EMHyperCount {
		if x := data(emHyper0 + i); x != nil {
			p.H[i] = x[h]
		}
	}
	p.RealMemory = T(d.m)
	if p.KeyMask != nil {
		p.RealMemory = 0
		for _, x := range p.KeyMask {
			p.RealMemory += x
		}
	}
	if ann := data(emAnnotated); ann != nil && k.spec.PropagateIters > 0 {
		// S: annotated and real.
		p.InS = inS[:d.n]
		for i := range d.n {
			p.InS[i] = ann[b*d.n+i]
			if p.QueryMask != nil {
				p.InS[i] *= p.QueryMask[i]
			}
			p.SizeS += p.InS[i]
		}
	}
	return p
}

// emTraces returns k's trace buffer for G problems of dtype T.
func emTraces[T float](k emKernel, size int) []T {
	t, ok := k.saved.trace.([]T)
	if !ok || len(t) != size {
		t = make([]T, size)
		k.saved.trace = t
	}
	return t
}

// emRunForward runs every problem's forward pass into the trace and
// writes the outputs k wants.
func emRunForward[T float](k emKernel, in []*tensor.Dense, out []T) {
	d, s := k.dims, k.spec.kernel()
	size := kernels.EMTraceSize(s, d.n, d.m, d.d, d.dv)
	traces := emTraces[T](k, d.g*size)
	x := emDataOf[T](k, in)
	// em.c takes its scratch from its own pool (em_cgo.go), so the Go
	// path's is made only where it runs: made each run for each worker
	// (tens of KB a step at the maxnorm-em sizes), it cost page faults and
	// clearing for nothing
	inC := kernels.EMRunsC[T]()
	// The trace is cut a problem only where something reads its parts:
	// the Go path, or a mixture to write out. Otherwise em.c cuts it
	// itself, and emWrite reads the last weights and readout at their
	// offsets; cutting it each problem (slice headers of every part)
	// showed among the Go side's costs of the width-32 EM step.
	cut := !inC || k.want&EMMixture != 0
	if inC && out != nil && k.poolPass() {
		if pass := emPassOf(k, x, traces); pass != nil {
			pass.Out, pass.Ldo, pass.OB, pass.OH = any(out).([]float32), d.h*d.dv, d.n*d.h*d.dv, d.dv
			if kernels.EMForwardPass32(pass, runtime.GOMAXPROCS(0)) {
				k.saved.fresh = true
				return
			}
		}
	}
	lastW, lastR := kernels.EMTraceLast(s, d.n, d.m, d.d, d.dv)
	workers := emKept[*emFwdWorker[T]](&k.saved.fwd, runtime.GOMAXPROCS(0))
	emForProblems(d, func(w, g int) {
		if workers[w] == nil {
			workers[w] = &emFwdWorker[T]{inS: make([]T, d.n)}
		}
		if !inC && workers[w].scratch == nil {
			workers[w].scratch = make([]T, kernels.EMScratchSize(d.n, d.m))
		}
		wk := workers[w]
		scratch := wk.scratch
		p := emProblemOf(k, x, g, &wk.p, wk.inS)
		buf := traces[g*size : (g+1)*size]
		tr := &wk.tr
		if cut {
			tr = kernels.CutTraceInto(s, d.n, d.m, d.d, d.dv, buf, &wk.tr, &wk.hdr)
		} else {
			// em.c cuts the trace itself from its first element
			*tr = kernels.EMTrace[T]{Lp0: buf}
		}
		if p.RealMemory > 0 {
			if inC && out != nil && k.want&EMReadout != 0 && k.spec.Residual {
				// em.c adds the residual rows itself (emWrite skips them)
				p.Out, p.Ldo = emReadoutRows(k, out, g)
			}
			kernels.EMForward(s, p, tr, scratch)
		} else {
			// No memory unit can explain a query: the problem reads out
			// 0, and its backward pass is skipped (see EMAttention).
			clear(buf)
		}
		if out != nil {
			emWrite(k, out, p, tr, buf[lastR:lastR+d.n*d.dv], buf[lastW:lastW+d.n*d.m], g)
		}
	})
	k.saved.fresh = true
}

// emReadoutRows returns where problem g's readout rows go in out [N×dv
// at the returned stride], as emWrite writes them.
func emReadoutRows[T float](k emKernel, out []T, g int) ([]T, int) {
	d := k.dims
	if k.spec.SplitHeads {
		return out[g*d.n*d.dv:], d.dv
	}
	b, h := g/d.h, g%d.h
	return out[b*d.n*d.h*d.dv+h*d.dv:], d.h * d.dv
}

// emWrite writes problem g's outputs into out (packed in the order of
// EMResult's fields, each over all problems, when k wants several): r
// [N×dv] and w [N×M] are the trace's last readout and weights, the
// mixture is read from tr (cut only when k wants it).
func emWrite[T float](k emKernel, out []T, p *kernels.EMProblem[T], tr *kernels.EMTrace[T], r, w []T, g int) {
	d, s := k.dims, k.spec
	b, h := g/d.h, g%d.h
	off := 0
	if k.want&EMReadout != 0 {
		base, ld := g*d.n*d.dv, d.dv
		if !s.SplitHeads {
			base, ld = b*d.n*d.h*d.dv+h*d.dv, d.h*d.dv
		}
		// float32 heads of 8 (the maxnorm-em model's) a row at a time as
		// one [8]float32 through a local (16-byte moves), where the loop
		// below moved a value at a time and took most of this copy's
		// time; copied straight, or as a generic [8]T, the compiler calls
		// memmove, as dst and src might overlap
		out32, _ := any(out).([]float32)
		r32, _ := any(r).([]float32)
		rows8 := d.dv == 8 && out32 != nil && r32 != nil
		if s.Residual {
			// q + v_i, as Add(q, readout) makes it; a padded query's
			// readout is 0 (em.c wrote them when p.Out is set)
			if p.Out == nil {
				emAddRows(out[base:], ld, p.Q, p.Ldq, r, d.dv, d.n, d.dv, p)
			}
		} else {
			for i := range d.n {
				if rows8 && p.RealQuery(i) {
					row := *(*[8]float32)(r32[i*8:])
					*(*[8]float32)(out32[base+i*ld:]) = row
					continue
				}
				// element by element: a row of a narrow head is too short
				// for a call to memmove or memclr to pay
				dst, src := out[base+i*ld:base+i*ld+d.dv], r[i*d.dv:(i+1)*d.dv]
				if p.RealQuery(i) {
					for k, x := range src {
						dst[k] = x
					}
				} else {
					for k := range dst {
						dst[k] = 0
					}
				}
			}
		}
		off += d.g * d.n * d.dv
	}
	if k.want&EMWeights != 0 {
		dst := out[off+g*d.n*d.m : off+(g+1)*d.n*d.m]
		for i := range d.n {
			if p.RealQuery(i) {
				copy(dst[i*d.m:(i+1)*d.m], w[i*d.m:(i+1)*d.m])
			} else {
				clear(dst[i*d.m : (i+1)*d.m])
			}
		}
		off += d.g * d.n * d.m
	}
	if k.want&EMMixture == 0 {
		return
	}
	xi, ldxi := p.Xi0, p.Ldk
	if s.KeyIters > 0 {
		xi, ldxi = tr.Xi[s.KeyIters], d.d
	}
	for j := range d.m {
		copy(out[off+(g*d.m+j)*d.d:off+(g*d.m+j+1)*d.d], xi[j*ldxi:j*ldxi+d.d])
	}
	off += d.g * d.m * d.d
	copy(out[off+g*d.m:off+(g+1)*d.m], tr.Al[s.KeyIters])
	off += d.g * d.m
	mu, ldmu, beta, logPi := p.Mu0, p.Ldv, tr.Be[0], tr.Lp0
	if tr.Pr {
		tp := s.PropagateIters
		mu, ldmu, beta, logPi = tr.Mu[tp], d.dv, tr.Be[tp], tr.Lp[tp]
	}
	for j := range d.m {
		copy(out[off+(g*d.m+j)*d.dv:off+(g*d.m+j+1)*d.dv], mu[j*ldmu:j*ldmu+d.dv])
	}
	off += d.g * d.m * d.dv
	copy(out[off+g*d.m:off+(g+1)*d.m], beta)
	off += d.g * d.m
	copy(out[off+g*d.m:off+(g+1)*d.m], logPi)
}

// grads packs the gradients of every differentiable input from one
// backward pass and unpacks them.
func (k emKernel) grads(in []*Node, _, g *Node) []*Node {
	packed := apply(emGradKernel{k}, append(append([]*Node{}, in...), g)...)
	var shapes []tensor.Shape
	for i, x := range in {
		if !k.constInput(i) {
			shapes = append(shapes, x.Shape())
		}
	}
	parts := unpack(packed, shapes...)
	out := make([]*Node, len(in))
	for i := range in {
		if !k.constInput(i) {
			out[i], parts = parts[0], parts[1:]
		}
	}
	return out
}

// emGradKernel is the backward pass of an EM op: its inputs are the op's,
// then the gradient of its output; its output packs the gradients of the
// differentiable inputs in input order.
type emGradKernel struct{ k emKernel }

func (e emGradKernel) name() string { return "grad-" + e.k.name() }
func (e emGradKernel) outShape(in []tensor.Shape) (tensor.Shape, error) {
	total := 0
	for i, s := range in[:len(in)-1] {
		if !e.k.constInput(i) {
			total += s.TotalSize()
		}
	}
	return tensor.Shape{total}, nil
}
func (e emGradKernel) do(in []*tensor.Dense, out *tensor.Dense) error {
	switch o := out.Data().(type) {
	case []float32:
		emRunBackward(e.k, in[:len(in)-1], in[len(in)-1].Data().([]float32), o)
	case []float64:
		emRunBackward(e.k, in[:len(in)-1], in[len(in)-1].Data().([]float64), o)
	default:
		return fmt.Errorf("unsupported dtype %T", o)
	}
	return nil
}

// emRunBackward computes the packed input gradients from the output
// gradient gOut, from the forward's traces when they are fresh.
func emRunBackward[T float](k emKernel, in []*tensor.Dense, gOut, packed []T) {
	d, s := k.dims, k.spec
	ks := s.kernel()
	if !k.saved.fresh {
		emRunForward[T](k, in, nil)
	}
	k.saved.fresh = false
	size := kernels.EMTraceSize(ks, d.n, d.m, d.d, d.dv)
	traces := emTraces[T](k, d.g*size)
	// Where each differentiable input's gradient starts in packed. Each
	// problem zeroes its own rows of the gradients of q, k, v, the
	// annotated values and per-example logits (in parallel, and in cache
	// when it adds to them), the per-head sums are zeroed below.
	start := make([]int, len(in))
	off := 0
	for i, x := range in {
		start[i] = -1
		if !k.constInput(i) {
			start[i] = off
			off += x.Shape().TotalSize()
		}
	}
	region := func(slot int) []T {
		if k.at[slot] < 0 {
			return nil
		}
		i := k.at[slot]
		return packed[start[i] : start[i]+in[i].Shape().TotalSize()]
	}
	dq, dk, dv, dvals, dlogits := region(emQ), region(emK), region(emV), region(emValues), region(emPiLogits)
	kvw := d.h * d.d // the keys' and the values' row stride
	if s.PackedKV {
		// the values' gradient sits beside the keys' in each row
		kvw = d.h * (d.d + d.dv)
		dv = dk[d.h*d.d:]
	}
	hyper := emKept[kernels.EMHyper[T]](&k.saved.hyper, d.g) // per problem, summed over examples below
	clear(hyper)
	var logits []T // per problem, when the logits are per head
	if k.perHeadPi {
		logits = make([]T, d.g*d.m)
	}
	seedOff := k.seedOffsets()
	x := emDataOf[T](k, in)
	inC := kernels.EMRunsC[T]()
	pooled := false
	if inC && k.poolPass() {
		if pass := emPassOf(k, x, traces); pass != nil {
			hyper32 := any(hyper).([]kernels.EMHyper[float32])
			pass.Seed, pass.Ldr, pass.SB, pass.SH = any(gOut[seedOff.readout:]).([]float32), d.h*d.dv, d.n*d.h*d.dv, d.dv
			pass.GQ, pass.GLdq, pass.GQB, pass.GQH = any(dq).([]float32), d.h*d.d, d.n*d.h*d.d, d.d
			pass.GXi0, pass.GLdk, pass.GKB, pass.GKH = any(dk).([]float32), kvw, d.m*kvw, d.d
			pass.GMu0, pass.GLdv, pass.GVB, pass.GVH = any(dv).([]float32), d.h*d.dv, d.m*d.h*d.dv, d.dv
			if s.PackedKV {
				pass.GLdv, pass.GVB = kvw, d.m*kvw
			}
			pass.GH = hyper32
			pooled = kernels.EMBackwardPass32(pass, runtime.GOMAXPROCS(0))
		}
	}
	if !pooled {
		emBackwardProblems(k, x, inC, traces, size, hyper, logits, dq, dk, dv, dvals, dlogits, kvw, gOut, seedOff)
	}
	// Per-head gradients: sums over the examples, in a fixed order.
	for i := range kernels.EMHyperCount {
		dst := region(emHyper0 + i)
		if dst == nil {
			continue
		}
		clear(dst)
		for g := range d.g {
			dst[g%d.h] += hyper[g][i]
		}
		if k.raw {
			// through the softplus: σ(r) ⊙ g, SoftplusShift's backward
			for h, r := range in[k.at[emHyper0+i]].Data().([]T)[:len(dst)] {
				dst[h] = sigmoidOf(r) * dst[h]
			}
		}
	}
	if k.perHeadPi {
		clear(dlogits)
		for g := range d.g {
			h := g % d.h
			for j := range d.m {
				dlogits[h*d.m+j] += logits[g*d.m+j]
			}
		}
	}
}

// emBackwardProblems runs every problem's backward pass as Go jobs, one
// em.c (or Go) call a problem: emRunBackward's path for what pf_pool_em
// does not take (EMPass32).
func emBackwardProblems[T float](k emKernel, x *emData[T], inC bool, traces []T, size int, hyper []kernels.EMHyper[T],
	logits, dq, dk, dv, dvals, dlogits []T, kvw int, gOut []T, seedOff emSeedOffsets) {
	d, s := k.dims, k.spec
	ks := s.kernel()
	workers := emKept[*emBwdWorker[T]](&k.saved.bwd, runtime.GOMAXPROCS(0))
	emForProblems(d, func(w, g int) {
		if workers[w] == nil {
			workers[w] = &emBwdWorker[T]{inS: make([]T, d.n)}
		}
		if !inC && workers[w].sc == nil { // the Go path's scratch, as in emRunForward
			workers[w].sc = kernels.CutBackScratch[T](d.n, d.m, d.d, d.dv, make([]T, kernels.EMBackScratchSize(d.n, d.m, d.d, d.dv)))
		}
		wk := workers[w]
		b, h := g/d.h, g%d.h
		p := emProblemOf(k, x, g, &wk.p, wk.inS)
		gr := &wk.gr
		*gr = kernels.EMGrads[T]{H: &hyper[g]}
		if s.SplitHeads {
			gr.Q, gr.Ldq = dq[g*d.n*d.d:], d.d
			gr.Xi0, gr.Ldk = dk[g*d.m*d.d:], d.d
			gr.Mu0, gr.Ldv = dv[g*d.m*d.dv:], d.dv
			if dvals != nil {
				gr.Vals, gr.Ldx = dvals[g*d.n*d.dv:], d.dv
			}
		} else {
			gr.Q, gr.Ldq = dq[b*d.n*d.h*d.d+h*d.d:], d.h*d.d
			gr.Xi0, gr.Ldk = dk[b*d.m*kvw+h*d.d:], kvw
			gr.Mu0, gr.Ldv = dv[b*d.m*d.h*d.dv+h*d.dv:], d.h*d.dv
			if s.PackedKV {
				gr.Mu0, gr.Ldv = dv[b*d.m*kvw+h*d.dv:], kvw
			}
			if dvals != nil {
				gr.Vals, gr.Ldx = dvals[b*d.n*d.h*d.dv+h*d.dv:], d.h*d.dv
			}
		}
		switch {
		case k.perHeadPi:
			gr.Logits = logits[g*d.m : (g+1)*d.m]
		case dlogits != nil:
			gr.Logits = dlogits[g*d.m : (g+1)*d.m]
			clear(gr.Logits)
		}
		if p.RealMemory == 0 {
			// a problem without memory reads out 0 and takes no gradient
			clearRows(gr.Q, d.n, d.d, gr.Ldq)
			clearRows(gr.Xi0, d.m, d.d, gr.Ldk)
			clearRows(gr.Mu0, d.m, d.dv, gr.Ldv)
			if gr.Vals != nil {
				clearRows(gr.Vals, d.n, d.dv, gr.Ldx)
			}
			if s.Residual {
				emAddResidualGrad(k, gOut[seedOff.readout:], gr, g)
			}
			return
		}
		// EMBackward zeroes this problem's rows of the gradients before
		// it adds to them: em.c a row in one store, where a Go clear a
		// row (a call for every 8 values at heads of 8) cost more
		gr.Zero = true
		buf := traces[g*size : (g+1)*size]
		tr := &wk.tr
		if inC {
			// em.c cuts the trace itself from its first element
			*tr = kernels.EMTrace[T]{Lp0: buf}
		} else {
			tr = kernels.CutTraceInto(ks, d.n, d.m, d.d, d.dv, buf, &wk.tr, &wk.hdr)
		}
		tr.Pr = kernels.EMPropagates(ks, p)
		seed := &wk.seed
		*seed = kernels.EMSeeds[T]{}
		if k.want&EMReadout != 0 {
			base, ld := g*d.n*d.dv, d.dv
			if !s.SplitHeads {
				base, ld = b*d.n*d.h*d.dv+h*d.dv, d.h*d.dv
			}
			seed.Readout, seed.Ldr = gOut[seedOff.readout+base:], ld
		}
		if k.want&EMWeights != 0 {
			seed.Weights = gOut[seedOff.weights+g*d.n*d.m:]
		}
		if k.want&EMMixture != 0 {
			o := seedOff
			seed.Xi = gOut[o.xi+g*d.m*d.d : o.xi+(g+1)*d.m*d.d]
			seed.Alpha = gOut[o.alpha+g*d.m : o.alpha+(g+1)*d.m]
			seed.Mu = gOut[o.mu+g*d.m*d.dv : o.mu+(g+1)*d.m*d.dv]
			seed.Beta = gOut[o.beta+g*d.m : o.beta+(g+1)*d.m]
			seed.LogPi = gOut[o.logPi+g*d.m : o.logPi+(g+1)*d.m]
		}
		// em.c adds the residual connection's rows of the readout's seed
		// to q's gradient itself, in the call that made the rows, where
		// emAddRows's scalar loop showed in profiles
		inCRes := inC && s.Residual && seed.Readout != nil
		gr.AddReadoutSeed = inCRes
		kernels.EMBackward(ks, p, tr, seed, gr, wk.sc)
		if s.Residual && !inCRes {
			emAddResidualGrad(k, gOut[seedOff.readout:], gr, g)
		}
	})
}

// poolPass reports whether k's problems can run as one pool.c job
// (kernels.EMPass32) when em.c runs them: the readout alone, with the
// residual connection inside, in the unsplit layout, with no annotated
// units and no free-prior logits (the maxnorm-em model's blocks). Other
// ops run a Go job a pass and a cgo call a problem, the same calls.
func (k emKernel) poolPass() bool {
	return k.want == EMReadout && k.spec.Residual && !k.spec.SplitHeads && k.at[emAnnotated] < 0 &&
		k.at[emValues] < 0 && k.at[emPiLogits] < 0
}

// emPassOf describes k's problems, inputs and traces, for
// EMForwardPass32 and EMBackwardPass32 (the caller adds the outputs), as
// emProblemOf lays out each problem; nil unless T is float32.
func emPassOf[T float](k emKernel, x *emData[T], traces []T) *kernels.EMPass32 {
	x32, ok := any(x).(*emData[float32])
	if !ok {
		return nil
	}
	if k.saved.pass == nil {
		k.saved.pass = &kernels.EMPass32{}
	}
	d := k.dims
	p := k.saved.pass
	*p = kernels.EMPass32{Spec: k.spec.kernel(), B: d.b, H: d.h, N: d.n, M: d.m, D: d.d, Dv: d.dv,
		Q: x32[emQ], Ldq: d.h * d.d, QB: d.n * d.h * d.d, QH: d.d,
		KeyMask: x32[emKeyMask], QueryMask: x32[emQueryMask], Trace: any(traces).([]float32), Scratch: p.Scratch}
	if k.spec.PackedKV {
		w := d.h * (d.d + d.dv)
		p.Xi0, p.Ldk, p.KB, p.KH = x32[emK], w, d.m*w, d.d
		p.Mu0, p.Ldv, p.VB, p.VH = x32[emK][d.h*d.d:], w, d.m*w, d.dv
	} else {
		p.Xi0, p.Ldk, p.KB, p.KH = x32[emK], d.h*d.d, d.m*d.h*d.d, d.d
		p.Mu0, p.Ldv, p.VB, p.VH = x32[emV], d.h*d.dv, d.m*d.h*d.dv, d.dv
	}
	for i := range kernels.EMHyperCount {
		p.Hyper[i] = x32[emHyper0+i]
	}
	return p
}

// emAddResidualGrad adds problem g's rows of the readout's gradient gr
// (the readout's part of the op's output gradient) to its queries'
// gradient, the residual connection's share (EMSpec.Residual): the sum
// of the two terms Gorgonia would have made for Add(q, readout).
func emAddResidualGrad[T float](k emKernel, gr []T, g *kernels.EMGrads[T], prob int) {
	d := k.dims
	b, h := prob/d.h, prob%d.h
	base, ld := prob*d.n*d.dv, d.dv
	if !k.spec.SplitHeads {
		base, ld = b*d.n*d.h*d.dv+h*d.dv, d.h*d.dv
	}
	emAddRows(g.Q, g.Ldq, g.Q, g.Ldq, gr[base:], ld, d.n, d.d, nil)
}

// emAddRows sets rows×w values dst = a + b element by element, each
// operand's rows ld apart; dst may be a. With p set, the rows of p's
// padded queries take a + 0 (their readout is 0). A float32 head of 8
// (the maxnorm-em model's) goes a row at a time through fixed-size
// arrays, without the general loop's bounds checks.
func emAddRows[T float](dst []T, ldd int, a []T, lda int, b []T, ldb, rows, w int, p *kernels.EMProblem[T]) {
	real := func(i int) bool { return p == nil || p.RealQuery(i) }
	d32, ok1 := any(dst).([]float32)
	a32, ok2 := any(a).([]float32)
	b32, ok3 := any(b).([]float32)
	if ok1 && ok2 && ok3 && w == 8 {
		var zero [8]float32
		for i := range rows {
			x, y, z := (*[8]float32)(d32[i*ldd:]), (*[8]float32)(a32[i*lda:]), &zero
			if real(i) {
				z = (*[8]float32)(b32[i*ldb:])
			}
			// written out: Go does not unroll loops, and the loop's
			// count and branch cost as much as the additions
			x[0], x[1], x[2], x[3] = y[0]+z[0], y[1]+z[1], y[2]+z[2], y[3]+z[3]
			x[4], x[5], x[6], x[7] = y[4]+z[4], y[5]+z[5], y[6]+z[6], y[7]+z[7]
		}
		return
	}
	for i := range rows {
		x, y := dst[i*ldd:i*ldd+w], a[i*lda:i*lda+w]
		if !real(i) {
			for k := range x {
				x[k] = y[k] + 0
			}
			continue
		}
		z := b[i*ldb : i*ldb+w]
		for k := range x {
			x[k] = y[k] + z[k]
		}
	}
}

// emSeedOffsets says where each output's gradient starts in the op's
// output gradient.
type emSeedOffsets struct{ readout, weights, xi, alpha, mu, beta, logPi int }

func (k emKernel) seedOffsets() emSeedOffsets {
	d := k.dims
	var o emSeedOffsets
	off := 0
	if k.want&EMReadout != 0 {
		o.readout = off
		off += d.g * d.n * d.dv
	}
	if k.want&EMWeights != 0 {
		o.weights = off
		off += d.g * d.n * d.m
	}
	o.xi = off
	o.alpha = o.xi + d.g*d.m*d.d
	o.mu = o.alpha + d.g*d.m
	o.beta = o.mu + d.g*d.m*d.dv
	o.logPi = o.beta + d.g*d.m
	return o
}

// emPartKernel is one output of a packed EM op: the values from offset,
// in its shape. Its gradient places the part's gradient back into a
// zero-filled packed gradient.
type emPartKernel struct {
	offset, total int
	shape         fixedShape
}

func (p emPartKernel) name() string {
	return fmt.Sprintf("em-part(%d,%d,%v)", p.offset, p.total, p.shape.get())
}
func (p emPartKernel) outShape([]tensor.Shape) (tensor.Shape, error) { return p.shape.get(), nil }
func (p emPartKernel) do(in []*tensor.Dense, out *tensor.Dense) error {
	return unpackKernel{offset: p.offset, shape: p.shape}.do(in, out)
}
func (p emPartKernel) grads(_ []*Node, _, g *Node) []*Node {
	return []*Node{apply(emPlaceKernel{offset: p.offset, total: p.total}, g)}
}

// emPlaceKernel puts its input at offset of a zero vector of length total.
type emPlaceKernel struct{ offset, total int }

func (p emPlaceKernel) name() string { return fmt.Sprintf("em-place(%d,%d)", p.offset, p.total) }
func (p emPlaceKernel) outShape([]tensor.Shape) (tensor.Shape, error) {
	return tensor.Shape{p.total}, nil
}
func (p emPlaceKernel) do(in []*tensor.Dense, out *tensor.Dense) error {
	switch o := out.Data().(type) {
	case []float32:
		clear(o)
		copy(o[p.offset:], in[0].Data().([]float32))
	case []float64:
		clear(o)
		copy(o[p.offset:], in[0].Data().([]float64))
	}
	return nil
}

// UpdatesBeta reports whether propagation iteration t updates β: the last
// iteration's update reaches nothing when there is no value iteration, and
// is left out (em/MATH.md §5; em.Attend explains why).
func (s EMSpec) UpdatesBeta(t int) bool { return s.kernel().UpdateBeta(t) }

// kernel is what the per-problem arithmetic (kernels.EMForward,
// kernels.EMBackward) reads of s.
func (s EMSpec) kernel() kernels.EMSpec {
	return kernels.EMSpec{KeyIters: s.KeyIters, PropagateIters: s.PropagateIters, ValueIters: s.ValueIters,
		AdaptAlpha: s.AdaptAlpha, AdaptBeta: s.AdaptBeta, AdaptPi: s.AdaptPi}
}

// updateBeta is s.kernel().UpdateBeta.
func (s EMSpec) updateBeta(t int) bool { return s.kernel().UpdateBeta(t) }

// emForProblems runs problem(w, g) for the op's problems g = b·H + h on
// the workers, each on one worker w. With two or more examples a worker,
// a worker takes whole examples, all their heads in order: without
// SplitHeads the heads' columns lie side by side in the rows of q, k, v,
// the readout and their gradients (8 floats a head at heads of 8, so two
// heads to a 64-byte line), and a worker taking every other head wrote
// into lines the other core was writing. The workers take the examples
// one at a time from a shared counter, not a fixed half each: an EM pass
// is long (about 1 ms at the maxnorm-em sizes), and on a shared machine
// a fixed half left one core waiting for the other, whose thread another
// process had taken, for a good part of it. Each problem's values depend
// on its inputs alone (w picks only the scratch), and the per-head sums
// run after, in a fixed order, so neither split changes a bit.
func emForProblems(d emDims, problem func(w, g int)) {
	procs := runtime.GOMAXPROCS(0)
	if d.b < 2*procs || d.h == 1 {
		kernels.ParallelFor(d.g, problem)
		return
	}
	shareElements(procs, d.b, func(w, bi int) {
		for g := bi * d.h; g < (bi+1)*d.h; g++ {
			problem(w, g)
		}
	})
}

// clearRows zeroes rows×w values of x whose rows are strided by ld.
func clearRows[T float](x []T, rows, w, ld int) {
	for i := range rows {
		clear(x[i*ld : i*ld+w])
	}
}
