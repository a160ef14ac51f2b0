package graph

import (
	"fmt"
	"math"
	"runtime"

	"gorgonia.org/tensor"

	"github.com/probformer/probformer/graph/internal/kernels"
)

// BayesAttentionSample is a Bayesian attention layer's training sample
// and its KL̄ (layers/BAYES.md §2–§5) as one op that computes the scores
// once for both. Per head, with s_ij = q_i·k_j/√d:
//
//	out_i = Σ_j W_ij v_j,   W_ij = softmax_j (s_ij + b_ij)     over the visible keys
//	b_ij  = (1/k)·log(−log u_ij)   (cfg.Posterior BayesWeibull, noise u ∈ (0, 1])
//	b_ij  = σ·ε_ij                 (BayesLogNormal, noise ε)
//	c     = BayesPriorLogits(k, prior.W1, prior.B1, prior.W2, prior.B2, cfg.Heads)
//	kl    = BayesAttentionKL(q, k, keyMask, queryMask, c, cfg)
//
// so out is BiasedAttention(q, k, v, keyMask, b, cfg.Heads, cfg.Causal)
// with b the noise term above, and kl is BayesAttentionKL's value with the
// contextual prior network's logits, or with the constant prior when
// prior is nil. q: [B, N, H·d], k: [B, M, H·d], v: [B, M, H·dv], keyMask:
// [B, M] or nil, queryMask: [B, N] or nil (it leaves padded queries out of
// the KL only), noise: [B, H, N, M], prior's W1 [H, d, R], B1 [H, R],
// W2 [H, R, 1], B2 [H] → out [B, N, H·dv] and the scalar kl.
//
// The forward pass computes, beside the sample and the KL, the KL's
// gradient with respect to the scores and the prior logits for a unit
// upstream gradient (both are linear in it), and saves them with the
// sampled weights. The backward pass is then softmax attention's, with
// the KL's score gradient added to dS before the two products that give
// dq and dk, which the sample and the KL so share, and the prior
// network's, whose gradient of k is added to the same dk. The noise and
// the masks take no gradient; q, k, v and the prior network's parameters
// do; the parameters' gradients are summed over the examples in a fixed
// order. In float32, with AVX2, a head without a causal mask that
// attention.c takes runs there (with a hidden width R ≤ 16). Results do
// not depend on the core count.
//
// The op's own output is the KL (before its sum to a scalar); out is a
// node that reads the readout the op saved. Its gradient reaches the op
// as a zero, and the op's backward pass takes the readout's gradient
// directly, so that no readout-sized gradient is added to another.
func BayesAttentionSample(q, k, v, keyMask, queryMask, noise *Node, prior *BayesPriorNet, cfg BayesKL) (out, kl *Node) {
	if err := cfg.check(); err != nil {
		fail("Bayesian attention: %v", err)
	}
	if noise == nil {
		fail("Bayesian attention: no noise")
	}
	a := bayesSampleKernel{cfg: cfg, masked: keyMask != nil, queryMasked: queryMask != nil, contextual: prior != nil,
		st: &bayesSampleState{}}
	in := []*Node{q, k, v}
	for _, x := range []*Node{keyMask, queryMask, noise} {
		if x != nil {
			in = append(in, x)
		}
	}
	if prior != nil {
		in = append(in, prior.W1, prior.B1, prior.W2, prior.B2)
	}
	node := apply(a, in...)
	qs, vs := q.Shape(), v.Shape()
	out = apply(bayesReadoutKernel{st: a.st, shape: fix(tensor.Shape{qs[0], qs[1], vs[2]})}, node)
	return out, Sum(node)
}

// BayesPriorNet is the contextual prior network of Bayesian attention
// (layers/BAYES.md §2; BayesPriorLogits): W1 [H, d, R], B1 [H, R],
// W2 [H, R, 1], B2 [H].
type BayesPriorNet struct{ W1, B1, W2, B2 *Node }

// bayesSampleState is what one BayesAttentionSample node's forward pass
// leaves for its readout and its backward pass (which the tape machine
// runs later in the same run, on the same inputs), and the buffers it
// keeps between runs.
type bayesSampleState struct {
	p     any // []T: the sampled weights W [B, H, N, M]
	x     any // []T: ∂Σ KL_ij/∂s [B, H, N, M]
	out   any // []T: the readout [B, N, H·dv]
	dc    any // []T: ∂Σ KL_ij/∂c [B, H, M] (contextual prior)
	sums  []float64
	count int  // KL̄'s denominator
	fresh bool // set by the forward pass, cleared by the backward
	// scratch holds one worker's buffers each ([]*klScratch[T])
	scratch any
	// pad holds the prior network's parameters for attention.c, per head
	// (priorPad); partial the per-head, per-example sums of their
	// gradients [B·H, d·R + 2R + 1]
	pad     []float32
	partial []float64
	// gOut is the readout's gradient node, which the readout's SymDiff
	// records before the op's own (the readout comes after the op).
	gOut *Node
	// pass describes the float32 heads for one pool.c job a pass
	// (bayesPass), kept for its workers' scratch and its constants
	pass *kernels.BayesPass32
	kc   [7]float64
	skip []uint32
}

// stateBuffer returns *p as a []T of n values, replacing it when it has
// another type or length.
func stateBuffer[T float](p *any, n int) []T {
	s, ok := (*p).([]T)
	if !ok || len(s) != n {
		s = make([]T, n)
		*p = s
	}
	return s
}

// sampleScratch returns the state's per-worker buffers, for heads of n
// queries, m keys and a prior network R wide.
func sampleScratch[T float](st *bayesSampleState, n, m, r int) []*klScratch[T] {
	s, ok := st.scratch.([]*klScratch[T])
	if !ok || len(s) != runtime.GOMAXPROCS(0) || (s[0] != nil && (len(s[0].s) != n*m || len(s[0].row) != m ||
		len(s[0].u) != m*r)) {
		s = make([]*klScratch[T], runtime.GOMAXPROCS(0))
		st.scratch = s
	}
	return s
}

