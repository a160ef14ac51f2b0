package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/probformer/probformer/cmd/trainer/train"
	"github.com/probformer/probformer/graph/ckpt"
)

// runCLI runs the command line in-process and returns its exit status
// and output.
func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// tiny shrinks the default preset so a run takes a second or two.
var tiny = []string{
	"--set", "model.dim=8", "--set", "model.heads=2", "--set", "model.inducing=4",
	"--set", "data.min_set=6", "--set", "data.max_set=8", "--set", "data.valid_sets=64", "--set", "data.test_sets=64",
	"--set", "training.batch=8", "--set", "training.log_every=5", "--set", "optimizer.warmup_steps=5",
}

func TestBadInputExitsTwo(t *testing.T) {
	dir := t.TempDir()
	unknown := filepath.Join(dir, "unknown.yaml")
	preset, _ := os.ReadFile("../../../configs/presets/maxnorm.yaml")
	os.WriteFile(unknown, bytes.Replace(preset, []byte("  batch: 64"), []byte("  batchsize: 64"), 1), 0o644)
	wrongType := filepath.Join(dir, "type.yaml")
	os.WriteFile(wrongType, bytes.Replace(preset, []byte("seed: 1"), []byte("seed: one"), 1), 0o644)
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"unknown key", []string{"train", "--config", unknown}, []string{"unknown.yaml", "line 39", `unknown key "batchsize" in training`}},
		{"wrong type", []string{"train", "--config", wrongType}, []string{"type.yaml", "line 5", `"one"`}},
		{"zero steps", []string{"train", "--set", "training.steps=0"}, []string{"training.steps = 0"}},
		{"negative steps", []string{"train", "--set", "training.steps=-3"}, []string{"training.steps = -3"}},
		{"missing file", []string{"train", "--config", filepath.Join(dir, "nope.yaml")}, []string{"nope.yaml", "no such file"}},
		{"unknown preset", []string{"train", "--config", "maxnrom"}, []string{"maxnrom", "presets"}},
		{"missing checkpoint", []string{"eval", "--checkpoint", filepath.Join(dir, "none.ckpt")}, []string{"none.ckpt"}},
		{"unknown flag", []string{"train", "--stpes", "3"}, []string{"stpes"}},
		{"not a checkpoint", []string{"eval", "--checkpoint", unknown}, []string{"unknown.yaml", "not a probformer checkpoint"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { expectBadInput(t, c.args, c.want...) })
	}
}

// expectBadInput runs the command line and checks that it fails as bad
// input must: exit status 2, nothing on stdout, and one line on stderr,
// with no stack trace, that mentions every string of want.
func expectBadInput(t *testing.T, args []string, want ...string) {
	t.Helper()
	code, stdout, stderr := runCLI(t, args...)
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
}

func readMetrics(t *testing.T, dir string) []map[string]float64 {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, train.MetricsFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]float64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var m map[string]float64
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("metrics line %q: %v", sc.Text(), err)
		}
		// Wall times, the one thing allowed to differ.
		delete(m, "steps_per_sec")
		delete(m, "wall_sec")
		out = append(out, m)
	}
	return out
}

func TestTrainEvalAndLearn(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	args := append([]string{"train", "--out", dir, "--set", "training.steps=60", "--set", "training.eval_every=30",
		"--set", "training.checkpoint_every=20", "--set", "training.keep_checkpoints=2"}, tiny...)
	code, stdout, stderr := runCLI(t, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "step 60/60") || !strings.Contains(stdout, "valid_mse") {
		t.Errorf("progress lines missing:\n%s", stdout)
	}
	steps, _ := train.StepCheckpoints(dir)
	if len(steps) != 2 || !strings.HasSuffix(steps[1], train.CheckpointName(60)) {
		t.Errorf("kept checkpoints %v, want steps 40 and 60", steps)
	}
	if _, err := os.Stat(filepath.Join(dir, train.BestCheckpoint)); err != nil {
		t.Error("no best checkpoint")
	}
	m := readMetrics(t, dir)
	first, last := m[0]["train_loss"], m[len(m)-1]
	if !(last["valid_mse"] > 0) {
		t.Fatalf("last metrics line %v has no validation score", last)
	}
	var lastTrain float64
	for _, l := range m {
		if v, ok := l["train_loss"]; ok {
			lastTrain = v
		}
	}
	if !(lastTrain < first) {
		t.Errorf("training loss did not fall: %v → %v", first, lastTrain)
	}
	code, stdout, stderr = runCLI(t, "eval", "--checkpoint", dir)
	if code != 0 {
		t.Fatalf("eval exit %d: %s", code, stderr)
	}
	for _, w := range []string{"best.ckpt", "model", "predict zero", "predict set mean", "MSE", "MAE"} {
		if !strings.Contains(stdout, w) {
			t.Errorf("eval output lacks %q:\n%s", w, stdout)
		}
	}
	// Training into a directory that holds a run is refused.
	if code, _, stderr := runCLI(t, args...); code != 2 || !strings.Contains(stderr, "--resume") {
		t.Errorf("second run into the same directory: exit %d, %q", code, stderr)
	}
}

