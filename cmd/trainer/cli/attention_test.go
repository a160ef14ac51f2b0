package cli

import (
	"image"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
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

// decodePNG reads the PNG at path, failing the test if it is not one.
func decodePNG(t *testing.T, path string) image.Image {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("decode %s: %v", path, err)
	}
	return img
}
