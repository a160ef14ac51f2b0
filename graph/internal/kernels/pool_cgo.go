//go:build cgo && !purego

package kernels

// #cgo CFLAGS: -O3 -I${SRCDIR}
// #cgo LDFLAGS: -lpthread
// #include <kernels.h>
import "C"

import (
	"runtime"
	"sync/atomic"
	"unsafe"
)

// poolSlots is how many helpers have a slot in pool.c, through which
// shared float32 products reach them without a goroutine hand-over
// (poll, poolServe); helpers past it (GOMAXPROCS above 65) take only
// Go jobs, and park in Go.
const poolSlots = C.PF_POOL_SLOTS

// poolServe is helper i's sleep, once it has polled in vain: in C, where
// a product's caller wakes it and it runs its share without returning to
// Go; it returns when a Go job has been posted to it (poolNotify).
func poolServe(i int) { C.pf_pool_serve(C.int(i)) }

// poolWords is slot i's words in pool.c: the state of its product share,
// gojob and sleeping.
func poolWords(i int) *[3]int32 { return (*[3]int32)(unsafe.Pointer(C.pf_pool_slot(C.int(i)))) }

// poolTake runs the product share posted to slot i, if there is one.
func poolTake(i int) bool { return C.pf_pool_take(C.int(i)) != 0 }

// poolNotify tells helper i, waiting in poolServe, that a Go job is
// posted: the slot's gojob word, then a wake-up if it sleeps. The store
// comes before the read of sleeping, and pool.c sets sleeping before it
// reads gojob (both sequentially consistent), so a sleeping helper is
// always woken.
func poolNotify(i int) {
	w := poolWords(i)
	atomic.StoreInt32(&w[1], 1)
	if atomic.LoadInt32(&w[2]) != 0 {
		C.pf_pool_wake()
	}
}

// poolRange runs pool.c's range job of kind over [0, n) in SplitRange's
// chunks (bounds on multiples of align, about MinPart elements or more,
// at most maxChunks) on the caller and the helpers, in one cgo call: a
// helper polling in Go takes the job with one cgo call and runs chunks
// until none is left, one asleep in pool.c runs them without returning
// to Go, so no chunk costs a Go hand-over, a goroutine wake-up or a cgo
// call of its own. p holds the kernel's arrays (pool.c's range_job says
// which), every one valid until poolRange returns.
func poolRange(kind C.int, n, d, align int, eps float32, p [C.PF_RANGE_PTRS]unsafe.Pointer) {
	workers := min(runtime.GOMAXPROCS(0), n/MinPart)
	chunks := min(n/MinPart, maxChunks)
	if workers <= 1 || chunks <= 1 {
		workers, chunks = 1, 1
	}
	poolRun(kind, n, d, chunks, (n+align-1)/align, align, workers, eps, p)
}

// poolHelpers is how many helpers a pool.c job of workers threads posts
// to: one fewer than the workers, at most the helpers started (it starts
// them) and the slots.
func poolHelpers(workers int) int {
	if workers <= 1 {
		return 0
	}
	return min(len(helpers.ensure(workers-1)), workers-1, poolSlots)
}

// poolRun runs pool.c's range job of kind in chunks chunks of
// units·align elements on up to workers threads.
func poolRun(kind C.int, n, d, chunks, units, align, workers int, eps float32, p [C.PF_RANGE_PTRS]unsafe.Pointer) {
	nh := poolHelpers(workers)
	C.pf_pool_range(C.int(workers), C.int(nh), kind, C.int(n), C.int(d), C.int(chunks), C.int(units), C.int(align),
		C.float(eps), p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], p[9])
}

// poolStatsOn turns pool.c's counts on (cleared) or off.
func poolStatsOn(on bool) {
	v := 0
	if on {
		v = 1
	}
	C.pf_pool_stats_on(C.int(v))
}

// poolStatsRead returns pool.c's counts.
func poolStatsRead() PoolStats {
	c := unsafe.Slice((*int64)(unsafe.Pointer(C.pf_pool_stats())), C.PF_PS_N)
	return PoolStats{Sections: c[C.PF_PS_SECTIONS], Wakes: c[C.PF_PS_WAKES], Started: c[C.PF_PS_STARTED],
		StartNs: c[C.PF_PS_START_NS], WokeStarted: c[C.PF_PS_WOKE_STARTED], WokeStartNs: c[C.PF_PS_WOKE_START_NS],
		StartMaxNs: c[C.PF_PS_START_MAX_NS], StartLate: c[C.PF_PS_START_LATE], TakenBack: c[C.PF_PS_TAKEN_BACK],
		SectionNs: c[C.PF_PS_SECTION_NS], WaitNs: c[C.PF_PS_WAIT_NS], HelperIdleNs: c[C.PF_PS_HELPER_IDLE_NS],
		Sleeps: c[C.PF_PS_SLEEPS], WokeAway: c[C.PF_PS_WOKE_AWAY]}
}

// claimItem is pf_claim on the counter at ctr, for the tests.
func claimItem(ctr *int64, worker, b int) int {
	return int(C.pf_claim((*C.int)(unsafe.Pointer(ctr)), C.int(worker), C.int(b)))
}

// claimRows is pf_claim_rows on the counter at ctr, for the tests: the
// block's rows [i0, i1), ok false when none is left.
func claimRows(ctr *int64, worker, m, rb, unit int) (i0, i1 int, ok bool) {
	var c0, c1 C.int
	if C.pf_claim_rows((*C.int)(unsafe.Pointer(ctr)), C.int(worker), C.int(m), C.int(rb), C.int(unit), &c0, &c1) == 0 {
		return 0, 0, false
	}
	return int(c0), int(c1), true
}
