package graph

import (
	"fmt"
	"math"
	"runtime"
	"sync/atomic"

	"gorgonia.org/tensor"

	"github.com/probformer/probformer/graph/internal/kernels"
)

// Attention is fused multi-head scaled dot-product attention (Vaswani et
// al. 2017 §3.2) on unsplit heads:
//
//	out_h = softmax(q_h k_hᵀ / √d + mask) v_h,   out = [out_1 … out_H]
//
// q: [B, N, H·d], k: [B, M, H·d], v: [B, M, H·dv] → [B, N, H·dv].
// keyMask [B, M] (1 real, 0 padding) may be nil; causal lets query i see
// keys j ≤ i only (N = M). Masked keys get weight exactly 0; a query with
// no visible key reads out 0; a NaN score at a visible key makes its row
// NaN. Heads are strided views, so no transposes are made, and the B·H
// heads run on all cores, each computed the same way whatever the core
// count. The backward pass is analytic and reuses the weights [B, H, N, M]
// the forward pass saved. In float32, with AVX2, a head with d and dv
// multiples of 8 up to 64 and M ≤ 64 runs in attention.c.
func Attention(q, k, v, keyMask *Node, heads int, causal bool) *Node {
	a := attentionKernel{heads: heads, causal: causal, masked: keyMask != nil, saved: &savedWeights{}}
	return apply(a, attentionInputs(q, k, v, keyMask)...)
}

// AttentionWeights returns the weights [B, H, N, M] that Attention uses,
// for plots and inspection; it has no gradient, and a training loss that
// reaches parameters through it fails to compile.
func AttentionWeights(q, k, keyMask *Node, heads int, causal bool) *Node {
	in := []*Node{q, k}
	if keyMask != nil {
		in = append(in, keyMask)
	}
	return apply(attentionWeightsKernel{attentionKernel{heads: heads, causal: causal, masked: keyMask != nil}}, in...)
}

func attentionInputs(q, k, v, mask *Node) []*Node {
	in := []*Node{q, k, v}
	if mask != nil {
		in = append(in, mask)
	}
	return in
}

type attentionKernel struct {
	heads          int
	causal, masked bool
	packed         packing       // how q, k and v lie in the first inputs
	residual       bool          // the readout is q + attention (dv = d): a residual connection
	biased         bool          // an additive score bias [B, H, N, M] follows the key mask
	dropout        bool          // a dropout mask [B, H, N, M] is the last input
	saved          *savedWeights // nil: the backward recomputes the weights
}

// packing says how an attention node's q, k and v lie in its inputs. The
// packed forms read the heads of a fused projection (LinearConcat) as
// strided views, so the projections run as one GEMM, and the backward
// pass writes the gradient of the packed input in the same layout: of
// [q k v] it is the whole gradient, with no unpack.
type packing uint8

const (
	packNone packing = iota // q [B, N, H·d], k [B, M, H·d], v [B, M, H·dv]
	packKV                  // q [B, N, H·d], kv [B, M, H·d + H·dv]: k, then v
	packQKV                 // qkv [B, N, 3·H·d]: q, k, v side by side (N = M, dv = d)
)

// tensors is how many of the node's inputs hold q, k and v.
func (p packing) tensors() int { return 3 - int(p) }

// savedWeights holds the weights [B, H, N, M] of an attention node's last
// forward run for its backward pass, which the tape machine runs later in
// the same run on the same inputs. fresh is set by the forward pass and
// cleared by the backward, which recomputes if it is not set. With
// dropout they are the weights before the mask is applied.
type savedWeights struct {
	p     any // []float32 or []float64
	fresh bool
}

// weightsBuffer returns a's saved-weights buffer of n values, or nil when
// a saves none.
func weightsBuffer[T float](a attentionKernel, n int) []T {
	if a.saved == nil {
		return nil
	}
	p, ok := a.saved.p.([]T)
	if !ok || len(p) != n {
		p = make([]T, n)
		a.saved.p = p
	}
	return p
}

