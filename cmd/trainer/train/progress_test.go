package train

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// fakeClock is a clock the test moves by hand.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

// TestProgressHeader: both displays open with one line on stdout naming
// the run directory, the parameter count, the steps (and the step a resume
// starts at), the example counts the task knows, and the threads.
func TestProgressHeader(t *testing.T) {
	for _, c := range []struct {
		name string
		info RunInfo
		want string
	}{
		{"fresh", RunInfo{Steps: 3000, Params: 1234567, Dir: "runs/a", Threads: 2},
			"run runs/a: 1,234,567 parameters; 3,000 steps; 2 threads\n"},
		{"resumed", RunInfo{Steps: 1200, From: 400, Params: 999, Dir: "runs/b", Threads: 4},
			"run runs/b: 999 parameters; steps 401 to 1,200 (resumed); 4 threads\n"},
		{"known examples", RunInfo{Steps: 10, Params: 1000, Dir: "d", Threads: 1, Examples: map[string]int{"train": 20000, "valid": 500}},
			"run d: 1,000 parameters; 10 steps; 20,000 training, 500 validation examples; 1 thread\n"},
		{"validation only", RunInfo{Steps: 10, Params: 100, Dir: "d", Threads: 1, Examples: map[string]int{"valid": 64}},
			"run d: 100 parameters; 10 steps; 64 validation examples; 1 thread\n"},
		{"data-parallel", RunInfo{Steps: 10, Params: 100, Dir: "d", Threads: 1, Processes: 2},
			"run d: 100 parameters; 10 steps; 2 processes × 1 thread\n"},
		{"data-parallel threads", RunInfo{Steps: 10, Params: 100, Dir: "d", Threads: 4, Processes: 2},
			"run d: 100 parameters; 10 steps; 2 processes × 4 threads\n"},
		{"one of each", RunInfo{Steps: 1, Params: 1, Dir: "d", Threads: 1, Examples: map[string]int{"valid": 1}},
			"run d: 1 parameter; 1 step; 1 validation example; 1 thread\n"},
		{"resumed for its last step", RunInfo{Steps: 10, From: 9, Params: 100, Dir: "d", Threads: 2},
			"run d: 100 parameters; step 10 (resumed); 2 threads\n"},
	} {
		for _, mode := range []string{ProgressLines, ProgressBar} {
			t.Run(c.name+"/"+mode, func(t *testing.T) {
				var stderr, stdout bytes.Buffer
				NewProgress(mode, &stderr, &stdout).Start(c.info)
				if got := stdout.String(); got != c.want {
					t.Errorf("header %q, want %q", got, c.want)
				}
			})
		}
	}
}

// testBar is the terminal display drawing into buffers, on a clock the
// test moves by hand.
func testBar(clock *fakeClock) (b *barProgress, stderr, stdout *bytes.Buffer) {
	stderr, stdout = &bytes.Buffer{}, &bytes.Buffer{}
	return &barProgress{err: stderr, out: stdout, now: clock.now}, stderr, stdout
}

// lastFrame is the bar's last frame on stderr: the text after the last
// carriage return that is not the clearing of the line.
func lastFrame(stderr string) string {
	frames := strings.Split(strings.TrimSuffix(stderr, "\n"), "\r")
	for i := len(frames) - 1; i >= 0; i-- {
		if strings.TrimSpace(frames[i]) != "" {
			return frames[i]
		}
	}
	return ""
}

