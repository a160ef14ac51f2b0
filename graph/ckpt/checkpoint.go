package ckpt

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math"
	"slices"

	"github.com/probformer/probformer/graph"
	"github.com/probformer/probformer/graph/fileio"
	"github.com/probformer/probformer/graph/optim"
)

// CheckpointVersion is the format this code writes. It reads every
// version up to this one and refuses newer ones.
const CheckpointVersion = 1

// checkpointMagic opens every checkpoint file.
const checkpointMagic = "probformer checkpoint\n"

// maxHeader bounds the JSON header a loader will allocate for.
const maxHeader = 64 << 20

// Checkpoint is everything needed to resume a run exactly: the config that
// made it, every parameter by name, the optimizer state, the step, the
// random generators' states and the latest metrics.
//
// File layout (all integers little-endian):
//
//	"probformer checkpoint\n"   22-byte magic
//	uint32                      format version
//	uint64 n, n bytes           JSON header (checkpointHeader)
//	tensor data                 each parameter in the run's dtype, then
//	                            Adam's first and second moments as float64,
//	                            in the header's order
//	[32]byte                    SHA-256 of every byte before it
type Checkpoint struct {
	DType   graph.DType
	Step    int
	Config  []byte             // the run's config, as YAML
	Metrics map[string]float64 // latest metrics, e.g. "valid_mse"
	RNG     map[string][]byte  // generator states by role ("data", "dropout")
	Extra   map[string][]byte  // task state a model needs, e.g. a vocabulary
	Params  []Tensor
	Adam    optim.AdamState
}

// Tensor is one named parameter's values.
type Tensor struct {
	Name   string
	Shape  []int
	Values []float64 // row-major; float32 parameters are widened exactly
}

type checkpointHeader struct {
	DType    string             `json:"dtype"`
	Step     int                `json:"step"`
	Config   string             `json:"config"`
	Metrics  map[string]float64 `json:"metrics"`
	RNG      map[string][]byte  `json:"rng"`
	Extra    map[string][]byte  `json:"extra,omitempty"`
	Params   []tensorEntry      `json:"params"`
	AdamStep int                `json:"adam_step"`
	Moments  []string           `json:"adam_moments"` // names with moments, in data order
}

type tensorEntry struct {
	Name  string `json:"name"`
	Shape []int  `json:"shape"`
}

// NewCheckpoint captures params and the optimizer's state.
func NewCheckpoint(params *graph.Params, opt *optim.Adam, step int, config []byte) *Checkpoint {
	ck := &Checkpoint{DType: params.DType(), Step: step, Config: config,
		Metrics: map[string]float64{}, RNG: map[string][]byte{}, Extra: map[string][]byte{}}
	for _, p := range params.List() {
		ck.Params = append(ck.Params, Tensor{Name: p.Name, Shape: slices.Clone(p.Shape), Values: p.Values()})
	}
	if opt != nil {
		ck.Adam = opt.State()
	}
	return ck
}

// Restore copies the checkpoint's parameters into params in place, so
// every program sharing them sees the loaded values. Params must hold
// exactly the checkpoint's names and shapes, in its dtype.
func (ck *Checkpoint) Restore(params *graph.Params) error {
	if ck.DType != params.DType() {
		return fmt.Errorf("checkpoint holds %s parameters, the model is %s", ck.DType, params.DType())
	}
	seen := map[string]bool{}
	for _, t := range ck.Params {
		p := params.Lookup(t.Name)
		if p == nil {
			return fmt.Errorf("checkpoint parameter %s is not in the model", t.Name)
		}
		if !slices.Equal(p.Shape, t.Shape) {
			return fmt.Errorf("parameter %s: checkpoint shape %v, model shape %v", t.Name, t.Shape, p.Shape)
		}
		if err := p.SetValues(t.Values); err != nil {
			return err
		}
		seen[t.Name] = true
	}
	for _, p := range params.List() {
		if !seen[p.Name] {
			return fmt.Errorf("model parameter %s is missing from the checkpoint", p.Name)
		}
	}
	return nil
}

