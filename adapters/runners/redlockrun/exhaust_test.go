package redlockrun

import (
	"maps"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/internal/prover/exhausttest"
	"github.com/lockprover/lockprover/internal/quick"
)

// readPlan is ReadPlan as a family's plan, for exhausttest.Replays.
func readPlan(path string) (prover.Plan, error) { return ReadPlan(path) }

// TestExhaust: every schedule of a small scope holds for the reference
// with every fault, and for the priority reference; mutants' shortest
// counterexamples are found by the scopes docs/exhaustive.md names, and
// run again from their written plans to the same violation. The scopes of
// more than one client with a fault or unequal operations are
// TestExhaustWideScopes'.
func TestExhaust(t *testing.T) { exhaustScopes(t, false) }

// TestExhaustWideScopes is TestExhaust on its wide scopes (more than one
// client, with a fault or unequal operations): two minutes of both cores.
func TestExhaustWideScopes(t *testing.T) {
	quick.Long(t, "every schedule of scopes of two and three clients, minutes of CPU")
	if testing.Short() {
		t.Skip("wide scopes")
	}
	exhaustScopes(t, true)
}

// exhaustScopes is TestExhaust on its narrow scopes, or on its wide ones.
func exhaustScopes(t *testing.T, wide bool) {
	one := prover.ExhaustScope{Clients: 1, Ops: 1}
	healing := prover.ExhaustScope{Clients: 1, Ops: 1, MaxFaults: 1, Faults: []string{histories.Pause}, HealMs: 49}
	staggered := prover.ExhaustScope{Clients: 2, Ops: 1, StaggerMs: 15, Bounded: true, Preemptions: 2, Delays: true}
	killed := prover.ExhaustScope{Clients: 2, Ops: 1, StaggerMs: 15, Bounded: true, Preemptions: 1, Delays: true, MaxFaults: 1, Faults: []string{histories.Kill}}
	ladder := prover.ExhaustScope{Clients: 3, Ops: 1, StaggerMs: 15, Bounded: true, Delays: true, MaxFaults: 1, Faults: []string{histories.DropReply}}
	ownTTLs := prover.ExhaustScope{Clients: 2, Ops: 4, EachOps: []int{4, 1}, StaggerMs: 15, TTLsMs: []int{1000, 100}, Bounded: true, Delays: true, MaxFaults: 1, Faults: []string{histories.DropReply}}
	if !wide {
		o := exhausttest.Search(t, Config{}, prover.ExhaustScope{Clients: 1, Ops: 1, MaxFaults: 1})
		if o.Found != nil || o.Plans != 36 || o.Schedules != 14520 || !strings.Contains(o.Scope, "clock-jump") {
			t.Fatalf("the reference, 1x1, a fault: %+v", o)
		}
		o = exhausttest.Search(t, Config{Priority: true}, one)
		if o.Found != nil || o.Plans != 4 || o.Schedules != 4128 {
			t.Fatalf("the priority reference, 1x1: %+v", o)
		}
	}
	// The reference holds on the scopes that catch the mutants below.
	for _, tc := range []struct {
		c Config
		s prover.ExhaustScope
	}{{Config{}, healing}, {Config{TTLMs: 50}, healing}, {Config{Priority: true}, staggered}, {Config{Priority: true}, killed},
		{Config{Servers: 2}, prover.ExhaustScope{Clients: 2, Ops: 2, EachOps: []int{2, 1}, Bounded: true, Preemptions: 2, Delays: true}},
		{Config{Priority: true}, ladder}, {Config{Priority: true}, ownTTLs}} {
		if wide != (tc.s.Clients > 1 && (tc.s.MaxFaults > 0 || tc.s.EachOps != nil)) {
			continue
		}
		if o := exhausttest.Search(t, tc.c, tc.s); o.Found != nil {
			t.Fatalf("the reference (%s), %+v: %s violated", tc.c, tc.s, o.Found.Property)
		}
	}
	for _, tc := range []struct {
		c        Config
		s        prover.ExhaustScope
		property string
	}{
		{Config{Scope: prover.Scope{Mutant: "no-drift"}}, one, "validity-sound"},
		// Acquire, sleep past the lease's life, refresh: it sets the key
		// again.
		{Config{Scope: prover.Scope{Mutant: "setnx-on-extend"}}, prover.ExhaustScope{Clients: 1, Ops: 3}, "no-revival"},
		// Two clients without a preemption: c2's key, set by the token
		// every client shares, is c1's to refresh once c1 released.
		{Config{Scope: prover.Scope{Mutant: "constant-token"}}, prover.ExhaustScope{Clients: 2, Ops: 2, Bounded: true}, "no-revival"},
		// A pause of the server that heals 49 ms later, within the
		// acquire's bound on its answer (50 ms): the grant took 49 ms,
		// which no-elapsed does not subtract; with a ttl of 50 ms no
		// validity is left, and no-validity-check grants anyway.
		{Config{Scope: prover.Scope{Mutant: "no-elapsed"}}, healing, "validity-sound"},
		{Config{TTLMs: 50, Scope: prover.Scope{Mutant: "no-validity-check"}}, healing, "validity-sound"},
		// A thief 15 ms after its victim, within two delays: it returns
		// before its victim acknowledged, or marked itself lost.
		{Config{Priority: true, Scope: prover.Scope{Mutant: "no-ack-wait"}}, staggered, "lease-exclusive"},
		{Config{Priority: true, Scope: prover.Scope{Mutant: "ack-before-lost"}}, staggered, "lease-exclusive"},
		{Config{Priority: true, Scope: prover.Scope{Mutant: "equal-steals"}}, staggered, "steal-order"},
		// The victim killed: the thief waits a quarter of its time left.
		{Config{Priority: true, Scope: prover.Scope{Mutant: "proceed-on-ack-timeout"}}, killed, "lease-exclusive"},
		// Two clients' acquires each set one key of two servers and
		// fail; c1's next acquire, alone, finds its own first key.
		{Config{Servers: 2, Scope: prover.Scope{Mutant: "no-cleanup"}}, prover.ExhaustScope{Clients: 2, Ops: 2, EachOps: []int{2, 1}, Bounded: true, Preemptions: 2, Delays: true}, "acquire-exact"},
		// c2's steal, its reply lost, fails; c3 robs it at once and
		// tells c2 only: c1, never told, still holds.
		{Config{Priority: true, Scope: prover.Scope{Mutant: "direct-victim-only"}}, ladder, "lease-exclusive"},
		// c1 (ttl 1 s) misses c2's note (a lost reply), c2's steal gives
		// the key c2's 100 ms, and c1, back from its sleep, refreshes in
		// vain and acquires again while its first lease is still valid.
		{Config{Priority: true, Scope: prover.Scope{Mutant: "steal-resets-ttl"}}, ownTTLs, "lease-exclusive"},
	} {
		if wide != ((tc.s.Ops > 2 || tc.s.Clients > 1) && (tc.s.StaggerMs == 0 || tc.s.MaxFaults > 0)) {
			continue
		}
		o := exhausttest.Search(t, tc.c, tc.s)
		if o.Found == nil || o.Found.Property != tc.property {
			t.Fatalf("%s: %+v", tc.c, o)
		}
		exhausttest.Replays(t, tc.c, readPlan, o.Found)
	}
}

