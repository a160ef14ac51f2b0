package graph

// emSeeds holds the gradients of one problem's outputs; nil ones are 0.
// Rows of padded query units are ignored (those outputs are 0).
type emSeeds[T float] struct {
	readout []T // [N×dv], rows strided by ldr
	ldr     int
	weights []T // [N×M]
	xi      []T // [M×d]
	alpha   []T // [M]
	mu      []T // [M×dv]
	beta    []T // [M]
	logPi   []T // [M]
}

// emGrads says where one problem's gradients go. They are added to what
// is there, so the caller zeroes them first. vals and logits are nil
// when the problem has none.
type emGrads[T float] struct {
	q, xi0, mu0, vals  []T
	ldq, ldk, ldv, ldx int
	logits             []T // [M]
	h                  *emHyper[T]
}

// emBackScratch is one worker's adjoint buffers, cut from one slice.
type emBackScratch[T float] struct {
	kf, s0, w, g, d, p []T // [N×M]
	r, r2, u           []T // [N×dv]
	rs, dP             []T // [N]
	cs, dn, lp0        []T // [M]
	xi, al, mu, be, lp [2][]T
	dA                 []T // [M×max(d, dv)]
}

func emBackScratchSize(n, m, d, dv int) int {
	return 6*n*m + 3*n*dv + 2*n + 3*m + 2*(m*d+m+m*dv+m+m) + m*max(d, dv)
}

func cutBackScratch[T float](n, m, d, dv int, buf []T) *emBackScratch[T] {
	take := func(k int) []T {
		x := buf[:k:k]
		buf = buf[k:]
		return x
	}
	nm := n * m
	b := &emBackScratch[T]{kf: take(nm), s0: take(nm), w: take(nm), g: take(nm), d: take(nm), p: take(nm),
		r: take(n * dv), r2: take(n * dv), u: take(n * dv), rs: take(n), dP: take(n), cs: take(m), dn: take(m), lp0: take(m)}
	for i := range 2 {
		b.xi[i], b.al[i], b.mu[i], b.be[i], b.lp[i] = take(m*d), take(m), take(m*dv), take(m), take(m)
	}
	b.dA = take(m * max(d, dv))
	return b
}

