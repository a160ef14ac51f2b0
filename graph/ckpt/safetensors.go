package ckpt

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"slices"
	"unicode/utf8"

	"github.com/probformer/probformer/graph/fileio"
)

// The safetensors format (https://github.com/huggingface/safetensors) is
//
//	[8 bytes]  N, the header length, little-endian uint64
//	[N bytes]  UTF-8 JSON object, optionally padded with trailing spaces
//	[rest]     byte buffer
//
// The header maps each tensor name to
// {"dtype": "F32", "shape": [d0, d1, ...], "data_offsets": [begin, end]},
// offsets relative to the start of the byte buffer, plus an optional
// "__metadata__" key holding a string → string map. Tensor data is
// little-endian and row-major, and the tensors tile the byte buffer exactly:
// sorted by offset, each begins where the previous one ends, the first begins
// at 0 and the last ends at the end of the file.

// safetensorsMaxHeader bounds the JSON header, as the reference
// implementation does, so that a hostile length cannot make us allocate
// without limit.
const safetensorsMaxHeader = 100_000_000

// safetensorsMetadataKey is the header key reserved for the string metadata.
const safetensorsMetadataKey = "__metadata__"

// safetensorsChunk is the size in bytes of the scratch buffer used to
// convert tensor data, so writing never copies a whole tensor.
const safetensorsChunk = 32 << 10

// SafeTensor is one named array in a safetensors file.
//
// Exactly one of F32 and F64 is non-nil; it selects the stored dtype ("F32" or
// "F64") and holds the elements in row-major order, so
// len(data) = Π Shape[i]. An empty Shape (nil or []int{}) is a scalar with one
// element; a zero dimension makes an empty tensor, whose data must still be a
// non-nil empty slice (e.g. []float32{}) to fix its dtype.
type SafeTensor struct {
	Name  string
	Shape []int
	F32   []float32
	F64   []float64
}

// safetensorsEntry is one tensor's record in the JSON header. Field order
// matches the reference writer.
type safetensorsEntry struct {
	DType       string    `json:"dtype"`
	Shape       []int     `json:"shape"`
	DataOffsets [2]uint64 `json:"data_offsets"`
}

// WriteSafetensors writes tensors and metadata to w in the safetensors format.
//
// The layout is deterministic and follows the reference implementation:
// tensors are sorted by decreasing dtype alignment (all F64 before all F32)
// and then by name, and laid out contiguously in that order, so that every
// tensor starts at a multiple of its element size; the header lists
// "__metadata__" first (omitted when metadata is empty), then the tensors in
// layout order, and is padded with spaces so the byte buffer starts 8-byte
// aligned. The tensors slice itself is not reordered.
//
// WriteSafetensors validates before writing anything: names must be
// non-empty, unique, valid UTF-8 and not "__metadata__"; exactly one of F32
// and F64 must be set; dimensions must be non-negative with
// len(data) = Π Shape[i]; metadata keys and values must be valid UTF-8.
func WriteSafetensors(w io.Writer, tensors []SafeTensor, metadata map[string]string) error {
	header, order, err := safetensorsHeader(tensors, metadata)
	if err != nil {
		return fmt.Errorf("write safetensors: %w", err)
	}
	var prefix [8]byte
	binary.LittleEndian.PutUint64(prefix[:], uint64(len(header)))
	if _, err := w.Write(prefix[:]); err != nil {
		return fmt.Errorf("write safetensors: %w", err)
	}
	if _, err := w.Write(header); err != nil {
		return fmt.Errorf("write safetensors: %w", err)
	}
	chunk := make([]byte, 0, safetensorsChunk)
	for _, t := range order {
		if err := writeTensorData(w, t, chunk); err != nil {
			return fmt.Errorf("write safetensors: tensor %q: %w", t.Name, err)
		}
	}
	return nil
}

