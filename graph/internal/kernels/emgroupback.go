package kernels

// EMSeeds holds the gradients of one problem's outputs; nil ones are 0.
// Rows of padded query units are ignored (those outputs are 0).
type EMSeeds[T Float] struct {
	Readout []T // [N×dv], rows strided by ldr
	Ldr     int
	Weights []T // [N×M]
	Xi      []T // [M×d]
	Alpha   []T // [M]
	Mu      []T // [M×dv]
	Beta    []T // [M]
	LogPi   []T // [M]
}

// EMGrads says where one problem's gradients go. They are added to what
// is there, so the caller zeroes them first (or sets Zero). vals and
// logits are nil when the problem has none.
type EMGrads[T Float] struct {
	Q, Xi0, Mu0, Vals  []T
	Ldq, Ldk, Ldv, Ldx int
	Logits             []T // [M]
	H                  *EMHyper[T]
	// Zero asks EMBackward to zero the rows of Q, Xi0, Mu0 and Vals
	// before it adds to them (not Logits or H), so that a caller need
	// not: em.c zeroes them in the call that fills them, where a row of
	// a narrow head is one store, rather than one Go clear a row.
	Zero bool
	// AddReadoutSeed asks em.c's backward to add the readout's seed rows
	// to Q's after the rest (the residual connection's q gradient, as
	// graph's emAddRows adds them), in the call that made Q's rows; the
	// Go path ignores it (its caller adds them).
	AddReadoutSeed bool
}

// EMBackScratch is one worker's adjoint buffers, cut from one slice.
type EMBackScratch[T Float] struct {
	Kf, S0, W, G, D, P []T // [N×M]
	R, R2, U           []T // [N×dv]
	Rs, DP             []T // [N]
	Cs, Dn, Lp0        []T // [M]
	Xi, Al, Mu, Be, Lp [2][]T
	DA                 []T // [M×max(d, dv)]
}

func EMBackScratchSize(n, m, d, dv int) int {
	return 6*n*m + 3*n*dv + 2*n + 3*m + 2*(m*d+m+m*dv+m+m) + m*max(d, dv)
}

func CutBackScratch[T Float](n, m, d, dv int, buf []T) *EMBackScratch[T] {
	take := func(k int) []T {
		x := buf[:k:k]
		buf = buf[k:]
		return x
	}
	nm := n * m
	b := &EMBackScratch[T]{Kf: take(nm), S0: take(nm), W: take(nm), G: take(nm), D: take(nm), P: take(nm),
		R: take(n * dv), R2: take(n * dv), U: take(n * dv), Rs: take(n), DP: take(n), Cs: take(m), Dn: take(m), Lp0: take(m)}
	for i := range 2 {
		b.Xi[i], b.Al[i], b.Mu[i], b.Be[i], b.Lp[i] = take(m*d), take(m), take(m*dv), take(m), take(m)
	}
	b.DA = take(m * max(d, dv))
	return b
}

