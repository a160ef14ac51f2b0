package graph

import (
	"errors"
	"fmt"
	"math"

	"gorgonia.org/tensor"

	"github.com/probformer/probformer/graph/internal/kernels"
)

// ProjectedCrossEntropy is an output projection and its label-smoothed
// token cross-entropy in one op, skipping the rows the mask drops:
//
//	z_r = h_r W + b,   p_r = softmax(z_r)
//	ℓ_r = −(1−ε)·log p_r[y_r] − ε·mean_c log p_r[c]
//	L = Σ_r m_r ℓ_r / Σ_r m_r
//
// h: [..., d] (say [B, T, d]); w: [d, V]; bias: [V]; targets: [...] token
// ids (an index node, as for SoftmaxCrossEntropy); mask: [...] of h's
// dtype (0 = skip the row, else its weight), or nil for every row with
// weight 1. The result is a scalar, the value of
// Mean-by-mask(SoftmaxCrossEntropy(Linear(h, w, bias), targets, ε)) (up to
// the order of the final sum), for a fraction of the work: the rows with
// m_r = 0 (padding) are never projected.
//
// Forward: the live rows of h are gathered into [n, d], one gemm gives
// their logits [n, V], and each row's exponentials e^(z − max z) replace
// its logits once its log-sum-exp and loss are known. They are kept for
// the backward pass (with the op's other buffers, from one run to the
// next), which computes
//
//	∂L/∂z_r = g·m_r/Σm · (p_r − (1−ε)·onehot(y_r) − ε/V)
//
// in place on live rows only, then ∂L/∂W = H_liveᵀ ∂L/∂z, ∂L/∂b its column
// sums, and ∂L/∂h = ∂L/∂z Wᵀ scattered back to the live rows (0 on the
// others). targets and mask take no gradient.
//
// A target outside [0, V) on a live row fails the run with an error (on a
// skipped row it is never read). A batch whose mask weights sum to 0
// (every row skipped) also fails the run: its loss is 0/0, and an error
// says so where a NaN would only stop training later. Float32 and float64.
func ProjectedCrossEntropy(h, w, bias, targets, mask *Node, smoothing float64) *Node {
	if h == nil || w == nil || bias == nil || targets == nil {
		fail("projected cross-entropy: h, w, bias and targets are required")
	}
	if targets.Dtype() != tensor.Int {
		fail("projected cross-entropy: targets have dtype %v, want int", targets.Dtype())
	}
	k := projXentKernel{smoothing: smoothing, masked: mask != nil, saved: &projXentState{}}
	in := []*Node{h, w, bias, targets}
	if mask != nil {
		in = append(in, mask)
	}
	// A custom op's output is a tensor; Sum makes the loss a scalar node,
	// which Gorgonia's Grad wants.
	return Sum(apply(k, in...))
}

// projXentKernel is the forward op: inputs h, w, bias, targets [, mask],
// output [1] holding L.
type projXentKernel struct {
	smoothing float64
	masked    bool
	saved     *projXentState
}

// projXentState carries a node's live rows and their exponentials from
// its forward pass to its backward pass, later in the same run, and keeps
// the buffers from one run to the next (shapes are static per graph, so
// they are allocated once). fresh is set by the forward pass and cleared
// by the backward, which recomputes the forward if it is not set; grads is
// set once the backward has turned the exponentials into ∂L/∂z, which the
// ∂L/∂h and ∂L/∂b kernels read.
type projXentState struct {
	rows   []int     // live rows (m_r ≠ 0), ascending
	weight []float64 // m_r of each live row
	sumW   float64   // Σ m_r
	hLive  any       // []T: live rows of h [n, d]
	e      any       // []T: e^(z − max z) of live rows [n, V]; ∂L/∂z after the backward
	dbPart any       // []T: column sums of ∂L/∂z over each chunk of live rows [chunks, V]
	z      []float64 // Σ_c e of each live row
	loss   []float64 // ℓ of each live row
	fresh  bool
	grads  bool
}

// xentChunk is the number of rows a worker takes at a time.
const xentChunk = 16

func (k projXentKernel) name() string {
	return fmt.Sprintf("projected-xent(%g,masked=%v)", k.smoothing, k.masked)
}