// safetensorsHeader validates tensors and metadata and returns the padded
// JSON header and the tensors in layout order.
func safetensorsHeader(tensors []SafeTensor, metadata map[string]string) ([]byte, []SafeTensor, error) {
	for k, v := range metadata {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return nil, nil, fmt.Errorf("metadata %q: not valid UTF-8", k)
		}
	}
	seen := make(map[string]bool, len(tensors))
	for _, t := range tensors {
		if err := validateSafeTensor(t); err != nil {
			return nil, nil, err
		}
		if seen[t.Name] {
			return nil, nil, fmt.Errorf("tensor %q: duplicate name", t.Name)
		}
		seen[t.Name] = true
	}

	order := slices.Clone(tensors)
	slices.SortFunc(order, func(a, b SafeTensor) int {
		return cmp.Or(
			cmp.Compare(safeTensorElemSize(b), safeTensorElemSize(a)),
			cmp.Compare(a.Name, b.Name),
		)
	})

	var buf bytes.Buffer
	buf.WriteByte('{')
	if len(metadata) > 0 {
		if err := writeJSONMember(&buf, safetensorsMetadataKey, metadata); err != nil {
			return nil, nil, err
		}
	}
	var offset uint64
	for _, t := range order {
		dtype, n := "F32", uint64(len(t.F32))*4
		if t.F64 != nil {
			dtype, n = "F64", uint64(len(t.F64))*8
		}
		shape := t.Shape
		if shape == nil {
			// A scalar's shape must be [] in the JSON, not null.
			shape = []int{}
		}
		entry := safetensorsEntry{DType: dtype, Shape: shape, DataOffsets: [2]uint64{offset, offset + n}}
		if buf.Len() > 1 {
			buf.WriteByte(',')
		}
		if err := writeJSONMember(&buf, t.Name, entry); err != nil {
			return nil, nil, err
		}
		offset += n
	}
	buf.WriteByte('}')
	for buf.Len()%8 != 0 {
		buf.WriteByte(' ')
	}
	return buf.Bytes(), order, nil
}

// validateSafeTensor checks one tensor's name, dtype choice and shape.
func validateSafeTensor(t SafeTensor) error {
	switch {
	case t.Name == "":
		return errors.New("tensor with empty name")
	case t.Name == safetensorsMetadataKey:
		return fmt.Errorf("tensor %q: name is reserved", t.Name)
	case !utf8.ValidString(t.Name):
		return fmt.Errorf("tensor %q: name is not valid UTF-8", t.Name)
	case (t.F32 == nil) == (t.F64 == nil):
		return fmt.Errorf("tensor %q: exactly one of F32 and F64 must be set", t.Name)
	}
	n, err := shapeElems(t.Shape)
	if err != nil {
		return fmt.Errorf("tensor %q: %w", t.Name, err)
	}
	if got := len(t.F32) + len(t.F64); uint64(got) != n {
		return fmt.Errorf("tensor %q: %d elements for shape %v, want %d", t.Name, got, t.Shape, n)
	}
	return nil
}

// safeTensorElemSize returns the size in bytes of one element of t.
func safeTensorElemSize(t SafeTensor) int {
	if t.F64 != nil {
		return 8
	}
	return 4
}

// writeJSONMember appends "key":value to buf. HTML escaping is off so that
// names such as "a<b" are stored as written.
func writeJSONMember(buf *bytes.Buffer, key string, value any) error {
	k, err := encodeJSON(key)
	if err != nil {
		return fmt.Errorf("header key %q: %w", key, err)
	}
	v, err := encodeJSON(value)
	if err != nil {
		return fmt.Errorf("header entry %q: %w", key, err)
	}
	buf.Write(k)
	buf.WriteByte(':')
	buf.Write(v)
	return nil
}

// encodeJSON is json.Marshal without HTML escaping.
func encodeJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// writeTensorData writes t's elements little-endian, converting through the
// scratch slice chunk.
func writeTensorData(w io.Writer, t SafeTensor, chunk []byte) error {
	flush := func() error {
		if len(chunk) == 0 {
			return nil
		}
		_, err := w.Write(chunk)
		chunk = chunk[:0]
		return err
	}
	for _, x := range t.F32 {
		if len(chunk)+4 > cap(chunk) {
			if err := flush(); err != nil {
				return err
			}
		}
		chunk = binary.LittleEndian.AppendUint32(chunk, math.Float32bits(x))
	}
	for _, x := range t.F64 {
		if len(chunk)+8 > cap(chunk) {
			if err := flush(); err != nil {
				return err
			}
		}
		chunk = binary.LittleEndian.AppendUint64(chunk, math.Float64bits(x))
	}
	return flush()
}

