package layers

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/probformer/probformer/graph"
	"github.com/probformer/probformer/graph/optim"
)

// srcMaskBS masks the last two of S = 4 source positions of the second of
// B = 2 sentences; tgtMaskBT the last of T = 3 target positions of the
// first.
var (
	srcMaskBS = []float64{1, 1, 1, 1, 1, 1, 0, 0}
	tgtMaskBT = []float64{1, 1, 0, 1, 1, 1}
)

func encoderLayer(preLN bool) EncoderLayer {
	return EncoderLayer{Name: "enc.0", Dim: 4, Heads: 2, FF: 6, PreLN: preLN, Kernel: ScaledDotProduct{}}
}

func decoderLayer(preLN bool) DecoderLayer {
	return DecoderLayer{Name: "dec.0", Dim: 4, Heads: 2, FF: 6, PreLN: preLN, Kernel: ScaledDotProduct{}}
}

func tinyConfig(preLN bool) Seq2SeqConfig {
	return Seq2SeqConfig{DModel: 4, Heads: 2, FF: 6, EncLayers: 1, DecLayers: 2, Dropout: 0.1, PreLN: preLN,
		SrcVocab: 7, TgtVocab: 6, MaxLen: 8}
}

func TestTransformerGradients(t *testing.T) {
	cases := []struct {
		name string
		fn   func(b *graph.Builder) *graph.Node
	}{
		{"token-embedding", func(b *graph.Builder) *graph.Node {
			// Repeated ids: table rows 2 and 5 collect several gradients.
			ids := b.IndexConstant("ids", []int{2, 3}, []int{2, 5, 2, 5, 5, 0})
			x := TokenEmbedding{Name: "emb", Vocab: 6, Dim: 4}.Forward(b, ids)
			return PositionalEncoding{Name: "pos"}.Forward(b, x)
		}},
		{"encoder-layer-post-ln", func(b *graph.Builder) *graph.Node {
			x := b.Param("x", []int{2, 4, 4}, graph.Normal(1))
			return encoderLayer(false).Forward(b, x, b.Constant("mask", []int{2, 4}, srcMaskBS))
		}},
		{"encoder-layer-pre-ln", func(b *graph.Builder) *graph.Node {
			x := b.Param("x", []int{2, 4, 4}, graph.Normal(1))
			return encoderLayer(true).Forward(b, x, b.Constant("mask", []int{2, 4}, srcMaskBS))
		}},
		{"decoder-layer-post-ln", func(b *graph.Builder) *graph.Node {
			y := b.Param("y", []int{2, 3, 4}, graph.Normal(1))
			mem := b.Param("mem", []int{2, 4, 4}, graph.Normal(1))
			tgt := b.Constant("tgt_mask", []int{2, 3}, tgtMaskBT)
			return decoderLayer(false).Forward(b, y, tgt, mem, b.Constant("src_mask", []int{2, 4}, srcMaskBS))
		}},
		{"decoder-layer-pre-ln", func(b *graph.Builder) *graph.Node {
			y := b.Param("y", []int{2, 3, 4}, graph.Normal(1))
			mem := b.Param("mem", []int{2, 4, 4}, graph.Normal(1))
			tgt := b.Constant("tgt_mask", []int{2, 3}, tgtMaskBT)
			return decoderLayer(true).Forward(b, y, tgt, mem, b.Constant("src_mask", []int{2, 4}, srcMaskBS))
		}},
		{"seq2seq-tied-output", tinySeq2SeqLogits(func(c *Seq2SeqConfig) { c.TieOutput = true })},
		{"seq2seq-final-norm", tinySeq2SeqLogits(func(c *Seq2SeqConfig) { c.FinalNorm = true })},
		{"seq2seq", tinySeq2SeqLogits(func(*Seq2SeqConfig) {})},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := graph.CheckGradients(graph.NewParams(graph.Float64, uint64(i+1)), c.fn,
				graph.GradCheckOptions{Seed: uint64(i), MaxPerParam: 6})
			if err != nil {
				t.Fatal(err)
			}
			if len(res) == 0 {
				t.Fatal("no parameter checked")
			}
		})
	}
}

