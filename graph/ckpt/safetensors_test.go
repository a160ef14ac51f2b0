package ckpt

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/probformer/probformer/graph/fileio"
)

// f32bits and f64bits build values from exact bit patterns, so NaN payloads
// and signed zeros are spelled out.
func f32bits(b uint32) float32 { return math.Float32frombits(b) }
func f64bits(b uint64) float64 { return math.Float64frombits(b) }

// sameTensors reports the first difference between got and want, comparing
// data bit for bit (so NaN payloads and -0 count) and treating a nil and an
// empty shape as the same scalar shape.
func sameTensors(got, want []SafeTensor) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d tensors, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Name != w.Name {
			return fmt.Errorf("tensor %d is %q, want %q", i, g.Name, w.Name)
		}
		if !slices.Equal(g.Shape, w.Shape) {
			return fmt.Errorf("tensor %q: shape %v, want %v", w.Name, g.Shape, w.Shape)
		}
		if (g.F32 == nil) != (w.F32 == nil) || (g.F64 == nil) != (w.F64 == nil) {
			return fmt.Errorf("tensor %q: dtype differs (F32 set %v, F64 set %v)", w.Name, g.F32 != nil, g.F64 != nil)
		}
		if !slices.EqualFunc(g.F32, w.F32, func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) }) {
			return fmt.Errorf("tensor %q: F32 %v, want %v", w.Name, g.F32, w.F32)
		}
		if !slices.EqualFunc(g.F64, w.F64, func(a, b float64) bool { return math.Float64bits(a) == math.Float64bits(b) }) {
			return fmt.Errorf("tensor %q: F64 %v, want %v", w.Name, g.F64, w.F64)
		}
	}
	return nil
}

// encodeSafetensors writes tensors and metadata to memory.
func encodeSafetensors(t testing.TB, tensors []SafeTensor, metadata map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteSafetensors(&buf, tensors, metadata); err != nil {
		t.Fatalf("WriteSafetensors: %v", err)
	}
	return buf.Bytes()
}

// stFile assembles a safetensors file from a header and a byte buffer
// without any checks, for hand-built and hostile inputs.
func stFile(header string, data ...byte) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	b = append(b, header...)
	return append(b, data...)
}

// sampleSafetensors is a small valid file with metadata, both dtypes, a
// scalar and an empty tensor.
func sampleSafetensors(t testing.TB) []byte {
	return encodeSafetensors(t, []SafeTensor{
		{Name: "w", Shape: []int{2, 2}, F32: []float32{1, -2, 0.5, 4}},
		{Name: "b", Shape: []int{3}, F64: []float64{0.25, -0, math.Inf(1)}},
		{Name: "s", F32: []float32{7}},
		{Name: "e", Shape: []int{0, 4}, F64: []float64{}},
	}, map[string]string{"step": "12", "format": "pt"})
}