func newSampleScratch[T float](n, m, r int) *klScratch[T] {
	sc := newKLScratch[T](n, m)
	sc.c, sc.u, sc.pg = make([]T, m), make([]T, m*r), make([]float32, 16*64+33)
	return sc
}

func newKLScratch[T float](n, m int) *klScratch[T] {
	f := func() []float64 { return make([]float64, m) }
	return &klScratch[T]{s: make([]T, n*m), ds: make([]T, n*m), row: make([]T, m), a: make([]T, m), b: make([]T, m),
		colsum: make([]T, m), logp: f(), p: f(), alpha: f(), lga: f(), psi: f(), e: f(), dc: f()}
}

// bayesSampleKernel is BayesAttentionSample's op: inputs q, k, v, then
// the key mask and the query mask where it has them, the noise, and the
// prior network's W1, B1, W2, B2 where it has them; output [1], KL̄.
type bayesSampleKernel struct {
	cfg                             BayesKL
	masked, queryMasked, contextual bool
	st                              *bayesSampleState
}

func (a bayesSampleKernel) name() string {
	c := a.cfg
	return fmt.Sprintf("bayes-sample(%d,k=%g,rate=%g,σ=%g,σ0=%g,h=%d,causal=%v,masked=%v,qmasked=%v,ctx=%v)",
		c.Posterior, c.K, c.PriorRate, c.Sigma, c.PriorSigma, c.Heads, c.Causal, a.masked, a.queryMasked, a.contextual)
}

// sampleOperands are the values of a node's inputs; absent ones are nil.
type sampleOperands[T float] struct {
	q, k, v, keyMask, queryMask, noise []T
	w1, b1, w2, b2                     []T // the prior network
}

func sampleOperandsOf[T float](a bayesSampleKernel, in []*tensor.Dense) sampleOperands[T] {
	o := sampleOperands[T]{q: in[0].Data().([]T), k: in[1].Data().([]T), v: in[2].Data().([]T)}
	i := 3
	if a.masked {
		o.keyMask, i = in[i].Data().([]T), i+1
	}
	if a.queryMasked {
		o.queryMask, i = in[i].Data().([]T), i+1
	}
	o.noise, i = in[i].Data().([]T), i+1
	if a.contextual {
		o.w1, o.b1, o.w2, o.b2 = in[i].Data().([]T), in[i+1].Data().([]T), in[i+2].Data().([]T), in[i+3].Data().([]T)
	}
	return o
}

// noiseIndex is the input index of the noise; the prior network's
// parameters follow it.
func (a bayesSampleKernel) noiseIndex() int {
	i := 3
	if a.masked {
		i++
	}
	if a.queryMasked {
		i++
	}
	return i
}

// sampleDims are a node's sizes: B, N, M, d and dv per head, the prior
// network's hidden width R (0 without it), and 1/√d.
type sampleDims struct {
	b, n, m, d, dv, r int
	scale             float64
}

// dims checks the input shapes and returns the sizes.
func (a bayesSampleKernel) dims(in []tensor.Shape) (z sampleDims, err error) {
	ni := a.noiseIndex()
	want := ni + 1
	if a.contextual {
		want += 4
	}
	if len(in) != want {
		return z, fmt.Errorf("%d inputs, want %d", len(in), want)
	}
	kk := bayesKLKernel{cfg: a.cfg, masked: a.masked, queryMasked: a.queryMasked}
	if z.b, z.n, z.m, z.d, err = kk.dims(append([]tensor.Shape{in[0], in[1]}, in[3:ni]...)); err != nil {
		return z, err
	}
	h := a.cfg.Heads
	if v := in[2]; len(v) != 3 || v[0] != z.b || v[1] != z.m || v[2]%h != 0 {
		return z, fmt.Errorf("v %v does not fit k %v and %d heads", v, in[1], h)
	}
	z.dv = in[2][2] / h
	if !in[ni].Eq(tensor.Shape{z.b, h, z.n, z.m}) {
		return z, fmt.Errorf("noise %v, want [%d %d %d %d]", in[ni], z.b, h, z.n, z.m)
	}
	if a.contextual {
		if _, _, _, z.r, err = (priorKernel{heads: h}).dims(append([]tensor.Shape{in[1]}, in[ni+1:]...)); err != nil {
			return z, err
		}
	}
	z.scale = 1 / math.Sqrt(float64(z.d))
	return z, nil
}

func (a bayesSampleKernel) outShape(in []tensor.Shape) (tensor.Shape, error) {
	if _, err := a.dims(in); err != nil {
		return nil, err
	}
	return tensor.Shape{1}, nil
}

func (a bayesSampleKernel) do(in []*tensor.Dense, out *tensor.Dense) error {
	switch o := out.Data().(type) {
	case []float32:
		o[0] = float32(bayesSampleForward[float32](a, in))
	case []float64:
		o[0] = bayesSampleForward[float64](a, in)
	default:
		return fmt.Errorf("unsupported dtype %v", out.Dtype())
	}
	return nil
}

// constInput: the masks and the noise take no gradient.
func (a bayesSampleKernel) constInput(i int) bool {
	return i >= 3 && i <= a.noiseIndex()
}

