package losses

import (
	"math"
	"strings"
	"testing"
)

// FuzzBLEU: `trainer bleu` on arbitrary hypothesis and reference text
// never panics. Both tokenizers give non-empty tokens without whitespace,
// 13a's output is its own whitespace split, corpus BLEU stays in [0, 100]
// with consistent counts, and a corpus scored against itself scores 100
// when it has a 4-gram.
func FuzzBLEU(f *testing.F) {
	for _, seed := range [][2]string{
		{"It wasn't surprising.", "It was not surprising."},
		{"the cat sat on the mat\nhello", "the cat is on the mat\nhello there"},
		{"3.5 1,000 1990-2000 &amp;lt; &quot;x&quot; <skipped> co-\nop", "a.b, c,d e-f"},
		{"\x1c\u00a0 \t\n\n", " x "},
		{"é — “quoted” 東京", "é — 東京"},
	} {
		f.Add(seed[0], seed[1], false)
		f.Add(seed[0], seed[1], true)
	}
	f.Fuzz(func(t *testing.T, hypText, refText string, none bool) {
		tok := Tokenizer13a
		if none {
			tok = TokenizerNone
		}
		for _, line := range []string{hypText, refText} {
			tokens, err := Tokenize(line, tok)
			if err != nil {
				t.Fatalf("Tokenize(%q, %s): %v", line, tok, err)
			}
			for _, w := range tokens {
				if w == "" || strings.ContainsFunc(w, isPythonSpace) {
					t.Fatalf("Tokenize(%q, %s): token %q is empty or holds whitespace", line, tok, w)
				}
			}
			if !none {
				joined := Tokenize13a(strings.TrimRightFunc(line, isPythonSpace))
				if again := splitPython(joined); strings.Join(again, " ") != joined || len(again) != len(tokens) {
					t.Fatalf("Tokenize13a(%q) = %q is not its tokens %q joined by spaces", line, joined, tokens)
				}
			}
		}

		hyps := strings.Split(hypText, "\n")
		refs := strings.Split(refText, "\n")
		refs = append(refs, make([]string, max(0, len(hyps)-len(refs)))...)[:len(hyps)]
		opt := BLEUOptions{Tokenize: tok}
		s, err := CorpusBLEU(hyps, [][]string{refs}, opt)
		if err == nil {
			checkScore(t, s, hyps, tok)
		}

		// Against itself: every sentence with a reference matches it.
		var self []string
		for _, h := range hyps {
			if toks, _ := Tokenize(h, tok); len(toks) > 0 {
				self = append(self, h)
			}
		}
		if len(self) == 0 {
			return
		}
		s, err = CorpusBLEU(self, [][]string{self}, opt)
		if err != nil {
			t.Fatalf("self-BLEU of %q: %v", self, err)
		}
		checkScore(t, s, self, tok)
		if s.Totals[BLEUMaxOrder-1] > 0 && math.Abs(s.Score-100) > 1e-9 {
			t.Fatalf("self-BLEU of %q is %v, want 100", self, s)
		}
	})
}

// checkScore checks the invariants of a corpus BLEU score of hyps.
func checkScore(t *testing.T, s BLEUScore, hyps []string, tok string) {
	t.Helper()
	if math.IsNaN(s.Score) || s.Score < 0 || s.Score > 100+1e-9 || s.BP < 0 || s.BP > 1 {
		t.Fatalf("score out of range: %v", s)
	}
	sysLen := 0
	for _, h := range hyps {
		toks, _ := Tokenize(h, tok)
		sysLen += len(toks)
	}
	if s.SysLen != sysLen || s.Totals[0] != sysLen {
		t.Fatalf("hypothesis length %d, unigrams %d, want %d", s.SysLen, s.Totals[0], sysLen)
	}
	for n := range BLEUMaxOrder {
		if s.Counts[n] < 0 || s.Counts[n] > s.Totals[n] || (n > 0 && s.Totals[n] > s.Totals[n-1]) {
			t.Fatalf("order %d: %d of %d n-grams match: %v", n+1, s.Counts[n], s.Totals[n], s)
		}
	}
}
