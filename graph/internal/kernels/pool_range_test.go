//go:build cgo && !purego

package kernels

import (
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
)

// TestPoolRangeSameBits: each loop shared through pool.c's range jobs
// (AddRepeatShared32 … LayerNormBwdHalves32) gives the values of its
// kernel run on SplitRange's chunks (the code it replaces) bit for bit,
// at GOMAXPROCS 1, 2 and 3, over sizes below, at and above MinPart's
// multiples, many times over so that the threads take different chunks,
// and from goroutines calling at once (one holds the pool, the others
// run every chunk themselves).
func TestPoolRangeSameBits(t *testing.T) {
	if hasAVX2() == 0 {
		t.Skip("no AVX2 on this CPU")
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	rng := rand.New(rand.NewPCG(3, 5))
	vals := func(n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		return x
	}
	for _, procs := range []int{1, 2, 3} {
		runtime.GOMAXPROCS(procs)
		for _, rows := range []int{1, 3, 127, 128, 256, 1000, 2048, 4099} {
			d := 64
			if rows%2 == 1 {
				d = 40
			}
			n := rows * d
			x, f, b, g, gb := vals(n), vals(n), vals(d), vals(d), vals(d)
			var wg sync.WaitGroup
			for c := range 3 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range 5 {
						checkRangeJobs(t, procs, c, x, f, b, g, gb)
					}
				}()
			}
			wg.Wait()
			if t.Failed() {
				return
			}
		}
	}
}

