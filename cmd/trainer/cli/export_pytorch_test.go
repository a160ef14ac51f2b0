package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/probformer/probformer/datasets"
)

// toySeq2Seq trains the seq2seq-toy preset, shrunk, long enough (300
// steps, about two seconds) that greedy translations are of varied
// lengths, some ending with <eos> and some at the length limit.
var toySeq2Seq = []string{"--config", "seq2seq-toy",
	"--set", "model.dim=16", "--set", "model.heads=2", "--set", "model.ff=32",
	"--set", "model.enc_layers=1", "--set", "model.dec_layers=2",
	"--set", "data.train_pairs=1000", "--set", "data.valid_pairs=20", "--set", "data.test_pairs=40",
	"--set", "data.lowercase=true", "--set", "optimizer.warmup_steps=30", "--set", "optimizer.lr=3e-3",
	"--set", "training.steps=300", "--set", "training.batch=32", "--set", "training.eval_every=300", "--set", "training.log_every=300",
}

// torchCheck loads an export with the module written next to it, checks
// that a fresh module takes the state_dict strictly, and greedy-translates
// standard input, one line per sentence.
const torchCheck = `
import sys
sys.path.insert(0, sys.argv[1])
import probformer_torch as pt
import json
state, meta = pt.read_safetensors(sys.argv[2])
fresh = pt.ProbformerSeq2Seq(**json.loads(meta["pytorch_config"])).to(state["src_emb.weight"].dtype)
fresh.load_state_dict(state, strict=True)
model, sv, tv = pt.from_export(sys.argv[2])
assert not model.training
for line in pt.translate(model, sv, tv, sys.stdin.read().splitlines()):
    print(line)
`

// haveTorch reports whether /usr/bin/python3 imports torch and numpy.
func haveTorch() bool {
	return exec.Command("/usr/bin/python3", "-c", "import torch, numpy").Run() == nil
}

func TestExportPyTorchSeq2Seq(t *testing.T) {
	t.Parallel() // waits on its own processes (the trainer, python3)
	code, module, stderr := runCLI(t, "export", "--format", "pytorch", "--print-module")
	if code != 0 || module != torchModule || !strings.Contains(module, "class ProbformerSeq2Seq(nn.Module)") {
		t.Fatalf("--print-module: exit %d, %d bytes (%s)", code, len(module), stderr)
	}
	corpus, err := datasets.ToyLanguage(datasets.ToyLangConfig{Seed: 1, Test: 40})
	if err != nil {
		t.Fatal(err)
	}
	lines := []string{"THE Dog sees the CAT", ""}
	for _, p := range corpus.Test {
		lines = append(lines, strings.Join(p.Src, " "))
	}
	torch := haveTorch()
	if !torch {
		t.Log("skipping the PyTorch comparison: /usr/bin/python3 -c 'import torch, numpy' fails")
	}
	for _, c := range []struct {
		name string
		set  []string
		out  string // --out under the temporary directory
	}{
		{"post-LN float32", nil, "export"},
		{"pre-LN tied float64", []string{"--set", "model.pre_ln=true", "--set", "model.tie_output=true", "--set", "dtype=float64"}, "x/model.safetensors"},
		{"post-LN final norm tied", []string{"--set", "model.final_norm=true", "--set", "model.tie_output=true"}, "x.safetensors"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			args := append(slices.Clone(toySeq2Seq), c.set...)
			dir := trainRun(t, args...)
			out := filepath.Join(t.TempDir(), c.out)
			if code, _, stderr := runCLI(t, "export", "--checkpoint", dir, "--format", "pytorch", "--out", out); code != 0 {
				t.Fatalf("export: exit %d: %s", code, stderr)
			}
			state, moduleDir := out, filepath.Dir(out)
			if !strings.HasSuffix(out, ".safetensors") {
				state, moduleDir = filepath.Join(out, "model.safetensors"), out
			}
			if b, err := os.ReadFile(filepath.Join(moduleDir, "probformer_torch.py")); err != nil || string(b) != torchModule {
				t.Fatalf("module next to the export: %v", err)
			}
			shapes, meta := exportShapes(t, state)
			for name, want := range map[string][]int{
				"transformer.encoder.layers.0.self_attn.in_proj_weight":       {48, 16},
				"transformer.decoder.layers.1.multihead_attn.out_proj.weight": {16, 16},
				"transformer.decoder.layers.1.linear1.weight":                 {32, 16},
				"pos": {16, 16},
			} {
				if !slices.Equal(shapes[name], want) {
					t.Errorf("%s: shape %v, want %v", name, shapes[name], want)
				}
			}
			if _, ok := shapes["transformer.encoder.norm.weight"]; ok != (len(c.set) > 0) {
				t.Errorf("final encoder norm exported: %v", ok)
			}
			for _, key := range []string{"pytorch_config", "src_vocab", "tgt_vocab", "config"} {
				if meta[key] == "" {
					t.Errorf("metadata lacks %s", key)
				}
			}
			if !torch {
				return
			}
			sameAsTranslate(t, dir, moduleDir, state, lines)
		})
	}
}