// TestExhaustScopeRefused: a scope that means nothing for the family is
// refused naming its flag.
func TestExhaustScopeRefused(t *testing.T) {
	for _, tc := range []struct {
		c    Config
		s    prover.ExhaustScope
		flag string
	}{
		{Config{}, prover.ExhaustScope{Clients: 1, Ops: 1, AdminOps: 1}, "--admin-ops:"},
		{Config{Priority: true}, prover.ExhaustScope{Clients: 1, Ops: 1, Admins: 2}, "--admins:"},
		{Config{}, prover.ExhaustScope{Clients: 1, Ops: 0}, "--ops:"},
		{Config{Limit: 2}, prover.ExhaustScope{Clients: 1, Ops: 1}, "--limit 2:"},
		{Config{}, prover.ExhaustScope{Clients: 5, Ops: 4}, "--clients 5, --ops 4:"},
	} {
		if _, _, err := tc.c.Skeletons(tc.s); err == nil || !strings.HasPrefix(err.Error(), tc.flag) {
			t.Errorf("%+v: %v, want an error naming %s", tc.s, err, tc.flag)
		}
	}
}

// TestExhaustPreemptionBound: the simulated Redis tells the search which
// choice keeps the process that moved last moving, so a bound on
// preemptions, or on delays, runs fewer schedules the smaller it is,
// reaching only verdicts the plain enumeration reaches; a bound no
// schedule reaches runs every schedule, and no delay at all one schedule
// a plan.
func TestExhaustPreemptionBound(t *testing.T) {
	s := prover.ExhaustScope{Clients: 1, Ops: 1}
	plain := exhausttest.Search(t, Config{}, s)
	keys := func(o *prover.ExhaustOutcome) []string { return slices.Sorted(maps.Keys(o.Outcomes)) }
	s.Bounded = true
	for _, delays := range []bool{false, true} {
		s.Delays = delays
		bounded(t, s, plain, keys)
	}
}

// bounded checks the bound of s, of preemptions or of delays, at 1000,
// 1 and 0 against the plain enumeration plain.
func bounded(t *testing.T, s prover.ExhaustScope, plain *prover.ExhaustOutcome, keys func(*prover.ExhaustOutcome) []string) {
	t.Helper()
	last := int64(math.MaxInt64)
	for _, p := range []int{1000, 1, 0} {
		s.Preemptions = p
		o := exhausttest.Search(t, Config{}, s)
		t.Logf("at most %d (delays %v): %d schedules", p, s.Delays, o.Schedules)
		if p == 0 && s.Delays && o.Schedules != int64(o.Plans) {
			t.Errorf("no delay: %d schedules of %d plans, want one each", o.Schedules, o.Plans)
		}
		if p == 1000 && (o.Schedules != plain.Schedules || !slices.Equal(keys(o), keys(plain))) {
			t.Errorf("a bound no schedule reaches: %d schedules, %v; plain %d, %v", o.Schedules, keys(o), plain.Schedules, keys(plain))
		}
		if o.Schedules >= last {
			t.Errorf("at most %d preemptions: %d schedules, after %d", p, o.Schedules, last)
		}
		last = o.Schedules
		for _, k := range keys(o) {
			if plain.Outcomes[k] == 0 {
				t.Errorf("at most %d preemptions: verdicts the plain enumeration never reached: %s", p, k)
			}
		}
	}
}