// tinySeq2SeqLogits is the logits of tinyConfig(false) with one decoder
// layer and no dropout (CheckGradients draws no dropout masks), changed by
// edit, on a fixed padded batch.
func tinySeq2SeqLogits(edit func(*Seq2SeqConfig)) func(b *graph.Builder) *graph.Node {
	return func(b *graph.Builder) *graph.Node {
		cfg := tinyConfig(false)
		cfg.DecLayers, cfg.Dropout = 1, 0
		edit(&cfg)
		return Seq2Seq{Config: cfg}.Forward(b,
			b.IndexConstant("src", []int{2, 4}, []int{4, 5, 6, 4, 5, 4, 0, 0}),
			b.Constant("src_mask", []int{2, 4}, srcMaskBS),
			b.IndexConstant("tgt_in", []int{2, 3}, []int{2, 4, 0, 2, 5, 4}),
			b.Constant("tgt_mask", []int{2, 3}, tgtMaskBT))
	}
}

// TestTransformerParamNames pins the hierarchical parameter names that
// checkpoints and configs refer to.
func TestTransformerParamNames(t *testing.T) {
	ps := graph.NewParams(graph.Float64, 1)
	cfg := tinyConfig(true)
	cfg.EncLayers = 2
	if _, err := graph.Compile(ps, seq2seqBuild(cfg, 1, 3, 2), false); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{
		"src_emb.table", "tgt_emb.table", "out.w", "out.b",
		"enc.0.self.q.w", "enc.1.self.o.b", "enc.0.ff1.w", "enc.1.ff2.b", "enc.0.ln1.g", "enc.1.ln2.b", "enc.ln.g",
		"dec.0.self.k.w", "dec.1.cross.k.w", "dec.1.cross.v.b", "dec.0.ff1.b", "dec.1.ln3.g", "dec.ln.b",
	} {
		if ps.Lookup(name) == nil {
			t.Errorf("no parameter %s", name)
		}
	}
	if p := ps.Lookup("out.w"); !slices.Equal(p.Shape, []int{4, 6}) {
		t.Errorf("out.w has shape %v, want [4 6]", p.Shape)
	}
	if p := ps.Lookup("src_emb.table"); !slices.Equal(p.Shape, []int{7, 4}) {
		t.Errorf("src_emb.table has shape %v, want [7 4]", p.Shape)
	}
	// No parameter outside the documented families.
	for _, p := range ps.List() {
		ok := false
		for _, prefix := range []string{"src_emb.", "tgt_emb.", "enc.", "dec.", "out."} {
			ok = ok || len(p.Name) > len(prefix) && p.Name[:len(prefix)] == prefix
		}
		if !ok {
			t.Errorf("unexpected parameter %s", p.Name)
		}
	}
}

// TestFinalNorm: post-LN stacks end in a LayerNorm (enc.ln, dec.ln) only
// with FinalNorm, as nn.Transformer's do.
func TestFinalNorm(t *testing.T) {
	for _, final := range []bool{false, true} {
		ps := graph.NewParams(graph.Float64, 1)
		cfg := tinyConfig(false)
		cfg.FinalNorm = final
		if _, err := graph.Compile(ps, seq2seqBuild(cfg, 1, 3, 2), false); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"enc.ln.g", "enc.ln.b", "dec.ln.g", "dec.ln.b"} {
			if got := ps.Lookup(name) != nil; got != final {
				t.Errorf("final_norm %v: parameter %s present = %v", final, name, got)
			}
		}
	}
}

