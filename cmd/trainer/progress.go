package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
)

// progress shows a run to a person: a live bar on a terminal, or plain
// periodic lines in a log file or CI.
type progress interface {
	update(step int, loss float64)
	// log shows the interval's mean loss and any penalty terms (a KL, say).
	log(step int, meanLoss, lr, stepsPerSec float64, penalties map[string]float64)
	eval(step int, metrics map[string]float64)
	finish()
}

func newProgress(mode string, stderr, stdout io.Writer, steps, start int) progress {
	if mode == "bar" || (mode == "auto" && isTerminal(stderr)) {
		bar := progressbar.NewOptions(steps,
			progressbar.OptionSetWriter(stderr),
			progressbar.OptionShowCount(),
			progressbar.OptionShowIts(),
			progressbar.OptionSetItsString("steps"),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionSetElapsedTime(true),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionSetWidth(30),
			progressbar.OptionFullWidth(),
		)
		bar.Set(start)
		return &barProgress{bar: bar, out: stdout}
	}
	return &lineProgress{out: stdout, steps: steps, start: time.Now(), from: start}
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
	bar *progressbar.ProgressBar
	out io.Writer
}

func (b *barProgress) update(step int, loss float64) {
	b.bar.Describe(fmt.Sprintf("loss %.4g", loss))
	b.bar.Set(step)
}
func (b *barProgress) log(_ int, loss, _, _ float64, penalties map[string]float64) {
	if len(penalties) > 0 {
		b.bar.Describe(fmt.Sprintf("loss %.4g  %s", loss, formatMetrics(penalties)))
	}
}
func (b *barProgress) eval(step int, m map[string]float64) {
	b.bar.Clear()
	fmt.Fprintf(b.out, "step %d  %s\n", step, formatMetrics(m))
}
func (b *barProgress) finish() { b.bar.Finish(); fmt.Fprintln(b.out) }

type lineProgress struct {
	out   io.Writer
	steps int
	start time.Time
	from  int
}

func (l *lineProgress) update(int, float64) {}
func (l *lineProgress) log(step int, loss, lr, rate float64, penalties map[string]float64) {
	eta := time.Duration(float64(l.steps-step)/rate) * time.Second
	extra := ""
	if len(penalties) > 0 {
		extra = "  " + formatMetrics(penalties)
	}
	fmt.Fprintf(l.out, "step %d/%d  loss %.5g%s  lr %.3g  %.1f steps/s  eta %s\n",
		step, l.steps, loss, extra, lr, rate, eta.Round(time.Second))
}
func (l *lineProgress) eval(step int, m map[string]float64) {
	fmt.Fprintf(l.out, "step %d  %s\n", step, formatMetrics(m))
}
func (l *lineProgress) finish() {}

func formatMetrics(m map[string]float64) string {
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
