package train

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
)

// Progress shows a run to a person. A Loop calls Start once per Run, then
// Update after every step, Log at every log interval, Eval after every
// validation and Finish at the end.
type Progress interface {
	// Start begins a display of a run of steps steps, from step from (0,
	// or the step a resumed run starts at).
	Start(steps, from int)
	Update(step int, loss float64)
	// Log shows the interval's mean loss, the learning rate, the speed
	// and any penalty terms (a KL, say).
	Log(step int, meanLoss, lr, stepsPerSec float64, penalties map[string]float64)
	Eval(step int, metrics map[string]float64)
	Finish()
}

// Progress display modes of NewProgress.
const (
	ProgressAuto  = "auto"  // a bar on a terminal, lines otherwise
	ProgressBar   = "bar"   // a live bar on stderr, validations on stdout
	ProgressLines = "lines" // a plain line on stdout at every log interval
)

// NewProgress returns the display of a mode: ProgressBar, ProgressLines,
// or ProgressAuto (a bar when stderr is a terminal, lines otherwise).
func NewProgress(mode string, stderr, stdout io.Writer) Progress {
	if mode == ProgressBar || (mode == ProgressAuto && isTerminal(stderr)) {
		return &barProgress{err: stderr, out: stdout}
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

type barProgress struct {
	bar      *progressbar.ProgressBar
	err, out io.Writer
}

func (b *barProgress) Start(steps, from int) {
	b.bar = progressbar.NewOptions(steps,
		progressbar.OptionSetWriter(b.err),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionSetItsString("steps"),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionSetElapsedTime(true),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionSetWidth(30),
		progressbar.OptionFullWidth(),
	)
	b.bar.Set(from)
}
func (b *barProgress) Update(step int, loss float64) {
	b.bar.Describe(fmt.Sprintf("loss %.4g", loss))
	b.bar.Set(step)
}
func (b *barProgress) Log(_ int, loss, _, _ float64, penalties map[string]float64) {
	if len(penalties) > 0 {
		b.bar.Describe(fmt.Sprintf("loss %.4g  %s", loss, FormatMetrics(penalties)))
	}
}
func (b *barProgress) Eval(step int, m map[string]float64) {
	b.bar.Clear()
	fmt.Fprintf(b.out, "step %d  %s\n", step, FormatMetrics(m))
}
func (b *barProgress) Finish() { b.bar.Finish(); fmt.Fprintln(b.out) }

type lineProgress struct {
	out   io.Writer
	steps int
	start time.Time
}

func (l *lineProgress) Start(steps, _ int)  { l.steps, l.start = steps, time.Now() }
func (l *lineProgress) Update(int, float64) {}
func (l *lineProgress) Log(step int, loss, lr, rate float64, penalties map[string]float64) {
	eta := time.Duration(float64(l.steps-step)/rate) * time.Second
	extra := ""
	if len(penalties) > 0 {
		extra = "  " + FormatMetrics(penalties)
	}
	fmt.Fprintf(l.out, "step %d/%d  loss %.5g%s  lr %.3g  %.1f steps/s  eta %s\n",
		step, l.steps, loss, extra, lr, rate, eta.Round(time.Second))
}
func (l *lineProgress) Eval(step int, m map[string]float64) {
	fmt.Fprintf(l.out, "step %d  %s\n", step, FormatMetrics(m))
}
func (l *lineProgress) Finish() {}

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
