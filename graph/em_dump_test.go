package graph

import (
	"crypto/sha256"
	"fmt"
	"math"
	"os"
	"sort"
	"testing"

	"github.com/probformer/probformer/graph/internal/kernels"
)

// TestEMDumpBits writes a digest of every output and gradient of
// emBitCases and emCCases, float32 bits in order, for em.c's AVX2 and
// AVX-512 builds and the Go float32 path, to the file EM_DUMP names: run
// at two commits and compare the files (cmp) to check that a change to
// em.c or its Go side keeps every value bit for bit. Without EM_DUMP it
// is skipped.
func TestEMDumpBits(t *testing.T) {
	path := os.Getenv("EM_DUMP")
	if path == "" {
		t.Skip("EM_DUMP not set")
	}
	defer func(u, c bool) { kernels.EMUseAVX512, kernels.EMUseC, emWant512 = u, c, false }(kernels.EMUseAVX512, kernels.EMUseC)
	var lines []string
	for i, c := range append(emBitCases(), emCCases()...) {
		for _, level := range []string{"go", "avx2", "avx512"} {
			useC := level != "go"
			kernels.EMUseAVX512, emWant512 = level == "avx512", level == "avx512"
			if useC && (!kernels.EMCAvailable() || (level == "avx512" && !kernels.EMAVX512())) {
				continue
			}
			res := emCRun(t, c, Float32, useC, 2)
			names := make([]string, 0, len(res))
			for name := range res {
				names = append(names, name)
			}
			sort.Strings(names)
			for _, name := range names {
				h := sha256.New()
				for _, x := range res[name] {
					b := math.Float32bits(float32(x))
					h.Write([]byte{byte(b), byte(b >> 8), byte(b >> 16), byte(b >> 24)})
				}
				lines = append(lines, fmt.Sprintf("%d %v %s %s %x", i, c, level, name, h.Sum(nil)[:12]))
			}
		}
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, l := range lines {
		fmt.Fprintln(f, l)
	}
}
