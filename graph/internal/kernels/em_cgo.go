//go:build cgo && !purego

package kernels

// #cgo CFLAGS: -I${SRCDIR}
// #include <kernels.h>
import "C"

import (
	"fmt"
	"os"
	"sync"
	"unsafe"
)

// EMUseC selects em.c for float32 problems when the CPU has AVX2 and FMA;
// tests turn it off to run the Go path, the reference, beside it.
var EMUseC = true

// EMCAvailable reports whether float32 problems run in em.c.
func EMCAvailable() bool { return EMUseC && hasAVX2() != 0 }

// EMUseAVX512 lets float32 problems run em.c's AVX-512 build (em512.c)
// where the CPU has AVX-512; it starts false when PROBFORMER_SIMD=avx2
// (SIMDEnv, as for the attention and softmax kernels), to time one build
// against the other, and tests set it to run either build whatever the
// environment says.
var EMUseAVX512 = os.Getenv(SIMDEnv) != "avx2"

// EMRunsC reports whether EMForward and EMBackward run problems of dtype
// T in em.c, which reads a problem's trace from its flat buffer, the one
// CutTrace cuts (EMForwardC, EMBackwardC take the buffer at the first
// element of the trace's Lp0): a caller may then pass a trace whose Lp0
// is the whole buffer, uncut.
func EMRunsC[T Float]() bool {
	var z T
	_, ok := any(z).(float32)
	return ok && EMCAvailable()
}

// EMAVX512 reports whether float32 problems run em.c's AVX-512 build. Its
// results are the AVX2 build's bit for bit (its 16-lane rows are reduced
// in the AVX2 build's 8-lane order; TestEMAVX512IsAVX2).
func EMAVX512() bool { return EMCAvailable() && EMUseAVX512 && hasAVX512() }

// emCCall is one call's scalars and scratch, pooled: a problem is small,
// and allocating its scratch (or letting the scalars escape) would cost a
// visible part of it.
type emCCall struct {
	iv  [19]C.int
	fv  [11]C.float
	gld [4]C.int
	buf []float32
}

var emCCalls = sync.Pool{New: func() any { return new(emCCall) }}

// emCScratchSize is the scratch em.c asks of either pass (it checks, and
// fails the call rather than run past it): the forward's N + max(M, N) +
// 2NM + N + M·max(d, dv) + 3M, the backward's EMBackScratchSize with its
// transposes and per-unit columns.
func emCScratchSize(n, m, d, dv int) int {
	return 6*n*m + 3*n*dv + 4*n + max(m, n) + 2*m*d + 2*m*dv + 2*m*max(d, dv) + 16*m
}

// emIV is em.c's integer scalars of a problem (its unpack has their
// order); the seed's stride and the gradient flags (iv[15], iv[17],
// iv[18]) are left 0.
func emIV(s EMSpec, n, m, d, dv, ldq, ldk, ldv, ldx int, pr bool) [19]C.int {
	return [19]C.int{C.int(n), C.int(m), C.int(d), C.int(dv), C.int(ldq), C.int(ldk), C.int(ldv), C.int(ldx),
		C.int(s.KeyIters), C.int(s.PropagateIters), C.int(s.ValueIters), cbool(s.AdaptAlpha), cbool(s.AdaptBeta), cbool(s.AdaptPi), cbool(pr),
		0, cbool(EMAVX512()), 0, 0}
}

