package kernels

import "math"

// The per-problem arithmetic of EMAttention: one example and one head, the
// forward pass recording what its backward pass reads (the trace), and
// the backward pass as the adjoint of every step, in reverse. Products go
// to gemm.c's kernel; everything else is a loop over [N×M] or [M×·].
// em/MATH.md has the equations; the section of each step is cited where
// it is computed.

// EMHyper holds one head's prior hyperparameters, already constrained
// (em/MATH.md §6): the initial precisions, θ_ξ, a_α − 1, b_α, θ_μ,
// a_β − 1, b_β and θ_π − 1, in that order, the order of their gradients.
type EMHyper[T Float] [EMHyperCount]T

const (
	HAlpha0 = iota
	HBeta0
	HThetaXi
	HAAlpha
	HBAlpha
	HThetaMu
	HABeta
	HBBeta
	HPi
	EMHyperCount
)

// EMProblem is one problem's inputs as strided views: row i of q is
// q[i·ldq:], and so on. Masks hold 1 or 0; nil masks mean all real.
type EMProblem[T Float] struct {
	N, M, D, Dv int // N query units, M memory units, key and value widths

	Q                  []T // [N×d], rows strided by ldq
	Xi0                []T // [M×d], ldk
	Mu0                []T // [M×dv], ldv
	Vals               []T // annotated values [N×dv], ldx; nil without propagation
	Ldq, Ldk, Ldv, Ldx int

	KeyMask   []T // [M] or nil
	QueryMask []T // [N] or nil
	InS       []T // [N]: annotated and real; nil when propagation is skipped
	Logits    []T // [M]: the free prior's logits; nil for the linked prior
	H         EMHyper[T]

	SizeS      T // |S|
	RealMemory T // number of real memory units

	// Out [N×dv] (rows at Ldo), when not nil, takes the residual
	// connection's readout q_i + r_i (q_i + 0 for a padded query) from
	// em.c's forward, in the call that made r; the Go path ignores it (its
	// caller adds the rows).
	Out []T
	Ldo int
}

func (p *EMProblem[T]) RealKey(j int) bool   { return p.KeyMask == nil || p.KeyMask[j] != 0 }
func (p *EMProblem[T]) RealQuery(i int) bool { return p.QueryMask == nil || p.QueryMask[i] != 0 }

// EMTrace is what one problem's forward pass keeps for its backward pass;
// its slices are cut from one flat buffer (emLayout says where).
type EMTrace[T Float] struct {
	Lp0, Pi0, KeyNorm0, ValueNorm0 []T // initial log π and π [M]; ‖ξ⁰_j‖², ‖μ⁰_j‖²

	Dk []([]T) // D^(t) = dist(q, ξ^(t)) [N×M], t = 0…T_k
	Xi []([]T) // ξ^(t) [M×d], t = 1…T_k (ξ^(0) is the input)
	Al []([]T) // α^(t) [M], t = 0…T_k
	Wk []([]T) // key-adaptation weights [N×M], t < T_k
	Nk []([]T) // n_j [M]
	Ak []([]T) // Σ_i w_ij q_i [M×d]

	Ep  []([]T) // dist(V, μ^(t)) [N×M], t < T_p
	Ep2 []([]T) // dist(V, μ^(t+1)) [N×M], for the β update of iteration t
	Mu  []([]T) // μ^(t) [M×dv], t = 1…T_p
	Be  []([]T) // β^(t) [M], t = 0…T_p
	Lp  []([]T) // log π^(t) [M], t = 0…T_p
	Wp  []([]T) // propagation weights [N×M]
	Np  []([]T) // n_j [M]
	Bp  []([]T) // Σ_i w_ij v_i [M×dv]

	Wi []([]T) // inference weights [N×M], t = 0…T_v
	R  []([]T) // readouts [N×dv], t = 0…T_v
	F  []([]T) // dist(v^(t), μ) [N×M], t < T_v
	Pz []([]T) // Σ_j w_ij β_j [N], t < T_v
	Pr bool    // propagation ran
}