// sameAsTranslate checks that the PyTorch module beside the export state
// greedy-translates lines exactly as `trainer translate` does from the
// checkpoint dir, and that the translations are varied enough for the
// comparison to tell models apart.
func sameAsTranslate(t *testing.T, dir, moduleDir, state string, lines []string) {
	t.Helper()
	input := strings.Join(lines, "\n")
	code, stdout, stderr := runCLI(t, "translate", "--checkpoint", dir, "--text", input)
	if code != 0 {
		t.Fatalf("translate: exit %d: %s", code, stderr)
	}
	want := outputLines(t, stdout)
	cmd := exec.Command("/usr/bin/python3", "-c", torchCheck, moduleDir, state)
	cmd.Env = append(os.Environ(), "OPENBLAS_NUM_THREADS=1", "OMP_NUM_THREADS=1")
	cmd.Stdin = strings.NewReader(input)
	py, err := cmd.Output()
	if err != nil {
		msg := ""
		if e, ok := err.(*exec.ExitError); ok {
			msg = string(e.Stderr)
		}
		t.Fatalf("python: %v\n%s", err, msg)
	}
	got := outputLines(t, string(py))
	if len(got) != len(want) {
		t.Fatalf("PyTorch gave %d lines, translate %d", len(got), len(want))
	}
	distinct := map[string]bool{}
	for i := range want {
		distinct[want[i]] = true
		if got[i] != want[i] {
			t.Errorf("sentence %d %q:\n  translate: %q\n  PyTorch:   %q", i, lines[i], want[i], got[i])
		}
	}
	if len(distinct) < 5 {
		t.Errorf("only %d distinct translations: the comparison would not tell models apart", len(distinct))
	}
}

// TestExportPyTorchEngFra is TestExportPyTorchSeq2Seq's comparison on the
// 587 English–French test sentences, with a small model trained briefly
// on the real corpus (skipped without the data or without PyTorch).
func TestExportPyTorchEngFra(t *testing.T) {
	t.Parallel() // waits on its own processes (the trainer, python3)
	test := filepath.Join(engFraDir, "simple.test.tsv")
	if _, err := os.Stat(test); err != nil {
		t.Skipf("English–French data not found at %s: %v", engFraDir, err)
	}
	if !haveTorch() {
		t.Skip("skipping the PyTorch comparison: /usr/bin/python3 -c 'import torch, numpy' fails")
	}
	dir := trainRun(t, "--config", "seq2seq-tsv",
		"--set", "data.train_file="+filepath.Join(engFraDir, "simple.train.tsv"),
		"--set", "data.valid_file="+filepath.Join(engFraDir, "simple.valid.tsv"),
		"--set", "data.test_file="+test,
		"--set", "model.dim=16", "--set", "model.heads=2", "--set", "model.ff=32",
		"--set", "model.enc_layers=1", "--set", "model.dec_layers=1",
		"--set", "training.steps=200", "--set", "training.batch=32", "--set", "training.log_every=100",
		"--set", "training.eval_every=0", "--set", "optimizer.warmup_steps=20")
	out := filepath.Join(t.TempDir(), "export")
	if code, _, stderr := runCLI(t, "export", "--checkpoint", dir, "--format", "pytorch", "--out", out); code != 0 {
		t.Fatalf("export: exit %d: %s", code, stderr)
	}
	data, err := os.ReadFile(test)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		src, _, _ := strings.Cut(l, "\t")
		lines = append(lines, src)
	}
	sameAsTranslate(t, dir, out, filepath.Join(out, "model.safetensors"), lines)
}

func TestExportPyTorchErrors(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	if code, _, stderr := runCLI(t, append([]string{"train", "--config", "maxnorm-em", "--out", dir, "--set", "training.steps=2"}, tiny...)...); code != 0 {
		t.Fatal(stderr)
	}
	bayes := trainRun(t, append([]string{"--set", "training.steps=2"}, bayesTiny...)...)
	seq := trainRun(t, tinySeq2Seq...)
	tmp := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--checkpoint", dir, "--format", "pytorch", "--out", filepath.Join(tmp, "a")}, "softmax scaled_dot"},
		{[]string{"--checkpoint", bayes, "--format", "pytorch", "--out", filepath.Join(tmp, "a")}, "bayes-weibull"},
		{[]string{"--checkpoint", seq, "--format", "pytorch", "--out", filepath.Join(tmp, "m.pt")}, "safetensors"},
		{[]string{"--format", "safetensors", "--print-module"}, "--format pytorch"},
		{[]string{"--format", "pytorch", "--out", filepath.Join(tmp, "b")}, "checkpoint"},
	} {
		code, _, stderr := runCLI(t, append([]string{"export"}, c.args...)...)
		if code != 2 || !strings.Contains(stderr, c.want) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("%v: exit %d, %q; want exit 2 and one line with %q", c.args, code, stderr, c.want)
		}
	}
	if _, err := os.Stat(filepath.Join(tmp, "a")); err == nil {
		t.Errorf("a failed export left its output directory")
	}
}