func (k projXentKernel) outShape(in []tensor.Shape) (tensor.Shape, error) {
	want := 4
	if k.masked {
		want = 5
	}
	if len(in) != want {
		return nil, fmt.Errorf("projected cross-entropy: %d inputs, want %d", len(in), want)
	}
	h, w, b, t := in[0], in[1], in[2], in[3]
	if len(w) != 2 || len(h) < 2 || h[len(h)-1] != w[0] {
		return nil, fmt.Errorf("projected cross-entropy: h %v and w %v, want [..., d] and [d, V]", h, w)
	}
	if len(b) != 1 || b[0] != w[1] {
		return nil, fmt.Errorf("projected cross-entropy: bias %v, want [%d]", b, w[1])
	}
	if !t.Eq(h[:len(h)-1]) {
		return nil, fmt.Errorf("projected cross-entropy: targets %v, want %v", t, h[:len(h)-1])
	}
	if k.masked && !in[4].Eq(t) {
		return nil, fmt.Errorf("projected cross-entropy: mask %v, want %v", in[4], t)
	}
	if k.smoothing < 0 || k.smoothing >= 1 {
		return nil, fmt.Errorf("projected cross-entropy: label smoothing %g, want in [0, 1)", k.smoothing)
	}
	return tensor.Shape{1}, nil
}

// constInput: targets and mask take no gradient.
func (k projXentKernel) constInput(i int) bool { return i >= 3 }

func (k projXentKernel) do(in []*tensor.Dense, out *tensor.Dense) error {
	switch o := data(out).(type) {
	case []float32:
		l, err := projXentForward[float32](k, in)
		o[0] = float32(l)
		return err
	case []float64:
		l, err := projXentForward[float64](k, in)
		o[0] = l
		return err
	}
	return fmt.Errorf("unsupported dtype %v", out.Dtype())
}

// grads: the ∂L/∂W kernel turns the saved exponentials into ∂L/∂z, sums
// its columns over chunks of rows, and computes ∂L/∂W; the ∂L/∂h and
// ∂L/∂b kernels take its output as an input only so that the tape machine
// runs them after it, and read ∂L/∂z and the chunk sums from the state.
// So no gradient is packed and then copied apart (as attention's are).
func (k projXentKernel) grads(in []*Node, _, g *Node) []*Node {
	dw := apply(projXentGradW{k}, append(append([]*Node{}, in...), g)...)
	out := []*Node{
		apply(projXentGradH{k: k, shape: fix(in[0].Shape())}, in[1], dw),
		dw,
		apply(projXentGradB{k}, dw),
		nil,
	}
	if k.masked {
		out = append(out, nil)
	}
	return out
}

// projXentForward gathers the live rows, projects them and computes their
// cross-entropy, leaving the exponentials in the state. It returns L.
func projXentForward[T float](k projXentKernel, in []*tensor.Dense) (float64, error) {
	s := k.saved
	s.fresh, s.grads = false, false
	h, w, bias := floats[T](in[0]), floats[T](in[1]), floats[T](in[2])
	targets := in[3].Data().([]int)
	var mask []T
	if k.masked {
		mask = floats[T](in[4])
	}
	d, v := in[1].Shape()[0], in[1].Shape()[1]
	if err := gatherLive(s, h, targets, mask, d, v); err != nil {
		return math.NaN(), err
	}
	n := len(s.rows)
	hLive, e := s.hLive.([]T)[:n*d], s.e.([]T)[:n*v]
	gemmRows(false, false, n, v, d, hLive, d, w, v, e, v, bias)
	eps := k.smoothing
	kernels.ParallelFor((n+xentChunk-1)/xentChunk, func(_, c int) {
		for i := c * xentChunk; i < min((c+1)*xentChunk, n); i++ {
			x := e[i*v : (i+1)*v]
			m, sum := rowMaxSum(x)
			xy := float64(x[targets[s.rows[i]]])
			z := kernels.ExpRow(x, x, m) // x now holds e^(z − m)
			lse := float64(m) + math.Log(z)
			s.z[i] = z
			s.loss[i] = -(1-eps)*(xy-lse) - eps*(sum/float64(v)-lse)
		}
	})
	// A fixed order, whatever the number of workers.
	var total float64
	for i, l := range s.loss[:n] {
		total += s.weight[i] * l
	}
	s.fresh = true
	return total / s.sumW, nil
}

