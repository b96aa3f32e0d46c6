package redlockprotocol

import (
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/families/redlock"
)

// init says a semaphore's limit where it is above 1, and nothing of it
// for a mutex (what every Redlock adapter serves); the priority Redlock
// has none.
func TestInitSaysTheLimit(t *testing.T) {
	s := redlock.Session{Key: "lp", Addrs: []string{"127.0.0.1:1"}, TTL: time.Second}
	for _, limit := range []int{0, 1, 3} {
		s.Limit = limit
		init, _, _, err := initRequest("c1", s)
		if err != nil {
			t.Fatalf("limit %d: %v", limit, err)
		}
		got, ok := init["limit"]
		if limit > 1 && got != limit || limit <= 1 && ok {
			t.Errorf("limit %d: init %v", limit, init)
		}
	}
	s.Limit, s.Priority = 2, true
	if _, _, _, err := initRequest("c1", s); err == nil || !strings.Contains(err.Error(), "mutex") {
		t.Errorf("a priority session of limit 2: %v, want an error", err)
	}
}
