package amqprun

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/internal/quick"
)

func exhaust(t *testing.T, c Config, s prover.ExhaustScope, reduce, everything bool) *prover.ExhaustOutcome {
	t.Helper()
	o, err := prover.Exhaust{Config: prover.Config{Subject: c}, Scope: s, Reduce: reduce, Everything: everything, MaxSchedules: 1e9}.Run()
	if err != nil {
		t.Fatal(err)
	}
	if o.Stopped != "" || o.PlansDone != o.Plans {
		t.Fatalf("%+v: stopped (%s) after %d of %d plans", s, o.Stopped, o.PlansDone, o.Plans)
	}
	return o
}

// TestExhaustReductionSound checks both reductions against the plain
// enumeration on scopes small enough for it: the same verdicts (each
// property's status, as sets of outcomes) are reached with the reduction
// as with every schedule, for the reference and for mutants that the
// scope catches, where the reduction runs fewer schedules.
func TestExhaustReductionSound(t *testing.T) {
	one := prover.ExhaustScope{Clients: 1, Ops: 1}
	two := prover.ExhaustScope{Clients: 2, Ops: 1}
	cases := []struct {
		name       string
		c          Config
		s          prover.ExhaustScope
		everything bool // the plain run offers every choice (else the nemesis moves last in both)
	}{
		// Both reductions against every schedule.
		{"mutex 1x1", Config{Kind: histories.Mutex}, one, true},
		// Pruning and the clients' waiting for the create against every
		// schedule with the nemesis last.
		{"semaphore 1x1", Config{Kind: histories.Semaphore}, one, false},
		{"semaphore 1x2", Config{Kind: histories.Semaphore}, prover.ExhaustScope{Clients: 1, Ops: 2}, false},
		{"mutex 2x1", Config{Kind: histories.Mutex}, two, false},
		{"mutex 2x1 b-not-exclusive", Config{Kind: histories.Mutex, Scope: prover.Scope{Mutant: "b-not-exclusive"}}, two, false},
		{"semaphore 1x1 verify-passive", Config{Kind: histories.Semaphore, Scope: prover.Scope{Mutant: "verify-passive"}}, one, false},
		{"semaphore 1x1 release-deletes-a", Config{Kind: histories.Semaphore, Scope: prover.Scope{Mutant: "release-deletes-a"}}, one, false},
		{"semaphore 1x1 kill b-not-exclusive", Config{Kind: histories.Semaphore, Scope: prover.Scope{Mutant: "b-not-exclusive"}},
			prover.ExhaustScope{Clients: 1, Ops: 1, MaxFaults: 1, Faults: []string{histories.Kill}}, false},
		// A sleep of 100 ms (--sleep) beside processes noticed late.
		{"semaphore 1x2 sleep", Config{Kind: histories.Semaphore}, prover.ExhaustScope{Clients: 1, Ops: 2, SleepMs: 100}, false},
	}
	if testing.Short() {
		cases = cases[1:2]
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			red := exhaust(t, tc.c, tc.s, true, false)
			deferAwaiting = false
			plain := exhaust(t, tc.c, tc.s, false, tc.everything)
			deferAwaiting = true
			t.Logf("reduced: %d schedules, %d states, %d pruned; plain: %d schedules; outcomes %v", red.Schedules, red.States, red.Pruned, plain.Schedules, slices.Sorted(maps.Keys(plain.Outcomes)))
			if !slices.Equal(slices.Sorted(maps.Keys(red.Outcomes)), slices.Sorted(maps.Keys(plain.Outcomes))) {
				t.Errorf("the reduction reached other verdicts:\nreduced %v\nplain   %v", red.Outcomes, plain.Outcomes)
			}
			if red.Schedules >= plain.Schedules {
				t.Errorf("the reduction ran %d schedules, the plain enumeration %d", red.Schedules, plain.Schedules)
			}
			if (red.Found == nil) != (plain.Found == nil) {
				t.Errorf("a counterexample: reduced %v, plain %v", red.Found != nil, plain.Found != nil)
			}
		})
	}
}

