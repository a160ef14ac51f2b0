package train_test

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// setSumTask is a task of a program outside probformer's module: its
// own config sections (setSumData, setSumModel) registered by one
// train.Register call, and checked by the task's own rules. The program
// that holds it imports context, fmt, math/rand/v2, os, train, configs,
// graph and losses.
const setSumTask = `// setSumData and setSumModel are the task's config sections: data: and
// model: of its config files.
type setSumData struct {
	Elements int     ` + "`yaml:\"elements\"`" + `
	Scale    float64 ` + "`yaml:\"scale\"`" + `
}

type setSumModel struct {
	Hidden int ` + "`yaml:\"hidden\"`" + `
}

func init() {
	err := train.Register("setsum", train.Spec[setSumData, setSumModel]{
		Check: func(c *configs.Config, d *setSumData, m *setSumModel) error {
			return c.Check(
				configs.Rule{OK: d.Elements > 0, Field: "data.elements", Want: "a positive integer"},
				configs.Rule{OK: d.Scale > 0, Field: "data.scale", Want: "a positive number"},
				configs.Rule{OK: m.Hidden > 0, Field: "model.hidden", Want: "a positive integer"},
				configs.Rule{OK: c.Training.Loss == "mse", Field: "training.loss", Want: "mse for task setsum"})
		},
		New: func(_ *configs.Config, d *setSumData, m *setSumModel, _ map[string][]byte) (train.Task, error) {
			return &setSum{n: d.Elements, scale: d.Scale, hidden: m.Hidden}, nil
		},
	})
	check(err)
}

// setSum regresses the sum of n numbers; stop, if set, cancels the run
// during step stopAt.
type setSum struct {
	n, hidden int
	scale     float64
	stop      context.CancelFunc
	stopAt    int
}

func (t *setSum) Build(batch int) graph.BuildFunc {
	return func(b *graph.Builder) error {
		x, y := b.Input("x", batch, t.n, 1), b.Input("y", batch, 1)
		h := graph.LinearReLU(x, b.Param("phi.w", []int{1, t.hidden}, graph.Glorot), b.Param("phi.b", []int{t.hidden}, graph.Zeros))
		pred := graph.Linear(graph.Sum(h, 1), b.Param("rho.w", []int{t.hidden, 1}, graph.Glorot), b.Param("rho.b", []int{1}, graph.Zeros))
		loss, err := losses.Regression(losses.MSE, pred, y, nil)
		b.SetLoss(loss)
		return err
	}
}

func (t *setSum) Feed(rng *rand.Rand, prog *graph.Program, step int) error {
	if t.stop != nil && step == t.stopAt {
		t.stop()
	}
	rows := prog.InputShape("y")[0]
	x, y := make([]float64, rows*t.n), make([]float64, rows)
	for i := range x {
		x[i] = t.scale * rng.Float64()
		y[i/t.n] += x[i]
	}
	if err := prog.Feed("x", x); err != nil {
		return err
	}
	return prog.Feed("y", y)
}

func (*setSum) EvalBatch() int { return 128 }

func (t *setSum) Evaluate(_ *graph.Params, prog *graph.Program, split string) (map[string]float64, error) {
	plain := *t
	plain.stop = nil
	if err := plain.Feed(rand.New(rand.NewPCG(7, uint64(len(split)))), prog, 0); err != nil {
		return nil, err
	}
	if err := prog.Run(); err != nil {
		return nil, err
	}
	return map[string]float64{split + "_mse": prog.Loss()}, nil
}

func (*setSum) Selection() (string, bool) { return "valid_mse", false }

func check(err error) {
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
}
`

// setSumConfig is a config file of the setsum task.
const setSumConfig = `task: setsum
seed: 3
dtype: float64
data:
  elements: 8
  scale: 1
model:
  hidden: 16
optimizer: {name: adam, lr: 5.0e-3, beta1: 0.9, beta2: 0.999, eps: 1.0e-8, schedule: cosine, warmup_steps: 30, min_lr: 5.0e-4}
training: {steps: 300, batch: 32, loss: mse, ema_decay: 0.99, log_every: 40, eval_every: 100, checkpoint_every: 100, keep_checkpoints: 3}
`