// grads computes the gradients of q, k, v (and of the prior network) in
// one backward pass, from the KL's gradient g and the readout's, and
// unpacks them.
func (a bayesSampleKernel) grads(in []*Node, _, g *Node) []*Node {
	gin := append(append([]*Node{}, in...), g)
	if a.st.gOut != nil {
		gin = append(gin, a.st.gOut)
	}
	packed := apply(bayesSampleGradKernel{a: a, readoutGrad: a.st.gOut != nil}, gin...)
	s := []tensor.Shape{in[0].Shape(), in[1].Shape(), in[2].Shape()}
	ni := a.noiseIndex()
	if a.contextual {
		for _, x := range in[ni+1:] {
			s = append(s, x.Shape())
		}
	}
	gs := unpack(packed, s...)
	out := make([]*Node, len(in))
	copy(out, gs[:3])
	if a.contextual {
		copy(out[ni+1:], gs[3:])
	}
	return out
}

// bayesSampleForward runs the op's forward pass: it fills the state (the
// readout, the sampled weights and the KL's unit gradients) and returns
// KL̄. Each head's KL sum lands in its own slot and the slots are added in
// order, so the value does not depend on how the heads are spread over
// cores.
func bayesSampleForward[T float](a bayesSampleKernel, in []*tensor.Dense) float64 {
	o := sampleOperandsOf[T](a, in)
	z, _ := a.dims(shapes(in))
	cfg, st := a.cfg, a.st
	h := cfg.Heads
	p, x := stateBuffer[T](&st.p, z.b*h*z.n*z.m), stateBuffer[T](&st.x, z.b*h*z.n*z.m)
	out := stateBuffer[T](&st.out, z.b*z.n*h*z.dv)
	var dc []T
	if a.contextual {
		dc = stateBuffer[T](&st.dc, z.b*h*z.m)
	}
	if len(st.sums) != z.b*h {
		st.sums = make([]float64, z.b*h)
	}
	st.count = klCount(cfg, o.keyMask, o.queryMask, z.b, z.n, z.m)
	scratch := sampleScratch[T](st, z.n, z.m, z.r)
	pad := priorPad(st, o, z, h)
	cs := cfg.consts()
	head := func(w, xh int) {
		if scratch[w] == nil {
			scratch[w] = newSampleScratch[T](z.n, z.m, z.r)
		}
		st.sums[xh] = sampleHead(cfg, cs, scratch[w], o, z, pad, xh, p, x, out, dc)
	}
	if sampleElementsC(cfg, o, z, pad) && bayesPoolPasses {
		if pass := bayesPass(st, o, z, h, pad, p, x); pass != nil {
			st.kc = sampleKC(cfg, cs)
			if len(st.skip) != z.b {
				st.skip = make([]uint32, z.b)
			}
			pass.KC, pass.Sums, pass.Skipped = &st.kc, st.sums, st.skip
			pass.Out = any(out).([]float32)
			if pad != nil {
				pass.B2, pass.DC = any(o.b2).([]float32), any(dc).([]float32)
			}
			if kernels.BayesForwardPass32(pass, runtime.GOMAXPROCS(0)) {
				// the heads attention.c skipped, in Go, in order
				for bi, skipped := range st.skip {
					for hh := range h {
						if skipped&(1<<hh) != 0 {
							head(0, bi*h+hh)
						}
					}
				}
				return sampleMean(st)
			}
		}
	}
	if !sampleElementsC(cfg, o, z, pad) || !forBayesElements(z.b, h, func(w, bi int) {
		if scratch[w] == nil {
			scratch[w] = newSampleScratch[T](z.n, z.m, z.r)
		}
		skipped := sampleElementC(cfg, cs, scratch[w], o, z, pad, bi, p, x, out, dc, st.sums)
		for hh := range h {
			if skipped&(1<<hh) != 0 {
				head(w, bi*h+hh)
			}
		}
	}) {
		forBayesHeads(z.b, h, head)
	}
	return sampleMean(st)
}

// sampleMean marks st's forward pass done and returns KL̄: the heads'
// Σ KL_ij summed in order over its denominator (0 without one).
func sampleMean(st *bayesSampleState) float64 {
	st.fresh = true
	if st.count == 0 {
		return 0
	}
	var total float64
	for _, s := range st.sums {
		total += s
	}
	return total / float64(st.count)
}

// bayesPoolPasses lets the float32 heads of a pass run as one pool.c job
// (bayesPass); the tests turn it off to hold the job to the element
// calls' Go jobs, which compute the same calls.
var bayesPoolPasses = true

// bayesPass describes the op's float32 heads, inputs and saved buffers,
// for BayesForwardPass32 and BayesBackwardPass32 (the caller adds the
// pass's own outputs), as sampleElementC and the backward's element
// calls lay them out; nil unless T is float32.
func bayesPass[T float](st *bayesSampleState, o sampleOperands[T], z sampleDims, h int, pad []float32, p, x []T) *kernels.BayesPass32 {
	q32, ok := any(o.q).([]float32)
	if !ok {
		return nil
	}
	if st.pass == nil {
		st.pass = &kernels.BayesPass32{}
	}
	pass := st.pass
	*pass = kernels.BayesPass32{B: z.b, H: h, N: z.n, M: z.m, D: z.d, Dv: z.dv, Q: q32, K: any(o.k).([]float32),
		V: any(o.v).([]float32), Scale: float32(z.scale), P: any(p).([]float32), X: any(x).([]float32), Pad: pad,
		PadSize: priorPadSize(z.d), PG: pass.PG}
	if o.noise != nil {
		pass.Noise = any(o.noise).([]float32)
	}
	if o.keyMask != nil {
		pass.Mask = any(o.keyMask).([]float32)
	}
	if o.queryMask != nil {
		pass.QMask = any(o.queryMask).([]float32)
	}
	return pass
}