// EMTraceSize returns the values one problem's trace holds.
func EMTraceSize(s EMSpec, n, m, d, dv int) int {
	nm := n * m
	size := 4*m + (s.KeyIters+1)*nm + s.KeyIters*(m*d) + (s.KeyIters+1)*m + s.KeyIters*(nm+m+m*d)
	tp := s.PropagateIters
	size += tp*nm*2 + tp*m*dv + (tp+1)*2*m + tp*(nm+m+m*dv)
	tv := s.ValueIters
	size += (tv+1)*(nm+n*dv) + tv*(nm+n)
	return size
}

// CutTrace slices a trace out of buf, which holds EMTraceSize values.
func CutTrace[T Float](s EMSpec, n, m, d, dv int, buf []T) *EMTrace[T] {
	var hdr [][]T
	return CutTraceInto(s, n, m, d, dv, buf, &EMTrace[T]{}, &hdr)
}

// CutTraceInto is CutTrace into tr, with the parts' slice headers in
// *hdr (grown when short), so that a worker reuses both for all its
// problems: a problem's trace is cut once per pass, and its small
// allocations showed in profiles next to em.c's arithmetic.
func CutTraceInto[T Float](s EMSpec, n, m, d, dv int, buf []T, tr *EMTrace[T], hdrs *[][]T) *EMTrace[T] {
	take := func(k int) []T {
		x := buf[:k:k]
		buf = buf[k:]
		return x
	}
	nm := n * m
	tk, tp, tv := s.KeyIters, s.PropagateIters, s.ValueIters
	need := 6*tk + 3 + 8*tp + 3 + 4*tv + 2
	if cap(*hdrs) < need {
		*hdrs = make([][]T, 0, need)
	}
	hdr := (*hdrs)[:0]
	many := func(count, k int) [][]T {
		start := len(hdr)
		for range count {
			hdr = append(hdr, take(k))
		}
		return hdr[start:len(hdr):len(hdr)]
	}
	afterNil := func(count, k int) [][]T { // parts 1…count; part 0 is an input
		start := len(hdr)
		hdr = append(hdr, nil)
		many(count, k)
		return hdr[start:len(hdr):len(hdr)]
	}
	*tr = EMTrace[T]{Lp0: take(m), Pi0: take(m), KeyNorm0: take(m), ValueNorm0: take(m)}
	tr.Dk = many(tk+1, nm)
	tr.Xi = afterNil(tk, m*d)
	tr.Al = many(tk+1, m)
	tr.Wk, tr.Nk, tr.Ak = many(tk, nm), many(tk, m), many(tk, m*d)
	tr.Ep, tr.Ep2 = many(tp, nm), many(tp, nm)
	tr.Mu = afterNil(tp, m*dv)
	tr.Be, tr.Lp = many(tp+1, m), many(tp+1, m)
	tr.Wp, tr.Np, tr.Bp = many(tp, nm), many(tp, m), many(tp, m*dv)
	tr.Wi, tr.R = many(tv+1, nm), many(tv+1, n*dv)
	tr.F, tr.Pz = many(tv, nm), many(tv, n)
	return tr
}

// EMTraceLast returns where the last value iteration's weights Wi[Tv]
// [N×M] and readout R[Tv] [N×dv] start in a flat trace of EMTraceSize
// values (the offsets CutTraceInto gives them), so that a caller that
// reads only these two need not cut the whole trace a problem.
func EMTraceLast(s EMSpec, n, m, d, dv int) (weights, readout int) {
	nm := n * m
	tk, tp, tv := s.KeyIters, s.PropagateIters, s.ValueIters
	wi := 4*m + (tk+1)*nm + tk*m*d + (tk+1)*m + tk*(nm+m+m*d)
	wi += tp*nm*2 + tp*m*dv + (tp+1)*2*m + tp*(nm+m+m*dv)
	return wi + tv*nm, wi + (tv+1)*nm + tv*n*dv
}

// sqNorms sets out[i] = ‖x_i‖² for rows x_i of width w strided by ld.
func sqNorms[T Float](x []T, rows, w, ld int, out []T) {
	for i := range rows {
		var s T
		for _, v := range x[i*ld : i*ld+w] {
			s += v * v
		}
		out[i] = s
	}
}