// safetensorsRecord is a header entry with its name, as read from a file.
type safetensorsRecord struct {
	name  string
	dtype string
	shape []int
	begin uint64
	end   uint64
}

// ReadSafetensors reads a safetensors file from r and returns its tensors in
// the order of their data offsets (for files from WriteSafetensors: F64
// tensors by name, then F32 tensors by name) and its metadata, nil when the
// file has none. Scalars come back with Shape []int{}; every returned tensor
// has a non-nil F32 or F64 slice, empty for a zero-size tensor.
//
// The parser is strict and bounds every allocation by the bytes actually
// read, so hostile input yields an error, never a panic or a huge
// allocation. It rejects: a header longer than 100 MB or than the input; a
// header that is not valid UTF-8 or not a single JSON object (trailing spaces
// allowed); duplicate keys; unknown fields; dtypes other than F32 and F64;
// empty names; negative dimensions; offsets that do not tile the byte buffer
// exactly (gaps, overlaps, end < begin, a first offset other than 0);
// Π shape × element size ≠ end − begin; a truncated byte buffer; and any bytes
// after it. r is read up to one byte past the end of the buffer to check
// that the input ends there.
func ReadSafetensors(r io.Reader) ([]SafeTensor, map[string]string, error) {
	return readSafetensors(r, -1)
}

// ReadSafetensorsFile is ReadSafetensors of the file at path, its errors
// naming path.
//
// Only a regular file is read (a symbolic link is followed): a directory, a
// named pipe or a device such as /dev/zero is refused at once, with an
// error matching ErrNotRegular, before a byte is read. The read is bounded by
// the file's size: a header length beyond it is refused before the header is
// read, and a header whose tensors do not end exactly at the end of the file
// is refused before any tensor data is read.
func ReadSafetensorsFile(path string) ([]SafeTensor, map[string]string, error) {
	f, size, err := fileio.OpenRegular(path)
	if err != nil {
		return nil, nil, fmt.Errorf("read safetensors %s: %w", path, err)
	}
	defer f.Close()
	tensors, metadata, err := readSafetensors(f, size)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return tensors, metadata, nil
}

// readSafetensors is ReadSafetensors of an input of size bytes, or of
// unknown size if size < 0. A known size bounds the header and the data
// before they are read.
func readSafetensors(r io.Reader, size int64) ([]SafeTensor, map[string]string, error) {
	var prefix [8]byte
	if _, err := io.ReadFull(r, prefix[:]); err != nil {
		return nil, nil, fmt.Errorf("read safetensors: header length: %w", noEOF(err))
	}
	n := binary.LittleEndian.Uint64(prefix[:])
	if n > safetensorsMaxHeader {
		return nil, nil, fmt.Errorf("read safetensors: header length %d exceeds %d bytes", n, safetensorsMaxHeader)
	}
	if size >= 0 && (size < 8 || n > uint64(size-8)) {
		return nil, nil, fmt.Errorf("read safetensors: header length %d exceeds the file (%d bytes)", n, size)
	}
	var header bytes.Buffer
	if err := readExactly(&header, r, n); err != nil {
		return nil, nil, fmt.Errorf("read safetensors: header of %d bytes: %w", n, err)
	}
	records, metadata, err := parseSafetensorsHeader(header.Bytes())
	if err != nil {
		return nil, nil, fmt.Errorf("read safetensors: header: %w", err)
	}
	if size >= 0 {
		end := uint64(0)
		if len(records) > 0 {
			end = records[len(records)-1].end
		}
		// 8 + n ≤ size was checked above, so left does not wrap.
		if left := uint64(size) - 8 - n; end != left {
			return nil, nil, fmt.Errorf("read safetensors: the header describes %d bytes of tensor data, the file holds %d", end, left)
		}
	}

	tensors := make([]SafeTensor, 0, len(records))
	var raw bytes.Buffer
	for _, rec := range records {
		raw.Reset()
		if err := readExactly(&raw, r, rec.end-rec.begin); err != nil {
			return nil, nil, fmt.Errorf("read safetensors: tensor %q: %w", rec.name, err)
		}
		tensors = append(tensors, decodeSafeTensor(rec, raw.Bytes()))
	}
	var extra [1]byte
	switch _, err := io.ReadFull(r, extra[:]); err {
	case io.EOF:
	case nil:
		return nil, nil, errors.New("read safetensors: data continues past the last tensor")
	default:
		return nil, nil, fmt.Errorf("read safetensors: %w", err)
	}
	return tensors, metadata, nil
}