// forBayesElements runs elem(w, bi) for the batch elements bi < b on the
// workers, who take them in turn from a shared counter (see
// forBayesHeads), and reports whether it did: it runs nothing where
// forHeads would share one element's heads between workers (fewer than
// two elements a worker).
func forBayesElements(b, heads int, elem func(w, bi int)) bool {
	workers, whole := wholeElements(b, heads)
	if !whole {
		return false
	}
	shareElements(workers, b, elem)
	return true
}

// forBayesHeads runs head(w, xh) for the b·heads heads xh = bi·heads + hh
// on the workers as forHeads does, but where forHeads would give each
// worker the fixed batch elements bi ≡ w, the workers take whole
// elements in turn from a shared counter (7ce9102; the pool.c jobs take
// them from the counter's two ends, pf_claim): on a machine shared with other processes a helper
// that starts late or is preempted mid-share no longer holds the caller
// at the section's end with the rest of its fixed share, nor a helper
// the caller. Each head writes its own outputs and slots only (the KL
// sums st.sums[xh], the prior's parts st.partial's row xh), and a
// worker's scratch carries no value from one head to the next, so the
// values do not depend on who runs which element.
func forBayesHeads(b, heads int, head func(w, xh int)) {
	if workers, whole := wholeElements(b, heads); !whole || workers < 2 || !forBayesElements(b, heads, func(w, bi int) {
		for xh := bi * heads; xh < (bi+1)*heads; xh++ {
			head(w, xh)
		}
	}) {
		forHeads(b, heads, head)
	}
}

// priorPad lays out the prior network's parameters for attention.c, per
// head: w1 [d×16], its transpose [16×d], b1 and w2 [16], zero past the
// hidden width R. It returns nil where attention.c does not take them
// (float64, no network, R > 16).
func priorPad[T float](st *bayesSampleState, o sampleOperands[T], z sampleDims, h int) []float32 {
	if _, ok := any(o.q).([]float32); !ok || o.w1 == nil || z.r > 16 {
		return nil
	}
	d, r := z.d, z.r
	size := priorPadSize(d)
	if len(st.pad) != h*size {
		st.pad = make([]float32, h*size)
	}
	for hh := range h {
		w1p, w1t, b1p, w2p := priorPadHead(st.pad, hh, d)
		for e := range d {
			for t := range r {
				x := float32(o.w1[(hh*d+e)*r+t])
				w1p[e*16+t], w1t[t*d+e] = x, x
			}
		}
		for t := range r {
			b1p[t], w2p[t] = float32(o.b1[hh*r+t]), float32(o.w2[hh*r+t])
		}
	}
	return st.pad
}

func priorPadSize(d int) int { return 32*d + 32 }

// priorPadHead returns head hh's w1 [d×16], w1ᵀ [16×d], b1 and w2 [16] in
// pad.
func priorPadHead(pad []float32, hh, d int) (w1p, w1t, b1p, w2p []float32) {
	s := pad[hh*priorPadSize(d) : (hh+1)*priorPadSize(d)]
	return s[:16*d], s[16*d : 32*d], s[32*d : 32*d+16], s[32*d+16:]
}

// bayesSampleGoOnly makes every head take the Go loop, for the tests
// that hold attention.c's heads equal to it.
var bayesSampleGoOnly bool

// sampleHead computes head xh (example xh/H, head xh%H) of the forward
// pass: its sampled weights into p, its readout into out, ∂Σ KL/∂s into x
// and ∂Σ KL/∂c into dc (when contextual), and returns its Σ KL_ij. pad
// is priorPad's layout of the prior network, or nil.
func sampleHead[T float](cfg BayesKL, cs klConsts, sc *klScratch[T], o sampleOperands[T], z sampleDims, pad []float32,
	xh int, p, x, out, dc []T) float64 {
	h := cfg.Heads
	n, m, d, dv := z.n, z.m, z.d, z.dv
	hd, hv := h*d, h*dv
	bi, hh := xh/h, xh%h
	qh, kh, vh, oh := o.q[bi*n*hd+hh*d:], o.k[bi*m*hd+hh*d:], o.v[bi*m*hv+hh*dv:], out[bi*n*hv+hh*dv:]
	ph, xhd, uh := p[xh*n*m:(xh+1)*n*m], x[xh*n*m:(xh+1)*n*m], o.noise[xh*n*m:(xh+1)*n*m]
	var mrow, qrow, crow, dch []T
	if o.keyMask != nil {
		mrow = o.keyMask[bi*m : (bi+1)*m]
	}
	if o.queryMask != nil {
		qrow = o.queryMask[bi*n : (bi+1)*n]
	}
	if dc != nil {
		dch = dc[xh*m : (xh+1)*m]
	}
	if !cfg.Causal && !bayesSampleGoOnly && (o.w1 == nil || pad != nil) {
		if v, ok := sampleHeadC(cfg, cs, sc, o, pad, hh, qh, kh, vh, mrow, qrow, uh, z, ph, xhd, oh, dch); ok {
			return v
		}
	}
	if o.w1 != nil {
		crow = sc.c
		priorHeadLogits(o, z, h, hh, kh, sc.u, crow)
	}
	// the sample: W = softmax(s + b), out = W v
	kernels.Gemm(false, true, n, m, d, T(z.scale), qh, hd, kh, hd, 0, sc.s, m)
	noiseTerm(cfg, uh, ph)
	for i, s := range sc.s[:n*m] {
		ph[i] += s
	}
	if p32, ok := any(ph).([]float32); !ok || !kernels.SoftmaxRows32(p32, n, m, any(mrow).([]float32), cfg.Causal) {
		softmaxRowsGo(ph, n, m, mrow, cfg.Causal)
	}
	kernels.Gemm(false, false, n, dv, m, 1, ph, m, vh, hv, 0, oh, hv)
	// the KL and its gradients for a unit upstream gradient
	clear(xhd)
	clear(sc.dc)
	var sum float64
	priorLim := -1 // the key limit sc's prior was computed for
	for i := range n {
		if qrow != nil && qrow[i] == 0 {
			continue
		}
		lim := m
		if cfg.Causal {
			lim = i + 1
		}
		if lim != priorLim {
			if klPrior(cfg, sc, crow, mrow, lim, priorLgamma|priorDigamma) == 0 {
				continue
			}
			priorLim = lim
		}
		sum += klRow(cfg, cs, sc, mrow, sc.s[i*m:(i+1)*m], lim, 1, xhd[i*m:(i+1)*m], crow != nil)
	}
	for j := range dch {
		dch[j] = T(sc.dc[j])
	}
	return sum
}

