package pgadvisoryrun

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/adapters/postgres"
	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/histories/verdict"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/internal/quick"
	"github.com/lockprover/lockprover/model"
	"github.com/lockprover/lockprover/model/lease"
	"pgregory.net/rapid"
)

// server starts one private server for the test, stopped at its end; it
// skips the test without PostgreSQL, or under -short.
func server(t *testing.T) *postgres.Server {
	t.Helper()
	quick.Skip(t, "a private PostgreSQL server")
	x, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := postgres.StartPrivate(x, t.TempDir())
	if errors.Is(err, postgres.ErrNoServer) || errors.Is(err, postgres.ErrNoUser) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Stop() })
	return s
}

// on runs f on the simulator (s nil), then on a private server (which
// -short, or a machine without PostgreSQL, skips).
func on(t *testing.T, f func(t *testing.T, s *postgres.Server)) {
	t.Run("sim", func(t *testing.T) { f(t, nil) })
	t.Run("postgres", func(t *testing.T) { f(t, server(t)) })
}

// run runs p on s (nil: the simulator) as c proves it and judges the history.
func runJudged(t *testing.T, s *postgres.Server, c Config, p *Plan) map[string]verdict.Verdict {
	t.Helper()
	if err := p.Validate(); err != nil {
		t.Fatalf("the test's plan: %v", err)
	}
	c.Server = s
	res, err := c.Run(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Evidence.Problems) > 0 {
		t.Errorf("problems: %v", res.Evidence.Problems)
	}
	rep := prover.Judge(res, model.Options{Family: []any{c.Judging("")}})
	out := map[string]verdict.Verdict{}
	for _, v := range rep.Verdicts {
		out[v.Property] = v
	}
	if t.Failed() || testing.Verbose() {
		var b strings.Builder
		histories.Write(&b, res.History)
		t.Logf("history:\n%s", b.String())
	}
	return out
}

func plan(ttl int, faults []Fault, clients ...[]lease.Step) *Plan {
	p := &Plan{Version: PlanVersion, Kind: Kind, Key: "lp", TTLMs: ttl, Clients: clients}
	p.Nemesis = faults
	return p
}

var (
	acq = lease.Step{Op: histories.Acquire}
	ref = lease.Step{Op: histories.Refresh}
	rel = lease.Step{Op: histories.Release}
)

func sleep(ms int) lease.Step { return lease.Step{Op: lease.Sleep, Ms: ms} }

// passes fails t if any property failed.
func passes(t *testing.T, vs map[string]verdict.Verdict) {
	t.Helper()
	if len(vs) == 0 {
		t.Fatal("no verdicts")
	}
	for _, v := range vs {
		if v.Status == verdict.Fail {
			t.Errorf("%s failed: %s", v.Property, v.Detail)
		}
	}
}

// want fails t unless property has status st.
func want(t *testing.T, vs map[string]verdict.Verdict, property string, st verdict.Status) {
	t.Helper()
	v, ok := vs[property]
	if !ok {
		t.Fatalf("no %s verdict", property)
	}
	if v.Status != st {
		t.Errorf("%s: %v, want %v: %s", property, v.Status, st, v.Detail)
	}
}

// A holder paused past its ttl loses its lock to the server's idle timer;
// another client takes it; the holder's check on resuming says it lost
// it. The reference passes; no-check, which asks nothing, goes on as the
// holder and breaks lease-exclusive. short-idle loses the lock while its
// lease runs.
func TestPausedHolder(t *testing.T) {
	on(t, func(t *testing.T, s *postgres.Server) {
		p := func(mutant string) *Plan {
			pl := plan(300, []Fault{{At: 100, Fault: histories.Pause, Target: "c1", For: 700}},
				[]lease.Step{acq, sleep(200), ref, sleep(50), rel},
				[]lease.Step{sleep(500), acq, sleep(400), rel})
			pl.Mutant = mutant
			return pl
		}
		vs := runJudged(t, s, Config{}, p(""))
		passes(t, vs)
		want(t, vs, lease.LeaseExclusive, verdict.Pass)
		want(t, vs, lease.NoRevival, verdict.Pass)
		// no-check's refresh on resuming says ok, long after its lease
		// ended: a revival.
		vs = runJudged(t, s, Config{Scope: prover.Scope{Mutant: "no-check"}}, p("no-check"))
		want(t, vs, lease.NoRevival, verdict.Fail)
		// short-idle: the session idles 150 ms while the holder counts on
		// 300: the other client takes the lock within the holder's lease.
		pl := plan(300, nil, []lease.Step{acq, sleep(250), ref}, []lease.Step{sleep(200), acq})
		pl.Mutant = "short-idle"
		vs = runJudged(t, s, Config{Scope: prover.Scope{Mutant: "short-idle"}}, pl)
		want(t, vs, lease.LeaseExclusive, verdict.Fail)
	})
}