func (a attentionKernel) name() string {
	return fmt.Sprintf("attention(h=%d,causal=%v,masked=%v,biased=%v,dropout=%v,packed=%d,residual=%v)", a.heads, a.causal, a.masked, a.biased, a.dropout, a.packed, a.residual)
}

// operands splits a node's inputs — q, k, v (absent when hasV is false:
// AttentionWeights), or their packed forms, then the key mask, the score
// bias and the dropout mask where a has them — into their values. q, k
// and v start at their first head's first value; their rows are strided
// as geometry says.
func operands[T float](a attentionKernel, in []*tensor.Dense, hasV bool) (q, k, v, mask, bias, drop []T) {
	var i int
	switch a.packed {
	case packKV:
		hd := in[0].Shape()[2]
		q, k = floats[T](in[0]), floats[T](in[1])
		v, i = k[hd:], 2
	case packQKV:
		hd := in[0].Shape()[2] / 3
		q = floats[T](in[0])
		k, v, i = q[hd:], q[2*hd:], 1
	default:
		q, k = floats[T](in[0]), floats[T](in[1])
		i = 2
		if hasV {
			v, i = floats[T](in[2]), 3
		}
	}
	if a.masked {
		mask, i = floats[T](in[i]), i+1
	}
	if a.biased {
		bias, i = floats[T](in[i]), i+1
	}
	if a.dropout {
		drop = floats[T](in[i])
	}
	return q, k, v, mask, bias, drop
}

// geometry is the layout of an attention node's q, k and v: B, N, M, d
// and dv per head, and the row strides of q, k and v (and of their
// gradients).
type geometry struct{ b, n, m, d, dv, ldq, ldk, ldv int }

// geometry checks the shapes of a node's inputs (laid out as for
// operands) and returns their layout.
func (a attentionKernel) geometry(in []tensor.Shape, hasV bool) (geometry, error) {
	var g geometry
	var err error
	switch a.packed {
	case packKV:
		q, kv := in[0], in[1]
		if len(q) != 3 || len(kv) != 3 || kv[2] <= q[2] {
			return g, fmt.Errorf("attention wants 3-D q and kv, kv the wider; have %v, %v", q, kv)
		}
		hd := q[2]
		k, v := tensor.Shape{kv[0], kv[1], hd}, tensor.Shape{kv[0], kv[1], kv[2] - hd}
		g.b, g.n, g.m, g.d, g.dv, err = a.dims(append([]tensor.Shape{q, k, v}, in[2:]...), true)
		g.ldq, g.ldk, g.ldv = hd, kv[2], kv[2]
	case packQKV:
		qkv := in[0]
		if len(qkv) != 3 || qkv[2]%3 != 0 {
			return g, fmt.Errorf("attention wants a 3-D qkv of width 3·H·d; have %v", qkv)
		}
		s := tensor.Shape{qkv[0], qkv[1], qkv[2] / 3}
		g.b, g.n, g.m, g.d, g.dv, err = a.dims(append([]tensor.Shape{s, s, s}, in[1:]...), true)
		g.ldq, g.ldk, g.ldv = qkv[2], qkv[2], qkv[2]
	default:
		g.b, g.n, g.m, g.d, g.dv, err = a.dims(in, hasV)
		g.ldq, g.ldk, g.ldv = a.heads*g.d, a.heads*g.d, a.heads*g.dv
	}
	return g, err
}

