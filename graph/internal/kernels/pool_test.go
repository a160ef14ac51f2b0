//go:build cgo && !purego

package kernels

import (
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestPoolSameBits: a product shared through pool.c's helper threads gives
// pf_sgemm's values on one thread bit for bit, at 1, 2 and 3 workers (the
// pool growing to two helpers on the way), in both modes, on both kernels,
// over many runs, so that the helpers take different blocks each time;
// and a helper does take shares (unless the machine never lets it start
// before the caller is done, which the log shows).
func TestPoolSameBits(t *testing.T) {
	if hasAVX2() == 0 {
		t.Skip("no AVX2 on this CPU")
	}
	levels := []int{1}
	if hasAVX512() {
		levels = append(levels, 2)
	}
	rng := rand.New(rand.NewPCG(29, 31))
	helped, runs := 0, 0
	for _, sz := range [][4]int{{512, 256, 64, 0}, {64, 512, 300, 1}, {300, 96, 129, 0}} {
		m, n, k, mode := sz[0], sz[1], sz[2], sz[3]
		a := to32(normal(1)(rng, []int{m * k}))
		b := to32(normal(1)(rng, []int{k * n}))
		for _, level := range levels {
			one := make([]float32, m*n)
			gemmKernelAt(cInt(level), false, false, m, n, k, 0.7, a, k, b, n, 0, one, n, nil)
			rb, cw := 24, 16*level
			for _, workers := range []int{1, 2, 3} {
				for range 20 {
					got := make([]float32, m*n)
					helped += gemmSharedAt(cInt(level), workers, mode, rb, cw, false, false, m, n, k, 0.7, a, k, b, n, 0, got, n, nil)
					runs++
					for i := range one {
						if math.Float32bits(one[i]) != math.Float32bits(got[i]) {
							t.Fatalf("level %d, %d workers, mode %d, %dx%dx%d: element %d is %v on one thread, %v through the pool",
								level, workers, mode, m, n, k, i, one[i], got[i])
						}
					}
				}
			}
		}
	}
	t.Logf("%d products, %d shares run by the pool's helpers", runs, helped)
}

// TestPoolConcurrentCallers: goroutines calling Gemm at once, on products
// that take the shared path, each get pf_sgemm's one-thread values: one
// product holds the pool at a time, and the others compute all their
// shares on their own thread.
func TestPoolConcurrentCallers(t *testing.T) {
	if hasAVX2() == 0 {
		t.Skip("no AVX2 on this CPU")
	}
	prev := runtime.GOMAXPROCS(max(2, runtime.GOMAXPROCS(0)))
	defer runtime.GOMAXPROCS(prev)
	level := gemmLevel()
	rng := rand.New(rand.NewPCG(37, 41))
	type prob struct {
		tA        bool
		m, n, k   int
		a, b, one []float32
	}
	var probs []prob
	for _, sz := range [][4]int{{256, 128, 64, 0}, {64, 256, 256, 1}, {120, 64, 96, 0}, {48, 512, 64, 1}} {
		p := prob{tA: sz[3] == 1, m: sz[0], n: sz[1], k: sz[2]}
		p.a = to32(normal(1)(rng, []int{p.m * p.k}))
		p.b = to32(normal(1)(rng, []int{p.k * p.n}))
		p.one = make([]float32, p.m*p.n)
		lda := p.k
		if p.tA {
			lda = p.m
		}
		gemmKernelAt(level, p.tA, false, p.m, p.n, p.k, 1, p.a, lda, p.b, p.n, 0, p.one, p.n, nil)
		probs = append(probs, p)
	}
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := range 40 {
				p := probs[(g+it)%len(probs)]
				lda := p.k
				if p.tA {
					lda = p.m
				}
				got := make([]float32, p.m*p.n)
				Gemm(p.tA, false, p.m, p.n, p.k, 1, p.a, lda, p.b, p.n, 0, got, p.n)
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(p.one[i]) {
						errs <- "goroutine result differs from one thread"
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
}

// TestPoolHelperSleepsWhenIdle: once the sections stop, the pool's helper
// goes to sleep in pool.c (its slot's sleeping word set) instead of
// polling on, so that an idle or evaluating trainer spins no core; asleep,
// it is woken by the next product's post and by a Go job (RunShares),
// and the product still has its one-thread values. The deadline only
// bounds a failure: the helper polls for tens of µs before it sleeps.
func TestPoolHelperSleepsWhenIdle(t *testing.T) {
	if hasAVX2() == 0 {
		t.Skip("no AVX2 on this CPU")
	}
	prev := runtime.GOMAXPROCS(max(2, runtime.GOMAXPROCS(0)))
	defer runtime.GOMAXPROCS(prev)
	level := int(gemmLevel())
	rng := rand.New(rand.NewPCG(43, 47))
	m, n, k := 512, 256, 64
	a := to32(normal(1)(rng, []int{m * k}))
	b := to32(normal(1)(rng, []int{k * n}))
	one := make([]float32, m*n)
	gemmKernelAt(cInt(level), false, false, m, n, k, 1, a, k, b, n, 0, one, n, nil)
	w := poolWords(0)
	asleep := func() bool {
		for end := time.Now().Add(10 * time.Second); atomic.LoadInt32(&w[2]) == 0; {
			if time.Now().After(end) {
				return false
			}
			time.Sleep(100 * time.Microsecond)
		}
		return true
	}
	for round := range 5 {
		// Products back to back until the helper has run a share, so
		// that it is awake (unless the machine never lets it start).
		helped := 0
		for try := 0; try < 200 && helped == 0; try++ {
			got := make([]float32, m*n)
			helped = gemmSharedAt(cInt(level), 2, 0, 24, 16*level, false, false, m, n, k, 1, a, k, b, n, 0, got, n, nil)
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(one[i]) {
					t.Fatalf("round %d: element %d is %v through the pool, %v on one thread", round, i, got[i], one[i])
				}
			}
		}
		if helped == 0 {
			t.Logf("round %d: the helper took no share in 200 products", round)
		}
		if !asleep() {
			t.Fatalf("round %d: the helper still polls 10 s after the last product", round)
		}
		var ran [2]atomic.Int32
		RunShares(2, func(w int) { ran[w].Add(1) })
		if ran[0].Load() != 1 || ran[1].Load() != 1 {
			t.Fatalf("round %d: RunShares ran its shares %d and %d times", round, ran[0].Load(), ran[1].Load())
		}
		if !asleep() {
			t.Fatalf("round %d: the helper still polls 10 s after a Go job", round)
		}
	}
}
