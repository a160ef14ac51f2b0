package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/probformer/probformer/cmd/trainer/tasks"
	"github.com/probformer/probformer/cmd/trainer/train"
	"github.com/probformer/probformer/configs"
	"github.com/probformer/probformer/datasets"
	"github.com/probformer/probformer/graph/ckpt"
)

// tsvPairs are a tiny English→French corpus: every subject with every
// verb phrase, some capitalised (data.lowercase folds them).
func tsvPairs() []string {
	subjects := [][2]string{{"he", "il"}, {"she", "elle"}, {"We", "nous"}, {"they", "ils"}, {"you", "vous"}, {"I", "je"}}
	verbs := [][2]string{{"is reading .", "lit ."}, {"is eating .", "mange ."}, {"is sleeping .", "dort ."},
		{"is here .", "est là ."}, {"is tired .", "est fatigué ."}, {"is singing .", "chante ."}}
	var lines []string
	for _, s := range subjects {
		for _, v := range verbs {
			lines = append(lines, s[0]+" "+v[0]+"\t"+s[1]+" "+v[1])
		}
	}
	return lines
}

// movedRun is a tiny TSV translation run whose data was moved away after
// training, and a working directory other than the one it trained in.
type movedRun struct {
	run       string // the run directory (absolute)
	movedData string // where the data directory went
	elsewhere string // another working directory
	root      string // the test's temporary directory
}

