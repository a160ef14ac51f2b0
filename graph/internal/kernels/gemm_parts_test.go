//go:build cgo && !purego

package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"
)

// TestGemmPartsIsGemmAndColSum: GemmParts32's weight gradients and column
// sums (pf_sgemm_par's mode 3) are, bit for bit, one Gemm a part on one
// thread (pf_sgemm) and vec.c's pf_colsum over the whole of g, on the
// AVX2 and AVX-512 kernels, on 1–3 workers, with parts of widths around
// the panels (16, 32) and their multiples, rows below, at and past the
// micro-kernels' 4, 8 and 12, and k at, just past and well past a pass
// of 128. Values past the outputs' ends stay untouched.
func TestGemmPartsIsGemmAndColSum(t *testing.T) {
	levels := gemmLevels(t)
	t.Parallel()
	rng := rand.New(rand.NewPCG(21, 23))
	checked := 0
	for _, m := range []int{1, 5, 12, 64, 70} {
		for _, k := range []int{32, 33, 127, 129, 300} {
			for _, d := range []int{16, 17, 32, 48, 64, 100} {
				for _, parts := range []int{1, 2, 3} {
					for _, level := range levels {
						for _, workers := range []int{1, 2, 3} {
							comparePartsRef(t, rng, level, workers, m, k, parts, d, (m+k+d+parts+workers)%2 == 0)
							checked++
						}
					}
				}
			}
		}
	}
	t.Logf("%d part products bit-identical to a Gemm a part and pf_colsum", checked)
}

// comparePartsRef runs gemmPartsAt and the reference and fails unless they
// agree bit for bit; withDB asks for the column sums too. g holds a -0 and
// both signs of large values so that the sums' rounding and sign show.
func comparePartsRef(t *testing.T, rng *rand.Rand, level, workers, m, k, parts, d int, withDB bool) {
	t.Helper()
	n := parts * d
	x := make([]float32, k*m)
	g := make([]float32, k*n)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	for i := range g {
		g[i] = float32(rng.NormFloat64() * math.Exp(4*rng.Float64()))
	}
	g[0] = float32(math.Copysign(0, -1))
	const pad = 7
	dw := make([]float32, parts*m*d+pad)
	want := make([]float32, parts*m*d+pad)
	for i := range dw {
		dw[i] = float32(math.NaN()) // β = 0: never read
		want[i] = dw[i]
	}
	var db, wantDB []float32
	if withDB {
		db = make([]float32, n+pad)
		wantDB = make([]float32, n+pad)
		for i := range db {
			db[i] = 42
			wantDB[i] = 42
		}
		pfColSum(g, k, n, wantDB)
	}
	for q := range parts {
		gemmKernelAt[float32](cInt(level), true, false, m, d, k, 1, x, m, g[q*d:], n, 0, want[q*m*d:], d, nil)
	}
	gemmPartsAt(cInt(level), workers, m, k, parts, d, x, g, dw, db)
	for i := range want {
		if math.Float32bits(dw[i]) != math.Float32bits(want[i]) {
			t.Fatalf("level %d, %d workers, m %d k %d parts %d d %d: dw[%d] = %v, want %v", level, workers, m, k, parts, d, i, dw[i], want[i])
		}
	}
	for i := range wantDB {
		if math.Float32bits(db[i]) != math.Float32bits(wantDB[i]) {
			t.Fatalf("level %d, %d workers, m %d k %d parts %d d %d: db[%d] = %v, want %v", level, workers, m, k, parts, d, i, db[i], wantDB[i])
		}
	}
}

// TestGemmPartsDeclines: below the packed path's sizes (k < 32, d < 16)
// GemmParts32 computes nothing and says so, leaving the caller's Gemm and
// column sums; a nil db is left nil.
func TestGemmPartsDeclines(t *testing.T) {
	x, g := make([]float32, 64*64), make([]float32, 64*64)
	for _, c := range [][4]int{{64, 0, 1, 64}, {64, 1, 1, 64}, {64, 31, 2, 32}, {64, 64, 4, 15}, {0, 64, 1, 64}} {
		dw := []float32{7}
		dw = append(dw, make([]float32, c[0]*c[2]*c[3])...)[1:]
		if GemmParts32(c[0], c[1], c[2], c[3], x, g, dw, nil) {
			t.Errorf("m %d k %d parts %d d %d: took the packed parts path", c[0], c[1], c[2], c[3])
		}
	}
}