// emDist sets out [n×m] to ‖a_i − c_j‖² = max(0, ‖a_i‖² − 2 a_i·c_j +
// ‖c_j‖²), the expanded, clamped distance of em/MATH.md §1 (the clamp
// absorbs rounding); aa and cc are the rows' squared norms.
func emDist[T Float](n, m, w int, a []T, lda int, c []T, ldc int, aa, cc, out []T) {
	gemmKernel(false, true, n, m, w, -2, a, lda, c, ldc, 0, out, m, nil)
	for i := range n {
		row := out[i*m : (i+1)*m]
		for j := range row {
			x := row[j] + aa[i] + cc[j]
			if x < 0 {
				x = 0
			}
			row[j] = x
		}
	}
}

// emDistBack adds the gradient of Σ g_ij D_ij through D = emDist(a, c):
// with G = g ⊙ [D > 0],
//
//	da_i += 2 (Σ_j G_ij) a_i − 2 Σ_j G_ij c_j,
//	dc_j += 2 (Σ_i G_ij) c_j − 2 Σ_i G_ij a_i.
//
// g is overwritten with G; da or dc may be nil. rs and cs are scratch [n], [m].
func emDistBack[T Float](n, m, w int, a []T, lda int, c []T, ldc int, dist, g []T, da []T, ldda int, dc []T, lddc int, rs, cs []T) {
	clear(cs[:m])
	for i := range n {
		row, d := g[i*m:(i+1)*m], dist[i*m:(i+1)*m]
		var s T
		for j := range row {
			if !(d[j] > 0) {
				row[j] = 0
			}
			s += row[j]
			cs[j] += row[j]
		}
		rs[i] = s
	}
	if da != nil {
		addScaledRows(n, w, rs, a, lda, da, ldda)
		gemmKernel(false, false, n, w, m, -2, g, m, c, ldc, 1, da, ldda, nil)
	}
	if dc != nil {
		addScaledRows(m, w, cs, c, ldc, dc, lddc)
		gemmKernel(true, false, m, w, n, -2, g, m, a, lda, 1, dc, lddc, nil)
	}
}

// addScaledRows adds 2·s_r·x_r to each row y_r (r < rows, width w; x's
// rows strided by ldx, y's by ldy): the (Σ G)·a part of emDistBack.
func addScaledRows[T Float](rows, w int, s, x []T, ldx int, y []T, ldy int) {
	for r := range rows {
		if s[r] == 0 {
			continue
		}
		xr, yr := x[r*ldx:r*ldx+w], y[r*ldy:r*ldy+w]
		for k := range yr {
			yr[k] += 2 * s[r] * xr[k]
		}
	}
}

// emSoftmax sets w [n×m] to softmax_j of scores s over the real keys, the
// E-step of em/MATH.md §3–§5; a row outside rows (nil: none) becomes 0,
// so that it drops out of every sum over i. Padded keys get weight
// exactly 0. s and w may be the same slice.
func emSoftmax[T Float](p *EMProblem[T], s, w []T, rows []T) {
	n, m := p.N, p.M
	for i := range n {
		src, dst := s[i*m:(i+1)*m], w[i*m:(i+1)*m]
		if rows != nil && rows[i] == 0 {
			clear(dst)
			continue
		}
		top := T(math.Inf(-1))
		for j, x := range src {
			if p.RealKey(j) && (x > top || x != x) {
				top = x
			}
		}
		if p.KeyMask != nil {
			for j := range src {
				if p.KeyMask[j] == 0 {
					src[j] = top + MaskNegInf // e^(−1e9) is exactly 0
				}
			}
		}
		z := T(ExpRow(dst, src, top))
		for j := range dst {
			dst[j] /= z
		}
	}
}

// emSoftmaxBack turns the gradient dw of softmax rows w into that of their
// scores, in place: ds_ij = w_ij (dw_ij − Σ_k w_ik dw_ik). Rows of zero
// weights (masked) get 0.
func emSoftmaxBack[T Float](n, m int, w, dw []T) {
	for i := range n {
		wr, dr := w[i*m:(i+1)*m], dw[i*m:(i+1)*m]
		var dot T
		for j := range wr {
			dot += wr[j] * dr[j]
		}
		for j := range wr {
			dr[j] = wr[j] * (dr[j] - dot)
		}
	}
}