// TestExhaustScopeRefused: a scope that means nothing for the kind is
// refused naming its flag, and one too large says so before it starts.
func TestExhaustScopeRefused(t *testing.T) {
	_, _, err := Config{Kind: histories.Mutex}.Skeletons(prover.ExhaustScope{Clients: 1, Ops: 1, AdminOps: 1})
	if err == nil || !strings.HasPrefix(err.Error(), "--admin-ops:") {
		t.Errorf("admin operations on a mutex: %v", err)
	}
	_, _, err = Config{}.Skeletons(prover.ExhaustScope{Clients: 3, Ops: 8})
	if err == nil || !strings.Contains(err.Error(), "--clients 3, --ops 8, --admin-ops 0: 9.53e+11 plans before any fault") {
		t.Errorf("a scope too large to list: %v", err)
	}
	o, err := prover.Exhaust{Config: prover.Config{Subject: Config{}}, Scope: prover.ExhaustScope{Clients: 2, Ops: 1}}.Run()
	if err == nil || o == nil || o.Schedules != 0 || o.Estimate < 1e6 {
		t.Errorf("a scope too large: %v, %+v", err, o)
	}
}

// TestExhaustInterrupted: an interrupted search stops and reports what it
// covered, and so does one whose time ran out.
func TestExhaustInterrupted(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	s := prover.ExhaustScope{Clients: 2, Ops: 1}
	o, err := prover.Exhaust{Config: prover.Config{Subject: Config{Kind: histories.Mutex}}, Scope: s, Reduce: true, Context: ctx}.Run()
	if err != nil || o.Stopped != "interrupted" || o.Schedules == 0 || o.PlansDone == o.Plans {
		t.Errorf("interrupted: %v, %+v", err, o)
	}
	// Two seconds: on a loaded machine (a load of 20 here) the first
	// schedule alone took longer than 300 ms.
	o, err = prover.Exhaust{Config: prover.Config{Subject: Config{}}, Scope: s, Reduce: true, Until: time.Now().Add(2 * time.Second)}.Run()
	if err != nil || o.Stopped != "--time ran out" || o.Schedules == 0 || o.Estimate < 1e6 {
		t.Errorf("--time: %v, %+v", err, o)
	}
}

