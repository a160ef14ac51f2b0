package kernels

// AttnBatch32 is a batch of float32 softmax attention heads as graph's
// fused attention lays them out, for AttnHeadsFwdShared32 and
// AttnHeadsBwdShared32:
// B batch elements of H heads, head (bi, h) numbered i = bi·H + h, with N
// queries and M keys of widths D (queries, keys) and DV (values).
type AttnBatch32 struct {
	// Q, K, V start at the first head's first value: head (bi, h) reads
	// its N rows of q from Q[bi·N·LdQ + h·D:], strided by LdQ, its M rows
	// of k from K[bi·M·LdK + h·D:] and of v from V[bi·M·LdV + h·DV:].
	Q, K, V       []float32
	LdQ, LdK, LdV int

	B, H, N, M, D, DV int

	Scale  float32   // the scores' factor, 1/√D
	Mask   []float32 // key mask [B×M] (1 visible, 0 not), or nil
	Causal bool      // query j sees keys up to j (N = M)

	// Bias and Drop are the score bias and dropout mask [B·H·N·M], or
	// nil; head i's are at i·N·M.
	Bias, Drop []float32

	// P holds the weights [B·H·N·M], head i's at i·N·M; in the forward
	// pass it may instead be exactly one head's [N·M], which every head
	// overwrites (a scratch, when no weights are saved).
	P []float32

	// Residual adds q to the readout (DV = D) and the readout's gradient
	// to dq.
	Residual bool
}

// fits reports whether attention.c takes a's heads and a's slices (and
// x, the readout or its gradient [B, N, H·DV]) hold them all, and the
// stride between heads' weights in P: N·M, or 0 when P is exactly one
// head's (not when saved: the backward reads every head's).
func (a *AttnBatch32) fits(x []float32, saved bool) (pstride int, ok bool) {
	if a.B < 1 || a.H < 1 || !AttnHeadOK(a.N, a.M, a.D, a.DV) || a.LdQ < 1 || a.LdK < 1 || a.LdV < 1 ||
		(a.Residual && a.D != a.DV) || (a.Causal && a.N != a.M) {
		return 0, false
	}
	nm, heads := a.N*a.M, a.B*a.H
	if len(a.Q) < (a.B*a.N-1)*a.LdQ+a.H*a.D || len(a.K) < (a.B*a.M-1)*a.LdK+a.H*a.D ||
		len(a.V) < (a.B*a.M-1)*a.LdV+a.H*a.DV || len(x) < a.B*a.N*a.H*a.DV ||
		(a.Mask != nil && len(a.Mask) < a.B*a.M) || (a.Bias != nil && len(a.Bias) < heads*nm) ||
		(a.Drop != nil && len(a.Drop) < heads*nm) {
		return 0, false
	}
	switch {
	case len(a.P) >= heads*nm:
		return nm, true
	case !saved && len(a.P) == nm:
		return 0, true
	}
	return 0, false
}

// fitsShared is fits for the shared calls (AttnHeadsFwdShared32,
// AttnHeadsBwdShared32) on workers threads: the backward reads every
// head's saved weights; the forward writes them, or, when P is too short
// for them but holds N·M for each worker, uses it as the workers'
// scratches (pstride 0).
func (a *AttnBatch32) fitsShared(x []float32, bwd bool, workers int) (pstride int, ok bool) {
	nm := a.N * a.M
	if bwd || len(a.P) >= a.B*a.H*nm {
		return a.fits(x, true)
	}
	if len(a.P) < workers*nm {
		return 0, false
	}
	one := *a
	one.P = a.P[:nm]
	return one.fits(x, false)
}