// Finite reports the first parameter, or optimizer moment, holding NaN or
// ±Inf, as an error naming it and the element; nil if every value is
// finite. Writing and decoding a checkpoint both refuse a non-finite one, so
// a checkpoint never carries a diverged run's values into another.
func (ck *Checkpoint) Finite() error {
	for _, t := range ck.Params {
		if i := firstNonFinite(t.Values); i >= 0 {
			return fmt.Errorf("parameter %s is not finite: element %d of %d is %v", t.Name, i, len(t.Values), t.Values[i])
		}
	}
	for _, m := range []struct {
		which  string
		values map[string][]float64
	}{{"first", ck.Adam.M}, {"second", ck.Adam.V}} {
		for _, name := range slices.Sorted(maps.Keys(m.values)) {
			v := m.values[name]
			if i := firstNonFinite(v); i >= 0 {
				return fmt.Errorf("optimizer %s moment of parameter %s is not finite: element %d of %d is %v", m.which, name, i, len(v), v[i])
			}
		}
	}
	return nil
}

// firstNonFinite is the index of the first NaN or ±Inf in v, or -1.
func firstNonFinite(v []float64) int {
	for i, x := range v {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return i
		}
	}
	return -1
}

// WriteCheckpoint writes ck to path atomically: a crash leaves either the
// old file or the new one.
func WriteCheckpoint(path string, ck *Checkpoint) error {
	if err := ck.Finite(); err != nil {
		return fmt.Errorf("write checkpoint %s: %w", path, err)
	}
	return fileio.WriteFileAtomic(path, func(w io.Writer) error {
		h := sha256.New()
		return ck.encode(io.MultiWriter(w, h), func() error {
			_, err := w.Write(h.Sum(nil))
			return err
		})
	})
}

// EncodeCheckpoint returns the bytes WriteCheckpoint writes, for sending
// a checkpoint to another process (DecodeCheckpoint reads them).
func EncodeCheckpoint(ck *Checkpoint) ([]byte, error) {
	if err := ck.Finite(); err != nil {
		return nil, fmt.Errorf("encode checkpoint: %w", err)
	}
	var buf bytes.Buffer
	h := sha256.New()
	err := ck.encode(io.MultiWriter(&buf, h), func() error {
		_, err := buf.Write(h.Sum(nil))
		return err
	})
	return buf.Bytes(), err
}

func (ck *Checkpoint) encode(w io.Writer, trailer func() error) error {
	hdr := checkpointHeader{
		DType: ck.DType.String(), Step: ck.Step, Config: string(ck.Config),
		Metrics: ck.Metrics, RNG: ck.RNG, Extra: ck.Extra, AdamStep: ck.Adam.Step,
	}
	for _, t := range ck.Params {
		hdr.Params = append(hdr.Params, tensorEntry{Name: t.Name, Shape: t.Shape})
		if ck.Adam.M[t.Name] != nil {
			hdr.Moments = append(hdr.Moments, t.Name)
		}
	}
	js, err := json.Marshal(hdr)
	if err != nil {
		return err
	}
	var pre bytes.Buffer
	pre.WriteString(checkpointMagic)
	binary.Write(&pre, binary.LittleEndian, uint32(CheckpointVersion))
	binary.Write(&pre, binary.LittleEndian, uint64(len(js)))
	pre.Write(js)
	if _, err := w.Write(pre.Bytes()); err != nil {
		return err
	}
	for _, t := range ck.Params {
		if err := writeFloats(w, t.Values, ck.DType); err != nil {
			return err
		}
	}
	for _, name := range hdr.Moments {
		if err := writeFloats(w, ck.Adam.M[name], graph.Float64); err != nil {
			return err
		}
		if err := writeFloats(w, ck.Adam.V[name], graph.Float64); err != nil {
			return err
		}
	}
	return trailer()
}

func writeFloats(w io.Writer, v []float64, dt graph.DType) error {
	size := 8
	if dt == graph.Float32 {
		size = 4
	}
	buf := make([]byte, size*len(v))
	for i, x := range v {
		if dt == graph.Float32 {
			binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(float32(x)))
		} else {
			binary.LittleEndian.PutUint64(buf[8*i:], math.Float64bits(x))
		}
	}
	_, err := w.Write(buf)
	return err
}

// checkpointFixed is the size of a checkpoint's fixed-size start: magic,
// version and header length.
const checkpointFixed = len(checkpointMagic) + 4 + 8

// ReadCheckpoint loads and verifies a checkpoint. A truncated or altered
// file, one with a value that is not finite, or one written by a newer
// format, is an error naming the file.
//
// Only a regular file is read (a symbolic link is followed): a directory, a
// named pipe or a device such as /dev/zero is refused at once, with an
// error matching ErrNotRegular, before a byte is read. The read is bounded by
// the file's own header: the fixed start and the JSON header come first,
// the size they describe must be exactly the file's size, and only then is
// the rest read: the loader never allocates more than the file holds, and a
// file larger than its header says (a checkpoint with 64 GB appended) is
// refused without reading the excess.
func ReadCheckpoint(path string) (*Checkpoint, error) {
	data, err := readCheckpointFile(path)
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", path, err)
	}
	ck, err := DecodeCheckpoint(data)
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", path, err)
	}
	return ck, nil
}