// dims checks the shapes of unpacked inputs q, k, v (v absent when hasV
// is false), then the masks, and returns B, N, M, d and dv per head
// (dv = 0 without v).
func (a attentionKernel) dims(in []tensor.Shape, hasV bool) (b, n, m, d, dv int, err error) {
	q, k := in[0], in[1]
	var v tensor.Shape
	i := 2
	if hasV {
		v, i = in[2], 3
	}
	if a.heads < 1 {
		return 0, 0, 0, 0, 0, fmt.Errorf("attention: %d heads", a.heads)
	}
	if len(q) != 3 || len(k) != 3 || (hasV && len(v) != 3) {
		return 0, 0, 0, 0, 0, fmt.Errorf("attention wants 3-D q, k, v; have %v, %v, %v", q, k, v)
	}
	b, n, m = q[0], q[1], k[1]
	if k[0] != b || q[2] != k[2] || q[2]%a.heads != 0 {
		return 0, 0, 0, 0, 0, fmt.Errorf("attention: q %v and k %v do not fit %d heads", q, k, a.heads)
	}
	d = q[2] / a.heads
	if hasV {
		if v[0] != b || v[1] != m || v[2]%a.heads != 0 {
			return 0, 0, 0, 0, 0, fmt.Errorf("attention: v %v does not fit k %v and %d heads", v, k, a.heads)
		}
		dv = v[2] / a.heads
	}
	if a.masked {
		if mask := in[i]; len(mask) != 2 || mask[0] != b || mask[1] != m {
			return 0, 0, 0, 0, 0, fmt.Errorf("attention: key mask %v, want [%d %d]", mask, b, m)
		}
		i++
	}
	if a.biased {
		if bias := in[i]; !bias.Eq(tensor.Shape{b, a.heads, n, m}) {
			return 0, 0, 0, 0, 0, fmt.Errorf("attention: score bias %v, want [%d %d %d %d]", bias, b, a.heads, n, m)
		}
		i++
	}
	if a.dropout {
		if drop := in[i]; !drop.Eq(tensor.Shape{b, a.heads, n, m}) {
			return 0, 0, 0, 0, 0, fmt.Errorf("attention: dropout mask %v, want [%d %d %d %d]", drop, b, a.heads, n, m)
		}
	}
	if a.causal && n != m {
		return 0, 0, 0, 0, 0, fmt.Errorf("attention: a causal mask needs as many queries as keys, have %d and %d", n, m)
	}
	return b, n, m, d, dv, nil
}

// shapes returns the shapes of ts.
func shapes(ts []*tensor.Dense) []tensor.Shape {
	s := make([]tensor.Shape, len(ts))
	for i, t := range ts {
		s[i] = t.Shape()
	}
	return s
}

func (a attentionKernel) outShape(in []tensor.Shape) (tensor.Shape, error) {
	g, err := a.geometry(in, true)
	if err != nil {
		return nil, err
	}
	if a.residual && g.dv != g.d {
		return nil, fmt.Errorf("attention: a residual connection needs values as wide as queries, have %d and %d per head", g.dv, g.d)
	}
	return tensor.Shape{g.b, g.n, a.heads * g.dv}, nil
}

func (a attentionKernel) do(in []*tensor.Dense, out *tensor.Dense) error {
	switch o := data(out).(type) {
	case []float32:
		attentionForward(a, in, o, nil)
	case []float64:
		attentionForward(a, in, o, nil)
	}
	return nil
}

// weights fills p [N, M] with the softmax weights of head h of example bi;
// bias, when not nil, is the head's score bias [N, M], added to the
// scaled scores before the softmax. q's and k's rows are strided by ldq
// and ldk.
func weights[T float](a attentionKernel, q, k, mask, bias []T, bi, h, n, m, d, ldq, ldk int, p []T) {
	scale := T(1 / math.Sqrt(float64(d)))
	kernels.Gemm(false, true, n, m, d, scale, q[bi*n*ldq+h*d:], ldq, k[bi*m*ldk+h*d:], ldk, 0, p, m)
	if bias != nil {
		for j, x := range bias[:n*m] {
			p[j] += x
		}
	}
	var mrow []T
	if mask != nil {
		mrow = mask[bi*m : (bi+1)*m]
	}
	if p32, ok := any(p).([]float32); ok && kernels.SoftmaxRows32(p32[:n*m], n, m, any(mrow).([]float32), a.causal) {
		return
	}
	softmaxRowsGo(p[:n*m], n, m, mrow, a.causal)
}

