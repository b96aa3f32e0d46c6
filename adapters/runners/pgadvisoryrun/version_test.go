package pgadvisoryrun

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockprover/lockprover/adapters/host/debroot"
	"github.com/lockprover/lockprover/adapters/servers/postgres"
	"github.com/lockprover/lockprover/adapters/servers/versions"
	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/histories/verdict"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/internal/quick"
	"github.com/lockprover/lockprover/model"
	"github.com/lockprover/lockprover/model/lease"
	"pgregory.net/rapid"
)

// The reference on the newest PostgreSQL (18, from Debian sid's root,
// which CI makes): a few drawn plans under the default faults hold, the
// idle timer still ends a paused holder's session (the paused-holder plan
// passes, and no-check, which asks nothing, revives), and an
// administrator's terminate still frees the lock unseen (lease-exclusive
// fails, as on 15).
func TestReferenceOnTheNewestPostgres(t *testing.T) {
	v := versions.Newest("postgresql")
	quick.Skip(t, "a private PostgreSQL "+v.Name+" from Debian "+v.Release+"'s root")
	if !v.Made() {
		t.Skipf("%s's root is not made here: lockprover servers --make postgresql-%s (root, debootstrap and the Debian mirror; some minutes)", v, v.Name)
	}
	// A bound for a wedged start, not a measure: initdb takes seconds, but
	// beside a loaded suite it has taken over a minute.
	x, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	s, err := postgres.StartVersion(x, t.TempDir(), v, nil)
	if errors.Is(err, debroot.ErrUnavailable) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	c := Config{Server: s}
	gen := rapid.Custom(func(rt *rapid.T) *Plan { return c.Draw(rt).(*Plan) })
	for i := range 3 {
		p := gen.Example(i)
		res, err := c.Run(t.Context(), p)
		if err != nil {
			t.Fatalf("plan %d: %v", i, err)
		}
		rep := prover.Judge(res, model.Options{Family: []any{c.Judging("")}})
		t.Logf("plan %d on %s: %s: %v", i, v, p.Brief(), rep.Status())
		for _, vd := range rep.Verdicts {
			if vd.Status == verdict.Fail {
				t.Errorf("plan %d: %s: %s", i, vd.Property, vd.Detail)
			}
		}
	}
	// TestPausedHolder's plan, run again while c1's acquire was not
	// answered before the pause struck (see there).
	paused := func(mutant string) *Plan {
		pl := plan(300, []Fault{{At: 400, Fault: histories.Pause, Target: "c1", For: 900}},
			[]lease.Step{acq, sleep(150), ref, sleep(150), ref, sleep(150), ref, sleep(50), rel},
			[]lease.Step{sleep(1000), acq, sleep(400), rel})
		pl.Mutant = mutant
		return pl
	}
	vs := runOrdered(t, s, Config{}, paused(""), pausedAfterAcquire)
	passes(t, vs)
	want(t, vs, lease.NoRevival, verdict.Pass)
	vs = runOrdered(t, s, Config{Scope: prover.Scope{Mutant: "no-check"}}, paused("no-check"), pausedAfterAcquire)
	want(t, vs, lease.NoRevival, verdict.Fail)
	// TestForceCloseBreaksTheLease's plan, run again while the machine
	// was too slow for its order (c1 granted before the force-close, c2
	// within c1's lease: clean clones' CI beside two busy loops saw both
	// fail).
	vs = runOrdered(t, s, Config{}, forceClosePlan(), forceCloseOrder)
	want(t, vs, lease.LeaseExclusive, verdict.Fail)
}