// TestExhaustPreemptionBound checks the bound on preemptions against the
// plain enumeration (the nemesis last in both): a bound no schedule
// reaches runs every schedule, to the same verdicts; with the states
// pruned too, the same verdicts; and each smaller bound runs fewer
// schedules, reaching only verdicts the plain enumeration reaches. A
// bound of 0 still chooses where the process that moved last cannot go
// on, and every choice that is not which process moves.
func TestExhaustPreemptionBound(t *testing.T) {
	t.Parallel() // CPU of its own, beside the real-broker tests that mostly wait
	if testing.Short() {
		t.Skip("16 s: the plain enumeration of two clients")
	}
	c := Config{Kind: histories.Mutex, Scope: prover.Scope{Mutant: "b-not-exclusive"}}
	s := prover.ExhaustScope{Clients: 2, Ops: 1}
	plain := exhaust(t, c, s, false, false)
	keys := func(o *prover.ExhaustOutcome) []string { return slices.Sorted(maps.Keys(o.Outcomes)) }
	s.Bounded, s.Preemptions = true, 1000
	all := exhaust(t, c, s, false, false)
	if all.Schedules != plain.Schedules || !slices.Equal(keys(all), keys(plain)) {
		t.Errorf("a bound no schedule reaches: %d schedules, %v; plain %d, %v", all.Schedules, keys(all), plain.Schedules, keys(plain))
	}
	red := exhaust(t, c, s, true, false)
	if red.Schedules >= plain.Schedules || !slices.Equal(keys(red), keys(plain)) {
		t.Errorf("reduced under a bound no schedule reaches: %d schedules, %v; plain %d, %v", red.Schedules, keys(red), plain.Schedules, keys(plain))
	}
	last := plain.Schedules
	for _, p := range []int{2, 1, 0} {
		s.Preemptions = p
		o := exhaust(t, c, s, false, false)
		t.Logf("at most %d preemptions: %d schedules, outcomes %v", p, o.Schedules, keys(o))
		if o.Schedules >= last || o.Schedules < int64(o.Plans) {
			t.Errorf("at most %d preemptions: %d schedules, after %d", p, o.Schedules, last)
		}
		last = o.Schedules
		for _, k := range keys(o) {
			if plain.Outcomes[k] == 0 {
				t.Errorf("at most %d preemptions: verdicts the plain enumeration never reached: %s", p, k)
			}
		}
		if !strings.HasSuffix(o.Scope, fmt.Sprintf("with at most %d preemption%s (a switch away from a process that could go on)", p, map[bool]string{true: "", false: "s"}[p == 1])) {
			t.Errorf("the scope does not say its bound: %s", o.Scope)
		}
	}
	// Delays, pruned and not: a bound no schedule reaches runs every
	// schedule (to the same verdicts), each smaller one fewer, and none
	// at all one schedule a plan.
	s.Delays, s.Preemptions = true, 1000
	if all := exhaust(t, c, s, false, false); all.Schedules != plain.Schedules || !slices.Equal(keys(all), keys(plain)) {
		t.Errorf("a bound on delays no schedule reaches: %d schedules, %v; plain %d, %v", all.Schedules, keys(all), plain.Schedules, keys(plain))
	}
	if red := exhaust(t, c, s, true, false); !slices.Equal(keys(red), keys(plain)) {
		t.Errorf("reduced under a bound on delays no schedule reaches: %v; plain %v", keys(red), keys(plain))
	}
	last = plain.Schedules
	for _, d := range []int{2, 1, 0} {
		s.Preemptions = d
		for _, reduce := range []bool{false, true} {
			o := exhaust(t, c, s, reduce, false)
			t.Logf("at most %d delays (pruned %v): %d schedules, outcomes %v", d, reduce, o.Schedules, keys(o))
			if !reduce && (o.Schedules >= last || d == 0 && o.Schedules != int64(o.Plans)) {
				t.Errorf("at most %d delays: %d schedules (%d plans), after %d", d, o.Schedules, o.Plans, last)
			}
			if !reduce {
				last = o.Schedules
			}
			for _, k := range keys(o) {
				if plain.Outcomes[k] == 0 {
					t.Errorf("at most %d delays (pruned %v): verdicts the plain enumeration never reached: %s", d, reduce, k)
				}
			}
		}
	}
}

// TestExhaustMutantsBySleepCrashAndStagger: the four mutants the scopes
// of two clients, two admins or a fault each missed are caught by the
// scopes docs/exhaustive.md made for them (O to R), whose steps are what
// their drawn counterexamples needed: a sleep (--sleep), a crash within
// a destroy, a client that starts late (--stagger), each within a bound.
func TestExhaustMutantsBySleepCrashAndStagger(t *testing.T) {
	t.Parallel() // CPU of its own, beside the real-broker tests that mostly wait
	o := prover.ExhaustScope{Clients: 2, Ops: 2, EachOps: []int{2, 1}, SleepMs: 100, Bounded: true}
	p := prover.ExhaustScope{Clients: 1, Ops: 1, Admins: 2, AdminOps: 2, EachAdminOps: []int{2, 1}, SleepMs: 100, Bounded: true}
	q := prover.ExhaustScope{Clients: 1, Ops: 1, AdminOps: 2, MaxFaults: 1, Faults: []string{AdminCrash}, Bounded: true}
	r := prover.ExhaustScope{Clients: 2, Ops: 3, EachOps: []int{3, 1}, SleepMs: 100, StaggerMs: 50, MaxFaults: 1, Faults: []string{histories.ForceClose}, Bounded: true, Delays: true}
	for _, tc := range []struct {
		mutant, property string
		s                prover.ExhaustScope
		slow             bool
	}{
		{"skip-b-probe", "acquire-exact", o, false},
		{"ascending-no-overshoot", "no-leak", q, false},
		{"cached-count", "count-exact", p, true},
		{"silent-reconnect", "slot-exclusive", r, true},
	} {
		t.Run(tc.mutant, func(t *testing.T) {
			if tc.slow {
				quick.Long(t, "a minute or so of both cores: more than a thousand plans")
				if testing.Short() {
					t.Skip("a minute or so: more than a thousand plans")
				}
			}
			c := Config{Kind: histories.Semaphore, Scope: prover.Scope{Mutant: tc.mutant}}
			o, err := prover.Exhaust{Config: prover.Config{Subject: c}, Scope: tc.s, Reduce: true, MaxSchedules: 1e9}.Run()
			if err != nil {
				t.Fatal(err)
			}
			if o.Found == nil || o.Found.Property != tc.property || o.Stopped != "" {
				t.Fatalf("%+v: not caught by %s (%d schedules, %d of %d plans)", tc.s, tc.property, o.Schedules, o.PlansDone, o.Plans)
			}
		})
	}
}