// trainMovedTSVRun writes train, valid and test TSV files and a config
// file naming them relative to itself into root/run/data, trains from
// root/run with a relative --config and --out, then moves the data
// directory and changes to root/elsewhere.
func trainMovedTSVRun(t *testing.T) movedRun {
	t.Helper()
	root := t.TempDir()
	work := filepath.Join(root, "run")
	data := filepath.Join(work, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		t.Fatal(err)
	}
	lines := tsvPairs()
	files := map[string][]string{"train.tsv": lines, "valid.tsv": lines[:8], "test.tsv": lines[len(lines)-9:]}
	for name, ls := range files {
		if err := os.WriteFile(filepath.Join(data, name), []byte(strings.Join(ls, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	preset, err := configs.PresetYAML("seq2seq-tsv")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := configs.Parse(preset)
	if err != nil {
		t.Fatal(err)
	}
	d, m := cfg.Data.(*tasks.Seq2SeqData), cfg.Model.(*tasks.TransformerModel)
	d.TrainFile, d.ValidFile, d.TestFile = "train.tsv", "valid.tsv", "test.tsv"
	d.Lowercase = true
	m.Dim, m.Heads, m.FF, m.EncLayers, m.DecLayers = 8, 2, 16, 1, 2
	cfg.Optimizer.WarmupSteps = 2
	cfg.Training.Steps, cfg.Training.Batch, cfg.Training.EvalEvery, cfg.Training.LogEvery, cfg.Training.CheckpointEvery = 5, 8, 5, 5, 5
	cfg.Training.Beam = 2
	if err := os.WriteFile(filepath.Join(data, "tiny.yaml"), cfg.YAML(), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(work)
	if code, _, stderr := runCLI(t, "train", "--config", "data/tiny.yaml", "--out", "run", "--progress", "lines"); code != 0 {
		t.Fatalf("train: exit %d: %s", code, stderr)
	}
	moved := filepath.Join(root, "moved")
	if err := os.Rename(data, moved); err != nil {
		t.Fatal(err)
	}
	elsewhere := filepath.Join(root, "elsewhere")
	if err := os.MkdirAll(elsewhere, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(elsewhere)
	return movedRun{run: filepath.Join(work, "run"), movedData: moved, elsewhere: elsewhere, root: root}
}

// TestCheckpointIsSelfContained: after the data moved, translate,
// attention and export run from another directory on the checkpoint
// alone; eval reads the moved test set given with --set; without it eval
// is bad input naming data.test_file; resume takes moved data files; and
// neither the checkpoint's config nor the export's metadata holds an
// absolute path of the training machine.
func TestCheckpointIsSelfContained(t *testing.T) {
	r := trainMovedTSVRun(t)

	code, stdout, stderr := runCLI(t, "translate", "--checkpoint", r.run, "--text", "He is reading .\nshe is tired .")
	if code != 0 || stderr != "" {
		t.Fatalf("translate: exit %d: %s", code, stderr)
	}
	if lines := outputLines(t, stdout); len(lines) != 2 || lines[0] == "" {
		t.Errorf("translate: %q, want 2 translations", lines)
	}

	png := filepath.Join(r.elsewhere, "map.png")
	code, stdout, stderr = runCLI(t, "attention", "--checkpoint", r.run, "--text", "he is reading .", "--out", png)
	if code != 0 {
		t.Fatalf("attention: exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "× 4 source words") {
		t.Errorf("attention: %q lacks the 4 source words", stdout)
	}
	decodePNG(t, png)

	code, _, stderr = runCLI(t, "eval", "--checkpoint", r.run)
	if code != 2 || !strings.Contains(stderr, "data.test_file") || !strings.Contains(stderr, "test.tsv") {
		t.Errorf("eval without the moved test set: exit %d, %q; want 2 naming data.test_file and the file", code, stderr)
	}
	moved := filepath.Join(r.movedData, "test.tsv")
	code, stdout, stderr = runCLI(t, "eval", "--checkpoint", r.run, "--set", "data.test_file="+moved)
	if code != 0 {
		t.Fatalf("eval: exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "test set: 9 sentence pairs") || !strings.Contains(stdout, "greedy:") {
		t.Errorf("eval report lacks the 9 test pairs or the greedy BLEU:\n%s", stdout)
	}
	// Relative to the working directory, as the help says.
	rel, err := filepath.Rel(r.elsewhere, moved)
	if err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runCLI(t, "eval", "--checkpoint", r.run, "--set", "data.test_file="+rel); code != 0 {
		t.Errorf("eval with a relative --set path %s: exit %d: %s", rel, code, stderr)
	}

	out := filepath.Join(r.elsewhere, "model.safetensors")
	if code, _, stderr := runCLI(t, "export", "--checkpoint", r.run, "--out", out); code != 0 {
		t.Fatalf("export: exit %d: %s", code, stderr)
	}
	_, meta := readExport(t, out)
	for _, key := range []string{"src_vocab", "tgt_vocab", "config"} {
		if meta[key] == "" {
			t.Errorf("export metadata lacks %s", key)
		}
	}
	for k, v := range meta {
		if strings.Contains(v, r.root) {
			t.Errorf("export metadata %s holds the absolute path %s: %s", k, r.root, v)
		}
	}
	var cfg struct {
		Data map[string]any `json:"data"`
	}
	if err := json.Unmarshal([]byte(meta["config"]), &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Data["train_file"] != "train.tsv" || cfg.Data["test_file"] != "test.tsv" {
		t.Errorf("exported data paths %v, %v: want base names", cfg.Data["train_file"], cfg.Data["test_file"])
	}
	ck, err := ckpt.ReadCheckpoint(filepath.Join(r.run, train.BestCheckpoint))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(ck.Config), r.root) {
		t.Errorf("checkpoint config holds the absolute path %s:\n%s", r.root, ck.Config)
	}
	if !strings.Contains(string(ck.Config), "data/train.tsv") {
		t.Errorf("checkpoint config lacks the data path relative to the training directory:\n%s", ck.Config)
	}

	// --resume reads the training data: from the moved files.
	code, _, stderr = runCLI(t, "train", "--resume", r.run, "--set", "training.steps=6", "--progress", "lines")
	if code != 2 || !strings.Contains(stderr, "data.train_file") {
		t.Errorf("resume without the data: exit %d, %q; want 2 naming data.train_file", code, stderr)
	}
	args := []string{"train", "--resume", r.run, "--set", "training.steps=6", "--progress", "lines"}
	for _, split := range []string{"train", "valid", "test"} {
		args = append(args, "--set", fmt.Sprintf("data.%s_file=%s", split, filepath.Join(r.movedData, split+".tsv")))
	}
	if code, _, stderr := runCLI(t, args...); code != 0 {
		t.Errorf("resume on the moved data: exit %d: %s", code, stderr)
	}
}

// TestEvalSetErrors: eval --set changes only data.test_file, of a TSV
// run; anything else is bad input naming the key.
func TestEvalSetErrors(t *testing.T) {
	toy := trainRun(t, tinySeq2Seq...)
	cases := []struct {
		name string
		set  string
		want string
	}{
		{"other key", "training.beam=3", "only data.test_file"},
		{"toy data", "data.test_file=x.tsv", `data.source "toy"`},
		{"no assignment", "data.test_file", "data.test_file"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, _, stderr := runCLI(t, "eval", "--checkpoint", toy, "--set", c.set)
			if code != 2 || !strings.Contains(stderr, c.want) {
				t.Errorf("exit %d, %q; want 2 and %q", code, stderr, c.want)
			}
		})
	}
}

// TestPortableConfig: checkpoints keep relative paths as given and make
// absolute ones relative to the working directory; exports keep only
// base names.
func TestPortableConfig(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, path, checkpoint, export string
	}{
		{"empty", "", "", ""},
		{"relative", "data/a.tsv", "data/a.tsv", "a.tsv"},
		{"absolute below", filepath.Join(wd, "data", "b.tsv"), "data/b.tsv", "b.tsv"},
		{"absolute above", filepath.Join(filepath.Dir(wd), "c.tsv"), "../c.tsv", "c.tsv"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := &configs.Config{Data: &tasks.Seq2SeqData{}}
			testFile := func(c *configs.Config) string { return c.Data.(*tasks.Seq2SeqData).TestFile }
			cfg.Data.(*tasks.Seq2SeqData).TestFile, cfg.Init.EncoderFrom = c.path, c.path
			p, e := portableConfig(cfg), exportConfig(portableConfig(cfg))
			if testFile(p) != c.checkpoint || p.Init.EncoderFrom != c.checkpoint {
				t.Errorf("checkpoint path %q, %q; want %q", testFile(p), p.Init.EncoderFrom, c.checkpoint)
			}
			if testFile(e) != c.export {
				t.Errorf("export path %q, want %q", testFile(e), c.export)
			}
			if testFile(cfg) != c.path || cfg.Init.EncoderFrom != c.path {
				t.Errorf("the run's own config changed to %q, %q", testFile(cfg), cfg.Init.EncoderFrom)
			}
		})
	}
}

// readExport reads a safetensors export: its tensors and metadata.
func readExport(t *testing.T, path string) ([]ckpt.SafeTensor, map[string]string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tensors, meta, err := ckpt.ReadSafetensors(f)
	if err != nil {
		t.Fatal(err)
	}
	return tensors, meta
}

// exportShapes reads a safetensors export: each tensor's shape by name,
// and the metadata.
func exportShapes(t *testing.T, path string) (map[string][]int, map[string]string) {
	t.Helper()
	tensors, meta := readExport(t, path)
	shapes := map[string][]int{}
	for _, x := range tensors {
		shapes[x.Name] = x.Shape
	}
	return shapes, meta
}

// vocabSnippet rebuilds token ids from an export's vocabularies with the
// Python standard library only (the README shows it).
const vocabSnippet = `import json, struct, sys

def load_vocabs(path):
    """The vocabularies in a probformer export's __metadata__."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        meta = json.loads(f.read(n))["__metadata__"]
    return {k: json.loads(meta[k]) for k in ("src_vocab", "tgt_vocab") if k in meta}

def encode(vocab, line):
    """Token ids of one line, as probformer reads it."""
    if vocab["lowercase"]:
        line = line.lower()
    ids = {w: i for i, w in enumerate(vocab["tokens"])}
    return [ids.get(w, vocab["unk_id"]) for w in line.split()]

vocabs = load_vocabs(sys.argv[1])
for line in sys.argv[2:]:
    print(json.dumps({k: encode(v, line) for k, v in vocabs.items()}))
`

// TestExportedVocabRoundTripsInPython: a stdlib-only Python snippet
// reading the export's metadata gives the ids probformer gives, for both
// vocabularies, with capitals, accents, unknown words and odd spacing.
func TestExportedVocabRoundTripsInPython(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed: the exported vocabularies are not read back from Python")
	}
	r := trainMovedTSVRun(t)
	out := filepath.Join(r.elsewhere, "model.safetensors")
	if code, _, stderr := runCLI(t, "export", "--checkpoint", r.run, "--out", out); code != 0 {
		t.Fatalf("export: exit %d: %s", code, stderr)
	}
	script := filepath.Join(r.elsewhere, "vocab.py")
	if err := os.WriteFile(script, []byte(vocabSnippet), 0o644); err != nil {
		t.Fatal(err)
	}
	sentences := []string{"He is reading .", "  she   IS tired . ", "il est fatigué .", "Elle chante .", "zebras are unknown", ""}
	cmd := exec.Command(python, append([]string{script, out}, sentences...)...)
	stdout, err := cmd.Output()
	if err != nil {
		t.Fatalf("python3 %s: %v", script, err)
	}
	lines := strings.Split(strings.TrimSuffix(string(stdout), "\n"), "\n")
	if len(lines) != len(sentences) {
		t.Fatalf("python printed %d lines for %d sentences:\n%s", len(lines), len(sentences), stdout)
	}
	_, task, err := loadSeq2Seq(r.run)
	if err != nil {
		t.Fatal(err)
	}
	ck, err := ckpt.ReadCheckpoint(filepath.Join(r.run, train.BestCheckpoint))
	if err != nil {
		t.Fatal(err)
	}
	vocabs := map[string]*datasets.Vocab{}
	for _, key := range vocabKeys {
		vocabs[key] = new(datasets.Vocab)
		if err := json.Unmarshal(ck.Extra[key], vocabs[key]); err != nil {
			t.Fatal(err)
		}
	}
	sawKnown, sawUnk := false, false
	for i, s := range sentences {
		var got map[string][]int
		if err := json.Unmarshal([]byte(lines[i]), &got); err != nil {
			t.Fatalf("python line %q: %v", lines[i], err)
		}
		want := map[string][]int{}
		for key, v := range vocabs {
			want[key] = v.Encode(task.SourceTokens(s))
			for _, id := range want[key] {
				sawKnown = sawKnown || id > datasets.EOSID
				sawUnk = sawUnk || id == datasets.UnkID
			}
		}
		for key := range want { // an empty line has no ids: [] and nil alike
			if len(want[key]) == 0 && len(got[key]) == 0 {
				want[key], got[key] = nil, nil
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%q: python ids %v, probformer's %v", s, got, want)
		}
	}
	if !sawKnown || !sawUnk {
		t.Errorf("the sentences test known words %v and <unk> %v: want both", sawKnown, sawUnk)
	}
}
