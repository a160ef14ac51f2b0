package ckpt

import (
	"crypto/sha256"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/probformer/probformer/graph"
	"github.com/probformer/probformer/graph/optim"
)

// trainedCheckpoint trains the quadratic of adam_test.go for two steps and
// captures it.
func trainedCheckpoint(t testing.TB, dt graph.DType) (*Checkpoint, *graph.Params) {
	ps := graph.NewParams(dt, 1)
	prog, err := graph.Compile(ps, func(b *graph.Builder) error {
		w := b.Param("enc.0.w", []int{2, 3}, graph.Glorot)
		v := b.Param("enc.0.b", []int{3}, graph.Normal(1))
		b.SetLoss(graph.Add(graph.Sum(graph.Square(w)), graph.Sum(graph.Exp(v))))
		return nil
	}, true)
	if err != nil {
		t.Fatal(err)
	}
	opt := optim.NewAdam(0.01)
	for range 2 {
		if err := prog.Run(); err != nil {
			t.Fatal(err)
		}
		if _, err := opt.Step(prog); err != nil {
			t.Fatal(err)
		}
	}
	ck := NewCheckpoint(ps, opt, 2, []byte("task: maxnorm\n"))
	ck.Metrics["valid_mse"] = 0.25
	ck.RNG["data"] = []byte{1, 2, 3}
	return ck, ps
}

func TestCheckpointRoundTrip(t *testing.T) {
	for _, dt := range []graph.DType{graph.Float32, graph.Float64} {
		ck, ps := trainedCheckpoint(t, dt)
		path := filepath.Join(t.TempDir(), "step-2.ckpt")
		if err := WriteCheckpoint(path, ck); err != nil {
			t.Fatal(err)
		}
		back, err := ReadCheckpoint(path)
		if err != nil {
			t.Fatal(err)
		}
		if back.Step != 2 || back.DType != dt || string(back.Config) != "task: maxnorm\n" ||
			back.Metrics["valid_mse"] != 0.25 || !slices.Equal(back.RNG["data"], []byte{1, 2, 3}) {
			t.Fatalf("metadata changed: %+v", back)
		}
		if back.Adam.Step != 2 || !slices.Equal(back.Adam.M["enc.0.w"], ck.Adam.M["enc.0.w"]) || !slices.Equal(back.Adam.V["enc.0.b"], ck.Adam.V["enc.0.b"]) {
			t.Fatal("optimizer state changed")
		}
		fresh := graph.NewParams(dt, 99)
		if _, err := graph.Compile(fresh, func(b *graph.Builder) error {
			b.Param("enc.0.w", []int{2, 3}, graph.Glorot)
			b.Param("enc.0.b", []int{3}, graph.Zeros)
			return nil
		}, false); err != nil {
			t.Fatal(err)
		}
		if err := back.Restore(fresh); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"enc.0.w", "enc.0.b"} {
			a, b := ps.Lookup(name).Values(), fresh.Lookup(name).Values()
			for i := range a {
				if math.Float64bits(a[i]) != math.Float64bits(b[i]) {
					t.Fatalf("%v %s differs after restore", dt, name)
				}
			}
		}
	}
}

func TestCheckpointRestoreRefusesMismatch(t *testing.T) {
	ck, _ := trainedCheckpoint(t, graph.Float32)
	other := graph.NewParams(graph.Float64, 1)
	if err := ck.Restore(other); err == nil || !strings.Contains(err.Error(), "float32") {
		t.Fatalf("dtype mismatch: %v", err)
	}
	short := graph.NewParams(graph.Float32, 1)
	graph.Compile(short, func(b *graph.Builder) error { b.Param("enc.0.w", []int{3, 2}, graph.Glorot); return nil }, false)
	if err := ck.Restore(short); err == nil || !strings.Contains(err.Error(), "enc.0.w") {
		t.Fatalf("shape mismatch: %v", err)
	}
}

func checkpointBytes(t testing.TB) []byte {
	ck, _ := trainedCheckpoint(t, graph.Float32)
	path := filepath.Join(t.TempDir(), "c.ckpt")
	if err := WriteCheckpoint(path, ck); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestCheckpointCorruption: every truncation and every flipped byte is
// refused with an error; none panics.
func TestCheckpointCorruption(t *testing.T) {
	data := checkpointBytes(t)
	for cut := range len(data) {
		if _, err := DecodeCheckpoint(data[:cut]); err == nil {
			t.Fatalf("truncated at %d of %d bytes: accepted", cut, len(data))
		}
	}
	for i := range data {
		bad := slices.Clone(data)
		bad[i] ^= 0x20
		if _, err := DecodeCheckpoint(bad); err == nil {
			t.Fatalf("byte %d flipped: accepted", i)
		}
	}
}

func TestCheckpointNewerVersion(t *testing.T) {
	data := checkpointBytes(t)
	binary.LittleEndian.PutUint32(data[len(checkpointMagic):], CheckpointVersion+1)
	_, err := DecodeCheckpoint(data)
	if err == nil || !strings.Contains(err.Error(), "version") {
		t.Fatalf("newer version: %v", err)
	}
	path := filepath.Join(t.TempDir(), "new.ckpt")
	os.WriteFile(path, data, 0o644)
	if _, err := ReadCheckpoint(path); err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("error does not name the file: %v", err)
	}
}

func TestWriteCheckpointRefusesNaN(t *testing.T) {
	ck, _ := trainedCheckpoint(t, graph.Float64)
	ck.Params[0].Values[1] = math.NaN()
	path := filepath.Join(t.TempDir(), "nan.ckpt")
	if err := WriteCheckpoint(path, ck); err == nil {
		t.Fatal("NaN checkpoint written")
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatal("a file was left behind")
	}
}

// FuzzDecodeCheckpoint: no input makes the loader panic. The fuzzer's
// inputs get a valid checksum, so that it reaches the header and data
// parsing behind it.
func FuzzDecodeCheckpoint(f *testing.F) {
	f.Add(checkpointBytes(f))
	f.Add([]byte(checkpointMagic))
	f.Fuzz(func(t *testing.T, data []byte) {
		DecodeCheckpoint(data)
		if len(data) > sha256.Size {
			body := data[:len(data)-sha256.Size]
			sum := sha256.Sum256(body)
			DecodeCheckpoint(append(slices.Clone(body), sum[:]...))
		}
	})
}

// TestCheckpointNegativeSteps: a checkpoint whose step or Adam step is
// negative (written by hand, its checksum made again) does not decode;
// resumed, Adam's bias correction made its losses NaN.
func TestCheckpointNegativeSteps(t *testing.T) {
	for _, bad := range []func(*Checkpoint){
		func(ck *Checkpoint) { ck.Adam.Step = -1 },
		func(ck *Checkpoint) { ck.Step = -5 },
	} {
		ck, _ := trainedCheckpoint(t, graph.Float64)
		bad(ck)
		data, err := EncodeCheckpoint(ck) // the writer takes them: the file is what a hand could make
		if err != nil {
			t.Fatal(err)
		}
		if _, err := DecodeCheckpoint(data); err == nil || !strings.Contains(err.Error(), "want counts ≥ 0") {
			t.Errorf("step %d, adam step %d: decoded with error %v; want the counts refused", ck.Step, ck.Adam.Step, err)
		}
	}
}
