package realtime_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockprover/lockprover/internal/realtime"
)

// TestSleep checks that a sleep lasts its time, and that a done context
// ends it at once with the context's error.
func TestSleep(t *testing.T) {
	start := time.Now()
	if err := realtime.Sleep(context.Background(), 20*time.Millisecond); err != nil || time.Since(start) < 20*time.Millisecond {
		t.Errorf("Sleep(20ms) = %v after %v", err, time.Since(start))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start = time.Now()
	if err := realtime.Sleep(ctx, 10*time.Second); !errors.Is(err, context.Canceled) || time.Since(start) > 5*time.Second {
		t.Errorf("Sleep on a done context = %v after %v", err, time.Since(start))
	}
}