// emGaussian sets out_ij = base_ij + (k/2) log λ_j − (λ_j/2) D_ij, one
// Gaussian factor's part of a component score (em/MATH.md §1); base may
// be nil (0) or out itself.
func emGaussian[T Float](n, m, k int, lambda, dist, base, out []T) {
	half := T(k) / 2
	logs := make([]T, 0, 64)
	for j := range m {
		logs = append(logs, half*T(math.Log(float64(lambda[j]))))
	}
	for i := range n {
		o, d := out[i*m:(i+1)*m], dist[i*m:(i+1)*m]
		var b []T
		if base != nil {
			b = base[i*m : (i+1)*m]
		}
		for j := range o {
			x := logs[j] - lambda[j]/2*d[j]
			if b != nil {
				x += b[j]
			}
			o[j] = x
		}
	}
}

// emGaussianBack adds, for s_ij = (k/2) log λ_j − (λ_j/2) D_ij with score
// gradient ds, dλ_j += Σ_i ds_ij (k/(2λ_j) − D_ij/2) and sets dD_ij =
// −(λ_j/2) ds_ij into dd (which may be nil: no gradient wanted).
func emGaussianBack[T Float](n, m, k int, lambda, dist, ds, dLambda, dd []T) {
	half := T(k) / 2
	for i := range n {
		g, d := ds[i*m:(i+1)*m], dist[i*m:(i+1)*m]
		var ddr []T
		if dd != nil {
			ddr = dd[i*m : (i+1)*m]
		}
		for j := range g {
			dLambda[j] += g[j] * (half/lambda[j] - d[j]/2)
			if ddr != nil {
				ddr[j] = -lambda[j] / 2 * g[j]
			}
		}
	}
}

// colSums sets out[j] = Σ_i x_ij for x [n×m].
func colSums[T Float](n, m int, x, out []T) {
	clear(out[:m])
	for i := range n {
		for j, v := range x[i*m : (i+1)*m] {
			out[j] += v
		}
	}
}

// emCentres is the M-step of a Gaussian mean under the prior N(c⁰_j,
// θ⁻¹ I) (em/MATH.md §4 for keys, §5 for values):
//
//	c_j = (θ c⁰_j + λ_j A_j) / (θ + λ_j n_j),  A_j = Σ_i w_ij x_i,
//
// for the real units; a padded unit keeps c⁰_j. It sets n and a [m×w].
func emCentres[T Float](p *EMProblem[T], w, x []T, ldx, width int, c0 []T, ldc0 int, lambda []T, theta T, n, a, c []T) {
	colSums(p.N, p.M, w, n)
	gemmKernel(true, false, p.M, width, p.N, 1, w, p.M, x, ldx, 0, a, width, nil)
	for j := range p.M {
		cj, c0j, aj := c[j*width:(j+1)*width], c0[j*ldc0:j*ldc0+width], a[j*width:(j+1)*width]
		if !p.RealKey(j) {
			copy(cj, c0j)
			continue
		}
		den := theta + lambda[j]*n[j]
		for k := range cj {
			cj[k] = (theta*c0j[k] + lambda[j]*aj[k]) / den
		}
	}
}

// emPrecision is the M-step of a Gaussian precision under the prior
// Gamma(a, b) with the new centres (em/MATH.md §4 for α, §5 for β):
//
//	λ_j = (a − 1 + (k/2) n_j) / (b + ½ Σ_i w_ij D_ij),
//
// for the real units; a padded unit keeps old[j]. aExtra is a − 1.
func emPrecision[T Float](p *EMProblem[T], w, dist, n []T, aExtra, b T, k int, old, out []T) {
	for j := range p.M {
		if !p.RealKey(j) {
			out[j] = old[j]
			continue
		}
		var spread T
		for i := range p.N {
			spread += w[i*p.M+j] * dist[i*p.M+j]
		}
		out[j] = (aExtra + T(k)/2*n[j]) / (b + spread/2)
	}
}

// EMSpec is what the per-problem arithmetic reads of graph.EMSpec: the
// iteration counts T_k, T_p and T_v (em/MATH.md §4, §5, §3) and the
// adaptation options. graph.EMSpec's kernel method makes it.
type EMSpec struct {
	KeyIters, PropagateIters, ValueIters int
	AdaptAlpha, AdaptBeta, AdaptPi       bool
}

// UpdateBeta reports whether propagation iteration t updates β: the last
// iteration's update reaches nothing when there is no value iteration,
// and em's composed graph leaves it out (so both give the same mixture).
func (s EMSpec) UpdateBeta(t int) bool {
	return s.AdaptBeta && (t < s.PropagateIters-1 || s.ValueIters > 0)
}