// TestTiedOutput: with TieOutput the logits are h E_tgtᵀ + b_out, computed
// here by hand from the decoder's output, and there is no out.w.
func TestTiedOutput(t *testing.T) {
	const B, S, T = 2, 4, 3
	cfg := tinyConfig(false)
	cfg.TieOutput = true
	ps := graph.NewParams(graph.Float64, 5)
	var h, logits *graph.Node
	prog, err := graph.Compile(ps, func(b *graph.Builder) error {
		src, srcMask := b.IndexInput("src", B, S), b.Input("src_mask", B, S)
		tgtIn, tgtMask := b.IndexInput("tgt_in", B, T), b.Input("tgt_mask", B, T)
		var w, bias *graph.Node
		h, w, bias = Seq2Seq{Config: cfg}.Decode(b, src, srcMask, tgtIn, tgtMask)
		logits = graph.Linear(h, w, bias)
		b.Output("h", h)
		b.Output("logits", logits)
		return nil
	}, false)
	if err != nil {
		t.Fatal(err)
	}
	if ps.Lookup("out.w") != nil {
		t.Error("a tied model has its own out.w")
	}
	got := runSeq2Seq(t, prog, []int{4, 5, 6, 4, 5, 4, 0, 0}, srcMaskBS, []int{2, 4, 0, 2, 5, 4}, tgtMaskBT)
	hv, _, _ := prog.Output("h")
	// Give the bias values, so that it is read too.
	bias := ps.Lookup("out.b")
	bv := make([]float64, cfg.TgtVocab)
	for i := range bv {
		bv[i] = 0.1 * float64(i)
	}
	if err := bias.SetValues(bv); err != nil {
		t.Fatal(err)
	}
	got = runSeq2Seq(t, prog, []int{4, 5, 6, 4, 5, 4, 0, 0}, srcMaskBS, []int{2, 4, 0, 2, 5, 4}, tgtMaskBT)
	table := ps.Lookup("tgt_emb.table").Values()
	d, v := cfg.DModel, cfg.TgtVocab
	for r := range B * T {
		for j := range v {
			want := bv[j]
			for k := range d {
				want += hv[r*d+k] * table[j*d+k]
			}
			if math.Abs(got[r*v+j]-want) > 1e-12 {
				t.Fatalf("logit [%d, %d] = %v, want h E^T + b = %v", r, j, got[r*v+j], want)
			}
		}
	}
}

// TestAttentionDropout: with attention dropout, a training graph draws a
// weights mask per attention layer, [B, H, N, M], and dropping changes
// the loss; an evaluation graph has no mask and equals the model without
// attention dropout, to the bit.
func TestAttentionDropout(t *testing.T) {
	const B, S, T = 2, 4, 3
	cfg := tinyConfig(false)
	cfg.Dropout = 0
	src, tgt := []int{4, 5, 6, 4, 5, 4, 0, 0}, []int{2, 4, 0, 2, 5, 4}
	build := func(cfg Seq2SeqConfig) graph.BuildFunc {
		return func(b *graph.Builder) error {
			logits := Seq2Seq{Config: cfg}.Forward(b, b.IndexInput("src", B, S), b.Input("src_mask", B, S),
				b.IndexInput("tgt_in", B, T), b.Input("tgt_mask", B, T))
			b.Output("logits", logits)
			b.SetLoss(graph.Sum(logits))
			return nil
		}
	}
	dropped := cfg
	dropped.Attention.Dropout = 0.5
	ps := graph.NewParams(graph.Float64, 3)
	train, err := graph.Compile(ps, build(dropped), true)
	if err != nil {
		t.Fatal(err)
	}
	for name, shape := range map[string][]int{
		"enc.0.self.attn_drop": {B, 2, S, S}, "dec.1.self.attn_drop": {B, 2, T, T}, "dec.0.cross.attn_drop": {B, 2, T, S},
	} {
		if got := train.InputShape(name); !slices.Equal(got, shape) {
			t.Errorf("mask %s has shape %v, want %v", name, got, shape)
		}
	}
	plain, err := graph.Compile(ps, build(cfg), false)
	if err != nil {
		t.Fatal(err)
	}
	eval, err := graph.Compile(ps, build(dropped), false)
	if err != nil {
		t.Fatal(err)
	}
	if eval.HasInput("enc.0.self.attn_drop") {
		t.Error("an evaluation graph declares an attention dropout mask")
	}
	want := runSeq2Seq(t, plain, src, srcMaskBS, tgt, tgtMaskBT)
	if got := runSeq2Seq(t, eval, src, srcMaskBS, tgt, tgtMaskBT); !slices.Equal(got, want) {
		t.Error("evaluation with attention dropout differs from the model without it")
	}
	train.DrawDropout(rand.New(rand.NewPCG(1, 1)))
	if got := runSeq2Seq(t, train, src, srcMaskBS, tgt, tgtMaskBT); slices.Equal(got, want) {
		t.Error("dropping attention weights changed nothing")
	}
	if _, err := NewKernel(AttentionConfig{Score: ScoreAdditive, Dropout: 0.1}); err == nil {
		t.Error("attention dropout accepted for the additive score")
	}
}

