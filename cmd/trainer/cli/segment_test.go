package cli

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// tinySegment shrinks segment-em so a run takes a few seconds: 6×6
// images of 2–3 regions, 3 classes, batch 4.
var tinySegment = []string{
	"--config", "segment-em",
	"--set", "data.image_size=6", "--set", "data.max_regions=3", "--set", "data.classes=3",
	"--set", "data.valid_sets=8", "--set", "data.test_sets=8", "--set", "data.max_clicks=3", "--set", "data.valid_clicks=2",
	"--set", "model.dim=8", "--set", "model.heads=2", "--set", "training.batch=4",
	"--set", "training.log_every=2", "--set", "optimizer.warmup_steps=2",
}

// reportClicks are the click counts of the rows of eval's table for task
// segment.
var reportClicks = []int{0, 1, 2, 5, 10}

// reportTable returns the rows of the clicks table in eval's output: the
// click count, then accuracy and mIoU with and without adaptation.
func reportTable(t *testing.T, stdout string) [][]float64 {
	t.Helper()
	var rows [][]float64
	in := false
	for _, line := range strings.Split(stdout, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) > 0 && f[0] == "clicks":
			in = true
		case in && len(f) == 5:
			row := make([]float64, 5)
			for k, s := range f {
				v, err := strconv.ParseFloat(s, 64)
				if err != nil {
					t.Fatalf("table row %q: %v", line, err)
				}
				row[k] = v
			}
			rows = append(rows, row)
		default:
			in = false
		}
	}
	return rows
}

func TestSegmentTrainAndReport(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	args := append([]string{"train", "--out", dir, "--set", "training.steps=4", "--set", "training.eval_every=2"}, tinySegment...)
	code, stdout, stderr := runCLI(t, args...)
	if code != 0 {
		t.Fatalf("train exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "valid_accuracy") || !strings.Contains(stdout, "valid_miou") {
		t.Errorf("no validation scores in\n%s", stdout)
	}
	m := readMetrics(t, dir)
	if acc := m[len(m)-1]["valid_accuracy"]; !(acc > 0 && acc <= 1) {
		t.Errorf("last valid_accuracy %v", acc)
	}

	plots := t.TempDir()
	code, stdout, stderr = runCLI(t, "eval", "--checkpoint", dir, "--plots", plots)
	if code != 0 {
		t.Fatalf("eval exit %d: %s", code, stderr)
	}
	rows := reportTable(t, stdout)
	if len(rows) != len(reportClicks) {
		t.Fatalf("%d table rows, want %d:\n%s", len(rows), len(reportClicks), stdout)
	}
	for k, row := range rows {
		if int(row[0]) != reportClicks[k] {
			t.Errorf("row %d is for %v clicks, want %d", k, row[0], reportClicks[k])
		}
		for _, v := range row[1:] {
			if !(v >= 0 && v <= 1) {
				t.Errorf("row %v: score outside [0, 1]", row)
			}
		}
	}
	// Before any click both are the model's own prediction.
	if rows[0][1] != rows[0][2] || rows[0][3] != rows[0][4] {
		t.Errorf("0 clicks: adapted %v differs from not adapted", rows[0])
	}
	// Without adaptation each click fixes its own pixel at most: 10 clicks
	// on 36 pixels add at most 10/36 to the accuracy.
	if gain := rows[len(rows)-1][2] - rows[0][2]; gain < 0 || gain > 10.0/36+1e-4 {
		t.Errorf("accuracy without adaptation gains %v from 10 clicks", gain)
	}
	png := filepath.Join(plots, "clicks.png")
	if !strings.Contains(stdout, "wrote "+png) {
		t.Errorf("eval does not name %s:\n%s", png, stdout)
	}
	if b := decodePNG(t, png).Bounds(); b.Dx() == 0 || b.Dy() == 0 {
		t.Errorf("empty image %v", b)
	}
	checkPriorsTable(t, stdout, []string{"em.0"}, 2)

	// Without --plots the figure goes beside the checkpoint.
	if code, _, stderr := runCLI(t, "eval", "--checkpoint", dir); code != 0 {
		t.Fatalf("eval exit %d: %s", code, stderr)
	}
	decodePNG(t, filepath.Join(dir, "clicks.png"))
}

// priorColumns is the number of prior hyperparameters in a row of eval's
// priors table (θ_ξ, a_α, b_α, θ_μ, a_β, b_β, θ_π, α⁰, β⁰).
const priorColumns = 9

// checkPriorsTable checks that eval's output lists, for each layer, an
// initial row and one row per head, each with nine positive values or
// dashes.
func checkPriorsTable(t *testing.T, stdout string, layerNames []string, heads int) {
	t.Helper()
	if !strings.Contains(stdout, "EM prior hyperparameters") {
		t.Fatalf("no priors table in\n%s", stdout)
	}
	rows := map[string][]string{}
	for _, line := range strings.Split(stdout, "\n") {
		f := strings.Fields(line)
		if len(f) != 2+priorColumns {
			continue
		}
		if _, err := strconv.Atoi(f[1]); err == nil || f[1] == "initial" {
			rows[f[0]] = append(rows[f[0]], f[1])
			for _, v := range f[2:] {
				if x, err := strconv.ParseFloat(v, 64); v != "—" && (err != nil || !(x > 0)) {
					t.Errorf("row %q: %q is neither a positive number nor —", line, v)
				}
			}
		}
	}
	for _, name := range layerNames {
		want := []string{"initial"}
		for h := range heads {
			want = append(want, strconv.Itoa(h))
		}
		if strings.Join(rows[name], " ") != strings.Join(want, " ") {
			t.Errorf("layer %s: rows %v, want %v\n%s", name, rows[name], want, stdout)
		}
	}
	if len(rows) != len(layerNames) {
		t.Errorf("priors of layers %v, want %v", rows, layerNames)
	}
}

func TestSegmentBadConfigExitsTwo(t *testing.T) {
	cases := []struct{ set, field string }{
		{"data.image_size=1", "data.image_size"},
		{"data.min_regions=0", "data.min_regions"},
		{"data.max_regions=1", "data.max_regions"},
		{"data.max_regions=400", "data.max_regions"},
		{"data.classes=3", "data.classes"},
		{"data.noise=-0.5", "data.noise"},
		{"data.confusable=1.5", "data.confusable"},
		{"data.valid_sets=0", "data.valid_sets"},
		{"data.test_sets=0", "data.test_sets"},
		{"data.max_clicks=-1", "data.max_clicks"},
		{"data.valid_clicks=-2", "data.valid_clicks"},
		{"model.kind=transformer", "model.kind"},
		{"model.enc_layers=0", "model.enc_layers"},
		{"model.blocks=0", "model.blocks"},
		{"model.attention.kind=softmax", "model.attention.kind"},
		{"model.attention.propagate_iters=-1", "model.attention.propagate_iters"},
		{"training.loss=mse", "training.loss"},
		{"training.label_smoothing=1", "training.label_smoothing"},
	}
	for _, c := range cases {
		t.Run(c.set, func(t *testing.T) {
			expectBadInput(t, []string{"train", "--config", "segment-em", "--out", t.TempDir(), "--set", c.set}, c.field+" = ")
		})
	}
}