// readCheckpointFile returns the bytes of the checkpoint file at path,
// reading no more than its header says it holds (ReadCheckpoint). The
// header is checked only as far as is needed to know the size;
// DecodeCheckpoint verifies the rest, the checksum first.
func readCheckpointFile(path string) ([]byte, error) {
	f, size, err := fileio.OpenRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if size < int64(checkpointFixed+sha256.Size) {
		// Too short to hold a header; DecodeCheckpoint says what is wrong.
		data := make([]byte, size)
		if _, err := io.ReadFull(f, data); err != nil {
			return nil, fmt.Errorf("read: %w", noEOF(bareError(err)))
		}
		return data, nil
	}
	var pre [checkpointFixed]byte
	if _, err := io.ReadFull(f, pre[:]); err != nil {
		return nil, fmt.Errorf("read: %w", noEOF(bareError(err)))
	}
	n, err := checkpointPrefix(pre[:])
	if err != nil {
		return nil, err
	}
	if n > maxHeader || n > uint64(size)-uint64(checkpointFixed+sha256.Size) {
		return nil, fmt.Errorf("header length %d exceeds the file (%d bytes)", n, size)
	}
	js := make([]byte, n)
	if _, err := io.ReadFull(f, js); err != nil {
		return nil, fmt.Errorf("read header: %w", noEOF(bareError(err)))
	}
	var hdr checkpointHeader
	if err := json.Unmarshal(js, &hdr); err != nil {
		return nil, fmt.Errorf("header (the file is corrupted): %w", err)
	}
	dt, err := graph.ParseDType(hdr.DType)
	if err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	tensors, err := hdr.dataSize(dt, size)
	if err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	total := int64(checkpointFixed) + int64(n) + tensors + sha256.Size
	if total != size {
		return nil, fmt.Errorf("the header describes %d bytes, the file holds %d: it is truncated or corrupted", total, size)
	}
	data := make([]byte, total)
	copy(data, pre[:])
	copy(data[checkpointFixed:], js)
	if _, err := io.ReadFull(f, data[checkpointFixed+len(js):]); err != nil {
		return nil, fmt.Errorf("read: %w", noEOF(bareError(err)))
	}
	var extra [1]byte
	if k, _ := f.Read(extra[:]); k != 0 {
		return nil, fmt.Errorf("the file grew past %d bytes while it was read", size)
	}
	return data, nil
}

// dataSize is the number of bytes of tensor data h describes for
// parameters of dtype dt: each parameter, then two float64 moments for
// each name in h.Moments. It fails once the sum passes limit, for a shape
// that is negative or too large, and for moments of an unknown parameter.
func (h *checkpointHeader) dataSize(dt graph.DType, limit int64) (int64, error) {
	elem := int64(8)
	if dt == graph.Float32 {
		elem = 4
	}
	var total int64
	counts := make(map[string]int64, len(h.Params))
	for _, e := range h.Params {
		count, err := checkedSize(e.Shape)
		if err != nil {
			return 0, fmt.Errorf("parameter %s: %w", e.Name, err)
		}
		counts[e.Name] = int64(count)
		if total += int64(count) * elem; total > limit {
			return 0, fmt.Errorf("parameter %s: the tensors need more than the file's %d bytes", e.Name, limit)
		}
	}
	for _, name := range h.Moments {
		count, ok := counts[name]
		if !ok {
			return 0, fmt.Errorf("optimizer moments for unknown parameter %q", name)
		}
		if total += 2 * 8 * count; total > limit {
			return 0, fmt.Errorf("optimizer moments of %s: the tensors need more than the file's %d bytes", name, limit)
		}
	}
	return total, nil
}

// checkpointPrefix checks the magic and the format version at the start of
// p, which holds at least checkpointFixed bytes, and returns the length of
// the JSON header that follows.
func checkpointPrefix(p []byte) (uint64, error) {
	if string(p[:len(checkpointMagic)]) != checkpointMagic {
		return 0, errors.New("not a probformer checkpoint (bad magic)")
	}
	version := binary.LittleEndian.Uint32(p[len(checkpointMagic):])
	if version == 0 || version > CheckpointVersion {
		return 0, fmt.Errorf("written by format version %d; this trainer reads versions 1 to %d (upgrade probformer)", version, CheckpointVersion)
	}
	return binary.LittleEndian.Uint64(p[len(checkpointMagic)+4:]), nil
}

