package train_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/probformer/probformer/cmd/trainer/train"
	"github.com/probformer/probformer/graph"
	"github.com/probformer/probformer/graph/fileio"
)

// longLine is a metrics line of step with a field of n bytes.
func longLine(step string, n int) string {
	return `{"step":` + step + `,"note":"` + strings.Repeat("x", n) + `"}` + "\n"
}

// TestTruncateMetricsKeepsLongLines: truncation for a resume keeps every
// complete line up to the step, however long (2 MiB here, past the old
// 1 MiB scanner limit), keeps a complete line it cannot read, and drops
// the lines after the step and a torn last line.
func TestTruncateMetricsKeepsLongLines(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, train.MetricsFile)
	kept := `{"step":5,"train_loss":1}` + "\n" + longLine("10", 2<<20) + "not json, but whole\n" + `{"step":20,"train_loss":0.5}` + "\n"
	data := kept + `{"step":25,"train_loss":0.4}` + "\n" + longLine("30", 10) + `{"step":35,"train_lo`
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := train.TruncateMetrics(dir, 20); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	if string(got) != kept {
		t.Errorf("after truncation to step 20: %d bytes, want the %d bytes of the complete lines to step 20", len(got), len(kept))
	}
	// Nothing to drop: the file is left as it is.
	before, _ := os.Stat(path)
	if err := train.TruncateMetrics(dir, 20); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.Stat(path); !os.SameFile(before, after) {
		t.Error("a log with nothing to drop was rewritten")
	}
}

// TestReadMetricsLineLength: ReadMetrics reads a line of any length (17
// MiB, past the old 16 MiB limit), names the line of one that is not
// JSON, and skips a last line that is still being written.
func TestReadMetricsLineLength(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, train.MetricsFile)
	data := longLine("1", 17<<20) + `{"step":2,"train_loss":3}` + "\n" + `{"step":3,"tr`
	os.WriteFile(path, []byte(data), 0o644)
	lines, err := train.ReadMetrics(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != 2 || lines[0]["step"] != 1 || lines[1]["train_loss"] != 3 {
		t.Errorf("read %d lines %v, want steps 1 and 2", len(lines), lines[1:])
	}
	os.WriteFile(path, []byte(`{"step":1}`+"\n{broken\n"+`{"step":3}`+"\n"), 0o644)
	if _, err := train.ReadMetrics(dir); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("a broken middle line: %v, want an error naming line 2", err)
	}
	// A whole last line without a newline (a hand-written file) is read.
	os.WriteFile(path, []byte(`{"step":1}`+"\n"+`{"step":2}`), 0o644)
	if lines, err := train.ReadMetrics(dir); err != nil || len(lines) != 2 {
		t.Errorf("a last line with no newline: %d lines, %v", len(lines), err)
	}
}

// TestMetricsWriteErrorNamesStepAndCheckpoint: a metrics log that cannot
// be written (a full disk: /dev/full) stops the run with an error naming
// the step and the last checkpoint.
func TestMetricsWriteErrorNamesStepAndCheckpoint(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full")
	}
	dir := t.TempDir()
	if err := os.Symlink("/dev/full", filepath.Join(dir, train.MetricsFile)); err != nil {
		t.Fatal(err)
	}
	l, err := train.New(setSum{}, train.Settings{Dir: dir, Steps: 20, Batch: 4, Seed: 1, DType: graph.Float64,
		LogEvery: 10, CheckpointEvery: 5, Out: &bytes.Buffer{}})
	if err != nil {
		t.Fatal(err)
	}
	err = l.Run(context.Background())
	if err == nil {
		t.Fatal("a run whose metrics log is full succeeded")
	}
	for _, want := range []string{"step 10", "metrics log", train.CheckpointName(5), "no space"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	t.Log(err)
}

// TestMetricsLogMustBeAFile: a metrics.jsonl that is a FIFO or a link to
// /dev/zero is refused at once, by name, when a resume truncates it, when
// it is read, and (a FIFO) when a run opens it to append: nothing blocks
// on the FIFO or reads /dev/zero without end.
func TestMetricsLogMustBeAFile(t *testing.T) {
	fifoDir, zeroDir := t.TempDir(), t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(fifoDir, train.MetricsFile), 0o644); err != nil {
		t.Skip("mkfifo:", err)
	}
	if err := os.Symlink("/dev/zero", filepath.Join(zeroDir, train.MetricsFile)); err != nil {
		t.Fatal(err)
	}
	within := func(what string, f func() error) {
		t.Helper()
		done := make(chan error, 1)
		go func() { done <- f() }()
		select {
		case err := <-done:
			if !errors.Is(err, fileio.ErrNotRegular) || !strings.Contains(err.Error(), train.MetricsFile) {
				t.Errorf("%s: %v, want a not-regular error naming %s", what, err, train.MetricsFile)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: still running after 10 s", what)
		}
	}
	for _, dir := range []string{fifoDir, zeroDir} {
		within("truncate "+dir, func() error { return train.TruncateMetrics(dir, 5) })
		within("read "+dir, func() error { _, err := train.ReadMetrics(dir); return err })
	}
	within("run", func() error {
		l, err := train.New(setSum{}, train.Settings{Dir: fifoDir, Steps: 5, Batch: 4, Seed: 1, DType: graph.Float64,
			LogEvery: 5, Out: &bytes.Buffer{}})
		if err != nil {
			return err
		}
		return l.Run(context.Background())
	})
}

// TestRemoveStaleTempsKeepsOthers: a resume's clean-up removes the
// temporary files of the run's own writes, and leaves those of writers
// that take no lock (eval's results, an export into the directory).
func TestRemoveStaleTempsKeepsOthers(t *testing.T) {
	dir := t.TempDir()
	stale := []string{".step-00000010.ckpt.tmp-1", ".best.ckpt.tmp-2", ".metrics.jsonl.tmp-3", ".config.yaml.tmp-4"}
	kept := []string{".eval_results.json.tmp-5", ".model.safetensors.tmp-6", "step-00000010.ckpt", ".lock"}
	for _, name := range append(slices.Clone(stale), kept...) {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := train.RemoveStaleTemps(dir); err != nil {
		t.Fatal(err)
	}
	for _, name := range stale {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			t.Errorf("%s was left", name)
		}
	}
	for _, name := range kept {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("%s was removed", name)
		}
	}
}
