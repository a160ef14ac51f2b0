package kernels

// EMPass32 is one pass of float32 EM problems laid out as graph's EM op
// holds them, for EMForwardPass32 and EMBackwardPass32: B batch elements
// of H problems (heads) each, problem g = b·H + h. Each offset is in
// floats: problem (b, h) reads its queries at Q[b·QB + h·QH:] (rows Ldq
// apart), its keys at Xi0[b·KB + h·KH:] (Ldk), its values at
// Mu0[b·VB + h·VH:] (Ldv), the masks' rows b (KeyMask [B·M],
// QueryMask [B·N], or nil), hyperparameter i at Hyper[i][h] (nil: unused,
// 0) and its trace at Trace[g·EMTraceSize(…):]. The forward writes the
// readout with the residual connection, q + r (EMProblem.Out), at
// Out[b·OB + h·OH:] (Ldo). The backward reads the readout's gradient at
// Seed[b·SB + h·SH:] (Ldr), writes the gradients of the queries, keys and
// values at GQ[b·GQB + h·GQH:] (GLdq), GXi0[b·GKB + h·GKH:] (GLdk) and
// GMu0[b·GVB + h·GVH:] (GLdv), zeroing each problem's rows first and
// adding the seed to GQ (EMGrads.Zero, EMGrads.AddReadoutSeed), and
// problem g's hyperparameter gradients into GH[g]. No problem has
// annotated units, free-prior logits, or outputs but the readout.
type EMPass32 struct {
	Spec                         EMSpec
	B, H, N, M, D, Dv            int
	Q, Xi0, Mu0                  []float32
	Ldq, Ldk, Ldv                int
	QB, QH, KB, KH, VB, VH       int
	KeyMask, QueryMask           []float32
	Hyper                        [EMHyperCount][]float32
	Trace                        []float32
	Out                          []float32
	Ldo, OB, OH                  int
	Seed                         []float32
	Ldr, SB, SH                  int
	GQ, GXi0, GMu0               []float32
	GLdq, GLdk, GLdv             int
	GQB, GQH, GKB, GKH, GVB, GVH int
	GH                           []EMHyper[float32]

	// Scratch is the workers' scratch, grown as needed and kept by the
	// caller from one pass to the next.
	Scratch []float32
}

// spans reports whether x holds every problem's rows×w block that starts
// at b·sb + h·sh with rows ld apart, for b < B and h < H.
func (p *EMPass32) spans(x []float32, sb, sh, rows, ld, w int) bool {
	if p.B == 0 || rows == 0 || w == 0 {
		return true
	}
	if sb < 0 || sh < 0 || ld < w || rows < 0 {
		return false
	}
	return (p.B-1)*sb+(p.H-1)*sh+(rows-1)*ld+w <= len(x)
}

// fits reports whether every slice p's problems read or write is long
// enough: the C pass indexes them without bounds.
func (p *EMPass32) fits(bwd bool) bool {
	if p.B < 1 || p.H < 1 || p.N < 1 || p.M < 1 || p.D < 1 || p.Dv != p.D {
		return false
	}
	size := EMTraceSize(p.Spec, p.N, p.M, p.D, p.Dv)
	ok := p.spans(p.Q, p.QB, p.QH, p.N, p.Ldq, p.D) && p.spans(p.Xi0, p.KB, p.KH, p.M, p.Ldk, p.D) &&
		p.spans(p.Mu0, p.VB, p.VH, p.M, p.Ldv, p.Dv) && len(p.Trace) >= p.B*p.H*size &&
		(p.KeyMask == nil || len(p.KeyMask) >= p.B*p.M) && (p.QueryMask == nil || len(p.QueryMask) >= p.B*p.N)
	for _, h := range p.Hyper {
		ok = ok && (h == nil || len(h) >= p.H)
	}
	if !bwd {
		return ok && p.spans(p.Out, p.OB, p.OH, p.N, p.Ldo, p.Dv)
	}
	return ok && p.spans(p.Seed, p.SB, p.SH, p.N, p.Ldr, p.Dv) && p.spans(p.GQ, p.GQB, p.GQH, p.N, p.GLdq, p.D) &&
		p.spans(p.GXi0, p.GKB, p.GKH, p.M, p.GLdk, p.D) && p.spans(p.GMu0, p.GVB, p.GVH, p.M, p.GLdv, p.Dv) &&
		len(p.GH) >= p.B*p.H
}
