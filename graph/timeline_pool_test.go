package graph_test

import (
	"fmt"
	"os"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/probformer/probformer/graph"
	"github.com/probformer/probformer/graph/internal/kernels"
	"github.com/probformer/probformer/graph/optim"
)

// TestStepPoolStats logs what the parallel sections of a Set Transformer
// step (the model of layers' BenchmarkSetTransformerStepLN) cost, per
// step over 100 steps: sections handed to the helper, its wake-ups and
// their latency, shares taken back, the caller's wait for the helper's
// last block and the helper's idle time before the caller's. A
// measurement, not a check: skipped unless PROBFORMER_POOLSTATS is set.
//
//	PROBFORMER_POOLSTATS=1 go test ./graph -run StepPoolStats -count 1 -v
func TestStepPoolStats(t *testing.T) {
	if os.Getenv("PROBFORMER_POOLSTATS") == "" {
		t.Skip("set PROBFORMER_POOLSTATS to measure the parallel sections")
	}
	prog := setTransformerStep(t)
	opt := optim.NewAdam(1e-3)
	var adam time.Duration
	step := func() {
		if err := prog.Run(); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if _, err := opt.Step(prog); err != nil {
			t.Fatal(err)
		}
		adam += time.Since(start)
	}
	for range 30 {
		step()
	}
	const steps = 100
	adam = 0
	s, wall := countSteps(step, steps)
	if s.Sections == 0 && runtime.GOMAXPROCS(0) > 1 {
		t.Fatal("no parallel section counted: CountPool(true) counted nothing")
	}
	per := func(v int64) float64 { return float64(v) / steps }
	us := func(v int64) float64 { return float64(v) / steps / 1e3 }
	avg := func(ns, n int64) float64 {
		if n == 0 {
			return 0
		}
		return float64(ns) / float64(n) / 1e3
	}
	t.Logf("per step (%d steps, %v a step): %.1f C sections, %.1f wake-ups, %.1f started polling (mean %.2f µs after the post), %.1f after a wake-up (mean %.2f µs), longest %.1f µs, %.1f later than 10 µs, %.1f taken back; caller's own time %.0f µs, its wait for the helper %.0f µs, helper idle before the caller %.0f µs; %.1f helper sleeps, %.1f wake-ups sent off the waker's CPU; %.1f Go jobs, %.1f taken back, caller wait %.0f µs",
		steps, wall/steps, per(s.Sections), per(s.Wakes), per(s.Started), avg(s.StartNs, s.Started),
		per(s.WokeStarted), avg(s.WokeStartNs, s.WokeStarted), float64(s.StartMaxNs)/1e3, per(s.StartLate),
		per(s.TakenBack), us(s.SectionNs), us(s.WaitNs), us(s.HelperIdleNs), per(s.Sleeps), per(s.WokeAway), per(s.GoJobs),
		per(s.GoTakenBack), us(s.GoWaitNs))
	// The serial part (Amdahl's): a step's wall time outside any section
	// handed to the helper, in the executor, Go ops on one thread and
	// sections too small to split.
	par := s.SectionNs + s.WaitNs + s.GoSectionNs
	t.Logf("per step: wall %.0f µs (Adam %.0f µs), in C sections %.0f µs, in Go sections %.0f µs, serial %.0f µs (%.0f%%)",
		us(int64(wall)), us(int64(adam)), us(s.SectionNs+s.WaitNs), us(s.GoSectionNs), us(int64(wall)-par),
		100*float64(int64(wall)-par)/float64(wall))
}

// countSteps runs step steps times with the pool's counts on
// (kernels.CountPool) and returns the counts and the steps' wall time.
func countSteps(step func(), steps int) (kernels.PoolStats, time.Duration) {
	kernels.CountPool(true)
	start := time.Now()
	for range steps {
		step()
	}
	wall := time.Since(start)
	kernels.CountPool(false)
	return kernels.ReadPoolStats(), wall
}

// serialStamps records, as each "PC n" line of a tape machine's log
// arrives, the time and the wall time spent in parallel sections so far
// (PoolStats' SectionNs + WaitNs + GoSectionNs), so that each
// instruction's wall time splits into its parallel and serial parts.
type serialStamps struct {
	on  bool
	pcs []int
	at  []time.Time
	par []int64
}

func (s *serialStamps) Write(b []byte) (int, error) {
	if s.on {
		if f := strings.Fields(string(b)); len(f) == 2 && f[0] == "PC" {
			if n, err := strconv.Atoi(f[1]); err == nil {
				p := kernels.ReadPoolStats()
				s.pcs, s.at = append(s.pcs, n), append(s.at, time.Now())
				s.par = append(s.par, p.SectionNs+p.WaitNs+p.GoSectionNs)
			}
		}
	}
	return len(b), nil
}

