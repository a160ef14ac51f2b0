package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tinySeq2Seq shrinks the seq2seq-toy preset so that a 5-step run takes a
// fraction of a second. After 5 steps the model's greedy translations
// still depend on the source and run to the length limit without <eos>.
// data.lowercase applies to what translate reads.
var tinySeq2Seq = []string{"--config", "seq2seq-toy",
	"--set", "model.dim=8", "--set", "model.heads=2", "--set", "model.ff=16",
	"--set", "model.enc_layers=1", "--set", "model.dec_layers=2",
	"--set", "data.train_pairs=200", "--set", "data.valid_pairs=20", "--set", "data.test_pairs=20",
	"--set", "data.lowercase=true",
	"--set", "training.steps=5", "--set", "training.batch=8", "--set", "training.eval_every=5", "--set", "training.log_every=5",
}

// trainRun trains a run with the given arguments into a new directory and
// returns the directory.
func trainRun(t *testing.T, args ...string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "run")
	if code, _, stderr := runCLI(t, append([]string{"train", "--out", dir}, args...)...); code != 0 {
		t.Fatalf("train: exit %d: %s", code, stderr)
	}
	return dir
}

// outputLines splits a command's output into its lines; it must end in a
// newline.
func outputLines(t *testing.T, stdout string) []string {
	t.Helper()
	if !strings.HasSuffix(stdout, "\n") {
		t.Fatalf("output %q does not end in a newline", stdout)
	}
	return strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
}

func TestTranslate(t *testing.T) {
	dir := trainRun(t, tinySeq2Seq...)
	sentences := []string{"the dog sees the cat", "", "a big cat", "  the   dog sees the cat  "}
	code, stdout, stderr := runCLI(t, "translate", "--checkpoint", dir, "--text", strings.Join(sentences, "\n"))
	if code != 0 || stderr != "" {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	got := outputLines(t, stdout)
	if len(got) != len(sentences) {
		t.Fatalf("%d lines for %d sentences:\n%s", len(got), len(sentences), stdout)
	}
	if got[0] == "" || got[2] == "" || got[1] != "" {
		t.Errorf("want translations of the non-empty lines only, got %q", got)
	}
	if got[0] == got[2] {
		t.Errorf("two different sentences translate alike (%q): the test would not tell inputs apart", got[0])
	}
	if got[3] != got[0] {
		t.Errorf("extra spaces changed the translation: %q, %q", got[3], got[0])
	}
	// A sentence alone translates as in a batch; with data.lowercase,
	// capitals do not matter.
	code, stdout, stderr = runCLI(t, "translate", "--checkpoint", dir, "--text", "THE Dog sees the CAT")
	if code != 0 || stdout != got[0]+"\n" {
		t.Errorf("alone and in capitals: exit %d, %q, want %q (%s)", code, stdout, got[0]+"\n", stderr)
	}

	// Beam search: one line per sentence as well.
	code, stdout, stderr = runCLI(t, "translate", "--checkpoint", dir, "--beam", "3", "--text", strings.Join(sentences, "\n"))
	if code != 0 {
		t.Fatalf("beam 3: exit %d: %s", code, stderr)
	}
	if beam := outputLines(t, stdout); len(beam) != len(sentences) || beam[1] != "" {
		t.Errorf("beam 3: %q", beam)
	}

	// Standard input, with CRLF line ends and a sentence over max_len,
	// which is cut with a warning.
	long := strings.Repeat("the dog ", 10)
	in := filepath.Join(t.TempDir(), "in.txt")
	os.WriteFile(in, []byte("the dog sees the cat\r\n"+long+"\r\na big cat"), 0o644)
	f, err := os.Open(in)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	stdin := os.Stdin
	os.Stdin = f
	code, stdout, stderr = runCLI(t, "translate", "--checkpoint", dir)
	os.Stdin = stdin
	if code != 0 {
		t.Fatalf("stdin: exit %d: %s", code, stderr)
	}
	fromStdin := outputLines(t, stdout)
	if len(fromStdin) != 3 || fromStdin[0] != got[0] || fromStdin[2] != got[2] {
		t.Errorf("from standard input %q, want 3 lines starting %q and ending %q", fromStdin, got[0], got[2])
	}
	if !strings.Contains(stderr, "line 2 has 20 words") || !strings.Contains(stderr, "first 15") {
		t.Errorf("no warning about the long line: %q", stderr)
	}
}

func TestTranslateErrors(t *testing.T) {
	s2s := trainRun(t, tinySeq2Seq...)
	maxnorm := trainRun(t, append([]string{"--set", "training.steps=5"}, tiny...)...)
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"maxnorm checkpoint", []string{"--checkpoint", maxnorm, "--text", "a"}, []string{"best.ckpt", "maxnorm", "not seq2seq"}},
		{"missing checkpoint", []string{"--checkpoint", filepath.Join(s2s, "nope.ckpt"), "--text", "a"}, []string{"nope.ckpt"}},
		{"no checkpoint flag", []string{"--text", "a"}, []string{"checkpoint"}},
		{"zero beam", []string{"--checkpoint", s2s, "--beam", "0", "--text", "a"}, []string{"--beam 0"}},
		{"stray argument", []string{"--checkpoint", s2s, "the dog"}, []string{"the dog"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { expectBadInput(t, append([]string{"translate"}, c.args...), c.want...) })
	}
}