// DecodeCheckpoint parses and verifies a checkpoint file's bytes: the
// magic, the version, the checksum, the header and the tensor data, and
// that every parameter and moment is finite (Finite). Every error says what
// is wrong; none names a file.
func DecodeCheckpoint(data []byte) (*Checkpoint, error) {
	const fixed = checkpointFixed
	if len(data) < len(checkpointMagic) || string(data[:len(checkpointMagic)]) != checkpointMagic {
		return nil, errors.New("not a probformer checkpoint (bad magic)")
	}
	if len(data) < fixed+sha256.Size {
		return nil, fmt.Errorf("truncated: %d bytes", len(data))
	}
	n, err := checkpointPrefix(data)
	if err != nil {
		return nil, err
	}
	body, sum := data[:len(data)-sha256.Size], data[len(data)-sha256.Size:]
	if got := sha256.Sum256(body); !bytes.Equal(got[:], sum) {
		return nil, errors.New("checksum mismatch: the file is truncated or corrupted")
	}
	if n > maxHeader || n > uint64(len(body)-fixed) {
		return nil, fmt.Errorf("header length %d exceeds the file", n)
	}
	var hdr checkpointHeader
	if err := json.Unmarshal(body[fixed:fixed+int(n)], &hdr); err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	dt, err := graph.ParseDType(hdr.DType)
	if err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	// counts of steps: a negative one (Adam's bias correction 1 − β^t
	// then exceeds 1 or is negative) resumed into NaN losses
	if hdr.Step < 0 || hdr.AdamStep < 0 {
		return nil, fmt.Errorf("header: step %d, adam_step %d: want counts ≥ 0", hdr.Step, hdr.AdamStep)
	}
	ck := &Checkpoint{DType: dt, Step: hdr.Step, Config: []byte(hdr.Config), Metrics: hdr.Metrics,
		RNG: hdr.RNG, Extra: hdr.Extra, Adam: optim.AdamState{Step: hdr.AdamStep, M: map[string][]float64{}, V: map[string][]float64{}}}
	rest := body[fixed+int(n):]
	take := func(count int, dt graph.DType) ([]float64, error) {
		size := 8
		if dt == graph.Float32 {
			size = 4
		}
		if count < 0 || count > len(rest)/size {
			return nil, errors.New("tensor data shorter than the header says")
		}
		out := make([]float64, count)
		for i := range out {
			if dt == graph.Float32 {
				out[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(rest[4*i:])))
			} else {
				out[i] = math.Float64frombits(binary.LittleEndian.Uint64(rest[8*i:]))
			}
		}
		rest = rest[count*size:]
		return out, nil
	}
	sizes := map[string]int{}
	for _, e := range hdr.Params {
		count, err := checkedSize(e.Shape)
		if err != nil {
			return nil, fmt.Errorf("parameter %s: %w", e.Name, err)
		}
		if _, dup := sizes[e.Name]; dup || e.Name == "" {
			return nil, fmt.Errorf("parameter name %q repeated or empty", e.Name)
		}
		v, err := take(count, dt)
		if err != nil {
			return nil, fmt.Errorf("parameter %s: %w", e.Name, err)
		}
		sizes[e.Name] = count
		ck.Params = append(ck.Params, Tensor{Name: e.Name, Shape: e.Shape, Values: v})
	}
	for _, name := range hdr.Moments {
		count, ok := sizes[name]
		if !ok {
			return nil, fmt.Errorf("optimizer moments for unknown parameter %q", name)
		}
		if ck.Adam.M[name], err = take(count, graph.Float64); err != nil {
			return nil, err
		}
		if ck.Adam.V[name], err = take(count, graph.Float64); err != nil {
			return nil, err
		}
	}
	if len(rest) != 0 {
		return nil, fmt.Errorf("%d bytes after the tensor data", len(rest))
	}
	if err := ck.Finite(); err != nil {
		return nil, err
	}
	return ck, nil
}

// checkedSize is the element count of shape, refusing negative dims and
// overflow.
func checkedSize(shape []int) (int, error) {
	n := 1
	for _, s := range shape {
		if s < 0 || (s > 0 && n > math.MaxInt32/s) {
			return 0, fmt.Errorf("bad shape %v", shape)
		}
		n *= s
	}
	return n, nil
}

// bareError strips the file name from a *fs.PathError, so that an error
// reading a checkpoint names the path once, where the caller reports it.
func bareError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
