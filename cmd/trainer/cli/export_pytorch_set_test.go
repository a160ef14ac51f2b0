package cli

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/probformer/probformer/graph"
)

// toyMaxNorm trains the maxnorm preset, shrunk, for 50 steps.
var toyMaxNorm = []string{
	"--set", "model.dim=16", "--set", "model.heads=2", "--set", "model.inducing=4",
	"--set", "data.min_set=6", "--set", "data.max_set=8", "--set", "data.valid_sets=16", "--set", "data.test_sets=16",
	"--set", "training.steps=50", "--set", "training.batch=8", "--set", "training.log_every=50",
	"--set", "training.eval_every=50", "--set", "optimizer.warmup_steps=5",
}

// torchSetCheck loads a maxnorm export, checks that a fresh module takes
// the state_dict strictly, and prints the predictions for the sets of
// standard input ({"x": [B][N][d], "mask": [B][N]}) as JSON.
const torchSetCheck = `
import sys, json
sys.path.insert(0, sys.argv[1])
import probformer_torch as pt
import torch
state, meta = pt.read_safetensors(sys.argv[2])
assert meta["pytorch_module"] == "probformer_torch.ProbformerSetTransformer", meta["pytorch_module"]
fresh = pt.ProbformerSetTransformer(**json.loads(meta["pytorch_config"])).to(state["head.weight"].dtype)
fresh.load_state_dict(state, strict=True)
model, sv, tv = pt.from_export(sys.argv[2])
assert not model.training and sv is None and tv is None
req = json.load(sys.stdin)
dt = model.head.weight.dtype
x = torch.tensor(req["x"], dtype=torch.float64).to(dt)
mask = torch.tensor(req["mask"]) > 0
out = model(x, mask)
assert out.shape == (x.size(0), model.pma.seeds.size(0), x.size(2)), out.shape
pred = model.predict(x, mask)
assert torch.equal(pred, out.mean(dim=1))
print(json.dumps(pred.double().tolist()))
`

