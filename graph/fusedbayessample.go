package graph

import (
	"fmt"
	"math"
	"runtime"

	"gorgonia.org/tensor"
)

// BayesAttentionSample is a Bayesian attention layer's training sample
// and its KL̄ (layers/BAYES.md §3–§5) as one op that computes the scores
// once for both. Per head, with s_ij = q_i·k_j/√d:
//
//	out_i = Σ_j W_ij v_j,   W_ij = softmax_j (s_ij + b_ij)     over the visible keys
//	b_ij  = (1/k)·log(−log u_ij)   (cfg.Posterior BayesWeibull, noise u ∈ (0, 1])
//	b_ij  = σ·ε_ij                 (BayesLogNormal, noise ε)
//	kl    = BayesAttentionKL(q, k, keyMask, queryMask, priorLogits, cfg)
//
// so out is BiasedAttention(q, k, v, keyMask, b, cfg.Heads, cfg.Causal)
// with b the noise term above, and kl is BayesAttentionKL's value.
// q: [B, N, H·d], k: [B, M, H·d], v: [B, M, H·dv], keyMask: [B, M] or nil,
// queryMask: [B, N] or nil (it leaves padded queries out of the KL only),
// noise: [B, H, N, M], priorLogits: [B, H, M] or nil (the constant prior)
// → out [B, N, H·dv] and the scalar kl.
//
// The forward pass computes, beside the sample and the KL, the KL's
// gradient with respect to the scores and the prior logits for a unit
// upstream gradient (both are linear in it), and saves them with the
// sampled weights. The backward pass is then softmax attention's, with
// the KL's score gradient added to dS before the two products that give
// dq and dk, which the sample and the KL so share. The noise and the
// masks take no gradient; q, k, v and the prior logits do. In float32,
// with AVX2, a head without a causal mask that attention.c takes runs
// there. Results do not depend on the core count.
//
// The op's own output is the KL (before its sum to a scalar); out is a
// node that reads the readout the op saved. Its gradient reaches the op
// as a zero, and the op's backward pass takes the readout's gradient
// directly, so that no readout-sized gradient is added to another.
func BayesAttentionSample(q, k, v, keyMask, queryMask, noise, priorLogits *Node, cfg BayesKL) (out, kl *Node) {
	if err := cfg.check(); err != nil {
		fail("Bayesian attention: %v", err)
	}
	if noise == nil {
		fail("Bayesian attention: no noise")
	}
	a := bayesSampleKernel{kl: bayesKLKernel{cfg: cfg, masked: keyMask != nil, queryMasked: queryMask != nil,
		contextual: priorLogits != nil}, st: &bayesSampleState{}}
	in := []*Node{q, k, v}
	for _, x := range []*Node{keyMask, queryMask, noise, priorLogits} {
		if x != nil {
			in = append(in, x)
		}
	}
	node := apply(a, in...)
	qs, vs := q.Shape(), v.Shape()
	out = apply(bayesReadoutKernel{st: a.st, shape: fix(tensor.Shape{qs[0], qs[1], vs[2]})}, node)
	return out, Sum(node)
}

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
	// one worker's buffers each ([]*klScratch[T])
	scratch any
	// gOut is the readout's gradient node, which the readout's SymDiff
	// records before the op's own (the readout comes after the op).
	gOut *Node
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
// queries and m keys.
func sampleScratch[T float](st *bayesSampleState, n, m int) []*klScratch[T] {
	s, ok := st.scratch.([]*klScratch[T])
	if !ok || len(s) != runtime.GOMAXPROCS(0) || (s[0] != nil && (len(s[0].s) != n*m || len(s[0].row) != m)) {
		s = make([]*klScratch[T], runtime.GOMAXPROCS(0))
		st.scratch = s
	}
	return s
}

func newKLScratch[T float](n, m int) *klScratch[T] {
	f := func() []float64 { return make([]float64, m) }
	return &klScratch[T]{s: make([]T, n*m), ds: make([]T, n*m), row: make([]T, m), a: make([]T, m), b: make([]T, m),
		colsum: make([]T, m), logp: f(), p: f(), alpha: f(), lga: f(), psi: f(), e: f(), dc: f()}
}

// bayesSampleKernel is BayesAttentionSample's op: inputs q, k, v, then
// the key mask and the query mask where it has them, the noise, and the
// prior logits where it has them; output [1], KL̄.
type bayesSampleKernel struct {
	kl bayesKLKernel // the KL's settings and masks
	st *bayesSampleState
}

