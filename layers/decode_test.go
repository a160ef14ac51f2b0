package layers

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/probformer/probformer/datasets"
	"github.com/probformer/probformer/graph"
	"github.com/probformer/probformer/graph/optim"
)

// Ids of the toy scorer's words, after the four special tokens.
const (
	tokA = 4
	tokB = 5
	tokC = 6
)

// tableScorer is a hand-written model over 7 ids: the next-token
// probabilities given the prefix, the remaining mass spread evenly over the
// ids not listed. From <bos>: A .5, B .4; after A: C .6, <eos> .35; after
// B: <eos> .9; otherwise <eos> .94. Greedy takes A C <eos> (P = .282), but
// B <eos> is more probable (P = .36): a beam of 2 finds it.
type tableScorer struct{ calls int }

func (s *tableScorer) LogProbs(src, prefixes [][]int) ([][]float64, error) {
	s.calls++
	table := map[string]map[int]float64{
		"[2]":   {tokA: .5, tokB: .4, datasets.EOSID: .04},
		"[2 4]": {tokC: .6, datasets.EOSID: .35},
		"[2 5]": {datasets.EOSID: .9, tokC: .05},
	}
	out := make([][]float64, len(prefixes))
	for r, p := range prefixes {
		if len(src[r]) != 1 {
			return nil, fmt.Errorf("row %d: source %v", r, src[r])
		}
		probs, ok := table[fmt.Sprint(p)]
		if !ok {
			probs = map[int]float64{datasets.EOSID: .94}
		}
		rest := 1.0
		for _, q := range probs {
			rest -= q
		}
		out[r] = make([]float64, 7)
		for v := range out[r] {
			q, ok := probs[v]
			if !ok {
				q = rest / float64(7-len(probs))
			}
			out[r][v] = math.Log(q)
		}
	}
	return out, nil
}

func TestDecodingKnownAnswer(t *testing.T) {
	// Reference log-probabilities (30-digit decimal arithmetic).
	const (
		logAC  = -1.26584820804402 // ln(.5 · .6 · .94)
		logB   = -1.02165124753198 // ln(.4 · .9)
		logA   = -0.693147180559945
		logBc  = -0.916290731874155
		logACc = -1.20397280432594 // ln(.5 · .6), cut before <eos>
	)
	greedyCases := []struct {
		maxLen int
		want   Hypothesis
	}{
		{5, Hypothesis{Tokens: []int{tokA, tokC}, LogProb: logAC, Score: logAC, Finished: true}},
		{2, Hypothesis{Tokens: []int{tokA, tokC}, LogProb: logACc, Score: logACc, Finished: false}},
	}
	for _, c := range greedyCases {
		got, err := Greedy(&tableScorer{}, [][]int{{7}}, c.maxLen)
		if err != nil {
			t.Fatal(err)
		}
		checkHyps(t, fmt.Sprintf("greedy max %d", c.maxLen), got, []Hypothesis{c.want})
	}
	beamCases := []struct {
		opt  BeamOptions
		want []Hypothesis
	}{
		{BeamOptions{Size: 1, MaxLen: 5}, []Hypothesis{
			{Tokens: []int{tokA, tokC}, LogProb: logAC, Score: logAC, Finished: true}}},
		{BeamOptions{Size: 2, MaxLen: 5}, []Hypothesis{
			{Tokens: []int{tokB}, LogProb: logB, Score: logB, Finished: true},
			{Tokens: []int{tokA, tokC}, LogProb: logAC, Score: logAC, Finished: true}}},
		// α = 2 divides by ((5+n)/6)²: the longer A C <eos> wins.
		{BeamOptions{Size: 2, MaxLen: 5, Alpha: 2}, []Hypothesis{
			{Tokens: []int{tokA, tokC}, LogProb: logAC, Score: -0.712039617024763, Finished: true},
			{Tokens: []int{tokB}, LogProb: logB, Score: -0.750600916554109, Finished: true}}},
		// Cut after one token: both prefixes come back unfinished.
		{BeamOptions{Size: 2, MaxLen: 1}, []Hypothesis{
			{Tokens: []int{tokA}, LogProb: logA, Score: logA},
			{Tokens: []int{tokB}, LogProb: logBc, Score: logBc}}},
	}
	for _, c := range beamCases {
		got, err := BeamSearch(&tableScorer{}, []int{7}, c.opt)
		if err != nil {
			t.Fatal(err)
		}
		checkHyps(t, fmt.Sprintf("beam %+v", c.opt), got, c.want)
	}
	if _, err := BeamSearch(&tableScorer{}, []int{7}, BeamOptions{Size: 0, MaxLen: 3}); err == nil {
		t.Error("beam size 0 accepted")
	}
	if _, err := Greedy(&tableScorer{}, [][]int{{7}}, 0); err == nil {
		t.Error("max length 0 accepted")
	}
}

