package cli

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/probformer/probformer/cmd/trainer/train"
)

// runWithin runs the command line in-process like runCLI, but fails the
// test if it has not returned within limit: a command that opens a named
// pipe or reads a device could otherwise hang the test binary. It returns
// the exit status, the output and how long the command took.
func runWithin(t *testing.T, limit time.Duration, args ...string) (code int, stdout, stderr string, took time.Duration) {
	t.Helper()
	type result struct {
		code           int
		stdout, stderr string
	}
	done := make(chan result, 1)
	start := time.Now()
	go func() {
		var r result
		defer func() { done <- r }()
		var out, errOut strings.Builder
		r.code = run(args, &out, &errOut)
		r.stdout, r.stderr = out.String(), errOut.String()
	}()
	select {
	case r := <-done:
		return r.code, r.stdout, r.stderr, time.Since(start)
	case <-time.After(limit):
		t.Fatalf("%q still running after %v", args, limit)
		return 0, "", "", 0
	}
}

// tinyRun trains the tiny maxnorm run for five steps into a new directory
// and returns the directory.
func tinyRun(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "run")
	if code, _, stderr := runCLI(t, append([]string{"train", "--out", dir, "--set", "training.steps=5"}, tiny...)...); code != 0 {
		t.Fatalf("train: exit %d: %s", code, stderr)
	}
	return dir
}

// fileMode is the type bits of what is at path, not following a link.
func fileMode(t *testing.T, path string) fs.FileMode {
	t.Helper()
	info, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return info.Mode().Type()
}

// TestExportOutRefusesSpecialFiles: `export --out` onto a named pipe, a
// character device, a directory, or a symbolic link to any of them exits 2
// with one line naming the path, and leaves the special file (and the link)
// as it was: nothing is written through a device or replaced by a regular
// file. A link to a regular file is written through and stays a link.
func TestExportOutRefusesSpecialFiles(t *testing.T) {
	runDir := tinyRun(t)
	tests := []struct {
		name string
		make func(t *testing.T, path string) // makes the special file at path
		kind string                          // how the error describes it
	}{
		{"fifo", func(t *testing.T, p string) {
			if err := syscall.Mkfifo(p, 0o644); err != nil {
				t.Fatalf("mkfifo: %v", err)
			}
		}, "named pipe"},
		{"char device", func(t *testing.T, p string) {
			// /dev/null's numbers, 1 and 3: a harmless device if opened.
			if err := syscall.Mknod(p, syscall.S_IFCHR|0o666, 1<<8|3); err != nil {
				t.Skipf("cannot make a character device (mknod: %v); run as root to test device nodes", err)
			}
		}, "character device"},
		{"directory", func(t *testing.T, p string) {
			if err := os.Mkdir(p, 0o755); err != nil {
				t.Fatal(err)
			}
		}, "directory"},
	}
	for _, tt := range tests {
		for _, link := range []bool{false, true} {
			name := tt.name
			if link {
				name = "link to " + name
			}
			t.Run(name, func(t *testing.T) {
				dir := t.TempDir()
				special := filepath.Join(dir, "special")
				tt.make(t, special)
				mode := fileMode(t, special)
				out := special
				if link {
					out = filepath.Join(dir, "model.safetensors")
					if err := os.Symlink(special, out); err != nil {
						t.Fatal(err)
					}
				}
				code, stdout, stderr, _ := runWithin(t, 10*time.Second, "export", "--checkpoint", runDir, "--out", out)
				if code != 2 {
					t.Errorf("exit %d, want 2 (stderr %q)", code, stderr)
				}
				if stdout != "" {
					t.Errorf("printed %q", stdout)
				}
				line := strings.TrimSpace(stderr)
				for _, want := range []string{out, tt.kind, "not a regular file"} {
					if !strings.Contains(line, want) {
						t.Errorf("stderr %q does not mention %q", line, want)
					}
				}
				if strings.Contains(line, "\n") || strings.Contains(line, ".tmp") {
					t.Errorf("stderr %q: want one line naming no temporary file", line)
				}
				if got := fileMode(t, special); got != mode {
					t.Errorf("%s is now %v, want it still %v", special, got, mode)
				}
				if link && fileMode(t, out) != fs.ModeSymlink {
					t.Errorf("the link %s was replaced", out)
				}
				entries, _ := os.ReadDir(dir)
				if want := map[bool]int{false: 1, true: 2}[link]; len(entries) != want {
					t.Errorf("%s holds %d entries, want %d (no temporary file left)", dir, len(entries), want)
				}
			})
		}
	}

	t.Run("link to a regular file", func(t *testing.T) {
		dir := t.TempDir()
		target := filepath.Join(dir, "real.safetensors")
		if err := os.WriteFile(target, []byte("old"), 0o644); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, "model.safetensors")
		if err := os.Symlink("real.safetensors", out); err != nil {
			t.Fatal(err)
		}
		if code, _, stderr, _ := runWithin(t, 60*time.Second, "export", "--checkpoint", runDir, "--out", out); code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		if dest, err := os.Readlink(out); err != nil || dest != "real.safetensors" {
			t.Errorf("the link now leads to %q (%v), want it kept", dest, err)
		}
		tensors, _ := readExport(t, target)
		if len(tensors) == 0 {
			t.Error("the link's target holds no tensors")
		}
	})
}