// seq2seqBuild adds a Seq2Seq model over inputs src, src_mask, tgt_in,
// tgt_mask of batch B, source length S and target length T, with its
// logits as output "logits".
func seq2seqBuild(cfg Seq2SeqConfig, batch, srcLen, tgtLen int) graph.BuildFunc {
	return func(b *graph.Builder) error {
		logits := Seq2Seq{Config: cfg}.Forward(b,
			b.IndexInput("src", batch, srcLen), b.Input("src_mask", batch, srcLen),
			b.IndexInput("tgt_in", batch, tgtLen), b.Input("tgt_mask", batch, tgtLen))
		b.Output("logits", logits)
		return nil
	}
}

// runSeq2Seq evaluates logits [B, T, V] for one batch.
func runSeq2Seq(t *testing.T, prog *graph.Program, src []int, srcMask []float64, tgtIn []int, tgtMask []float64) []float64 {
	t.Helper()
	if err := prog.FeedIndices("src", src); err != nil {
		t.Fatal(err)
	}
	if err := prog.Feed("src_mask", srcMask); err != nil {
		t.Fatal(err)
	}
	if err := prog.FeedIndices("tgt_in", tgtIn); err != nil {
		t.Fatal(err)
	}
	if err := prog.Feed("tgt_mask", tgtMask); err != nil {
		t.Fatal(err)
	}
	if err := prog.Run(); err != nil {
		t.Fatal(err)
	}
	out, _, _ := prog.Output("logits")
	return out
}

// TestDecoderIsCausal changes the target token at position k and checks
// that the logits of positions < k do not change at all, and that those of
// position k do (the test would pass vacuously otherwise).
func TestDecoderIsCausal(t *testing.T) {
	const B, S, T, V = 2, 3, 5, 6
	for _, preLN := range []bool{false, true} {
		cfg := tinyConfig(preLN)
		prog, err := graph.Compile(graph.NewParams(graph.Float64, 21), seq2seqBuild(cfg, B, S, T), false)
		if err != nil {
			t.Fatal(err)
		}
		src := []int{4, 5, 6, 6, 5, 0}
		srcMask := []float64{1, 1, 1, 1, 1, 0}
		tgt := []int{2, 4, 5, 4, 3, 2, 5, 5, 3, 0}
		tgtMask := []float64{1, 1, 1, 1, 1, 1, 1, 1, 1, 0}
		base := runSeq2Seq(t, prog, src, srcMask, tgt, tgtMask)
		for k := 1; k < T; k++ {
			changed := slices.Clone(tgt)
			changed[k] = 1 + (tgt[k]+1)%(V-1) // another id, in both rows
			changed[T+k] = 1 + (tgt[T+k]+1)%(V-1)
			got := runSeq2Seq(t, prog, src, srcMask, changed, tgtMask)
			for row := range B {
				for pos := range T {
					a := base[(row*T+pos)*V : (row*T+pos+1)*V]
					g := got[(row*T+pos)*V : (row*T+pos+1)*V]
					if pos < k && !slices.Equal(a, g) {
						t.Fatalf("preLN=%v: changing position %d changed the logits of position %d: %v → %v", preLN, k, pos, a, g)
					}
					if pos == k && slices.Equal(a, g) {
						t.Fatalf("preLN=%v: changing position %d left its own logits unchanged", preLN, k)
					}
				}
			}
		}
	}
}

// TestSourcePadding: the logits do not depend on the ids at padded source
// positions, and a sentence padded in a batch scores as it does alone.
func TestSourcePadding(t *testing.T) {
	const S, T, V = 5, 3, 6
	cfg := tinyConfig(false)
	ps := graph.NewParams(graph.Float64, 22)
	batched, err := graph.Compile(ps, seq2seqBuild(cfg, 2, S, T), false)
	if err != nil {
		t.Fatal(err)
	}
	alone, err := graph.Compile(ps, seq2seqBuild(cfg, 1, 2, T), false)
	if err != nil {
		t.Fatal(err)
	}
	// Row 0 is a 2-token sentence padded to 5; row 1 a full one.
	srcMask := []float64{1, 1, 0, 0, 0, 1, 1, 1, 1, 1}
	tgt := []int{2, 4, 5, 2, 5, 4}
	tgtMask := ones(2 * T)
	a := runSeq2Seq(t, batched, []int{4, 6, 0, 0, 0, 5, 6, 4, 4, 5}, srcMask, tgt, tgtMask)
	b := runSeq2Seq(t, batched, []int{4, 6, 5, 1, 3, 5, 6, 4, 4, 5}, srcMask, tgt, tgtMask)
	if !slices.Equal(a, b) {
		t.Fatalf("ids at padded source positions changed the logits:\n%v\n%v", a, b)
	}
	single := runSeq2Seq(t, alone, []int{4, 6}, []float64{1, 1}, tgt[:T], ones(T))
	for i, want := range single {
		if math.Abs(a[i]-want) > 1e-12 {
			t.Fatalf("logit %d is %v padded in a batch, %v alone", i, a[i], want)
		}
	}
	if len(single) != T*V {
		t.Fatalf("%d logits, want %d", len(single), T*V)
	}
}

