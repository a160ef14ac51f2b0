package train_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// userProgram is a program outside probformer's module that builds on the
// library: its own task, trained by the library loop with checkpoints,
// metrics.jsonl and the progress display; interrupted at step 150 (as
// Ctrl-C would) and resumed to step 300, it must log exactly what an
// uninterrupted run logs and end on the same weights.
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
	"github.com/probformer/probformer/graph"
	"github.com/probformer/probformer/losses"
)

// setSum regresses the sum of 8 numbers; stop, if set, cancels the run
// during step stopAt.
type setSum struct {
	stop   context.CancelFunc
	stopAt int
}

func (setSum) Build(batch int) graph.BuildFunc {
	return func(b *graph.Builder) error {
		x, y := b.Input("x", batch, 8, 1), b.Input("y", batch, 1)
		h := graph.LinearReLU(x, b.Param("phi.w", []int{1, 16}, graph.Glorot), b.Param("phi.b", []int{16}, graph.Zeros))
		pred := graph.Linear(graph.Sum(h, 1), b.Param("rho.w", []int{16, 1}, graph.Glorot), b.Param("rho.b", []int{1}, graph.Zeros))
		loss, err := losses.Regression(losses.MSE, pred, y, nil)
		b.SetLoss(loss)
		return err
	}
}

func (t setSum) Feed(rng *rand.Rand, prog *graph.Program, step int) error {
	if t.stop != nil && step == t.stopAt {
		t.stop()
	}
	n := prog.InputShape("y")[0]
	x, y := make([]float64, n*8), make([]float64, n)
	for i := range x {
		x[i] = rng.Float64()
		y[i/8] += x[i]
	}
	if err := prog.Feed("x", x); err != nil {
		return err
	}
	return prog.Feed("y", y)
}

func (setSum) EvalBatch() int { return 128 }

func (t setSum) Evaluate(_ *graph.Params, prog *graph.Program, split string) (map[string]float64, error) {
	if err := (setSum{}).Feed(rand.New(rand.NewPCG(7, uint64(len(split)))), prog, 0); err != nil {
		return nil, err
	}
	if err := prog.Run(); err != nil {
		return nil, err
	}
	return map[string]float64{split + "_mse": prog.Loss()}, nil
}

func (setSum) Selection() (string, bool) { return "valid_mse", false }

func loop(dir string, task setSum) *train.Loop {
	schedule, err := train.NewSchedule(train.Cosine, 5e-3, 5e-4, 30)
	check(err)
	l, err := train.New(task, train.Settings{Dir: dir, Steps: 300, Batch: 32, Seed: 3, DType: graph.Float64,
		Schedule: schedule, EMADecay: 0.99, LogEvery: 40, EvalEvery: 100, CheckpointEvery: 100,
		Progress: train.NewProgress(train.ProgressLines, os.Stderr, os.Stdout), Out: os.Stdout})
	check(err)
	return l
}

func check(err error) {
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
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
	straight, split := filepath.Join(root, "straight"), filepath.Join(root, "split")
	a := loop(straight, setSum{})
	check(a.Run(context.Background()))

	ctx, cancel := context.WithCancel(context.Background())
	b := loop(split, setSum{stop: cancel, stopAt: 150})
	check(b.Run(ctx))
	fmt.Println("interrupted:", b.Interrupted(), "at step", b.Step())
	c := loop(split, setSum{})
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
	mod := t.TempDir()
	gomod := "module setsum\n\ngo 1.26\n\nrequire github.com/probformer/probformer v0.0.0\n\nreplace github.com/probformer/probformer => " + repo + "\n"
	for name, data := range map[string][]byte{"go.mod": []byte(gomod), "go.sum": sum, "main.go": []byte(userProgram)} {
		if err := os.WriteFile(filepath.Join(mod, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(goBin, "run", ".", t.TempDir())
	cmd.Dir = mod
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod -buildvcs=false", "GOPROXY=off", "GOWORK=off")
	out, err := cmd.CombinedOutput()
	text := string(out)
	if err != nil {
		t.Fatalf("go run: %v\n%s", err, text)
	}
	for _, want := range []string{
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
