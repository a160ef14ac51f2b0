//go:build cgo && !purego

package kernels

import (
	"math/rand/v2"
	"sync"
	"testing"
)

// TestClaimTwoEnded: pf_claim hands out each of b items exactly once
// however the workers' claims interleave, worker 0 from the front (0, 1,
// …) and the others from the back (b−1, b−2, …), then −1 to everyone.
func TestClaimTwoEnded(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, b := range []int{0, 1, 2, 3, 7, 64, 1000} {
		for _, workers := range []int{1, 2, 3} {
			var ctr int64
			seen := make([]int, b)
			last := make([]int, workers) // each worker's previous item
			for w := range last {
				last[w] = -1
			}
			done := make([]bool, workers)
			for left := workers; left > 0; {
				w := rng.IntN(workers)
				if done[w] {
					continue
				}
				i := claimItem(&ctr, w, b)
				if i < 0 {
					done[w] = true
					left--
					continue
				}
				if i >= b {
					t.Fatalf("b %d: worker %d got item %d", b, w, i)
				}
				seen[i]++
				switch {
				case w == 0 && last[0] >= 0 && i != last[0]+1, w == 0 && last[0] < 0 && i != 0:
					t.Fatalf("b %d: worker 0 took %d after %d, want the front in order", b, i, last[0])
				case w > 0 && last[w] >= 0 && i >= last[w]:
					t.Fatalf("b %d: worker %d took %d after %d, want the back in order", b, w, i, last[w])
				}
				last[w] = i
			}
			for i, n := range seen {
				if n != 1 {
					t.Fatalf("b %d, %d workers: item %d handed out %d times", b, workers, i, n)
				}
			}
		}
	}
}

// TestClaimConcurrent: threads claiming at once from one counter (items
// and row blocks) take every item and every row exactly once.
func TestClaimConcurrent(t *testing.T) {
	for round := range 50 {
		const b, m = 997, 2053
		var ctr, rows int64
		seen, covered := make([]int32, b), make([]int32, m)
		var mu sync.Mutex
		var wg sync.WaitGroup
		start := make(chan struct{}) // all three claim at once
		for w := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				var mine []int
				for i := claimItem(&ctr, w, b); i >= 0; i = claimItem(&ctr, w, b) {
					mine = append(mine, i)
				}
				var blocks [][2]int
				for i0, i1, ok := claimRows(&rows, w, m, 96, 12); ok; i0, i1, ok = claimRows(&rows, w, m, 96, 12) {
					blocks = append(blocks, [2]int{i0, i1})
				}
				mu.Lock()
				defer mu.Unlock()
				for _, i := range mine {
					seen[i]++
				}
				for _, bl := range blocks {
					for r := bl[0]; r < bl[1]; r++ {
						covered[r]++
					}
				}
			}()
		}
		close(start)
		wg.Wait()
		for i, n := range seen {
			if n != 1 {
				t.Fatalf("round %d: item %d taken %d times", round, i, n)
			}
		}
		for r, n := range covered {
			if n != 1 {
				t.Fatalf("round %d: row %d taken %d times", round, r, n)
			}
		}
	}
}

// TestClaimRowsBlocks: pf_claim_rows cuts m rows into blocks that cover
// them once, in order from each end: the front's blocks from row 0 up,
// the back's from row m down, each at most rb rows plus the rounding
// down of a back block's start to a multiple of unit, which every back
// block but one that meets the front starts on.
func TestClaimRowsBlocks(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 1))
	for _, c := range []struct{ m, rb, unit int }{{1, 96, 12}, {12, 96, 12}, {100, 96, 12}, {2048, 256, 12},
		{2053, 96, 24}, {64, 8, 24}, {3000, 384, 24}} {
		for _, workers := range []int{1, 2, 3} {
			var ctr int64
			covered := make([]int, c.m)
			front, back := 0, c.m
			done := make([]bool, workers)
			for left := workers; left > 0; {
				w := rng.IntN(workers)
				if done[w] {
					continue
				}
				i0, i1, ok := claimRows(&ctr, w, c.m, c.rb, c.unit)
				if !ok {
					done[w] = true
					left--
					continue
				}
				if i1 <= i0 || i1-i0 > c.rb+c.unit-1 {
					t.Fatalf("%+v: block [%d, %d)", c, i0, i1)
				}
				if w == 0 {
					if i0 != front {
						t.Fatalf("%+v: front block [%d, %d) after row %d", c, i0, i1, front)
					}
					front = i1
				} else {
					if i1 != back {
						t.Fatalf("%+v: back block [%d, %d) before row %d", c, i0, i1, back)
					}
					if i0%c.unit != 0 && i0 != front {
						t.Fatalf("%+v: back block [%d, %d) starts off a multiple of %d", c, i0, i1, c.unit)
					}
					back = i0
				}
				for r := i0; r < i1; r++ {
					covered[r]++
				}
			}
			for r, n := range covered {
				if n != 1 {
					t.Fatalf("%+v, %d workers: row %d taken %d times", c, workers, r, n)
				}
			}
		}
	}
}