// TestCheckpointFromDevice: /dev/zero (and a named pipe, and a directory
// given as a file through a link) as a checkpoint is refused with exit 2 at
// once: no command reads a device or waits on a pipe.
func TestCheckpointFromDevice(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "step-5.ckpt")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatalf("mkfifo: %v", err)
	}
	out := filepath.Join(dir, "out.safetensors")
	tests := []struct {
		name string
		args []string
		path string // the file the error names
	}{
		{"inspect", []string{"inspect", "/dev/zero"}, "/dev/zero"},
		{"eval", []string{"eval", "--checkpoint", "/dev/zero"}, "/dev/zero"},
		{"export", []string{"export", "--checkpoint", "/dev/zero", "--out", out}, "/dev/zero"},
		{"train --resume", []string{"train", "--resume", "/dev/zero"}, "/dev/zero"},
		{"inspect fifo", []string{"inspect", fifo}, fifo},
		{"eval fifo", []string{"eval", "--checkpoint", fifo}, fifo},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr, took := runWithin(t, 10*time.Second, tt.args...)
			if code != 2 {
				t.Errorf("exit %d, want 2 (stderr %q)", code, stderr)
			}
			if stdout != "" {
				t.Errorf("printed %q", stdout)
			}
			for _, want := range []string{tt.path, "not a regular file"} {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr %q does not mention %q", stderr, want)
				}
			}
			if took > time.Second {
				t.Errorf("refused after %v, want under a second", took)
			}
		})
	}
	if _, err := os.Lstat(out); err == nil {
		t.Errorf("export from /dev/zero wrote %s", out)
	}
}

// TestNonFiniteCheckpointRefused: a checkpoint holding a NaN, re-signed so
// that its checksum is right, is refused by eval, inspect and export with
// exit 2 and an error naming the parameter.
func TestNonFiniteCheckpointRefused(t *testing.T) {
	runDir := tinyRun(t)
	data, err := os.ReadFile(filepath.Join(runDir, train.BestCheckpoint))
	if err != nil {
		t.Fatal(err)
	}
	// The first parameter's first value starts right after the header; the
	// header names the parameters in data order.
	const fixed = len("probformer checkpoint\n") + 4 + 8
	at := fixed + int(binary.LittleEndian.Uint64(data[fixed-8:]))
	var hdr struct {
		DType  string `json:"dtype"`
		Params []struct {
			Name string `json:"name"`
		} `json:"params"`
	}
	if err := json.Unmarshal(data[fixed:at], &hdr); err != nil || len(hdr.Params) == 0 || hdr.DType != "float32" {
		t.Fatalf("header %s: %v", data[fixed:at], err)
	}
	binary.LittleEndian.PutUint32(data[at:], math.Float32bits(float32(math.NaN())))
	sum := sha256.Sum256(data[:len(data)-sha256.Size])
	copy(data[len(data)-sha256.Size:], sum[:])
	bad := filepath.Join(t.TempDir(), "nan.ckpt")
	if err := os.WriteFile(bad, data, 0o644); err != nil {
		t.Fatal(err)
	}
	name := hdr.Params[0].Name
	for _, args := range [][]string{
		{"inspect", bad},
		{"eval", "--checkpoint", bad},
		{"export", "--checkpoint", bad, "--out", filepath.Join(t.TempDir(), "m.safetensors")},
	} {
		t.Run(args[0], func(t *testing.T) {
			expectBadInput(t, args, bad, "parameter "+name+" is not finite", "NaN")
		})
	}
}