// TestResumeIsExact: 2N steps straight equal N steps, stop, and N more
// with --resume, to the bit, in parameters and metrics; for translation
// with epoch-wise sampling too, whose 40 steps of 8 pairs cross an epoch
// of 200 pairs after the resume.
func TestResumeIsExact(t *testing.T) {
	for _, c := range []struct {
		name   string
		config []string
	}{
		{"maxnorm", tiny},
		{"seq2seq-epochs", append(append([]string{}, tinySeq2Seq...), "--set", "data.sampling=epochs")},
	} {
		t.Run(c.name, func(t *testing.T) {
			straight, split, a, b := straightAndResumed(t, c.config)
			expectSameRun(t, straight, split, a, b)
			expectWallClock(t, split)
		})
	}
}

// expectWallClock fails unless every validation line of a run records
// its training wall time, never decreasing, also across a resume.
func expectWallClock(t *testing.T, dir string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, train.MetricsFile))
	if err != nil {
		t.Fatal(err)
	}
	last, evals := 0.0, 0
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatal(err)
		}
		if _, isEval := m["valid_mse"]; !isEval {
			if _, isEval = m["valid_bleu"]; !isEval {
				continue
			}
		}
		evals++
		w, ok := m["wall_sec"].(float64)
		if !ok || w < last {
			t.Fatalf("validation line %q: wall_sec missing or below the previous %v", line, last)
		}
		last = w
	}
	if evals == 0 {
		t.Fatal("no validation line")
	}
}

// expectSameRun fails unless two runs' checkpoints hold the same
// parameters and their metrics files the same lines, to the bit.
func expectSameRun(t *testing.T, straight, split string, a, b *ckpt.Checkpoint) {
	t.Helper()
	for i := range a.Params {
		for j := range a.Params[i].Values {
			if math.Float64bits(a.Params[i].Values[j]) != math.Float64bits(b.Params[i].Values[j]) {
				t.Fatalf("%s differs after resume", a.Params[i].Name)
			}
		}
	}
	ma, mb := readMetrics(t, straight), readMetrics(t, split)
	if len(ma) != len(mb) {
		t.Fatalf("%d metrics lines straight, %d resumed", len(ma), len(mb))
	}
	for i := range ma {
		for k, v := range ma[i] {
			if mb[i][k] != v {
				t.Fatalf("metrics line %d: %s = %v straight, %v resumed", i, k, v, mb[i][k])
			}
		}
	}
}

// straightAndResumed trains runs of config (tiny, say) with the extra
// --set flags: 40 steps straight, and 20 steps resumed to 40, and returns
// their directories and step-40 checkpoints.
func straightAndResumed(t *testing.T, config []string, extra ...string) (straight, split string, a, b *ckpt.Checkpoint) {
	t.Helper()
	base := t.TempDir()
	common := append(append(append([]string{}, config...), extra...), "--set", "training.eval_every=10",
		"--set", "training.checkpoint_every=10", "--set", "optimizer.schedule=constant")
	straight, split = filepath.Join(base, "straight"), filepath.Join(base, "split")
	if code, _, stderr := runCLI(t, append(append([]string{"train", "--out", straight}, common...), "--set", "training.steps=40")...); code != 0 {
		t.Fatal(stderr)
	}
	// A constant schedule (after warm-up) does not depend on the run's
	// length, so a 20-step run resumed to 40 steps is the 40-step run.
	if code, _, stderr := runCLI(t, append(append([]string{"train", "--out", split}, common...), "--set", "training.steps=20")...); code != 0 {
		t.Fatal(stderr)
	}
	if code, _, stderr := runCLI(t, "train", "--resume", split, "--set", "training.steps=40"); code != 0 {
		t.Fatal(stderr)
	}
	var err error
	if a, err = ckpt.ReadCheckpoint(filepath.Join(straight, train.CheckpointName(40))); err != nil {
		t.Fatal(err)
	}
	if b, err = ckpt.ReadCheckpoint(filepath.Join(split, train.CheckpointName(40))); err != nil {
		t.Fatal(err)
	}
	return straight, split, a, b
}

