package train_test

import (
	"context"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"path/filepath"

	"github.com/probformer/probformer/cmd/trainer/train"
	"github.com/probformer/probformer/configs"
	"github.com/probformer/probformer/graph"
	"github.com/probformer/probformer/losses"
)

// setSum regresses the sum of a set of 8 numbers with a Deep Sets model:
// a per-element layer, a sum over the set, a linear read-out.
type setSum struct{}

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

// Feed draws a batch of sets from rng.
func (setSum) Feed(rng *rand.Rand, prog *graph.Program, _ int) error {
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

func (setSum) EvalBatch() int { return 256 }

// Evaluate scores a fixed set of 256 sets (its own seed per split).
func (t setSum) Evaluate(_ *graph.Params, prog *graph.Program, split string) (map[string]float64, error) {
	if err := t.Feed(rand.New(rand.NewPCG(uint64(len(split)), 0)), prog, 0); err != nil {
		return nil, err
	}
	if err := prog.Run(); err != nil {
		return nil, err
	}
	return map[string]float64{split + "_mse": prog.Loss()}, nil
}

func (setSum) Selection() (string, bool) { return "valid_mse", false }

// A user-defined task trained by the library loop for 150 steps, then
// resumed from its checkpoint and lengthened to 300 steps.
func Example() {
	dir, err := os.MkdirTemp("", "setsum")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	run := func(steps int) *train.Loop {
		schedule, err := train.NewSchedule(train.Cosine, 1e-2, 1e-3, 20)
		if err != nil {
			log.Fatal(err)
		}
		loop, err := train.New(setSum{}, train.Settings{Dir: dir, Steps: steps, Batch: 32, Seed: 1,
			DType: graph.Float64, Schedule: schedule, LogEvery: 50, EvalEvery: 100})
		if err != nil {
			log.Fatal(err)
		}
		if steps > 150 { // the first run has nothing to resume
			from, err := loop.Resume(nil)
			if err != nil {
				log.Fatal(err)
			}
			fmt.Println("resumed from", filepath.Base(from))
		}
		if err := loop.Run(context.Background()); err != nil {
			log.Fatal(err)
		}
		return loop
	}
	run(150)
	loop := run(300) // continues from step-00000150.ckpt
	// The 150-step run ended its cosine decay at min_lr; lengthened to 300
	// steps it goes on at min_lr rather than restarting the decay (see
	// Schedule).
	fmt.Printf("step %d: valid_mse below 0.1: %v, lr %g\n", loop.Step(), loop.Metrics()["valid_mse"] < 0.1, loop.Schedule().At(loop.Step(), 300))
	// Output:
	// resumed from step-00000150.ckpt
	// step 300: valid_mse below 0.1: true, lr 0.001
}

// sumData is the data: section of task example-setsum's configs, a type
// of the task's own.
type sumData struct {
	Elements int `yaml:"elements"`
}

// A task registered once, with its own config section: configs.Load reads
// a config file of it strictly into sumData and checks it by the task's
// rules, and train.NewTask builds the task from it.
func ExampleRegister() {
	err := train.Register("example-setsum", train.Spec[sumData, struct{}]{
		Check: func(c *configs.Config, d *sumData, _ *struct{}) error {
			return c.Check(configs.Rule{OK: d.Elements == 8, Field: "data.elements", Want: "8 (setSum's sets)"})
		},
		New: func(_ *configs.Config, _ *sumData, _ *struct{}, _ map[string][]byte) (train.Task, error) {
			return setSum{}, nil
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "setsum-config")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "setsum.yaml")
	config := `task: example-setsum
seed: 1
dtype: float64
data:
  elements: 8
optimizer: {name: adam, lr: 1.0e-2, beta1: 0.9, beta2: 0.999, eps: 1.0e-8, schedule: constant}
training: {steps: 100, batch: 32, log_every: 50, keep_checkpoints: 1}
`
	if err := os.WriteFile(path, []byte(config), 0o644); err != nil {
		log.Fatal(err)
	}
	if _, err := configs.Load(path, []string{"data.elements=5"}); err != nil {
		fmt.Println(filepath.Base(err.Error()))
	}
	cfg, err := configs.Load(path, nil)
	if err != nil {
		log.Fatal(err)
	}
	task, err := train.NewTask(cfg, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s: data.elements = %d, a %T\n", cfg.Task, cfg.Data.(*sumData).Elements, task)
	// Output:
	// setsum.yaml: data.elements = 5 (--set): want 8 (setSum's sets)
	// example-setsum: data.elements = 8, a train_test.setSum
}
