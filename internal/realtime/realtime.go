// Package realtime holds what code that runs on real servers, in real
// time, needs below every layer that does: a sleep that ends early when
// its context is done.
package realtime

import (
	"context"
	"time"
)

// Sleep lets d pass, or less if ctx is done first, and then returns ctx's
// error: a sleep an interrupt cuts short.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