// priorHeadLogits sets c [m] to the prior network's logits of head hh's
// keys kh (its first row, rows H·d apart), with the hidden units
// W₁ᵀ k_j + b₁ in u [m×R]: c_j = w₂ · ReLU(u_j) + b₂.
func priorHeadLogits[T float](o sampleOperands[T], z sampleDims, h, hh int, kh, u, c []T) {
	r := z.r
	priorHeadHidden(o, z, h, hh, kh, u)
	w2 := o.w2[hh*r : (hh+1)*r]
	for j := range z.m {
		s := o.b2[hh]
		for t, x := range u[j*r : (j+1)*r] {
			if x > 0 {
				s += x * w2[t]
			}
		}
		c[j] = s
	}
}

// noiseTerm sets b to the score bias of the noise u: (1/k)·log(−log u)
// (Weibull) or σ·u (log-normal, u = ε).
func noiseTerm[T float](cfg BayesKL, u, b []T) {
	if cfg.Posterior == BayesLogNormal {
		for i, e := range u {
			b[i] = T(cfg.Sigma) * e
		}
		return
	}
	if u32, ok := any(u).([]float32); ok && kernels.WeibullLogNoise32(u32, any(b).([]float32), float32(1/cfg.K)) {
		return
	}
	weibullLogNoiseGo(u, b, 1/cfg.K)
}

// sampleHeadC runs one float32 head of the forward pass without a causal
// mask in attention.c (pf_bayes_head: the prior, the sample, the KL and
// its gradients) where it applies, and reports whether it did; see
// sampleHead. Its lgamma and ψ are float32 vector functions, where the
// Go loop takes lgammaFast and digammaFast in float64.
func sampleHeadC[T float](cfg BayesKL, cs klConsts, sc *klScratch[T], o sampleOperands[T], pad []float32, hh int,
	qh, kh, vh, mrow, qrow, uh []T, z sampleDims, ph, xh, oh, dch []T) (float64, bool) {
	q32, ok := any(qh).([]float32)
	if !ok || !kernels.SampleHeadFits(z.n, z.m, z.d, z.dv) {
		return 0, false
	}
	kc := &sc.kc
	*kc = [7]float64{1, cfg.Sigma, cfg.PriorRate, cs.a, cs.c0, cs.shift, cs.inv2s02}
	if cfg.Posterior == BayesWeibull {
		kc[0], kc[1] = 0, 1/cfg.K
	}
	var mr, qr, dc []float32
	if mrow != nil {
		mr = any(mrow).([]float32)
	}
	if qrow != nil {
		qr = any(qrow).([]float32)
	}
	var net *kernels.PriorNet32
	if pad != nil {
		w1p, _, b1p, w2p := priorPadHead(pad, hh, z.d)
		net = &sc.net
		*net = kernels.PriorNet32{W1: w1p, B1: b1p, W2: w2p, B2: float32(o.b2[hh])}
		dc = any(dch).([]float32)
	}
	h := cfg.Heads
	return kernels.BayesHead32(q32, h*z.d, any(kh).([]float32), any(vh).([]float32), h*z.dv, z.n, z.m, z.d, z.dv,
		float32(z.scale), mr, qr, any(uh).([]float32), net, kc, any(ph).([]float32), any(xh).([]float32),
		any(oh).([]float32), dc)
}

// sampleElementsC reports whether the forward pass's float32 heads go to
// attention.c a batch element at a time (sampleElementC): where
// sampleHead would try sampleHeadC first for every head.
func sampleElementsC[T float](cfg BayesKL, o sampleOperands[T], z sampleDims, pad []float32) bool {
	_, ok := any(o.q).([]float32)
	return ok && !cfg.Causal && !bayesSampleGoOnly && (o.w1 == nil || pad != nil) && cfg.Heads <= 32 &&
		kernels.SampleHeadFits(z.n, z.m, z.d, z.dv)
}

// sampleKC is attention.c's settings of cfg's sampled heads (see
// kernels.BayesHead32): the posterior (0 Weibull, 1 log-normal) and its
// parameter, the prior's, and the KL's constants.
func sampleKC(cfg BayesKL, cs klConsts) [7]float64 {
	kc := [7]float64{1, cfg.Sigma, cfg.PriorRate, cs.a, cs.c0, cs.shift, cs.inv2s02}
	if cfg.Posterior == BayesWeibull {
		kc[0], kc[1] = 0, 1/cfg.K
	}
	return kc
}

