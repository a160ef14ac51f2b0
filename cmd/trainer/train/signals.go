package train

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// WithSignals returns a context that is done on Ctrl-C (SIGINT) or
// SIGTERM, and a function that stops listening. A Loop run with it saves
// a checkpoint and returns nil when a signal arrives, so a command exits
// with status 0 and the run resumes exactly.
func WithSignals(ctx context.Context) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
}
