package kernels

import (
	"testing"
	"unsafe"
)

// TestEMTraceLast checks EMTraceLast's offsets against the parts
// CutTraceInto cuts, over iteration counts and sizes.
func TestEMTraceLast(t *testing.T) {
	for _, tk := range []int{0, 1, 2} {
		for _, tp := range []int{0, 1, 2} {
			for _, tv := range []int{0, 1, 3} {
				for _, sz := range [][4]int{{1, 1, 1, 1}, {16, 50, 8, 8}, {3, 5, 4, 2}} {
					s := EMSpec{KeyIters: tk, PropagateIters: tp, ValueIters: tv}
					n, m, d, dv := sz[0], sz[1], sz[2], sz[3]
					buf := make([]float32, EMTraceSize(s, n, m, d, dv))
					tr := CutTrace(s, n, m, d, dv, buf)
					off := func(x []float32) int {
						return int(uintptr(unsafe.Pointer(unsafe.SliceData(x)))-uintptr(unsafe.Pointer(&buf[0]))) / 4
					}
					w, r := EMTraceLast(s, n, m, d, dv)
					if w != off(tr.Wi[tv]) || r != off(tr.R[tv]) || len(tr.R[tv]) != n*dv || len(tr.Wi[tv]) != n*m {
						t.Errorf("Tk %d Tp %d Tv %d %v: offsets %d, %d; CutTrace's %d, %d", tk, tp, tv, sz, w, r, off(tr.Wi[tv]), off(tr.R[tv]))
					}
				}
			}
		}
	}
}
