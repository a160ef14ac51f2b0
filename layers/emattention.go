package layers

import (
	"fmt"

	"github.com/probformer/probformer/em"
	"github.com/probformer/probformer/graph"
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

// Attend implements Kernel: em.AttendHeads on the unsplit heads, so no
// transposes are made.
func (k EMKernel) Attend(b *graph.Builder, name string, q, key, v *graph.Node, heads int, mask Mask) *graph.Node {
	out, _ := k.attend(b, name, q, key, v, heads, mask, graph.EMReadout)
	return out
}

// Weights implements WeightsKernel: the weights that formed the readout.
func (k EMKernel) Weights(b *graph.Builder, name string, q, key, v *graph.Node, heads int, mask Mask) *graph.Node {
	_, w := k.attend(b, name, q, key, v, heads, mask, graph.EMWeights)
	return w
}

// attendWeighted implements weightedAttender: readout and weights from
// one fused op, for a loss on the weights (DiversityKernel).
func (k EMKernel) attendWeighted(b *graph.Builder, name string, q, key, v *graph.Node, heads int, mask Mask) (out, weights *graph.Node) {
	return k.attend(b, name, q, key, v, heads, mask, graph.EMReadout|graph.EMWeights)
}

// attend: q [B, N, H·d], key [B, M, H·d], v [B, M, H·dv] → out
// [B, N, H·dv] and weights [B, H, N, M], as want asks, both with zero
// rows at padded queries. The Kernel interface has no error result, so
// an error fails the build (graph.Builder.Fail), and graph.Compile
// returns it.
func (k EMKernel) attend(b *graph.Builder, name string, q, key, v *graph.Node, heads int, mask Mask, want graph.EMOutput) (out, weights *graph.Node) {
	if mask.Causal {
		b.Fail(fmt.Errorf("%s: em attention has no causal form", name))
	}
	out, weights, err := em.AttendHeads(b, name, k.Config, heads, q, key, v, mask.Keys, &em.Extras{QueryMask: mask.Queries}, want)
	if err != nil {
		b.Fail(err)
	}
	return out, weights
}

// projectAttend is ScaledDotProduct.projectAttend's structure for EM
// attention: dense's query projection of x (name.q) and key and value
// projections of y (name.k, name.v), created in that order, the key and
// value projections as one graph.LinearConcat that the EM op reads in
// place (em.AttendHeadsPacked), with residual the residual connection
// q + readout in the same op, and with tile set x is seeds [k, dx] whose
// projection is computed once and tiled over the batch. The forward
// values are those of dense, b.Tile and Attend (and Add) bit for bit;
// the gradient of the tiled projection's weights is summed in another
// order (the seeds' gradients over the batch first), so training numbers
// change by rounding. x [B, N, dx] (or seeds [k, dx]), y [B, M, dy] →
// [B, N, dim].
func (k EMKernel) projectAttend(b *graph.Builder, name string, x, y *graph.Node, dim, heads int, mask Mask, residual bool, tile *tiling) *graph.Node {
	wq, bq := denseParams(b, name+".q", x, dim)
	wk, bk := denseParams(b, name+".k", y, dim)
	wv, bv := denseParams(b, name+".v", y, dim)
	q := graph.Linear(x, wq, bq)
	if tile != nil {
		q = b.Tile(tile.name, q, tile.n)
	}
	kv := graph.LinearConcat(y, []*graph.Node{wk, wv}, []*graph.Node{bk, bv})
	if mask.Causal {
		b.Fail(fmt.Errorf("%s: em attention has no causal form", name))
	}
	out, err := em.AttendHeadsPacked(b, name, k.Config, heads, q, kv, mask.Keys, &em.Extras{QueryMask: mask.Queries}, residual)
	if err != nil {
		b.Fail(err)
	}
	return out
}
