package postgressim

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/adapters/servers/postgres"
	"github.com/lockprover/lockprover/internal/quick"
	"pgregory.net/rapid"
)

// Session locks are exclusive between sessions and re-entrant, counted,
// within one; unlock of a key not held says false.
func TestLocks(t *testing.T) {
	s := New()
	a, b := s.Open(0), s.Open(0)
	check := func(what string, got bool, err error, want bool) {
		t.Helper()
		if err != nil || got != want {
			t.Fatalf("%s: %v, %v; want %v", what, got, err, want)
		}
	}
	got, err := s.TryLock(a, 7)
	check("a takes 7", got, err, true)
	got, err = s.TryLock(b, 7)
	check("b takes 7 that a holds", got, err, false)
	got, err = s.TryLock(a, 7)
	check("a takes 7 again", got, err, true)
	got, err = s.Unlock(b, 7)
	check("b unlocks 7 that a holds", got, err, false)
	got, err = s.Unlock(a, 7)
	check("a unlocks 7 once", got, err, true)
	got, err = s.TryLock(b, 7)
	check("b takes 7, a still holding it once", got, err, false)
	got, err = s.Unlock(a, 7)
	check("a unlocks 7 twice", got, err, true)
	got, err = s.Holds(a, 7)
	check("a holds 7 after two unlocks", got, err, false)
	got, err = s.TryLock(b, 7)
	check("b takes 7 once a let go", got, err, true)
}

// A session idle past its timeout, terminated, or on a restarted server
// ends and frees its locks; its next statement says why.
func TestSessionsEnd(t *testing.T) {
	s := New()
	idle, other, victim := s.Open(100*time.Millisecond), s.Open(0), s.Open(0)
	s.TryLock(idle, 1)
	s.TryLock(victim, 2)
	s.Sleep(100 * time.Millisecond)
	if s.Holder(1) != idle {
		t.Fatal("a session idle exactly its timeout ended")
	}
	s.Sleep(time.Millisecond)
	if s.Holder(1) != 0 {
		t.Fatal("a session idle past its timeout still holds its lock")
	}
	if _, err := s.TryLock(idle, 1); !errors.Is(err, ErrIdle) {
		t.Fatalf("the idle session's statement: %v, want ErrIdle", err)
	}
	if ok, err := s.Terminate(other, victim); !ok || err != nil {
		t.Fatalf("terminate: %v, %v", ok, err)
	}
	if s.Holder(2) != 0 {
		t.Fatal("a terminated session still holds its lock")
	}
	if _, err := s.Holds(victim, 2); !errors.Is(err, ErrTerminated) {
		t.Fatalf("the terminated session's statement: %v, want ErrTerminated", err)
	}
	if ok, _ := s.Terminate(other, victim); ok {
		t.Fatal("terminating an ended session said true")
	}
	s.TryLock(other, 3)
	s.Restart()
	if _, err := s.TryLock(other, 3); !errors.Is(err, ErrTerminated) || s.Holder(3) != 0 {
		t.Fatalf("after a restart: %v, holder %d", err, s.Holder(3))
	}
}

// The same steps give the same answers, every time.
func TestDeterministic(t *testing.T) {
	run := func(steps []Step) string {
		s := New()
		out := ""
		pids := map[int]int{}
		for _, st := range steps {
			switch st.Op {
			case "open":
				pids[st.S] = s.Open(Idle)
			case "sleep":
				s.Sleep(Long)
			case "try":
				ok, err := s.TryLock(pids[st.S], int64(st.Key))
				out += simAnswer(ok, err) + " "
			case "terminate":
				ok, err := s.Terminate(pids[st.S], pids[st.T])
				out += simAnswer(ok, err) + " "
			}
		}
		return out
	}
	rapid.Check(t, func(rt *rapid.T) {
		steps := Steps().Draw(rt, "steps")
		if a, b := run(steps), run(steps); a != b {
			rt.Fatalf("two runs of the same steps: %q and %q", a, b)
		}
	})
}

// TestDifferential holds the simulator to a private PostgreSQL: drawn
// sequences (LOCKPROVER_PG_SEQUENCES of them, default 40; seed
// LOCKPROVER_PG_SEED, default 1; as lockprover conform --kind pg-advisory
// draws them) must get the same answers on both.
//
// A sequence whose statements took longer than Slack three times is
// unjudged: how many are depends on the machine's load (1 of 40 at a load
// of 8, more beside the whole suite), not on the simulator. So the test
// judges at least nine in ten of its count, drawing the missing ones from
// the next seeds (seed+1, seed+2, ...) rather than failing a busy machine;
// only a machine on which ten rounds judge fewer fails it, as one too slow
// for the test's margins. Unjudged runs are not the only way load shows
// (see the report of issue 55 on differential.go's short sleeps).
func TestDifferential(t *testing.T) {
	quick.Skip(t, "a private PostgreSQL server")
	n, seed := envInt(t, "LOCKPROVER_PG_SEQUENCES", 40), envInt(t, "LOCKPROVER_PG_SEED", 1)
	// A bound for a wedged start, not a measure (initdb takes seconds).
	x, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	srv, err := postgres.StartPrivate(x, t.TempDir())
	if errors.Is(err, postgres.ErrNoServer) || errors.Is(err, postgres.ErrNoUser) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	start := time.Now()
	want := n - n/10
	judged, drawn := 0, 0
	for round := 0; judged < want; round++ {
		if round == 10 {
			t.Fatalf("%d of %d sequences judged in %d rounds: the machine is too slow for this test's margins", judged, drawn, round)
		}
		count := n
		if round > 0 {
			count = want - judged
		}
		var out strings.Builder
		rep, err := Conform(t.Context(), srv.URL(), count, uint64(seed+round), &out)
		t.Logf("seed %d, in %v:\n%s", seed+round, time.Since(start).Round(time.Millisecond), out.String())
		if err != nil {
			t.Fatal(err)
		}
		if rep.Found != nil {
			t.Fatal(rep.Found)
		}
		judged, drawn = judged+rep.Agreed, drawn+rep.Sequences
	}
}

func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive number", name, v)
	}
	return n
}