// EMBackward adds to g the gradients of one problem's inputs, given the
// gradients of its outputs: the adjoint of EMForward, step by step in
// reverse (em/MATH.md §3, then §5, §4 and §2).
func EMBackward[T Float](s EMSpec, p *EMProblem[T], tr *EMTrace[T], seed *EMSeeds[T], g *EMGrads[T], b *EMBackScratch[T]) {
	if EMBackwardC(s, p, tr, seed, g) { // float32 with AVX2: em.c, these steps in one call
		return
	}
	n, m, d, dv := p.N, p.M, p.D, p.Dv
	nm := n * m
	dh := g.H
	if g.Zero {
		zeroRows(g.Q, n, d, g.Ldq)
		zeroRows(g.Xi0, m, d, g.Ldk)
		zeroRows(g.Mu0, m, dv, g.Ldv)
		if g.Vals != nil {
			zeroRows(g.Vals, n, dv, g.Ldx)
		}
	}
	for _, x := range [][]T{b.Kf, b.S0, b.Lp0, b.Xi[0], b.Al[0], b.Mu[0], b.Be[0], b.Lp[0]} {
		clear(x)
	}
	addSeed := func(dst, src []T) {
		if src != nil {
			for i := range dst {
				dst[i] += src[i]
			}
		}
	}
	addSeed(b.Xi[0], seed.Xi)
	addSeed(b.Al[0], seed.Alpha)
	addSeed(b.Mu[0], seed.Mu)
	addSeed(b.Be[0], seed.Beta)
	if seed.LogPi != nil {
		for j := range m {
			if p.RealKey(j) {
				b.Lp[0][j] += seed.LogPi[j]
			}
		}
	}
	tk, tp, tv := s.KeyIters, s.PropagateIters, s.ValueIters
	mu, ldmu, beta := p.Mu0, p.Ldv, tr.Be[0]
	if tr.Pr {
		mu, ldmu, beta = tr.Mu[tp], dv, tr.Be[tp]
	}
	dmu, dbe, dlp := b.Mu[0], b.Be[0], b.Lp[0]

	// §3 backward. The outputs are the last readout and weights, 0 at
	// padded query units.
	dr, drPrev := b.R, b.R2
	clear(dr)
	for i := range n {
		if seed.Readout != nil && p.RealQuery(i) {
			copy(dr[i*dv:(i+1)*dv], seed.Readout[i*seed.Ldr:i*seed.Ldr+dv])
		}
	}
	addWeightSeed := func(dw []T) {
		if seed.Weights == nil {
			return
		}
		for i := range n {
			if p.RealQuery(i) {
				row, src := dw[i*m:(i+1)*m], seed.Weights[i*m:(i+1)*m]
				for j := range row {
					row[j] += src[j]
				}
			}
		}
	}
	for t := tv; t >= 1; t-- {
		w, r, pz, rPrev, f := tr.Wi[t], tr.R[t], tr.Pz[t-1], tr.R[t-1], tr.F[t-1]
		// r_i = u_i / P_i with u = (w ⊙ β) μ and P_i = Σ_j w_ij β_j.
		du := b.U
		for i := range n {
			dri, ri, dui := dr[i*dv:(i+1)*dv], r[i*dv:(i+1)*dv], du[i*dv:(i+1)*dv]
			var dot T
			for k := range dri {
				dui[k] = dri[k] / pz[i]
				dot += dri[k] * ri[k]
			}
			b.DP[i] = -dot / pz[i]
		}
		dp := b.W
		gemmKernel(false, true, n, m, dv, 1, du, dv, mu, ldmu, 0, dp, m, nil)
		precise := b.P
		for i := range n {
			for j := range m {
				precise[i*m+j] = w[i*m+j] * beta[j]
			}
		}
		gemmKernel(true, false, m, dv, n, 1, precise, m, du, dv, 1, dmu, dv, nil)
		for i := range n {
			for j := range m {
				x := dp[i*m+j] + b.DP[i]
				dbe[j] += x * w[i*m+j]
				dp[i*m+j] = x * beta[j]
			}
		}
		if t == tv {
			addWeightSeed(dp)
		}
		emSoftmaxBack(n, m, w, dp)
		for k := range nm {
			b.S0[k] += dp[k]
		}
		emGaussianBack(n, m, dv, beta, f, dp, dbe, b.G)
		clear(drPrev)
		emDistBack(n, m, dv, rPrev, dv, mu, ldmu, f, b.G, drPrev, dv, dmu, dv, b.Rs, b.Cs)
		dr, drPrev = drPrev, dr
	}
	dw0 := b.W
	gemmKernel(false, true, n, m, dv, 1, dr, dv, mu, ldmu, 0, dw0, m, nil)
	gemmKernel(true, false, m, dv, n, 1, tr.Wi[0], m, dr, dv, 1, dmu, dv, nil)
	if tv == 0 {
		addWeightSeed(dw0)
	}
	emSoftmaxBack(n, m, tr.Wi[0], dw0)
	for i := range n {
		for j := range m {
			x := b.S0[i*m+j] + dw0[i*m+j]
			b.Kf[i*m+j] += x
			dlp[j] += x
		}
	}

	// §5 backward.
	if tr.Pr {
		emPropagateBack(s, p, tr, g, b)
	} else {
		addRowsInto(m, dv, dmu, g.Mu0, g.Ldv)
		for j := range m {
			dh[HBeta0] += dbe[j] // padded units too: their β is β⁰
		}
		addSeed(b.Lp0, dlp)
	}

	// §4 backward.
	dD := b.D
	dxi, dal := b.Xi[0], b.Al[0]
	emGaussianBack(n, m, d, tr.Al[tk], tr.Dk[tk], b.Kf, dal, dD)
	for t := tk - 1; t >= 0; t-- {
		w, nn, a, xiNew, alOld, alNew, dNew := tr.Wk[t], tr.Nk[t], tr.Ak[t], tr.Xi[t+1], tr.Al[t], tr.Al[t+1], tr.Dk[t+1]
		dxiOld, dalOld, dw, dn := b.Xi[1], b.Al[1], b.W, b.Dn
		clear(dxiOld)
		clear(dalOld)
		clear(dw)
		clear(dn)
		if s.AdaptAlpha {
			emPrecisionBack(p, w, dNew, nn, dal, alNew, p.H[HBAlpha], d, &dh[HAAlpha], &dh[HBAlpha], dn, dw, dD, dalOld)
		} else {
			copy(dalOld, dal)
		}
		emDistBack(n, m, d, p.Q, p.Ldq, xiNew, d, dNew, dD, g.Q, g.Ldq, dxi, d, b.Rs, b.Cs)
		emCentresBack(p, w, p.Q, p.Ldq, g.Q, g.Ldq, d, p.Xi0, p.Ldk, g.Xi0, g.Ldk, alOld, p.H[HThetaXi], nn, a, xiNew,
			dxi, &dh[HThetaXi], dalOld, dn, dw, b.DA)
		for i := range n {
			for j := range m {
				dw[i*m+j] += dn[j]
			}
		}
		emSoftmaxBack(n, m, w, dw)
		for i := range n {
			for j := range m {
				b.Lp0[j] += dw[i*m+j]
			}
		}
		emGaussianBack(n, m, d, alOld, tr.Dk[t], dw, dalOld, dD)
		b.Xi[0], b.Xi[1] = dxiOld, dxi
		b.Al[0], b.Al[1] = dalOld, dal
		dxi, dal = dxiOld, dalOld
	}
	emDistBack(n, m, d, p.Q, p.Ldq, p.Xi0, p.Ldk, tr.Dk[0], dD, g.Q, g.Ldq, g.Xi0, g.Ldk, b.Rs, b.Cs)
	addRowsInto(m, d, dxi, g.Xi0, g.Ldk)
	for j := range m {
		dh[HAlpha0] += dal[j] // padded units too: their α is α⁰
	}

	// §2 backward: log π⁰ = z − logsumexp(z) over the real units.
	var total T
	for j := range m {
		if p.RealKey(j) {
			total += b.Lp0[j]
		}
	}
	for j := range m {
		if !p.RealKey(j) {
			continue
		}
		dz := b.Lp0[j] - tr.Pi0[j]*total
		if p.Logits != nil {
			g.Logits[j] += dz
			continue
		}
		dh[HAlpha0] += dz * tr.KeyNorm0[j] / 2
		dh[HBeta0] += dz * tr.ValueNorm0[j] / 2
		for k := range d {
			g.Xi0[j*g.Ldk+k] += dz * p.H[HAlpha0] * p.Xi0[j*p.Ldk+k]
		}
		for k := range dv {
			g.Mu0[j*g.Ldv+k] += dz * p.H[HBeta0] * p.Mu0[j*p.Ldv+k]
		}
	}
}