// gatherLive records the live rows and their weights in s, checks their
// targets, and copies their rows of h into s.hLive. The buffers are sized
// for every row on first use and kept.
func gatherLive[T float](s *projXentState, h []T, targets []int, mask []T, d, v int) error {
	rows := len(targets)
	hLive, ok := s.hLive.([]T)
	if !ok || len(hLive) != rows*d {
		s.rows, s.weight = make([]int, 0, rows), make([]float64, 0, rows)
		s.z, s.loss = make([]float64, rows), make([]float64, rows)
		hLive = make([]T, rows*d)
		s.hLive, s.e = hLive, make([]T, rows*v)
	}
	s.rows, s.weight, s.sumW = s.rows[:0], s.weight[:0], 0
	for r, y := range targets {
		m := 1.0
		if mask != nil {
			m = float64(mask[r])
		}
		if m == 0 {
			continue
		}
		if y < 0 || y >= v {
			return fmt.Errorf("target %d at row %d outside [0, %d)", y, r, v)
		}
		copy(hLive[len(s.rows)*d:], h[r*d:(r+1)*d])
		s.rows = append(s.rows, r)
		s.weight = append(s.weight, m)
		s.sumW += m
	}
	if len(s.rows) == 0 || s.sumW == 0 {
		return errProjXentEmpty
	}
	return nil
}

var errProjXentEmpty = errors.New("every row is masked: the mean over no tokens is undefined")

// projXentGradW is ∂L/∂W [d, V]. Its inputs are the forward's and the
// upstream gradient g [1]; it leaves ∂L/∂z of the live rows in the state.
type projXentGradW struct{ k projXentKernel }

func (g projXentGradW) name() string { return "grad-w-" + g.k.name() }
func (g projXentGradW) outShape(in []tensor.Shape) (tensor.Shape, error) {
	return in[1].Clone(), nil
}
func (g projXentGradW) do(in []*tensor.Dense, out *tensor.Dense) error {
	switch o := data(out).(type) {
	case []float32:
		return projXentBackward(g.k, in, o)
	case []float64:
		return projXentBackward(g.k, in, o)
	}
	return fmt.Errorf("unsupported dtype %v", out.Dtype())
}

// projXentBackward sets ∂L/∂z_r = g·m_r/Σm·(p_r − (1−ε)·onehot(y_r) − ε/V)
// in place of the live rows' exponentials, and dW = H_liveᵀ ∂L/∂z.
func projXentBackward[T float](k projXentKernel, in []*tensor.Dense, dW []T) error {
	s := k.saved
	if !s.fresh {
		// No forward of this run to reuse: recompute it.
		if _, err := projXentForward[T](k, in[:len(in)-1]); err != nil {
			return err
		}
	}
	s.fresh = false
	gOut := float64(floats[T](in[len(in)-1])[0])
	d, v := in[1].Shape()[0], in[1].Shape()[1]
	targets := in[3].Data().([]int)
	n := len(s.rows)
	hLive, e := s.hLive.([]T)[:n*d], s.e.([]T)[:n*v]
	eps := k.smoothing
	chunks := (n + xentChunk - 1) / xentChunk
	part, ok := s.dbPart.([]T)
	if !ok || len(part) < chunks*v {
		part = make([]T, (len(targets)+xentChunk-1)/xentChunk*v)
		s.dbPart = part
	}
	kernels.ParallelFor(chunks, func(_, c int) {
		lo, hi := c*xentChunk, min((c+1)*xentChunk, n)
		for i := lo; i < hi; i++ {
			a := gOut * s.weight[i] / s.sumW
			row := e[i*v : (i+1)*v]
			scaleShift(row, T(a/s.z[i]), T(a*eps/float64(v)))
			row[targets[s.rows[i]]] -= T(a * (1 - eps))
		}
		// The chunk's column sums, while its rows are in cache; ∂L/∂b adds
		// them up in chunk order.
		colSum(e[lo*v:hi*v], part[c*v:(c+1)*v])
	})
	gemmRows(true, false, d, v, n, hLive, d, e, v, dW, v, nil)
	s.grads = true
	return nil
}

// projXentGradH is ∂L/∂h = ∂L/∂z Wᵀ on live rows, 0 on the others. Its
// inputs are w and ∂L/∂W (for the order of the run only).
type projXentGradH struct {
	k     projXentKernel
	shape fixedShape
}

