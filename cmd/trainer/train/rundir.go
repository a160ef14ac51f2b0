package train

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/probformer/probformer/graph/ckpt"
	"github.com/probformer/probformer/graph/fileio"
)

// A run directory holds:
//
//	config.yaml            the run's config
//	metrics.jsonl          one JSON object per log or evaluation
//	step-00001000.ckpt     the last keep_checkpoints checkpoints
//	best.ckpt              the checkpoint with the best validation metric
//
// The Loop writes all but config.yaml, which is its caller's to write.
const (
	// BestCheckpoint is the file of the best validation checkpoint.
	BestCheckpoint = "best.ckpt"
	// MetricsFile is the file of the metrics log, one JSON object a line.
	MetricsFile = "metrics.jsonl"
	// ConfigFile is the file of a run's config (`trainer train` writes it).
	ConfigFile = "config.yaml"
)

// CheckpointName is the file name of the step checkpoint of step.
func CheckpointName(step int) string { return fmt.Sprintf("step-%08d.ckpt", step) }

// StepCheckpoints lists the step checkpoints of dir, oldest first.
func StepCheckpoints(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		n := e.Name()
		if strings.HasPrefix(n, "step-") && strings.HasSuffix(n, ".ckpt") {
			if _, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(n, "step-"), ".ckpt")); err == nil {
				names = append(names, filepath.Join(dir, n))
			}
		}
	}
	slices.Sort(names)
	return names, nil
}

// ResolveCheckpoint maps a path to a checkpoint file: a file is itself; a
// run directory gives its best checkpoint when preferBest, else its latest
// step checkpoint (falling back to the other).
func ResolveCheckpoint(path string, preferBest bool) (string, error) {
	info, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("checkpoint: %w", err)
	}
	if !info.IsDir() {
		return path, nil
	}
	steps, err := StepCheckpoints(path)
	if err != nil {
		return "", fmt.Errorf("checkpoint: %w", err)
	}
	best := filepath.Join(path, BestCheckpoint)
	_, bestErr := os.Stat(best)
	switch {
	case preferBest && bestErr == nil:
		return best, nil
	case len(steps) > 0:
		return steps[len(steps)-1], nil
	case bestErr == nil:
		return best, nil
	}
	return "", fmt.Errorf("checkpoint: %s holds no checkpoint", path)
}

// ErrNoCheckpoint is the error (errors.Is) of LatestCheckpoint and
// Loop.Resume when the run directory holds no step checkpoint, or does
// not exist: there is nothing to resume, and a new run may start there
// (Loop.ResumeOrStart). A directory whose step checkpoints all fail to
// load is another error: its run is not to be started over unawares.
var ErrNoCheckpoint = errors.New("no checkpoint to resume from")

// LatestCheckpoint returns the newest step checkpoint of dir that loads,
// skipping (and naming) any that do not: a crash can only leave whole
// files, but a disk can still fail. A dir that does not exist or holds no
// step checkpoint is an ErrNoCheckpoint.
func LatestCheckpoint(dir string, warn io.Writer) (*ckpt.Checkpoint, string, error) {
	steps, err := StepCheckpoints(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, "", fmt.Errorf("resume: %s: %w (the directory does not exist)", dir, ErrNoCheckpoint)
	}
	if err != nil {
		return nil, "", fmt.Errorf("resume: %w", err)
	}
	if len(steps) == 0 {
		return nil, "", fmt.Errorf("resume: %s holds no step checkpoint: %w", dir, ErrNoCheckpoint)
	}
	for i := len(steps) - 1; i >= 0; i-- {
		ck, err := ckpt.ReadCheckpoint(steps[i])
		if err == nil {
			return ck, steps[i], nil
		}
		fmt.Fprintf(warn, "skipping %v\n", err)
	}
	return nil, "", fmt.Errorf("resume: %s holds no loadable checkpoint", dir)
}

