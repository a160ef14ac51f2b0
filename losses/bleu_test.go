package losses

import (
	"math"
	"strings"
	"testing"
)

// sacreBLEU's README example (test/test_bleu.py of sacreBLEU).
var (
	bleuReadmeHyps = []string{
		"The dog bit the man.",
		"It wasn't surprising.",
		"The man had just bitten him.",
	}
	bleuReadmeRefs = [][]string{
		{"The dog bit the man.", "It was not unexpected.", "The man bit him first."},
		{"The dog had bit the man.", "No one was surprised.", "The man had bitten the dog."},
	}
)

// Expected values come from sacreBLEU's published test vectors (48.530827,
// 49.1919566, 83.75922397) and, for the other cases, from a line-by-line
// transcription of sacreBLEU 2.x's BLEU in Python, printed with repr.
func TestCorpusBLEU(t *testing.T) {
	for _, test := range []struct {
		name       string
		hyps       []string
		refs       [][]string
		opt        BLEUOptions
		score      float64
		counts     [4]int
		totals     [4]int
		precisions [4]float64
		bp         float64
		sysLen     int
		refLen     int
		signature  string
	}{
		{
			name: "readme 13a", hyps: bleuReadmeHyps, refs: bleuReadmeRefs,
			score:      48.530827009929865,
			counts:     [4]int{14, 7, 5, 3},
			totals:     [4]int{17, 14, 11, 8},
			precisions: [4]float64{82.3529411764706, 50.0, 45.45454545454545, 37.5},
			bp:         0.9428731438548749, sysLen: 17, refLen: 18,
			signature: "nrefs:2|case:mixed|eff:no|tok:13a|smooth:exp|version:probformer",
		},
		{
			name: "readme 13a no smoothing", hyps: bleuReadmeHyps, refs: bleuReadmeRefs,
			opt:        BLEUOptions{Tokenize: Tokenizer13a, Smooth: BLEUSmoothNone},
			score:      48.530827009929865,
			counts:     [4]int{14, 7, 5, 3},
			totals:     [4]int{17, 14, 11, 8},
			precisions: [4]float64{82.3529411764706, 50.0, 45.45454545454545, 37.5},
			bp:         0.9428731438548749, sysLen: 17, refLen: 18,
			signature: "nrefs:2|case:mixed|eff:no|tok:13a|smooth:none|version:probformer",
		},
		{
			name: "readme none", hyps: bleuReadmeHyps, refs: bleuReadmeRefs,
			opt:        BLEUOptions{Tokenize: TokenizerNone},
			score:      49.19195660047277,
			counts:     [4]int{10, 6, 4, 2},
			totals:     [4]int{14, 11, 8, 5},
			precisions: [4]float64{71.42857142857143, 54.54545454545455, 50.0, 40.0},
			bp:         0.9310627797040228, sysLen: 14, refLen: 15,
			signature: "nrefs:2|case:mixed|eff:no|tok:none|smooth:exp|version:probformer",
		},
		{
			// Empty hypotheses are scored, not removed: BP = 0, score 0.
			name: "all hypotheses empty", hyps: []string{"", "", ""}, refs: bleuReadmeRefs,
			score: 0, bp: 0, sysLen: 0, refLen: 17,
			signature: "nrefs:2|case:mixed|eff:no|tok:13a|smooth:exp|version:probformer",
		},
		{
			name: "one hypothesis empty",
			hyps: []string{"The dog bit the man.", "", "The man had just bitten him."}, refs: bleuReadmeRefs,
			score:      41.62815379162543,
			counts:     [4]int{12, 7, 5, 3},
			totals:     [4]int{13, 11, 9, 7},
			precisions: [4]float64{92.3076923076923, 63.63636363636363, 55.55555555555556, 42.857142857142854},
			bp:         0.6807123983233854, sysLen: 13, refLen: 18,
			signature: "nrefs:2|case:mixed|eff:no|tok:13a|smooth:exp|version:probformer",
		},
		{
			// An empty reference string means one reference fewer for that
			// sentence; the other stream holds the same sentences as above.
			name: "variable number of references",
			hyps: bleuReadmeHyps,
			refs: [][]string{
				{"The dog bit the man.", "It was not unexpected.", "The man bit him first."},
				{"The dog had bit the man.", "", "The man had bitten the dog."},
			},
			score:      48.530827009929865,
			counts:     [4]int{14, 7, 5, 3},
			totals:     [4]int{17, 14, 11, 8},
			precisions: [4]float64{82.3529411764706, 50.0, 45.45454545454545, 37.5},
			bp:         0.9428731438548749, sysLen: 17, refLen: 18,
			signature: "nrefs:var|case:mixed|eff:no|tok:13a|smooth:exp|version:probformer",
		},
		{
			name: "no 4-gram match, exp smoothing",
			hyps: []string{"the cat on the mat sat"}, refs: [][]string{{"the cat sat on the mat"}},
			score:      39.76353643835254,
			counts:     [4]int{6, 3, 1, 0},
			totals:     [4]int{6, 5, 4, 3},
			precisions: [4]float64{100, 60, 25, 16.666666666666668},
			bp:         1, sysLen: 6, refLen: 6,
			signature: "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:probformer",
		},
		{
			name: "no 4-gram match, no smoothing",
			hyps: []string{"the cat on the mat sat"}, refs: [][]string{{"the cat sat on the mat"}},
			opt:        BLEUOptions{Smooth: BLEUSmoothNone},
			score:      0,
			counts:     [4]int{6, 3, 1, 0},
			totals:     [4]int{6, 5, 4, 3},
			precisions: [4]float64{100, 60, 25, 0},
			bp:         1, sysLen: 6, refLen: 6,
			signature: "nrefs:1|case:mixed|eff:no|tok:13a|smooth:none|version:probformer",
		},
		{
			name: "hypothesis longer than reference",
			hyps: []string{"the cat sat on the big mat today"}, refs: [][]string{{"the cat sat on the mat"}},
			score:      54.10822690539397,
			counts:     [4]int{6, 4, 3, 2},
			totals:     [4]int{8, 7, 6, 5},
			precisions: [4]float64{75, 57.142857142857146, 50, 40},
			bp:         1, sysLen: 8, refLen: 6,
			signature: "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:probformer",
		},
		{
			// "the" is matched once: its count is clipped by the reference's.
			name: "repeated words are clipped, exp smoothing",
			hyps: []string{"the the the the"}, refs: [][]string{{"the cat"}},
			score:      15.97357760615681,
			counts:     [4]int{1, 0, 0, 0},
			totals:     [4]int{4, 3, 2, 1},
			precisions: [4]float64{25, 16.666666666666668, 12.5, 12.5},
			bp:         1, sysLen: 4, refLen: 2,
			signature: "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:probformer",
		},
		{
			name: "repeated words are clipped, no smoothing",
			hyps: []string{"the the the the"}, refs: [][]string{{"the cat"}},
			opt:        BLEUOptions{Smooth: BLEUSmoothNone},
			score:      0,
			counts:     [4]int{1, 0, 0, 0},
			totals:     [4]int{4, 3, 2, 1},
			precisions: [4]float64{25, 0, 0, 0},
			bp:         1, sysLen: 4, refLen: 2,
			signature: "nrefs:1|case:mixed|eff:no|tok:13a|smooth:none|version:probformer",
		},
		{
			// sacreBLEU's test_case_statistics.
			name: "statistics",
			hyps: []string{"am I am a character sequence"}, refs: [][]string{{"I am a symbol string sequence a a"}},
			score:      23.263472697663296,
			counts:     [4]int{4, 2, 1, 0},
			totals:     [4]int{6, 5, 4, 3},
			precisions: [4]float64{66.66666666666667, 40, 25, 16.666666666666668},
			bp:         0.7165313105737893, sysLen: 6, refLen: 8,
			signature: "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:probformer",
		},
		{
			name:       "perfect match",
			hyps:       []string{"The dog bit the man.", "It was not unexpected."},
			refs:       [][]string{{"The dog bit the man.", "It was not unexpected."}},
			score:      100.00000000000004,
			counts:     [4]int{11, 9, 7, 5},
			totals:     [4]int{11, 9, 7, 5},
			precisions: [4]float64{100, 100, 100, 100},
			bp:         1, sysLen: 11, refLen: 11,
			signature: "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:probformer",
		},
		{
			// Fewer than four tokens in the whole corpus: there is no 4-gram
			// to count, the loop stops and log p₄ = log 0 makes the score 0
			// even with smoothing, as in sacreBLEU.
			name: "no 4-gram in the corpus",
			hyps: []string{"a b c"}, refs: [][]string{{"a b c"}},
			score:      0,
			counts:     [4]int{3, 2, 1, 0},
			totals:     [4]int{3, 2, 1, 0},
			precisions: [4]float64{100, 100, 100, 0},
			bp:         1, sysLen: 3, refLen: 3,
			signature: "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:probformer",
		},
		{
			// Reference lengths 4 and 6 are both 1 away from 5: the shorter
			// one counts.
			name: "closest reference length tie",
			hyps: []string{"a b c d e"}, refs: [][]string{{"a b c d"}, {"a b c d e f"}},
			score:      100.00000000000004,
			counts:     [4]int{5, 4, 3, 2},
			totals:     [4]int{5, 4, 3, 2},
			precisions: [4]float64{100, 100, 100, 100},
			bp:         1, sysLen: 5, refLen: 4,
			signature: "nrefs:2|case:mixed|eff:no|tok:13a|smooth:exp|version:probformer",
		},
	} {
		got, err := CorpusBLEU(test.hyps, test.refs, test.opt)
		if err != nil {
			t.Errorf("%s: %v", test.name, err)
			continue
		}
		if !bleuClose(got.Score, test.score, 1e-12) {
			t.Errorf("%s: score = %.17g, want %.17g", test.name, got.Score, test.score)
		}
		if got.Counts != test.counts || got.Totals != test.totals {
			t.Errorf("%s: counts/totals = %v/%v, want %v/%v", test.name, got.Counts, got.Totals, test.counts, test.totals)
		}
		for n := range got.Precisions {
			if !bleuClose(got.Precisions[n], test.precisions[n], 1e-12) {
				t.Errorf("%s: precisions = %v, want %v", test.name, got.Precisions, test.precisions)
				break
			}
		}
		if !bleuClose(got.BP, test.bp, 1e-12) {
			t.Errorf("%s: BP = %.17g, want %.17g", test.name, got.BP, test.bp)
		}
		if got.SysLen != test.sysLen || got.RefLen != test.refLen {
			t.Errorf("%s: lengths = %d/%d, want %d/%d", test.name, got.SysLen, got.RefLen, test.sysLen, test.refLen)
		}
		if got.Signature != test.signature {
			t.Errorf("%s: signature = %q, want %q", test.name, got.Signature, test.signature)
		}
	}
}

