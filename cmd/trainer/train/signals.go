package train

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// WithSignals returns a context that is done on Ctrl-C (SIGINT) or
// SIGTERM, and a function that stops listening. A Loop run with it saves
// a checkpoint and returns nil when a signal arrives, so a command exits
// with status 0 and the run resumes exactly. Interruption tells which
// signal ended the context. Until stop is called, later signals are
// caught too (and ignored): the first one has asked the run to stop.
func WithSignals(parent context.Context) (ctx context.Context, stop context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	stopped := make(chan struct{})
	go func() {
		select {
		case sig := <-ch:
			cancel(&signalCause{sig})
		case <-stopped:
		case <-ctx.Done():
		}
	}()
	var once sync.Once
	return ctx, func() {
		once.Do(func() {
			signal.Stop(ch)
			close(stopped)
			cancel(context.Canceled)
		})
	}
}

// signalCause is the cause of a context that WithSignals ended.
type signalCause struct{ sig os.Signal }

func (c *signalCause) Error() string { return "received " + SignalName(c.sig) }

// Interruption returns the signal that ended a context of WithSignals,
// or nil if none did.
func Interruption(ctx context.Context) os.Signal {
	var c *signalCause
	if errors.As(context.Cause(ctx), &c) {
		return c.sig
	}
	return nil
}

// SignalName is a signal's conventional name: SIGINT, SIGTERM.
func SignalName(sig os.Signal) string {
	switch sig {
	case os.Interrupt:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	case nil:
		return "no signal"
	}
	return sig.String()
}