// ReadRunCheckpoint reads the checkpoint that path names, as
// ResolveCheckpoint resolves it: a file is read as it is; a run
// directory gives its best checkpoint when preferBest, else its newest
// step checkpoint. When that one does not load, the directory's other
// checkpoints are tried (the step checkpoints newest first, then
// best.ckpt), and the first that loads is used, with one line on warn
// (which may be nil) naming what was skipped and what is used instead. It
// returns the checkpoint and its path.
func ReadRunCheckpoint(path string, preferBest bool, warn io.Writer) (*ckpt.Checkpoint, string, error) {
	first, err := ResolveCheckpoint(path, preferBest)
	if err != nil {
		return nil, "", err
	}
	ck, firstErr := ckpt.ReadCheckpoint(first)
	if firstErr == nil {
		return ck, first, nil
	}
	if info, err := os.Stat(path); err != nil || !info.IsDir() {
		return nil, "", firstErr
	}
	steps, err := StepCheckpoints(path)
	if err != nil {
		return nil, "", firstErr
	}
	slices.Reverse(steps)
	candidates := append(steps, filepath.Join(path, BestCheckpoint))
	skipped := []string{firstErr.Error()}
	for _, c := range candidates {
		if c == first {
			continue
		}
		if _, err := os.Stat(c); err != nil {
			continue
		}
		ck, err := ckpt.ReadCheckpoint(c)
		if err != nil {
			skipped = append(skipped, err.Error())
			continue
		}
		if warn != nil {
			fmt.Fprintf(warn, "warning: skipping %s; using %s instead\n", strings.Join(skipped, "; skipping "), c)
		}
		return ck, c, nil
	}
	if len(skipped) == 1 {
		return nil, "", firstErr
	}
	return nil, "", fmt.Errorf("%s holds no loadable checkpoint: %s", path, strings.Join(skipped, "; "))
}

// PruneCheckpoints deletes all but the newest keep step checkpoints.
func PruneCheckpoints(dir string, keep int) error {
	steps, err := StepCheckpoints(dir)
	if err != nil {
		return err
	}
	for len(steps) > keep {
		if err := os.Remove(steps[0]); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		steps = steps[1:]
	}
	return nil
}