// softmaxRowsGo replaces each row i of p [n×m] with its softmax over the
// visible keys (j ≤ i when causal, mask[j] ≠ 0 when mask is given); other
// keys get weight exactly 0, a row with no visible key becomes 0, and a
// row with a NaN score at a visible key becomes NaN.
func softmaxRowsGo[T float](p []T, n, m int, mask []T, causal bool) {
	for i := range n {
		row := p[i*m : (i+1)*m]
		visible := m
		if causal {
			visible = min(i+1, m)
		}
		mx := T(math.Inf(-1))
		for j := range visible {
			// a NaN score sticks (x > NaN is false), so the row becomes NaN
			if (mask == nil || mask[j] != 0) && (row[j] > mx || row[j] != row[j]) {
				mx = row[j]
			}
		}
		if math.IsInf(float64(mx), -1) {
			clear(row)
			continue
		}
		if mask != nil {
			for j := range visible {
				if mask[j] == 0 {
					row[j] = mx + MaskNegInf // e^(−1e9) is exactly 0
				}
			}
		}
		z := T(kernels.ExpRow(row[:visible], row[:visible], mx))
		clear(row[visible:])
		for j := range visible {
			row[j] /= z
		}
	}
}

// attentionForward computes the readout, or (with wOut set) only the
// weights [B, H, N, M].
func attentionForward[T float](a attentionKernel, in []*tensor.Dense, out []T, wOut []T) {
	hasV := wOut == nil
	q, k, v, mask, bias, drop := operands[T](a, in, hasV)
	g, _ := a.geometry(shapes(in), hasV)
	b, n, m, d, dv := g.b, g.n, g.m, g.d, g.dv
	hv := a.heads * dv // the output's row stride
	var saved []T
	if hasV {
		saved = weightsBuffer[T](a, b*a.heads*n*m)
	}
	type buffers struct {
		p, pd  []T
		cHeads int // heads attention.c ran (the Go path's products count themselves in kernels.Gemm)
	}
	scratch := make([]*buffers, runtime.GOMAXPROCS(0))
	if hasV && headsForward32(a, g, q, k, v, mask, bias, drop, saved, out) {
		kernels.AddMatMulFlops(b * a.heads * 2 * n * m * (d + dv))
		if saved != nil {
			a.saved.fresh = true
		}
		return
	}
	forHeads(b, a.heads, func(w, i int) {
		bi, h := i/a.heads, i%a.heads
		if !hasV {
			weights(a, q, k, mask, nil, bi, h, n, m, d, g.ldq, g.ldk, wOut[i*n*m:(i+1)*n*m])
			return
		}
		if scratch[w] == nil {
			scratch[w] = &buffers{p: make([]T, n*m)}
		}
		p := scratch[w].p
		if saved != nil {
			p = saved[i*n*m : (i+1)*n*m]
		}
		var dh, bh []T // this head's dropout mask and score bias [N, M]
		if drop != nil {
			dh = drop[i*n*m : (i+1)*n*m]
		}
		if bias != nil {
			bh = bias[i*n*m : (i+1)*n*m]
		}
		qh, kh, vh, oh := q[bi*n*g.ldq+h*d:], k[bi*m*g.ldk+h*d:], v[bi*m*g.ldv+h*dv:], out[bi*n*hv+h*dv:]
		if headForward32(a, g, qh, kh, vh, mask, bh, dh, bi, p, oh) {
			scratch[w].cHeads++
			return
		}
		defer addResidual(a.residual, n, d, qh, g.ldq, oh, hv)
		weights(a, q, k, mask, bh, bi, h, n, m, d, g.ldq, g.ldk, p)
		if dh != nil {
			if scratch[w].pd == nil {
				scratch[w].pd = make([]T, n*m)
			}
			p = mulRows(p, dh, scratch[w].pd)
		}
		kernels.Gemm(false, false, n, dv, m, 1, p, m, vh, g.ldv, 0, oh, hv)
	})
	countHeadFlops(scratch, func(s *buffers) int { return s.cHeads }, 2*n*m*(d+dv)) // q kᵀ, p v
	if saved != nil {
		a.saved.fresh = true
	}
}