// TestBarCountsThisSession: the terminal bar of a run resumed at step 150
// of 300, drawn by progressbar into a buffer, counts this session's steps
// (0/150, then 20/150 at step 170: 13%), so its speed and time to go are
// this session's; the restored steps never show as done in no time. Its
// description shows the absolute step and the loss.
func TestBarCountsThisSession(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1000, 0)}
	b, stderr, _ := testBar(clock)
	b.Start(RunInfo{Steps: 300, From: 150})
	if f := lastFrame(stderr.String()); !strings.Contains(f, "0% [") || !strings.Contains(f, "(0/150, ") || !strings.HasSuffix(f, "step 150/300") {
		t.Errorf("at the start: %q, want 0%%, (0/150 and step 150/300", f)
	}
	for step := 151; step <= 170; step++ {
		clock.advance(barRedraw / 4)
		b.Update(step, 0.5)
	}
	f := lastFrame(stderr.String())
	for _, want := range []string{" 13% [", "(20/150, ", " steps/", "step 170/300  loss 0.5"} {
		if !strings.Contains(f, want) {
			t.Errorf("bar %q lacks %q", f, want)
		}
	}
	if st := b.bar.State(); st.CurrentNum != 20 || st.Max != 150 {
		t.Errorf("bar at %d of %d, want 20 of 150", st.CurrentNum, st.Max)
	}
	for _, restored := range []string{"/300, ", "(150/", "(170/", " 50% ", " 56% "} {
		if strings.Contains(stderr.String(), restored) {
			t.Errorf("the bar counted restored steps (%q): %q", restored, stderr.String())
		}
	}
	// The whole display also works through NewProgress with a buffer as
	// its terminal.
	var err2, out2 bytes.Buffer
	p := NewProgress(ProgressBar, &err2, &out2)
	p.Start(RunInfo{Steps: 10, From: 4})
	p.Update(10, 2)
	p.Finish(10)
	if f := lastFrame(err2.String()); !strings.Contains(f, "100% [") || !strings.Contains(f, "(6/6, ") || !strings.HasSuffix(f, "step 10/10  loss 2") {
		t.Errorf("NewProgress bar %q, want 100%%, (6/6 and step 10/10  loss 2", f)
	}
}

// TestBarRedraw: the bar is redrawn at most every barRedraw, so a fast
// run does not spend its time writing to the terminal.
func TestBarRedraw(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1000, 0)}
	b, stderr, _ := testBar(clock)
	b.Start(RunInfo{Steps: 100})
	clock.advance(barRedraw / 2)
	b.Update(1, 2)
	if strings.Contains(stderr.String(), "step 1/100") {
		t.Errorf("redrawn within %v: %q", barRedraw, stderr.String())
	}
	clock.advance(barRedraw / 2)
	b.Update(2, 2)
	if !strings.Contains(lastFrame(stderr.String()), "(2/100, ") {
		t.Errorf("not redrawn after %v: %q", barRedraw, stderr.String())
	}
}

// TestBarFinish: a finished run's bar is full; an interrupted one stops
// at the step it was saved at, even within barRedraw of its last frame,
// and says it was interrupted. Either ends its line.
func TestBarFinish(t *testing.T) {
	for _, c := range []struct {
		name          string
		step          int
		want          []string
		wantNot       string
		interrupted   bool
		wantFinished  bool
		wantLastCells int
	}{
		{"done", 300, []string{"100% [", "(200/200, ", "step 300/300  loss 1"}, "interrupted", false, true, barWidth},
		{"interrupted", 120, []string{" 10% [", "(20/200, ", "step 120/300  loss 1  interrupted"}, "100%", true, false, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			clock := &fakeClock{t: time.Unix(1000, 0)}
			b, stderr, _ := testBar(clock)
			b.Start(RunInfo{Steps: 300, From: 100})
			clock.advance(time.Second)
			b.Update(c.step-1, 1)
			clock.advance(barRedraw / 10) // Ctrl-C right after a frame
			b.Update(c.step, 1)
			b.Finish(c.step)
			last := lastFrame(stderr.String())
			for _, w := range c.want {
				if !strings.Contains(last, w) {
					t.Errorf("final bar %q lacks %q", last, w)
				}
			}
			if strings.Contains(last, c.wantNot) {
				t.Errorf("final bar %q has %q", last, c.wantNot)
			}
			if c.interrupted && !strings.HasSuffix(last, "interrupted") {
				t.Errorf("final bar %q does not say it was interrupted", last)
			}
			if b.bar.IsFinished() != c.wantFinished {
				t.Errorf("bar finished: %v, want %v", b.bar.IsFinished(), c.wantFinished)
			}
			open, shut := strings.Index(last, "["), strings.Index(last, "]")
			if cells := strings.Count(last[open:shut], "=") + strings.Count(last[open:shut], ">"); open < 0 || cells != c.wantLastCells {
				t.Errorf("final bar %q fills %d cells, want %d", last, cells, c.wantLastCells)
			}
			if !strings.HasSuffix(stderr.String(), "\n") || strings.HasSuffix(stderr.String(), "\n\n") {
				t.Errorf("the bar's line is not ended once: %q", stderr.String())
			}
			// Nothing more is drawn after the end.
			n := stderr.Len()
			b.Eval(c.step, map[string]float64{"valid_mse": 1})
			if stderr.Len() != n {
				t.Errorf("drawn after Finish: %q", stderr.String()[n:])
			}
		})
	}
}

