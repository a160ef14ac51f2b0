package datasets

import (
	"bytes"
	"strings"
	"testing"
	"unicode"
)

// FuzzParallelTSV: no file makes the TSV loader panic; what it accepts is
// well formed (every pair has tokens on both sides, no token holds
// whitespace), its counts add up, and every error names the file and line.
func FuzzParallelTSV(f *testing.F) {
	for _, seed := range []string{
		"Go.\tVa !\tCC-BY 2.0 (France) Attribution: tatoeba.org\n",
		"\ufeffI see.\tJe vois.\r\nHi.\tSalut.",
		"a b\tc d\n\n  \nno tab here\n",
		"x\t\n\ty\n",
		"UPPER Case\tÉTÉ\tthird\tfourth\n",
	} {
		f.Add([]byte(seed), false, false)
		f.Add([]byte(seed), true, true)
	}
	f.Fuzz(func(t *testing.T, data []byte, lowercase, skip bool) {
		pairs, stats, err := readParallelTSV(bytes.NewReader(data), "fuzz.tsv", TSVOptions{Lowercase: lowercase, SkipMalformed: skip})
		if err != nil {
			if skip {
				t.Fatalf("error with SkipMalformed: %v", err)
			}
			if !strings.HasPrefix(err.Error(), "fuzz.tsv:") {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		if stats.Pairs != len(pairs) || stats.Pairs+stats.Blank+stats.Skipped != stats.Lines {
			t.Fatalf("stats %+v for %d pairs", stats, len(pairs))
		}
		if !skip && stats.Skipped != 0 {
			t.Fatalf("skipped %d lines without SkipMalformed", stats.Skipped)
		}
		if lines := bytes.Count(data, []byte("\n")); stats.Lines < lines || stats.Lines > lines+1 {
			t.Fatalf("%d lines counted in an input with %d newlines", stats.Lines, lines)
		}
		for i, p := range pairs {
			if len(p.Src) == 0 || len(p.Tgt) == 0 {
				t.Fatalf("pair %d has an empty side: %q", i, p)
			}
			for _, w := range append(append([]string(nil), p.Src...), p.Tgt...) {
				if w == "" || strings.ContainsFunc(w, unicode.IsSpace) {
					t.Fatalf("pair %d: token %q is empty or holds whitespace", i, w)
				}
			}
		}
	})
}