// TestGemmPartsThreadsSameBits: GOMAXPROCS 1 and 2 give the same bits
// through GemmParts32's own choice of threads, at the Set Transformer's
// [q k v] gradient shape.
func TestGemmPartsThreadsSameBits(t *testing.T) {
	if hasAVX2() == 0 {
		t.Skip("no AVX2 on this CPU")
	}
	rng := rand.New(rand.NewPCG(5, 9))
	m, k, parts, d := 64, 1024, 3, 64
	x, g := make([]float32, k*m), make([]float32, k*parts*d)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	for i := range g {
		g[i] = float32(rng.NormFloat64())
	}
	run := func(procs int) ([]float32, []float32) {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
		dw, db := make([]float32, parts*m*d), make([]float32, parts*d)
		if !GemmParts32(m, k, parts, d, x, g, dw, db) {
			t.Fatal("declined")
		}
		return dw, db
	}
	dw1, db1 := run(1)
	dw2, db2 := run(2)
	for i := range dw1 {
		if math.Float32bits(dw1[i]) != math.Float32bits(dw2[i]) {
			t.Fatalf("dw[%d]: %v on one thread, %v on two", i, dw1[i], dw2[i])
		}
	}
	for i := range db1 {
		if math.Float32bits(db1[i]) != math.Float32bits(db2[i]) {
			t.Fatalf("db[%d]: %v on one thread, %v on two", i, db1[i], db2[i])
		}
	}
}

// BenchmarkGemmParts times linear-concat's weight and bias gradients at
// the Set Transformer's shapes (din 64, parts of 64, 1024 or 2048 rows)
// made by GemmParts32 against the way before it, one Gemm a part and
// ColSum32, alternating the two every iteration so that the machine's
// drift and other processes fall on both alike. It reports each one's
// median and best time in µs and the ratio of the medians (parts over
// separate).
func BenchmarkGemmParts(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, c := range []struct{ m, k, parts, d int }{{64, 1024, 3, 64}, {64, 2048, 3, 64}, {64, 2048, 2, 64}, {64, 1024, 1, 64}, {64, 1024, 1, 256}} {
		n := c.parts * c.d
		x, g := make([]float32, c.k*c.m), make([]float32, c.k*n)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		for i := range g {
			g[i] = float32(rng.NormFloat64())
		}
		dw, db := make([]float32, c.parts*c.m*c.d), make([]float32, n)
		b.Run(fmt.Sprintf("%dx%dx%dx%d", c.m, c.k, c.parts, c.d), func(b *testing.B) {
			var parts, sep []time.Duration
			for i := range b.N {
				t0 := time.Now()
				if i%2 == 0 {
					GemmParts32(c.m, c.k, c.parts, c.d, x, g, dw, db)
					parts = append(parts, time.Since(t0))
					continue
				}
				for q := range c.parts {
					Gemm(true, false, c.m, c.d, c.k, 1, x, c.m, g[q*c.d:], n, 0, dw[q*c.m*c.d:], c.d)
				}
				ColSum32(g, db)
				sep = append(sep, time.Since(t0))
			}
			if len(sep) == 0 {
				return
			}
			slices.Sort(parts)
			slices.Sort(sep)
			us := func(d time.Duration) float64 { return d.Seconds() * 1e6 }
			b.ReportMetric(us(parts[len(parts)/2]), "parts-median-µs")
			b.ReportMetric(us(parts[0]), "parts-best-µs")
			b.ReportMetric(us(sep[len(sep)/2]), "separate-median-µs")
			b.ReportMetric(us(sep[0]), "separate-best-µs")
			b.ReportMetric(parts[len(parts)/2].Seconds()/sep[len(sep)/2].Seconds(), "median-ratio")
		})
	}
}