// A killed holder's session ends with its connection, which frees the
// lock at once: the next client takes it, and with kills ending leases
// that is no double hold.
func TestKilledHolder(t *testing.T) {
	on(t, func(t *testing.T, s *postgres.Server) {
		vs := runJudged(t, s, Config{}, plan(500, []Fault{{At: 100, Fault: histories.Kill, Target: "c1"}},
			[]lease.Step{acq, sleep(300), ref, rel},
			[]lease.Step{sleep(200), acq, rel}))
		passes(t, vs)
		want(t, vs, lease.LeaseExclusive, verdict.Pass)
	})
}

// unlock-elsewhere reports a release that freed nothing: the next
// acquire, alone, finds the lock held by nobody's lease.
func TestUnlockElsewhere(t *testing.T) {
	on(t, func(t *testing.T, s *postgres.Server) {
		pl := plan(2000, nil, []lease.Step{acq, rel}, []lease.Step{sleep(300), acq})
		vs := runJudged(t, s, Config{}, pl)
		passes(t, vs)
		pl.Mutant = "unlock-elsewhere"
		vs = runJudged(t, s, Config{Scope: prover.Scope{Mutant: "unlock-elsewhere"}}, pl)
		want(t, vs, lease.AcquireExact, verdict.Fail)
	})
}

// An administrator's pg_terminate_backend frees the holder's lock at
// once, unseen: another client takes it while the holder's lease is
// certainly valid. No client can keep a lease through that, the reference
// neither: lease-exclusive fails, which is why force-close is not among
// the faults plans draw by default.
func TestForceCloseBreaksTheLease(t *testing.T) {
	on(t, func(t *testing.T, s *postgres.Server) {
		vs := runJudged(t, s, Config{}, plan(2000, []Fault{{At: 100, Fault: histories.ForceClose, Target: "c1"}},
			[]lease.Step{acq, sleep(500), ref},
			[]lease.Step{sleep(300), acq}))
		want(t, vs, lease.LeaseExclusive, verdict.Fail)
	})
}

// Faults that meet oddly are handled: a pause of a paused client (its
// resume lets it go on), a force-close before the client's first session
// (nothing to end), a kill of a paused client.
func TestFaultsMeeting(t *testing.T) {
	on(t, func(t *testing.T, s *postgres.Server) {
		vs := runJudged(t, s, Config{}, plan(200, []Fault{
			{At: 0, Fault: histories.ForceClose, Target: "c2"},
			{At: 50, Fault: histories.Pause, Target: "c1", For: 300},
			{At: 100, Fault: histories.Pause, Target: "c1", For: 100},
			{At: 100, Fault: histories.Pause, Target: "c2", For: 400},
			{At: 150, Fault: histories.Kill, Target: "c2"},
		}, []lease.Step{acq, sleep(100), ref, rel}, []lease.Step{sleep(20), acq, sleep(100), rel}))
		want(t, vs, lease.LeaseExclusive, verdict.Pass)
	})
}

// Drawn plans, under the default faults, never fail the reference: plans
// 0 to n-1 of the generator (rapid's Example), n being
// LOCKPROVER_PG_PLANS (default 6) on PostgreSQL, 50 times as many on the
// simulator.
func TestReferenceHoldsOnDrawnPlans(t *testing.T) {
	on(t, func(t *testing.T, s *postgres.Server) {
		n := 6
		if v := os.Getenv("LOCKPROVER_PG_PLANS"); v != "" {
			var err error
			if n, err = strconv.Atoi(v); err != nil || n < 1 {
				t.Fatalf("LOCKPROVER_PG_PLANS=%q: want a number of plans, at least 1", v)
			}
		}
		c := Config{Server: s}
		if s == nil {
			n *= 50 // on the simulator, 300 plans by default
		}
		gen := rapid.Custom(func(rt *rapid.T) *Plan { return c.Draw(rt).(*Plan) })
		for i := range n {
			p := gen.Example(i)
			res, err := c.Run(t.Context(), p)
			if err != nil {
				t.Fatalf("plan %d: %v", i, err)
			}
			rep := prover.Judge(res, model.Options{Family: []any{c.Judging("")}})
			t.Logf("plan %d: %s: %v", i, p.Brief(), rep.Status())
			if rep.Status() != verdict.Fail {
				continue
			}
			for _, v := range rep.Verdicts {
				if v.Status == verdict.Fail {
					t.Errorf("plan %d: %s: %s", i, v.Property, v.Detail)
				}
			}
			var b strings.Builder
			p.Write(&b)
			b.WriteString("history:\n")
			histories.Write(&b, res.History)
			t.Logf("plan %d:\n%s", i, b.String())
		}
	})
}