// TestBarLastStep: at the last step the bar finishes and ends its line,
// so the last validation, written after it, is not cleared away and the
// bar is not drawn again.
func TestBarLastStep(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1000, 0)}
	b, stderr, stdout := testBar(clock)
	b.logLines = true
	b.Start(RunInfo{Steps: 10})
	b.Update(10, 0.25)
	n := stderr.Len()
	if !strings.HasSuffix(stderr.String(), "\n") || !strings.Contains(lastFrame(stderr.String()), "(10/10, ") {
		t.Errorf("the last step's bar %q is not full and ended", stderr.String())
	}
	b.Log(10, 0.25, 1e-3, 5, nil)
	b.Eval(10, map[string]float64{"valid_mse": 0.3})
	b.Finish(10)
	if stderr.Len() != n {
		t.Errorf("stderr after the last step: %q", stderr.String()[n:])
	}
	if want := "step 10/10  loss 0.25  lr 0.001  5.0 steps/s  eta 0s\nstep 10  valid_mse 0.3\n"; !strings.HasSuffix(stdout.String(), want) {
		t.Errorf("stdout %q, want it to end with %q", stdout.String(), want)
	}
}

// TestBarLogLines: with stdout not a terminal (a bytes.Buffer, as `| tee
// log` is a pipe), the training loss of every log interval goes to stdout
// with the validations; on a terminal the bar alone shows it.
func TestBarLogLines(t *testing.T) {
	for _, c := range []struct {
		name     string
		logLines bool
		want     []string
		wantNot  string
	}{
		{"stdout not a terminal", true, []string{"step 40/300  loss 0.25  lr 0.001  5.0 steps/s  eta 52s\n", "step 50  valid_mse 0.3\n"}, ""},
		{"stdout a terminal", false, []string{"step 50  valid_mse 0.3\n"}, "loss"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var stderr, stdout bytes.Buffer
			b := &barProgress{err: &stderr, out: &stdout, now: (&fakeClock{}).now, logLines: c.logLines}
			b.Start(RunInfo{Steps: 300})
			b.Log(40, 0.25, 1e-3, 5, nil)
			b.Eval(50, map[string]float64{"valid_mse": 0.3})
			out := stdout.String()
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("stdout %q lacks %q", out, w)
				}
			}
			if c.wantNot != "" && strings.Contains(out, c.wantNot) {
				t.Errorf("stdout %q has %q", out, c.wantNot)
			}
		})
	}
	// NewProgress gives the bar its log lines when stdout is no terminal.
	var stderr, stdout bytes.Buffer
	p := NewProgress(ProgressBar, &stderr, &stdout)
	p.Start(RunInfo{Steps: 10})
	p.Log(5, 1, 1e-3, 2, nil)
	if !strings.Contains(stdout.String(), "step 5/10  loss 1") {
		t.Errorf("bar display to a buffer: stdout %q lacks the loss line", stdout.String())
	}
}

