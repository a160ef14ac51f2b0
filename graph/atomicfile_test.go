package graph

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeString(s string) func(w io.Writer) error {
	return func(w io.Writer) error {
		_, err := io.WriteString(w, s)
		return err
	}
}

// dirNames returns the names of the entries of dir.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func TestWriteFileAtomicCreatesAndReplaces(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ckpt.safetensors")

	for _, content := range []string{"first version, rather long", "second", ""} {
		if err := WriteFileAtomic(path, writeString(content)); err != nil {
			t.Fatalf("WriteFileAtomic(%q): %v", content, err)
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != content {
			t.Errorf("content = %q, want %q", got, content)
		}
		info, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if mode := info.Mode().Perm(); mode != 0o644 {
			t.Errorf("mode = %v, want 0644", mode)
		}
		if names := dirNames(t, dir); len(names) != 1 || names[0] != "ckpt.safetensors" {
			t.Errorf("directory holds %q, want only ckpt.safetensors", names)
		}
	}
}

func TestWriteFileAtomicLargeContent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big")
	// Larger than the bufio buffer, so several flushes happen before the rename.
	want := strings.Repeat("0123456789abcdef", 1<<14)
	if err := WriteFileAtomic(path, writeString(want)); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("read back %d bytes, want %d identical bytes", len(got), len(want))
	}
}

func TestWriteFileAtomicFailedWriteKeepsOldFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}

	errDiskFull := errors.New("disk full")
	err := WriteFileAtomic(path, func(w io.Writer) error {
		// Enough partial output to reach the temp file before failing.
		if _, err := io.WriteString(w, strings.Repeat("new", 1<<13)); err != nil {
			return err
		}
		return errDiskFull
	})
	if !errors.Is(err, errDiskFull) {
		t.Fatalf("error = %v, want one wrapping %v", err, errDiskFull)
	}
	if !strings.Contains(err.Error(), path) {
		t.Errorf("error %q does not name %s", err, path)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "old" {
		t.Errorf("content = %q, want the old %q", got, "old")
	}
	if names := dirNames(t, dir); len(names) != 1 || names[0] != "state.json" {
		t.Errorf("directory holds %q, want only state.json (no temp files)", names)
	}
}

func TestWriteFileAtomicPanicRemovesTempFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	func() {
		defer func() {
			if recover() == nil {
				t.Error("panic in write func was swallowed")
			}
		}()
		WriteFileAtomic(path, func(w io.Writer) error {
			io.WriteString(w, "partial")
			panic("boom")
		})
	}()
	if names := dirNames(t, dir); len(names) != 0 {
		t.Errorf("directory holds %q, want it empty", names)
	}
}

func TestWriteFileAtomicMissingDirectory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "no", "such", "dir", "ckpt")
	err := WriteFileAtomic(path, writeString("x"))
	if err == nil {
		t.Fatal("no error writing into a missing directory")
	}
	if !strings.Contains(err.Error(), path) {
		t.Errorf("error %q does not name %s", err, path)
	}
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("error %v does not wrap os.ErrNotExist", err)
	}
}

func TestWriteFileAtomicOverDirectoryFails(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub")
	if err := os.Mkdir(path, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := WriteFileAtomic(path, writeString("x")); err == nil {
		t.Fatal("no error replacing a directory with a file")
	}
	if names := dirNames(t, dir); len(names) != 1 || names[0] != "sub" {
		t.Errorf("directory holds %q, want only sub (no temp files)", names)
	}
}