// TestSeq2SeqFloat32 runs the model in float32 with the float64 model's
// weights, and a float32 training program with dropout: the logits agree
// to float32 precision and the loss falls.
func TestSeq2SeqFloat32(t *testing.T) {
	const B, S, T = 2, 3, 4
	cfg := tinyConfig(false)
	p64 := graph.NewParams(graph.Float64, 23)
	p32 := graph.NewParams(graph.Float32, 23)
	e64, err := graph.Compile(p64, seq2seqBuild(cfg, B, S, T), false)
	if err != nil {
		t.Fatal(err)
	}
	e32, err := graph.Compile(p32, seq2seqBuild(cfg, B, S, T), false)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range p64.List() {
		if err := p32.Lookup(p.Name).SetValues(p.Values()); err != nil {
			t.Fatal(err)
		}
	}
	src, srcMask := []int{4, 5, 6, 6, 4, 0}, []float64{1, 1, 1, 1, 1, 0}
	tgt, tgtMask := []int{2, 4, 5, 4, 2, 5, 3, 0}, []float64{1, 1, 1, 1, 1, 1, 1, 0}
	l64 := runSeq2Seq(t, e64, src, srcMask, tgt, tgtMask)
	l32 := runSeq2Seq(t, e32, src, srcMask, tgt, tgtMask)
	for i := range l64 {
		if math.Abs(l64[i]-l32[i]) > 1e-5*math.Max(1, math.Abs(l64[i])) {
			t.Fatalf("logit %d: float32 %v, float64 %v", i, l32[i], l64[i])
		}
	}

	// Training: fit the logits of fixed inputs to fixed targets by MSE
	// (cross-entropy lives in package losses), with dropout on.
	target := randn(rand.New(rand.NewPCG(1, 2)), B*T*cfg.TgtVocab)
	train, err := graph.Compile(p32, func(b *graph.Builder) error {
		logits := Seq2Seq{Config: cfg}.Forward(b,
			b.IndexConstant("src_c", []int{B, S}, src), b.Constant("src_mask_c", []int{B, S}, srcMask),
			b.IndexConstant("tgt_c", []int{B, T}, tgt), b.Constant("tgt_mask_c", []int{B, T}, tgtMask))
		d := graph.Sub(logits, b.Constant("target", []int{B, T, cfg.TgtVocab}, target))
		b.SetLoss(graph.Mean(graph.Square(d)))
		return nil
	}, true)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	opt := optim.NewAdam(0.02)
	var first, last float64
	for step := range 60 {
		train.DrawDropout(rng)
		if err := train.Run(); err != nil {
			t.Fatal(err)
		}
		if step == 0 {
			first = train.Loss()
		}
		last = train.Loss()
		if math.IsNaN(last) {
			t.Fatalf("loss is NaN at step %d", step)
		}
		if _, err := opt.Step(train); err != nil {
			t.Fatal(err)
		}
	}
	if !(last < first/2) {
		t.Fatalf("float32 training loss %v → %v did not halve", first, last)
	}
}

func TestSinusoidalEncoding(t *testing.T) {
	const d = 6
	pe := SinusoidalEncoding(3, d)
	cases := []struct {
		pos, j int
		want   float64
	}{
		{0, 0, 0}, {0, 1, 1}, {0, 4, 0}, {0, 5, 1},
		{1, 0, 0.841470984807897},   // sin 1
		{1, 1, 0.540302305868140},   // cos 1
		{2, 2, 0.0926985007787273},  // sin(2 / 10000^(2/6))
		{2, 3, 0.995694224123740},   // cos(2 / 10000^(2/6))
		{2, 4, 0.00430885604674281}, // sin(2 / 10000^(4/6))
		{2, 5, 0.999990716836696},   // cos(2 / 10000^(4/6))
	}
	for _, c := range cases {
		if got := pe[c.pos*d+c.j]; math.Abs(got-c.want) > 1e-14 {
			t.Errorf("PE(%d, %d) = %.15g, want %.15g", c.pos, c.j, got, c.want)
		}
	}
}

