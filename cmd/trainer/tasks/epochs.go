package tasks

import "math/rand/v2"

// epochOrder is the order of data.sampling: epochs, as a PyTorch
// DataLoader with shuffle=True has it: every epoch visits each of n
// examples once, in a fresh random order. The k-th example drawn in a
// run (0-based, counted across batches) is example perm_e[k mod n] of
// epoch e = k / n, where perm_e comes from a generator seeded with the
// run's seed and e. So a batch depends only on the seed and the step,
// and a resumed run draws what the straight run would have, with no
// extra state in the checkpoint.
type epochOrder struct {
	seed  uint64
	n     int
	epoch int   // the epoch perm holds; −1 before the first
	perm  []int // a permutation of [0, n)
}

func newEpochOrder(seed uint64, n int) *epochOrder {
	return &epochOrder{seed: seed, n: n, epoch: -1}
}

// at returns the example index of the k-th draw, k ≥ 0.
func (o *epochOrder) at(k int) int {
	if e := k / o.n; e != o.epoch {
		// The stream tag keeps these generators apart from the run's
		// other generators of the same seed, whose tags are small.
		o.perm = rand.New(rand.NewPCG(o.seed, 0xe90c5<<32|uint64(e))).Perm(o.n)
		o.epoch = e
	}
	return o.perm[k%o.n]
}
