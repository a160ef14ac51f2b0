package main

import (
	"maps"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/probformer/probformer/cmd/trainer/train"
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

// TestCurvesPlotsEveryPoint: runs of different evaluation cadences and
// lengths are each plotted on their own steps; no point of any run is
// dropped, and a step a run did not log is a missing point (NaN) of its
// line, not a reason to leave the step out.
func TestCurvesPlotsEveryPoint(t *testing.T) {
	tests := []struct {
		name string
		runs map[string]string // run name → metrics.jsonl
	}{
		{"every 50 and every 100, different lengths", map[string]string{
			"a": `{"step":50,"valid_mse":4}
{"step":100,"valid_mse":3}
{"step":150,"valid_mse":2.5}
{"step":200,"valid_mse":2}
`,
			"b": `{"step":100,"valid_mse":5}
{"step":100,"train_loss":9}
{"step":200,"valid_mse":3.5}
{"step":300,"valid_mse":3}
{"step":400,"valid_mse":2.75}
`,
		}},
		{"no step in common", map[string]string{
			"a": `{"step":25,"valid_mse":4}
{"step":75,"valid_mse":3}
`,
			"b": `{"step":100,"valid_mse":5}
{"step":200,"valid_mse":4}
`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			var runs []string
			for _, name := range []string{"a", "b"} {
				runs = append(runs, writeRun(t, filepath.Join(dir, name), tt.runs[name]))
			}
			f := curvesFlags{metric: "valid_mse"}
			all, err := loadSeries(f, runs)
			if err != nil {
				t.Fatal(err)
			}
			xs, lines := curvePlot(all)
			if len(lines) != len(runs) {
				t.Fatalf("%d lines for %d runs", len(lines), len(runs))
			}
			for k, line := range lines {
				if len(line.Ys) != len(xs) {
					t.Fatalf("line %q: %d values for %d steps", line.Name, len(line.Ys), len(xs))
				}
				plotted := map[int]float64{}
				for i, y := range line.Ys {
					if !math.IsNaN(y) {
						plotted[int(xs[i])] = y
					}
				}
				if !maps.Equal(plotted, all[k].values) {
					t.Errorf("line %q plots %v, want every logged point %v", line.Name, plotted, all[k].values)
				}
			}
			png := filepath.Join(dir, "mse.png")
			code, _, stderr := runCLI(t, append(append([]string{"curves"}, runs...), "--metric", "valid_mse", "--out", png)...)
			if code != 0 {
				t.Fatalf("curves --out: exit %d: %s", code, stderr)
			}
			if data, err := os.ReadFile(png); err != nil || !strings.HasPrefix(string(data), "\x89PNG") {
				t.Errorf("no PNG at %s (%v)", png, err)
			}
		})
	}
}
