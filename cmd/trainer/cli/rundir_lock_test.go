package cli

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/probformer/probformer/cmd/trainer/train"
	"github.com/probformer/probformer/graph/ckpt"
)

// copyRun copies the regular files of run directory src to dst.
func copyRun(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() || e.Name() == train.LockFile {
			continue
		}
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// sameRun checks that run directory got holds what want holds: the same
// config.yaml, step checkpoints, metrics (timing fields aside) and final
// checkpoint's parameters, bit for bit.
func sameRun(t *testing.T, got, want string, final int) {
	t.Helper()
	read := func(dir, name string) []byte {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	if !bytes.Equal(read(got, train.ConfigFile), read(want, train.ConfigFile)) {
		t.Errorf("%s: config.yaml differs from an undisturbed run's", got)
	}
	names := func(dir string) []string {
		steps, err := train.StepCheckpoints(dir)
		if err != nil {
			t.Fatal(err)
		}
		for i := range steps {
			steps[i] = filepath.Base(steps[i])
		}
		return steps
	}
	if g, w := names(got), names(want); !reflect.DeepEqual(g, w) {
		t.Errorf("%s: step checkpoints %v, want %v", got, g, w)
	}
	if g, w := readMetrics(t, got), readMetrics(t, want); !reflect.DeepEqual(g, w) {
		t.Errorf("%s: metrics.jsonl (%d lines) differs from an undisturbed run's (%d lines)", got, len(g), len(w))
	}
	ckGot, err := ckpt.ReadCheckpoint(filepath.Join(got, train.CheckpointName(final)))
	if err != nil {
		t.Fatal(err)
	}
	ckWant, err := ckpt.ReadCheckpoint(filepath.Join(want, train.CheckpointName(final)))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(ckGot.Params, ckWant.Params) {
		t.Errorf("%s: the final checkpoint's parameters differ from an undisturbed run's", got)
	}
}

// TestOneWriterPerRunDir starts two trainers on one run directory at once,
// in every pairing of a new run and a resume: the one that starts second
// is refused within a second with exit status 2, naming the directory and
// the first one's pid, and the directory then holds the first's run alone,
// bit-identical to an undisturbed run's, and resumable.
func TestOneWriterPerRunDir(t *testing.T) {
	t.Parallel() // waits on its own processes
	base := t.TempDir()
	const steps = 1000
	cadence := []string{"--set", "training.eval_every=250", "--set", "training.checkpoint_every=250"}
	newRun := append(append([]string{"--set", "training.steps=" + strconv.Itoa(steps), "--progress", "lines"}, cadence...), tiny...)
	resume := append([]string{"--set", "training.steps=" + strconv.Itoa(steps), "--progress", "lines"}, cadence...)

	// The run the resumes continue, and the undisturbed runs.
	prior := filepath.Join(base, "prior")
	if code, _, stderr := runCLI(t, append([]string{"train", "--out", prior, "--set", "training.steps=20",
		"--set", "training.checkpoint_every=10", "--set", "training.eval_every=10"}, tiny...)...); code != 0 {
		t.Fatalf("prior run: exit %d: %s", code, stderr)
	}
	wantNew, wantResumed := filepath.Join(base, "want-new"), filepath.Join(base, "want-resumed")
	if code, _, stderr := runCLI(t, append([]string{"train", "--out", wantNew}, newRun...)...); code != 0 {
		t.Fatalf("undisturbed run: exit %d: %s", code, stderr)
	}
	copyRun(t, prior, wantResumed)
	if code, _, stderr := runCLI(t, append([]string{"train", "--resume", wantResumed}, resume...)...); code != 0 {
		t.Fatalf("undisturbed resume: exit %d: %s", code, stderr)
	}

	argsOf := func(kind, dir string) []string {
		if kind == "train" {
			return append([]string{"train", "--out", dir}, newRun...)
		}
		return append([]string{"train", "--resume", dir}, resume...)
	}
	for _, pair := range [][2]string{{"train", "train"}, {"train", "resume"}, {"resume", "train"}, {"resume", "resume"}} {
		t.Run(pair[0]+"+"+pair[1], func(t *testing.T) {
			dir := filepath.Join(base, pair[0]+"-"+pair[1])
			want := wantNew
			if pair[0] == "resume" {
				copyRun(t, prior, dir)
				want = wantResumed
			}
			first, firstOut := startTrainer(t, argsOf(pair[0], dir)...)
			t.Cleanup(func() { first.Process.Kill() })
			pid := strconv.Itoa(first.Process.Pid)
			// The first holds the lock once it has recorded its pid.
			deadline := time.Now().Add(60 * time.Second)
			for {
				data, _ := os.ReadFile(filepath.Join(dir, train.LockFile))
				if strings.TrimSpace(string(data)) == pid {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the first trainer never took the lock:\n%s", firstOut)
				}
				time.Sleep(5 * time.Millisecond)
			}
			var secondOut bytes.Buffer
			second := trainerCommand(t, argsOf(pair[1], dir)...)
			second.Stdout, second.Stderr = io.Discard, &secondOut
			start := time.Now()
			err := second.Run()
			took := time.Since(start)
			if code := second.ProcessState.ExitCode(); code != 2 {
				t.Fatalf("second trainer: exit %d (%v), want 2:\n%s", code, err, &secondOut)
			}
			if took > time.Second {
				t.Errorf("second trainer took %v to be refused", took)
			}
			msg := strings.TrimSpace(secondOut.String())
			if strings.Contains(msg, "\n") || !strings.Contains(msg, dir) || !strings.Contains(msg, "pid "+pid) {
				t.Errorf("second trainer's error %q is not one line naming %s and pid %s", msg, dir, pid)
			}
			// The first still holds the lock: the two overlapped.
			if f, err := os.Open(filepath.Join(dir, train.LockFile)); err == nil {
				if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
					t.Error("the first trainer had let go of the lock when the second was refused: they did not overlap")
				}
				f.Close()
			}
			if err := first.Wait(); err != nil {
				t.Fatalf("first trainer: %v\n%s", err, firstOut)
			}
			if !strings.Contains(firstOut.String(), "done: ") {
				t.Fatalf("first trainer did not finish:\n%s", firstOut)
			}
			sameRun(t, dir, want, steps)
			// Resumable: a longer run continues it.
			if code, _, stderr := runCLI(t, "train", "--resume", dir, "--set", "training.steps="+strconv.Itoa(steps+10)); code != 0 {
				t.Fatalf("resume after the pair: exit %d: %s", code, stderr)
			}
		})
	}
}

// TestResumeKeepsLongMetricsLines: a 2 MiB line in metrics.jsonl survives
// a resume with every other complete line, and a torn last line (a write
// a kill cut short) is dropped.
func TestResumeKeepsLongMetricsLines(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	args := append([]string{"train", "--out", dir, "--set", "training.steps=20", "--set", "training.checkpoint_every=10",
		"--set", "training.eval_every=10"}, tiny...)
	if code, _, stderr := runCLI(t, args...); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	path := filepath.Join(dir, train.MetricsFile)
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	long := `{"step":20,"note":"` + strings.Repeat("x", 2<<20) + `"}` + "\n"
	data := append(append(append([]byte{}, before...), long...), `{"step":21,"train_lo`...)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runCLI(t, "train", "--resume", dir, "--set", "training.steps=30"); code != 0 {
		t.Fatalf("resume: exit %d: %s", code, stderr)
	}
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	kept := string(before) + long
	if !strings.HasPrefix(string(after), kept) {
		t.Fatalf("after the resume metrics.jsonl does not start with every complete line before it (%d bytes, want a prefix of %d)", len(after), len(kept))
	}
	rest := string(after[len(kept):])
	if strings.Contains(rest, "train_lo\n") || !strings.HasPrefix(rest, `{`) || !strings.Contains(rest, `"step":30`) {
		t.Errorf("the lines after the resume: %q", rest)
	}
	lines, err := train.ReadMetrics(dir)
	if err != nil {
		t.Fatal(err)
	}
	if last := lines[len(lines)-1]["step"]; last != 30 {
		t.Errorf("last line at step %v, want 30", last)
	}
}

// corruptBest flips a byte in the middle of a run directory's best.ckpt
// and returns its path and the bytes written.
func corruptBest(t *testing.T, dir string) (string, []byte) {
	t.Helper()
	best := filepath.Join(dir, train.BestCheckpoint)
	data, err := os.ReadFile(best)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0xff
	if err := os.WriteFile(best, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return best, data
}

// checkFallbackWarning checks that stderr holds one warning line, which
// names the corrupt checkpoint and the one used instead.
func checkFallbackWarning(t *testing.T, stderr, skipped, used string) {
	t.Helper()
	var warning string
	for _, l := range strings.Split(stderr, "\n") {
		if strings.Contains(l, "warning") {
			if warning != "" {
				t.Errorf("more than one warning line:\n%s", stderr)
			}
			warning = l
		}
	}
	if !strings.Contains(warning, skipped) || !strings.Contains(warning, used) {
		t.Errorf("no warning naming %s and %s:\n%s", skipped, used, stderr)
	}
}

// TestCorruptBestFallsBack: a run directory whose best.ckpt is corrupt
// still serves eval, export, translate and attention from its newest
// valid step checkpoint, with one warning line on stderr naming both; a
// directory with no other checkpoint is bad input, as before.
func TestCorruptBestFallsBack(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	args := append([]string{"train", "--out", dir, "--set", "training.steps=20", "--set", "training.checkpoint_every=10",
		"--set", "training.eval_every=10"}, tiny...)
	if code, _, stderr := runCLI(t, args...); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	best, data := corruptBest(t, dir)
	step := filepath.Join(dir, train.CheckpointName(20))
	t.Run("eval", func(t *testing.T) {
		code, stdout, stderr := runCLI(t, "eval", "--checkpoint", dir, "--out", filepath.Join(t.TempDir(), "eval.json"))
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		if !strings.Contains(stdout, step) {
			t.Errorf("eval does not name %s:\n%s", step, stdout)
		}
		checkFallbackWarning(t, stderr, best, step)
	})
	t.Run("export", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "model.safetensors")
		code, _, stderr := runCLI(t, "export", "--checkpoint", dir, "--out", out)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		if _, err := os.Stat(out); err != nil {
			t.Error(err)
		}
		checkFallbackWarning(t, stderr, best, step)
	})
	t.Run("translate and attention", func(t *testing.T) {
		s2s := trainRun(t, tinySeq2Seq...)
		best, _ := corruptBest(t, s2s)
		step := filepath.Join(s2s, train.CheckpointName(5))
		code, stdout, stderr := runCLI(t, "translate", "--checkpoint", s2s, "--text", "the dog sees the cat")
		if code != 0 || strings.TrimSpace(stdout) == "" {
			t.Fatalf("translate: exit %d, output %q: %s", code, stdout, stderr)
		}
		checkFallbackWarning(t, stderr, best, step)
		png := filepath.Join(t.TempDir(), "attention.png")
		code, _, stderr = runCLI(t, "attention", "--checkpoint", s2s, "--text", "the dog sees the cat", "--out", png)
		if code != 0 {
			t.Fatalf("attention: exit %d: %s", code, stderr)
		}
		checkFallbackWarning(t, stderr, best, step)
	})
	t.Run("only a corrupt checkpoint", func(t *testing.T) {
		lone := t.TempDir()
		if err := os.WriteFile(filepath.Join(lone, train.BestCheckpoint), data, 0o644); err != nil {
			t.Fatal(err)
		}
		expectBadInput(t, []string{"eval", "--checkpoint", lone}, train.BestCheckpoint)
	})
}

