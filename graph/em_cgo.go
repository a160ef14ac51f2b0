//go:build cgo && !purego

package graph

// int pf_em_forward(const int *iv, const float *fv, const float *q, const float *xi0, const float *mu0,
//                   const float *vals, const float *km, const float *qm, const float *in_s, const float *logits,
//                   float *trace, float *scr, long ns);
// int pf_em_backward(const int *iv, const float *fv, const float *q, const float *xi0, const float *mu0,
//                    const float *vals, const float *km, const float *qm, const float *in_s, const float *logits,
//                    float *trace, const float *sr, const float *sw, const float *sxi, const float *sal,
//                    const float *smu, const float *sbe, const float *slp, float *gq, float *gxi0, float *gmu0,
//                    float *gvals, float *glogits, float *gh, const int *gld, float *scr, long ns);
import "C"

import (
	"fmt"
	"sync"
	"unsafe"
)

// emUseC selects em.c for float32 problems when the CPU has AVX2 and FMA;
// tests turn it off to run the Go path, the reference, beside it.
var emUseC = true

// emCAvailable reports whether float32 problems run in em.c.
func emCAvailable() bool { return emUseC && hasAVX2() != 0 }

// emCCall is one call's scalars and scratch, pooled: a problem is small,
// and allocating its scratch (or letting the scalars escape) would cost a
// visible part of it.
type emCCall struct {
	iv  [16]C.int
	fv  [11]C.float
	gld [4]C.int
	buf []float32
}

var emCCalls = sync.Pool{New: func() any { return new(emCCall) }}

// emCScratchSize is the scratch em.c asks of either pass (it checks, and
// fails the call rather than run past it): the forward's N + max(M, N) +
// 2NM + N + M·max(d, dv) + 3M, the backward's emBackScratchSize with its
// transposes and per-unit columns.
func emCScratchSize(n, m, d, dv int) int {
	return 6*n*m + 3*n*dv + 4*n + max(m, n) + 2*m*d + 2*m*dv + 2*m*max(d, dv) + 16*m
}

// setup fills c's scalars for p (em.c's unpack has their order) and sizes
// its scratch.
func (c *emCCall) setup(s EMSpec, p *emProblem[float32], pr bool) {
	c.iv = [16]C.int{C.int(p.n), C.int(p.m), C.int(p.d), C.int(p.dv), C.int(p.ldq), C.int(p.ldk), C.int(p.ldv), C.int(p.ldx),
		C.int(s.KeyIters), C.int(s.PropagateIters), C.int(s.ValueIters), cbool(s.AdaptAlpha), cbool(s.AdaptBeta), cbool(s.AdaptPi), cbool(pr)}
	for i, x := range p.h {
		c.fv[i] = C.float(x)
	}
	c.fv[9], c.fv[10] = C.float(p.sizeS), C.float(p.realMemory)
	if size := emCScratchSize(p.n, p.m, p.d, p.dv); len(c.buf) < size {
		c.buf = make([]float32, size)
	}
}

// cptr is x's first element for C, or NULL for an empty slice.
func cptr(x []float32) *C.float {
	if len(x) == 0 {
		return nil
	}
	return (*C.float)(unsafe.Pointer(&x[0]))
}

// emForwardC runs emForward in em.c for a float32 problem and reports
// whether it did. The trace is the flat buffer cutTrace cut tr from: its
// first part, lp0, starts it.
func emForwardC[T float](s EMSpec, p *emProblem[T], tr *emTrace[T]) bool {
	p32, ok := any(p).(*emProblem[float32])
	if !ok || !emCAvailable() {
		return false
	}
	tr32 := any(tr).(*emTrace[float32])
	tr32.pr = emPropagates(s, p32)
	c := emCCalls.Get().(*emCCall)
	c.setup(s, p32, tr32.pr)
	rc := C.pf_em_forward(&c.iv[0], &c.fv[0], cptr(p32.q), cptr(p32.xi0), cptr(p32.mu0), cptr(p32.vals),
		cptr(p32.keyMask), cptr(p32.queryMask), cptr(p32.inS), cptr(p32.logits), cptr(tr32.lp0),
		cptr(c.buf), C.long(len(c.buf)))
	emCCalls.Put(c)
	if rc != 0 {
		panic(fmt.Sprintf("em.c forward: scratch of %d too small", len(c.buf)))
	}
	return true
}

// emBackwardC runs emBackward in em.c for a float32 problem and reports
// whether it did; tr.pr says whether propagation ran, as for emBackward.
func emBackwardC[T float](s EMSpec, p *emProblem[T], tr *emTrace[T], seed *emSeeds[T], g *emGrads[T]) bool {
	p32, ok := any(p).(*emProblem[float32])
	if !ok || !emCAvailable() {
		return false
	}
	tr32, s32, g32 := any(tr).(*emTrace[float32]), any(seed).(*emSeeds[float32]), any(g).(*emGrads[float32])
	c := emCCalls.Get().(*emCCall)
	c.setup(s, p32, tr32.pr)
	c.iv[15] = C.int(s32.ldr)
	c.gld = [4]C.int{C.int(g32.ldq), C.int(g32.ldk), C.int(g32.ldv), C.int(g32.ldx)}
	rc := C.pf_em_backward(&c.iv[0], &c.fv[0], cptr(p32.q), cptr(p32.xi0), cptr(p32.mu0), cptr(p32.vals),
		cptr(p32.keyMask), cptr(p32.queryMask), cptr(p32.inS), cptr(p32.logits), cptr(tr32.lp0),
		cptr(s32.readout), cptr(s32.weights), cptr(s32.xi), cptr(s32.alpha), cptr(s32.mu), cptr(s32.beta), cptr(s32.logPi),
		cptr(g32.q), cptr(g32.xi0), cptr(g32.mu0), cptr(g32.vals), cptr(g32.logits), (*C.float)(unsafe.Pointer(&g32.h[0])),
		&c.gld[0], cptr(c.buf), C.long(len(c.buf)))
	emCCalls.Put(c)
	if rc != 0 {
		panic(fmt.Sprintf("em.c backward: scratch of %d too small", len(c.buf)))
	}
	return true
}
