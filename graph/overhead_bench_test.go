package graph_test

import (
	"testing"

	"github.com/probformer/probformer/graph/optim"
	"github.com/probformer/probformer/layers"
)

// BenchmarkStepOverhead runs the Set Transformer step of
// BenchmarkSetTransformerStepLN (ISAB encoder, two blocks, PMA, layer
// norm; the same widths, so the same kernel paths) on a batch of 2 sets
// of 4, where the kernels' arithmetic is small: what is left is the
// serial cost a step pays whatever the batch, the tape machine's
// instructions and every op's set-up around its kernel (plus Adam's).
// Run it with GOMAXPROCS=1 for the serial part alone.
//
//	GOMAXPROCS=1 go test ./graph -run '^$' -bench StepOverhead -benchmem
func BenchmarkStepOverhead(b *testing.B) {
	const batch, n, dim = 2, 4, 8
	cfg := layers.SetTransformerConfig{DimIn: dim, Dim: 64, Heads: 4, DimOut: dim, Encoder: "isab", Blocks: 2,
		Inducing: 16, Seeds: 1, LayerNorm: true}
	prog := setTransformerProgram(b, cfg, batch, n)
	opt := optim.NewAdam(1e-3)
	step := func() {
		if err := prog.Run(); err != nil {
			b.Fatal(err)
		}
		if _, err := opt.Step(prog); err != nil {
			b.Fatal(err)
		}
	}
	for range 10 {
		step()
	}
	b.ResetTimer()
	for range b.N {
		step()
	}
}
