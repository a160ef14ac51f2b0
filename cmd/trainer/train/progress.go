package train

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
)

// RunInfo describes a run to its Progress display when it starts.
type RunInfo struct {
	// Steps is the step the run ends at; From the step this session starts
	// at (0, or the step a resumed run continues from). Rates and times
	// to go are measured from From.
	Steps, From int
	// Params is the number of trained values.
	Params int
	// Examples counts the task's examples by split ("train", "valid"),
	// when it knows them (Sized); nil otherwise.
	Examples map[string]int
	// Dir is the run directory; Threads the number of threads the
	// run's matrix products may use (GOMAXPROCS).
	Dir     string
	Threads int
	// Processes is the number of processes of a data-parallel run
	// (Settings.Comm), each with Threads threads; 1 otherwise.
	Processes int
}

// Progress shows a run to a person. A Loop calls Start once per Run, then
// Update after every step, Log at every log interval, Eval after every
// validation and Finish at the end.
type Progress interface {
	// Start begins the display of a run; it prints a header describing it.
	Start(info RunInfo)
	Update(step int, loss float64)
	// Log shows the interval's mean loss, the learning rate, the speed
	// (steps a second since the session started, RunInfo.From) and any
	// penalty terms (a KL, say).
	Log(step int, meanLoss, lr, stepsPerSec float64, penalties map[string]float64)
	Eval(step int, metrics map[string]float64)
	// Finish ends the display at step: RunInfo.Steps when the run is
	// done, or the step an interrupted run stopped and was saved at.
	Finish(step int)
}

// Progress display modes of NewProgress.
const (
	ProgressAuto  = "auto"  // a bar on a terminal, lines otherwise
	ProgressBar   = "bar"   // a live bar on stderr, validations on stdout
	ProgressLines = "lines" // a plain line on stdout at every log interval
)

// NewProgress returns the display of a mode: ProgressBar, ProgressLines,
// or ProgressAuto (a bar when stderr is a terminal, lines otherwise). The
// header, validations and, when stdout is not a terminal (`| tee log`),
// the log-interval lines go to stdout, so a log of stdout has the whole
// run; the bar alone goes to stderr.
func NewProgress(mode string, stderr, stdout io.Writer) Progress {
	if mode == ProgressBar || (mode == ProgressAuto && isTerminal(stderr)) {
		return &barProgress{err: stderr, out: stdout, logLines: !isTerminal(stdout), now: time.Now}
	}
	return &lineProgress{out: stdout}
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}

// writeHeader writes the line that opens a run's display.
func writeHeader(w io.Writer, info RunInfo) {
	steps := grouped(info.Steps) + " " + plural(info.Steps, "step")
	switch {
	case info.From > 0 && info.From+1 >= info.Steps:
		steps = fmt.Sprintf("step %s (resumed)", grouped(info.Steps))
	case info.From > 0:
		steps = fmt.Sprintf("steps %s to %s (resumed)", grouped(info.From+1), grouped(info.Steps))
	}
	parts := []string{grouped(info.Params) + " " + plural(info.Params, "parameter"), steps}
	var examples []string
	total := 0
	for _, split := range []struct{ key, name string }{{"train", "training"}, {"valid", "validation"}} {
		if n, ok := info.Examples[split.key]; ok {
			examples = append(examples, grouped(n)+" "+split.name)
			total += n
		}
	}
	if len(examples) > 0 {
		parts = append(parts, strings.Join(examples, ", ")+" "+plural(total, "example"))
	}
	threads := fmt.Sprintf("%d %s", info.Threads, plural(info.Threads, "thread"))
	if info.Processes > 1 {
		threads = fmt.Sprintf("%d %s × %s", info.Processes, plural(info.Processes, "process"), threads)
	}
	parts = append(parts, threads)
	fmt.Fprintf(w, "run %s: %s\n", info.Dir, strings.Join(parts, "; "))
}

// plural is noun as a count of n calls it: "step" for 1, "steps" for
// any other count ("processes" for a noun ending in s). The caller writes
// the number itself, grouped or not.
func plural(n int, noun string) string {
	switch {
	case n == 1:
		return noun
	case strings.HasSuffix(noun, "s"):
		return noun + "es"
	}
	return noun + "s"
}

