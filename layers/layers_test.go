package layers

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/probformer/probformer/graph"
)

// maskBN is a key mask for B = 2 sets of N = 3 with the last element of
// the second set padded.
var maskBN = []float64{1, 1, 1, 1, 1, 0}

func mab(name string, ln bool) MAB {
	return MAB{Name: name, Dim: 4, Heads: 2, LayerNorm: ln, Kernel: ScaledDotProduct{}}
}

func TestLayerGradients(t *testing.T) {
	cases := []struct {
		name string
		fn   func(b *graph.Builder) *graph.Node
	}{
		{"scaled-dot-product", func(b *graph.Builder) *graph.Node {
			q := b.Param("q", []int{2, 3, 8}, graph.Normal(1))
			k := b.Param("k", []int{2, 3, 8}, graph.Normal(1))
			v := b.Param("v", []int{2, 3, 10}, graph.Normal(1))
			return ScaledDotProduct{}.Attend(b, "att", q, k, v, 2, Mask{Keys: b.Constant("mask", []int{2, 3}, maskBN)})
		}},
		{"multihead", func(b *graph.Builder) *graph.Node {
			x := b.Param("x", []int{2, 2, 3}, graph.Normal(1))
			y := b.Param("y", []int{2, 3, 5}, graph.Normal(1))
			return MultiHeadAttention{Name: "mha", Dim: 4, Heads: 2, Kernel: ScaledDotProduct{}}.
				Forward(b, x, y, Mask{Keys: b.Constant("mask", []int{2, 3}, maskBN)})
		}},
		{"mab", func(b *graph.Builder) *graph.Node {
			x := b.Param("x", []int{2, 2, 3}, graph.Normal(1))
			y := b.Param("y", []int{2, 3, 5}, graph.Normal(1))
			return mab("mab", true).Forward(b, x, nil, y, b.Constant("mask", []int{2, 3}, maskBN))
		}},
		{"mab-no-layernorm", func(b *graph.Builder) *graph.Node {
			x := b.Param("x", []int{2, 2, 3}, graph.Normal(1))
			return mab("mab", false).Forward(b, x, nil, x, nil)
		}},
		{"sab", func(b *graph.Builder) *graph.Node {
			x := b.Param("x", []int{2, 3, 3}, graph.Normal(1))
			return SAB{MAB: mab("sab", true)}.Forward(b, x, b.Constant("mask", []int{2, 3}, maskBN))
		}},
		{"isab", func(b *graph.Builder) *graph.Node {
			x := b.Param("x", []int{2, 3, 3}, graph.Normal(1))
			return ISAB{Name: "isab", Inducing: 2, MAB: mab("", true)}.Forward(b, x, b.Constant("mask", []int{2, 3}, maskBN))
		}},
		{"pma", func(b *graph.Builder) *graph.Node {
			x := b.Param("x", []int{2, 3, 3}, graph.Normal(1))
			return PMA{Name: "pma", Seeds: 2, MAB: mab("", true)}.Forward(b, x, b.Constant("mask", []int{2, 3}, maskBN))
		}},
		{"set-transformer", func(b *graph.Builder) *graph.Node {
			x := b.Param("x", []int{2, 3, 2}, graph.Normal(1))
			cfg := SetTransformerConfig{DimIn: 2, Dim: 4, Heads: 2, DimOut: 2, Encoder: "isab", Blocks: 1,
				Inducing: 2, Seeds: 1, DecoderSAB: true, LayerNorm: true}
			return SetTransformer{Config: cfg}.Forward(b, x, b.Constant("mask", []int{2, 3}, maskBN))
		}},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := graph.CheckGradients(graph.NewParams(graph.Float64, uint64(i+1)), c.fn,
				graph.GradCheckOptions{Seed: uint64(i), MaxPerParam: 24})
			if err != nil {
				t.Fatal(err)
			}
			if len(res) < 3 {
				t.Fatalf("only %d parameters checked", len(res))
			}
		})
	}
}

func TestScaledDotProductMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	const n, m, d = 3, 4, 5
	q, k, v := randn(rng, n*d), randn(rng, m*d), randn(rng, m*2)
	mask := []float64{1, 0, 1, 1}
	got := evaluate(t, graph.NewParams(graph.Float64, 1), func(b *graph.Builder) error {
		out := ScaledDotProduct{}.Attend(b, "a",
			b.Constant("q", []int{1, n, d}, q), b.Constant("k", []int{1, m, d}, k),
			b.Constant("v", []int{1, m, 2}, v), 1, Mask{Keys: b.Constant("mask", []int{1, m}, mask)})
		b.Output("out", out)
		return nil
	}, "out")[0]
	for i := range n {
		w := make([]float64, m)
		var z float64
		for j := range m {
			if mask[j] == 0 {
				continue
			}
			var s float64
			for c := range d {
				s += q[i*d+c] * k[j*d+c]
			}
			w[j] = math.Exp(s / math.Sqrt(d))
			z += w[j]
		}
		for c := range 2 {
			var want float64
			for j := range m {
				want += w[j] / z * v[j*2+c]
			}
			if g := got[i*2+c]; math.Abs(g-want) > 1e-14 {
				t.Fatalf("out[%d,%d] = %v, want %v", i, c, g, want)
			}
		}
	}
}