// emPropagateBack is the §5 part of EMBackward: from the adjoints of the
// propagated μ, β and log π (b.mu[0], b.be[0], b.lp[0]) back to μ⁰, β⁰,
// the initial log π (added to b.lp0), the annotated values, the key term
// (added to b.kf) and the hyperparameters.
func emPropagateBack[T Float](s EMSpec, p *EMProblem[T], tr *EMTrace[T], g *EMGrads[T], b *EMBackScratch[T]) {
	n, m, dv := p.N, p.M, p.Dv
	dh := g.H
	dmu, dbe, dlp := b.Mu[0], b.Be[0], b.Lp[0]
	piCount := p.H[HPi]*p.RealMemory + p.SizeS
	for t := s.PropagateIters - 1; t >= 0; t-- {
		w, nn, bv, muNew, beOld, beNew := tr.Wp[t], tr.Np[t], tr.Bp[t], tr.Mu[t+1], tr.Be[t], tr.Be[t+1]
		muOld, ldOld := p.Mu0, p.Ldv
		if t > 0 {
			muOld, ldOld = tr.Mu[t], dv
		}
		dmuOld, dbeOld, dlpOld, dw, dn := b.Mu[1], b.Be[1], b.Lp[1], b.W, b.Dn
		for _, x := range [][]T{dmuOld, dbeOld, dlpOld, dw, dn} {
			clear(x)
		}
		if s.AdaptPi {
			// log π_j = log(n_j + θ_π − 1) − log(|S| + M(θ_π − 1))
			var total T
			for j := range m {
				if p.RealKey(j) {
					c := dlp[j] / (nn[j] + p.H[HPi])
					dn[j] += c
					dh[HPi] += c
					total += dlp[j]
				}
			}
			dh[HPi] -= total * p.RealMemory / piCount
		} else {
			copy(dlpOld, dlp)
		}
		if s.UpdateBeta(t) {
			clear(b.G)
			emPrecisionBack(p, w, tr.Ep2[t], nn, dbe, beNew, p.H[HBBeta], dv, &dh[HABeta], &dh[HBBeta], dn, dw, b.G, dbeOld)
			emDistBack(n, m, dv, p.Vals, p.Ldx, muNew, dv, tr.Ep2[t], b.G, g.Vals, g.Ldx, dmu, dv, b.Rs, b.Cs)
		} else {
			copy(dbeOld, dbe)
		}
		emCentresBack(p, w, p.Vals, p.Ldx, g.Vals, g.Ldx, dv, p.Mu0, p.Ldv, g.Mu0, g.Ldv, beOld, p.H[HThetaMu], nn, bv, muNew,
			dmu, &dh[HThetaMu], dbeOld, dn, dw, b.DA)
		for i := range n {
			for j := range m {
				dw[i*m+j] += dn[j]
			}
		}
		emSoftmaxBack(n, m, w, dw)
		for i := range n {
			for j := range m {
				b.Kf[i*m+j] += dw[i*m+j]
				dlpOld[j] += dw[i*m+j]
			}
		}
		emGaussianBack(n, m, dv, beOld, tr.Ep[t], dw, dbeOld, b.G)
		emDistBack(n, m, dv, p.Vals, p.Ldx, muOld, ldOld, tr.Ep[t], b.G, g.Vals, g.Ldx, dmuOld, dv, b.Rs, b.Cs)
		b.Mu[0], b.Mu[1] = dmuOld, dmu
		b.Be[0], b.Be[1] = dbeOld, dbe
		b.Lp[0], b.Lp[1] = dlpOld, dlp
		dmu, dbe, dlp = dmuOld, dbeOld, dlpOld
	}
	addRowsInto(m, dv, dmu, g.Mu0, g.Ldv)
	for j := range m {
		dh[HBeta0] += dbe[j] // padded units too: their β is β⁰
		if p.RealKey(j) {
			b.Lp0[j] += dlp[j]
		}
	}
}