// forHeads runs head(w, i) for the b·heads heads i = bi·heads + h on the
// workers, each head on one worker w. Where there are at least two batch
// elements a worker, a worker takes whole batch elements, all their
// heads in order: the heads' columns lie side by side in the rows of q,
// k, v and the output, 16 floats (one 64-byte line) a head at the
// models' width, so one core then reads and writes whole rows, and the
// lines the hardware prefetches next to a head's are its next head's,
// not lines the other core is writing. With fewer elements the heads
// themselves are shared. Each head's values depend on its inputs alone,
// so the split changes no bit.
func forHeads(b, heads int, head func(w, i int)) {
	if b < 2*runtime.GOMAXPROCS(0) || heads == 1 {
		kernels.ParallelFor(b*heads, head)
		return
	}
	kernels.ParallelFor(b, func(w, bi int) {
		for i := bi * heads; i < (bi+1)*heads; i++ {
			head(w, i)
		}
	})
}

// shareElements runs elem(w, bi) for the batch elements bi < b on
// workers workers (the caller and RunShares' helpers), who take them in
// turn from a shared counter rather than a fixed share each: on a
// machine shared with other processes a helper that starts late, or is
// preempted, leaves its elements to the others instead of holding them
// at the section's end. An element's values must depend on its inputs
// alone (w picks only scratch), so who runs it changes nothing.
func shareElements(workers, b int, elem func(w, bi int)) {
	if workers < 2 {
		for bi := range b {
			elem(0, bi)
		}
		return
	}
	var next atomic.Int64
	kernels.RunShares(workers, func(w int) {
		for {
			bi := int(next.Add(1) - 1)
			if bi >= b {
				return
			}
			elem(w, bi)
		}
	})
}

// wholeElements reports whether forHeads gives each worker whole batch
// elements, those bi ≡ w (mod workers) for ParallelFor's worker count,
// and returns that count.
func wholeElements(b, heads int) (workers int, ok bool) {
	procs := runtime.GOMAXPROCS(0)
	return max(1, min(procs, b)), b >= 2*procs || heads == 1
}

// attnBatch32 is a's float32 heads as kernels.AttnBatch32 takes them, or
// nil when T is not float32 or attention.c does not take the heads or
// forHeads would share the heads of one batch element between workers
// (fewer than two elements a worker): those run one head a call.
func attnBatch32[T float](a attentionKernel, g geometry, q, k, v, mask, bias, drop, p []T) (*kernels.AttnBatch32, int) {
	q32, ok := any(q).([]float32)
	workers, whole := wholeElements(g.b, a.heads)
	if !ok || !whole || !kernels.AttnHeadOK(g.n, g.m, g.d, g.dv) {
		return nil, 0
	}
	return &kernels.AttnBatch32{Q: q32, K: any(k).([]float32), V: any(v).([]float32), LdQ: g.ldq, LdK: g.ldk,
		LdV: g.ldv, B: g.b, H: a.heads, N: g.n, M: g.m, D: g.d, DV: g.dv,
		Scale: float32(1 / math.Sqrt(float64(g.d))), Mask: any(mask).([]float32), Causal: a.causal,
		Bias: any(bias).([]float32), Drop: any(drop).([]float32), P: any(p).([]float32), Residual: a.residual}, workers
}

// headsForward32 runs the forward of every float32 head in attention.c,
// in one cgo call on the workers, whole batch elements at a time from a
// shared counter (kernels.AttnHeadsFwdShared32), where it applies (see
// attnBatch32), and reports whether it did. saved, the weights
// [B, H, N, M], may be nil: each worker then has one head's scratch.
// Where a worker took the elements bi ≡ w (mod workers), a helper thread
// that started late or lost its core to another process on a shared
// machine held the caller at the section's end with its whole share
// (the heads' sections took 3.1-3.8 ms a Set Transformer step under
// load); from a counter, the caller takes the elements the helper has
// not reached. Each element's values depend on its inputs alone, so who
// takes which changes no bit.
func headsForward32[T float](a attentionKernel, g geometry, q, k, v, mask, bias, drop, saved, out []T) bool {
	batch, workers := attnBatch32(a, g, q, k, v, mask, bias, drop, saved)
	if batch == nil {
		return false
	}
	if saved == nil {
		batch.P = make([]float32, workers*g.n*g.m)
	}
	return kernels.AttnHeadsFwdShared32(batch, any(out).([]float32), workers)
}

