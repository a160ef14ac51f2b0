package fileio

import (
	"errors"
	"io"
	"io/fs"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
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

// mkfifo makes a named pipe at path.
func mkfifo(t testing.TB, path string) {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Fatalf("mkfifo %s: %v", path, err)
	}
}

// mknodNull makes a character device at path with /dev/null's numbers
// (1, 3), or skips the test where that is not allowed (not root, a
// container without CAP_MKNOD, a nodev mount is fine: the node is never
// opened).
func mknodNull(t testing.TB, path string) {
	t.Helper()
	if err := syscall.Mknod(path, syscall.S_IFCHR|0o666, linuxDev(1, 3)); err != nil {
		t.Skipf("cannot make a character device (mknod %s: %v); run as root to test device nodes", path, err)
	}
}

// linuxDev is Linux's device number for major and minor (glibc's
// makedev; golang.org/x/sys/unix.Mkdev), for numbers below 2¹².
func linuxDev(major, minor int) int {
	return minor&0xff | major<<8 | (minor&^0xff)<<12
}

// fileType is the type bits of what is at path, not following a link.
func fileType(t testing.TB, path string) fs.FileMode {
	t.Helper()
	info, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return info.Mode().Type()
}

// TestWriteFileAtomicRefusesSpecialFiles: a directory, a named pipe, a
// device, a socket, and a link to any of them are refused with
// ErrNotRegular, an error naming the path and no temporary file; each is
// still there, unchanged, afterwards.
func TestWriteFileAtomicRefusesSpecialFiles(t *testing.T) {
	tests := []struct {
		name string
		make func(t *testing.T, path string) // makes the special file at path
		kind string                          // in the error
	}{
		{"directory", func(t *testing.T, p string) { os.Mkdir(p, 0o755) }, "a directory"},
		{"fifo", func(t *testing.T, p string) { mkfifo(t, p) }, "named pipe"},
		{"char device", func(t *testing.T, p string) { mknodNull(t, p) }, "character device"},
		{"socket", func(t *testing.T, p string) {
			l, err := net.Listen("unix", p)
			if err != nil {
				t.Skipf("cannot make a socket: %v", err)
			}
			t.Cleanup(func() { l.Close() })
		}, "socket"},
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
				path, want := special, fileType(t, special)
				if link {
					path = filepath.Join(dir, "out.safetensors")
					if err := os.Symlink("special", path); err != nil {
						t.Fatal(err)
					}
				}
				before := dirNames(t, dir)
				called := false
				err := WriteFileAtomic(path, func(w io.Writer) error {
					called = true
					return nil
				})
				if !errors.Is(err, ErrNotRegular) {
					t.Fatalf("error = %v, want one matching ErrNotRegular", err)
				}
				var nr *NotRegularError
				if !errors.As(err, &nr) || nr.Path != path {
					t.Errorf("error %v: want a *NotRegularError for %s", err, path)
				}
				msg := err.Error()
				if !strings.Contains(msg, path) || !strings.Contains(msg, tt.kind) || strings.Contains(msg, ".tmp-") {
					t.Errorf("error %q: want it to name %s and %q, and no temporary file", msg, path, tt.kind)
				}
				if link && !strings.Contains(msg, special) {
					t.Errorf("error %q does not name the link's target %s", msg, special)
				}
				if called {
					t.Error("write was called for a special file")
				}
				if got := fileType(t, special); got != want {
					t.Errorf("%s is now %v, want %v", special, got, want)
				}
				if link && fileType(t, path) != fs.ModeSymlink {
					t.Errorf("the link %s was replaced", path)
				}
				if after := dirNames(t, dir); !slices.Equal(after, before) {
					t.Errorf("directory holds %q, want %q", after, before)
				}
			})
		}
	}
}

