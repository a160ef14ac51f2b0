package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"probformer/cmd/trainer/train"
)

func writeRun(t *testing.T, dir, lines string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, train.MetricsFile), []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestCurves(t *testing.T) {
	dir := t.TempDir()
	a := writeRun(t, filepath.Join(dir, "a"), `{"step":100,"train_loss":3}
{"step":250,"valid_bleu":50.5}
{"step":500,"valid_bleu":91}
{"step":750,"valid_bleu":96,"wall_sec":131.6}
`)
	b := writeRun(t, filepath.Join(dir, "b"), `{"step":250,"valid_bleu":80}
{"valid_bleu":12}
{"step":400,"valid_bleu":"n/a","note":"text"}
{"step":500,"valid_bleu":95.5}
`)
	png := filepath.Join(dir, "bleu.png")
	code, stdout, stderr := runCLI(t, "curves", a, b, "--metric", "valid_bleu", "--label", "scratch", "--reach", "95", "--out", png)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	want := `| step | scratch | b |
|---:|---:|---:|
| 250 | 50.5 | 80 |
| 500 | 91 | 95.5 |
| 750 | 96 | |

first step with valid_bleu ≥ 95:
  scratch      step 750 (96), after 2m12s of training
  b            step 500 (95.5)
`
	if stdout != want {
		t.Errorf("printed\n%s\nwant\n%s", stdout, want)
	}
	if data, err := os.ReadFile(png); err != nil || !strings.HasPrefix(string(data), "\x89PNG") {
		t.Errorf("no PNG at %s (%v)", png, err)
	}
	expectBadInput(t, []string{"curves", a, "--metric", "valid_mse"}, "metrics.jsonl", `"valid_mse"`)
	expectBadInput(t, []string{"curves", filepath.Join(dir, "none"), "--metric", "valid_bleu"}, "none")
	expectBadInput(t, []string{"curves", a, "--metric", "valid_bleu", "--label", "x", "--label", "y"}, "2 labels for 1 runs")
	broken := writeRun(t, filepath.Join(dir, "broken"), "{\"step\":1}\n{\"step\":\n")
	expectBadInput(t, []string{"curves", broken, "--metric", "valid_bleu"}, "line 2")
}