// emBackward adds to g the gradients of one problem's inputs, given the
// gradients of its outputs: the adjoint of emForward, step by step in
// reverse (em/MATH.md §3, then §5, §4 and §2).
func emBackward[T float](s EMSpec, p *emProblem[T], tr *emTrace[T], seed *emSeeds[T], g *emGrads[T], b *emBackScratch[T]) {
	if emBackwardC(s, p, tr, seed, g) { // float32 with AVX2: em.c, these steps in one call
		return
	}
	n, m, d, dv := p.n, p.m, p.d, p.dv
	nm := n * m
	dh := g.h
	for _, x := range [][]T{b.kf, b.s0, b.lp0, b.xi[0], b.al[0], b.mu[0], b.be[0], b.lp[0]} {
		clear(x)
	}
	addSeed := func(dst, src []T) {
		if src != nil {
			for i := range dst {
				dst[i] += src[i]
			}
		}
	}
	addSeed(b.xi[0], seed.xi)
	addSeed(b.al[0], seed.alpha)
	addSeed(b.mu[0], seed.mu)
	addSeed(b.be[0], seed.beta)
	if seed.logPi != nil {
		for j := range m {
			if p.realKey(j) {
				b.lp[0][j] += seed.logPi[j]
			}
		}
	}
	tk, tp, tv := s.KeyIters, s.PropagateIters, s.ValueIters
	mu, ldmu, beta := p.mu0, p.ldv, tr.be[0]
	if tr.pr {
		mu, ldmu, beta = tr.mu[tp], dv, tr.be[tp]
	}
	dmu, dbe, dlp := b.mu[0], b.be[0], b.lp[0]

	// §3 backward. The outputs are the last readout and weights, 0 at
	// padded query units.
	dr, drPrev := b.r, b.r2
	clear(dr)
	for i := range n {
		if seed.readout != nil && p.realQuery(i) {
			copy(dr[i*dv:(i+1)*dv], seed.readout[i*seed.ldr:i*seed.ldr+dv])
		}
	}
	addWeightSeed := func(dw []T) {
		if seed.weights == nil {
			return
		}
		for i := range n {
			if p.realQuery(i) {
				row, src := dw[i*m:(i+1)*m], seed.weights[i*m:(i+1)*m]
				for j := range row {
					row[j] += src[j]
				}
			}
		}
	}
	for t := tv; t >= 1; t-- {
		w, r, pz, rPrev, f := tr.wi[t], tr.r[t], tr.pz[t-1], tr.r[t-1], tr.f[t-1]
		// r_i = u_i / P_i with u = (w ⊙ β) μ and P_i = Σ_j w_ij β_j.
		du := b.u
		for i := range n {
			dri, ri, dui := dr[i*dv:(i+1)*dv], r[i*dv:(i+1)*dv], du[i*dv:(i+1)*dv]
			var dot T
			for k := range dri {
				dui[k] = dri[k] / pz[i]
				dot += dri[k] * ri[k]
			}
			b.dP[i] = -dot / pz[i]
		}
		dp := b.w
		gemmKernel(false, true, n, m, dv, 1, du, dv, mu, ldmu, 0, dp, m, nil)
		precise := b.p
		for i := range n {
			for j := range m {
				precise[i*m+j] = w[i*m+j] * beta[j]
			}
		}
		gemmKernel(true, false, m, dv, n, 1, precise, m, du, dv, 1, dmu, dv, nil)
		for i := range n {
			for j := range m {
				x := dp[i*m+j] + b.dP[i]
				dbe[j] += x * w[i*m+j]
				dp[i*m+j] = x * beta[j]
			}
		}
		if t == tv {
			addWeightSeed(dp)
		}
		emSoftmaxBack(n, m, w, dp)
		for k := range nm {
			b.s0[k] += dp[k]
		}
		emGaussianBack(n, m, dv, beta, f, dp, dbe, b.g)
		clear(drPrev)
		emDistBack(n, m, dv, rPrev, dv, mu, ldmu, f, b.g, drPrev, dv, dmu, dv, b.rs, b.cs)
		dr, drPrev = drPrev, dr
	}
	dw0 := b.w
	gemmKernel(false, true, n, m, dv, 1, dr, dv, mu, ldmu, 0, dw0, m, nil)
	gemmKernel(true, false, m, dv, n, 1, tr.wi[0], m, dr, dv, 1, dmu, dv, nil)
	if tv == 0 {
		addWeightSeed(dw0)
	}
	emSoftmaxBack(n, m, tr.wi[0], dw0)
	for i := range n {
		for j := range m {
			x := b.s0[i*m+j] + dw0[i*m+j]
			b.kf[i*m+j] += x
			dlp[j] += x
		}
	}

	// §5 backward.
	if tr.pr {
		emPropagateBack(s, p, tr, g, b)
	} else {
		addRowsInto(m, dv, dmu, g.mu0, g.ldv)
		for j := range m {
			dh[hBeta0] += dbe[j] // padded units too: their β is β⁰
		}
		addSeed(b.lp0, dlp)
	}

	// §4 backward.
	dD := b.d
	dxi, dal := b.xi[0], b.al[0]
	emGaussianBack(n, m, d, tr.al[tk], tr.dk[tk], b.kf, dal, dD)
	for t := tk - 1; t >= 0; t-- {
		w, nn, a, xiNew, alOld, alNew, dNew := tr.wk[t], tr.nk[t], tr.ak[t], tr.xi[t+1], tr.al[t], tr.al[t+1], tr.dk[t+1]
		dxiOld, dalOld, dw, dn := b.xi[1], b.al[1], b.w, b.dn
		clear(dxiOld)
		clear(dalOld)
		clear(dw)
		clear(dn)
		if s.AdaptAlpha {
			emPrecisionBack(p, w, dNew, nn, dal, alNew, p.h[hBAlpha], d, &dh[hAAlpha], &dh[hBAlpha], dn, dw, dD, dalOld)
		} else {
			copy(dalOld, dal)
		}
		emDistBack(n, m, d, p.q, p.ldq, xiNew, d, dNew, dD, g.q, g.ldq, dxi, d, b.rs, b.cs)
		emCentresBack(p, w, p.q, p.ldq, g.q, g.ldq, d, p.xi0, p.ldk, g.xi0, g.ldk, alOld, p.h[hThetaXi], nn, a, xiNew,
			dxi, &dh[hThetaXi], dalOld, dn, dw, b.dA)
		for i := range n {
			for j := range m {
				dw[i*m+j] += dn[j]
			}
		}
		emSoftmaxBack(n, m, w, dw)
		for i := range n {
			for j := range m {
				b.lp0[j] += dw[i*m+j]
			}
		}
		emGaussianBack(n, m, d, alOld, tr.dk[t], dw, dalOld, dD)
		b.xi[0], b.xi[1] = dxiOld, dxi
		b.al[0], b.al[1] = dalOld, dal
		dxi, dal = dxiOld, dalOld
	}
	emDistBack(n, m, d, p.q, p.ldq, p.xi0, p.ldk, tr.dk[0], dD, g.q, g.ldq, g.xi0, g.ldk, b.rs, b.cs)
	addRowsInto(m, d, dxi, g.xi0, g.ldk)
	for j := range m {
		dh[hAlpha0] += dal[j] // padded units too: their α is α⁰
	}

	// §2 backward: log π⁰ = z − logsumexp(z) over the real units.
	var total T
	for j := range m {
		if p.realKey(j) {
			total += b.lp0[j]
		}
	}
	for j := range m {
		if !p.realKey(j) {
			continue
		}
		dz := b.lp0[j] - tr.pi0[j]*total
		if p.logits != nil {
			g.logits[j] += dz
			continue
		}
		dh[hAlpha0] += dz * tr.keyNorm0[j] / 2
		dh[hBeta0] += dz * tr.valueNorm0[j] / 2
		for k := range d {
			g.xi0[j*g.ldk+k] += dz * p.h[hAlpha0] * p.xi0[j*p.ldk+k]
		}
		for k := range dv {
			g.mu0[j*g.ldv+k] += dz * p.h[hBeta0] * p.mu0[j*p.ldv+k]
		}
	}
}