// TestEmptyOutIsAnError: an explicitly empty --out is bad input, not a
// run in a dated default directory.
func TestEmptyOutIsAnError(t *testing.T) {
	t.Chdir(t.TempDir())
	expectBadInput(t, []string{"train", "--out", ""}, `--out ""`)
	expectBadInput(t, []string{"sweep", "--out", "", "--variant", "a"}, `--out ""`)
	if _, err := os.Stat("checkpoints"); err == nil {
		t.Error("a default run directory was made")
	}
}

// TestSweepRefusesLockedVariant: a sweep whose variant directory another
// process writes is refused (exit 2) naming the directory and that
// process's pid, and writes nothing into it.
func TestSweepRefusesLockedVariant(t *testing.T) {
	out := filepath.Join(t.TempDir(), "sweep")
	variant := filepath.Join(out, "base")
	if err := os.MkdirAll(variant, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(variant, train.LockFile), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// Another open file's flock excludes this process's LockRunDir as
	// another process's would.
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	f.WriteString("31337\n")
	expectBadInput(t, append([]string{"sweep", "--out", out, "--set", "training.steps=10", "--variant", "base"}, tiny...),
		variant, "pid 31337")
	if entries, _ := os.ReadDir(variant); len(entries) != 1 {
		t.Errorf("the locked variant directory holds %d entries, want only its lock file", len(entries))
	}
}
