package datasets

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// FuzzParallelTSV: no file makes the TSV loader panic; what it accepts is
// UTF-8 text without NUL bytes, stray carriage returns or byte-order marks,
// within the line cap, and well formed (every pair has tokens on both
// sides, no token holds whitespace); its counts add up, and every error
// names the file and line. SkipMalformed skips malformed lines only: a
// file that is not text, or beyond a cap, is still refused.
func FuzzParallelTSV(f *testing.F) {
	for _, seed := range []string{
		"Go.\tVa !\tCC-BY 2.0 (France) Attribution: tatoeba.org\n",
		"\ufeffI see.\tJe vois.\r\nHi.\tSalut.",
		"a b\tc d\n\n  \nno tab here\n",
		"x\t\n\ty\n",
		"UPPER Case\tÉTÉ\tthird\tfourth\n",
		"ca\xe7a\tthat\nna\xefve\tnaive\n",
		"a\tb\nfo\x00o\tbar\n",
		"a\tb\n\ufeffc\td\n",
		"Go.\tVa !\rHi.\tSalut !\r",
		"\xff\xfea\x00\t\x00b\x00\n\x00",
		"a long line\tune longue ligne\r\n",
	} {
		f.Add([]byte(seed), false, false, uint16(0))
		f.Add([]byte(seed), true, true, uint16(8))
	}
	f.Fuzz(func(t *testing.T, data []byte, lowercase, skip bool, maxLine uint16) {
		opt := TSVOptions{Lowercase: lowercase, SkipMalformed: skip, MaxLineBytes: int(maxLine)}
		pairs, stats, err := readParallelTSV(bytes.NewReader(data), "fuzz.tsv", opt)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.tsv: line ") {
				t.Fatalf("error %q does not name the file and line", err)
			}
			var te *textError
			if skip && !errors.As(err, &te) {
				t.Fatalf("error with SkipMalformed on a text file: %v", err)
			}
			return
		}
		text := bytes.TrimPrefix(data, []byte(bom))
		if !utf8.Valid(text) || bytes.ContainsAny(text, "\x00\ufeff") {
			t.Fatalf("accepted a file that is not UTF-8 text: %q", data)
		}
		lineCap := int(maxLine)
		if lineCap == 0 {
			lineCap = DefaultMaxTSVLineBytes
		}
		for i, line := range bytes.Split(text, []byte("\n")) {
			if line = bytes.TrimSuffix(line, []byte("\r")); len(line) > lineCap || bytes.ContainsRune(line, '\r') {
				t.Fatalf("accepted line %d (%q): over the cap of %d bytes or a stray carriage return", i+1, line, lineCap)
			}
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
				if w == "" || strings.ContainsFunc(w, unicode.IsSpace) || !utf8.ValidString(w) {
					t.Fatalf("pair %d: token %q is empty, holds whitespace or is not UTF-8", i, w)
				}
			}
		}
	})
}
