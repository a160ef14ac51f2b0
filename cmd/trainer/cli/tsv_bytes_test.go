package cli

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// tinyTSV shrinks the seq2seq-tsv preset so a run takes a second or two.
var tinyTSV = []string{
	"--set", "model.dim=8", "--set", "model.heads=2", "--set", "model.ff=16",
	"--set", "model.enc_layers=1", "--set", "model.dec_layers=1",
	"--set", "training.steps=2", "--set", "training.batch=4", "--set", "training.log_every=1",
	"--set", "training.eval_every=0", "--set", "optimizer.warmup_steps=1",
}

// tsvFiles writes valid.tsv and test.tsv, good corpora, into dir and
// returns the --set flags that name them and the train file.
func tsvFiles(t *testing.T, dir, train string) []string {
	t.Helper()
	good := strings.Join(tsvPairs(), "\n") + "\n"
	for _, name := range []string{"valid.tsv", "test.tsv"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(good), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return []string{
		"--set", "data.train_file=" + train,
		"--set", "data.valid_file=" + filepath.Join(dir, "valid.tsv"),
		"--set", "data.test_file=" + filepath.Join(dir, "test.tsv"),
	}
}

// runSoon runs the command line and fails the test if it has not
// finished within 5 s (generous: a refusal takes milliseconds).
func runSoon(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	type result struct {
		code           int
		stdout, stderr string
	}
	done := make(chan result, 1)
	go func() {
		code, stdout, stderr := runCLI(t, args...)
		done <- result{code, stdout, stderr}
	}()
	select {
	case r := <-done:
		return r.code, r.stdout, r.stderr
	case <-time.After(5 * time.Second):
		t.Fatalf("%q did not finish within 5 s", args)
	}
	return 0, "", ""
}

// expectRefused checks a run that must fail as bad input does (exit 2, one
// line on stderr, nothing on stdout) naming every string of want, and
// leave no checkpoint in out.
func expectRefused(t *testing.T, out string, code int, stdout, stderr string, want ...string) {
	t.Helper()
	if code != 2 {
		t.Errorf("exit %d, want 2 (stderr %q)", code, stderr)
	}
	if stdout != "" {
		t.Errorf("printed %q", stdout)
	}
	if strings.Count(strings.TrimSpace(stderr), "\n") != 0 || strings.Contains(stderr, "goroutine") {
		t.Errorf("want one line, got %q", stderr)
	}
	for _, w := range want {
		if !strings.Contains(stderr, w) {
			t.Errorf("stderr %q does not mention %q", stderr, w)
		}
	}
	if ckpts, _ := filepath.Glob(filepath.Join(out, "*.ckpt")); len(ckpts) != 0 {
		t.Errorf("wrote checkpoints %q", ckpts)
	}
}

// TestTrainRefusesNonTextTSV: a training file that is not UTF-8 text is
// refused before training, with exit 2 and the config key, the file and
// the line, instead of training and writing checkpoints whose vocabulary
// (JSON) cannot hold its tokens. Before, two distinct invalid tokens
// trained with exit 0 and made every later eval, translate, --resume and
// export fail with `src_vocab: vocabulary: "\ufffd" at ids 11 and 20`.
func TestTrainRefusesNonTextTSV(t *testing.T) {
	lines := tsvPairs()
	at := func(i int, line string) string {
		ls := append([]string(nil), lines...)
		ls[i] = line
		return strings.Join(ls, "\n") + "\n"
	}
	for _, test := range []struct {
		name, content string
		want          []string
	}{
		// Two distinct tokens with invalid bytes (Latin-1 "ça", "naïve"):
		// both would decode from JSON as "\ufffd".
		{"two invalid utf-8 tokens", at(3, "he is \xe7a .\til est \xe7a .") + "she is na\xefve .\telle est na\xefve .\n",
			[]string{"line 4: invalid UTF-8 (byte 0xe7) at byte 7"}},
		{"one invalid utf-8 token", at(10, "he is caf\xe9 .\til est caf\xe9 ."), []string{"line 11: invalid UTF-8 (byte 0xe9)"}},
		{"nul byte", at(2, "he is\x00 here .\til est là ."), []string{"line 3: NUL byte at byte 6"}},
		{"byte-order mark at a middle line", at(5, "\ufeff"+lines[5]), []string{"line 6: byte-order mark U+FEFF at byte 1"}},
		{"cr-only line ends", strings.Join(lines, "\r") + "\r", []string{"line 1: carriage return not followed by a line feed"}},
		{"line over 64 KiB", at(1, "he "+strings.Repeat("x", 64<<10)+"\til ."), []string{"line 2: longer than the limit of 65536 bytes for a line"}},
	} {
		t.Run(test.name, func(t *testing.T) {
			dir := t.TempDir()
			train := filepath.Join(dir, "train.tsv")
			if err := os.WriteFile(train, []byte(test.content), 0o644); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(dir, "run")
			args := append([]string{"train", "--config", "seq2seq-tsv", "--out", out}, tsvFiles(t, dir, train)...)
			code, stdout, stderr := runSoon(t, append(args, tinyTSV...)...)
			expectRefused(t, out, code, stdout, stderr, append([]string{"data.train_file", train + ": "}, test.want...)...)
		})
	}
}

// TestTSVRefusesNonRegularFiles: a directory, /dev/zero (which never
// ends) or a FIFO (which would block) as a TSV file is refused at once by
// train and eval, with the config key and the path.
func TestTSVRefusesNonRegularFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "pipe.tsv")
	paths := map[string]string{dir: "not a regular file but a directory"}
	if err := syscall.Mkfifo(fifo, 0o600); err == nil {
		paths[fifo] = "not a regular file but a named pipe (FIFO)"
	}
	if _, err := os.Stat("/dev/zero"); err == nil {
		paths["/dev/zero"] = "not a regular file but a character device"
	}
	good := filepath.Join(dir, "good.tsv")
	if err := os.WriteFile(good, []byte(strings.Join(tsvPairs(), "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run := filepath.Join(dir, "run")
	trained := append([]string{"train", "--config", "seq2seq-tsv", "--out", run}, tsvFiles(t, dir, good)...)
	if code, _, stderr := runCLI(t, append(trained, tinyTSV...)...); code != 0 {
		t.Fatalf("train: exit %d: %s", code, stderr)
	}
	for path, want := range paths {
		t.Run("train "+path, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "run")
			args := append([]string{"train", "--config", "seq2seq-tsv", "--out", out}, tsvFiles(t, t.TempDir(), path)...)
			start := time.Now()
			code, stdout, stderr := runSoon(t, append(args, tinyTSV...)...)
			expectRefused(t, out, code, stdout, stderr, "data.train_file", path+": "+want)
			t.Logf("refused in %v", time.Since(start))
		})
		t.Run("eval "+path, func(t *testing.T) {
			code, stdout, stderr := runSoon(t, "eval", "--checkpoint", run, "--set", "data.test_file="+path)
			expectRefused(t, t.TempDir(), code, stdout, stderr, "data.test_file", path+": "+want)
		})
	}
}
