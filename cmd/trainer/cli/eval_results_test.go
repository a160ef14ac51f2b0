package cli

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/probformer/probformer/losses"
)

// readEvalResults reads an eval_results.json.
func readEvalResults(t *testing.T, path string) evalResults {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var r evalResults
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return r
}

// metric returns a metric of eval_results.json as a number.
func metric(t *testing.T, m map[string]any, name string) float64 {
	t.Helper()
	v, ok := m[name].(float64)
	if !ok {
		t.Fatalf("metric %s = %#v in %v, want a number", name, m[name], m)
	}
	return v
}

// printedAfter returns the rest of the first line of stdout that starts
// with prefix, once spaces around it are cut.
func printedAfter(t *testing.T, stdout, prefix string) string {
	t.Helper()
	for _, l := range strings.Split(stdout, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(l), prefix); ok {
			return strings.TrimSpace(rest)
		}
	}
	t.Fatalf("no line starting %q in\n%s", prefix, stdout)
	return ""
}

// TestEvalWritesTranslations: `trainer eval --predictions` on a seq2seq
// run writes the greedy and beam translations, sources and references;
// `trainer bleu` on them prints the very scores eval printed, and
// eval_results.json holds them too, to the bit.
func TestEvalWritesTranslations(t *testing.T) {
	dir := trainRun(t, append(tinySeq2Seq, "--set", "training.beam=2")...)
	preds := filepath.Join(t.TempDir(), "generated_predictions.txt")
	code, stdout, stderr := runCLI(t, "eval", "--checkpoint", dir, "--predictions", preds)
	if code != 0 {
		t.Fatalf("eval: exit %d: %s", code, stderr)
	}
	resultsFile := filepath.Join(dir, evalResultsFile)
	if !strings.Contains(stdout, "wrote "+resultsFile+"\n") {
		t.Errorf("eval does not say where the results went:\n%s", stdout)
	}
	if !strings.Contains(stdout, "wrote predictions "+preds+" (") {
		t.Errorf("eval does not say where the predictions went:\n%s", stdout)
	}
	r := readEvalResults(t, resultsFile)
	if r.Checkpoint != "best.ckpt" || r.Step != 5 || r.Config != "seq2seq-toy" || r.Task != "seq2seq" {
		t.Errorf("results checkpoint %q step %d config %q task %q, want best.ckpt 5 seq2seq-toy seq2seq", r.Checkpoint, r.Step, r.Config, r.Task)
	}
	if n := metric(t, r.Metrics, "test_samples"); n != 20 {
		t.Errorf("test_samples %v, want 20", n)
	}
	if b := metric(t, r.Metrics, "test_beam"); b != 2 {
		t.Errorf("test_beam %v, want 2", b)
	}
	if rel, _ := filepath.Rel(dir, preds); len(r.Predictions) != 4 || r.Predictions[0].File != rel || r.Predictions[1].File != rel+".src" {
		t.Errorf("results list predictions %+v", r.Predictions)
	}

	for _, c := range []struct {
		hyps, printed, metric string
	}{{preds, "greedy:", "test_bleu"}, {preds + ".beam", "beam 2 (lp", "test_bleu_beam"}} {
		// The printed line: "greedy:          BLEU = …".
		printed := printedAfter(t, stdout, c.printed)
		printed = printed[strings.Index(printed, "BLEU = "):]
		code, out, errOut := runCLI(t, "bleu", "--tokenize", "none", c.hyps, preds+".ref")
		if code != 0 {
			t.Fatalf("bleu %s: exit %d: %s", c.hyps, code, errOut)
		}
		if scored := outputLines(t, out)[0]; scored != printed {
			t.Errorf("trainer bleu %s: %q; eval printed %q", c.hyps, scored, printed)
		}
		code, out, errOut = runCLI(t, "bleu", "--tokenize", "none", "--score-only", c.hyps, preds+".ref")
		if code != 0 {
			t.Fatalf("bleu -b %s: exit %d: %s", c.hyps, code, errOut)
		}
		written := metric(t, r.Metrics, c.metric)
		if want := strconv.FormatFloat(written, 'f', 2, 64) + "\n"; out != want {
			t.Errorf("trainer bleu -b %s: %q; %s in %s is %v", c.hyps, out, c.metric, evalResultsFile, written)
		}
		// The full score, to the bit.
		hyps, refs := readLines(t, c.hyps), readLines(t, preds+".ref")
		score, err := losses.CorpusBLEU(hyps, [][]string{refs}, losses.BLEUOptions{Tokenize: losses.TokenizerNone})
		if err != nil {
			t.Fatal(err)
		}
		if score.Score != written {
			t.Errorf("BLEU of %s is %v, %s in %s %v", c.hyps, score.Score, c.metric, evalResultsFile, written)
		}
	}

	// The files line up with the test set: a source a line, and the
	// samples eval printed come first.
	srcs, refs, hyps := readLines(t, preds+".src"), readLines(t, preds+".ref"), readLines(t, preds)
	if len(srcs) != 20 || len(refs) != 20 || len(hyps) != 20 {
		t.Fatalf("%d sources, %d references, %d translations; want 20 each", len(srcs), len(refs), len(hyps))
	}
	if !strings.Contains(stdout, "  src: "+srcs[0]+"\n  ref: "+refs[0]+"\n  hyp: "+hyps[0]+"\n") {
		t.Errorf("the first sample eval printed is not line 1 of the files (%q, %q, %q):\n%s", srcs[0], refs[0], hyps[0], stdout)
	}
	// translate reads the sources as eval did: the same greedy output.
	code, out, errOut := runCLI(t, "translate", "--checkpoint", dir, "--text", strings.Join(srcs, "\n"))
	if code != 0 {
		t.Fatalf("translate: exit %d: %s", code, errOut)
	}
	if got := outputLines(t, out); strings.Join(got, "\n") != strings.Join(hyps, "\n") {
		t.Errorf("translate of the sources\n%q\ndiffers from eval's predictions\n%q", got, hyps)
	}
}