// TestLineProgress: the lines display writes every log interval and
// validation on stdout, nothing on stderr.
func TestLineProgress(t *testing.T) {
	var stderr, stdout bytes.Buffer
	p := NewProgress(ProgressLines, &stderr, &stdout)
	p.Start(RunInfo{Steps: 100, From: 50, Params: 10, Dir: "d", Threads: 2})
	p.Update(60, 1)
	p.Log(60, 0.5, 2e-4, 10, map[string]float64{"kl": 0.125})
	p.Eval(60, map[string]float64{"valid_mse": 1})
	p.Finish(70)
	want := "run d: 10 parameters; steps 51 to 100 (resumed); 2 threads\n" +
		"step 60/100  loss 0.5  kl 0.125  lr 0.0002  10.0 steps/s  eta 4s\n" +
		"step 60  valid_mse 1\n"
	if got := stdout.String(); got != want || stderr.Len() != 0 {
		t.Errorf("stdout %q, stderr %q; want stdout %q", got, stderr.String(), want)
	}
}

// TestPlural: counts of 1 take the singular, every other count the
// plural, in the header and the closing line alike.
func TestPlural(t *testing.T) {
	for _, c := range []struct {
		n          int
		noun, want string
	}{
		{1, "step", "step"}, {0, "step", "steps"}, {2, "step", "steps"}, {-1, "step", "steps"},
		{1, "thread", "thread"}, {8, "thread", "threads"},
		{1, "process", "process"}, {2, "process", "processes"},
	} {
		if got := plural(c.n, c.noun); got != c.want {
			t.Errorf("plural(%d, %q) = %q, want %q", c.n, c.noun, got, c.want)
		}
	}
	for _, c := range []struct {
		steps int
		want  string
	}{
		{1, "done: 1 step in 2s; best valid_mse = 0.5 at step 1\ncheckpoints: d\n"},
		{300, "done: 300 steps in 2s; best valid_mse = 0.5 at step 1\ncheckpoints: d\n"},
	} {
		if got := doneLine(c.steps, 2*time.Second, "valid_mse", 0.5, 1, "d"); got != c.want {
			t.Errorf("doneLine(%d, …) = %q, want %q", c.steps, got, c.want)
		}
	}
}

// TestWarmupWarningFrom: a resume that starts after the warm-up is
// quiet; one that starts in it (or a fresh run) is warned as WarmupWarning
// warns. (It tests schedule.go; it lives here as schedule_test.go is
// another engineer's file.)
func TestWarmupWarningFrom(t *testing.T) {
	for _, c := range []struct {
		name                string
		warmup, from, steps int
		warned              bool
	}{
		{"fresh run, long warm-up", 5, 0, 20, true},
		{"resumed in the warm-up", 5, 3, 40, true},
		{"resumed at the warm-up's last step", 5, 5, 40, false},
		{"resumed after the warm-up", 5, 10, 40, false},
		{"fresh run, short warm-up", 5, 0, 50, false},
		{"resumed in a short warm-up", 5, 3, 50, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := NewSchedule(Cosine, 1e-3, 1e-5, c.warmup)
			if err != nil {
				t.Fatal(err)
			}
			got := s.WarmupWarningFrom(c.from, c.steps)
			if (got != "") != c.warned {
				t.Errorf("warm-up %d, from step %d of %d: %q, want a warning: %v", c.warmup, c.from, c.steps, got, c.warned)
			}
			if c.from == 0 && got != s.WarmupWarning(c.steps) {
				t.Errorf("from step 0: %q, want WarmupWarning's %q", got, s.WarmupWarning(c.steps))
			}
		})
	}
}

func TestGrouped(t *testing.T) {
	for _, c := range []struct {
		n    int
		want string
	}{{0, "0"}, {999, "999"}, {1000, "1,000"}, {123456, "123,456"}, {1234567, "1,234,567"}, {-5, "-5"}} {
		if got := grouped(c.n); got != c.want {
			t.Errorf("grouped(%d) = %q, want %q", c.n, got, c.want)
		}
	}
}