// sampleElementC runs the heads of batch element bi in one call to
// attention.c (kernels.BayesHeads32: each head as sampleHeadC runs it, so
// the same values), their Σ KL_ij into sums, and returns the bit mask of
// the heads it did not run, which sampleHead takes.
func sampleElementC[T float](cfg BayesKL, cs klConsts, sc *klScratch[T], o sampleOperands[T], z sampleDims,
	pad []float32, bi int, p, x, out, dc []T, sums []float64) uint32 {
	h := cfg.Heads
	n, m, hd, hv := z.n, z.m, h*z.d, h*z.dv
	all := uint32(1)<<h - 1
	kc := &sc.kc
	*kc = sampleKC(cfg, cs)
	var mr, qr, b2, dce []float32
	if o.keyMask != nil {
		mr = any(o.keyMask[bi*m : (bi+1)*m]).([]float32)
	}
	if o.queryMask != nil {
		qr = any(o.queryMask[bi*n : (bi+1)*n]).([]float32)
	}
	if pad != nil {
		b2, dce = any(o.b2).([]float32), any(dc[bi*h*m:(bi+1)*h*m]).([]float32)
	}
	e := bi * h * n * m // the element's first head's weights, noise, x
	skipped, ok := kernels.BayesHeads32(h, any(o.q[bi*n*hd:]).([]float32), hd, any(o.k[bi*m*hd:]).([]float32),
		any(o.v[bi*m*hv:]).([]float32), hv, n, m, z.d, z.dv, float32(z.scale), mr, qr,
		any(o.noise[e:e+h*n*m]).([]float32), pad, priorPadSize(z.d), b2, kc, any(p[e:e+h*n*m]).([]float32),
		any(x[e:e+h*n*m]).([]float32), any(out[bi*n*hv:]).([]float32), dce, sums[bi*h:(bi+1)*h])
	if !ok {
		return all
	}
	return skipped
}

// bayesSampleGradKernel computes the gradients of a BayesAttentionSample
// node, packed as [dq | dk | dv | dW1 | dB1 | dW2 | dB2], from its inputs,
// the KL's upstream gradient G [1] and (with readoutGrad) the readout's
// gradient Gout [B, N, H·dv]. With P the saved weights, X and Xc the KL's
// saved unit gradients and g = G / KL̄'s denominator, per head:
//
//	dv = Pᵀ Gout,  dP = Gout vᵀ,  dS = P ⊙ (dP − rowsum(P ⊙ dP)) + g X,
//	dq = dS k / √d,  dk = dSᵀ q / √d + dk_prior,  dc = g Xc,
//
// and the prior network's gradients from dc (BayesPriorLogits's, with
// its dk added to the attention's): per head and example in one task,
// summed over the examples in order after all tasks.
type bayesSampleGradKernel struct {
	a           bayesSampleKernel
	readoutGrad bool // the readout's gradient is the last input
}

func (g bayesSampleGradKernel) name() string {
	return fmt.Sprintf("grad-%s(readout=%v)", g.a.name(), g.readoutGrad)
}
func (g bayesSampleGradKernel) outShape(in []tensor.Shape) (tensor.Shape, error) {
	n := in[0].TotalSize() + in[1].TotalSize() + in[2].TotalSize()
	if g.a.contextual {
		for _, s := range in[g.a.noiseIndex()+1 : g.a.noiseIndex()+5] {
			n += s.TotalSize()
		}
	}
	return tensor.Shape{n}, nil
}
func (g bayesSampleGradKernel) do(in []*tensor.Dense, out *tensor.Dense) error {
	switch o := out.Data().(type) {
	case []float32:
		bayesSampleBackward(g, in, o)
	case []float64:
		bayesSampleBackward(g, in, o)
	default:
		return fmt.Errorf("unsupported dtype %v", out.Dtype())
	}
	return nil
}