// readLines reads a text file's lines as trainer bleu does.
func readLines(t *testing.T, path string) []string {
	t.Helper()
	lines, err := readTextLines(path)
	if err != nil {
		t.Fatal(err)
	}
	return lines
}

// TestEvalWritesSetPredictions: on a maxnorm run, --out puts the JSON
// where it says (and nothing in the run directory), and the predictions
// TSV holds every test set, from which the test MSE eval printed and wrote
// is computed again.
func TestEvalWritesSetPredictions(t *testing.T) {
	dir := trainRun(t, append([]string{"--set", "training.steps=5"}, tiny...)...)
	out := t.TempDir()
	resultsFile, preds := filepath.Join(out, "results.json"), filepath.Join(out, "preds.tsv")
	code, stdout, stderr := runCLI(t, "eval", "--checkpoint", dir, "--out", resultsFile, "--predictions", preds)
	if code != 0 {
		t.Fatalf("eval: exit %d: %s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, evalResultsFile)); !os.IsNotExist(err) {
		t.Errorf("with --out, eval wrote %s in the run directory too (%v)", evalResultsFile, err)
	}
	r := readEvalResults(t, resultsFile)
	if r.Task != "maxnorm" || r.Step != 5 || !filepath.IsAbs(r.Checkpoint) && !strings.HasPrefix(r.Checkpoint, "..") {
		t.Errorf("results task %q step %d checkpoint %q", r.Task, r.Step, r.Checkpoint)
	}
	for _, b := range []string{"predict zero", "predict set mean"} {
		metric(t, r.Baselines[b], "test_mse")
	}
	// The model's row as printed.
	row := strings.Fields(printedAfter(t, stdout, "model"))
	mse := metric(t, r.Metrics, "test_mse")
	if len(row) != 3 || row[0] != strconv.FormatFloat(mse, 'f', 4, 64) {
		t.Errorf("printed model row %q, test_mse %v", row, mse)
	}

	lines := readLines(t, preds)
	sets := int(metric(t, r.Metrics, "test_samples"))
	if len(lines) != sets+1 || lines[0] != "index\ttarget\tprediction" {
		t.Fatalf("%d lines starting %q, want a header and %d sets", len(lines), lines[0], sets)
	}
	var sum float64
	var n int
	for i, l := range lines[1:] {
		f := strings.Split(l, "\t")
		if len(f) != 3 || f[0] != strconv.Itoa(i) {
			t.Fatalf("line %d: %q", i+2, l)
		}
		target, pred := strings.Fields(f[1]), strings.Fields(f[2])
		if len(target) != len(pred) || len(target) == 0 {
			t.Fatalf("line %d: %d target and %d predicted numbers", i+2, len(target), len(pred))
		}
		for d := range target {
			y, err1 := strconv.ParseFloat(target[d], 64)
			p, err2 := strconv.ParseFloat(pred[d], 64)
			if err1 != nil || err2 != nil {
				t.Fatalf("line %d: %v %v", i+2, err1, err2)
			}
			sum += (p - y) * (p - y)
			n++
		}
	}
	if got := sum / float64(n); math.Abs(got-mse) > 1e-12*math.Max(1, mse) {
		t.Errorf("MSE of %s is %v, test_mse %v", preds, got, mse)
	}

	// A missing directory fails before the report.
	missing := filepath.Join(out, "nope", "preds.tsv")
	expectBadInput(t, []string{"eval", "--checkpoint", dir, "--predictions", missing}, missing)
}

// TestEvalWritesMLMAndSegmentPredictions: the predictions TSV of mlm (a
// line per chosen position) and of segment (a line per image and click
// count) give back, counted, the accuracies eval wrote to the JSON.
func TestEvalWritesMLMAndSegmentPredictions(t *testing.T) {
	cases := []struct {
		name   string
		train  []string
		header string
		// right tells a line's right predictions and predictions; key
		// is the metric the line counts towards.
		right func(f []string) (key string, right, n int)
	}{
		{"mlm", tinyMLM, "sentence\tposition\tinput\ttarget\tprediction", func(f []string) (string, int, int) {
			if f[3] == f[4] {
				return "test_accuracy", 1, 1
			}
			return "test_accuracy", 0, 1
		}},
		{"segment", append([]string{"--set", "training.steps=2", "--set", "training.eval_every=2"}, tinySegment...),
			"image\tclicks\ttarget\tprediction", func(f []string) (string, int, int) {
				target, pred := strings.Fields(f[2]), strings.Fields(f[3])
				right := 0
				for p := range target {
					if target[p] == pred[p] {
						right++
					}
				}
				return "test_accuracy_" + f[1] + "_clicks", right, len(target)
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := trainRun(t, c.train...)
			preds := filepath.Join(t.TempDir(), "preds.tsv")
			if code, _, stderr := runCLI(t, "eval", "--checkpoint", dir, "--predictions", preds); code != 0 {
				t.Fatalf("eval: exit %d: %s", code, stderr)
			}
			r := readEvalResults(t, filepath.Join(dir, evalResultsFile))
			if r.Task != c.name || len(r.Baselines) == 0 {
				t.Errorf("results of task %q with baselines %v", r.Task, r.Baselines)
			}
			lines := readLines(t, preds)
			if len(lines) < 2 || lines[0] != c.header {
				t.Fatalf("%d lines, header %q, want %q", len(lines), lines[0], c.header)
			}
			right, n := map[string]int{}, map[string]int{}
			for _, l := range lines[1:] {
				f := strings.Split(l, "\t")
				if len(f) != strings.Count(c.header, "\t")+1 {
					t.Fatalf("line %q", l)
				}
				key, r, k := c.right(f)
				right[key] += r
				n[key] += k
			}
			for key := range n {
				if got, want := float64(right[key])/float64(n[key]), metric(t, r.Metrics, key); got != want {
					t.Errorf("%s: %d of %d right in %s, %v in the JSON", key, right[key], n[key], preds, want)
				}
			}
		})
	}
}
