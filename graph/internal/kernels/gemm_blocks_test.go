//go:build cgo && !purego

package kernels

import (
	"math/rand/v2"
	"testing"
)

// TestGemmSharedBlockEdges: the shared product's cuts (mode 0's and mode
// 2's blocks of rows shrinking towards the end, mode 1's tiles of rows ×
// columns) give pf_sgemm's values on one thread bit for bit at row counts
// around the blocks' edges (multiples of 12 and 24, a quarter of the rows
// left rounding up or down, a last block of one row), on 1, 2 and 3
// workers and both kernels, with gemmSplit's own choices among the
// splits.
func TestGemmSharedBlockEdges(t *testing.T) {
	levels := gemmLevels(t)
	t.Parallel()
	rng := rand.New(rand.NewPCG(29, 31))
	checked := 0
	for _, level := range levels {
		nr := 16 * level
		for _, m := range []int{11, 12, 13, 47, 48, 49, 64, 95, 97, 145, 301} {
			type split struct{ mode, rb, cw, n, k int }
			splits := []split{
				{0, 12, 0, 40, 64}, {0, 36, 0, 33, 140}, {0, max(12, m/8/12*12), 0, 64, 200},
				{1, 12, nr, 64, 300}, {1, 24, nr, 2*nr + 5, 129}, {1, 36, 2 * nr, 3 * nr, 64},
				{2, 24, 0, 8, 40}, {2, 48, 0, 40, 20},
			}
			if mode, rb, cw, ok := gemmSplit(cInt(level), false, m, 64, 1024); ok {
				splits = append(splits, split{mode, rb, cw, 64, 1024})
			}
			for _, s := range splits {
				for _, workers := range []int{1, 2, 3} {
					for _, tA := range []bool{false, true} {
						for _, tB := range []bool{false, true} {
							cs := (m + s.n + s.k + workers) % 3
							compareShared(t, rng, level, workers, s.mode, s.rb, s.cw, m, s.n, s.k, tA, tB, cs)
							checked++
						}
					}
				}
			}
		}
	}
	t.Logf("%d shared products bit-identical to one thread", checked)
}

// TestGemmSplitTilesFewColumns: gemmSplit cuts the weight gradients with
// two or three blocks of columns (64×64 and 64×96, k ≥ 1024, A
// transposed) into tiles of rows × columns on the AVX-512 kernel, ≈8 of
// them, and leaves the products with enough column blocks, a transposed
// B (whose tiles would each pack it) and the AVX2 kernel as they were.
func TestGemmSplitTilesFewColumns(t *testing.T) {
	for _, c := range []struct {
		level        int
		tB           bool
		m, n, k      int
		mode, rb, cw int
	}{
		{2, false, 64, 64, 1024, 1, 24, 32},
		{2, false, 64, 64, 2048, 1, 24, 32},
		{2, false, 64, 96, 1024, 1, 24, 32},
		{2, false, 64, 256, 1024, 1, 0, 32},
		{2, true, 64, 64, 1024, 1, 0, 32},
		{1, false, 64, 64, 1024, 1, 0, 16},
		{2, false, 256, 64, 1024, 0, 24, 0},
	} {
		mode, rb, cw, ok := gemmSplit(cInt(c.level), c.tB, c.m, c.n, c.k)
		if !ok || mode != c.mode || rb != c.rb || cw != c.cw {
			t.Errorf("gemmSplit(%d, %v, %d, %d, %d) = mode %d, rb %d, cw %d, %v; want mode %d, rb %d, cw %d",
				c.level, c.tB, c.m, c.n, c.k, mode, rb, cw, ok, c.mode, c.rb, c.cw)
		}
	}
}