func TestResumeRefusesConfigChanges(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	if code, _, stderr := runCLI(t, append([]string{"train", "--out", dir, "--set", "training.steps=5"}, tiny...)...); code != 0 {
		t.Fatal(stderr)
	}
	code, _, stderr := runCLI(t, "train", "--resume", dir, "--set", "model.dim=16", "--set", "training.steps=10")
	if code != 2 || !strings.Contains(stderr, "model.dim") {
		t.Fatalf("exit %d, %q", code, stderr)
	}
	code, _, stderr = runCLI(t, "train", "--resume", dir)
	if code != 2 || !strings.Contains(stderr, "training.steps") {
		t.Fatalf("resuming a finished run: exit %d, %q", code, stderr)
	}
}

func TestUsageErrorsExitTwo(t *testing.T) {
	for _, args := range [][]string{{"eval"}, {"frobnicate"}, {"inspect"}, {"export", "--checkpoint", "x"}, {"train", "extra"}} {
		if code, _, stderr := runCLI(t, args...); code != 2 || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("%v: exit %d, %q", args, code, stderr)
		}
	}
}

func TestInspectAndExport(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	if code, _, stderr := runCLI(t, append([]string{"train", "--out", dir, "--set", "training.steps=5"}, tiny...)...); code != 0 {
		t.Fatal(stderr)
	}
	code, stdout, stderr := runCLI(t, "inspect", dir)
	if code != 0 {
		t.Fatal(stderr)
	}
	for _, w := range []string{"step:       5", "enc.0.mab0.q.w", "[8 8]", "valid_mse", "model:", "dim: 8"} {
		if !strings.Contains(stdout, w) {
			t.Errorf("inspect output lacks %q:\n%s", w, stdout)
		}
	}
	out := filepath.Join(t.TempDir(), "model.safetensors")
	if code, _, stderr := runCLI(t, "export", "--checkpoint", dir, "--format", "safetensors", "--out", out); code != 0 {
		t.Fatal(stderr)
	}
	tensors, meta := readExport(t, out)
	ck, _ := ckpt.ReadCheckpoint(filepath.Join(dir, train.BestCheckpoint))
	if len(tensors) != len(ck.Params) {
		t.Fatalf("%d tensors exported, checkpoint has %d", len(tensors), len(ck.Params))
	}
	byName := map[string]ckpt.SafeTensor{}
	for _, st := range tensors {
		byName[st.Name] = st
	}
	for _, p := range ck.Params {
		st, ok := byName[p.Name]
		if !ok || len(st.F32) != len(p.Values) {
			t.Fatalf("%s missing or resized", p.Name)
		}
		for i, v := range p.Values {
			if math.Float32bits(st.F32[i]) != math.Float32bits(float32(v)) {
				t.Fatalf("%s[%d] changed in export", p.Name, i)
			}
		}
	}
	var cfg map[string]any
	if err := json.Unmarshal([]byte(meta["config"]), &cfg); err != nil || cfg["task"] != "maxnorm" {
		t.Fatalf("metadata config %q: %v", meta["config"], err)
	}
	if code, _, _ := runCLI(t, "export", "--checkpoint", dir, "--format", "onnx", "--out", out); code != 2 {
		t.Fatal("unknown format accepted")
	}
}

// TestDivergenceStopsTraining: an absurd learning rate overflows the loss;
// training stops with an error naming the step and the last good
// checkpoint, and every checkpoint left behind is finite.
func TestDivergenceStopsTraining(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	code, _, stderr := runCLI(t, append([]string{"train", "--out", dir, "--set", "training.steps=50",
		"--set", "training.checkpoint_every=1", "--set", "optimizer.lr=1e30", "--set", "optimizer.warmup_steps=0",
		"--set", "optimizer.clip_norm=0"}, tiny...)...)
	if code != 1 {
		t.Fatalf("exit %d, want 1: %s", code, stderr)
	}
	if !strings.Contains(stderr, "step ") || !(strings.Contains(stderr, "not finite") || strings.Contains(stderr, "loss is")) {
		t.Fatalf("error does not name the step and the cause: %q", stderr)
	}
	steps, _ := train.StepCheckpoints(dir)
	if len(steps) > 0 && !strings.Contains(stderr, steps[len(steps)-1]) {
		t.Errorf("error %q does not name the last good checkpoint %s", stderr, steps[len(steps)-1])
	}
	for _, s := range steps {
		if _, err := ckpt.ReadCheckpoint(s); err != nil {
			t.Errorf("%s: %v", s, err)
		}
	}
}
