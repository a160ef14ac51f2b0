package kernels

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Helper goroutines for the kernels' parallel sections.
//
// Gorgonia's tape machine runs one op at a time, so a training step uses
// its second core only inside kernels that split their work (gemm, the
// attention heads, element-wise loops). A step has a few hundred such
// sections of 20–200 µs each. A fresh goroutine per section costs little
// to create, but once the runtime has parked its idle thread (≈30 µs
// after the last section) waking it takes ≈20 µs, a large part of a
// 60 µs half-gemm. The helpers below stay awake, polling for work, for
// helperSpin after each job, and park only when the kernels go quiet
// (between steps, or during long serial stretches).
//
// Which share of a section a goroutine computes never depends on the
// helpers: a share that finds no free helper runs on the caller, after
// its own, with the same worker index. So results are the same with any
// number of helpers, busy or not.

// helperSpin is how long an idle helper polls for work before it parks.
// In a Set Transformer step (BenchmarkSetTransformerStepLN, 200 steps)
// the helpers waited ≈6400 times: ≈2400 found the next job posted already
// (sections back to back), ≈430 got one after 4–64 µs, and ≈3700 polled
// in vain and parked (a serial stretch of Gorgonia ops, ≥ 0.1 ms). Half
// the old 100 µs catches all but the rare 50–100 µs gaps and halves the
// CPU time the vain polls take from other work (the runtime's, or another
// process's on a shared machine).
const helperSpin = 50 * time.Microsecond

// helper is one persistent goroutine, its mailbox, and the task it runs
// for the caller that claimed it.
type helper struct {
	idx    int                  // its slot in pool.c, if below poolSlots
	busy   atomic.Bool          // claimed by a caller
	job    atomic.Pointer[task] // posted work, taken by the helper
	asleep atomic.Bool          // parked on wake
	wake   chan struct{}        // capacity 1
	t      task
}

// task is a share of a parallel section: f(w), then done. A panic in f
// is caught in the helper and raised again on the caller by RunShares,
// as if the caller had run the share.
type task struct {
	f        func(w int)
	w        int
	done     sync.WaitGroup
	fin      atomic.Bool
	panicked any
}

// helperPool holds the helpers, started on first use; it grows to
// GOMAXPROCS−1 helpers and never shrinks (parked helpers cost nothing).
type helperPool struct {
	mu      sync.Mutex
	helpers atomic.Pointer[[]*helper]
}

// helpers is the process's pool: kernels have no handle on a program, and
// two programs running at once share the cores anyway. It holds no
// values, only idle goroutines.
var helpers helperPool

// get returns up to n helpers, claimed for the caller, who must release
// each with put.
func (p *helperPool) get(n int, into []*helper) []*helper {
	into = into[:0]
	n = min(n, runtime.GOMAXPROCS(0)-1)
	if n <= 0 {
		return into
	}
	for _, h := range p.ensure(n) {
		if len(into) == n {
			break
		}
		if h.busy.CompareAndSwap(false, true) {
			into = append(into, h)
		}
	}
	return into
}

