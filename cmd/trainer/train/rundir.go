package train

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/probformer/probformer/graph"
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

// LatestCheckpoint returns the newest step checkpoint of dir that loads,
// skipping (and naming) any that do not: a crash can only leave whole
// files, but a disk can still fail.
func LatestCheckpoint(dir string, warn io.Writer) (*graph.Checkpoint, string, error) {
	steps, err := StepCheckpoints(dir)
	if err != nil {
		return nil, "", fmt.Errorf("resume: %w", err)
	}
	for i := len(steps) - 1; i >= 0; i-- {
		ck, err := graph.ReadCheckpoint(steps[i])
		if err == nil {
			return ck, steps[i], nil
		}
		fmt.Fprintf(warn, "skipping %v\n", err)
	}
	return nil, "", fmt.Errorf("resume: %s holds no loadable checkpoint", dir)
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
// resumed run's log reads as if it had never stopped.
func TruncateMetrics(dir string, step int) error {
	path := filepath.Join(dir, MetricsFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var kept bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var rec struct {
			Step *int `json:"step"`
		}
		if json.Unmarshal(sc.Bytes(), &rec) != nil || rec.Step == nil {
			continue // a torn last line from a crash
		}
		if *rec.Step <= step {
			kept.Write(sc.Bytes())
			kept.WriteByte('\n')
		}
	}
	return graph.WriteFileAtomic(path, func(w io.Writer) error {
		_, err := w.Write(kept.Bytes())
		return err
	})
}

// ReadMetrics reads a run directory's metrics.jsonl: one map per line, of
// its numeric fields ("step", "train_loss", …). A line that is not JSON
// is an error naming the file and line.
func ReadMetrics(dir string) ([]map[string]float64, error) {
	path := filepath.Join(dir, MetricsFile)
	file, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	var out []map[string]float64
	sc := bufio.NewScanner(file)
	sc.Buffer(make([]byte, 0, 1<<16), 1<<24)
	for line := 1; sc.Scan(); line++ {
		var fields map[string]any
		if err := json.Unmarshal(sc.Bytes(), &fields); err != nil {
			return nil, fmt.Errorf("%s: line %d: %w", path, line, err)
		}
		m := make(map[string]float64, len(fields))
		for k, v := range fields {
			if x, ok := v.(float64); ok {
				m[k] = x
			}
		}
		out = append(out, m)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
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
// killed run left behind; they are never the only copy of anything.
func RemoveStaleTemps(dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") && strings.Contains(e.Name(), ".tmp-") {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}