// headsBackward32 runs the backward of every float32 head in attention.c
// from the saved weights [B, H, N, M], in one cgo call on the workers,
// whole batch elements at a time from a shared counter (see
// headsForward32), where it applies (see attnBatch32), and reports
// whether it did.
func headsBackward32[T float](a attentionKernel, geo geometry, q, k, v, gOut, saved, drop []T, scale T, dq, dk, dvv []T) bool {
	batch, workers := attnBatch32(a, geo, q, k, v, nil, nil, drop, saved)
	if batch == nil {
		return false
	}
	batch.Scale = float32(scale)
	return kernels.AttnHeadsBwdShared32(batch, any(gOut).([]float32), any(dq).([]float32), any(dk).([]float32),
		any(dvv).([]float32), workers)
}

// addResidual adds the n rows of d values of x (strided by ldx) into y's
// (strided by ldy), when on: one head's residual connection, or its
// gradient, while the head is in cache. Each value is one addition, as
// Add's.
func addResidual[T float](on bool, n, d int, x []T, ldx int, y []T, ldy int) {
	if !on {
		return
	}
	for r := range n {
		xr, yr := x[r*ldx:r*ldx+d], y[r*ldy:r*ldy+d]
		for j, v := range xr {
			yr[j] += v
		}
	}
}

// mulRows sets y = x ⊙ d (equal lengths) and returns y.
func mulRows[T float](x, d, y []T) []T {
	for j := range y {
		y[j] = x[j] * d[j]
	}
	return y
}

// constInput: the key mask, the score bias and the dropout mask take no
// gradient.
func (a attentionKernel) constInput(i int) bool { return i >= a.packed.tensors() }

// grads packs the gradients of q, k, v (or of their packed forms) from
// one backward pass and unpacks them; of a packed [q k v] the backward's
// output is the gradient itself.
func (a attentionKernel) grads(in []*Node, _, g *Node) []*Node {
	packed := apply(attentionGradKernel{a}, append(append([]*Node{}, in...), g)...)
	nt := a.packed.tensors()
	var gs []*Node
	if a.packed == packQKV {
		gs = []*Node{packed}
	} else {
		s := make([]tensor.Shape, nt)
		for i := range s {
			s[i] = in[i].Shape()
		}
		gs = unpack(packed, s...)
	}
	for range in[nt:] {
		gs = append(gs, nil)
	}
	return gs
}

// attentionGradKernel computes, per head, with P the weights, D the
// dropout mask (all ones without dropout) and G the output gradient:
//
//	dv = (P ⊙ D)ᵀ G,  dP = (G vᵀ) ⊙ D,  dS = P ⊙ (dP − rowsum(P ⊙ dP)),
//	dq = dS k / √d,  dk = dSᵀ q / √d
//
// packed as [dq | dk | dv] (packKV: [dq | dkv], dkv laid out as kv;
// packQKV: dqkv, laid out as qkv). Its inputs are the attention node's,
// then G.
type attentionGradKernel struct{ a attentionKernel }

func (g attentionGradKernel) name() string { return "grad-" + g.a.name() }
func (g attentionGradKernel) outShape(in []tensor.Shape) (tensor.Shape, error) {
	if g.a.packed == packQKV {
		return in[0].Clone(), nil
	}
	n := 0
	for _, s := range in[:g.a.packed.tensors()] {
		n += s.TotalSize()
	}
	return tensor.Shape{n}, nil
}
func (g attentionGradKernel) do(in []*tensor.Dense, out *tensor.Dense) error {
	switch o := data(out).(type) {
	case []float32:
		attentionBackward(g.a, in, o)
	case []float64:
		attentionBackward(g.a, in, o)
	}
	return nil
}

