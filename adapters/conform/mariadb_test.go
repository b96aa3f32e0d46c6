package conform

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The MariaDB tests run against the MariaDB that $LOCKPROVER_MYSQL_DSN
// names (by default mariadb.DefaultDSN) and skip without one.

// mariaRuns is the test's budget: LOCKPROVER_CONFORM_DB_RUNS overrides it.
func mariaRuns(t *testing.T, n int) int {
	if testing.Short() {
		n /= 5
	}
	if s := os.Getenv("LOCKPROVER_CONFORM_DB_RUNS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("LOCKPROVER_CONFORM_DB_RUNS=%q: %v", s, err)
		}
		n = v
	}
	return n
}

// differential runs o, skipping the test without a MariaDB, and checks
// that the run left no table behind.
func differential(t *testing.T, o MariaDBOptions) *MariaDBReport {
	t.Helper()
	rep, err := MariaDBDifferential(context.Background(), o)
	if errors.Is(err, ErrNoMariaDB) {
		t.Skipf("no MariaDB (set LOCKPROVER_MYSQL_DSN): %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	noTablesLeft(t, rep.Prefix)
	return rep
}

// noTablesLeft fails t if a table of the database starts with prefix.
func noTablesLeft(t *testing.T, prefix string) {
	t.Helper()
	if !strings.HasPrefix(prefix, "lpdb_") {
		t.Fatalf("table prefix %q", prefix)
	}
	db, err := sql.Open("mysql", mariaDSN(""))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rs, err := db.Query("SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name LIKE ?",
		strings.ReplaceAll(prefix, "_", `\_`)+"%")
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	var left []string
	for rs.Next() {
		var name string
		rs.Scan(&name)
		left = append(left, name)
	}
	if len(left) > 0 {
		t.Errorf("tables left behind: %v", left)
	}
}

// MariaDB, as the CLI runs it, says what it runs and what it found, and
// leaves no table behind; nor does a run cut short.
func TestMariaDBEntry(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	rep, err := MariaDB(context.Background(), "", 20, 7, &out)
	if errors.Is(err, ErrNoMariaDB) {
		t.Skipf("no MariaDB (set LOCKPROVER_MYSQL_DSN): %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", out.String())
	if rep.Runs != 20 || rep.Found != nil || !strings.Contains(out.String(), "20 sequences") || !strings.Contains(out.String(), "no divergence") {
		t.Errorf("report %+v, output:\n%s", rep, out.String())
	}
	noTablesLeft(t, rep.Prefix)

	for _, d := range []time.Duration{time.Millisecond, 250 * time.Millisecond, 480 * time.Millisecond, 730 * time.Millisecond} {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		out.Reset()
		rep, err = MariaDB(ctx, "", 1000, 7, &out)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(out.String(), "interrupted after") || errors.Is(err, ErrNoMariaDB) {
			t.Errorf("cut short after %v: %v, output:\n%s", d, err, out.String())
		}
		if rep.Prefix != "" { // "" where the deadline came before MariaDB answered: nothing made
			noTablesLeft(t, rep.Prefix)
		}
	}
}

// mariadbsim and MariaDB answer drawn sequences of dbsem's statements alike.
func TestMariaDBDifferential(t *testing.T) {
	t.Parallel()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("LOCKPROVER_CONFORM_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Attr("seed", strconv.FormatUint(seed, 10))
	rep := differential(t, MariaDBOptions{Runs: mariaRuns(t, 100), Seed: seed, Shrink: mariaShrink()})
	t.Logf("seed %d, MariaDB %s: %s", seed, rep.Server, rep)
	if rep.Found != nil {
		t.Fatalf("divergence (seed %d):\n%s", seed, rep.Found)
	}
	// About one sequence in two makes a lock wait, one in forty ends one
	// in a deadlock.
	if rep.Waits < rep.Runs/10 || rep.Runs >= 200 && rep.Deadlocks == 0 {
		t.Errorf("%d lock waits and %d deadlocks in %d sequences: the sequences do not make locks wait", rep.Waits, rep.Deadlocks, rep.Runs)
	}
}

func mariaShrink() time.Duration {
	if s := os.Getenv("LOCKPROVER_CONFORM_DB_SHRINK"); s != "" {
		d, _ := time.ParseDuration(s)
		return d
	}
	return 10 * time.Second
}

// A wrong simulator is caught, and the divergence shrinks to the few steps
// that show it: mariadbsim is sent, in place of a statement, one of dbsem's
// defects' variants of it.
func TestMariaDBCatchesAWrongSimulator(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		seed     uint64 // one that draws a sequence showing it early
		mutant   func(DBOp) DBOp
		stmts    []string // the step that diverges is one of these
		maxSteps int      // at most this many steps in the minimal sequence
	}{
		// Release ignores expiry: needs a token row that has expired.
		{"release after expiry", 3, func(o DBOp) DBOp {
			if o.Stmt == "releaseToken" {
				return DBOp{Conn: o.Conn, Stmt: "releaseTokenAE", Args: o.Args[:2]}
			}
			return o
		}, []string{"releaseToken"}, 4},
		// SKIP LOCKED neither locks nor skips: needs a slot row, and two
		// transactions picking it (the second, which MariaDB makes skip
		// the row, may pick below a max).
		{"pick without locking", 1, func(o DBOp) DBOp {
			if o.Stmt == "pickSlot" {
				o.Stmt = "peekSlot"
			}
			return o
		}, []string{"pickSlot", "pickSlotMixed"}, 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// Minimal in steps whatever the load: trim takes steps out
			// until none can go (its budget is runs, not time).
			rep := differential(t, MariaDBOptions{Runs: 1000, Seed: tc.seed, Shrink: 10 * time.Second, simMutant: tc.mutant})
			d := rep.Found
			if d == nil {
				t.Fatalf("no divergence in %d sequences", rep.Runs)
			}
			t.Logf("after %d sequences, %v:\n%s", rep.Runs, rep.Elapsed.Round(time.Millisecond), d)
			if got := d.Real[d.First].Op.Stmt; !slices.Contains(tc.stmts, got) {
				t.Errorf("the first step that differs is a %s, want one of %v", got, tc.stmts)
			}
			if len(d.Seq.Ops) > tc.maxSteps {
				t.Errorf("not minimal: %d steps", len(d.Seq.Ops))
			}
			if d.Replays == 0 || d.Reproduced != d.Replays {
				t.Errorf("reproduced in %d of %d replays", d.Reproduced, d.Replays)
			}
		})
	}
}

// A statement that waits is observed as waiting, its outcome collected in
// the step it ends in; the connection's next step is held back until
// then; the end rolls back what is open, and the probes read what is
// left. The same sequence gives the same steps.
func TestRunSimDB(t *testing.T) {
	seq := DBSeq{Design: "master-row", ClientClock: true, Conns: 2, Ops: []DBOp{
		{Stmt: "createKeys"},
		{Stmt: "createTokens"},
		{Stmt: "insertKey", Args: []any{"k", int64(1), "master-row"}},
		{Conn: 0, Stmt: opBegin},
		{Conn: 0, Stmt: "lockMaster", Args: []any{"k"}},
		{Conn: 1, Stmt: opBegin},
		{Conn: 1, Stmt: "lockMaster", Args: []any{"k"}},
		{Conn: 1, Stmt: "countLive", Args: []any{"k", clientTime(0)}},
		{Conn: 0, Stmt: "insertToken", Args: []any{"k", "t1", clientTime(0), int64(1_000_000), int64(0)}},
		{Conn: 0, Stmt: "COMMIT"},
		{Conn: 0, Stmt: "deleteExpired", Args: []any{"k", clientTime(0)}},
	}}
	steps, err := RunSimDB(seq, "t_")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range steps {
		got = append(got, s.String())
	}
	want := []string{
		`1 c0 createKeys -> n=0 id=0`,
		`2 c0 createTokens -> n=0 id=0`,
		`3 c0 insertKey "k" 1 "master-row" -> n=1 id=0`,
		`4 c0 begin -> ok`,
		`5 c0 lockMaster "k" -> [[1]]`,
		`6 c1 begin -> ok`,
		`7 c1 lockMaster "k" -> waits; ended at 10: [[1]]`,
		`9 c0 insertToken "k" "t1" t+0s 1000000 0 -> n=1 id=0`,
		`10 c0 COMMIT -> n=0 id=0`,
		`8 c1 countLive "k" t+0s -> [[1]]`,
		`11 c0 deleteExpired "k" t+0s -> skipped: not in a transaction`,
		`end1 c1 ROLLBACK -> n=0 id=0`,
	}
	if len(got) < len(want) || strings.Join(got[:len(want)], "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n\t%s\nwant\n\t%s", strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	}
	for _, s := range got[len(want):] {
		if !strings.HasPrefix(s, "probe c0 ") {
			t.Errorf("after the end: %s", s)
		}
	}
	again, err := RunSimDB(seq, "t_")
	if err != nil || fmt.Sprint(again) != fmt.Sprint(steps) {
		t.Errorf("the same sequence ran differently (%v):\n%v\n%v", err, again, steps)
	}
}

// late is a context whose deadline has passed while its timer has not run
// yet (a loaded machine): Err still nil.
type late struct{ context.Context }

func (late) Deadline() (time.Time, bool) { return time.Now().Add(-time.Millisecond), true }

// A run whose deadline has passed is interrupted, not failed for want of
// MariaDB, even before ctx says so: a dial bounded by that deadline fails
// at it ("i/o timeout"), and the fifteenth clean clone's TestMariaDBEntry
// then read a 1 ms deadline as no usable MariaDB.
func TestEndedAtItsDeadline(t *testing.T) {
	if err := ended(late{context.Background()}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a passed deadline, Err nil: %v, want DeadlineExceeded", err)
	}
	if err := ended(context.Background()); err != nil {
		t.Errorf("no deadline: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := ended(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

// Two statements waiting on one row, freed by the same ROLLBACK, may
// finish either way round on MariaDB (seen beside a loaded suite, where
// c2's insert went first in every run of one sequence, and c1's release
// first in the three replays just after): mariadbsim runs them in
// InnoDB's grant order, or, given Wake, the other way, and the
// differential holds a racy MariaDB run to both.
func TestWakeOrderOfOneEvent(t *testing.T) {
	seq := DBSeq{Design: "master-row", ClientClock: true, Conns: 3, Ops: []DBOp{
		{Stmt: "createTokens"},
		{Conn: 0, Stmt: opBegin},
		{Conn: 0, Stmt: "insertToken", Args: []any{"k", "t1", clientTime(time.Second), int64(750_000), int64(1)}},
		{Conn: 1, Stmt: opBegin},
		{Conn: 1, Stmt: "releaseToken", Args: []any{"k", "t1", clientTime(1499999 * time.Microsecond)}},
		{Conn: 2, Stmt: "insertToken", Args: []any{"k", "t1", clientTime(250 * time.Millisecond), int64(2_000_000), int64(3)}},
		{Conn: 0, Stmt: "ROLLBACK"},
	}}
	release := func(wake func(int) int) string {
		steps, err := runSimDB(seq, "t_", "", nil, wake)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range steps {
			if s.Op.Stmt == "releaseToken" {
				return s.String()
			}
		}
		t.Fatalf("no release among %v", steps)
		return ""
	}
	for _, tc := range []struct {
		name string
		wake func(int) int
		want string
	}{
		{"InnoDB's grant order: the release finds nothing", nil, "waits; ended at 7: n=0"},
		{"the insert first: the release finds its row", lastFirst, "waits; ended at 7: n=1"},
	} {
		if got := release(tc.wake); !strings.Contains(got, tc.want) {
			t.Errorf("%s: %s, want %q", tc.name, got, tc.want)
		}
	}
}
