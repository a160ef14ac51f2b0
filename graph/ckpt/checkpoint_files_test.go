package ckpt

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/probformer/probformer/graph"
	"github.com/probformer/probformer/graph/fileio"
)

// within runs f and fails the test if it takes longer than limit: a read
// that blocks on a pipe or streams a device would otherwise hang the test.
func within(t *testing.T, limit time.Duration, f func()) time.Duration {
	t.Helper()
	done := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
		return time.Since(start)
	case <-time.After(limit):
		t.Fatalf("still running after %v", limit)
		return 0
	}
}

// specialFiles makes, in a new directory, each kind of file a reader must
// refuse, and returns their paths by name. The device is /dev/zero itself,
// which never ends; a link to it and a named pipe with no writer (an open
// that blocks) complete the set.
func specialFiles(t *testing.T) map[string]string {
	t.Helper()
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	mkfifo(t, fifo)
	link := filepath.Join(dir, "link")
	if err := os.Symlink("/dev/zero", link); err != nil {
		t.Fatal(err)
	}
	return map[string]string{"/dev/zero": "/dev/zero", "link to /dev/zero": link, "fifo": fifo, "directory": dir}
}

// TestReadCheckpointRefusesSpecialFiles: /dev/zero, a named pipe and a
// directory are refused with ErrNotRegular at once, without reading.
func TestReadCheckpointRefusesSpecialFiles(t *testing.T) {
	for name, path := range specialFiles(t) {
		t.Run(name, func(t *testing.T) {
			var err error
			took := within(t, 10*time.Second, func() { _, err = ReadCheckpoint(path) })
			if !errors.Is(err, fileio.ErrNotRegular) || !strings.Contains(err.Error(), path) {
				t.Fatalf("error = %v, want fileio.ErrNotRegular naming %s", err, path)
			}
			if took > time.Second {
				t.Errorf("refused after %v, want at once", took)
			}
		})
	}
}

// resign replaces the checksum at the end of a checkpoint's bytes with the
// right one for what precedes it, as a writer that skipped the checks would.
func resign(data []byte) []byte {
	body := data[:len(data)-sha256.Size]
	sum := sha256.Sum256(body)
	return append(slices.Clone(body), sum[:]...)
}

// headerEnd is the offset of the tensor data in a checkpoint's bytes.
func headerEnd(data []byte) int {
	return checkpointFixed + int(binary.LittleEndian.Uint64(data[len(checkpointMagic)+4:]))
}

// TestReadCheckpointBoundedByHeader: a file whose size differs from what its
// header describes is refused before its tensor data is read, even a
// (sparse) file of 64 GiB; a file the header matches loads.
func TestReadCheckpointBoundedByHeader(t *testing.T) {
	good := checkpointBytes(t)
	tests := []struct {
		name string
		edit func(data []byte) []byte
		size int64  // if > 0, the file is extended (sparsely) to this size
		want string // in the error; "" for no error
	}{
		{"intact", func(d []byte) []byte { return d }, 0, ""},
		{"trailing bytes", func(d []byte) []byte { return append(d, 0) }, 0, "describes"},
		{"64 GiB of zeros after it", func(d []byte) []byte { return d }, 64 << 30, "describes"},
		{"truncated in the data", func(d []byte) []byte { return d[:len(d)-40] }, 0, "describes"},
		{"truncated in the header", func(d []byte) []byte { return d[:headerEnd(d)-5] }, 0, "exceeds the file"},
		{"header length beyond the file", func(d []byte) []byte {
			binary.LittleEndian.PutUint64(d[len(checkpointMagic)+4:], uint64(len(d)))
			return d
		}, 0, "exceeds the file"},
		{"header length 2⁶⁴−1", func(d []byte) []byte {
			binary.LittleEndian.PutUint64(d[len(checkpointMagic)+4:], math.MaxUint64)
			return d
		}, 0, "exceeds the file"},
		{"huge shape", func(d []byte) []byte {
			return resign([]byte(strings.Replace(string(d), `"shape":[2,3]`, `"shape":[9,3]`, 1)))
		}, 0, "more than the file"},
		{"corrupt header", func(d []byte) []byte { d[checkpointFixed] = '['; return d }, 0, "header"},
		{"bad magic", func(d []byte) []byte { d[0] = 'P'; return d }, 0, "bad magic"},
		{"newer version", func(d []byte) []byte {
			binary.LittleEndian.PutUint32(d[len(checkpointMagic):], CheckpointVersion+1)
			return d
		}, 0, "version"},
		{"empty", func(d []byte) []byte { return nil }, 0, "bad magic"},
		{"magic only", func(d []byte) []byte { return d[:len(checkpointMagic)+3] }, 0, "truncated"},
		{"flipped data byte", func(d []byte) []byte { d[len(d)-40] ^= 1; return d }, 0, "checksum"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "c.ckpt")
			if err := os.WriteFile(path, tt.edit(slices.Clone(good)), 0o644); err != nil {
				t.Fatal(err)
			}
			if tt.size > 0 {
				if err := os.Truncate(path, tt.size); err != nil {
					t.Skipf("cannot make a sparse file of %d bytes: %v", tt.size, err)
				}
			}
			var err error
			within(t, 10*time.Second, func() { _, err = ReadCheckpoint(path) })
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.want == "":
			case err == nil:
				t.Fatal("accepted")
			case !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), path):
				t.Errorf("error %q, want it to name %s and say %q", err, path, tt.want)
			}
		})
	}
}