func attentionBackward[T float](a attentionKernel, in []*tensor.Dense, packed []T) {
	ops, gOut := in[:len(in)-1], floats[T](in[len(in)-1])
	q, k, v, mask, bias, drop := operands[T](a, ops, true)
	geo, _ := a.geometry(shapes(ops), true)
	b, n, m, d, dv := geo.b, geo.n, geo.m, geo.d, geo.dv
	ldq, ldk, ldv := geo.ldq, geo.ldk, geo.ldv
	// the gradients lie as their operands do: dq, dk and dv start where
	// q, k and v start in the packed inputs
	var dq, dk, dvv []T
	switch a.packed {
	case packKV:
		nq := ops[0].Shape().TotalSize()
		dq, dk = packed[:nq], packed[nq:]
		dvv = dk[a.heads*d:]
	case packQKV:
		hd := a.heads * d
		dq, dk, dvv = packed, packed[hd:], packed[2*hd:]
	default:
		dq, dk, dvv = packed[:len(q)], packed[len(q):len(q)+len(k)], packed[len(q)+len(k):]
	}
	hv := a.heads * dv // G's row stride
	scale := T(1 / math.Sqrt(float64(d)))
	var saved []T
	if a.saved != nil && a.saved.fresh {
		saved, _ = a.saved.p.([]T)
		a.saved.fresh = false
		if len(saved) != b*a.heads*n*m {
			saved = nil
		}
	}
	type buffers struct {
		p, dp  []T
		cHeads int // heads attention.c ran
	}
	if saved != nil && headsBackward32(a, geo, q, k, v, gOut, saved, drop, scale, dq, dk, dvv) {
		kernels.AddMatMulFlops(b * a.heads * 4 * n * m * (d + dv))
		return
	}
	scratch := make([]*buffers, runtime.GOMAXPROCS(0))
	forHeads(b, a.heads, func(w, i int) {
		bi, h := i/a.heads, i%a.heads
		if scratch[w] == nil {
			scratch[w] = &buffers{p: make([]T, n*m), dp: make([]T, n*m)}
		}
		p, dp := scratch[w].p, scratch[w].dp
		if saved != nil {
			p = saved[i*n*m : (i+1)*n*m]
		} else {
			var bh []T
			if bias != nil {
				bh = bias[i*n*m : (i+1)*n*m]
			}
			weights(a, q, k, mask, bh, bi, h, n, m, d, ldq, ldk, p)
		}
		var dh []T // this head's dropout mask [N, M]
		if drop != nil {
			dh = drop[i*n*m : (i+1)*n*m]
		}
		qh, kh, vh, gh := q[bi*n*ldq+h*d:], k[bi*m*ldk+h*d:], v[bi*m*ldv+h*dv:], gOut[bi*n*hv+h*dv:]
		dqh, dkh, dvh := dq[bi*n*ldq+h*d:], dk[bi*m*ldk+h*d:], dvv[bi*m*ldv+h*dv:]
		if headBackward32(a, geo, qh, kh, vh, gh, p, dh, scale, dqh, dkh, dvh) {
			scratch[w].cHeads++
			return
		}
		if dh != nil {
			kernels.Gemm(true, false, m, dv, n, 1, mulRows(p, dh, dp), m, gh, hv, 0, dvh, ldv)
		} else {
			kernels.Gemm(true, false, m, dv, n, 1, p, m, gh, hv, 0, dvh, ldv)
		}
		kernels.Gemm(false, true, n, m, dv, 1, gh, hv, vh, ldv, 0, dp, m)
		if dh != nil {
			mulRows(dp, dh, dp)
		}
		for r := range n {
			pr, dr := p[r*m:(r+1)*m], dp[r*m:(r+1)*m]
			var dot T
			for j := range pr {
				dot += pr[j] * dr[j]
			}
			for j := range pr {
				dr[j] = pr[j] * (dr[j] - dot)
			}
		}
		kernels.Gemm(false, false, n, d, m, scale, dp, m, kh, ldk, 0, dqh, ldq)
		kernels.Gemm(true, false, m, d, n, scale, dp, m, qh, ldq, 0, dkh, ldk)
		addResidual(a.residual, n, d, gh, hv, dqh, ldq)
	})
	// the softmax weights again where none were saved, then g vᵀ, pᵀ g, ds k, dsᵀ q
	recompute := 0
	if saved == nil {
		recompute = 2 * n * m * d
	}
	countHeadFlops(scratch, func(s *buffers) int { return s.cHeads }, recompute+4*n*m*(d+dv))
}