// noEOF turns io.EOF into io.ErrUnexpectedEOF: once reading has begun, the
// input ending is a truncation.
func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// readExactly appends exactly n bytes from r to buf. buf grows with the
// bytes that actually arrive, so a hostile n does not allocate up front.
func readExactly(buf *bytes.Buffer, r io.Reader, n uint64) error {
	if n > math.MaxInt64 {
		return fmt.Errorf("length %d out of range", n)
	}
	got, err := io.CopyN(buf, r, int64(n))
	if err != nil {
		return fmt.Errorf("got %d of %d bytes: %w", got, n, noEOF(err))
	}
	return nil
}

// decodeSafeTensor converts rec's little-endian bytes, already checked to be
// Π shape × element size long.
func decodeSafeTensor(rec safetensorsRecord, b []byte) SafeTensor {
	t := SafeTensor{Name: rec.name, Shape: rec.shape}
	switch rec.dtype {
	case "F32":
		t.F32 = make([]float32, len(b)/4)
		for i := range t.F32 {
			t.F32[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
	case "F64":
		t.F64 = make([]float64, len(b)/8)
		for i := range t.F64 {
			t.F64[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
		}
	}
	return t
}

// safetensorsElemSizes maps the supported dtypes to their element size in
// bytes.
var safetensorsElemSizes = map[string]uint64{"F32": 4, "F64": 8}

// parseSafetensorsHeader parses and validates the JSON header and returns
// its tensor records sorted by data offset, and its metadata.
func parseSafetensorsHeader(header []byte) ([]safetensorsRecord, map[string]string, error) {
	if !utf8.Valid(header) {
		return nil, nil, errors.New("not valid UTF-8")
	}
	if len(header) == 0 || header[0] != '{' {
		return nil, nil, errors.New("does not start with '{'")
	}
	dec := json.NewDecoder(bytes.NewReader(header))
	dec.DisallowUnknownFields()
	if _, err := dec.Token(); err != nil {
		return nil, nil, err
	}
	var (
		records  []safetensorsRecord
		metadata map[string]string
		seen     = make(map[string]bool)
	)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, err
		}
		key, ok := tok.(string)
		if !ok {
			return nil, nil, fmt.Errorf("unexpected %v where a key belongs", tok)
		}
		if seen[key] {
			return nil, nil, fmt.Errorf("duplicate key %q", key)
		}
		seen[key] = true
		if key == safetensorsMetadataKey {
			if err := dec.Decode(&metadata); err != nil {
				return nil, nil, fmt.Errorf("%s: %w", key, err)
			}
			continue
		}
		rec, err := decodeSafetensorsRecord(dec, key)
		if err != nil {
			return nil, nil, fmt.Errorf("tensor %q: %w", key, err)
		}
		records = append(records, rec)
	}
	if _, err := dec.Token(); err != nil {
		return nil, nil, err
	}
	if tok, err := dec.Token(); err != io.EOF {
		return nil, nil, fmt.Errorf("trailing data after the JSON object (%v, %v)", tok, err)
	}

	slices.SortFunc(records, func(a, b safetensorsRecord) int {
		return cmp.Or(cmp.Compare(a.begin, b.begin), cmp.Compare(a.end, b.end), cmp.Compare(a.name, b.name))
	})
	var next uint64
	for _, rec := range records {
		if rec.begin != next {
			return nil, nil, fmt.Errorf("tensor %q: data_offsets [%d, %d] leave a gap or overlap: previous tensor ends at %d",
				rec.name, rec.begin, rec.end, next)
		}
		next = rec.end
	}
	return records, metadata, nil
}

// decodeSafetensorsRecord decodes the header value of tensor name and checks
// it on its own: an object with exactly the keys dtype, shape and
// data_offsets (matched case-sensitively, each once), a supported dtype,
// non-negative dimensions, end ≥ begin and Π shape × element size =
// end − begin.
func decodeSafetensorsRecord(dec *json.Decoder, name string) (safetensorsRecord, error) {
	if name == "" {
		return safetensorsRecord{}, errors.New("empty name")
	}
	if tok, err := dec.Token(); err != nil {
		return safetensorsRecord{}, err
	} else if tok != json.Delim('{') {
		return safetensorsRecord{}, fmt.Errorf("got %v, want an object", tok)
	}
	var (
		dtype   *string
		shape   *[]int
		offsets *[]uint64
		seen    = make(map[string]bool, 3)
	)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return safetensorsRecord{}, err
		}
		key, _ := tok.(string)
		var dst any
		switch key {
		case "dtype":
			dst = &dtype
		case "shape":
			dst = &shape
		case "data_offsets":
			dst = &offsets
		default:
			return safetensorsRecord{}, fmt.Errorf("unknown field %v", tok)
		}
		if seen[key] {
			return safetensorsRecord{}, fmt.Errorf("duplicate field %q", key)
		}
		seen[key] = true
		if err := dec.Decode(dst); err != nil {
			return safetensorsRecord{}, fmt.Errorf("%s: %w", key, err)
		}
	}
	if _, err := dec.Token(); err != nil {
		return safetensorsRecord{}, err
	}
	switch {
	case dtype == nil:
		return safetensorsRecord{}, errors.New("missing dtype")
	case shape == nil:
		return safetensorsRecord{}, errors.New("missing shape")
	case offsets == nil || len(*offsets) != 2:
		return safetensorsRecord{}, errors.New("data_offsets missing or not [begin, end]")
	}
	size, ok := safetensorsElemSizes[*dtype]
	if !ok {
		return safetensorsRecord{}, fmt.Errorf("dtype %q not supported (want F32 or F64)", *dtype)
	}
	rec := safetensorsRecord{name: name, dtype: *dtype, shape: *shape, begin: (*offsets)[0], end: (*offsets)[1]}
	if rec.shape == nil {
		rec.shape = []int{}
	}
	if rec.end < rec.begin {
		return safetensorsRecord{}, fmt.Errorf("data_offsets [%d, %d]: end before begin", rec.begin, rec.end)
	}
	count, err := shapeElems(rec.shape)
	if err != nil {
		return safetensorsRecord{}, err
	}
	hi, nbytes := bits.Mul64(count, size)
	if hi != 0 {
		return safetensorsRecord{}, fmt.Errorf("shape %v overflows", rec.shape)
	}
	if nbytes != rec.end-rec.begin {
		return safetensorsRecord{}, fmt.Errorf("shape %v of %s needs %d bytes, data_offsets [%d, %d] hold %d",
			rec.shape, rec.dtype, nbytes, rec.begin, rec.end, rec.end-rec.begin)
	}
	return rec, nil
}

// shapeElems returns Π shape[i], the number of elements of a tensor of that
// shape (1 for a scalar), or an error if a dimension is negative or the
// product overflows a uint64.
func shapeElems(shape []int) (uint64, error) {
	n := uint64(1)
	for _, d := range shape {
		if d < 0 {
			return 0, fmt.Errorf("negative dimension in shape %v", shape)
		}
		var hi uint64
		hi, n = bits.Mul64(n, uint64(d))
		if hi != 0 {
			return 0, fmt.Errorf("shape %v overflows", shape)
		}
	}
	return n, nil
}
