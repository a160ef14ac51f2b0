package main

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"probformer/datasets"
)

func TestAttentionCommand(t *testing.T) {
	dir := trainRun(t, tinySeq2Seq...)
	const text = "the dog sees a big cat"
	_, want, _ := runCLI(t, "translate", "--checkpoint", dir, "--text", text)
	cases := []struct {
		name  string
		flags []string
		title string
	}{
		{"defaults", nil, "decoder layer 1 of 2, mean of 2 heads"},
		{"layer 0 head 1", []string{"--layer", "0", "--head", "1"}, "decoder layer 0 of 2, head 1 of 2"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "map.png")
			code, stdout, stderr := runCLI(t, append([]string{"attention", "--checkpoint", dir, "--text", text, "--out", out}, c.flags...)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			lines := outputLines(t, stdout)
			if len(lines) != 2 || lines[0]+"\n" != want {
				t.Fatalf("output %q: want the translation %q, then one line", lines, want)
			}
			if !strings.Contains(lines[1], out) || !strings.Contains(lines[1], "× 6 source words") || !strings.Contains(lines[1], c.title) {
				t.Errorf("second line %q lacks the file, the 6 source words or %q", lines[1], c.title)
			}
			// At least 4 in × 4 in at 96 dpi.
			if b := decodePNG(t, out).Bounds(); b.Dx() < 384 || b.Dy() < 384 {
				t.Errorf("image is %d × %d pixels", b.Dx(), b.Dy())
			}
		})
	}
}

// TestCrossAttentionWeights checks the matrix the heat map draws: one row
// per generated token, <eos> included when the sentence ended, one column
// per source word, each row a distribution, the tokens those of greedy
// translation.
func TestCrossAttentionWeights(t *testing.T) {
	dir := trainRun(t, tinySeq2Seq...)
	tr, task, err := loadSeq2Seq(dir)
	if err != nil {
		t.Fatal(err)
	}
	words := strings.Fields("the dog sees a big cat")
	src := task.src.Encode(words)
	greedy, err := task.translateLines(tr.params, [][]string{words}, 1)
	if err != nil {
		t.Fatal(err)
	}
	check := func(name string, layer int, wantFinished bool) {
		t.Helper()
		out, weights, err := task.crossAttention(tr.params, src, layer)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if finished := len(out) > 0 && out[len(out)-1] == datasets.EOSID; finished != wantFinished {
			t.Fatalf("%s: tokens %v: ended %v, want %v", name, out, finished, wantFinished)
		}
		if len(out) == 0 || len(out) > task.tgtLen || slices.Contains(out[:len(out)-1], datasets.EOSID) {
			t.Fatalf("%s: tokens %v", name, out)
		}
		if len(weights) != task.model.Config.Heads {
			t.Fatalf("%s: %d heads", name, len(weights))
		}
		for h, w := range weights {
			if len(w) != len(out) {
				t.Fatalf("%s: head %d has %d rows for %d tokens", name, h, len(w), len(out))
			}
			for i, row := range w {
				if len(row) != len(src) {
					t.Fatalf("%s: head %d row %d has %d columns for %d source words", name, h, i, len(row), len(src))
				}
				var sum float64
				for _, v := range row {
					sum += v
				}
				if math.Abs(sum-1) > 1e-5 { // a float32 model
					t.Errorf("%s: head %d row %d sums to %v", name, h, i, sum)
				}
			}
		}
		if name == "trained" && !slices.Equal(task.tgt.Decode(out), greedy[0]) {
			t.Errorf("%s: tokens %q, greedy translation %q", name, task.tgt.Decode(out), greedy[0])
		}
	}
	// After 5 steps the model runs to the length limit.
	check("trained", 0, false)
	check("trained", 1, false)
	// A large <eos> bias ends every sentence at once: a single row.
	bias := tr.params.Lookup("out.b")
	b := bias.Values()
	b[datasets.EOSID] = 100
	if err := bias.SetValues(b); err != nil {
		t.Fatal(err)
	}
	check("eos", 1, true)
}

func TestMeanHeads(t *testing.T) {
	got := meanHeads([][][]float64{
		{{1, 0, 0}, {0.5, 0.25, 0.25}},
		{{0, 1, 0}, {0.25, 0.25, 0.5}},
	})
	want := [][]float64{{0.5, 0.5, 0}, {0.375, 0.25, 0.375}}
	for i := range want {
		if !slices.Equal(got[i], want[i]) {
			t.Errorf("row %d: %v, want %v", i, got[i], want[i])
		}
	}
}

func TestAttentionCommandErrors(t *testing.T) {
	s2s := trainRun(t, tinySeq2Seq...)
	maxnorm := trainRun(t, append([]string{"--set", "training.steps=5"}, tiny...)...)
	out := filepath.Join(t.TempDir(), "map.png")
	base := func(extra ...string) []string {
		return append([]string{"--checkpoint", s2s, "--out", out}, extra...)
	}
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"maxnorm checkpoint", []string{"--checkpoint", maxnorm, "--out", out, "--text", "a"}, []string{"maxnorm", "not seq2seq"}},
		{"layer too high", base("--text", "the dog", "--layer", "2"), []string{"--layer 2", "0 to 1"}},
		{"negative layer", base("--text", "the dog", "--layer", "-1"), []string{"--layer -1"}},
		{"head too high", base("--text", "the dog", "--head", "2"), []string{"--head 2", "0 to 1"}},
		{"head not a number", base("--text", "the dog", "--head", "max"), []string{`--head "max"`}},
		{"empty text", base("--text", " "), []string{"--text", "no word"}},
		{"two lines", base("--text", "the dog\nthe cat"), []string{"--text", "one line"}},
		{"too long", base("--text", strings.Repeat("the dog ", 8)), []string{"16 words", "at most 15"}},
		{"no text", base(), []string{"text"}},
		{"no out", []string{"--checkpoint", s2s, "--text", "the dog"}, []string{"out"}},
		{"unwritable out", []string{"--checkpoint", s2s, "--text", "the dog", "--out", filepath.Join(s2s, "no", "map.png")}, []string{"map.png"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { expectBadInput(t, append([]string{"attention"}, c.args...), c.want...) })
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("a failed command wrote the map")
	}
}
