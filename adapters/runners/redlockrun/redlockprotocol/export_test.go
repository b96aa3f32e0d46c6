package redlockprotocol

import (
	"context"
	"io"
	"time"

	"github.com/lockprover/lockprover/adapters/servers/redis"
)

// ValidatePriorityHolding is Validate of a priority Redlock whose steal
// check keeps its victim stopped for up to hold, not stealHold.
func ValidatePriorityHolding(ctx context.Context, command string, hold time.Duration, out io.Writer) (bool, error) {
	return validateOn(ctx, command, time.Minute, redis.Options{}, out, true, hold)
}
