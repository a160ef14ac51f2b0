package ckpt

import (
	"encoding/binary"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/probformer/probformer/graph/fileio"
)

// TestReadSafetensorsFileRefusesSpecialFiles: /dev/zero, a named pipe and a
// directory are refused with ErrNotRegular at once, without reading.
func TestReadSafetensorsFileRefusesSpecialFiles(t *testing.T) {
	for name, path := range specialFiles(t) {
		t.Run(name, func(t *testing.T) {
			var err error
			took := within(t, 10*time.Second, func() { _, _, err = ReadSafetensorsFile(path) })
			if !errors.Is(err, fileio.ErrNotRegular) || !strings.Contains(err.Error(), path) {
				t.Fatalf("error = %v, want fileio.ErrNotRegular naming %s", err, path)
			}
			if took > time.Second {
				t.Errorf("refused after %v, want at once", took)
			}
		})
	}
}

// TestReadSafetensorsFileBoundedBySize: a file whose size is not what its
// header describes is refused, before its data is read when the header
// length or the offsets disagree with the size; a file that agrees loads.
func TestReadSafetensorsFileBoundedBySize(t *testing.T) {
	good := sampleSafetensors(t)
	want, wantMeta, err := ReadSafetensors(strings.NewReader(string(good)))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		edit   func(data []byte) []byte
		size   int64  // if > 0, the file is extended (sparsely) to this size
		reason string // in the error; "" for no error
	}{
		{"intact", func(d []byte) []byte { return d }, 0, ""},
		{"trailing byte", func(d []byte) []byte { return append(d, 0) }, 0, "the file holds"},
		{"64 GiB of zeros after it", func(d []byte) []byte { return d }, 64 << 30, "the file holds"},
		{"truncated data", func(d []byte) []byte { return d[:len(d)-1] }, 0, "the file holds"},
		{"header length beyond the file", func(d []byte) []byte {
			binary.LittleEndian.PutUint64(d, uint64(len(d)))
			return d
		}, 0, "exceeds the file"},
		{"empty", func(d []byte) []byte { return nil }, 0, "header length"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "m.safetensors")
			if err := os.WriteFile(path, tt.edit(slices.Clone(good)), 0o644); err != nil {
				t.Fatal(err)
			}
			if tt.size > 0 {
				if err := os.Truncate(path, tt.size); err != nil {
					t.Skipf("cannot make a sparse file of %d bytes: %v", tt.size, err)
				}
			}
			var (
				got  []SafeTensor
				meta map[string]string
				err  error
			)
			within(t, 10*time.Second, func() { got, meta, err = ReadSafetensorsFile(path) })
			switch {
			case tt.reason == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.reason == "":
				if err := sameTensors(got, want); err != nil || !maps.Equal(meta, wantMeta) {
					t.Errorf("read back differently: %v, metadata %q, want %q", err, meta, wantMeta)
				}
			case err == nil:
				t.Fatal("accepted")
			case !strings.Contains(err.Error(), tt.reason) || !strings.Contains(err.Error(), path):
				t.Errorf("error %q, want it to name %s and say %q", err, path, tt.reason)
			}
		})
	}
}
