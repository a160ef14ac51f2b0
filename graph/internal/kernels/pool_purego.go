//go:build !cgo || purego

package kernels

// poolSlots is 0: without cgo there is no pool.c, and every helper polls
// and parks in Go.
const poolSlots = 0

// The pool functions do nothing here: no helper has a slot.
func poolServe(int)           {}
func poolNotify(int)          {}
func poolWords(int) *[3]int32 { return new([3]int32) }
func poolTake(int) bool       { return false }

// Without pool.c there is nothing of its to count.
func poolStatsOn(bool)         {}
func poolStatsRead() PoolStats { return PoolStats{} }