// userProgram is a program outside probformer's module that builds on the
// library: setSumTask, read from a config file by configs.Load, trained by
// the library loop with checkpoints, metrics.jsonl and the progress
// display; interrupted at step 150 (as Ctrl-C would) and resumed to step
// 300, it must log exactly what an uninterrupted run logs and end on the
// same weights.
const userProgram = `package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"

	"github.com/probformer/probformer/cmd/trainer/train"
	"github.com/probformer/probformer/configs"
	"github.com/probformer/probformer/graph"
	"github.com/probformer/probformer/losses"
)

` + setSumTask + `

const config = ` + "`" + setSumConfig + "`" + `

// loop builds the run of the config file at path in dir; stopAt > 0
// interrupts it at that step.
func loop(path, dir string, stopAt int, stop context.CancelFunc) *train.Loop {
	cfg, err := configs.Load(path, nil)
	check(err)
	task, err := train.NewTask(cfg, nil)
	check(err)
	task.(*setSum).stop, task.(*setSum).stopAt = stop, stopAt
	dt, err := graph.ParseDType(cfg.DType)
	check(err)
	o, tr := cfg.Optimizer, cfg.Training
	schedule, err := train.NewSchedule(o.Schedule, o.LR, o.MinLR, o.WarmupSteps)
	check(err)
	l, err := train.New(task, train.Settings{Dir: dir, Steps: tr.Steps, Batch: tr.Batch, Seed: cfg.Seed, DType: dt,
		Schedule: schedule, EMADecay: tr.EMADecay, LogEvery: tr.LogEvery, EvalEvery: tr.EvalEvery,
		CheckpointEvery: tr.CheckpointEvery, KeepCheckpoints: tr.KeepCheckpoints, Config: cfg.YAML(),
		Progress: train.NewProgress(train.ProgressLines, os.Stderr, os.Stdout), Out: os.Stdout})
	check(err)
	return l
}

// metrics reads metrics.jsonl without its timings.
func metrics(dir string) []string {
	data, err := os.ReadFile(filepath.Join(dir, train.MetricsFile))
	check(err)
	var out []string
	for _, line := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
		var m map[string]any
		check(json.Unmarshal(line, &m))
		delete(m, "wall_sec")
		delete(m, "steps_per_sec")
		b, _ := json.Marshal(m)
		out = append(out, string(b))
	}
	return out
}

func main() {
	root := os.Args[1]
	path := filepath.Join(root, "setsum.yaml")
	check(os.WriteFile(path, []byte(config), 0o644))
	// The task's own rules, and strict decoding of its own sections.
	_, err := configs.Load(path, []string{"data.elements=0"})
	fmt.Println("bad value:", err)
	bad := filepath.Join(root, "bad.yaml")
	check(os.WriteFile(bad, bytes.Replace([]byte(config), []byte("hidden: 16"), []byte("hiden: 16"), 1), 0o644))
	_, err = configs.Load(bad, nil)
	fmt.Println("bad key:", err)

	straight, split := filepath.Join(root, "straight"), filepath.Join(root, "split")
	a := loop(path, straight, 0, nil)
	check(a.Run(context.Background()))

	ctx, cancel := context.WithCancel(context.Background())
	b := loop(path, split, 150, cancel)
	check(b.Run(ctx))
	fmt.Println("interrupted:", b.Interrupted(), "at step", b.Step())
	c := loop(path, split, 0, nil)
	from, err := c.Resume(os.Stderr)
	check(err)
	fmt.Println("resumed from", filepath.Base(from))
	check(c.Run(context.Background()))

	ma, mc := metrics(straight), metrics(split)
	fmt.Println("metrics lines:", len(ma), "identical:", slices.Equal(ma, mc))
	same := true
	for _, p := range a.Params().List() {
		same = same && slices.Equal(p.Values(), c.Params().Lookup(p.Name).Values())
	}
	fmt.Println("weights identical:", same)
	fmt.Printf("valid_mse below 0.5: %v\n", a.Metrics()["valid_mse"] < 0.5)
}
`

