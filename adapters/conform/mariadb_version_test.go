package conform

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/adapters/host/debroot"
	"github.com/lockprover/lockprover/adapters/servers/mariadb"
	"github.com/lockprover/lockprover/adapters/servers/versions"
	"github.com/lockprover/lockprover/internal/quick"
	"github.com/lockprover/lockprover/sim/mariadbsim"
)

// bypassSeq is the divergence the differential found on MariaDB 11.8
// (seed 541118, shrunk): c1's duplicate insert leaves it an S lock on
// slot 0, c0's refresh of slot 0 waits for it, and c1 then looks for a
// free slot with FOR UPDATE SKIP LOCKED.
var bypassSeq = DBSeq{Design: "row-per-slot", ClientClock: true, Conns: 2, Ops: []DBOp{
	{Conn: 0, Stmt: "createSlots"},
	{Conn: 0, Stmt: opBegin},
	{Conn: 0, Stmt: "insertSlots", Args: []any{"k"}},
	{Conn: 0, Stmt: "COMMIT"},
	{Conn: 1, Stmt: opBegin},
	{Conn: 1, Stmt: "insertSlots", Args: []any{"k", "k"}},
	{Conn: 0, Stmt: "refreshSlot", Args: []any{clientTime(0), int64(250000), "k", int64(0), "0:a", clientTime(0)}},
	{Conn: 1, Stmt: "pickSlot", Args: []any{"k", clientTime(0)}},
}}

// pickOf is what the sequence's pickSlot (its step 8) came out as.
func pickOf(t *testing.T, steps []DBStep) string {
	t.Helper()
	for _, s := range steps {
		if s.Label == "8" {
			return s.Outcome
		}
	}
	t.Fatalf("no step 8 in %v", steps)
	return ""
}

// MariaDB 10.11 makes c1's pickSlot wait behind c0's waiting X request
// on slot 0, which SKIP LOCKED passes over: no slot. 11.8 lets c1, which
// holds S there and for which c0 waits, bypass that request (MDEV-34877):
// slot 0. mariadbsim models each by its Version, 10.11 by default; and
// each real server, where its root is made, does what its model does.
func TestMariaDBLockBypassByVersion(t *testing.T) {
	for _, c := range []struct{ model, want string }{{"", "[]"}, {"11.8", "[[0]]"}} {
		steps, err := runSimDB(bypassSeq, "t_", c.model, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := pickOf(t, steps); got != c.want {
			t.Errorf("mariadbsim as %q: pickSlot -> %s, want %s", c.model, got, c.want)
		}
	}
	for _, v := range versions.Of("mariadb") {
		t.Run(v.Name, func(t *testing.T) {
			quick.Skip(t, "a private MariaDB "+v.Name)
			if !v.Made() {
				t.Skipf("%s is not made here: lockprover servers --make mariadb-%s", v, v.Name)
			}
			// A bound for a wedged start, not a measure.
			x, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
			defer cancel()
			s, err := mariadb.StartVersion(x, t.TempDir(), v, nil)
			if errors.Is(err, debroot.ErrUnavailable) || errors.Is(err, mariadb.ErrNoServer) {
				t.Skip(err)
			}
			if err != nil {
				t.Fatal(err)
			}
			defer s.Stop()
			tg, err := openMaria(x, s.DSN())
			if err != nil {
				t.Fatal(err)
			}
			defer tg.close()
			real, err := tg.run(x, bypassSeq, tg.nextPrefix())
			if err != nil {
				t.Fatal(err)
			}
			model := mariadbsim.ModelOf(tg.version)
			sim, err := runSimDB(bypassSeq, "t_", model, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := pickOf(t, real), pickOf(t, sim); got != want {
				t.Errorf("MariaDB %s: pickSlot -> %s; mariadbsim as %q: %s", tg.version, got, model, want)
			}
			if !strings.HasPrefix(tg.version, v.Name+".") {
				t.Errorf("VERSION() %s, want %s", tg.version, v.Name)
			}
		})
	}
}
