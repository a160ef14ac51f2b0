package layers

import (
	"fmt"

	"probformer/em"
	"probformer/graph"
)

// EMKernel is probabilistic attention (em/MATH.md): each head's keys and
// values are a Gaussian mixture whose keys, precisions and priors adapt to
// the queries by unrolled EM before the values are read out, with the
// priors' hyperparameters learned per head (<name>.em.*).
//
// The key adaptation (em/MATH.md §4) sums over the query units, so
// Mask.Queries is passed on to em as its query mask: padded queries are
// left out of those sums, and padding changes nothing for the real
// elements. A memory shared by all queries has no causal form, so a
// decoder's self-attention stays softmax (see DecoderLayer.SelfKernel).
type EMKernel struct {
	Config em.Config
}

func newEMKernel(cfg AttentionConfig) (EMKernel, error) {
	prior := em.LinkedPrior
	switch cfg.Prior {
	case "", "linked":
	case "free":
		prior = em.FreePrior
	default:
		return EMKernel{}, fmt.Errorf("unknown em prior %q (want linked or free)", cfg.Prior)
	}
	c := em.Config{KeyIters: cfg.KeyIters, PropagateIters: cfg.PropagateIters, ValueIters: cfg.ValueIters,
		AdaptAlpha: cfg.AdaptAlpha, AdaptBeta: cfg.AdaptBeta, AdaptPi: cfg.AdaptPi, Prior: prior}
	if _, err := em.NewKernel(c); err != nil {
		return EMKernel{}, err
	}
	return EMKernel{Config: c}, nil
}

func (EMKernel) noCausalForm() {}

// Attend implements Kernel: the heads are split to [B, H, ·, d] for em.
func (k EMKernel) Attend(b *graph.Builder, name string, q, key, v *graph.Node, heads int, mask Mask) *graph.Node {
	out, _ := k.attend(b, name, q, key, v, heads, mask)
	return mergeHeads(out)
}

// Weights implements WeightsKernel: the weights that formed the readout.
// The projections of Attend are reused, since equal nodes are shared.
func (k EMKernel) Weights(b *graph.Builder, name string, q, key, v *graph.Node, heads int, mask Mask) *graph.Node {
	_, w := k.attend(b, name, q, key, v, heads, mask)
	return w
}

// attend: q [B, N, H·d], key [B, M, H·d], v [B, M, H·dv] → out
// [B, H, N, dv] and weights [B, H, N, M], both with zero rows at padded
// queries. The Kernel interface has no error result, so an error panics,
// as in em.Kernel.Attend; graph.Compile recovers it as its error.
func (k EMKernel) attend(b *graph.Builder, name string, q, key, v *graph.Node, heads int, mask Mask) (out, weights *graph.Node) {
	if mask.Causal {
		panic(fmt.Errorf("%s: em attention has no causal form", name))
	}
	res, err := em.Attend(b, name, k.Config, splitHeads(q, heads), splitHeads(key, heads), splitHeads(v, heads),
		mask.Keys, &em.Extras{QueryMask: mask.Queries})
	if err != nil {
		panic(err)
	}
	return res.Readout, res.Weights
}
