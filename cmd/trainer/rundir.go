package main

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

	"probformer/graph"
)

// A run directory holds:
//
//	config.yaml            the run's config
//	metrics.jsonl          one JSON object per log or evaluation
//	step-00001000.ckpt     the last keep_checkpoints checkpoints
//	best.ckpt              the checkpoint with the best validation metric
const (
	bestCheckpoint = "best.ckpt"
	metricsFile    = "metrics.jsonl"
	configFile     = "config.yaml"
)

func stepCheckpointName(step int) string { return fmt.Sprintf("step-%08d.ckpt", step) }

// stepCheckpoints lists the step checkpoints of dir, oldest first.
func stepCheckpoints(dir string) ([]string, error) {
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

// resolveCheckpoint maps a path to a checkpoint file: a file is itself; a
// run directory gives its best checkpoint when preferBest, else its latest
// step checkpoint (falling back to the other).
func resolveCheckpoint(path string, preferBest bool) (string, error) {
	info, err := os.Stat(path)
	if err != nil {
		return "", badInput(fmt.Errorf("checkpoint: %w", err))
	}
	if !info.IsDir() {
		return path, nil
	}
	steps, err := stepCheckpoints(path)
	if err != nil {
		return "", badInput(fmt.Errorf("checkpoint: %w", err))
	}
	best := filepath.Join(path, bestCheckpoint)
	_, bestErr := os.Stat(best)
	switch {
	case preferBest && bestErr == nil:
		return best, nil
	case len(steps) > 0:
		return steps[len(steps)-1], nil
	case bestErr == nil:
		return best, nil
	}
	return "", badInput(fmt.Errorf("checkpoint: %s holds no checkpoint", path))
}

// loadLatestGood returns the newest step checkpoint of dir that loads,
// skipping (and naming) any that do not: a crash can only leave whole
// files, but a disk can still fail.
func loadLatestGood(dir string, warn io.Writer) (*graph.Checkpoint, string, error) {
	steps, err := stepCheckpoints(dir)
	if err != nil {
		return nil, "", badInput(fmt.Errorf("resume: %w", err))
	}
	for i := len(steps) - 1; i >= 0; i-- {
		ck, err := graph.ReadCheckpoint(steps[i])
		if err == nil {
			return ck, steps[i], nil
		}
		fmt.Fprintf(warn, "skipping %v\n", err)
	}
	return nil, "", badInput(fmt.Errorf("resume: %s holds no loadable checkpoint", dir))
}

// pruneCheckpoints deletes all but the newest keep step checkpoints.
func pruneCheckpoints(dir string, keep int) error {
	steps, err := stepCheckpoints(dir)
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

// truncateMetrics drops the lines of metrics.jsonl logged after step, so a
// resumed run's log reads as if it had never stopped.
func truncateMetrics(dir string, step int) error {
	path := filepath.Join(dir, metricsFile)
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

// removeStaleTemps deletes the temporary files of atomic writes that a
// killed run left behind; they are never the only copy of anything.
func removeStaleTemps(dir string) {
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