// TestExportPyTorchSetTransformer exports maxnorm checkpoints with
// --format pytorch and checks that ProbformerSetTransformer predicts what
// the task's evaluation graph predicts from the checkpoint, on sets of
// several sizes whose padding holds garbage.
func TestExportPyTorchSetTransformer(t *testing.T) {
	t.Parallel() // waits on its own processes (the trainer, python3)
	torch := haveTorch()
	if !torch {
		t.Log("skipping the PyTorch comparison: /usr/bin/python3 -c 'import torch, numpy' fails")
	}
	for _, c := range []struct {
		name string
		set  []string
		tol  float64 // of the largest difference, relative to the largest prediction
	}{
		{"isab layer-norm float32", nil, 1e-5},
		{"sab decoder-sab 3 seeds float64", []string{"--set", "model.encoder=sab", "--set", "model.seeds=3",
			"--set", "model.decoder_sab=true", "--set", "model.layer_norm=false", "--set", "model.blocks=1", "--set", "dtype=float64"}, 1e-10},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := trainRun(t, append(slices.Clone(toyMaxNorm), c.set...)...)
			out := filepath.Join(t.TempDir(), "export")
			if code, _, stderr := runCLI(t, "export", "--checkpoint", dir, "--format", "pytorch", "--out", out); code != 0 {
				t.Fatalf("export: exit %d: %s", code, stderr)
			}
			state := filepath.Join(out, "model.safetensors")
			shapes, meta := exportShapes(t, state)
			want := map[string][]int{"pma.mab.q.weight": {16, 16}, "head.weight": {2, 16}, "head.bias": {2}}
			if len(c.set) == 0 {
				want["enc.0.inducing"] = []int{4, 16}
				want["enc.0.mab0.k.weight"] = []int{16, 2}
				want["enc.1.mab1.ln1.weight"] = []int{16}
			} else {
				want["enc.0.mab.q.weight"] = []int{16, 2}
				want["sab.mab.o.weight"] = []int{16, 16}
				want["pma.seeds"] = []int{3, 16}
			}
			for name, w := range want {
				if !slices.Equal(shapes[name], w) {
					t.Errorf("%s: shape %v, want %v", name, shapes[name], w)
				}
			}
			for _, key := range []string{"pytorch_config", "pytorch_module", "config"} {
				if meta[key] == "" {
					t.Errorf("metadata lacks %s", key)
				}
			}
			if !torch {
				return
			}
			x, mask, goPred := maxNormPredictions(t, dir)
			input, err := json.Marshal(map[string]any{"x": x, "mask": mask})
			if err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("/usr/bin/python3", "-c", torchSetCheck, out, state)
			cmd.Env = append(os.Environ(), "OPENBLAS_NUM_THREADS=1", "OMP_NUM_THREADS=1")
			cmd.Stdin = bytes.NewReader(input)
			py, err := cmd.Output()
			if err != nil {
				msg := ""
				if e, ok := err.(*exec.ExitError); ok {
					msg = string(e.Stderr)
				}
				t.Fatalf("python: %v\n%s", err, msg)
			}
			var got [][]float64
			if err := json.Unmarshal(py, &got); err != nil {
				t.Fatalf("python output %q: %v", py, err)
			}
			if len(got) != len(goPred) {
				t.Fatalf("PyTorch gave %d predictions, probformer %d", len(got), len(goPred))
			}
			var scale, worst float64
			distinct := map[float64]bool{}
			for i := range goPred {
				if len(got[i]) != len(goPred[i]) {
					t.Fatalf("set %d: PyTorch %v, probformer %v", i, got[i], goPred[i])
				}
				for j := range goPred[i] {
					scale = max(scale, math.Abs(goPred[i][j]))
					worst = max(worst, math.Abs(got[i][j]-goPred[i][j]))
					distinct[goPred[i][j]] = true
				}
			}
			t.Logf("largest difference %.3g, largest prediction %.3g", worst, scale)
			if !(worst <= c.tol*scale) {
				for i := range goPred {
					t.Logf("set %d: probformer %v, PyTorch %v", i, goPred[i], got[i])
				}
				t.Errorf("PyTorch and probformer differ by %.3g, more than %g of %.3g", worst, c.tol, scale)
			}
			if len(distinct) < len(goPred) {
				t.Errorf("only %d distinct prediction values: the comparison would not tell models apart", len(distinct))
			}
		})
	}
}

// maxNormPredictions draws 6 sets of 1 to 8 elements (padding holds
// large garbage values) and predicts them with the maxnorm task's graph
// on the checkpoint's parameters: x [6][8][2], mask [6][8], pred [6][2].
func maxNormPredictions(t *testing.T, dir string) (x [][][]float64, mask [][]float64, pred [][]float64) {
	t.Helper()
	tr, _, err := loadCheckpoint(dir, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	const batch, n, dim = 6, 8, 2
	rng := rand.New(rand.NewPCG(7, 11))
	var flatX, flatMask []float64
	for i := range batch {
		size := []int{8, 6, 7, 1, 3, 8}[i]
		x = append(x, nil)
		mask = append(mask, nil)
		off := []float64{5 * rng.NormFloat64(), 5 * rng.NormFloat64()}
		for j := range n {
			row := []float64{off[0] + rng.NormFloat64(), off[1] + rng.NormFloat64()}
			m := 1.0
			if j >= size {
				row, m = []float64{100 * rng.NormFloat64(), 100 * rng.NormFloat64()}, 0
			}
			x[i] = append(x[i], row)
			mask[i] = append(mask[i], m)
			flatX = append(flatX, row...)
			flatMask = append(flatMask, m)
		}
	}
	prog, err := graph.Compile(tr.params, tr.task.Build(batch), false)
	if err != nil {
		t.Fatal(err)
	}
	for name, v := range map[string][]float64{"x": flatX, "mask": flatMask, "y": make([]float64, batch*dim)} {
		if err := prog.Feed(name, v); err != nil {
			t.Fatal(err)
		}
	}
	if err := prog.Run(); err != nil {
		t.Fatal(err)
	}
	p, shape, err := prog.Output("pred")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(shape, []int{batch, dim}) {
		t.Fatalf("pred has shape %v", shape)
	}
	for i := range batch {
		pred = append(pred, p[i*dim:(i+1)*dim])
	}
	return x, mask, pred
}
