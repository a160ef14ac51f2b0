package datasets

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestLoadParallelTSVLineEnds: LF, CRLF, a final line without its end and
// a byte-order mark at the start of the file read as before; a CRLF line
// end is no carriage return in a token.
func TestLoadParallelTSVLineEnds(t *testing.T) {
	want := []Pair{
		{Src: []string{"Go."}, Tgt: []string{"Va", "!"}},
		{Src: []string{"Hi."}, Tgt: []string{"Salut", "!"}},
	}
	dir := t.TempDir()
	for _, test := range []struct {
		name, content string
		lines         int
	}{
		{"lf", "Go.\tVa !\nHi.\tSalut !\n", 2},
		{"crlf", "Go.\tVa !\r\nHi.\tSalut !\r\n", 2},
		{"crlf, no final line end", "Go.\tVa !\r\nHi.\tSalut !", 2},
		{"crlf, final lone cr", "Go.\tVa !\r\nHi.\tSalut !\r", 2},
		{"crlf with bom and a blank line", "\ufeffGo.\tVa !\r\n\r\nHi.\tSalut !\r\n", 3},
		{"bom alone on the first line", "\ufeff\nGo.\tVa !\nHi.\tSalut !\n", 3},
	} {
		path := writeTSVFile(t, dir, "corpus.tsv", test.content)
		got, stats, err := LoadParallelTSV(path, TSVOptions{})
		if err != nil {
			t.Errorf("%s: %v", test.name, err)
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: pairs = %q, want %q", test.name, got, want)
		}
		if stats.Lines != test.lines || stats.Pairs != 2 {
			t.Errorf("%s: stats = %+v, want %d lines, 2 pairs", test.name, stats, test.lines)
		}
	}
}

// TestLoadParallelTSVRefusesNonText: a corpus that is not UTF-8 text is
// refused with the file, the line and the byte of the line, even with
// SkipMalformed, rather than trained on with tokens a checkpoint cannot
// store.
func TestLoadParallelTSVRefusesNonText(t *testing.T) {
	dir := t.TempDir()
	crOnly := strings.Repeat("Go.\tVa !\r", 5)
	longCROnly := strings.Repeat("I see.\tJe vois.\r", DefaultMaxTSVLineBytes/8)
	for _, test := range []struct {
		name, content, want string
	}{
		{"two distinct invalid tokens", "ok\tbien\nca\xe7a\tthat\nna\xefve\tnaive\n", "line 2: invalid UTF-8 (byte 0xe7) at byte 3"},
		{"latin-1 in the target", "a b\tc d\nx\tcaf\xe9\n", "line 2: invalid UTF-8 (byte 0xe9) at byte 6"},
		{"truncated sequence at the line end", "a\tb\xc3\n", "line 1: invalid UTF-8 (byte 0xc3) at byte 4"},
		{"utf-16 le", "\xff\xfea\x00\t\x00b\x00\n\x00", "line 1: UTF-16 byte-order mark"},
		{"utf-16 be", "\xfe\xff\x00a\x00\t\x00b\n", "line 1: UTF-16 byte-order mark"},
		{"nul inside a token", "a\tb\nfo\x00o\tbar\n", "line 2: NUL byte at byte 3"},
		{"nul line", "a\tb\n\x00\n", "line 2: NUL byte at byte 1"},
		{"bom at the start of a middle line", "\ufeffa\tb\n\ufeffc\td\n", "line 2: byte-order mark U+FEFF at byte 1"},
		{"bom inside a token", "a\tb\nc\td\ufeffe\n", "line 2: byte-order mark U+FEFF at byte 4"},
		{"second bom on the first line", "\ufeff\ufeffa\tb\n", "line 1: byte-order mark U+FEFF at byte 4"},
		{"cr-only line ends", crOnly, "line 1: carriage return not followed by a line feed at byte 9"},
		{"cr-only file longer than a line", longCROnly, "line 1: carriage return not followed by a line feed at byte 16"},
		{"lone cr inside a crlf file", "a\tb\r\nc\rd\te\r\n", "line 2: carriage return not followed by a line feed at byte 2"},
	} {
		for _, skip := range []bool{false, true} {
			path := writeTSVFile(t, dir, "bad.tsv", test.content)
			pairs, _, err := LoadParallelTSV(path, TSVOptions{SkipMalformed: skip})
			if err == nil || !strings.HasPrefix(err.Error(), path+": ") || !strings.Contains(err.Error(), test.want) {
				t.Errorf("%s (skip %v): %d pairs, error %v; want %s: …%s", test.name, skip, len(pairs), err, path, test.want)
			}
		}
	}
}