func (a bayesSampleKernel) name() string { return "bayes-sample-" + a.kl.name() }

// sampleOperands are the values of a node's inputs; absent ones are nil.
type sampleOperands[T float] struct {
	q, k, v, keyMask, queryMask, noise, c []T
}

func sampleOperandsOf[T float](a bayesSampleKernel, in []*tensor.Dense) sampleOperands[T] {
	o := sampleOperands[T]{q: in[0].Data().([]T), k: in[1].Data().([]T), v: in[2].Data().([]T)}
	i := 3
	if a.kl.masked {
		o.keyMask, i = in[i].Data().([]T), i+1
	}
	if a.kl.queryMasked {
		o.queryMask, i = in[i].Data().([]T), i+1
	}
	o.noise, i = in[i].Data().([]T), i+1
	if a.kl.contextual {
		o.c = in[i].Data().([]T)
	}
	return o
}

// noiseIndex is the input index of the noise; the prior logits follow it.
func (a bayesSampleKernel) noiseIndex() int {
	i := 3
	if a.kl.masked {
		i++
	}
	if a.kl.queryMasked {
		i++
	}
	return i
}

// dims checks the input shapes and returns B, N, M, d and dv per head.
func (a bayesSampleKernel) dims(in []tensor.Shape) (b, n, m, d, dv int, err error) {
	ni := a.noiseIndex()
	want := ni + 1
	if a.kl.contextual {
		want++
	}
	if len(in) != want {
		return 0, 0, 0, 0, 0, fmt.Errorf("%d inputs, want %d", len(in), want)
	}
	klIn := append([]tensor.Shape{in[0], in[1]}, in[3:ni]...)
	if a.kl.contextual {
		klIn = append(klIn, in[ni+1])
	}
	if b, n, m, d, err = a.kl.dims(klIn); err != nil {
		return 0, 0, 0, 0, 0, err
	}
	h := a.kl.cfg.Heads
	if v := in[2]; len(v) != 3 || v[0] != b || v[1] != m || v[2]%h != 0 {
		return 0, 0, 0, 0, 0, fmt.Errorf("v %v does not fit k %v and %d heads", v, in[1], h)
	}
	if !in[ni].Eq(tensor.Shape{b, h, n, m}) {
		return 0, 0, 0, 0, 0, fmt.Errorf("noise %v, want [%d %d %d %d]", in[ni], b, h, n, m)
	}
	return b, n, m, d, in[2][2] / h, nil
}

