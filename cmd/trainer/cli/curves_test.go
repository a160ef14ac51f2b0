package cli

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
	t.Parallel()
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

first step with valid_bleu ≥ 95 (higher is better, by its name; --direction min if not):
  scratch      step 750 (96), after 2m12s of training
  b            step 500 (95.5)
`
	if stdout != want {
		t.Errorf("printed\n%s\nwant\n%s", stdout, want)
	}
	if data, err := os.ReadFile(png); err != nil || !strings.HasPrefix(string(data), "\x89PNG") {
		t.Errorf("no PNG at %s (%v)", png, err)
	}
	if want := "wrote " + png + ": valid_bleu of 2 runs at 3 steps, linear y axis\n"; stderr != want {
		t.Errorf("stderr %q, want %q", stderr, want)
	}
	expectBadInput(t, []string{"curves", a, "--metric", "valid_bleu", "--direction", "up"}, "--direction", `"up"`)
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
	t.Parallel()
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
			t.Parallel()
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

// TestLowerIsBetter: a metric's name tells a loss (lower is better) from
// a score; the project's own metrics are all read right.
func TestLowerIsBetter(t *testing.T) {
	t.Parallel()
	tests := []struct {
		metric string
		lower  bool
	}{
		{"train_loss", true},
		{"valid_loss", true},
		{"loss", true},
		{"trainLoss", true},
		{"valid_mse", true},
		{"test_mae", true},
		{"valid_rmse", true},
		{"test_euclidean", true},
		{"valid_error", true},
		{"top1_errors", true},
		{"valid_err", true},
		{"valid_ppl", true},
		{"valid_perplexity", true},
		{"train_nll", true},
		{"train_kl", true},
		{"kl2", true},
		{"valid.wer", true},
		{"valid_bleu", false},
		{"valid_accuracy", false},
		{"valid_clicks_iou", false},
		{"lr", false},
		{"maelstrom", false},
		{"valid_terrain", false},
		{"iterations", false},
		{"kelvin", false},
	}
	for _, tt := range tests {
		if got := lowerIsBetter(tt.metric); got != tt.lower {
			t.Errorf("lowerIsBetter(%q) = %v, want %v", tt.metric, got, tt.lower)
		}
	}
}

// TestCurvesReachDirection: --reach is "≤ X" for a loss and "≥ X" for a
// score, by the name or by --direction, and the output says which.
func TestCurvesReachDirection(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	run := writeRun(t, filepath.Join(dir, "r"), `{"step":100,"train_loss":4,"valid_bleu":10,"score":0.2}
{"step":200,"train_loss":1.5,"valid_bleu":30,"score":0.5}
{"step":300,"train_loss":0.4,"valid_bleu":35.5,"score":0.9,"wall_sec":61}
`)
	tests := []struct {
		name  string
		args  []string
		title string // the line above the steps
		step  string // the run's answer
	}{
		{"loss by name", []string{"--metric", "train_loss", "--reach", "1.5"},
			"first step with train_loss ≤ 1.5 (lower is better, by its name; --direction max if not):", "step 200 (1.5)"},
		{"loss never low enough", []string{"--metric", "train_loss", "--reach", "0.1"},
			"first step with train_loss ≤ 0.1 (lower is better, by its name; --direction max if not):", "never"},
		{"score by name", []string{"--metric", "valid_bleu", "--reach", "35"},
			"first step with valid_bleu ≥ 35 (higher is better, by its name; --direction min if not):", "step 300 (35.5), after 1m1s of training"},
		{"loss forced max", []string{"--metric", "train_loss", "--reach", "2", "--direction", "max"},
			"first step with train_loss ≥ 2 (higher is better, --direction max):", "step 100 (4)"},
		{"unknown name forced min", []string{"--metric", "score", "--reach", "0.3", "--direction", "min"},
			"first step with score ≤ 0.3 (lower is better, --direction min):", "step 100 (0.2)"},
		{"unknown name is a score", []string{"--metric", "score", "--reach", "0.3"},
			"first step with score ≥ 0.3 (higher is better, by its name; --direction min if not):", "step 200 (0.5)"},
		{"direction in capitals", []string{"--metric", "score", "--reach", "0.3", "--direction", "MIN"},
			"first step with score ≤ 0.3 (lower is better, --direction min):", "step 100 (0.2)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code, stdout, stderr := runCLI(t, append([]string{"curves", run}, tt.args...)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			want := "\n" + tt.title + "\n  r            " + tt.step + "\n"
			if !strings.HasSuffix(stdout, want) {
				t.Errorf("printed\n%s\nwant it to end in\n%s", stdout, want)
			}
		})
	}
}

// TestCurvesLogScale: the PNG of a loss has a log-scale y axis when
// every value is positive; a score, or a loss that reaches zero or below,
// keeps a linear one. --out says which, and where the PNG went, in one
// line on stderr.
func TestCurvesLogScale(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	run := writeRun(t, filepath.Join(dir, "r"), `{"step":100,"train_loss":40,"valid_bleu":10,"train_elbo_loss":3,"score":8}
{"step":200,"train_loss":0.5,"valid_bleu":30,"train_elbo_loss":-2,"score":0.1}
`)
	tests := []struct {
		metric string
		extra  []string
		scale  string
	}{
		{"train_loss", nil, "log-scale y axis"},
		{"train_loss", []string{"--direction", "max"}, "linear y axis"},
		{"valid_bleu", nil, "linear y axis"},
		{"train_elbo_loss", nil, "linear y axis"},
		{"score", []string{"--direction", "min"}, "log-scale y axis"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(append([]string{tt.metric}, tt.extra...), " "), func(t *testing.T) {
			t.Parallel()
			png := filepath.Join(t.TempDir(), "out.png")
			code, stdout, stderr := runCLI(t, append([]string{"curves", run, "--metric", tt.metric, "--out", png}, tt.extra...)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			if want := "wrote " + png + ": " + tt.metric + " of 1 run at 2 steps, " + tt.scale + "\n"; stderr != want {
				t.Errorf("stderr %q, want %q", stderr, want)
			}
			if strings.Contains(stdout, "wrote") {
				t.Errorf("stdout holds more than the table: %q", stdout)
			}
			if data, err := os.ReadFile(png); err != nil || !strings.HasPrefix(string(data), "\x89PNG") {
				t.Errorf("no PNG at %s (%v)", png, err)
			}
		})
	}
}
