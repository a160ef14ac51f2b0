package kernels

// BayesPass32 is one pass of float32 sampled Bayesian heads, B batch
// elements of H heads each, laid out as graph's BayesAttentionSample op
// holds them, for BayesForwardPass32 and BayesBackwardPass32. Element b's
// queries and keys start at Q[b·N·H·D:] and K[b·M·H·D:] (rows H·D apart,
// head h at column h·D), its values at V[b·M·H·Dv:], its readout (the
// forward's) or the readout's gradient G (the backward's) at
// Out[b·N·H·Dv:] (rows H·Dv apart); head (b, h)'s noise, weights P and
// KL gradient X are the [N×M] blocks at (b·H + h)·N·M, the masks' rows b
// of Mask [B·M] and QMask [B·N] (or nil). Pad is the prior network in
// graph's priorPad layout (nil: none), with B2 [H], the prior's
// gradients DC [B·H·M] (forward) and its unit gradients XC [B·H·M] and
// per-head parts Part [B·H·NP] (backward). The forward writes each
// head's Σ KL_ij into Sums [B·H] and the heads attention.c skipped (no
// visible key or no real query) into Skipped [B], a bit a head, for the
// caller's Go loop; the backward writes DQ, DK, DV laid out as Q, K, V.
type BayesPass32 struct {
	B, H, N, M, D, Dv int
	Q, K, V           []float32
	Scale             float32
	Mask, QMask       []float32
	Noise, P, X       []float32
	Pad, B2           []float32
	PadSize           int

	// forward
	KC      *[7]float64
	Out, DC []float32
	Sums    []float64
	Skipped []uint32

	// backward
	G          []float32
	Gx         float32
	Gd         float64
	DQ, DK, DV []float32
	XC         []float32
	Part       []float64
	NP, R      int

	// PG is the workers' scratch for the prior network's gradients,
	// grown as needed and kept by the caller.
	PG []float32
}

// rows reports whether x holds B·rows rows of ld with w values in the
// last.
func (p *BayesPass32) rows(x []float32, rows, ld, w int) bool {
	return p.B*rows >= 1 && (p.B*rows-1)*ld+w <= len(x)
}

// fits reports whether every slice the pass reads or writes is long
// enough: the C pass indexes them without bounds. The per-element
// checks of BayesHeads32 and BayesHeadsBwd32, over the whole batch.
func (p *BayesPass32) fits(bwd bool) bool {
	h, n, m, d, dv := p.H, p.N, p.M, p.D, p.Dv
	hd, hv, hm := h*d, h*dv, h*n*m
	if p.B < 1 || h < 1 || h > 32 || !AttnHeadOK(n, m, d, dv) || len(p.P) < p.B*hm || len(p.X) < p.B*hm ||
		!p.rows(p.Q, n, hd, hd) || !p.rows(p.K, m, hd, hd) || !p.rows(p.V, m, hv, hv) {
		return false
	}
	if p.Pad != nil && (p.PadSize < 32*d+32 || len(p.Pad) < h*p.PadSize) {
		return false
	}
	if !bwd {
		return p.KC != nil && len(p.Noise) >= p.B*hm && len(p.Sums) >= p.B*h && len(p.Skipped) >= p.B &&
			p.rows(p.Out, n, hv, hv) && (p.Mask == nil || len(p.Mask) >= p.B*m) &&
			(p.QMask == nil || len(p.QMask) >= p.B*n) && (p.Pad == nil || len(p.B2) >= h && len(p.DC) >= p.B*h*m)
	}
	return p.rows(p.G, n, hv, hv) && p.rows(p.DQ, n, hd, hd) && p.rows(p.DK, m, hd, hd) && p.rows(p.DV, m, hv, hv) &&
		(p.Pad == nil || len(p.XC) >= p.B*h*m && p.R >= 1 && p.R <= 16 && p.NP >= d*p.R+2*p.R+1 &&
			len(p.Part) >= p.B*h*p.NP)
}
