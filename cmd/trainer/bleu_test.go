package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The sacreBLEU README's example: three hypotheses, two reference streams.
var (
	bleuHyps  = []string{"The dog bit the man.", "It wasn't surprising.", "The man had just bitten him."}
	bleuRefs1 = []string{"The dog bit the man.", "It was not unexpected.", "The man bit him first."}
	bleuRefs2 = []string{"The dog had bit the man.", "No one was surprised.", "The man had bitten the dog."}
)

// writeLines writes lines to dir/name, each ended by end, and returns the
// path.
func writeLines(t *testing.T, dir, name string, lines []string, end string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(strings.Join(lines, end)+end), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestBLEUCommand(t *testing.T) {
	dir := t.TempDir()
	hyp := writeLines(t, dir, "hyp", bleuHyps, "\n")
	ref1 := writeLines(t, dir, "ref1", bleuRefs1, "\n")
	ref2 := writeLines(t, dir, "ref2", bleuRefs2, "\n")
	// The same files with CRLF line ends and no newline after the last line.
	hypCRLF := filepath.Join(dir, "hyp.crlf")
	os.WriteFile(hypCRLF, []byte(strings.Join(bleuHyps, "\r\n")), 0o644)
	ref1CRLF := writeLines(t, dir, "ref1.crlf", bleuRefs1, "\r\n")
	// One sentence whose only unigram matches are "It" and ".", so that
	// smoothing decides the score: p = 2/4, then 0/3, 0/2, 0/1 smoothed to
	// 1/6, 1/8, 1/8 (exp), BP = exp(1 − 5/4), BLEU = 14.7940156747765.
	oneHyp := writeLines(t, dir, "one.hyp", bleuHyps[1:2], "\n")
	oneRef := writeLines(t, dir, "one.ref", bleuRefs1[1:2], "\n")

	cases := []struct {
		name string
		args []string
		want string
	}{
		{"13a", []string{hyp, ref1, ref2},
			"BLEU = 48.53 82.4/50.0/45.5/37.5 (BP = 0.943 ratio = 0.944 hyp_len = 17 ref_len = 18)\n" +
				"signature: nrefs:2|case:mixed|eff:no|tok:13a|smooth:exp|version:probformer\n"},
		{"none", []string{"--tokenize", "none", hyp, ref1, ref2},
			"BLEU = 49.19 71.4/54.5/50.0/40.0 (BP = 0.931 ratio = 0.933 hyp_len = 14 ref_len = 15)\n" +
				"signature: nrefs:2|case:mixed|eff:no|tok:none|smooth:exp|version:probformer\n"},
		{"score only", []string{"--score-only", hyp, ref1, ref2}, "48.53\n"},
		{"-b none", []string{"-b", "--tokenize=none", hyp, ref1, ref2}, "49.19\n"},
		{"crlf", []string{"-b", hypCRLF, ref1CRLF, ref2}, "48.53\n"},
		{"smooth exp", []string{oneHyp, oneRef},
			"BLEU = 14.79 50.0/16.7/12.5/12.5 (BP = 0.779 ratio = 0.800 hyp_len = 4 ref_len = 5)\n" +
				"signature: nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:probformer\n"},
		{"smooth none", []string{"--smooth", "none", oneHyp, oneRef},
			"BLEU = 0.00 50.0/0.0/0.0/0.0 (BP = 0.779 ratio = 0.800 hyp_len = 4 ref_len = 5)\n" +
				"signature: nrefs:1|case:mixed|eff:no|tok:13a|smooth:none|version:probformer\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, append([]string{"bleu"}, c.args...)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			if stdout != c.want {
				t.Errorf("got\n%s\nwant\n%s", stdout, c.want)
			}
		})
	}
}

func TestBLEUCommandErrors(t *testing.T) {
	dir := t.TempDir()
	hyp := writeLines(t, dir, "hyp", bleuHyps, "\n")
	ref1 := writeLines(t, dir, "ref1", bleuRefs1, "\n")
	short := writeLines(t, dir, "short.ref", bleuRefs2[:2], "\n")
	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, nil, 0o644)
	missing := filepath.Join(dir, "missing.ref")
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"missing reference", []string{hyp, ref1, missing}, []string{"missing.ref", "no such file"}},
		{"missing hypothesis", []string{missing, ref1}, []string{"missing.ref"}},
		{"line counts differ", []string{hyp, ref1, short}, []string{"short.ref", "2 lines", "hyp has 3"}},
		{"empty hypothesis file", []string{empty, empty}, []string{"empty", "no line"}},
		{"unknown tokenizer", []string{"--tokenize", "intl", hyp, ref1}, []string{"--tokenize", "intl"}},
		{"unknown smoothing", []string{"--smooth", "floor", hyp, ref1}, []string{"--smooth", "floor"}},
		{"unknown flag", []string{"--lowercase", hyp, ref1}, []string{"--lowercase"}},
		{"no reference", []string{hyp}, []string{"2 arg"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { expectBadInput(t, append([]string{"bleu"}, c.args...), c.want...) })
	}
}