func TestSafetensorsRoundTrip(t *testing.T) {
	tests := []struct {
		name     string
		tensors  []SafeTensor
		metadata map[string]string
		// want is the tensors in layout order: F64 by name, then F32 by name.
		want []SafeTensor
	}{
		{
			name: "special float32 values",
			tensors: []SafeTensor{{Name: "x", Shape: []int{2, 5}, F32: []float32{
				f32bits(0x7fc00000),  // canonical quiet NaN
				f32bits(0x7fc00001),  // quiet NaN, payload 1
				f32bits(0xffd23456),  // negative quiet NaN with payload
				f32bits(0x7f800001),  // signalling NaN
				f32bits(0x80000000),  // -0
				f32bits(0x7f800000),  // +Inf
				f32bits(0xff800000),  // -Inf
				f32bits(0x00000001),  // smallest subnormal
				f32bits(0x7f7fffff),  // largest finite
				f32bits(0x3dcccccd)}, // 0.1
			}},
			want: []SafeTensor{{Name: "x", Shape: []int{2, 5}, F32: []float32{
				f32bits(0x7fc00000), f32bits(0x7fc00001), f32bits(0xffd23456), f32bits(0x7f800001), f32bits(0x80000000),
				f32bits(0x7f800000), f32bits(0xff800000), f32bits(0x00000001), f32bits(0x7f7fffff), f32bits(0x3dcccccd)}}},
		},
		{
			name: "special float64 values",
			tensors: []SafeTensor{{Name: "y", Shape: []int{8}, F64: []float64{
				f64bits(0x7ff8000000000001), // quiet NaN, payload 1
				f64bits(0xfff0000000000fff), // negative signalling NaN with payload
				f64bits(0x8000000000000000), // -0
				math.Inf(1), math.Inf(-1),
				f64bits(0x0000000000000001), // smallest subnormal
				math.MaxFloat64,
				0.1000000000000000055511151231257827}, // nearest float64 to 0.1
			}},
			want: []SafeTensor{{Name: "y", Shape: []int{8}, F64: []float64{
				f64bits(0x7ff8000000000001), f64bits(0xfff0000000000fff), f64bits(0x8000000000000000), math.Inf(1),
				math.Inf(-1), f64bits(0x0000000000000001), math.MaxFloat64, f64bits(0x3fb999999999999a)}}},
		},
		{
			name: "scalars, empty tensors and layout order",
			tensors: []SafeTensor{
				{Name: "z.f32", F32: []float32{3}},
				{Name: "a.f32", Shape: []int{0, 3}, F32: []float32{}},
				{Name: "m.f64", Shape: []int{}, F64: []float64{-1.5}},
				{Name: "b.f64", Shape: []int{2, 0}, F64: []float64{}},
				{Name: "c.f32", Shape: []int{1, 1, 2}, F32: []float32{5, 6}},
			},
			metadata: map[string]string{},
			want: []SafeTensor{
				{Name: "b.f64", Shape: []int{2, 0}, F64: []float64{}},
				{Name: "m.f64", Shape: []int{}, F64: []float64{-1.5}},
				{Name: "a.f32", Shape: []int{0, 3}, F32: []float32{}},
				{Name: "c.f32", Shape: []int{1, 1, 2}, F32: []float32{5, 6}},
				{Name: "z.f32", Shape: []int{}, F32: []float32{3}},
			},
		},
		{
			name:    "metadata",
			tensors: []SafeTensor{{Name: "enc.0.mab.wq", Shape: []int{1}, F32: []float32{1}}},
			metadata: map[string]string{
				"format": "pt", "step": "12", "": "empty key", "html": `<a href="x">&amp;</a>`,
				"unicode": "λ → ∞ \u2028", "control": "tab\tnewline\n\x00",
				"config": `{"model":{"d":64}}`,
			},
			want: []SafeTensor{{Name: "enc.0.mab.wq", Shape: []int{1}, F32: []float32{1}}},
		},
		{
			name:    "unusual names",
			tensors: []SafeTensor{{Name: `a"b\c<d>`, F64: []float64{1}}, {Name: " ", F64: []float64{2}}, {Name: "λ", F64: []float64{3}}},
			want:    []SafeTensor{{Name: " ", F64: []float64{2}}, {Name: `a"b\c<d>`, F64: []float64{1}}, {Name: "λ", F64: []float64{3}}},
		},
		{
			name:     "metadata only",
			metadata: map[string]string{"k": "v"},
		},
		{
			name: "nothing",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := encodeSafetensors(t, tt.tensors, tt.metadata)
			got, gotMeta, err := ReadSafetensors(bytes.NewReader(file))
			if err != nil {
				t.Fatalf("ReadSafetensors: %v", err)
			}
			if err := sameTensors(got, tt.want); err != nil {
				t.Error(err)
			}
			if !maps.Equal(gotMeta, tt.metadata) {
				t.Errorf("metadata = %q, want %q", gotMeta, tt.metadata)
			}
			if len(tt.metadata) == 0 && gotMeta != nil {
				t.Errorf("metadata = %#v, want nil for a file without metadata", gotMeta)
			}
			for _, g := range got {
				if g.Shape == nil || (g.F32 == nil) == (g.F64 == nil) {
					t.Errorf("tensor %q: shape %#v, F32 set %v, F64 set %v: want non-nil shape and exactly one slice",
						g.Name, g.Shape, g.F32 != nil, g.F64 != nil)
				}
			}
			if (8+binary.LittleEndian.Uint64(file))%8 != 0 {
				t.Errorf("byte buffer starts at %d, want a multiple of 8", 8+binary.LittleEndian.Uint64(file))
			}

			reversed := slices.Clone(tt.tensors)
			slices.Reverse(reversed)
			if again := encodeSafetensors(t, reversed, tt.metadata); !bytes.Equal(again, file) {
				t.Errorf("writing the tensors in another order changed the file:\n%q\n%q", again, file)
			}
		})
	}
}