// TestCheckpointRefusesNonFinite: a checkpoint whose checksum is right but
// which holds a NaN or an infinity, in a parameter or in an optimizer
// moment, is refused on load with an error naming the parameter; writing
// one is refused too.
func TestCheckpointRefusesNonFinite(t *testing.T) {
	for _, dt := range []graph.DType{graph.Float32, graph.Float64} {
		ck, _ := trainedCheckpoint(t, dt)
		path := filepath.Join(t.TempDir(), "c.ckpt")
		if err := WriteCheckpoint(path, ck); err != nil {
			t.Fatal(err)
		}
		good, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		elem := 8
		if dt == graph.Float32 {
			elem = 4
		}
		// Offsets of the tensors in the data, in the order encode writes them.
		offset := map[string]int{}
		at := headerEnd(good)
		for _, p := range ck.Params {
			offset[p.Name] = at
			at += elem * len(p.Values)
		}
		for _, p := range ck.Params {
			if ck.Adam.M[p.Name] != nil {
				offset["M "+p.Name] = at
				offset["V "+p.Name] = at + 8*len(p.Values)
				at += 16 * len(p.Values)
			}
		}
		tests := []struct {
			name   string
			tensor string // key in offset
			index  int
			value  float64
			want   string
		}{
			{"NaN parameter", "enc.0.w", 1, math.NaN(), "parameter enc.0.w is not finite: element 1 of 6 is NaN"},
			{"+Inf parameter", "enc.0.b", 2, math.Inf(1), "parameter enc.0.b is not finite: element 2 of 3 is +Inf"},
			{"-Inf parameter", "enc.0.w", 0, math.Inf(-1), "parameter enc.0.w is not finite: element 0 of 6 is -Inf"},
			{"NaN first moment", "M enc.0.b", 0, math.NaN(), "first moment of parameter enc.0.b is not finite"},
			{"Inf second moment", "V enc.0.w", 5, math.Inf(1), "second moment of parameter enc.0.w is not finite"},
		}
		for _, tt := range tests {
			t.Run(dt.String()+"/"+tt.name, func(t *testing.T) {
				data := slices.Clone(good)
				at, ok := offset[tt.tensor]
				if !ok {
					t.Fatalf("no tensor %s in the checkpoint", tt.tensor)
				}
				if dt == graph.Float32 && !strings.Contains(tt.tensor, " ") {
					binary.LittleEndian.PutUint32(data[at+4*tt.index:], math.Float32bits(float32(tt.value)))
				} else {
					binary.LittleEndian.PutUint64(data[at+8*tt.index:], math.Float64bits(tt.value))
				}
				data = resign(data)
				if _, err := DecodeCheckpoint(data); err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Errorf("DecodeCheckpoint: %v, want an error saying %q", err, tt.want)
				}
				file := filepath.Join(t.TempDir(), "bad.ckpt")
				if err := os.WriteFile(file, data, 0o644); err != nil {
					t.Fatal(err)
				}
				_, err := ReadCheckpoint(file)
				if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), file) {
					t.Errorf("ReadCheckpoint: %v, want an error naming %s and saying %q", err, file, tt.want)
				}
			})
		}
	}
}

// TestWriteCheckpointRefusesNonFiniteMoment: a moment that is not finite
// is refused on writing, like a parameter (TestWriteCheckpointRefusesNaN).
func TestWriteCheckpointRefusesNonFiniteMoment(t *testing.T) {
	ck, _ := trainedCheckpoint(t, graph.Float64)
	ck.Adam.V["enc.0.b"][0] = math.Inf(1)
	path := filepath.Join(t.TempDir(), "inf.ckpt")
	err := WriteCheckpoint(path, ck)
	if err == nil || !strings.Contains(err.Error(), "enc.0.b") {
		t.Fatalf("error = %v, want one naming enc.0.b", err)
	}
	if _, err := EncodeCheckpoint(ck); err == nil {
		t.Error("EncodeCheckpoint accepted an infinite moment")
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Error("a file was left behind")
	}
}

func mkfifo(t testing.TB, path string) {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Fatalf("mkfifo %s: %v", path, err)
	}
}