func checkHyps(t *testing.T, name string, got, want []Hypothesis) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d hypotheses %+v, want %d", name, len(got), got, len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if !slices.Equal(g.Tokens, w.Tokens) || g.Finished != w.Finished ||
			math.Abs(g.LogProb-w.LogProb) > 1e-14 || math.Abs(g.Score-w.Score) > 1e-14 {
			t.Errorf("%s: hypothesis %d is %+v, want %+v", name, i, g, w)
		}
	}
}

func TestLengthPenalty(t *testing.T) {
	cases := []struct {
		n     int
		alpha float64
		want  float64
	}{
		{1, 0, 1}, {1, 1, 1}, {7, 1, 2}, {3, 0.6, 1.18840163864400}, {13, 2, 9},
	}
	for _, c := range cases {
		if got := LengthPenalty(c.n, c.alpha); math.Abs(got-c.want) > 1e-14 {
			t.Errorf("LengthPenalty(%d, %g) = %.15g, want %.15g", c.n, c.alpha, got, c.want)
		}
	}
}

// decodeSources are unpadded source sentences for the random tiny model.
var decodeSources = [][]int{{4, 5, 6}, {6, 4}, {5}}

// TestBeamSearchOnModel decodes with a random tiny Seq2Seq: a beam of 1
// gives exactly the greedy hypothesis, a beam of 4 finds hypotheses at least
// as probable as the greedy one, and every reported log-probability equals
// the model's teacher-forced log-probability of the hypothesis.
func TestBeamSearchOnModel(t *testing.T) {
	const S, T = 3, 6
	cfg := tinyConfig(false)
	ps := graph.NewParams(graph.Float64, 31)
	model := Seq2Seq{Config: cfg}
	greedyTr, err := NewTranslator(ps, model, len(decodeSources), S, T)
	if err != nil {
		t.Fatal(err)
	}
	beam1, err := NewTranslator(ps, model, 1, S, T)
	if err != nil {
		t.Fatal(err)
	}
	beam4, err := NewTranslator(ps, model, 4, S, T)
	if err != nil {
		t.Fatal(err)
	}
	// Glorot-sized output weights give nearly flat, repetitive predictions;
	// larger ones make the hypotheses differ.
	rng := rand.New(rand.NewPCG(7, 7))
	for _, name := range []string{"out.w", "out.b"} {
		p := ps.Lookup(name)
		if err := p.SetValues(randn(rng, len(p.Values()))); err != nil {
			t.Fatal(err)
		}
	}
	greedy, err := Greedy(greedyTr, decodeSources, greedyTr.MaxLen())
	if err != nil {
		t.Fatal(err)
	}
	teacher, err := graph.Compile(ps, seq2seqBuild(cfg, 1, S, T), false)
	if err != nil {
		t.Fatal(err)
	}
	for i, src := range decodeSources {
		one, err := BeamSearch(beam1, src, BeamOptions{Size: 1, MaxLen: T})
		if err != nil {
			t.Fatal(err)
		}
		if len(one) != 1 || !slices.Equal(one[0].Tokens, greedy[i].Tokens) || one[0].Finished != greedy[i].Finished ||
			math.Abs(one[0].LogProb-greedy[i].LogProb) > 1e-12 {
			t.Errorf("source %v: beam of 1 gives %+v, greedy %+v", src, one, greedy[i])
		}
		four, err := BeamSearch(beam4, src, BeamOptions{Size: 4, MaxLen: T})
		if err != nil {
			t.Fatal(err)
		}
		if len(four) == 0 || four[0].LogProb < greedy[i].LogProb-1e-12 {
			t.Errorf("source %v: beam of 4 best %+v, less probable than greedy %+v", src, four, greedy[i])
		}
		for _, h := range append(four, greedy[i]) {
			want := teacherForcedLogProb(t, teacher, src, h, S, T, cfg.TgtVocab)
			if math.Abs(h.LogProb-want) > 1e-10 {
				t.Errorf("source %v: hypothesis %+v has log-probability %v under the model", src, h, want)
			}
		}
		t.Logf("source %v: greedy %v (%.4f), beam %v (%.4f)", src, greedy[i].Tokens, greedy[i].LogProb, four[0].Tokens, four[0].LogProb)
	}
	// Batched, several sentences' beams share each scorer call (here 11
	// rows: two sentences of 4 beams a call, the last group smaller), and
	// each sentence gets what it gets alone, to the bit.
	batchTr, err := NewTranslator(ps, model, 11, S, T)
	if err != nil {
		t.Fatal(err)
	}
	batched, err := BeamSearchBatch(batchTr, decodeSources, BeamOptions{Size: 4, MaxLen: T, Alpha: 0.6}, 11)
	if err != nil {
		t.Fatal(err)
	}
	for i, src := range decodeSources {
		alone, err := BeamSearch(beam4, src, BeamOptions{Size: 4, MaxLen: T, Alpha: 0.6})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(batched[i], alone) {
			t.Errorf("source %v: batched beam search gives %+v, alone %+v", src, batched[i], alone)
		}
	}
	if _, err := BeamSearchBatch(batchTr, decodeSources, BeamOptions{Size: 4, MaxLen: T}, 3); err == nil {
		t.Error("a batch of 3 rows accepted for beams of 4")
	}
}