// TestWriteFileAtomicFollowsSymlinks: a link to a regular file, or to no
// file, is written through: the target gets the bytes atomically and the
// link stays a link to it.
func TestWriteFileAtomicFollowsSymlinks(t *testing.T) {
	tests := []struct {
		name   string
		links  map[string]string // link name → its content, made in order of name
		target string            // file (relative to the test directory) that receives the bytes
		exists bool              // whether target exists before the write
	}{
		{"relative", map[string]string{"out": "real"}, "real", true},
		{"absolute", map[string]string{"out": "ABS/real"}, "real", true},
		{"chain", map[string]string{"out": "mid", "mid": "sub/real"}, "sub/real", true},
		{"dangling", map[string]string{"out": "sub/new"}, "sub/new", false},
		{"through a linked directory", map[string]string{"out": "linkdir/../real", "linkdir": "sub/deeper"}, "sub/real", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.MkdirAll(filepath.Join(dir, "sub", "deeper"), 0o755); err != nil {
				t.Fatal(err)
			}
			target := filepath.Join(dir, tt.target)
			if tt.exists {
				if err := os.WriteFile(target, []byte("old"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			for _, name := range slices.Sorted(maps.Keys(tt.links)) {
				dest := strings.ReplaceAll(tt.links[name], "ABS", dir)
				if err := os.Symlink(dest, filepath.Join(dir, name)); err != nil {
					t.Fatal(err)
				}
			}
			path := filepath.Join(dir, "out")
			if err := WriteFileAtomic(path, writeString("new")); err != nil {
				t.Fatal(err)
			}
			if got, err := os.ReadFile(target); err != nil || string(got) != "new" {
				t.Fatalf("target %s holds %q (%v), want %q", tt.target, got, err, "new")
			}
			for name, dest := range tt.links {
				got, err := os.Readlink(filepath.Join(dir, name))
				if want := strings.ReplaceAll(dest, "ABS", dir); err != nil || got != want {
					t.Errorf("link %s → %q (%v), want it kept → %q", name, got, err, want)
				}
			}
			entries, err := filepath.Glob(filepath.Join(dir, "*", ".*tmp-*"))
			more, _ := filepath.Glob(filepath.Join(dir, ".*tmp-*"))
			if err != nil || len(entries)+len(more) != 0 {
				t.Errorf("temporary files left: %q %q", entries, more)
			}
		})
	}
}

func TestWriteFileAtomicSymlinkLoop(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	os.Symlink("b", a)
	os.Symlink("a", b)
	err := WriteFileAtomic(a, writeString("x"))
	if !errors.Is(err, syscall.ELOOP) || !strings.Contains(err.Error(), a) {
		t.Fatalf("error = %v, want ELOOP naming %s", err, a)
	}
	if fileType(t, a) != fs.ModeSymlink || fileType(t, b) != fs.ModeSymlink {
		t.Error("a link of the loop was replaced")
	}
}

// TestWriteFileAtomicErrorsHideTempFile: no error shows the temporary
// file's name, only the path the caller gave.
func TestWriteFileAtomicErrorsHideTempFile(t *testing.T) {
	dir := t.TempDir()
	for _, path := range []string{
		dir,                                 // `attention --out /tmp`
		filepath.Join(dir, "missing", "x"),  // no such directory
		filepath.Join(dir, "file", "child"), // a file where a directory belongs
	} {
		os.WriteFile(filepath.Join(dir, "file"), nil, 0o644)
		err := WriteFileAtomic(path, writeString("x"))
		if err == nil {
			t.Fatalf("%s: no error", path)
		}
		if msg := err.Error(); !strings.Contains(msg, path) || strings.Contains(msg, ".tmp") {
			t.Errorf("%s: error %q, want it to name the path and no temporary file", path, msg)
		}
	}

	// A failed write to the temporary file, as a full disk makes one.
	f, err := os.CreateTemp(dir, ".x.tmp-*")
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	_, err = tempWriter{f}.Write([]byte("x"))
	if !errors.Is(err, os.ErrClosed) || strings.Contains(err.Error(), f.Name()) {
		t.Errorf("write to a closed temporary file: %v, want os.ErrClosed without the file's name", err)
	}
}

// TestWriteFileAtomicEmptyPath: an empty path is an error, not a file
// named "." or a temporary file left in the working directory.
func TestWriteFileAtomicEmptyPath(t *testing.T) {
	if err := WriteFileAtomic("", writeString("x")); err == nil {
		t.Fatal("no error for an empty path")
	}
}

// TestWriteFileAtomicPathsAsTheKernelReadsThem: a bare name is written in
// the working directory (not the system's temporary directory), and ".."
// after a link to a directory means that directory's parent, as it does
// for open(2), not the lexical parent.
func TestWriteFileAtomicPathsAsTheKernelReadsThem(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	if err := os.MkdirAll(filepath.Join("sub", "deeper"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join("sub", "deeper"), "linkdir"); err != nil {
		t.Fatal(err)
	}
	for path, file := range map[string]string{
		"plain":        "plain",
		"linkdir/../x": filepath.Join("sub", "x"), // not cleaned, as a user types it
	} {
		if err := WriteFileAtomic(path, writeString(path)); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if got, err := os.ReadFile(file); err != nil || string(got) != path {
			t.Errorf("%s: %s holds %q (%v)", path, file, got, err)
		}
	}
	if _, err := os.Stat("x"); err == nil {
		t.Error("linkdir/../x was written to ./x")
	}
}
