package layers

import (
	"fmt"

	"probformer/em"
	"probformer/graph"
)

// EMKernel is probabilistic attention (em-math.md): each head's keys and
// values are a Gaussian mixture whose keys, precisions and priors adapt to
// the queries by unrolled EM before the values are read out, with the
// priors' hyperparameters learned per head (<name>.em.*).
//
// A memory shared by all queries has no causal form, so a decoder's
// self-attention stays softmax (see DecoderLayer.SelfKernel).
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

func (k EMKernel) attend(b *graph.Builder, name string, q, key, v *graph.Node, heads int, mask Mask) (out, weights *graph.Node) {
	if mask.Causal {
		panic(fmt.Errorf("%s: em attention has no causal form", name))
	}
	return em.Kernel{Config: k.Config}.Attend(b, name,
		splitHeads(q, heads), splitHeads(key, heads), splitHeads(v, heads), mask.Keys)
}