// TruncateMetrics drops the lines of metrics.jsonl logged after step, so a
// resumed run's log reads as if it had never stopped. Every complete line
// (one that ends in a newline) is kept whatever its length, unless it is
// a JSON object whose "step" is after step; a last line with no newline
// is one that a killed run was writing, and is dropped. The file is
// rewritten atomically, and only if a line goes. It takes the directory's
// lock (LockRunDir) while it works: it fails with a *LockedError if
// another process writes the run.
func TruncateMetrics(dir string, step int) error {
	path := filepath.Join(dir, MetricsFile)
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	release, err := LockRunDir(dir)
	if err != nil {
		return err
	}
	defer release()
	file, err := openMetrics(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer file.Close()
	var kept bytes.Buffer
	dropped := false
	err = metricsLines(file, func(_ int, line []byte, complete bool) error {
		if !complete {
			dropped = true // a torn last line from a crash
			return nil
		}
		var rec struct {
			Step *int `json:"step"`
		}
		if json.Unmarshal(line, &rec) == nil && rec.Step != nil && *rec.Step > step {
			dropped = true
			return nil
		}
		kept.Write(line)
		kept.WriteByte('\n')
		return nil
	})
	if err != nil {
		return err // a read error names the file (*fs.PathError)
	}
	if !dropped {
		return nil
	}
	return fileio.WriteFileAtomic(path, func(w io.Writer) error {
		_, err := w.Write(kept.Bytes())
		return err
	})
}

// metricsFile is an open metrics log, read up to the size it had when
// opened: a log that grows while it is read (a run writing it) ends
// there, and a path that is not a regular file (a FIFO, /dev/zero) is
// refused by openMetrics before a byte is read.
type metricsFile struct {
	io.Reader
	*os.File
}

// Read reads from the bounded reader, not the file.
func (m metricsFile) Read(b []byte) (int, error) { return m.Reader.Read(b) }

// openMetrics opens the metrics log at path for reading (see metricsFile).
func openMetrics(path string) (metricsFile, error) {
	f, size, err := fileio.OpenRegular(path)
	if err != nil {
		if errors.Is(err, fileio.ErrNotRegular) {
			return metricsFile{}, fmt.Errorf("%s: %w", path, err)
		}
		return metricsFile{}, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	return metricsFile{io.LimitReader(f, size), f}, nil
}

// metricsLines calls fn with every line of a metrics log in turn, of any
// length, numbered from 1 and without its newline; complete is false for
// a last line that has none. The one reader of metrics.jsonl's lines, so
// that resuming and reading agree on what a line is.
func metricsLines(r io.Reader, fn func(n int, line []byte, complete bool) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			complete := line[len(line)-1] == '\n'
			if complete {
				line = line[:len(line)-1]
			}
			if err := fn(n, line, complete); err != nil {
				return err
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// ReadMetrics reads a run directory's metrics.jsonl: one map per line, of
// its numeric fields ("step", "train_loss", …). Lines may be of any
// length. A line that is not JSON, or whose step is not a whole number in
// [0, 2^53], is an error naming the file and line,
// except a last line with no newline, which a running process is still
// writing: it is read if it is whole, and skipped if not.
func ReadMetrics(dir string) ([]map[string]float64, error) {
	path := filepath.Join(dir, MetricsFile)
	file, err := openMetrics(path)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	var out []map[string]float64
	err = metricsLines(file, func(n int, line []byte, complete bool) error {
		var fields map[string]any
		if err := json.Unmarshal(line, &fields); err != nil {
			if !complete {
				return nil
			}
			return fmt.Errorf("%s: line %d: %w", path, n, err)
		}
		m := make(map[string]float64, len(fields))
		for k, v := range fields {
			if x, ok := v.(float64); ok {
				m[k] = x
			}
		}
		// a step is a count: 1e30 or 1.5 read as an int would be garbage
		if step, ok := m["step"]; ok && (step < 0 || step > 1<<53 || step != math.Trunc(step)) {
			return fmt.Errorf("%s: line %d: step %v: want a whole number of steps, 0 to 2^53", path, n, step)
		}
		out = append(out, m)
		return nil
	})
	if err != nil {
		return nil, err // a read error names the file (*fs.PathError)
	}
	return out, nil
}

// ReadMetric reads one field of a run directory's metrics.jsonl, by step,
// from the lines that have both (ReadMetrics).
func ReadMetric(dir, name string) (map[int]float64, error) {
	lines, err := ReadMetrics(dir)
	if err != nil {
		return nil, err
	}
	out := map[int]float64{}
	for _, m := range lines {
		v, ok := m[name]
		if step, hasStep := m["step"]; ok && hasStep {
			out[int(step)] = v
		}
	}
	return out, nil
}

// RemoveStaleTemps deletes the temporary files of atomic writes that a
// killed run left behind; they are never the only copy of anything. A
// live writer's temporary files are not stale: it takes the directory's
// lock (LockRunDir) to work, and fails with a *LockedError, deleting
// nothing, if another process writes the run.
func RemoveStaleTemps(dir string) error {
	release, err := LockRunDir(dir)
	if err != nil {
		return err
	}
	defer release()
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if isLoopTemp(e.Name()) {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
	}
	return nil
}

// isLoopTemp reports whether name is the temporary file of a write the
// Loop or `trainer train` makes in a run directory (fileio.WriteFileAtomic
// names them ".<name>.tmp-…"): a step checkpoint, best.ckpt,
// metrics.jsonl or config.yaml. Others' temporary files (eval's results,
// an export into the directory) are not the run's to remove: their
// writers take no lock.
func isLoopTemp(name string) bool {
	base, _, ok := strings.Cut(strings.TrimPrefix(name, "."), ".tmp-")
	if !ok || !strings.HasPrefix(name, ".") {
		return false
	}
	switch base {
	case BestCheckpoint, MetricsFile, ConfigFile:
		return true
	}
	return strings.HasPrefix(base, "step-") && strings.HasSuffix(base, ".ckpt")
}