// emPropagateBack is the §5 part of emBackward: from the adjoints of the
// propagated μ, β and log π (b.mu[0], b.be[0], b.lp[0]) back to μ⁰, β⁰,
// the initial log π (added to b.lp0), the annotated values, the key term
// (added to b.kf) and the hyperparameters.
func emPropagateBack[T float](s EMSpec, p *emProblem[T], tr *emTrace[T], g *emGrads[T], b *emBackScratch[T]) {
	n, m, dv := p.n, p.m, p.dv
	dh := g.h
	dmu, dbe, dlp := b.mu[0], b.be[0], b.lp[0]
	piCount := p.h[hPi]*p.realMemory + p.sizeS
	for t := s.PropagateIters - 1; t >= 0; t-- {
		w, nn, bv, muNew, beOld, beNew := tr.wp[t], tr.np[t], tr.bp[t], tr.mu[t+1], tr.be[t], tr.be[t+1]
		muOld, ldOld := p.mu0, p.ldv
		if t > 0 {
			muOld, ldOld = tr.mu[t], dv
		}
		dmuOld, dbeOld, dlpOld, dw, dn := b.mu[1], b.be[1], b.lp[1], b.w, b.dn
		for _, x := range [][]T{dmuOld, dbeOld, dlpOld, dw, dn} {
			clear(x)
		}
		if s.AdaptPi {
			// log π_j = log(n_j + θ_π − 1) − log(|S| + M(θ_π − 1))
			var total T
			for j := range m {
				if p.realKey(j) {
					c := dlp[j] / (nn[j] + p.h[hPi])
					dn[j] += c
					dh[hPi] += c
					total += dlp[j]
				}
			}
			dh[hPi] -= total * p.realMemory / piCount
		} else {
			copy(dlpOld, dlp)
		}
		if s.updateBeta(t) {
			clear(b.g)
			emPrecisionBack(p, w, tr.ep2[t], nn, dbe, beNew, p.h[hBBeta], dv, &dh[hABeta], &dh[hBBeta], dn, dw, b.g, dbeOld)
			emDistBack(n, m, dv, p.vals, p.ldx, muNew, dv, tr.ep2[t], b.g, g.vals, g.ldx, dmu, dv, b.rs, b.cs)
		} else {
			copy(dbeOld, dbe)
		}
		emCentresBack(p, w, p.vals, p.ldx, g.vals, g.ldx, dv, p.mu0, p.ldv, g.mu0, g.ldv, beOld, p.h[hThetaMu], nn, bv, muNew,
			dmu, &dh[hThetaMu], dbeOld, dn, dw, b.dA)
		for i := range n {
			for j := range m {
				dw[i*m+j] += dn[j]
			}
		}
		emSoftmaxBack(n, m, w, dw)
		for i := range n {
			for j := range m {
				b.kf[i*m+j] += dw[i*m+j]
				dlpOld[j] += dw[i*m+j]
			}
		}
		emGaussianBack(n, m, dv, beOld, tr.ep[t], dw, dbeOld, b.g)
		emDistBack(n, m, dv, p.vals, p.ldx, muOld, ldOld, tr.ep[t], b.g, g.vals, g.ldx, dmuOld, dv, b.rs, b.cs)
		b.mu[0], b.mu[1] = dmuOld, dmu
		b.be[0], b.be[1] = dbeOld, dbe
		b.lp[0], b.lp[1] = dlpOld, dlp
		dmu, dbe, dlp = dmuOld, dbeOld, dlpOld
	}
	addRowsInto(m, dv, dmu, g.mu0, g.ldv)
	for j := range m {
		dh[hBeta0] += dbe[j] // padded units too: their β is β⁰
		if p.realKey(j) {
			b.lp0[j] += dlp[j]
		}
	}
}

