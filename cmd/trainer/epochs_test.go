package main

import (
	"slices"
	"testing"
)

// TestEpochOrderVisitsEachOnce: each epoch is a permutation, epochs differ,
// and drawing from the middle (a resumed run) gives the same examples.
func TestEpochOrderVisitsEachOnce(t *testing.T) {
	const n = 37
	o := newEpochOrder(7, n)
	var draws []int
	for k := range 3 * n {
		draws = append(draws, o.at(k))
	}
	for e := range 3 {
		got := slices.Clone(draws[e*n : (e+1)*n])
		slices.Sort(got)
		for i, v := range got {
			if v != i {
				t.Fatalf("epoch %d is not a permutation of [0, %d): sorted %v", e, n, got)
			}
		}
	}
	if slices.Equal(draws[:n], draws[n:2*n]) {
		t.Fatal("epochs 0 and 1 have the same order")
	}
	resumed := newEpochOrder(7, n)
	for k := 50; k < 3*n; k++ {
		if got := resumed.at(k); got != draws[k] {
			t.Fatalf("draw %d: resumed order gives %d, straight %d", k, got, draws[k])
		}
	}
	if other := newEpochOrder(8, n); slices.Equal(draws[:n], func() []int {
		var d []int
		for k := range n {
			d = append(d, other.at(k))
		}
		return d
	}()) {
		t.Fatal("seeds 7 and 8 give the same order")
	}
}
