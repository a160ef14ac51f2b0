package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
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

// expectBadInputWithin is expectBadInput, failing if the command has not
// returned within deadline (generous: the point is that it does not read
// or block for ever, not how fast it is).
func expectBadInputWithin(t *testing.T, deadline time.Duration, args []string, want ...string) {
	t.Helper()
	type result struct {
		code           int
		stdout, stderr string
	}
	done := make(chan result, 1)
	go func() {
		var out, errOut bytes.Buffer
		code := run(args, &out, &errOut)
		done <- result{code, out.String(), errOut.String()}
	}()
	select {
	case r := <-done:
		if r.code != 2 {
			t.Errorf("exit %d, want 2 (stderr %q)", r.code, r.stderr)
		}
		if r.stdout != "" {
			t.Errorf("printed %q", r.stdout)
		}
		if strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 || strings.Contains(r.stderr, "goroutine") {
			t.Errorf("want one line, got %q", r.stderr)
		}
		for _, w := range want {
			if !strings.Contains(r.stderr, w) {
				t.Errorf("stderr %q does not mention %q", r.stderr, w)
			}
		}
	case <-time.After(deadline):
		t.Fatalf("%v: still running after %v", args, deadline)
	}
}

// TestBLEUInputCaps: bleu reads regular files only, refused up front
// without blocking (a device, a named pipe without a writer, a
// directory), and caps a line at 64 KiB, naming the file and the line.
// Before, `trainer bleu /dev/zero r.txt` read for ever.
func TestBLEUInputCaps(t *testing.T) {
	dir := t.TempDir()
	ref := writeLines(t, dir, "ref", bleuRefs1, "\n")
	hyp := writeLines(t, dir, "hyp", bleuHyps, "\n")
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("word ", maxBLEULine/5+1)
	longFile := writeLines(t, dir, "long.hyp", []string{bleuHyps[0], long, bleuHyps[2]}, "\n")
	noEnd := filepath.Join(dir, "noend.ref")
	if err := os.WriteFile(noEnd, []byte(bleuRefs1[0]+"\n"+bleuRefs1[1]+"\n"+long), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"/dev/zero hypothesis", []string{"/dev/zero", ref}, []string{"/dev/zero", "character device", "not a regular file"}},
		{"/dev/zero reference", []string{hyp, "/dev/zero"}, []string{"/dev/zero", "not a regular file"}},
		{"FIFO reference", []string{hyp, ref, fifo}, []string{"fifo", "named pipe", "not a regular file"}},
		{"directory hypothesis", []string{dir, ref}, []string{"directory", "not a regular file"}},
		{"long line", []string{longFile, ref}, []string{"long.hyp", "line 2", "64 KiB a line"}},
		{"long last line without newline", []string{hyp, noEnd}, []string{"noend.ref", "line 3", "64 KiB a line"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			expectBadInputWithin(t, 10*time.Second, append([]string{"bleu"}, c.args...), c.want...)
		})
	}
	// A line of exactly 64 KiB, with a CRLF end, is read.
	exact := strings.Repeat("word ", maxBLEULine/5) + strings.Repeat("x", maxBLEULine%5)
	hypExact := writeLines(t, dir, "exact.hyp", []string{exact}, "\r\n")
	if code, stdout, stderr := runCLI(t, "bleu", "-b", hypExact, hypExact); code != 0 || stdout != "100.00\n" {
		t.Errorf("a 64 KiB line: exit %d, %q, %s", code, stdout, stderr)
	}
}