func randn(rng *rand.Rand, n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = rng.NormFloat64()
	}
	return v
}

// evaluate runs fn once as an evaluation graph over ps (graph.Evaluate)
// and returns the named outputs in order, failing the test on any error.
func evaluate(t *testing.T, ps *graph.Params, fn graph.BuildFunc, outputs ...string) [][]float64 {
	t.Helper()
	outs, err := graph.Evaluate(ps, fn, outputs...)
	if err != nil {
		t.Fatal(err)
	}
	return outs
}

// setForward runs block on one batch of sets x [B, N, dx] with mask [B, N]
// and returns the output.
func setForward(t *testing.T, ps *graph.Params, shape []int, x, mask []float64,
	block func(b *graph.Builder, x, mask *graph.Node) *graph.Node) []float64 {
	t.Helper()
	prog, err := graph.Compile(ps, func(b *graph.Builder) error {
		b.Output("out", block(b, b.Input("x", shape...), b.Input("mask", shape[0], shape[1])))
		return nil
	}, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := prog.Feed("x", x); err != nil {
		t.Fatal(err)
	}
	if err := prog.Feed("mask", mask); err != nil {
		t.Fatal(err)
	}
	if err := prog.Run(); err != nil {
		t.Fatal(err)
	}
	out, _, _ := prog.Output("out")
	return out
}

func ones(n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = 1
	}
	return v
}

var blocks = map[string]func(b *graph.Builder, x, mask *graph.Node) *graph.Node{
	"sab": func(b *graph.Builder, x, mask *graph.Node) *graph.Node {
		return SAB{MAB: mab("sab", true)}.Forward(b, x, mask)
	},
	"isab": func(b *graph.Builder, x, mask *graph.Node) *graph.Node {
		return ISAB{Name: "isab", Inducing: 3, MAB: mab("", true)}.Forward(b, x, mask)
	},
	"pma": func(b *graph.Builder, x, mask *graph.Node) *graph.Node {
		return PMA{Name: "pma", Seeds: 2, MAB: mab("", true)}.Forward(b, x, mask)
	},
	"set-transformer": func(b *graph.Builder, x, mask *graph.Node) *graph.Node {
		cfg := SetTransformerConfig{DimIn: 3, Dim: 4, Heads: 2, DimOut: 2, Encoder: "sab", Blocks: 2,
			Seeds: 1, DecoderSAB: true, LayerNorm: true}
		return SetTransformer{Config: cfg}.Forward(b, x, mask)
	},
}

// TestPermutation: SAB and ISAB outputs permute with their input; PMA and
// the whole SetTransformer do not change.
func TestPermutation(t *testing.T) {
	const n, dx = 5, 3
	rng := rand.New(rand.NewPCG(5, 5))
	x := randn(rng, n*dx)
	perm := rng.Perm(n)
	px := make([]float64, len(x))
	for i, p := range perm {
		copy(px[i*dx:(i+1)*dx], x[p*dx:(p+1)*dx])
	}
	for name, block := range blocks {
		ps := graph.NewParams(graph.Float64, 11)
		a := setForward(t, ps, []int{1, n, dx}, x, ones(n), block)
		b := setForward(t, ps, []int{1, n, dx}, px, ones(n), block)
		equivariant := name == "sab" || name == "isab"
		w := len(a) / n
		for i := range b {
			want := a[i]
			if equivariant {
				want = a[perm[i/w]*w+i%w]
			}
			if math.Abs(b[i]-want) > 1e-12 {
				t.Errorf("%s: output %d is %v after permuting, want %v", name, i, b[i], want)
				break
			}
		}
	}
}

// TestPadding: a set padded with masked elements (in a batch with a full
// set) gives the same outputs for its real elements.
func TestPadding(t *testing.T) {
	const n, pad, dx = 4, 3, 3
	rng := rand.New(rand.NewPCG(6, 6))
	x := randn(rng, n*dx)
	full := randn(rng, (n+pad)*dx)
	// batch: [the set padded with garbage, another full set]
	padded := append(append(append([]float64{}, x...), randn(rng, pad*dx)...), full...)
	mask := append(append(ones(n), make([]float64, pad)...), ones(n+pad)...)
	for name, block := range blocks {
		ps := graph.NewParams(graph.Float64, 12)
		alone := setForward(t, ps, []int{1, n, dx}, x, ones(n), block)
		both := setForward(t, ps, []int{2, n + pad, dx}, padded, mask, block)
		// The first len(alone) outputs are the padded set's real rows (SAB,
		// ISAB) or its pooled output (PMA, SetTransformer).
		for i := range alone {
			if math.Abs(both[i]-alone[i]) > 1e-6 {
				t.Errorf("%s: output %d is %v padded, %v alone", name, i, both[i], alone[i])
				break
			}
		}
	}
}

