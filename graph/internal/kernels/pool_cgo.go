//go:build cgo && !purego

package kernels

// #cgo CFLAGS: -O3 -I${SRCDIR}
// #cgo LDFLAGS: -lpthread
// #include <kernels.h>
import "C"

import (
	"sync/atomic"
	"unsafe"
)

// poolSlots is how many helpers have a slot in pool.c, through which
// shared float32 products reach them without a goroutine hand-over
// (poll, poolServe); helpers past it (GOMAXPROCS above 65) take only
// Go jobs, and park in Go.
const poolSlots = C.PF_POOL_SLOTS

// poolServe is helper i's sleep, once it has polled in vain: in C, where
// a product's caller wakes it and it runs its share without returning to
// Go; it returns when a Go job has been posted to it (poolNotify).
func poolServe(i int) { C.pf_pool_serve(C.int(i)) }

// poolWords is slot i's words in pool.c: the state of its product share,
// gojob and sleeping.
func poolWords(i int) *[3]int32 { return (*[3]int32)(unsafe.Pointer(C.pf_pool_slot(C.int(i)))) }

// poolTake runs the product share posted to slot i, if there is one.
func poolTake(i int) bool { return C.pf_pool_take(C.int(i)) != 0 }

// poolNotify tells helper i, waiting in poolServe, that a Go job is
// posted: the slot's gojob word, then a wake-up if it sleeps. The store
// comes before the read of sleeping, and pool.c sets sleeping before it
// reads gojob (both sequentially consistent), so a sleeping helper is
// always woken.
func poolNotify(i int) {
	w := poolWords(i)
	atomic.StoreInt32(&w[1], 1)
	if atomic.LoadInt32(&w[2]) != 0 {
		C.pf_pool_wake()
	}
}
