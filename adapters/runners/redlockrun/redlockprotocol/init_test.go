package redlockprotocol

import (
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/adapters/runners/redlockrun"
)

// init says a semaphore's limit where it is above 1, and nothing of it
// for a mutex (what every Redlock adapter serves); the priority Redlock
// has none.
func TestInitSaysTheLimit(t *testing.T) {
	s := redlockrun.Session{Key: "lp", Addrs: []string{"127.0.0.1:1"}, TTL: time.Second}
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

// The reference served over the protocol is a mutex: an init that says a
// limit above 1 is refused (unsupported, definite), one of limit 1 or none
// served.
func TestServedReferenceRefusesALimit(t *testing.T) {
	in := strings.Join([]string{
		`{"id":1,"type":"init","client":"c1","lock":"redlock","name":"lp","addrs":["127.0.0.1:1"],"ttl_ms":1000,"limit":2}`,
		`{"id":2,"type":"init","client":"c1","lock":"redlock","name":"lp","addrs":["127.0.0.1:1"],"ttl_ms":1000,"limit":1}`,
	}, "\n") + "\n"
	var out strings.Builder
	if err := Serve(strings.NewReader(in), &out, ServeOptions{}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], `"code":"unsupported"`) || !strings.Contains(lines[0], `"definite":true`) || !strings.Contains(lines[1], `"init_ok"`) {
		t.Errorf("replies:\n%s\nwant limit 2 refused as unsupported, limit 1 served", out.String())
	}
}