// EMForward runs one problem's EM (em/MATH.md "Order of the phases"),
// filling tr. sc is scratch of EMScratchSize values.
func EMForward[T Float](s EMSpec, p *EMProblem[T], tr *EMTrace[T], sc []T) {
	if EMForwardC(s, p, tr) { // float32 with AVX2: em.c, these steps in one call
		return
	}
	n, m, d, dv := p.N, p.M, p.D, p.Dv
	nm := n * m
	qq, cc, sbuf := sc[:n], sc[n:n+max(m, n)], sc[n+max(m, n):n+max(m, n)+nm]
	// the adapted key term K_ij, then K_ij + log π_j of the readout
	// [N×M]: the forward pass reads them, the backward pass does not
	kf := sc[n+max(m, n)+nm+n : n+max(m, n)+2*nm+n]

	// §2: the initial mixing prior, once, from ξ⁰ and μ⁰.
	sqNorms(p.Xi0, m, d, p.Ldk, tr.KeyNorm0)
	sqNorms(p.Mu0, m, dv, p.Ldv, tr.ValueNorm0)
	z := tr.Lp0
	for j := range m {
		if p.Logits != nil {
			z[j] = p.Logits[j]
		} else {
			z[j] = p.H[HAlpha0]/2*tr.KeyNorm0[j] + p.H[HBeta0]/2*tr.ValueNorm0[j]
		}
	}
	emLogSoftmax(p, z, tr.Pi0)

	// §4: key adaptation.
	sqNorms(p.Q, n, d, p.Ldq, qq)
	for j := range m {
		tr.Al[0][j] = p.H[HAlpha0]
	}
	emDist(n, m, d, p.Q, p.Ldq, p.Xi0, p.Ldk, qq, tr.KeyNorm0, tr.Dk[0])
	for t := range s.KeyIters {
		emGaussian(n, m, d, tr.Al[t], tr.Dk[t], nil, sbuf)
		addRows(n, m, sbuf, tr.Lp0)
		emSoftmax(p, sbuf, tr.Wk[t], p.QueryMask)
		emCentres(p, tr.Wk[t], p.Q, p.Ldq, d, p.Xi0, p.Ldk, tr.Al[t], p.H[HThetaXi], tr.Nk[t], tr.Ak[t], tr.Xi[t+1])
		sqNorms(tr.Xi[t+1], m, d, d, cc)
		emDist(n, m, d, p.Q, p.Ldq, tr.Xi[t+1], d, qq, cc, tr.Dk[t+1])
		if s.AdaptAlpha {
			emPrecision(p, tr.Wk[t], tr.Dk[t+1], tr.Nk[t], p.H[HAAlpha], p.H[HBAlpha], d, tr.Al[t], tr.Al[t+1])
		} else {
			copy(tr.Al[t+1], tr.Al[t])
		}
	}
	tk := s.KeyIters
	emGaussian(n, m, d, tr.Al[tk], tr.Dk[tk], nil, kf)

	// §5: value propagation from the annotated units, skipped when S is
	// empty.
	for j := range m {
		tr.Be[0][j] = p.H[HBeta0]
	}
	copy(tr.Lp[0], tr.Lp0)
	tr.Pr = EMPropagates(s, p)
	mu, ldmu, beta, logPi := p.Mu0, p.Ldv, tr.Be[0], tr.Lp0
	if tr.Pr {
		vv := sc[n+max(m, n)+nm : n+max(m, n)+nm+n]
		sqNorms(p.Vals, n, dv, p.Ldx, vv)
		logDen := T(math.Log(float64(p.H[HPi]*p.RealMemory + p.SizeS)))
		for t := range s.PropagateIters {
			muOld, ldOld := p.Mu0, p.Ldv
			if t > 0 {
				muOld, ldOld = tr.Mu[t], dv
			}
			sqNorms(muOld, m, dv, ldOld, cc)
			emDist(n, m, dv, p.Vals, p.Ldx, muOld, ldOld, vv, cc, tr.Ep[t])
			emGaussian(n, m, dv, tr.Be[t], tr.Ep[t], kf, sbuf)
			addRows(n, m, sbuf, tr.Lp[t])
			emSoftmax(p, sbuf, tr.Wp[t], p.InS)
			emCentres(p, tr.Wp[t], p.Vals, p.Ldx, dv, p.Mu0, p.Ldv, tr.Be[t], p.H[HThetaMu], tr.Np[t], tr.Bp[t], tr.Mu[t+1])
			if s.UpdateBeta(t) {
				sqNorms(tr.Mu[t+1], m, dv, dv, cc)
				emDist(n, m, dv, p.Vals, p.Ldx, tr.Mu[t+1], dv, vv, cc, tr.Ep2[t])
				emPrecision(p, tr.Wp[t], tr.Ep2[t], tr.Np[t], p.H[HABeta], p.H[HBBeta], dv, tr.Be[t], tr.Be[t+1])
			} else {
				copy(tr.Be[t+1], tr.Be[t])
			}
			if s.AdaptPi {
				for j := range m {
					if p.RealKey(j) {
						tr.Lp[t+1][j] = T(math.Log(float64(tr.Np[t][j]+p.H[HPi]))) - logDen
					} else {
						tr.Lp[t+1][j] = MaskNegInf
					}
				}
			} else {
				copy(tr.Lp[t+1], tr.Lp[t])
			}
		}
		tp := s.PropagateIters
		mu, ldmu, beta, logPi = tr.Mu[tp], dv, tr.Be[tp], tr.Lp[tp]
	}

	// §3: value inference of every query unit.
	s0 := kf
	addRows(n, m, s0, logPi)
	copy(sbuf, s0)
	emSoftmax(p, sbuf, tr.Wi[0], nil)
	gemmKernel(false, false, n, dv, m, 1, tr.Wi[0], m, mu, ldmu, 0, tr.R[0], dv, nil)
	if s.ValueIters > 0 {
		sqNorms(mu, m, dv, ldmu, cc)
	}
	for t := range s.ValueIters {
		sqNorms(tr.R[t], n, dv, dv, qq)
		emDist(n, m, dv, tr.R[t], dv, mu, ldmu, qq, cc, tr.F[t])
		emGaussian(n, m, dv, beta, tr.F[t], s0, sbuf)
		emSoftmax(p, sbuf, tr.Wi[t+1], nil)
		w, pz, r := tr.Wi[t+1], tr.Pz[t], tr.R[t+1]
		for i := range n {
			row := w[i*m : (i+1)*m]
			var z T
			for j := range row {
				z += row[j] * beta[j]
			}
			pz[i] = z
		}
		precise := sbuf // w_ij β_j
		for i := range n {
			for j := range m {
				precise[i*m+j] = w[i*m+j] * beta[j]
			}
		}
		gemmKernel(false, false, n, dv, m, 1, precise, m, mu, ldmu, 0, r, dv, nil)
		for i := range n {
			for k := range dv {
				r[i*dv+k] /= pz[i]
			}
		}
	}
}

