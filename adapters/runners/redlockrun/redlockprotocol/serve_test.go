package redlockprotocol

import (
	"context"
	"fmt"
	"testing"
	"time"

	ref "github.com/lockprover/lockprover/model/redlock"
)

// A priority acquire that was stolen while it waited for its victims, or
// outwaited by them, certainly holds nothing: the served reference says
// so with a definite error (a fail in the history, as the in-process
// runner records it), never as an unknown outcome; one that reached too
// few servers stays unknown.
func TestGrantFailuresDefinite(t *testing.T) {
	for _, tc := range []struct {
		err      error
		code     string
		definite bool
	}{
		{ref.ErrStolen, "stolen", true},
		{ref.ErrOutwaited, "outwaited", true},
		{ref.ErrNoQuorum, "redis", false},
	} {
		s := &server{leases: map[string]ref.Lease{}}
		s.acquire = func(context.Context, string, time.Duration, int64) (ref.Lease, error) {
			return ref.Lease{}, fmt.Errorf("%w: acquire of lp", tc.err)
		}
		r := s.grant(context.Background(), time.Second, 2)
		definite, _ := r["definite"].(bool)
		if r["type"] != "error" || r["code"] != tc.code || definite != tc.definite {
			t.Errorf("%v: reply %v, want an error with code %q, definite %v", tc.err, r, tc.code, tc.definite)
		}
	}
}