// teacherForcedLogProb scores hypothesis h in one forward pass with
// <bos> h.Tokens as decoder input: Σ_t log softmax(logits[t])[y_{t+1}].
func teacherForcedLogProb(t *testing.T, prog *graph.Program, src []int, h Hypothesis, srcLen, tgtLen, vocab int) float64 {
	t.Helper()
	out := slices.Clone(h.Tokens)
	if h.Finished {
		out = append(out, datasets.EOSID)
	}
	in := append([]int{datasets.BOSID}, h.Tokens...)[:len(out)]
	srcIDs, srcMask := make([]int, srcLen), make([]float64, srcLen)
	copy(srcIDs, src)
	for j := range src {
		srcMask[j] = 1
	}
	tgtIn := make([]int, tgtLen)
	copy(tgtIn, in)
	logits := runSeq2Seq(t, prog, srcIDs, srcMask, tgtIn, ones(tgtLen))
	var lp float64
	for pos, y := range out {
		row := logits[pos*vocab : (pos+1)*vocab]
		m := slices.Max(row)
		var z float64
		for _, v := range row {
			z += math.Exp(v - m)
		}
		lp += row[y] - m - math.Log(z)
	}
	return lp
}

// TestDecodeTrainedCopyModel trains a tiny Seq2Seq to copy sequences of the
// words 4, 5, 6 and checks that greedy and beam search both return the
// copy: decoding on a model whose answer is known.
func TestDecodeTrainedCopyModel(t *testing.T) {
	const S, T, V = 3, 4, 7
	var sources [][]int
	for n := 1; n <= S; n++ {
		for code := range int(math.Pow(3, float64(n))) {
			s := make([]int, n)
			for j := range s {
				s[j] = 4 + code%3
				code /= 3
			}
			sources = append(sources, s)
		}
	}
	B := len(sources)
	src, srcMask := make([]int, B*S), make([]float64, B*S)
	tgtIn, tgtMask := make([]int, B*T), make([]float64, B*T)
	oneHot := make([]float64, B*T*V)
	for i, s := range sources {
		copy(src[i*S:], s)
		in := append([]int{datasets.BOSID}, s...)
		out := append(slices.Clone(s), datasets.EOSID)
		copy(tgtIn[i*T:], in)
		for j := range s {
			srcMask[i*S+j] = 1
		}
		for j, y := range out {
			tgtMask[i*T+j] = 1
			oneHot[(i*T+j)*V+y] = 1
		}
	}
	cfg := Seq2SeqConfig{DModel: 16, Heads: 2, FF: 32, EncLayers: 1, DecLayers: 1, PreLN: true,
		SrcVocab: V, TgtVocab: V, MaxLen: T}
	ps := graph.NewParams(graph.Float32, 41)
	train, err := graph.Compile(ps, func(b *graph.Builder) error {
		logits := Seq2Seq{Config: cfg}.Forward(b,
			b.IndexConstant("src", []int{B, S}, src), b.Constant("src_mask", []int{B, S}, srcMask),
			b.IndexConstant("tgt_in", []int{B, T}, tgtIn), b.Constant("tgt_mask", []int{B, T}, tgtMask))
		// Cross-entropy over the real target tokens.
		nll := graph.Sum(graph.Mul(b.Constant("one_hot", []int{B, T, V}, oneHot), graph.LogSoftmax(logits, 2)))
		b.SetLoss(graph.Scale(nll, -1/float64(countOnes(tgtMask))))
		return nil
	}, true)
	if err != nil {
		t.Fatal(err)
	}
	opt := optim.NewAdam(0.01)
	for range 150 {
		if err := train.Run(); err != nil {
			t.Fatal(err)
		}
		if _, err := opt.Step(train); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("loss after training: %.4g", train.Loss())

	tr, err := NewTranslator(ps, Seq2Seq{Config: cfg}, B, S, T)
	if err != nil {
		t.Fatal(err)
	}
	greedy, err := Greedy(tr, sources, T)
	if err != nil {
		t.Fatal(err)
	}
	for i, h := range greedy {
		if !h.Finished || !slices.Equal(h.Tokens, sources[i]) {
			t.Errorf("greedy decodes %v as %+v", sources[i], h)
		}
	}
	beamTr, err := NewTranslator(ps, Seq2Seq{Config: cfg}, 3, S, T)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 5))
	for _, i := range rng.Perm(B)[:5] {
		hyps, err := BeamSearch(beamTr, sources[i], BeamOptions{Size: 3, MaxLen: T, Alpha: 0.6})
		if err != nil {
			t.Fatal(err)
		}
		if !hyps[0].Finished || !slices.Equal(hyps[0].Tokens, sources[i]) {
			t.Errorf("beam search decodes %v as %+v", sources[i], hyps[0])
		}
	}
}

func countOnes(m []float64) int {
	n := 0
	for _, v := range m {
		if v == 1 {
			n++
		}
	}
	return n
}