func TestWriteSafetensorsKnownLayout(t *testing.T) {
	tests := []struct {
		name     string
		tensors  []SafeTensor
		metadata map[string]string
		want     []byte
	}{
		{
			name:    "one F32 vector",
			tensors: []SafeTensor{{Name: "a", Shape: []int{2}, F32: []float32{1, 2}}},
			want: slices.Concat(
				[]byte{56, 0, 0, 0, 0, 0, 0, 0},
				[]byte(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}  `),
				[]byte{0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0x40},
			),
		},
		{
			name:     "F64 scalar before F32, with metadata",
			tensors:  []SafeTensor{{Name: "a", Shape: []int{1}, F32: []float32{0.1}}, {Name: "b", F64: []float64{-2.5}}},
			metadata: map[string]string{"k": "v"},
			want: slices.Concat(
				[]byte{136, 0, 0, 0, 0, 0, 0, 0},
				[]byte(`{"__metadata__":{"k":"v"},"b":{"dtype":"F64","shape":[],"data_offsets":[0,8]},`+
					`"a":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}}    `),
				[]byte{0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0xc0},
				[]byte{0xcd, 0xcc, 0xcc, 0x3d},
			),
		},
		{
			name: "empty file",
			want: slices.Concat([]byte{8, 0, 0, 0, 0, 0, 0, 0}, []byte("{}      ")),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := encodeSafetensors(t, tt.tensors, tt.metadata)
			if !bytes.Equal(got, tt.want) {
				t.Errorf("file =\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}

func TestReadSafetensorsForeignLayout(t *testing.T) {
	// No padding, spaces inside the JSON, tensors not in offset order,
	// fields in another order and metadata last: all legal.
	header := `{ "b" : {"shape":[1],"data_offsets":[4,8],"dtype":"F32"},` +
		`"a":{"data_offsets":[0,4],"dtype":"F32","shape":[]}, "__metadata__":{"format":"pt"}}`
	file := stFile(header, 0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0)
	got, meta, err := ReadSafetensors(bytes.NewReader(file))
	if err != nil {
		t.Fatalf("ReadSafetensors: %v", err)
	}
	want := []SafeTensor{{Name: "a", Shape: []int{}, F32: []float32{1}}, {Name: "b", Shape: []int{1}, F32: []float32{-2}}}
	if err := sameTensors(got, want); err != nil {
		t.Error(err)
	}
	if !maps.Equal(meta, map[string]string{"format": "pt"}) {
		t.Errorf("metadata = %q, want format=pt", meta)
	}
}

func TestReadSafetensorsRejects(t *testing.T) {
	f32One := []byte{0x00, 0x00, 0x80, 0x3f}
	tests := []struct {
		name string
		file []byte
		want string
	}{
		{"empty input", nil, "header length"},
		{"short length", []byte{8, 0, 0}, "header length"},
		{"header over 100 MB", binary.LittleEndian.AppendUint64(nil, 100_000_001), "exceeds"},
		{"header length 2^64-1", binary.LittleEndian.AppendUint64(nil, math.MaxUint64), "exceeds"},
		{"header longer than input", append(binary.LittleEndian.AppendUint64(nil, 100), "{}"...), "header of 100 bytes"},
		{"empty header", stFile(""), "start with"},
		{"not UTF-8", stFile("{\"\xff\":{}}"), "UTF-8"},
		{"not an object", stFile("[]"), "start with"},
		{"leading space", stFile(" {}"), "start with"},
		{"unterminated object", stFile(`{"a":`), "header"},
		{"two objects", stFile(`{}{}`), "trailing"},
		{"trailing garbage", stFile(`{} x`), "header"},
		{"trailing NUL padding", stFile("{}\x00\x00"), "header"},
		{"tensor is a number", stFile(`{"a":5}`), "want an object"},
		{"tensor is null", stFile(`{"a":null}`), "want an object"},
		{"duplicate tensor", stFile(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, f32One...), "duplicate key"},
		{"duplicate metadata", stFile(`{"__metadata__":{},"__metadata__":{}}`), "duplicate key"},
		{"duplicate field", stFile(`{"a":{"dtype":"F32","dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, f32One...), "duplicate field"},
		{"unknown field", stFile(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":1}}`, f32One...), "unknown field"},
		{"field in other case", stFile(`{"a":{"DTYPE":"F32","shape":[1],"data_offsets":[0,4]}}`, f32One...), "unknown field"},
		{"missing dtype", stFile(`{"a":{"shape":[1],"data_offsets":[0,4]}}`, f32One...), "missing dtype"},
		{"null dtype", stFile(`{"a":{"dtype":null,"shape":[1],"data_offsets":[0,4]}}`, f32One...), "missing dtype"},
		{"missing shape", stFile(`{"a":{"dtype":"F32","data_offsets":[0,4]}}`, f32One...), "missing shape"},
		{"null shape", stFile(`{"a":{"dtype":"F32","shape":null,"data_offsets":[0,4]}}`, f32One...), "missing shape"},
		{"missing offsets", stFile(`{"a":{"dtype":"F32","shape":[1]}}`, f32One...), "data_offsets"},
		{"three offsets", stFile(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4,4]}}`, f32One...), "data_offsets"},
		{"one offset", stFile(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[4]}}`, f32One...), "data_offsets"},
		{"negative offset", stFile(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}}`, f32One...), "data_offsets"},
		{"fractional offset", stFile(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4.5]}}`, f32One...), "data_offsets"},
		{"F16 unsupported", stFile(`{"a":{"dtype":"F16","shape":[2],"data_offsets":[0,4]}}`, f32One...), "not supported"},
		{"I64 unsupported", stFile(`{"a":{"dtype":"I64","shape":[],"data_offsets":[0,8]}}`, 0, 0, 0, 0, 0, 0, 0, 0), "not supported"},
		{"lower-case dtype", stFile(`{"a":{"dtype":"f32","shape":[1],"data_offsets":[0,4]}}`, f32One...), "not supported"},
		{"dtype not a string", stFile(`{"a":{"dtype":32,"shape":[1],"data_offsets":[0,4]}}`, f32One...), "dtype"},
		{"negative dimension", stFile(`{"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}}`, f32One...), "negative dimension"},
		{"negative dimension times zero", stFile(`{"a":{"dtype":"F32","shape":[0,-1],"data_offsets":[0,0]}}`), "negative dimension"},
		{"fractional dimension", stFile(`{"a":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}}`, f32One...), "shape"},
		{"dimension beyond int64", stFile(`{"a":{"dtype":"F32","shape":[9223372036854775808],"data_offsets":[0,4]}}`, f32One...), "shape"},
		{"element count overflows", stFile(`{"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}}`), "overflows"},
		{"byte count overflows", stFile(`{"a":{"dtype":"F64","shape":[2305843009213693952],"data_offsets":[0,0]}}`), "overflows"},
		{"offset beyond int64", stFile(`{"a":{"dtype":"F32","shape":[2305843009213693952],"data_offsets":[0,9223372036854775808]}}`), "out of range"},
		{"end before begin", stFile(`{"a":{"dtype":"F32","shape":[0],"data_offsets":[4,0]}}`, f32One...), "end before begin"},
		{"size mismatch", stFile(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}`, f32One...), "needs 8 bytes"},
		{"first offset not 0", stFile(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, append(f32One, f32One...)...), "gap"},
		{"gap", stFile(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}}`, slices.Repeat(f32One, 3)...), "gap"},
		{"overlap", stFile(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, append(f32One, f32One...)...), "overlap"},
		{"same range twice", stFile(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, f32One...), "overlap"},
		{"buffer truncated", stFile(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, f32One...), "unexpected EOF"},
		{"bytes after buffer", stFile(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, append(f32One, 0)...), "past the last tensor"},
		{"bytes after empty buffer", stFile(`{}`, 0), "past the last tensor"},
		{"empty name", stFile(`{"":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, f32One...), "empty name"},
		{"metadata value not a string", stFile(`{"__metadata__":{"step":12}}`), "__metadata__"},
		{"metadata is an array", stFile(`{"__metadata__":["a"]}`), "__metadata__"},
		{"metadata as a tensor", stFile(`{"__metadata__":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, f32One...), "__metadata__"},
		{"deep nesting", stFile(`{"__metadata__":` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}`), "__metadata__"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tensors, meta, err := ReadSafetensors(bytes.NewReader(tt.file))
			if err == nil {
				t.Fatalf("no error; got tensors %v, metadata %v", tensors, meta)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not mention %q", err, tt.want)
			}
			if !strings.HasPrefix(err.Error(), "read safetensors: ") {
				t.Errorf("error %q lacks the read safetensors context", err)
			}
		})
	}
}

func TestReadSafetensorsEveryTruncationFails(t *testing.T) {
	file := sampleSafetensors(t)
	if _, _, err := ReadSafetensors(bytes.NewReader(file)); err != nil {
		t.Fatalf("the full file does not read: %v", err)
	}
	for n := range len(file) {
		if _, _, err := ReadSafetensors(bytes.NewReader(file[:n])); err == nil {
			t.Errorf("the first %d of %d bytes read without error", n, len(file))
		}
	}
}

func TestReadSafetensorsCorruptBytes(t *testing.T) {
	file := sampleSafetensors(t)
	for i := range file {
		for _, flip := range []byte{0x01, 0x20, 0x80, 0xff} {
			corrupt := slices.Clone(file)
			corrupt[i] ^= flip
			checkSafetensorsReread(t, corrupt)
		}
	}
}

// checkSafetensorsReread reads file and, if it is accepted, checks that what
// was read writes and reads back identically. A panic fails the caller.
func checkSafetensorsReread(t *testing.T, file []byte) {
	t.Helper()
	tensors, meta, err := ReadSafetensors(bytes.NewReader(file))
	if err != nil {
		return
	}
	var buf bytes.Buffer
	if err := WriteSafetensors(&buf, tensors, meta); err != nil {
		t.Fatalf("accepted file %q does not write back: %v", file, err)
	}
	again, againMeta, err := ReadSafetensors(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatalf("rewritten file %q does not read: %v", buf.Bytes(), err)
	}
	// The writer's layout order may differ from the input's offset order.
	byName := func(a, b SafeTensor) int { return strings.Compare(a.Name, b.Name) }
	slices.SortFunc(tensors, byName)
	slices.SortFunc(again, byName)
	if err := sameTensors(again, tensors); err != nil {
		t.Fatalf("file %q: reread differs: %v", file, err)
	}
	if !maps.Equal(againMeta, meta) {
		t.Fatalf("file %q: reread metadata %q, want %q", file, againMeta, meta)
	}
}

func TestWriteSafetensorsRejects(t *testing.T) {
	tests := []struct {
		name     string
		tensors  []SafeTensor
		metadata map[string]string
		want     string
	}{
		{"empty name", []SafeTensor{{F32: []float32{1}}}, nil, "empty name"},
		{"reserved name", []SafeTensor{{Name: "__metadata__", F32: []float32{1}}}, nil, "reserved"},
		{"name not UTF-8", []SafeTensor{{Name: "a\xff", F32: []float32{1}}}, nil, "UTF-8"},
		{"duplicate name", []SafeTensor{{Name: "a", F32: []float32{1}}, {Name: "a", F64: []float64{1}}}, nil, "duplicate"},
		{"no data", []SafeTensor{{Name: "a", Shape: []int{0}}}, nil, "exactly one"},
		{"both dtypes", []SafeTensor{{Name: "a", F32: []float32{1}, F64: []float64{1}}}, nil, "exactly one"},
		{"too few elements", []SafeTensor{{Name: "a", Shape: []int{2, 2}, F32: []float32{1, 2, 3}}}, nil, "3 elements"},
		{"too many elements", []SafeTensor{{Name: "a", Shape: []int{}, F64: []float64{1, 2}}}, nil, "2 elements"},
		{"negative dimension", []SafeTensor{{Name: "a", Shape: []int{-1, -1}, F32: []float32{1}}}, nil, "negative"},
		{"shape overflows", []SafeTensor{{Name: "a", Shape: []int{math.MaxInt, math.MaxInt}, F32: []float32{}}}, nil, "overflows"},
		{"metadata value not UTF-8", nil, map[string]string{"k": "\xc3"}, "UTF-8"},
		{"metadata key not UTF-8", nil, map[string]string{"\xc3": "v"}, "UTF-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			err := WriteSafetensors(&buf, tt.tensors, tt.metadata)
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not mention %q", err, tt.want)
			}
			if buf.Len() != 0 {
				t.Errorf("wrote %d bytes before rejecting the input", buf.Len())
			}
		})
	}
}

// failingWriter accepts n bytes, then fails.
type failingWriter struct{ n int }

var errWriterFull = errors.New("writer full")

func (w *failingWriter) Write(p []byte) (int, error) {
	if len(p) > w.n {
		k := w.n
		w.n = 0
		return k, errWriterFull
	}
	w.n -= len(p)
	return len(p), nil
}

func TestSafetensorsLargeTensors(t *testing.T) {
	// Both tensors span several conversion chunks.
	f32 := make([]float32, 3*safetensorsChunk/4+1)
	f64 := make([]float64, 3*safetensorsChunk/8+1)
	for i := range f32 {
		f32[i] = float32(i) * 0.5
	}
	for i := range f64 {
		f64[i] = -float64(i) / 3
	}
	tensors := []SafeTensor{
		{Name: "big32", Shape: []int{len(f32)}, F32: f32},
		{Name: "big64", Shape: []int{1, len(f64)}, F64: f64},
	}
	file := encodeSafetensors(t, tensors, nil)
	got, _, err := ReadSafetensors(bytes.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	if err := sameTensors(got, []SafeTensor{tensors[1], tensors[0]}); err != nil {
		t.Error(err)
	}

	for _, n := range []int{0, 5, 8, len(file) / 2, len(file) - 1} {
		err := WriteSafetensors(&failingWriter{n: n}, tensors, nil)
		if !errors.Is(err, errWriterFull) {
			t.Errorf("writer failing after %d bytes: error %v, want one wrapping %v", n, err, errWriterFull)
		}
	}
}

func TestSafetensorsThroughAtomicFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "model.safetensors")
	tensors := []SafeTensor{{Name: "w", Shape: []int{2}, F64: []float64{1.25, -3}}}
	meta := map[string]string{"step": "3"}
	if err := fileio.WriteFileAtomic(path, func(w io.Writer) error { return WriteSafetensors(w, tensors, meta) }); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, gotMeta, err := ReadSafetensors(f)
	if err != nil {
		t.Fatal(err)
	}
	if err := sameTensors(got, tensors); err != nil {
		t.Error(err)
	}
	if !maps.Equal(gotMeta, meta) {
		t.Errorf("metadata = %q, want %q", gotMeta, meta)
	}
}

func TestSafetensorsHeaderIsPlainJSON(t *testing.T) {
	file := sampleSafetensors(t)
	n := binary.LittleEndian.Uint64(file)
	if (8+n)%8 != 0 || 8+n > uint64(len(file)) {
		t.Fatalf("header length %d in a %d-byte file", n, len(file))
	}
	var header map[string]json.RawMessage
	if err := json.Unmarshal(file[8:8+n], &header); err != nil {
		t.Fatalf("header is not a JSON object: %v", err)
	}
	var meta map[string]string
	if err := json.Unmarshal(header["__metadata__"], &meta); err != nil {
		t.Errorf("__metadata__ is not a string map: %v", err)
	}
	type entry struct {
		DType       string   `json:"dtype"`
		Shape       []int    `json:"shape"`
		DataOffsets []uint64 `json:"data_offsets"`
	}
	var entries []entry
	for name, raw := range header {
		if name == "__metadata__" {
			continue
		}
		var e entry
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&e); err != nil {
			t.Fatalf("tensor %q: %v", name, err)
		}
		if e.Shape == nil || len(e.DataOffsets) != 2 || (e.DType != "F32" && e.DType != "F64") {
			t.Errorf("tensor %q: entry %s", name, raw)
		}
		entries = append(entries, e)
	}
	if len(entries) != 4 {
		t.Fatalf("%d tensors in the header, want 4", len(entries))
	}
	slices.SortFunc(entries, func(a, b entry) int {
		return cmp.Or(cmp.Compare(a.DataOffsets[0], b.DataOffsets[0]), cmp.Compare(a.DataOffsets[1], b.DataOffsets[1]))
	})
	if entries[0].DataOffsets[0] != 0 {
		t.Errorf("offsets start at %d, want 0", entries[0].DataOffsets[0])
	}
	var next uint64
	for _, e := range entries {
		size := uint64(4)
		if e.DType == "F64" {
			size = 8
		}
		elems := uint64(1)
		for _, d := range e.Shape {
			elems *= uint64(d)
		}
		if e.DataOffsets[0] != next || e.DataOffsets[1]-e.DataOffsets[0] != elems*size || e.DataOffsets[0]%size != 0 {
			t.Errorf("entry %+v: want begin %d, %d bytes, begin aligned to %d", e, next, elems*size, size)
		}
		next = e.DataOffsets[1]
	}
	if 8+n+next != uint64(len(file)) {
		t.Errorf("tensors end at byte %d of a %d-byte file", 8+n+next, len(file))
	}
}

func FuzzReadSafetensors(f *testing.F) {
	f.Add(sampleSafetensors(f))
	f.Add(stFile(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}  `, 0, 0, 0x80, 0x3f, 0, 0, 0, 0x40))
	f.Add(stFile(`{"__metadata__":{"k":"v"},"e":{"dtype":"F64","shape":[0],"data_offsets":[0,0]}}`))
	f.Add(stFile(`{}`))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, file []byte) {
		checkSafetensorsReread(t, file)
	})
}
