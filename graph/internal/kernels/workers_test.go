package kernels

import (
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
)

// TestRunShares: every share runs exactly once, with its own index, for
// any number of shares and cores, also when a share starts a nested
// section (which then finds the helpers busy and runs on its caller).
func TestRunShares(t *testing.T) {
	for _, procs := range []int{1, 2, 4} {
		prev := runtime.GOMAXPROCS(procs)
		for _, c := range []struct{ n, nested int }{{0, 0}, {1, 0}, {2, 0}, {3, 0}, {9, 0}, {2, 2}, {3, 4}} {
			counts := make([]atomic.Int32, c.n)
			var inner atomic.Int32
			for range 50 {
				RunShares(c.n, func(w int) {
					counts[w].Add(1)
					RunShares(c.nested, func(int) { inner.Add(1) })
				})
			}
			for w := range counts {
				if got := counts[w].Load(); got != 50 {
					t.Errorf("GOMAXPROCS %d, %d shares: share %d ran %d times, want 50", procs, c.n, w, got)
				}
			}
			if got, want := inner.Load(), int32(50*c.n*c.nested); got != want {
				t.Errorf("GOMAXPROCS %d, %d shares × %d nested: %d nested runs, want %d", procs, c.n, c.nested, got, want)
			}
		}
		runtime.GOMAXPROCS(prev)
	}
}

// TestRunSharesPanic: a share that panics, on the caller or on a helper,
// panics on the caller after every share has finished, and leaves the
// helpers free: the next section runs all its shares again.
func TestRunSharesPanic(t *testing.T) {
	prev := runtime.GOMAXPROCS(2)
	defer runtime.GOMAXPROCS(prev)
	for _, bad := range []int{0, 1} {
		var ran atomic.Int32
		func() {
			defer func() {
				if r := recover(); r != "share failed" {
					t.Errorf("share %d panics: recovered %v, want the share's panic", bad, r)
				}
			}()
			RunShares(2, func(w int) {
				ran.Add(1)
				if w == bad {
					panic("share failed")
				}
			})
		}()
		if got := ran.Load(); got != 2 {
			t.Errorf("share %d panics: %d shares ran, want 2", bad, got)
		}
		var again atomic.Int32
		for range 20 {
			RunShares(2, func(int) { again.Add(1) })
		}
		if got := again.Load(); got != 40 {
			t.Errorf("after a panic in share %d: %d shares ran in 20 sections of 2", bad, got)
		}
	}
	var busy int
	if hs := helpers.helpers.Load(); hs != nil {
		for _, h := range *hs {
			if h.busy.Load() {
				busy++
			}
		}
	}
	if busy != 0 {
		t.Errorf("%d helpers left claimed after the panics", busy)
	}
}

// TestSplitRange: the parts cover [0, n) once, in order-free disjoint
// pieces whose inner bounds fall on multiples of align.
func TestSplitRange(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ n, align int }{{0, 8}, {5, 8}, {MinPart, 8}, {2*MinPart + 3, 8}, {65536, 64}, {3 * MinPart, 100}, {1 << 20, 64}, {maxChunks*MinPart + 5, 8}} {
		seen := make([]atomic.Int32, c.n)
		SplitRange(c.n, c.align, func(lo, hi int) {
			if lo%c.align != 0 || (hi != c.n && hi%c.align != 0) {
				t.Errorf("n %d align %d: part [%d, %d) not aligned", c.n, c.align, lo, hi)
			}
			for i := lo; i < hi; i++ {
				seen[i].Add(1)
			}
		})
		for i := range seen {
			if seen[i].Load() != 1 {
				t.Fatalf("n %d align %d: element %d covered %d times", c.n, c.align, i, seen[i].Load())
			}
		}
	}
}

// TestSplitRangeChunks: the chunks SplitRange cuts are the same with
// any number of threads from two up, at least MinPart long less the
// rounding to align (but the last), and at most maxChunks of them.
func TestSplitRangeChunks(t *testing.T) {
	prev := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(prev)
	for _, c := range []struct{ n, align int }{{2 * MinPart, 8}, {3*MinPart + 7, 64}, {1 << 20, 64}, {1<<17 + 3, 100}} {
		var first [][2]int
		for _, procs := range []int{2, 3, 4} {
			runtime.GOMAXPROCS(procs)
			var mu sync.Mutex
			var parts [][2]int
			SplitRange(c.n, c.align, func(lo, hi int) {
				mu.Lock()
				parts = append(parts, [2]int{lo, hi})
				mu.Unlock()
			})
			slices.SortFunc(parts, func(a, b [2]int) int { return a[0] - b[0] })
			if len(parts) > maxChunks || len(parts) < 2 {
				t.Errorf("n %d, %d threads: %d chunks", c.n, procs, len(parts))
			}
			for _, p := range parts[:len(parts)-1] {
				if p[1]-p[0] < MinPart-c.align {
					t.Errorf("n %d, %d threads: chunk %v below MinPart", c.n, procs, p)
				}
			}
			if first == nil {
				first = parts
			} else if !slices.Equal(first, parts) {
				t.Errorf("n %d: chunks %v with %d threads, %v with 2", c.n, parts, procs, first)
			}
		}
	}
}

// TestRunSharesTakesBack: with shares far shorter than a helper's wake-up
// (an empty share), the caller often finishes first and takes the
// helper's share back (RunShares); each share still runs exactly once,
// with its own index, and no helper is left claimed.
func TestRunSharesTakesBack(t *testing.T) {
	prev := runtime.GOMAXPROCS(2)
	defer runtime.GOMAXPROCS(prev)
	var counts [2]atomic.Int32
	const sections = 5000
	for range sections {
		RunShares(2, func(w int) { counts[w].Add(1) })
	}
	for w := range counts {
		if got := counts[w].Load(); got != sections {
			t.Errorf("share %d ran %d times in %d sections", w, got, sections)
		}
	}
	if hs := helpers.helpers.Load(); hs != nil {
		for i, h := range *hs {
			if h.busy.Load() || h.job.Load() != nil {
				t.Errorf("helper %d left claimed or with a job", i)
			}
		}
	}
}
