package graph_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/probformer/probformer/graph"
	"github.com/probformer/probformer/graph/optim"
	"github.com/probformer/probformer/layers"
)

// stamps records when each "PC n" line of a tape machine's log arrives.
type stamps struct {
	mu  sync.Mutex
	on  bool
	pcs []int
	at  []time.Time
}

func (s *stamps) Write(b []byte) (int, error) {
	t := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.on {
		if f := strings.Fields(string(b)); len(f) == 2 && f[0] == "PC" {
			if n, err := strconv.Atoi(f[1]); err == nil {
				s.pcs, s.at = append(s.pcs, n), append(s.at, t)
			}
		}
	}
	return len(b), nil
}

// TestStepTimeline writes the timeline of one Set Transformer step (the
// model of layers' BenchmarkSetTransformerStepLN) to the file
// PROBFORMER_TIMELINE names: each tape-machine instruction's wall time
// from its start to the next one's (the op and the executor's work
// around it), the instructions grouped by kind, and Adam's step after.
// A measurement, not a check: skipped without the variable. The log
// call per instruction costs a few µs, which the table counts in.
//
//	PROBFORMER_TIMELINE=/tmp/tl.txt go test ./graph -run StepTimeline -count 1
func TestStepTimeline(t *testing.T) {
	path := os.Getenv("PROBFORMER_TIMELINE")
	if path == "" {
		t.Skip("set PROBFORMER_TIMELINE to a file to write the timeline to")
	}
	st := &stamps{}
	graph.SetTimeline(st)
	prog := setTransformerStep(t)
	graph.SetTimeline(nil)
	opt := optim.NewAdam(1e-3)
	step := func() (time.Time, time.Time) {
		if err := prog.Run(); err != nil {
			t.Fatal(err)
		}
		end := time.Now()
		if _, err := opt.Step(prog); err != nil {
			t.Fatal(err)
		}
		return end, time.Now()
	}
	for range 30 {
		step()
	}
	// The fastest of 20 logged steps, as -bench's best round.
	var best []string
	logged := 0 // instructions logged in the fastest step
	bestT := time.Duration(1 << 62)
	for range 20 {
		st.mu.Lock()
		st.on, st.pcs, st.at = true, nil, nil
		st.mu.Unlock()
		start := time.Now()
		runEnd, end := step()
		st.mu.Lock()
		st.on = false
		pcs, at := st.pcs, st.at
		st.mu.Unlock()
		if end.Sub(start) >= bestT {
			continue
		}
		bestT, logged = end.Sub(start), len(pcs)
		best = timelineRows(graph.ProgramText(prog), pcs, at, start, runEnd, end)
	}
	if logged == 0 {
		t.Fatal("no instruction logged: the timeline switch gave the tape machine no logger")
	}
	if err := os.WriteFile(path, []byte(strings.Join(best, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("fastest logged step %v; timeline in %s", bestT, path)
}

// setTransformerStep compiles and feeds the training program of layers'
// BenchmarkSetTransformerStepLN (64 sets of 32 × 8, ISAB(8→64, 4 heads,
// 16 inducing) → ISAB(64→64) → PMA(1) → Linear(64→8), MSE), for the
// measurements of a step.
func setTransformerStep(t *testing.T) *graph.Program {
	t.Helper()
	const dim = 8
	return setTransformerProgram(t, layers.SetTransformerConfig{DimIn: dim, Dim: 64, Heads: 4, DimOut: dim,
		Encoder: "isab", Blocks: 2, Inducing: 16, Seeds: 1, LayerNorm: true}, 64, 32)
}

// setTransformerProgram compiles cfg's Set Transformer with an MSE loss
// on a batch of sets of n, its input x fed from normal draws of a fixed
// generator and its target y zeros: the step the measurements of this
// package time.
func setTransformerProgram(tb testing.TB, cfg layers.SetTransformerConfig, batch, n int) *graph.Program {
	tb.Helper()
	prog, err := graph.Compile(graph.NewParams(graph.Float32, 1), func(bd *graph.Builder) error {
		x := bd.Input("x", batch, n, cfg.DimIn)
		y := bd.Input("y", batch, cfg.DimOut)
		pred := graph.Mean(layers.SetTransformer{Config: cfg}.Forward(bd, x, nil), 1)
		bd.SetLoss(graph.Mean(graph.Square(graph.Sub(pred, y))))
		return nil
	}, true)
	if err != nil {
		tb.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 1))
	xs := make([]float64, batch*n*cfg.DimIn)
	for i := range xs {
		xs[i] = rng.NormFloat64()
	}
	if err := prog.Feed("x", xs); err != nil {
		tb.Fatal(err)
	}
	if err := prog.Feed("y", make([]float64, batch*cfg.DimOut)); err != nil {
		tb.Fatal(err)
	}
	return prog
}

// timelineRows formats one step: the instructions in order with their
// wall times, then the totals by kind of instruction.
func timelineRows(prog string, pcs []int, at []time.Time, start, runEnd, end time.Time) []string {
	var instrs []string
	inInstr := false
	for _, l := range strings.Split(prog, "\n") {
		switch {
		case strings.HasPrefix(l, "Instructions:"):
			inInstr = true
		case strings.HasPrefix(l, "Args:"):
			inInstr = false
		case inInstr && strings.TrimSpace(l) != "":
			instrs = append(instrs, strings.TrimSpace(l))
		}
	}
	name := func(pc int) string {
		if pc < len(instrs) {
			return instrs[pc]
		}
		return fmt.Sprintf("PC %d", pc)
	}
	// An instruction's kind: its op's name without arguments ("linear",
	// "loadArg", "alloc", ...), after the instruction's index.
	kind := regexp.MustCompile(`^\d+\s+([^\s(\[]+)`)
	rows := []string{fmt.Sprintf("step %v: run %v, Adam %v; %d instructions logged",
		end.Sub(start), runEnd.Sub(start), end.Sub(runEnd), len(pcs))}
	byKind := map[string]time.Duration{}
	count := map[string]int{}
	for i, pc := range pcs {
		next := runEnd
		if i+1 < len(at) {
			next = at[i+1]
		}
		d := next.Sub(at[i])
		rows = append(rows, fmt.Sprintf("%8.1f µs at %8.1f  %s", d.Seconds()*1e6, at[i].Sub(start).Seconds()*1e6, name(pc)))
		k := name(pc)
		if m := kind.FindStringSubmatch(k); m != nil {
			k = m[1]
		}
		byKind[k] += d
		count[k]++
	}
	kinds := make([]string, 0, len(byKind))
	for k := range byKind {
		kinds = append(kinds, k)
	}
	sort.Slice(kinds, func(i, j int) bool { return byKind[kinds[i]] > byKind[kinds[j]] })
	rows = append(rows, "", "by kind (total µs, instructions):")
	for _, k := range kinds {
		rows = append(rows, fmt.Sprintf("%9.1f %4d  %s", byKind[k].Seconds()*1e6, count[k], k))
	}
	return rows
}