// grouped writes a count with thousands separators: 1234567 is
// "1,234,567".
func grouped(n int) string {
	s := strconv.Itoa(n)
	if n < 0 {
		return s
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// logLine is the line of a log interval, as both displays write it.
func logLine(steps, step int, loss, lr, rate float64, penalties map[string]float64) string {
	extra := ""
	if len(penalties) > 0 {
		extra = "  " + FormatMetrics(penalties)
	}
	return fmt.Sprintf("step %d/%d  loss %.5g%s  lr %.3g  %.1f steps/s  eta %s\n",
		step, steps, loss, extra, lr, rate, eta(steps-step, rate))
}

// eta is the time left for steps steps at rate steps a second.
func eta(steps int, rate float64) time.Duration {
	if rate <= 0 || steps <= 0 {
		return 0
	}
	return (time.Duration(float64(steps)/rate) * time.Second).Round(time.Second)
}

// barProgress is a live bar on err, drawn by progressbar/v3; the header
// and validations (and, with logLines, the log intervals) are lines on
// out, which may be the same terminal.
//
// The bar counts this session's steps: its total is Steps−From, so its
// percentage, count, speed and time to go are this process's own, and the
// steps a resumed run restored are not counted as done in no time. Its
// description carries the run's absolute step and latest loss ("step
// 1252/1500  loss 0.4312"), and ends with "interrupted" when Ctrl-C stopped
// the run, the bar left where the run stopped.
//
// Two parts stay by hand, as progressbar/v3 (v3.14.6) cannot do them:
//   - The redraw throttle (barRedraw, timed on now). The library's
//     OptionThrottle drops every frame drawn within the interval except a
//     full bar's, and nothing can force one, so an interrupted run's last
//     frame would be dropped when Ctrl-C came within the interval, and the
//     bar would stop short of the step the run was saved at.
//   - Moving the bar out of the way of a line on out. The library's own
//     Bprintln writes to the bar's writer (stderr); these lines go to
//     stdout, so the bar is cleared (ProgressBar.Clear), the line written,
//     and the bar drawn again.
type barProgress struct {
	err, out io.Writer
	logLines bool
	now      func() time.Time

	info      RunInfo
	bar       *progressbar.ProgressBar // nil: nothing to train
	exited    bool                     // Finish stopped the bar short of full
	drawn     time.Time                // when the bar was last drawn
	step      int
	loss      float64
	hasLoss   bool
	penalties string
	// finish is the note of a bar stopped short of full: "interrupted",
	// or "stopped early" after EarlyStop.
	finish string
}

// barRedraw limits how often the bar is redrawn, so a fast run spends
// its time training rather than writing to the terminal.
const barRedraw = 100 * time.Millisecond

// barWidth is the number of cells of the bar itself.
const barWidth = 30

// barTheme draws the bar as [=====>    ].
var barTheme = progressbar.Theme{Saucer: "=", SaucerHead: ">", SaucerPadding: " ", BarStart: "[", BarEnd: "]"}

func (b *barProgress) Start(info RunInfo) {
	b.info, b.step = info, info.From
	writeHeader(b.out, info)
	if info.Steps <= info.From {
		return
	}
	b.bar = progressbar.NewOptions(info.Steps-info.From,
		progressbar.OptionSetWriter(b.err),
		progressbar.OptionSetWidth(barWidth),
		progressbar.OptionSetTheme(barTheme),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionSetItsString("steps"),
		progressbar.OptionSetPredictTime(true),
		// The description's width changes with the loss: at the end of
		// the line it does not move the bar.
		progressbar.OptionShowDescriptionAtLineEnd(),
		progressbar.OptionSetDescription(b.describe("")),
		// A finished or interrupted bar stays on its line.
		progressbar.OptionOnCompletion(func() { io.WriteString(b.err, "\n") }),
		progressbar.OptionSetRenderBlankState(true),
	)
	b.drawn = b.now()
}

func (b *barProgress) Update(step int, loss float64) {
	b.step, b.loss, b.hasLoss = step, loss, true
	if b.now().Sub(b.drawn) >= barRedraw || step >= b.info.Steps {
		b.draw("")
	}
}

func (b *barProgress) Log(step int, loss, lr, rate float64, penalties map[string]float64) {
	b.penalties = ""
	if len(penalties) > 0 {
		b.penalties = "  " + FormatMetrics(penalties)
	}
	if b.logLines {
		b.clear()
		io.WriteString(b.out, logLine(b.info.Steps, step, loss, lr, rate, penalties))
		b.draw("")
	}
}

func (b *barProgress) Eval(step int, m map[string]float64) {
	b.clear()
	fmt.Fprintf(b.out, "step %d  %s\n", step, FormatMetrics(m))
	b.draw("")
}

// Finish draws the bar at step, full when the run is done; an interrupted
// run's bar stays at step, its description saying so.
func (b *barProgress) Finish(step int) {
	b.step = step
	if !b.live() {
		return // a done run's bar finished at its last Update
	}
	if step < b.info.Steps {
		note := "  interrupted"
		if b.finish != "" {
			note = b.finish
		}
		b.draw(note)
		b.bar.Exit() // ends the line (OptionOnCompletion)
		b.exited = true
		return
	}
	b.draw("")
}

// EarlyStop implements EarlyStopper: a line on out, and the bar ends
// saying so.
func (b *barProgress) EarlyStop(step int, why string) {
	b.clear()
	fmt.Fprintf(b.out, "step %d  early stop: %s\n", step, why)
	b.finish = "  stopped early"
	b.draw("")
}

// live reports whether the bar is on its line, to be drawn again: not
// finished (full) nor exited. The library reports the first alone.
func (b *barProgress) live() bool {
	return b.bar != nil && !b.exited && !b.bar.IsFinished()
}

// describe is the bar's description: the run's absolute step, the latest
// loss and penalties, and a note.
func (b *barProgress) describe(note string) string {
	s := fmt.Sprintf("step %d/%d", b.step, b.info.Steps)
	if b.hasLoss {
		s += fmt.Sprintf("  loss %.4g%s", b.loss, b.penalties)
	}
	return s + note
}

// draw shows the bar at this session's count, described with a note. It
// always draws (the throttle is Update's): the library's Set renders at
// once, as no OptionThrottle is set. The description is applied as an
// Option rather than with Describe, which would draw a frame of its own
// with the old count; nothing else uses the bar meanwhile (the library
// starts no goroutine).
func (b *barProgress) draw(note string) {
	if !b.live() {
		return
	}
	progressbar.OptionSetDescription(b.describe(note))(b.bar)
	b.bar.Set(b.step - b.info.From)
	b.drawn = b.now()
}

// clear removes the bar from its line so that a line written to out
// does not land after it; a finished or exited bar has ended its line
// already.
func (b *barProgress) clear() {
	if b.live() {
		b.bar.Clear()
	}
}

// lineProgress writes plain lines on out: the header, every log interval
// and every validation.
type lineProgress struct {
	out  io.Writer
	info RunInfo
}

func (l *lineProgress) Start(info RunInfo)  { l.info = info; writeHeader(l.out, info) }
func (l *lineProgress) Update(int, float64) {}
func (l *lineProgress) Log(step int, loss, lr, rate float64, penalties map[string]float64) {
	io.WriteString(l.out, logLine(l.info.Steps, step, loss, lr, rate, penalties))
}
func (l *lineProgress) Eval(step int, m map[string]float64) {
	fmt.Fprintf(l.out, "step %d  %s\n", step, FormatMetrics(m))
}
func (l *lineProgress) Finish(int) {}

// EarlyStop implements EarlyStopper.
func (l *lineProgress) EarlyStop(step int, why string) {
	fmt.Fprintf(l.out, "step %d  early stop: %s\n", step, why)
}

// FormatMetrics writes metrics as "name value" pairs sorted by name, five
// significant digits each.
func FormatMetrics(m map[string]float64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %.5g", k, m[k])
	}
	return strings.Join(parts, "  ")
}