// ensure starts helpers until there are at least n, and returns them all.
func (p *helperPool) ensure(n int) []*helper {
	if hs := p.helpers.Load(); hs != nil && len(*hs) >= n {
		return *hs
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var hs []*helper
	if cur := p.helpers.Load(); cur != nil {
		hs = *cur
	}
	if len(hs) >= n {
		return hs
	}
	grown := append([]*helper(nil), hs...)
	for len(grown) < n {
		h := &helper{idx: len(grown), wake: make(chan struct{}, 1)}
		go h.loop()
		grown = append(grown, h)
	}
	p.helpers.Store(&grown)
	return grown
}

// post hands f(w) to the claimed helper h.
func (h *helper) post(f func(w int), w int) {
	t := &h.t
	t.f, t.w, t.panicked = f, w, nil
	t.fin.Store(false)
	t.done.Add(1)
	h.job.Store(t)
	if h.idx < poolSlots {
		poolNotify(h.idx)
		return
	}
	if h.asleep.Load() {
		select {
		case h.wake <- struct{}{}:
		default:
		}
	}
}

// loop runs posted tasks, polling for helperSpin after each. A helper
// with a slot in pool.c also runs the float32 product shares posted to
// the slot while it polls (poll), and then sleeps in pool.c
// (poolServe), where a product's caller wakes it and it runs its share
// without coming back to Go; one without parks until post wakes it.
func (h *helper) loop() {
	if h.idx < poolSlots {
		w := poolWords(h.idx)
		for {
			if t := h.poll(w); t != nil {
				t.run()
				continue
			}
			poolServe(h.idx) // sleeps; returns when post has put a job
		}
	}
	for {
		t := h.poll(nil)
		if t == nil {
			h.asleep.Store(true)
			// A job posted before asleep was set is seen here; one posted
			// after it sends a wake-up. A wake-up whose job its caller has
			// taken back (RunShares) parks again at once, rather than
			// polling in vain.
			for t = h.job.Swap(nil); t == nil; t = h.job.Swap(nil) {
				<-h.wake
			}
			h.asleep.Store(false)
		}
		t.run()
	}
}

// run runs the task's share and marks it done, even if the share panics.
func (t *task) run() {
	defer func() {
		t.panicked = recover()
		t.fin.Store(true)
		t.done.Done()
	}()
	f := t.f
	t.f = nil
	f(t.w)
}

// poll waits up to helperSpin for a job, yielding the processor to any
// other goroutine in between. A helper with a slot in pool.c (w not nil)
// also runs the product shares posted to the slot (w[0] is its state, 1
// when posted).
func (h *helper) poll(w *[3]int32) *task {
	var start time.Time
	for i := 0; ; i++ {
		if h.job.Load() != nil {
			if w != nil {
				atomic.StoreInt32(&w[1], 0)
			}
			if t := h.job.Swap(nil); t != nil {
				return t
			}
			continue // taken back by its caller (RunShares)
		}
		if w != nil && atomic.LoadInt32(&w[0]) == 1 && poolTake(h.idx) {
			start = time.Time{}
			continue
		}
		if i&255 == 255 {
			if start.IsZero() {
				start = time.Now()
			} else if time.Since(start) > helperSpin {
				return nil
			}
			runtime.Gosched()
		}
	}
}

// wait blocks until t is done: it polls first, since the helper's share
// is about as long as the caller's, then sleeps.
func (t *task) wait() {
	for i := 0; i < 1<<12; i++ {
		if t.fin.Load() {
			break
		}
		if i&63 == 63 {
			runtime.Gosched()
		}
	}
	t.done.Wait()
}

// RunShares runs f(w) for w in [0, n): share 0 on the caller, the others
// on free helpers, or on the caller after its own share when none is free.
// It returns when all are done.
func RunShares(n int, f func(w int)) {
	if n <= 1 {
		if n == 1 {
			f(0)
		}
		return
	}
	var buf [8]*helper
	hs := helpers.get(n-1, buf[:])
	var posted time.Time
	if counting.Load() {
		posted = time.Now()
	}
	for i, h := range hs {
		h.post(f, i+1)
	}
	// Even when a share panics (Program.Run turns that into an error),
	// the helpers finish theirs and are released before the caller goes
	// on, so none keeps writing into buffers the next run reuses.
	defer func() {
		first := recover() // the caller's own share's panic, if any
		var own time.Time
		if counting.Load() {
			own = time.Now()
			goJobs.Add(int64(len(hs)))
		}
		for _, h := range hs {
			// A helper that has not taken its share yet (parked, or its
			// core busy with another process) gives it back: the caller
			// runs it now rather than wait for the helper to wake. The
			// share's index is the same, so are its values; a kernel
			// whose threads take blocks from a counter (gemm) finds none
			// left and returns at once.
			if h.job.CompareAndSwap(&h.t, nil) {
				if !own.IsZero() {
					goTakenBack.Add(1)
				}
				h.t.run()
			}
			h.t.wait()
			if !own.IsZero() {
				goWaitNs.Add(int64(time.Since(own)))
			}
			if first == nil {
				first = h.t.panicked
			}
			h.busy.Store(false)
		}
		if !posted.IsZero() {
			goSectionNs.Add(int64(time.Since(posted)))
		}
		if first != nil {
			panic(first)
		}
	}()
	f(0)
	for w := len(hs) + 1; w < n; w++ {
		f(w)
	}
}

// MinPart is the fewest elements SplitRange gives a goroutine: below
// ≈32 KB, an element-wise loop takes a few µs and splitting it gains less
// than the hand-over costs.
const MinPart = 8192

// maxChunks bounds how many chunks SplitRange cuts a range into. Chunks
// of at least MinPart elements cost one hand-over each (an atomic add,
// one kernel call); 16 of them let a helper that arrives late, parked
// or with its core taken by another process, still take the chunks the
// caller has not reached, where a fixed half would fall back to the
// caller whole (RunShares gives it back).
const maxChunks = 16

// SplitRange calls f(lo, hi) on contiguous parts of [0, n), bounds on
// multiples of align, for element-wise loops, whose values do not depend
// on the parts. When n holds two or more parts of MinPart and there are
// two or more threads, the parts are chunks of about MinPart elements or
// more (at most maxChunks of them), which the caller and the helpers take in
// turn from a shared counter until none is left: each chunk is one call
// of f on whichever goroutine is free, so a share's size follows how
// much of the machine each goroutine gets. The chunk bounds depend only
// on n and align, never on the threads.
func SplitRange(n, align int, f func(lo, hi int)) {
	workers := min(runtime.GOMAXPROCS(0), n/MinPart)
	if workers <= 1 || align <= 0 {
		f(0, n)
		return
	}
	chunks := min(n/MinPart, maxChunks)
	units := (n + align - 1) / align
	var next atomic.Int32
	RunShares(workers, func(int) {
		for {
			c := int(next.Add(1)) - 1
			if c >= chunks {
				return
			}
			lo, hi := units*c/chunks*align, min(units*(c+1)/chunks*align, n)
			if lo < hi {
				f(lo, hi)
			}
		}
	})
}