func (g projXentGradH) name() string { return fmt.Sprintf("grad-h%v-%s", g.shape.get(), g.k.name()) }
func (g projXentGradH) outShape([]tensor.Shape) (tensor.Shape, error) {
	return g.shape.get(), nil
}
func (g projXentGradH) do(in []*tensor.Dense, out *tensor.Dense) error {
	if !g.k.saved.grads {
		return errors.New("∂L/∂z of this run is not ready")
	}
	switch o := data(out).(type) {
	case []float32:
		projXentGradHidden(g.k.saved, floats[float32](in[0]), in[0].Shape()[1], o)
	case []float64:
		projXentGradHidden(g.k.saved, floats[float64](in[0]), in[0].Shape()[1], o)
	default:
		return fmt.Errorf("unsupported dtype %v", out.Dtype())
	}
	return nil
}

// projXentGradHidden writes ∂L/∂z Wᵀ [n, d] into the first n rows of dh,
// then moves each to its live row, last first (row i goes to rows[i] ≥ i,
// so no row is overwritten before it moves), and zeroes the rest.
func projXentGradHidden[T float](s *projXentState, w []T, v int, dh []T) {
	n := len(s.rows)
	d := len(w) / v
	gemmRows(false, true, n, d, v, s.e.([]T)[:n*v], v, w, v, dh, d, nil)
	next := len(dh) / d
	for i := n - 1; i >= 0; i-- {
		r := s.rows[i]
		clear(dh[(r+1)*d : next*d])
		if r != i {
			copy(dh[r*d:(r+1)*d], dh[i*d:(i+1)*d])
		}
		next = r
	}
	clear(dh[:next*d])
}

// projXentGradB is ∂L/∂b, the column sums of ∂L/∂z, from the sums over
// chunks of rows that the ∂L/∂W kernel leaves. Its input is ∂L/∂W (for the
// order of the run only).
type projXentGradB struct{ k projXentKernel }

func (g projXentGradB) name() string { return "grad-b-" + g.k.name() }
func (g projXentGradB) outShape(in []tensor.Shape) (tensor.Shape, error) {
	return tensor.Shape{in[0][1]}, nil
}
func (g projXentGradB) do(in []*tensor.Dense, out *tensor.Dense) error {
	s := g.k.saved
	if !s.grads {
		return errors.New("∂L/∂z of this run is not ready")
	}
	chunks := (len(s.rows) + xentChunk - 1) / xentChunk
	switch o := data(out).(type) {
	case []float32:
		sumChunks(s.dbPart.([]float32), chunks, o)
	case []float64:
		sumChunks(s.dbPart.([]float64), chunks, o)
	default:
		return fmt.Errorf("unsupported dtype %v", out.Dtype())
	}
	return nil
}

// sumChunks sets db to the sum of the first chunks rows of part [·, V],
// in order.
func sumChunks[T float](part []T, chunks int, db []T) {
	v := len(db)
	copy(db, part[:v])
	for c := 1; c < chunks; c++ {
		addRepeat(db, part[c*v:(c+1)*v], db)
	}
}

// gemmRows is gemmBias with α = 1, β = 0, made independent of the number
// of threads in float64 too. gemm splits C's rows in half between two
// threads; gemm.c's float64 kernel takes rows four at a time and the last
// m mod 4 by another loop that rounds differently, so a split that is not
// a multiple of 4 changes the values of the rows around it. Here the
// first 8⌊m/8⌋ rows go in one call (halves of multiples of 4) and the
// rest, too few to split, in another. gemm.c's float32 kernels compute a
// row the same way wherever it falls (TestGemmRowSplitIsExact).
func gemmRows[T float](tA, tB bool, m, n, k int, a []T, lda int, b []T, ldb int, c []T, ldc int, bias []T) {
	head := m &^ 7
	if _, ok := any(c).([]float64); !ok || head == 0 || head == m {
		kernels.GemmBias(tA, tB, m, n, k, 1, a, lda, b, ldb, 0, c, ldc, bias)
		return
	}
	kernels.GemmBias(tA, tB, head, n, k, 1, a, lda, b, ldb, 0, c, ldc, bias)
	aOff := head * lda
	if tA {
		aOff = head
	}
	kernels.GemmBias(tA, tB, m-head, n, k, 1, a[aOff:], lda, b, ldb, 0, c[head*ldc:], ldc, bias)
}
