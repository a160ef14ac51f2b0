package ckpt_test

import (
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"

	"github.com/probformer/probformer/graph/ckpt"
	"github.com/probformer/probformer/graph/fileio"
)

// Reading back a safetensors file such as `trainer export` writes:
// tensors named by their parameter names, and the run's config, step and
// format in the metadata.
func ExampleReadSafetensors() {
	dir, err := os.MkdirTemp("", "export")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "model.safetensors")
	// What `trainer export --checkpoint R --format safetensors --out F` writes.
	tensors := []ckpt.SafeTensor{
		{Name: "head.w", Shape: []int{2, 1}, F32: []float32{0.5, -1.25}},
		{Name: "head.b", Shape: []int{1}, F32: []float32{0.125}},
	}
	meta := map[string]string{"format": "pt", "step": "3000", "source": "probformer"}
	if err := fileio.WriteFileAtomic(path, func(w io.Writer) error { return ckpt.WriteSafetensors(w, tensors, meta) }); err != nil {
		log.Fatal(err)
	}

	f, err := os.Open(path)
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	loaded, metadata, err := ckpt.ReadSafetensors(f)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("step", metadata["step"], "format", metadata["format"])
	// Tensors come back in the file's layout order: by dtype, then name.
	for _, t := range loaded {
		fmt.Println(t.Name, t.Shape, t.F32)
	}
	// Output:
	// step 3000 format pt
	// head.b [1] [0.125]
	// head.w [2 1] [0.5 -1.25]
}