// checkRangeJobs compares each shared loop with its kernel on
// SplitRange's chunks, and the backward's halves with LayerNormBwd32 on
// each half.
func checkRangeJobs(t *testing.T, procs, caller int, x, f, b, g, gb []float32) {
	n, d := len(x), len(b)
	want, got := make([]float32, n), make([]float32, n)
	same := func(what string, want, got []float32) {
		t.Helper()
		for i := range want {
			if math.Float32bits(want[i]) != math.Float32bits(got[i]) {
				t.Errorf("GOMAXPROCS %d, caller %d, %d values of rows %d: %s element %d is %v, want %v",
					procs, caller, n, d, what, i, got[i], want[i])
				return
			}
		}
	}
	split := func(align int, fn func(lo, hi int)) { SplitRange(n, align, fn) }

	split(d, func(lo, hi int) { AddRepeat32(x[lo:hi], b, want[lo:hi]) })
	if !AddRepeatShared32(x, b, got) {
		t.Fatal("AddRepeatShared32 did not run")
	}
	same("add-repeat", want, got)

	split(8, func(lo, hi int) { AddRepeat32(x[lo:hi], f[lo:hi], want[lo:hi]) })
	AddShared32(x, f, got)
	same("add", want, got)

	split(8, func(lo, hi int) { Mul32(x[lo:hi], f[lo:hi], want[lo:hi]) })
	MulShared32(x, f, got)
	same("mul", want, got)

	split(8, func(lo, hi int) { Relu32(x[lo:hi], want[lo:hi]) })
	ReluShared32(x, got)
	same("relu", want, got)

	split(8, func(lo, hi int) { ReluGrad32(x[lo:hi], f[lo:hi], want[lo:hi]) })
	ReluGradShared32(x, f, got)
	same("relu-grad", want, got)

	if d%8 != 0 {
		return
	}
	rows := n / d
	wm, wr, gm, gr := make([]float32, rows), make([]float32, rows), make([]float32, rows), make([]float32, rows)
	split(d, func(lo, hi int) { LayerNormFwd32(x[lo:hi], g, gb, want[lo:hi], 1e-5, wm[lo/d:hi/d], wr[lo/d:hi/d]) })
	if !LayerNormFwdShared32(x, g, gb, got, 1e-5, gm, gr) {
		t.Fatal("LayerNormFwdShared32 did not run")
	}
	same("layernorm", want, got)
	same("layernorm mean", wm, gm)
	same("layernorm rstd", wr, gr)

	ws, gs := make([]float32, n), make([]float32, n)
	split(d, func(lo, hi int) {
		AddLayerNormFwd32(x[lo:hi], f[lo:hi], g, gb, ws[lo:hi], want[lo:hi], 1e-5, wm[lo/d:hi/d], wr[lo/d:hi/d])
	})
	if !AddLayerNormFwdShared32(x, f, g, gb, gs, got, 1e-5, gm, gr) {
		t.Fatal("AddLayerNormFwdShared32 did not run")
	}
	same("add-layernorm", want, got)
	same("add-layernorm sum", ws, gs)
	same("add-layernorm mean", wm, gm)
	same("add-layernorm rstd", wr, gr)

	if rows < 2 {
		return
	}
	h := rows / 2 * d
	wdg, gdg := make([]float32, 4*d), make([]float32, 4*d) // dγ, dβ, part's dγ, dβ
	// With a second output gradient (x here), the halves are the one-
	// gradient backward of the sum f + x, formed first.
	fx := make([]float32, n)
	split(8, func(lo, hi int) { AddRepeat32(f[lo:hi], x[lo:hi], fx[lo:hi]) })
	for _, c := range []struct {
		what      string
		g2, whole []float32 // the second gradient, and the sum the reference takes
	}{{"layernorm-bwd", nil, f}, {"layernorm-bwd of a sum", x, fx}} {
		clear(wdg)
		clear(gdg)
		LayerNormBwd32(x[:h], g, c.whole[:h], nil, wm[:h/d], wr[:h/d], want[:h], wdg[:d], wdg[d:2*d])
		LayerNormBwd32(x[h:], g, c.whole[h:], nil, wm[h/d:], wr[h/d:], want[h:], wdg[2*d:3*d], wdg[3*d:])
		if !LayerNormBwdHalves32(x, g, f, c.g2, gm, gr, got, gdg[:d], gdg[d:2*d], gdg[2*d:]) {
			t.Fatalf("%s: LayerNormBwdHalves32 did not run", c.what)
		}
		same(c.what+" dx", want, got)
		same(c.what+" dγ, dβ and the second half's", wdg, gdg)
	}
	got2 := make([]float32, n)
	clear(gdg)
	LayerNormBwd32(x, g, x, f, wm, wr, got2, gdg[:d], gdg[d:2*d])
	clear(wdg)
	LayerNormBwd32(x, g, fx, nil, wm, wr, want, wdg[:d], wdg[d:2*d])
	same("layernorm-bwd of a sum in one call, dx", want, got2)
	same("layernorm-bwd of a sum in one call, dγ, dβ", wdg[:2*d], gdg[:2*d])
}

// TestColSumSharedSameBits: ColSum32 with its column blocks shared
// between the threads gives pf_colsum's values on one thread bit for bit,
// at GOMAXPROCS 1-3, over widths that end in 32-, 8- and 1-column loops.
func TestColSumSharedSameBits(t *testing.T) {
	if hasAVX2() == 0 {
		t.Skip("no AVX2 on this CPU")
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	rng := rand.New(rand.NewPCG(7, 11))
	for _, d := range []int{8, 64, 72, 100, 256, 257, 1000} {
		for _, rows := range []int{1, 200, 1024, 3000} {
			x := make([]float32, rows*d)
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			want := make([]float32, d)
			pfColSum(x, rows, d, want)
			for _, procs := range []int{1, 2, 3} {
				runtime.GOMAXPROCS(procs)
				for range 5 {
					got := make([]float32, d)
					if !ColSum32(x, got) {
						t.Fatal("ColSum32 did not run")
					}
					for j := range want {
						if math.Float32bits(want[j]) != math.Float32bits(got[j]) {
							t.Fatalf("GOMAXPROCS %d, %d×%d: column %d is %v, want %v", procs, rows, d, j, got[j], want[j])
						}
					}
				}
			}
		}
	}
}