func (a bayesSampleKernel) outShape(in []tensor.Shape) (tensor.Shape, error) {
	if _, _, _, _, _, err := a.dims(in); err != nil {
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
	return i >= 3 && !(a.kl.contextual && i == a.noiseIndex()+1)
}

// grads computes dq, dk, dv (and dc) in one backward pass, from the KL's
// gradient g and the readout's, and unpacks them.
func (a bayesSampleKernel) grads(in []*Node, _, g *Node) []*Node {
	gin := append(append([]*Node{}, in...), g)
	if a.st.gOut != nil {
		gin = append(gin, a.st.gOut)
	}
	packed := apply(bayesSampleGradKernel{a: a, readoutGrad: a.st.gOut != nil}, gin...)
	s := []tensor.Shape{in[0].Shape(), in[1].Shape(), in[2].Shape()}
	if a.kl.contextual {
		s = append(s, in[a.noiseIndex()+1].Shape())
	}
	gs := unpack(packed, s...)
	out := make([]*Node, len(in))
	copy(out, gs[:3])
	if a.kl.contextual {
		out[a.noiseIndex()+1] = gs[3]
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
	b, n, m, d, dv, _ := a.dims(shapes(in))
	cfg, st := a.kl.cfg, a.st
	h := cfg.Heads
	p, x := stateBuffer[T](&st.p, b*h*n*m), stateBuffer[T](&st.x, b*h*n*m)
	out := stateBuffer[T](&st.out, b*n*h*dv)
	var dc []T
	if o.c != nil {
		dc = stateBuffer[T](&st.dc, b*h*m)
	}
	if len(st.sums) != b*h {
		st.sums = make([]float64, b*h)
	}
	st.count = klCount(cfg, o.keyMask, o.queryMask, b, n, m)
	scratch := sampleScratch[T](st, n, m)
	hd := sampleHeadDims{b: b, n: n, m: m, d: d, dv: dv, scale: 1 / math.Sqrt(float64(d))}
	cs := cfg.consts()
	parallelFor(b*h, func(w, x0 int) {
		if scratch[w] == nil {
			scratch[w] = newKLScratch[T](n, m)
		}
		st.sums[x0] = sampleHead(cfg, cs, scratch[w], o, hd, x0, p, x, out, dc)
	})
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

// bayesSampleGoOnly makes every head take the Go loop, for the tests
// that hold attention.c's heads equal to it.
var bayesSampleGoOnly bool

// sampleHeadDims are a node's sizes: B, N, M, d, dv and 1/√d.
type sampleHeadDims struct {
	b, n, m, d, dv int
	scale          float64
}

// sampleHead computes head xh (example xh/H, head xh%H) of the forward
// pass: its sampled weights into p, its readout into out, ∂Σ KL/∂s into x
// and ∂Σ KL/∂c into dc (when contextual), and returns its Σ KL_ij.
func sampleHead[T float](cfg BayesKL, cs klConsts, sc *klScratch[T], o sampleOperands[T], z sampleHeadDims, xh int,
	p, x, out, dc []T) float64 {
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
	if o.c != nil {
		crow, dch = o.c[xh*m:(xh+1)*m], dc[xh*m:(xh+1)*m]
	}
	if !cfg.Causal && !bayesSampleGoOnly {
		if v, ok := sampleHeadC(cfg, cs, qh, kh, vh, mrow, qrow, crow, uh, n, m, d, dv, hd, hv, z.scale, ph, xhd, oh, dch); ok {
			return v
		}
	}
	// the sample: W = softmax(s + b), out = W v
	gemm(false, true, n, m, d, T(z.scale), qh, hd, kh, hd, 0, sc.s, m)
	noiseTerm(cfg, uh, ph)
	for i, s := range sc.s[:n*m] {
		ph[i] += s
	}
	if p32, ok := any(ph).([]float32); !ok || !softmaxRows32(p32, n, m, any(mrow).([]float32), cfg.Causal) {
		softmaxRowsGo(ph, n, m, mrow, cfg.Causal)
	}
	gemm(false, false, n, dv, m, 1, ph, m, vh, hv, 0, oh, hv)
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

// noiseTerm sets b to the score bias of the noise u: (1/k)·log(−log u)
// (Weibull) or σ·u (log-normal, u = ε).
func noiseTerm[T float](cfg BayesKL, u, b []T) {
	if cfg.Posterior == BayesLogNormal {
		for i, e := range u {
			b[i] = T(cfg.Sigma) * e
		}
		return
	}
	if u32, ok := any(u).([]float32); ok && weibullLogNoise32(u32, any(b).([]float32), float32(1/cfg.K)) {
		return
	}
	weibullLogNoiseGo(u, b, 1/cfg.K)
}

// sampleHeadC runs one float32 head of the forward pass without a causal
// mask in attention.c (pf_bayes_head: the prior, the sample, the KL and
// its gradients) where it applies, and reports whether it did; see
// sampleHead. Its lgamma and ψ are float32 vector functions, where the
// Go loop takes lgammaFast and digammaFast in float64.
func sampleHeadC[T float](cfg BayesKL, cs klConsts, qh, kh, vh, mrow, qrow, crow, uh []T,
	n, m, d, dv, hd, hv int, scale float64, ph, xh, oh, dch []T) (float64, bool) {
	q32, ok := any(qh).([]float32)
	if !ok || !sampleHeadFits(n, m, d, dv) {
		return 0, false
	}
	kc := [7]float64{1, cfg.Sigma, cfg.PriorRate, cs.a, cs.c0, cs.shift, cs.inv2s02}
	if cfg.Posterior == BayesWeibull {
		kc[0], kc[1] = 0, 1/cfg.K
	}
	var mr, qr, cr, dc []float32
	if mrow != nil {
		mr = any(mrow).([]float32)
	}
	if qrow != nil {
		qr = any(qrow).([]float32)
	}
	if crow != nil {
		cr, dc = any(crow).([]float32), any(dch).([]float32)
	}
	return bayesHead32(q32, hd, any(kh).([]float32), any(vh).([]float32), hv, n, m, d, dv, float32(scale), mr, qr,
		any(uh).([]float32), cr, &kc, any(ph).([]float32), any(xh).([]float32), any(oh).([]float32), dc)
}

// bayesSampleGradKernel computes the gradients of a BayesAttentionSample
// node, packed as [dq | dk | dv | dc], from its inputs, the KL's upstream
// gradient G [1] and (with readoutGrad) the readout's gradient
// [B, N, H·dv]. With P the saved weights, X and Xc the KL's saved unit
// gradients and g = G / KL̄'s denominator, per head:
//
//	dv = Pᵀ Gout,  dP = Gout vᵀ,  dS = P ⊙ (dP − rowsum(P ⊙ dP)) + g X,
//	dq = dS k / √d,  dk = dSᵀ q / √d,  dc = g Xc.
type bayesSampleGradKernel struct {
	a           bayesSampleKernel
	readoutGrad bool // the readout's gradient is the last input
}

func (g bayesSampleGradKernel) name() string {
	return fmt.Sprintf("grad-%s(readout=%v)", g.a.name(), g.readoutGrad)
}
func (g bayesSampleGradKernel) outShape(in []tensor.Shape) (tensor.Shape, error) {
	n := in[0].TotalSize() + in[1].TotalSize() + in[2].TotalSize()
	if g.a.kl.contextual {
		n += in[g.a.noiseIndex()+1].TotalSize()
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
	b, n, m, d, dv, _ := a.dims(shapes(ops))
	h := a.kl.cfg.Heads
	p, pok := st.p.([]T)
	if !st.fresh || !pok || len(p) != b*h*n*m {
		bayesSampleForward[T](a, ops) // no saved forward pass: recompute it
		p = st.p.([]T)
	}
	st.fresh = false
	x := st.x.([]T)
	o := sampleOperandsOf[T](a, ops)
	dq, dk := packed[:len(o.q)], packed[len(o.q):len(o.q)+len(o.k)]
	dvv := packed[len(o.q)+len(o.k) : len(o.q)+len(o.k)+len(o.v)]
	var dc, xc []T
	if o.c != nil {
		dc, xc = packed[len(o.q)+len(o.k)+len(o.v):], st.dc.([]T)
	}
	var g float64
	if st.count > 0 {
		g = gKL / float64(st.count)
	}
	hd, hv := h*d, h*dv
	scale := 1 / math.Sqrt(float64(d))
	scratch := sampleScratch[T](st, n, m)
	parallelFor(b*h, func(w, xh int) {
		if scratch[w] == nil {
			scratch[w] = newKLScratch[T](n, m)
		}
		bi, hh := xh/h, xh%h
		ph, xhd := p[xh*n*m:(xh+1)*n*m], x[xh*n*m:(xh+1)*n*m]
		qh, kh, vh := o.q[bi*n*hd+hh*d:], o.k[bi*m*hd+hh*d:], o.v[bi*m*hv+hh*dv:]
		dqh, dkh, dvh := dq[bi*n*hd+hh*d:], dk[bi*m*hd+hh*d:], dvv[bi*m*hv+hh*dv:]
		if dc != nil {
			for j := range m {
				dc[xh*m+j] = T(g * float64(xc[xh*m+j]))
			}
		}
		if gOut != nil && !bayesSampleGoOnly {
			gh := gOut[bi*n*hv+hh*dv:]
			if sampleHeadBwd32(qh, kh, vh, gh, ph, xhd, hd, hv, n, m, d, dv, scale, g, dqh, dkh, dvh) {
				return
			}
		}
		ds := scratch[w].ds[:n*m]
		if gOut != nil {
			gh := gOut[bi*n*hv+hh*dv:]
			gemm(true, false, m, dv, n, 1, ph, m, gh, hv, 0, dvh, hv)
			gemm(false, true, n, m, dv, 1, gh, hv, vh, hv, 0, ds, m)
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
		gemm(false, false, n, d, m, T(scale), ds, m, kh, hd, 0, dqh, hd)
		gemm(true, false, m, d, n, T(scale), ds, m, qh, hd, 0, dkh, hd)
	})
}

// sampleHeadBwd32 runs one float32 head's backward pass in attention.c
// (pf_bayes_attn_head_bwd) where it applies, and reports whether it did.
func sampleHeadBwd32[T float](q, k, v, g, p, x []T, hd, hv, n, m, d, dv int, scale, gx float64, dq, dk, dvOut []T) bool {
	q32, ok := any(q).([]float32)
	if !ok {
		return false
	}
	return bayesHeadBwd32(q32, hd, any(k).([]float32), any(v).([]float32), hv, any(g).([]float32),
		any(p).([]float32), any(x).([]float32), n, m, d, dv, float32(scale), float32(gx),
		any(dq).([]float32), any(dk).([]float32), any(dvOut).([]float32))
}

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