// TestExternalModule builds and runs userProgram in a module of its own,
// with probformer replaced by this repository and no network.
func TestExternalModule(t *testing.T) {
	goBin, mod, env := scratchModule(t, userProgram)
	cmd := exec.Command(goBin, "run", ".", t.TempDir())
	cmd.Dir, cmd.Env = mod, env
	out, err := cmd.CombinedOutput()
	text := string(out)
	if err != nil {
		t.Fatalf("go run: %v\n%s", err, text)
	}
	for _, want := range []string{
		"setsum.yaml: data.elements = 0 (--set): want a positive integer",
		`bad.yaml: line 8: unknown key "hiden" in model`,
		"step 40/300  loss", // the progress display
		"step 100  valid_mse",
		"interrupted at step 150: saved checkpoint",
		"interrupted: true at step 150",
		"resumed from step-00000150.ckpt",
		"done: 300 steps",
		"metrics lines: 11 identical: true",
		"weights identical: true",
		"valid_mse below 0.5: true",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
}

// cliProgram is a program outside probformer's module whose command line
// is the trainer's, on its own task: setSumTask, and a main that is
// cli.Main.
const cliProgram = `package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"

	"github.com/probformer/probformer/cmd/trainer/cli"
	"github.com/probformer/probformer/cmd/trainer/train"
	"github.com/probformer/probformer/configs"
	"github.com/probformer/probformer/graph"
	"github.com/probformer/probformer/losses"
)

` + setSumTask + `

func main() { cli.Main() }
`

// TestExternalCLI builds cliProgram with go build -o, as a user would,
// and runs the binary's commands on its own task as processes: train with
// --set on the task's own key (and a typo in one refused with exit
// status 2), eval (a task with no report: its Evaluate metrics on the
// test split, written to eval_results.json), export --format safetensors,
// inspect, and translate, which works on seq2seq checkpoints only.
func TestExternalCLI(t *testing.T) {
	goBin, mod, env := scratchModule(t, cliProgram)
	bin := filepath.Join(t.TempDir(), "setsum")
	build := exec.Command(goBin, "build", "-o", bin, ".")
	build.Dir, build.Env = mod, env
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	work := t.TempDir()
	if err := os.WriteFile(filepath.Join(work, "setsum.yaml"), []byte(setSumConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	// setsum runs the binary in work and returns its exit status and
	// outputs.
	setsum := func(args ...string) (int, string, string) {
		t.Helper()
		var stdout, stderr strings.Builder
		cmd := exec.Command(bin, args...)
		cmd.Dir, cmd.Stdout, cmd.Stderr = work, &stdout, &stderr
		err := cmd.Run()
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Fatalf("setsum %s: %v", strings.Join(args, " "), err)
		}
		return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
	}
	expect := func(code int, stdout, stderr string, wantCode int, args string, wants ...string) {
		t.Helper()
		if code != wantCode {
			t.Fatalf("setsum %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", args, code, wantCode, stdout, stderr)
		}
		for _, want := range wants {
			if !strings.Contains(stdout+stderr, want) {
				t.Errorf("setsum %s: output lacks %q\nstdout:\n%s\nstderr:\n%s", args, want, stdout, stderr)
			}
		}
	}

	code, stdout, stderr := setsum("train", "--config", "setsum.yaml", "--set", "data.elemnts=6", "--out", "runs/typo")
	expect(code, stdout, stderr, 2, "train --set data.elemnts=6", `elemnts`)
	if _, err := os.Stat(filepath.Join(work, "runs", "typo")); err == nil {
		t.Error("a refused config made its run directory")
	}
	code, stdout, stderr = setsum("train", "--config", "setsum.yaml", "--set", "data.elements=0", "--out", "runs/zero")
	expect(code, stdout, stderr, 2, "train --set data.elements=0", "data.elements = 0 (--set): want a positive integer")

	code, stdout, stderr = setsum("train", "--config", "setsum.yaml", "--set", "data.elements=6", "--out", "runs/a", "--progress", "lines")
	expect(code, stdout, stderr, 0, "train", "step 100  valid_mse", "done: 300 steps")

	code, stdout, stderr = setsum("eval", "--checkpoint", "runs/a")
	expect(code, stdout, stderr, 0, "eval", "checkpoint runs/a/best.ckpt (step 300, config setsum)", "test_mse", "wrote runs/a/eval_results.json")
	data, err := os.ReadFile(filepath.Join(work, "runs", "a", "eval_results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var results struct {
		Task    string             `json:"task"`
		Step    int                `json:"step"`
		Metrics map[string]float64 `json:"metrics"`
	}
	if err := json.Unmarshal(data, &results); err != nil {
		t.Fatal(err)
	}
	if mse, ok := results.Metrics["test_mse"]; results.Task != "setsum" || results.Step != 300 || !ok || !(mse < 0.5) {
		t.Errorf("eval_results.json: %s", data)
	}

	code, stdout, stderr = setsum("export", "--checkpoint", "runs/a", "--format", "safetensors", "--out", "setsum.safetensors")
	expect(code, stdout, stderr, 0, "export")
	header := safetensorsHeader(t, filepath.Join(work, "setsum.safetensors"))
	for _, want := range []string{`"phi.w"`, `"rho.b"`, `\"task\":\"setsum\"`, `\"elements\":6`} {
		if !strings.Contains(header, want) {
			t.Errorf("the export's header lacks %s: %s", want, header)
		}
	}

	code, stdout, stderr = setsum("inspect", "runs/a")
	expect(code, stdout, stderr, 0, "inspect", "step:       300", "task: setsum", "elements: 6", "phi.w", "rho.w")

	code, stdout, stderr = setsum("translate", "--checkpoint", "runs/a", "--text", "hello")
	expect(code, stdout, stderr, 2, "translate", "a setsum model, not seq2seq")
}

// safetensorsHeader returns the JSON header of the safetensors file at
// path.
func safetensorsHeader(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) < 8 {
		t.Fatalf("%s: %d bytes", path, len(data))
	}
	n := binary.LittleEndian.Uint64(data[:8])
	if n > uint64(len(data)-8) {
		t.Fatalf("%s: header of %d bytes in a file of %d", path, n, len(data))
	}
	return string(data[8 : 8+n])
}

// scratchModule writes program as the main package of a module of its own
// that requires probformer replaced by this repository, and returns the
// go command, the module's directory and the environment to build it in.
func scratchModule(t *testing.T, program string) (goBin, dir string, env []string) {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not on PATH:", err)
	}
	if testing.Short() {
		t.Skip("builds a program: skipped with -short")
	}
	_, file, _, _ := runtime.Caller(0)
	repo, err := filepath.Abs(filepath.Join(filepath.Dir(file), "..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	sum, err := os.ReadFile(filepath.Join(repo, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	gomod, err := scratchGoMod(filepath.Join(repo, "go.mod"), repo)
	if err != nil {
		t.Fatal(err)
	}
	dir = t.TempDir()
	for name, data := range map[string][]byte{"go.mod": gomod, "go.sum": sum, "main.go": []byte(program)} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// -mod=readonly with the project's go.sum: the scratch module resolves
	// exactly the project's versions, and the go command downloads
	// nothing the project's own build did not (the environment's proxy
	// setting is kept, so a cache that lacks a file is filled, not failed).
	return goBin, dir, append(os.Environ(), "GOFLAGS=-mod=readonly -buildvcs=false", "GOWORK=off")
}

// scratchGoMod is the go.mod of a module outside probformer that uses it
// from repo: probformer's own requirement list, direct and indirect, plus
// probformer itself replaced by repo. With the full list, the go command
// loads the same pruned module graph as for the project, so the program
// builds from the module files that building the project fetched; with
// only probformer required, it would walk the unpruned graph of old
// dependencies (arrow's, say) and need go.mod files nothing else fetches.
func scratchGoMod(projectGoMod, repo string) ([]byte, error) {
	data, err := os.ReadFile(projectGoMod)
	if err != nil {
		return nil, err
	}
	_, requires, ok := strings.Cut(string(data), "\nrequire")
	if !ok {
		return nil, fmt.Errorf("%s: no require block", projectGoMod)
	}
	return []byte("module setsum\n\ngo 1.26\n\nrequire github.com/probformer/probformer v0.0.0\n\nreplace github.com/probformer/probformer => " + repo +
		"\n\nrequire" + requires), nil
}