// TestLoadParallelTSVLimits: a line or a file beyond its cap is refused
// with the file and line; the caps are inclusive.
func TestLoadParallelTSVLimits(t *testing.T) {
	dir := t.TempDir()
	pair := "src\ttgt" // 7 bytes
	for _, test := range []struct {
		name    string
		content string
		opt     TSVOptions
		want    string // "" for success
	}{
		{"line at the cap", pair + "\n", TSVOptions{MaxLineBytes: 7}, ""},
		{"crlf line at the cap", pair + "\r\n", TSVOptions{MaxLineBytes: 7}, ""},
		{"final line at the cap", "a\tb\n" + pair, TSVOptions{MaxLineBytes: 7}, ""},
		{"first line with a bom at the cap", bom + pair + "\r\n" + pair, TSVOptions{MaxLineBytes: 7}, ""},
		{"line of bom's length over the cap", "a\tb\n" + pair + "xxx\r\n", TSVOptions{MaxLineBytes: 7}, "line 2: longer than the limit of 7 bytes for a line"},
		{"line over the cap", "a\tb\n" + pair + "x\n", TSVOptions{MaxLineBytes: 7}, "line 2: longer than the limit of 7 bytes for a line"},
		{"final line over the cap", "a\tb\n" + pair + "x", TSVOptions{MaxLineBytes: 7}, "line 2: longer than the limit of 7 bytes for a line"},
		{"crlf line over the cap", pair + "xx\r\n", TSVOptions{MaxLineBytes: 7}, "line 1: longer than the limit of 7 bytes for a line"},
		{"default line cap", "a\t" + strings.Repeat("b", DefaultMaxTSVLineBytes) + "\n", TSVOptions{}, "line 1: longer than the limit of 65536 bytes for a line"},
		{"default line cap exactly", "a\t" + strings.Repeat("b", DefaultMaxTSVLineBytes-2) + "\n", TSVOptions{}, ""},
		{"binary file", string(make([]byte, 3*DefaultMaxTSVLineBytes)), TSVOptions{}, "line 1: NUL byte at byte 1"},
		{"file at the cap", "a\tb\nc\td\n", TSVOptions{MaxFileBytes: 8}, ""},
		{"file over the cap", "a\tb\nc\td\n", TSVOptions{MaxFileBytes: 7}, "bytes, more than the limit of 7 bytes for a corpus file"},
		{"negative line cap", "a\tb\n", TSVOptions{MaxLineBytes: -1}, "negative limit"},
		{"negative file cap", "a\tb\n", TSVOptions{MaxFileBytes: -1}, "negative limit"},
	} {
		path := writeTSVFile(t, dir, "corpus.tsv", test.content)
		_, _, err := LoadParallelTSV(path, test.opt)
		switch {
		case test.want == "" && err != nil:
			t.Errorf("%s: %v", test.name, err)
		case test.want != "" && (err == nil || !strings.Contains(err.Error(), test.want)):
			t.Errorf("%s: error %v, want …%s", test.name, err, test.want)
		case test.want != "" && !strings.Contains(err.Error(), path) && !strings.Contains(test.name, "negative"):
			t.Errorf("%s: error %v does not name %s", test.name, err, path)
		}
	}
}

// TestReadParallelTSVFileCap: a stream longer than the file cap (a file
// that grows, or one whose size stat does not tell) is refused at the line
// that crosses it, having read at most one byte past the cap.
func TestReadParallelTSVFileCap(t *testing.T) {
	r := &countingReader{r: strings.NewReader(strings.Repeat("a\tb\n", 1000))}
	_, stats, err := readParallelTSV(r, "stream.tsv", TSVOptions{MaxFileBytes: 10})
	if want := "stream.tsv: line 3: the file is longer than the limit of 10 bytes for a corpus file"; err == nil || err.Error() != want {
		t.Errorf("error %v, want %s", err, want)
	}
	if stats.Lines != 3 || r.n > 11 {
		t.Errorf("%d lines, %d bytes read; want 3 lines and at most 11 bytes", stats.Lines, r.n)
	}
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// TestLoadParallelTSVRefusesNonRegular: a directory or a device is refused
// up front with its name; /dev/zero, which never ends, is refused at once
// (the test allows 5 s so as not to hang if it is not).
func TestLoadParallelTSVRefusesNonRegular(t *testing.T) {
	dir := t.TempDir()
	cases := []struct{ path, want string }{{dir, "not a regular file but a directory"}}
	if _, err := os.Stat("/dev/zero"); err == nil {
		cases = append(cases, struct{ path, want string }{"/dev/zero", "not a regular file but a character device"})
	}
	for _, c := range cases {
		expectRefusedSoon(t, c.path, c.want)
	}
}

// expectRefusedSoon loads path and checks that it is refused within 5 s
// with an error naming path and holding want.
func expectRefusedSoon(t *testing.T, path, want string) {
	t.Helper()
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		_, _, err := LoadParallelTSV(path, TSVOptions{})
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), path+": "+want) {
			t.Errorf("%s: error %v, want …%s: %s", path, err, path, want)
		}
		t.Logf("%s refused in %v", path, time.Since(start))
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: not refused within 5 s", path)
	}
}

// TestLoadParallelTSVSplitsNamesTheFile: a bad split is named.
func TestLoadParallelTSVSplitsNamesTheFile(t *testing.T) {
	dir := t.TempDir()
	writeTSVFile(t, dir, "toy.train.tsv", "a\tb\n")
	writeTSVFile(t, dir, "toy.valid.tsv", "a\tb\rc\td\r")
	writeTSVFile(t, dir, "toy.test.tsv", "a\tb\n")
	_, _, err := LoadParallelTSVSplits(dir, "toy", TSVOptions{})
	if want := filepath.Join(dir, "toy.valid.tsv") + ": line 1: carriage return"; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error %v, want %s…", err, want)
	}
	var te *textError
	if !errors.As(err, &te) {
		t.Errorf("error %v is not a textError", err)
	}
}

// TestCheckTextAcceptsUnicode: valid text outside ASCII is kept as is.
func TestCheckTextAcceptsUnicode(t *testing.T) {
	for _, line := range []string{"été\tsummer", "日本語\t\U0001F600", "\ufffd\treplacement", "tab\tand\u00a0nbsp"} {
		if err := checkText([]byte(line), false, false); err != nil {
			t.Errorf("%q: %v", line, err)
		}
	}
	if err := checkText(bytes.Repeat([]byte("é"), 3)[:5], false, true); err != nil {
		t.Errorf("partial line cut inside a character: %v", err)
	}
}