func bayesSampleBackward[T float](gk bayesSampleGradKernel, in []*tensor.Dense, packed []T) {
	a := gk.a
	nin := len(in) - 1
	if gk.readoutGrad {
		nin--
	}
	ops := in[:nin]
	gKL := float64(in[nin].Data().([]T)[0])
	var gOut []T
	if gk.readoutGrad {
		gOut = in[nin+1].Data().([]T)
	}
	st := a.st
	z, _ := a.dims(shapes(ops))
	b, n, m, d, dv, r := z.b, z.n, z.m, z.d, z.dv, z.r
	h := a.cfg.Heads
	p, pok := st.p.([]T)
	if !st.fresh || !pok || len(p) != b*h*n*m {
		bayesSampleForward[T](a, ops) // no saved forward pass: recompute it
		p = st.p.([]T)
	}
	st.fresh = false
	x := st.x.([]T)
	o := sampleOperandsOf[T](a, ops)
	off := 0
	next := func(k int) []T {
		s := packed[off : off+k]
		off += k
		return s
	}
	dq, dk, dvv := next(len(o.q)), next(len(o.k)), next(len(o.v))
	var xc []T
	np := d*r + 2*r + 1 // a head's prior-network gradient, per example
	if a.contextual {
		xc = st.dc.([]T)
		if len(st.partial) != b*h*np {
			st.partial = make([]float64, b*h*np)
		}
	}
	var g float64
	if st.count > 0 {
		g = gKL / float64(st.count)
	}
	hd, hv := h*d, h*dv
	scratch := sampleScratch[T](st, n, m, r)
	pad := priorPad(st, o, z, h)
	head := func(w, xh int) {
		if scratch[w] == nil {
			scratch[w] = newSampleScratch[T](n, m, r)
		}
		sc := scratch[w]
		bi, hh := xh/h, xh%h
		ph, xhd := p[xh*n*m:(xh+1)*n*m], x[xh*n*m:(xh+1)*n*m]
		qh, kh, vh := o.q[bi*n*hd+hh*d:], o.k[bi*m*hd+hh*d:], o.v[bi*m*hv+hh*dv:]
		dqh, dkh, dvh := dq[bi*n*hd+hh*d:], dk[bi*m*hd+hh*d:], dvv[bi*m*hv+hh*dv:]
		var dch, xch []T // ∂L/∂c of the head's keys, and the KL's unit one
		var part []float64
		if a.contextual {
			dch, xch, part = sc.c, xc[xh*m:(xh+1)*m], st.partial[xh*np:(xh+1)*np]
		}
		if gOut != nil && !bayesSampleGoOnly && (!a.contextual || pad != nil) {
			var net *kernels.PriorNet32
			if pad != nil {
				w1p, w1t, b1p, w2p := priorPadHead(pad, hh, d)
				net = &sc.net
				*net = kernels.PriorNet32{W1: w1p, W1t: w1t, B1: b1p, W2: w2p}
			}
			if sampleHeadBwd32(qh, kh, vh, gOut[bi*n*hv+hh*dv:], ph, xhd, hd, hv, n, m, d, dv, z.scale, g, dqh, dkh, dvh,
				net, xch, part, r, sc.pg) {
				return
			}
		}
		for j := range dch {
			dch[j] = T(g * float64(xch[j]))
		}
		ds := sc.ds[:n*m]
		if gOut != nil {
			gh := gOut[bi*n*hv+hh*dv:]
			kernels.Gemm(true, false, m, dv, n, 1, ph, m, gh, hv, 0, dvh, hv)
			kernels.Gemm(false, true, n, m, dv, 1, gh, hv, vh, hv, 0, ds, m)
			for r := range n {
				pr, dr := ph[r*m:(r+1)*m], ds[r*m:(r+1)*m]
				var dot T
				for j := range pr {
					dot += pr[j] * dr[j]
				}
				for j := range pr {
					dr[j] = pr[j] * (dr[j] - dot)
				}
			}
		} else {
			for j := range m {
				clear(dvh[j*hv : j*hv+dv])
			}
			clear(ds)
		}
		for i, v := range xhd {
			ds[i] += T(g) * v
		}
		kernels.Gemm(false, false, n, d, m, T(z.scale), ds, m, kh, hd, 0, dqh, hd)
		kernels.Gemm(true, false, m, d, n, T(z.scale), ds, m, qh, hd, 0, dkh, hd)
		if a.contextual {
			priorHeadBackward(o, z, h, hh, kh, sc.u, dch, dkh, part)
		}
	}
	// a batch element's heads in one call to attention.c where each head
	// would take sampleHeadBwd32's (the same call a head, so the same
	// values), the Go loop above otherwise
	q32, f32 := any(o.q).([]float32)
	pooled := false
	if f32 && gOut != nil && !bayesSampleGoOnly && (!a.contextual || pad != nil) && bayesPoolPasses {
		if pass := bayesPass(st, o, z, h, pad, p, x); pass != nil {
			pass.G, pass.Gx, pass.Gd = any(gOut).([]float32), float32(g), g
			pass.DQ, pass.DK, pass.DV = any(dq).([]float32), any(dk).([]float32), any(dvv).([]float32)
			if a.contextual {
				pass.XC, pass.Part, pass.NP, pass.R = any(xc).([]float32), st.partial, np, r
			}
			pooled = kernels.BayesBackwardPass32(pass, runtime.GOMAXPROCS(0))
		}
	}
	if !pooled && (!f32 || gOut == nil || bayesSampleGoOnly || (a.contextual && pad == nil) || !kernels.SampleHeadFits(n, m, d, dv) ||
		!forBayesElements(b, h, func(w, bi int) {
			if scratch[w] == nil {
				scratch[w] = newSampleScratch[T](n, m, r)
			}
			var pad32, xce []float32
			var parts []float64
			if a.contextual {
				pad32, xce, parts = pad, any(xc[bi*h*m:(bi+1)*h*m]).([]float32), st.partial[bi*h*np:(bi+1)*h*np]
			}
			e := bi * h * n * m
			if !kernels.BayesHeadsBwd32(h, q32[bi*n*hd:], hd, any(o.k[bi*m*hd:]).([]float32),
				any(o.v[bi*m*hv:]).([]float32), hv, any(gOut[bi*n*hv:]).([]float32), any(p[e:e+h*n*m]).([]float32),
				any(x[e:e+h*n*m]).([]float32), n, m, d, dv, float32(z.scale), float32(g), any(dq[bi*n*hd:]).([]float32),
				any(dk[bi*m*hd:]).([]float32), any(dvv[bi*m*hv:]).([]float32), pad32, priorPadSize(d), xce, g, parts, np, r,
				scratch[w].pg) {
				for xh := bi * h; xh < (bi+1)*h; xh++ {
					head(w, xh)
				}
			}
		})) {
		forBayesHeads(b, h, head)
	}
	if !a.contextual {
		return
	}
	// the prior network's gradients: each head's sums over the examples,
	// in order
	dw1, db1, dw2, db2 := next(len(o.w1)), next(len(o.b1)), next(len(o.w2)), next(len(o.b2))
	sum := make([]float64, np)
	for hh := range h {
		// this loop is serial (after the heads' parallel section): C's
		// vector loop adds each element's parts in the same order
		if !kernels.SumParts64(st.partial[hh*np:], h*np, b, np, sum) {
			clear(sum)
			for bi := range b {
				for i, v := range st.partial[(bi*h+hh)*np : (bi*h+hh+1)*np] {
					sum[i] += v
				}
			}
		}
		for i, v := range sum[:d*r] {
			dw1[hh*d*r+i] = T(v)
		}
		for t := range r {
			db1[hh*r+t], dw2[hh*r+t] = T(sum[d*r+t]), T(sum[d*r+r+t])
		}
		db2[hh] = T(sum[d*r+2*r])
	}
}