// TestExhaustHealAndSleep: --heal gives pauses and partitions, and no
// other fault, a second length, and a partition of it heals no later
// than that long after it struck, and that long after where it cuts off
// an acquire (struck during the client's connection setup, it is healed
// at once, as one that lasts to the end is, by the client's fresh
// connection); --sleep adds a sleep to the clients' alphabet.
func TestExhaustHealAndSleep(t *testing.T) {
	c := Config{Kind: histories.Semaphore}
	s := prover.ExhaustScope{Clients: 1, Ops: 1, MaxFaults: 1, Faults: []string{histories.Kill, histories.Partition}}
	plain, _, err := c.Skeletons(s)
	if err != nil {
		t.Fatal(err)
	}
	s.HealMs = 500
	healing, what, err := c.Skeletons(s)
	if err != nil {
		t.Fatal(err)
	}
	lengths := map[string]map[int]int{}
	var healed []*Plan
	for _, p := range healing {
		for _, f := range p.(*Plan).Nemesis {
			if lengths[f.Fault] == nil {
				lengths[f.Fault] = map[int]int{}
			}
			lengths[f.Fault][f.For]++
			if f.Fault == histories.Partition && f.For == 500 && p.(*Plan).Clients[0][0].Op == histories.Acquire {
				healed = append(healed, p.(*Plan))
			}
		}
	}
	if lengths[histories.Kill][500] != 0 || lengths[histories.Partition][500] != lengths[histories.Partition][0] || lengths[histories.Partition][0] == 0 ||
		len(healing)-len(plain) != lengths[histories.Partition][500] || !strings.Contains(what, "or healing 500 ms after it struck") {
		t.Fatalf("--heal 500ms: %d plans (%d without), fault lengths %v; %s", len(healing), len(plain), lengths, what)
	}
	exact := 0
	for _, p := range healed {
		res, err := c.Run(t.Context(), p)
		if err != nil {
			t.Fatal(err)
		}
		var cut, heal int64 = -1, -1
		for _, e := range res.History {
			switch {
			case e.Process == "nemesis" && e.F == histories.Partition && e.Type == histories.Invoke:
				cut = e.Time
			case e.Process == "nemesis" && e.F == histories.Heal && e.Type == histories.Invoke && heal < 0:
				heal = e.Time
			}
		}
		switch {
		case cut < 0 || heal < cut || heal-cut > int64(501*time.Millisecond):
			t.Errorf("%+v: the partition struck at %d ns and healed at %d ns, later than 500 ms after", p.Nemesis, cut, heal)
		case heal-cut >= int64(500*time.Millisecond):
			exact++
		}
	}
	if exact == 0 {
		t.Errorf("none of %d partitions of 500 ms of an acquire healed 500 ms after it struck", len(healed))
	}
	s = prover.ExhaustScope{Clients: 1, Ops: 1, SleepMs: 100}
	sleeping, what, err := c.Skeletons(s)
	if err != nil || len(sleeping) != 4 || !strings.Contains(what, "acquire, verify, release, sleep 100 ms") {
		t.Errorf("--sleep 100ms: %d plans, %v; %s", len(sleeping), err, what)
	}
}