// sacreBLEU's published values, to its tolerance of 1e-6 and beyond.
func TestCorpusBLEUPublished(t *testing.T) {
	for _, test := range []struct {
		opt  BLEUOptions
		want float64
	}{
		{BLEUOptions{}, 48.530827},
		{BLEUOptions{Tokenize: Tokenizer13a}, 48.530827},
		{BLEUOptions{Tokenize: TokenizerNone}, 49.1919566},
		{BLEUOptions{Smooth: BLEUSmoothNone}, 48.530827},
	} {
		got, err := CorpusBLEU(bleuReadmeHyps, bleuReadmeRefs, test.opt)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(got.Score-test.want) > 1e-6 {
			t.Errorf("CorpusBLEU(%+v) = %.10f, want %.7f", test.opt, got.Score, test.want)
		}
	}
}

func TestBLEUScoreString(t *testing.T) {
	got, err := CorpusBLEU(bleuReadmeHyps, bleuReadmeRefs, BLEUOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const want = "BLEU = 48.53 82.4/50.0/45.5/37.5 (BP = 0.943 ratio = 0.944 hyp_len = 17 ref_len = 18)"
	if got.String() != want {
		t.Errorf("String() = %q, want %q", got.String(), want)
	}
	// ratio is 0 when the reference length is 0, as in sacreBLEU.
	const wantZero = "BLEU = 0.00 0.0/0.0/0.0/0.0 (BP = 1.000 ratio = 0.000 hyp_len = 0 ref_len = 0)"
	zero, err := ComputeBLEU([4]int{}, [4]int{}, 0, 0, BLEUSmoothExp)
	if err != nil {
		t.Fatal(err)
	}
	if zero.String() != wantZero {
		t.Errorf("String() = %q, want %q", zero.String(), wantZero)
	}
}

func TestComputeBLEU(t *testing.T) {
	for _, test := range []struct {
		name           string
		correct, total [4]int
		sysLen, refLen int
		smooth         string
		score, bp      float64
	}{
		// sacreBLEU's test_case_scoring.
		{"scoring", [4]int{9, 7, 5, 3}, [4]int{10, 8, 6, 4}, 11, 11, BLEUSmoothNone, 83.75922397086269, 1},
		{"scoring exp", [4]int{9, 7, 5, 3}, [4]int{10, 8, 6, 4}, 11, 11, BLEUSmoothExp, 83.75922397086269, 1},
		{"scoring default", [4]int{9, 7, 5, 3}, [4]int{10, 8, 6, 4}, 11, 11, "", 83.75922397086269, 1},
		// Brevity penalty exp(1 − 11/10).
		{"short", [4]int{9, 7, 5, 3}, [4]int{10, 8, 6, 4}, 10, 11, BLEUSmoothNone, 75.78847995449105, 0.9048374180359595},
		// Early stop when nothing matches: BP is still reported.
		{"no match", [4]int{}, [4]int{4, 4, 2, 1}, 4, 5, BLEUSmoothExp, 0, 0.7788007830714049},
		{"empty system", [4]int{}, [4]int{}, 0, 5, BLEUSmoothExp, 0, 0},
		{"all zero", [4]int{}, [4]int{}, 0, 0, BLEUSmoothExp, 0, 1},
	} {
		got, err := ComputeBLEU(test.correct, test.total, test.sysLen, test.refLen, test.smooth)
		if err != nil {
			t.Errorf("%s: %v", test.name, err)
			continue
		}
		if !bleuClose(got.Score, test.score, 1e-12) || !bleuClose(got.BP, test.bp, 1e-12) {
			t.Errorf("%s: score, BP = %.17g, %.17g, want %.17g, %.17g", test.name, got.Score, got.BP, test.score, test.bp)
		}
	}
	if math.Abs(mustBLEU(t, [4]int{9, 7, 5, 3}, [4]int{10, 8, 6, 4}, 11, 11)-83.75922397) > 1e-8 {
		t.Error("ComputeBLEU differs from sacreBLEU's published 83.75922397")
	}
	if _, err := ComputeBLEU([4]int{1, 1, 1, 1}, [4]int{1, 1, 1, 1}, 4, 4, "floor"); err == nil {
		t.Error("ComputeBLEU with unknown smoothing: no error")
	}
}

func mustBLEU(t *testing.T, correct, total [4]int, sysLen, refLen int) float64 {
	t.Helper()
	s, err := ComputeBLEU(correct, total, sysLen, refLen, BLEUSmoothExp)
	if err != nil {
		t.Fatal(err)
	}
	return s.Score
}

func TestCorpusBLEUErrors(t *testing.T) {
	for _, test := range []struct {
		name string
		hyps []string
		refs [][]string
		opt  BLEUOptions
		want string
	}{
		{"stream too short", bleuReadmeHyps, [][]string{bleuReadmeRefs[0], bleuReadmeRefs[1][:2]}, BLEUOptions{}, "reference stream 1 has 2 sentences, hypotheses have 3"},
		{"stream too long", bleuReadmeHyps[:2], bleuReadmeRefs, BLEUOptions{}, "reference stream 0 has 3 sentences, hypotheses have 2"},
		{"no streams", bleuReadmeHyps, nil, BLEUOptions{}, "no reference streams"},
		{"no hypotheses", nil, [][]string{{}}, BLEUOptions{}, "no hypotheses"},
		{"all references empty", []string{"a", "b"}, [][]string{{"a", ""}, {"a", ""}}, BLEUOptions{}, "sentence 1 has no non-empty reference"},
		{"unknown tokenizer", bleuReadmeHyps, bleuReadmeRefs, BLEUOptions{Tokenize: "intl"}, `unknown BLEU tokenizer "intl"`},
		{"unknown smoothing", bleuReadmeHyps, bleuReadmeRefs, BLEUOptions{Smooth: "add-k"}, `unknown BLEU smoothing "add-k"`},
	} {
		_, err := CorpusBLEU(test.hyps, test.refs, test.opt)
		if err == nil || !strings.Contains(err.Error(), test.want) {
			t.Errorf("%s: error = %v, want one containing %q", test.name, err, test.want)
		}
	}
}

func TestBLEUSignature(t *testing.T) {
	for _, test := range []struct {
		opt   BLEUOptions
		nrefs int
		want  string
	}{
		{BLEUOptions{}, 1, "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:probformer"},
		{BLEUOptions{Tokenize: TokenizerNone, Smooth: BLEUSmoothNone}, 2, "nrefs:2|case:mixed|eff:no|tok:none|smooth:none|version:probformer"},
		{BLEUOptions{}, -1, "nrefs:var|case:mixed|eff:no|tok:13a|smooth:exp|version:probformer"},
	} {
		if got := test.opt.Signature(test.nrefs); got != test.want {
			t.Errorf("%+v.Signature(%d) = %q, want %q", test.opt, test.nrefs, got, test.want)
		}
	}
}

// bleuClose reports whether got is within tol of want, relative to want's
// magnitude when it exceeds 1.
func bleuClose(got, want, tol float64) bool {
	return math.Abs(got-want) <= tol*math.Max(1, math.Abs(want))
}