// TestStepSerial logs where a Set Transformer step's serial time goes
// (Amdahl's part: wall time outside any section handed to the helper),
// summed by kind of tape-machine instruction over 50 steps and shown per
// step, with each kind's time inside parallel sections. A measurement,
// not a check: skipped unless PROBFORMER_POOLSTATS is set. The log call
// and the counts' read per instruction (a few µs) count as serial here;
// TestStepPoolStats gives the total without them.
//
//	PROBFORMER_POOLSTATS=1 go test ./graph -run StepSerial -count 1 -v
func TestStepSerial(t *testing.T) {
	if os.Getenv("PROBFORMER_POOLSTATS") == "" {
		t.Skip("set PROBFORMER_POOLSTATS to measure the serial part of a step")
	}
	st := &serialStamps{}
	graph.SetTimeline(st)
	prog := setTransformerStep(t)
	graph.SetTimeline(nil)
	// The instructions in order, as timelineRows reads them, each by its
	// kind: its op's name without arguments ("linear", "loadArg", ...).
	var instrs []string
	kind := regexp.MustCompile(`^\S+\s+([^\s(\[]+)`)
	inInstr := false
	for _, l := range strings.Split(graph.ProgramText(prog), "\n") {
		switch {
		case strings.HasPrefix(l, "Instructions:"):
			inInstr = true
		case strings.HasPrefix(l, "Args:"):
			inInstr = false
		case inInstr && strings.TrimSpace(l) != "":
			k := strings.TrimSpace(l)
			if m := kind.FindStringSubmatch(k); m != nil {
				k = m[1]
			}
			instrs = append(instrs, k)
		}
	}
	opt := optim.NewAdam(1e-3)
	for range 30 {
		if err := prog.Run(); err != nil {
			t.Fatal(err)
		}
		if _, err := opt.Step(prog); err != nil {
			t.Fatal(err)
		}
	}
	const steps = 50
	wall, serial := map[string]time.Duration{}, map[string]time.Duration{}
	var total, totalPar time.Duration
	kernels.CountPool(true)
	for range steps {
		st.on, st.pcs, st.at, st.par = true, st.pcs[:0], st.at[:0], st.par[:0]
		start := time.Now()
		if err := prog.Run(); err != nil {
			t.Fatal(err)
		}
		st.on = false
		st.at = append(st.at, time.Now())
		p0 := kernels.ReadPoolStats()
		st.par = append(st.par, p0.SectionNs+p0.WaitNs+p0.GoSectionNs)
		a0 := time.Now()
		if _, err := opt.Step(prog); err != nil {
			t.Fatal(err)
		}
		a1 := time.Now()
		p1 := kernels.ReadPoolStats()
		adamPar := time.Duration(p1.SectionNs + p1.WaitNs + p1.GoSectionNs - p0.SectionNs - p0.WaitNs - p0.GoSectionNs)
		wall["Adam"] += a1.Sub(a0)
		serial["Adam"] += a1.Sub(a0) - adamPar
		total += a1.Sub(start)
		totalPar += adamPar
		if len(st.pcs) > 0 {
			d := st.at[0].Sub(start)
			wall["(before PC 0)"] += d
			serial["(before PC 0)"] += d
		}
		for i, pc := range st.pcs {
			k := fmt.Sprintf("PC %d", pc)
			if pc < len(instrs) {
				k = instrs[pc]
			}
			d := st.at[i+1].Sub(st.at[i])
			p := time.Duration(st.par[i+1] - st.par[i])
			wall[k] += d
			serial[k] += d - p
			totalPar += p
		}
	}
	kernels.CountPool(false)
	// a switch that records nothing would log an empty split
	if len(instrs) == 0 || len(wall) <= 2 {
		t.Fatalf("no instruction timed: %d instructions in the program, %d kinds timed", len(instrs), len(wall))
	}
	if runtime.GOMAXPROCS(0) > 1 && totalPar == 0 {
		t.Fatal("no time counted in parallel sections with GOMAXPROCS > 1")
	}
	kinds := make([]string, 0, len(wall))
	var ser time.Duration
	for k := range wall {
		kinds = append(kinds, k)
		ser += serial[k]
	}
	sort.Slice(kinds, func(i, j int) bool { return serial[kinds[i]] > serial[kinds[j]] })
	us := func(d time.Duration) float64 { return d.Seconds() * 1e6 / steps }
	rows := []string{fmt.Sprintf("per step: wall %.0f µs, in parallel sections %.0f µs, serial %.0f µs (%.0f%%); by kind (serial µs, wall µs):",
		us(total), us(totalPar), us(ser), 100*ser.Seconds()/total.Seconds())}
	for _, k := range kinds {
		rows = append(rows, fmt.Sprintf("%8.1f %8.1f  %s", us(serial[k]), us(wall[k]), k))
	}
	t.Log(strings.Join(rows, "\n"))
}
