package kernels

import "sync/atomic"

// PoolStats counts what the parallel sections cost while counting is on
// (CountPool): a measurement for tests and benchmarks of the helpers'
// hand-overs, not a result. The C pool's counts (pool.c's PF_PS_*) are
// exact with one helper (two cores); times are wall-clock ns.
type PoolStats struct {
	Sections     int64 // sections posted to a helper through pool.c (products, range jobs)
	Wakes        int64 // of those, the helper asleep at the post: a wake-up
	Started      int64 // shares the helper started while polling
	StartNs      int64 // their summed latency after the post
	WokeStarted  int64 // shares the helper started after a wake-up
	WokeStartNs  int64 // their summed latency after the post
	StartMaxNs   int64 // the longest latency
	StartLate    int64 // starts later than 10 µs after the post
	TakenBack    int64 // shares the caller took back, the helper not started
	SectionNs    int64 // the caller's own time in the sections, post to its last block
	WaitNs       int64 // the caller's wait for the helper's last block after that
	HelperIdleNs int64 // the helper's time done before the caller was
	Sleeps       int64 // the helper going to sleep in pool.c
	WokeAway     int64 // wake-ups that kept the helper off the waker's CPU (pool.c's pf_pool_wake)
	GoJobs       int64 // Go jobs posted to helpers (RunShares: heads, Adam, ...)
	GoTakenBack  int64 // of those, taken back by the caller
	GoWaitNs     int64 // the caller's time after its own share until Go jobs are done, shares it took back included
	GoSectionNs  int64 // RunShares' wall time, its post to its last share done: with SectionNs and WaitNs, the time in parallel sections
}

// counting is on while CountPool(true) holds; Go-side counts follow.
var (
	counting                                   atomic.Bool
	goJobs, goTakenBack, goWaitNs, goSectionNs atomic.Int64
)

// CountPool turns the counting of PoolStats on (clearing the counts) or
// off. Off, as in every normal run, nothing is counted or timed.
func CountPool(on bool) {
	if on {
		goJobs.Store(0)
		goTakenBack.Store(0)
		goWaitNs.Store(0)
		goSectionNs.Store(0)
	}
	counting.Store(on)
	poolStatsOn(on)
}

// ReadPoolStats returns the counts since CountPool(true).
func ReadPoolStats() PoolStats {
	s := poolStatsRead()
	s.GoJobs, s.GoTakenBack, s.GoWaitNs, s.GoSectionNs = goJobs.Load(), goTakenBack.Load(), goWaitNs.Load(), goSectionNs.Load()
	return s
}