// countHeadFlops adds to kernels.MatMulFlops the products of the heads
// attention.c ran, perHead operations each, counted per worker and added
// once per op: an atomic add per head, from both cores, would cost more
// than the count is worth.
func countHeadFlops[B any](scratch []*B, heads func(*B) int, perHead int) {
	total := 0
	for _, s := range scratch {
		if s != nil {
			total += heads(s)
		}
	}
	kernels.AddMatMulFlops(total * perHead)
}

type attentionWeightsKernel struct{ a attentionKernel }

func (w attentionWeightsKernel) name() string { return "weights-" + w.a.name() }
func (w attentionWeightsKernel) outShape(in []tensor.Shape) (tensor.Shape, error) {
	b, n, m, _, _, err := w.a.dims(in, false)
	if err != nil {
		return nil, err
	}
	return tensor.Shape{b, w.a.heads, n, m}, nil
}
func (w attentionWeightsKernel) do(in []*tensor.Dense, out *tensor.Dense) error {
	switch o := data(out).(type) {
	case []float32:
		attentionForward(w.a, in, nil, o)
	case []float64:
		attentionForward(w.a, in, nil, o)
	}
	return nil
}

// headForward32 runs one float32 head's forward in attention.c where it
// applies (q, k, v, out: the head's first rows, strided as g says and
// out as whole rows of H heads; bias, drop: the head's score bias and
// dropout mask [N, M] or nil), and reports whether it did.
func headForward32[T float](a attentionKernel, g geometry, q, k, v, mask, bias, drop []T, bi int, p, out []T) bool {
	q32, ok := any(q).([]float32)
	if !ok {
		return false
	}
	n, m, d, dv := g.n, g.m, g.d, g.dv
	var mrow []float32
	if mask != nil {
		mrow = any(mask).([]float32)[bi*m : (bi+1)*m]
	}
	hv := a.heads * dv
	var res []float32
	if a.residual {
		res = q32
	}
	return kernels.AttnHeadFwdRes32(q32, g.ldq, any(k).([]float32), g.ldk, any(v).([]float32), g.ldv, n, m, d, dv,
		float32(1/math.Sqrt(float64(d))), mrow, a.causal, any(bias).([]float32), any(drop).([]float32),
		any(p).([]float32), any(out).([]float32), hv, res, g.ldq)
}

// headBackward32 runs one float32 head's backward in attention.c where it
// applies (dq, dk and dv strided as q, k and v), and reports whether it
// did.
func headBackward32[T float](a attentionKernel, geo geometry, q, k, v, g, p, drop []T, scale T, dq, dk, dvOut []T) bool {
	q32, ok := any(q).([]float32)
	if !ok {
		return false
	}
	n, m, d, dv := geo.n, geo.m, geo.d, geo.dv
	var res []float32
	if a.residual {
		res = any(g).([]float32)
	}
	return kernels.AttnHeadBwdRes32(q32, geo.ldq, any(k).([]float32), geo.ldk, any(v).([]float32), geo.ldv, any(g).([]float32), a.heads*dv,
		any(p).([]float32), any(drop).([]float32), n, m, d, dv, float32(scale),
		any(dq).([]float32), any(dk).([]float32), any(dvOut).([]float32), res, a.heads*dv)
}