// TestEMKernelInBlocks: the em kind plugs into MAB, ISAB and PMA and the
// Seq2Seq model, and its gradients (priors included) check out.
func TestEMKernelInBlocks(t *testing.T) {
	kernel, err := NewKernel(AttentionConfig{Kind: "em", KeyIters: 2, ValueIters: 1, AdaptAlpha: true})
	if err != nil {
		t.Fatal(err)
	}
	res, err := graph.CheckGradients(graph.NewParams(graph.Float64, 3), func(b *graph.Builder) *graph.Node {
		x := b.Param("x", []int{2, 3, 3}, graph.Normal(1))
		m := MAB{Name: "mab", Dim: 4, Heads: 2, LayerNorm: true, Kernel: kernel}
		return PMA{Name: "pma", Seeds: 1, MAB: m}.Forward(b, x, b.Constant("mask", []int{2, 3}, maskBN))
	}, graph.GradCheckOptions{MaxPerParam: 8})
	if err != nil {
		t.Fatal(err)
	}
	priors := 0
	for _, r := range res {
		if strings.Contains(r.Param, ".em.") {
			priors++
		}
	}
	if priors == 0 {
		t.Fatal("no prior hyperparameter was checked")
	}
	cfg := tinyConfig(false)
	cfg.Attention = AttentionConfig{Kind: "em", KeyIters: 1}
	cfg.Dropout = 0
	prog, err := graph.Compile(graph.NewParams(graph.Float32, 1), seq2seqBuild(cfg, 2, 4, 3), false)
	if err != nil {
		t.Fatalf("seq2seq with em attention: %v", err)
	}
	logits := runSeq2Seq(t, prog, []int{4, 5, 6, 4, 5, 4, 0, 0}, []float64{1, 1, 1, 1, 1, 1, 0, 0},
		[]int{2, 4, 0, 2, 5, 4}, []float64{1, 1, 0, 1, 1, 1})
	for _, v := range logits {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			t.Fatal("seq2seq with em attention gives non-finite logits")
		}
	}
	if _, err := NewKernel(AttentionConfig{Kind: "em", Prior: "flat"}); err == nil {
		t.Fatal("unknown prior accepted")
	}
}

// TestEMEqualsSoftmaxInMAB is em/MATH.md §2 inside a block: with no
// iterations, the linked prior and β⁰ → 0, an EM MAB equals a softmax MAB.
func TestEMEqualsSoftmaxInMAB(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	x := randn(rng, 2*3*3)
	run := func(kernel Kernel, ps *graph.Params) []float64 {
		out := setForward(t, ps, []int{2, 3, 3}, x, maskBN, func(b *graph.Builder, x, mask *graph.Node) *graph.Node {
			return MAB{Name: "mab", Dim: 4, Heads: 2, LayerNorm: true, Kernel: kernel}.Forward(b, x, mask, x, mask)
		})
		return out
	}
	ps := graph.NewParams(graph.Float64, 9)
	want := run(ScaledDotProduct{}, ps)
	emKernel, _ := NewKernel(AttentionConfig{Kind: "em"})
	got := run(emKernel, ps)
	// β⁰ starts at 0.01: set its raw parameter so that β⁰ ≈ 1e-8.
	for _, p := range ps.List() {
		if strings.HasSuffix(p.Name, ".em.beta0") {
			v := p.Values()
			for i := range v {
				v[i] = -40
			}
			p.SetValues(v)
		}
	}
	got = run(emKernel, ps)
	for i := range want {
		if maskBN[i/4] == 0 {
			continue // a padded query's row is meaningless (0 for em)
		}
		if math.Abs(got[i]-want[i]) > 1e-6 {
			t.Fatalf("output %d: em %v, softmax %v", i, got[i], want[i])
		}
	}
}

// TestBadConfigIsAnError checks that exported builders report a bad
// configuration as Compile's one-line error, naming what is wrong, not as
// a panic or a bug with a stack.
func TestBadConfigIsAnError(t *testing.T) {
	cases := []struct {
		name  string
		build func(b *graph.Builder)
		want  string
	}{
		{"set transformer kernel", func(b *graph.Builder) {
			cfg := SetTransformerConfig{DimIn: 2, Dim: 8, Heads: 2, DimOut: 1, Encoder: "sab", Blocks: 1, Seeds: 1,
				Attention: AttentionConfig{Kind: "nope"}}
			SetTransformer{Config: cfg}.Forward(b, b.Input("x", 2, 3, 2), nil)
		}, `unknown attention kind "nope"`},
		{"heads", func(b *graph.Builder) {
			MultiHeadAttention{Name: "att", Dim: 6, Heads: 4, Kernel: ScaledDotProduct{}}.Forward(b, b.Input("x", 1, 2, 6), b.Input("y", 1, 2, 6), Mask{})
		}, "does not split into 4 heads"},
		{"em causal", func(b *graph.Builder) {
			x := b.Input("x", 1, 2, 4)
			EMKernel{}.Attend(b, "att", x, x, x, 2, Mask{Causal: true})
		}, "no causal form"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := graph.Compile(graph.NewParams(graph.Float64, 1), func(b *graph.Builder) error { c.build(b); return nil }, false)
			if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("error %q, want one line with %q", err, c.want)
			}
		})
	}
}