// priorHeadBackward adds the prior network's gradient of head hh's keys
// to dkh (rows H·d apart) and sets part [d·R + 2R + 1] to its parameters'
// gradients [dW₁ | db₁ | dw₂ | db₂] from dc = ∂L/∂c [m], with the hidden
// units recomputed in u [m×R]:
//
//	du = dc w₂ [u > 0],  dk += du W₁ᵀ,  dW₁ = kᵀ du,  db₁ = Σ du,
//	dw₂ = Σ dc ReLU(u),  db₂ = Σ dc.
func priorHeadBackward[T float](o sampleOperands[T], z sampleDims, h, hh int, kh, u, dc, dkh []T, part []float64) {
	d, r := z.d, z.r
	w1, w2 := o.w1[hh*d*r:(hh+1)*d*r], o.w2[hh*r:(hh+1)*r]
	priorHeadHidden(o, z, h, hh, kh, u)
	clear(part)
	dW1, db1, dw2 := part[:d*r], part[d*r:d*r+r], part[d*r+r:d*r+2*r]
	for j := range z.m {
		g := dc[j]
		part[d*r+2*r] += float64(g)
		kj, dkj := kh[j*h*d:j*h*d+d], dkh[j*h*d:j*h*d+d]
		for t, x := range u[j*r : (j+1)*r] {
			if x <= 0 {
				continue
			}
			du := g * w2[t]
			dw2[t] += float64(g * x)
			db1[t] += float64(du)
			for e := range d {
				dkj[e] += du * w1[e*r+t]
				dW1[e*r+t] += float64(kj[e] * du)
			}
		}
	}
}

// priorHeadHidden sets u [m×R] to the prior network's hidden units
// W₁ᵀ k_j + b₁ of head hh's keys kh.
func priorHeadHidden[T float](o sampleOperands[T], z sampleDims, h, hh int, kh, u []T) {
	d, r := z.d, z.r
	w1, b1 := o.w1[hh*d*r:(hh+1)*d*r], o.b1[hh*r:(hh+1)*r]
	for j := range z.m {
		kj, uj := kh[j*h*d:j*h*d+d], u[j*r:(j+1)*r]
		copy(uj, b1)
		for e, x := range kj {
			for t, w := range w1[e*r : (e+1)*r] {
				uj[t] += x * w
			}
		}
	}
}

// sampleHeadBwd32 runs one float32 head's backward pass in attention.c
// (pf_bayes_head_bwd) where it applies, and reports whether it did; with
// net, also the prior network's, from dc = g·xc (∂L/∂c [m], xc the KL's
// saved unit gradient), its parameters' gradients into part as
// priorHeadBackward sets them. C makes dc and part as the Go loops did
// (kernels.BayesHeadBwdPart32), one head's work fewer in Go.
func sampleHeadBwd32[T float](q, k, v, g, p, x []T, hd, hv, n, m, d, dv int, scale, gx float64, dq, dk, dvOut []T,
	net *kernels.PriorNet32, xc []T, part []float64, r int, pg []float32) bool {
	q32, ok := any(q).([]float32)
	if !ok {
		return false
	}
	var xc32 []float32
	if net != nil {
		xc32 = any(xc).([]float32)
	}
	return kernels.BayesHeadBwdPart32(q32, hd, any(k).([]float32), any(v).([]float32), hv, any(g).([]float32),
		any(p).([]float32), any(x).([]float32), n, m, d, dv, float32(scale), float32(gx),
		any(dq).([]float32), any(dk).([]float32), any(dvOut).([]float32), net, xc32, gx, part, r, pg)
}

// A readout is a view, not a copy.
var _ viewKernel = bayesReadoutKernel{}

// bayesReadoutKernel is a BayesAttentionSample node's readout: its input
// is the op's node, its value the readout that node's forward pass saved.
// Its gradient is recorded for the op's backward pass, and reaches the op
// itself as a zero.
type bayesReadoutKernel struct {
	st    *bayesSampleState
	shape fixedShape
}

func (r bayesReadoutKernel) name() string {
	return fmt.Sprintf("bayes-readout(%v)", r.shape.get())
}
func (r bayesReadoutKernel) outShape([]tensor.Shape) (tensor.Shape, error) { return r.shape.get(), nil }
func (r bayesReadoutKernel) do(_ []*tensor.Dense, out *tensor.Dense) error {
	switch o := out.Data().(type) {
	case []float32:
		copyParallel(o, r.st.out.([]float32))
	case []float64:
		copyParallel(o, r.st.out.([]float64))
	default:
		return fmt.Errorf("unsupported dtype %v", out.Dtype())
	}
	return nil
}

// view hands out the readout the op's forward pass saved, on its own
// backing (the state's buffer, kept between runs), where do copies it:
// the input, the op's node, only orders the readout after the forward
// pass. It is safe as unpackKernel's views are: the op writes the buffer
// once a run, before the readout and its readers, and nothing writes it
// before the readout's last reader (an op after that may reuse the
// register and overwrite it in place, and nothing reads it afterwards:
// the backward pass does not).
func (r bayesReadoutKernel) view(_ *tensor.Dense, kept *keptHeader) (*tensor.Dense, error) {
	at := unpackKernel{shape: r.shape}
	switch o := r.st.out.(type) {
	case []float32:
		return viewRange(at, o, tensor.Float32, kept)
	case []float64:
		return viewRange(at, o, tensor.Float64, kept)
	}
	return nil, fmt.Errorf("no readout saved (%T)", r.st.out)
}

func (r bayesReadoutKernel) grads(_ []*Node, _, g *Node) []*Node {
	r.st.gOut = g
	return []*Node{apply(zeroGradKernel{}, g)}
}

// zeroGradKernel is a zero of shape [1], computed after its input.
type zeroGradKernel struct{}

func (zeroGradKernel) name() string                                  { return "bayes-zero" }
func (zeroGradKernel) outShape([]tensor.Shape) (tensor.Shape, error) { return tensor.Shape{1}, nil }
func (zeroGradKernel) do(_ []*tensor.Dense, out *tensor.Dense) error {
	switch o := out.Data().(type) {
	case []float32:
		o[0] = 0
	case []float64:
		o[0] = 0
	}
	return nil
}