func TestSeq2SeqConfigValidate(t *testing.T) {
	good := tinyConfig(false)
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	bad := []func(c *Seq2SeqConfig){
		func(c *Seq2SeqConfig) { c.DModel = 0 },
		func(c *Seq2SeqConfig) { c.Heads = 3 },
		func(c *Seq2SeqConfig) { c.FF = 0 },
		func(c *Seq2SeqConfig) { c.EncLayers = 0 },
		func(c *Seq2SeqConfig) { c.DecLayers = -1 },
		func(c *Seq2SeqConfig) { c.Dropout = 1 },
		func(c *Seq2SeqConfig) { c.SrcVocab = 0 },
		func(c *Seq2SeqConfig) { c.TgtVocab = 0 },
		func(c *Seq2SeqConfig) { c.MaxLen = 0 },
		func(c *Seq2SeqConfig) { c.Attention.Kind = "nope" },
	}
	for i, f := range bad {
		c := good
		f(&c)
		if c.Validate() == nil {
			t.Errorf("case %d: invalid config %+v accepted", i, c)
		}
	}
	// A graph longer than max_len is a build error, not a panic.
	if _, err := graph.Compile(graph.NewParams(graph.Float64, 1), seq2seqBuild(good, 1, 9, 2), false); err == nil {
		t.Error("source longer than max_len accepted")
	}
}

// TestCausalAttention checks that causal ScaledDotProduct with padded
// keys matches a plain-Go reference: query n attends to the unpadded keys
// j ≤ n only.
func TestCausalAttention(t *testing.T) {
	const B, T, d = 2, 3, 2
	rng := rand.New(rand.NewPCG(8, 8))
	q, k, v := randn(rng, B*T*d), randn(rng, B*T*d), randn(rng, B*T*d)
	keyMask := []float64{1, 1, 1, 1, 0, 1} // second sentence: key 1 padded
	outs := evaluate(t, graph.NewParams(graph.Float64, 1), func(b *graph.Builder) error {
		mask := Mask{Keys: b.Constant("key_mask", []int{B, T}, keyMask), Causal: true}
		qn, kn := b.Constant("q", []int{B, T, d}, q), b.Constant("k", []int{B, T, d}, k)
		b.Output("out", ScaledDotProduct{}.Attend(b, "att", qn, kn, b.Constant("v", []int{B, T, d}, v), 1, mask))
		b.Output("w", ScaledDotProduct{}.Weights(b, "att", qn, kn, nil, 1, mask))
		return nil
	}, "out", "w")
	visible := []float64{
		1, 0, 0, 1, 1, 0, 1, 1, 1,
		1, 0, 0, 1, 0, 0, 1, 0, 1,
	}
	out, w := outs[0], outs[1]
	for bi := range B {
		for n := range T {
			ref := make([]float64, T)
			var z float64
			for j := range T {
				if visible[(bi*T+n)*T+j] == 0 {
					continue
				}
				var s float64
				for c := range d {
					s += q[(bi*T+n)*d+c] * k[(bi*T+j)*d+c]
				}
				ref[j] = math.Exp(s / math.Sqrt(d))
				z += ref[j]
			}
			for j := range T {
				if got := w[(bi*T+n)*T+j]; math.Abs(got-ref[j]/z) > 1e-15 || (ref[j] == 0 && got != 0) {
					t.Errorf("weight [%d, %d, %d] = %v, want %v", bi, n, j, got, ref[j]/z)
				}
			}
			for c := range d {
				var want float64
				for j := range T {
					want += ref[j] / z * v[(bi*T+j)*d+c]
				}
				if got := out[(bi*T+n)*d+c]; math.Abs(got-want) > 1e-14 {
					t.Errorf("out [%d, %d, %d] = %v, want %v", bi, n, c, got, want)
				}
			}
		}
	}
}