// emPrecisionBack adds the gradient through λ_j = (a − 1 + (k/2) n_j) /
// (b + ½ Σ_i w_ij D_ij) (emPrecision) of the real units, given dLambda:
// to a − 1 and b, to n, to the weights (dw) and to the distances (dd); a
// padded unit, which keeps its precision, passes dLambda on to dOld.
func emPrecisionBack[T float](p *emProblem[T], w, dist, nn, dLambda, lambda []T, bRate T, k int, dAExtra, dB *T, dn, dw, dd, dOld []T) {
	n, m := p.n, p.m
	for j := range m {
		if !p.realKey(j) {
			dOld[j] += dLambda[j] // a padded unit keeps its precision
			continue
		}
		var spread T
		for i := range n {
			spread += w[i*m+j] * dist[i*m+j]
		}
		den := bRate + spread/2
		dNum := dLambda[j] / den
		dDen := -dLambda[j] * lambda[j] / den
		*dAExtra += dNum
		dn[j] += T(k) / 2 * dNum
		*dB += dDen
		dSpread := dDen / 2
		for i := range n {
			dw[i*m+j] += dSpread * dist[i*m+j]
			dd[i*m+j] += dSpread * w[i*m+j]
		}
	}
}

// emCentresBack adds the gradient through c_j = (θ c⁰_j + λ_j A_j) /
// (θ + λ_j n_j), A = wᵀx (emCentres), given dc: to θ, c⁰ (dc0), λ, n, the
// weights (dw) and x (dx, may be nil). dA is scratch [m×width].
func emCentresBack[T float](p *emProblem[T], w, x []T, ldx int, dx []T, lddx, width int, c0 []T, ldc0 int, dc0 []T, lddc0 int,
	lambda []T, theta T, nn, a, c, dc []T, dTheta *T, dLambda, dn, dw, dA []T) {
	n, m := p.n, p.m
	dA = dA[:m*width]
	for j := range m {
		dcj, daj, dc0j := dc[j*width:(j+1)*width], dA[j*width:(j+1)*width], dc0[j*lddc0:j*lddc0+width]
		if !p.realKey(j) {
			for k := range dcj {
				dc0j[k] += dcj[k] // a padded unit keeps c⁰_j
			}
			clear(daj)
			continue
		}
		cj, c0j, aj := c[j*width:(j+1)*width], c0[j*ldc0:j*ldc0+width], a[j*width:(j+1)*width]
		den := theta + lambda[j]*nn[j]
		var dot T
		for k := range dcj {
			dot += dcj[k] * cj[k]
		}
		dDen := -dot / den
		for k := range dcj {
			dNum := dcj[k] / den
			*dTheta += dNum * c0j[k]
			dc0j[k] += theta * dNum
			dLambda[j] += dNum * aj[k]
			daj[k] = lambda[j] * dNum
		}
		*dTheta += dDen
		dLambda[j] += dDen * nn[j]
		dn[j] += dDen * lambda[j]
	}
	gemmKernel(false, true, n, m, width, 1, x, ldx, dA, width, 1, dw, m, nil)
	if dx != nil {
		gemmKernel(false, false, n, width, m, 1, w, m, dA, width, 1, dx, lddx, nil)
	}
}

// addRowsInto adds x [rows×w] (dense) into y, whose rows are strided by ld.
func addRowsInto[T float](rows, w int, x, y []T, ld int) {
	for i := range rows {
		yi, xi := y[i*ld:i*ld+w], x[i*w:(i+1)*w]
		for k := range yi {
			yi[k] += xi[k]
		}
	}
}
