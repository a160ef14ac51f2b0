package cli

import (
	"strings"
	"testing"
)

// TestTranslateUnknownWords: words outside the source vocabulary are
// reported on standard error by line, each word once, and the lines are
// still translated; --strict refuses the input with exit status 2 and
// translates nothing; known input passes --strict.
func TestTranslateUnknownWords(t *testing.T) {
	dir := trainRun(t, tinySeq2Seq...)
	input := "the dog sees the cat\nthe dog eats the apple\n\nApple apple eats"
	code, stdout, stderr := runCLI(t, "translate", "--checkpoint", dir, "--text", input)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if got := outputLines(t, stdout); len(got) != 4 || got[1] == "" {
		t.Errorf("translations %q, want 4 lines", got)
	}
	want := "trainer: line 2: 2 of 5 words unknown to the source vocabulary: eats, apple\n" +
		"trainer: line 4: 3 of 3 words unknown to the source vocabulary: apple, eats\n"
	if stderr != want {
		t.Errorf("stderr\n%q\nwant\n%q", stderr, want)
	}

	// Words past data.max_len are not read, so not reported.
	long := strings.Repeat("the dog ", 8) + "apple"
	code, _, stderr = runCLI(t, "translate", "--checkpoint", dir, "--text", long)
	if code != 0 || strings.Contains(stderr, "unknown") || !strings.Contains(stderr, "line 1 has 17 words") {
		t.Errorf("long line: exit %d, stderr %q", code, stderr)
	}

	expectBadInput(t, []string{"translate", "--checkpoint", dir, "--strict", "--text", input},
		"--strict", "line 2: 2 of 5 words unknown to the source vocabulary: eats, apple", "and 1 more line")
	expectBadInput(t, []string{"translate", "--checkpoint", dir, "--strict", "--text", "a dog eats"},
		"line 1: 1 of 3 words unknown to the source vocabulary: eats")

	code, stdout, stderr = runCLI(t, "translate", "--checkpoint", dir, "--strict", "--text", "the dog sees the cat")
	if code != 0 || stderr != "" || stdout == "\n" {
		t.Errorf("--strict on known words: exit %d, %q, stderr %q", code, stdout, stderr)
	}
}