// emPrecisionBack adds the gradient through λ_j = (a − 1 + (k/2) n_j) /
// (b + ½ Σ_i w_ij D_ij) (emPrecision) of the real units, given dLambda:
// to a − 1 and b, to n, to the weights (dw) and to the distances (dd); a
// padded unit, which keeps its precision, passes dLambda on to dOld.
func emPrecisionBack[T Float](p *EMProblem[T], w, dist, nn, dLambda, lambda []T, bRate T, k int, dAExtra, dB *T, dn, dw, dd, dOld []T) {
	n, m := p.N, p.M
	for j := range m {
		if !p.RealKey(j) {
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
func emCentresBack[T Float](p *EMProblem[T], w, x []T, ldx int, dx []T, lddx, width int, c0 []T, ldc0 int, dc0 []T, lddc0 int,
	lambda []T, theta T, nn, a, c, dc []T, dTheta *T, dLambda, dn, dw, dA []T) {
	n, m := p.N, p.M
	dA = dA[:m*width]
	for j := range m {
		dcj, daj, dc0j := dc[j*width:(j+1)*width], dA[j*width:(j+1)*width], dc0[j*lddc0:j*lddc0+width]
		if !p.RealKey(j) {
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
func addRowsInto[T Float](rows, w int, x, y []T, ld int) {
	for i := range rows {
		yi, xi := y[i*ld:i*ld+w], x[i*w:(i+1)*w]
		for k := range yi {
			yi[k] += xi[k]
		}
	}
}

// zeroRows zeroes rows×w values of x whose rows are strided by ld.
func zeroRows[T Float](x []T, rows, w, ld int) {
	for i := range rows {
		clear(x[i*ld : i*ld+w])
	}
}
