package upstream_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/adapters/runners/pgadvisoryrun/pgadvisoryprotocol"
	"github.com/lockprover/lockprover/adapters/servers/postgres"
	"github.com/lockprover/lockprover/internal/quick"
)

// goose's session locker (gooselock/go.mod's version of
// github.com/pressly/goose/v3), on a connection as goose's Provider takes
// it, passes every check of validate-impl --kind pg-advisory: a second
// client is refused while the first holds the lock, a released lock is
// free, and a holder whose session the server ended fails its next
// statement (the adapter's refresh) while another takes the lock.
func TestGooseLockAdapter(t *testing.T) {
	quick.Skip(t, "a private PostgreSQL server")
	t.Parallel()
	bin := buildModule(t, "gooselock", ".", "", "")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out strings.Builder
	_, err := pgadvisoryprotocol.Validate(ctx, bin, time.Minute, &out)
	if errors.Is(err, postgres.ErrNoServer) || errors.Is(err, postgres.ErrNoUser) {
		t.Skipf("needs PostgreSQL (apt-get install postgresql): %v", err)
	}
	if err != nil {
		t.Fatalf("validate-impl: %v", err)
	}
	t.Logf("validate-impl --kind pg-advisory --impl %q:\n%s", bin, out.String())
	wantFailures(t, out.String())
	if !strings.Contains(out.String(), "ok    c1's refresh once the server ended its session is not ok") {
		t.Error("the check of a session the server ended did not run, or did not pass")
	}
}
