package cli

import (
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/probformer/probformer/cmd/trainer/train"
	"github.com/probformer/probformer/graph/ckpt"
)

// tinySeq2SeqSets are tinySeq2Seq's --set overrides, without --config.
func tinySeq2SeqSets() []string {
	var sets []string
	for i := 0; i+1 < len(tinySeq2Seq); i += 2 {
		if tinySeq2Seq[i] == "--set" {
			sets = append(sets, tinySeq2Seq[i+1])
		}
	}
	return sets
}

// newRun sets up (but does not train) a tiny seq2seq run.
func newRun(t *testing.T, extra ...string) *trainer {
	t.Helper()
	tr, err := setupRun(trainFlags{config: "seq2seq-toy", out: filepath.Join(t.TempDir(), "run"),
		sets: append(tinySeq2SeqSets(), extra...)}, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}

	return tr
}

func TestInitEncoderFromCopiesEncoder(t *testing.T) {
	mlmDir := trainRun(t, tinyMLM...)
	ck, err := ckpt.ReadCheckpoint(filepath.Join(mlmDir, train.BestCheckpoint))
	if err != nil {
		t.Fatal(err)
	}
	fresh := newRun(t)
	started := newRun(t, "init.encoder_from="+mlmDir)
	encoder, decoder := 0, 0
	for _, p := range started.params.List() {
		want := fresh.params.Lookup(p.Name).Values()
		if strings.HasPrefix(p.Name, "src_emb.") || strings.HasPrefix(p.Name, "enc.") {
			i := slices.IndexFunc(ck.Params, func(x ckpt.Tensor) bool { return x.Name == p.Name })
			if i < 0 {
				t.Fatalf("%s is not in the masked-LM checkpoint", p.Name)
			}
			want = ck.Params[i].Values[:len(want)] // the table without [MASK]
			if p.Name == "src_emb.table" && len(ck.Params[i].Values) != len(want)+p.Shape[1] {
				t.Errorf("src_emb.table: checkpoint has %d values, want one row more than %d", len(ck.Params[i].Values), len(want))
			}
			if slices.Equal(want, fresh.params.Lookup(p.Name).Values()) {
				t.Errorf("%s: the pretrained values equal a fresh run's", p.Name)
			}
			encoder++
		} else {
			decoder++
		}
		if got := p.Values(); !slices.Equal(got, want) {
			t.Errorf("%s: not the expected initial values", p.Name)
		}
	}
	if encoder == 0 || decoder == 0 {
		t.Fatalf("%d encoder and %d other parameters", encoder, decoder)
	}
}

func TestInitEncoderFromErrors(t *testing.T) {
	mlmDir := trainRun(t, tinyMLM...)
	seqDir := trainRun(t, tinySeq2Seq...)
	cases := []struct {
		name string
		from string
		sets []string
		want []string
	}{
		{"missing", filepath.Join(t.TempDir(), "nothing"), nil, []string{"init.encoder_from", "no such file"}},
		{"not mlm", seqDir, nil, []string{"init.encoder_from", `task "seq2seq"`, "mlm"}},
		{"width", mlmDir, []string{"model.dim=16"}, []string{"init.encoder_from", "model.dim = 8 in the checkpoint, 16 in this run"}},
		{"layers", mlmDir, []string{"model.enc_layers=2"}, []string{"model.enc_layers = 1 in the checkpoint, 2"}},
		{"pre-LN", mlmDir, []string{"model.pre_ln=true"}, []string{"model.pre_ln"}},
		{"attention", mlmDir, []string{"model.attention.relative_positions=2"}, []string{"model.attention"}},
		{"vocabulary", mlmDir, []string{"data.min_count=3"}, []string{"init.encoder_from", "source vocabulary", "differs"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"train", "--out", filepath.Join(t.TempDir(), "run")}, tinySeq2Seq...)
			args = append(args, "--set", "init.encoder_from="+c.from)
			for _, s := range c.sets {
				args = append(args, "--set", s)
			}
			code, _, stderr := runCLI(t, args...)
			if code != 2 {
				t.Fatalf("exit %d, want 2: %s", code, stderr)
			}
			if strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
				t.Errorf("error spans lines: %q", stderr)
			}
			for _, w := range c.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("error %q does not mention %q", stderr, w)
				}
			}
		})
	}
	// Only seq2seq takes a pretrained encoder.
	code, _, stderr := runCLI(t, append(append([]string{"train", "--out", filepath.Join(t.TempDir(), "run")}, tinyMLM...),
		"--set", "init.encoder_from="+mlmDir)...)
	if code != 2 || !strings.Contains(stderr, "init.encoder_from") {
		t.Errorf("mlm with init.encoder_from: exit %d: %s", code, stderr)
	}
}

// TestInitEncoderFromIgnoredOnResume: a resumed run restores its own
// parameters; its config still names the masked-LM run, which need not
// exist any more.
func TestInitEncoderFromIgnoredOnResume(t *testing.T) {
	mlmDir := trainRun(t, tinyMLM...)
	dir := filepath.Join(t.TempDir(), "run")
	code, _, stderr := runCLI(t, append(append([]string{"train", "--out", dir}, tinySeq2Seq...), "--set", "init.encoder_from="+mlmDir)...)
	if code != 0 || !strings.Contains(stderr, "init: source embedding and encoder") {
		t.Fatalf("train: exit %d: %s", code, stderr)
	}
	if err := os.RemoveAll(mlmDir); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = runCLI(t, "train", "--resume", dir, "--set", "training.steps=7")
	if code != 0 {
		t.Fatalf("resume: exit %d: %s", code, stderr)
	}
	if strings.Contains(stderr, "init:") {
		t.Errorf("resume loaded an encoder: %s", stderr)
	}
}