// EMPropagates reports whether value propagation runs for p: it has
// annotated units and iterations (§5 skips the phase when S is empty).
func EMPropagates[T Float](s EMSpec, p *EMProblem[T]) bool {
	return p.InS != nil && p.SizeS > 0 && s.PropagateIters > 0
}

// EMScratchSize is the scratch one problem needs beyond its trace.
func EMScratchSize(n, m int) int { return n + max(m, n) + 2*n*m + n }

// addRows adds the row vector v [m] to every row of x [n×m].
func addRows[T Float](n, m int, x, v []T) {
	for i := range n {
		row := x[i*m : (i+1)*m]
		for j := range row {
			row[j] += v[j]
		}
	}
}

// emLogSoftmax sets z to its log-softmax over the real units, MaskNegInf
// at padded ones, and pi to the softmax (0 at padded ones).
func emLogSoftmax[T Float](p *EMProblem[T], z, pi []T) {
	top := math.Inf(-1)
	for j, x := range z {
		if p.RealKey(j) {
			top = math.Max(top, float64(x))
		}
	}
	var total float64
	for j, x := range z {
		if p.RealKey(j) {
			total += math.Exp(float64(x) - top)
		}
	}
	lse := T(top + math.Log(total))
	for j := range z {
		if p.RealKey(j) {
			z[j] -= lse
			pi[j] = T(math.Exp(float64(z[j])))
		} else {
			z[j], pi[j] = MaskNegInf, 0
		}
	}
}