// setup fills c's scalars for p and sizes its scratch.
func (c *emCCall) setup(s EMSpec, p *EMProblem[float32], pr bool) {
	c.iv = emIV(s, p.N, p.M, p.D, p.Dv, p.Ldq, p.Ldk, p.Ldv, p.Ldx, pr)
	for i, x := range p.H {
		c.fv[i] = C.float(x)
	}
	c.fv[9], c.fv[10] = C.float(p.SizeS), C.float(p.RealMemory)
	if size := emCScratchSize(p.N, p.M, p.D, p.Dv); len(c.buf) < size {
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

// EMForwardC runs EMForward in em.c for a float32 problem and reports
// whether it did. The trace is the flat buffer CutTrace cut tr from: its
// first part, lp0, starts it.
func EMForwardC[T Float](s EMSpec, p *EMProblem[T], tr *EMTrace[T]) bool {
	p32, ok := any(p).(*EMProblem[float32])
	if !ok || !EMCAvailable() {
		return false
	}
	tr32 := any(tr).(*EMTrace[float32])
	tr32.Pr = EMPropagates(s, p32)
	c := emCCalls.Get().(*emCCall)
	c.setup(s, p32, tr32.Pr)
	rc := C.pf_em_forward(&c.iv[0], &c.fv[0], cptr(p32.Q), cptr(p32.Xi0), cptr(p32.Mu0), cptr(p32.Vals),
		cptr(p32.KeyMask), cptr(p32.QueryMask), cptr(p32.InS), cptr(p32.Logits), cptr(tr32.Lp0),
		cptr(c.buf), C.long(len(c.buf)), cptr(p32.Out), C.int(p32.Ldo))
	emCCalls.Put(c)
	if rc != 0 {
		panic(fmt.Sprintf("em.c forward: scratch of %d too small", len(c.buf)))
	}
	return true
}

// EMBackwardC runs EMBackward in em.c for a float32 problem and reports
// whether it did; tr.pr says whether propagation ran, as for EMBackward.
func EMBackwardC[T Float](s EMSpec, p *EMProblem[T], tr *EMTrace[T], seed *EMSeeds[T], g *EMGrads[T]) bool {
	p32, ok := any(p).(*EMProblem[float32])
	if !ok || !EMCAvailable() {
		return false
	}
	tr32, s32, g32 := any(tr).(*EMTrace[float32]), any(seed).(*EMSeeds[float32]), any(g).(*EMGrads[float32])
	c := emCCalls.Get().(*emCCall)
	c.setup(s, p32, tr32.Pr)
	c.iv[15] = C.int(s32.Ldr)
	c.iv[17] = cbool(g32.Zero)
	c.iv[18] = cbool(g32.AddReadoutSeed && s32.Readout != nil)
	c.gld = [4]C.int{C.int(g32.Ldq), C.int(g32.Ldk), C.int(g32.Ldv), C.int(g32.Ldx)}
	rc := C.pf_em_backward(&c.iv[0], &c.fv[0], cptr(p32.Q), cptr(p32.Xi0), cptr(p32.Mu0), cptr(p32.Vals),
		cptr(p32.KeyMask), cptr(p32.QueryMask), cptr(p32.InS), cptr(p32.Logits), cptr(tr32.Lp0),
		cptr(s32.Readout), cptr(s32.Weights), cptr(s32.Xi), cptr(s32.Alpha), cptr(s32.Mu), cptr(s32.Beta), cptr(s32.LogPi),
		cptr(g32.Q), cptr(g32.Xi0), cptr(g32.Mu0), cptr(g32.Vals), cptr(g32.Logits), (*C.float)(unsafe.Pointer(&g32.H[0])),
		&c.gld[0], cptr(c.buf), C.long(len(c.buf)))
	emCCalls.Put(c)
	if rc != 0 {
		panic(fmt.Sprintf("em.c backward: scratch of %d too small", len(c.buf)))
	}
	return true
}

// EMForwardPass32 runs the forward pass of every problem of p in em.c,
// each as EMForwardC runs it (a problem without a real memory unit gets
// a cleared trace and reads out q + 0, as graph's op does), on up to
// workers threads (the caller and the pool's helpers) in one cgo call
// (pf_pool_em): the threads take whole batch elements from a shared
// counter. It reports whether it ran; it runs nothing when em.c does not
// run float32 problems here or a slice is too short.
func EMForwardPass32(p *EMPass32, workers int) bool { return emPass32(p, false, workers) }

// EMBackwardPass32 runs the backward pass of every problem of p, each as
// EMBackwardC runs it (a problem without a real memory unit gets its
// gradient rows cleared and the seed added to its queries'), as
// EMForwardPass32 shares them.
func EMBackwardPass32(p *EMPass32, workers int) bool { return emPass32(p, true, workers) }

func emPass32(p *EMPass32, bwd bool, workers int) bool {
	if !EMCAvailable() || !p.fits(bwd) {
		return false
	}
	workers = max(1, min(workers, p.B))
	nh := poolHelpers(workers)
	ns := emCScratchSize(p.N, p.M, p.D, p.Dv)
	if len(p.Scratch) < workers*ns {
		p.Scratch = make([]float32, workers*ns)
	}
	iv := emIV(p.Spec, p.N, p.M, p.D, p.Dv, p.Ldq, p.Ldk, p.Ldv, 0, false)
	var gld [4]C.int
	hmask := 0
	hv := make([]float32, EMHyperCount*p.H)
	for i, h := range p.Hyper {
		if h != nil {
			hmask |= 1 << i
			copy(hv[i*p.H:(i+1)*p.H], h)
		}
	}
	size := EMTraceSize(p.Spec, p.N, p.M, p.D, p.Dv)
	offs := [18]C.long{C.long(p.QB), C.long(p.QH), C.long(p.KB), C.long(p.KH), C.long(p.VB), C.long(p.VH),
		C.long(p.OB), C.long(p.OH), C.long(p.SB), C.long(p.SH), C.long(p.GQB), C.long(p.GQH), C.long(p.GKB),
		C.long(p.GKH), C.long(p.GVB), C.long(p.GVH), C.long(size), C.long(ns)}
	dims := [9]C.int{C.int(p.B), C.int(p.H), C.int(p.N), C.int(p.M), C.int(p.D), C.int(p.Dv), C.int(p.Ldo),
		C.int(p.Ldr), C.int(hmask)}
	var out, sr, gq, gk, gv, gh *C.float
	if bwd {
		iv[15], iv[17], iv[18] = C.int(p.Ldr), 1, 1
		gld = [4]C.int{C.int(p.GLdq), C.int(p.GLdk), C.int(p.GLdv), 0}
		sr, gq, gk, gv = cptr(p.Seed), cptr(p.GQ), cptr(p.GXi0), cptr(p.GMu0)
		gh = (*C.float)(unsafe.Pointer(&p.GH[0][0]))
	} else {
		out = cptr(p.Out)
	}
	ok := C.pf_pool_em(C.int(workers), C.int(nh), cbool(bwd), &dims[0], &iv[0], &gld[0], &offs[0], cptr(hv),
		cptr(p.Q), cptr(p.Xi0), cptr(p.Mu0), cptr(p.KeyMask), cptr(p.QueryMask), sr, cptr(p.Trace), out, gq, gk, gv,
		gh, cptr(p.Scratch))
	if ok == 0 {
		panic(fmt.Sprintf("em.c pass: scratch of %d a worker too small", ns))
	}
	return true
}
