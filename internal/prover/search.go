package prover

import (
	"context"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"time"

	"github.com/lockprover/lockprover/histories/verdict"
	"github.com/lockprover/lockprover/internal/rapidbatch"
)

// A Search proves c outside go test, as the CLI does: rapid draws plans in
// batches from Seed until Plans have run or Until passes, and shrinks the
// first violation for at most Shrink.
type Search struct {
	Config
	Seed uint64 // the same seed draws the same plans
	// Plans is how many plans at most; 0 means no limit (Until must be
	// set). With Shards > 1 it is the seed's plans that all the shards
	// share: on the simulator, the plans of batches 0, 1, ... that one
	// search of Plans would run, each shard running its own batches of
	// them; elsewhere (where a batch is one plan) an even share of them.
	Plans int
	Until time.Time // start no new plan after this (those in flight finish); zero means no limit
	// Shard of Shards: this search runs the batches whose number is Shard
	// modulo Shards, so that machines can split a seed's plans.
	Shard, Shards int
	// Shrink is the time to minimise a failing plan; 0 means 30 s, a
	// millisecond or less none (the plan found is the counterexample, not
	// run again).
	Shrink time.Duration
	// Parallel is how many plans run at once, each in a world (on a real
	// target: locks, proxies, processes) of its own; 0 means one per CPU
	// (GOMAXPROCS) on the simulator, four per CPU elsewhere (real plans
	// mostly wait; but the more at once, the slower each, which changes
	// when timing-dependent faults strike). The seed's plans, the
	// first violation in the seed's order and what it shrinks to, and the
	// digests are the same whatever the number (on a real target, the
	// outcomes of plans may differ, as timing does, and so may the plans
	// a Steerable family draws toward the goals they reached). A plan that
	// restarts a server the others use (see Alone) runs with no other.
	Parallel int
	// Progress, if set, is called after every plan, or on the simulator
	// after every batch (not while shrinking).
	Progress func(plans, judged int)
	// Context, if set, interrupts the search: no new plan starts, a run on
	// a real broker stops and cleans up, and shrinking stops.
	Context context.Context
}

// Outcome is what a Search found.
type Outcome struct {
	Plans   int // plans run up to and including the first violation, or in all
	Ops     int // operations those plans recorded
	Judged  int // property verdicts given on those plans
	Elapsed time.Duration
	Found   *Counterexample // the minimal counterexample, or nil
	// Inconclusive counts the plans on which a check that counts ran out of
	// time (and nothing failed); FirstInconclusive is the first of them,
	// unshrunk. Such a plan proves nothing either way.
	Inconclusive      int
	FirstInconclusive *Counterexample
	// Interrupted says the search was stopped by its Context: the plans
	// counted ran, a counterexample found may not be minimal.
	Interrupted bool

	// Batches are the batches the search ran, in order, so that shards'
	// results can be checked to cover a seed's plans once each: batch
	// Number's plans are the first Plans that rapid draws from it.
	Batches []BatchRun
	// BatchSize is the plans in a full batch: the same for every search on
	// the simulator, 0 elsewhere (where a batch is one plan: plan k of a
	// seed is numbered k, and is the simulator's plan k unless steered).
	BatchSize int
	// FoundBatch and FoundIndex say where the first violating plan was
	// drawn: its batch and its index in it (from 0); -1 without one. Of
	// shards' violations, the one with the lowest is what one search of
	// all their plans finds first.
	FoundBatch, FoundIndex int
	// Verdicts counts, for each property, the verdicts of each status it
	// was given on the plans counted in Plans.
	Verdicts map[string]map[verdict.Status]int
	// Excused counts, for each property, the plans (of those counted in
	// Plans) on which it passed only by excuses (a clock fault beyond the
	// drift bound explained a double hold, a fault an unknown outcome):
	// a pass that rests on them says so. FirstExcuse is the first of
	// those excuses, for each property.
	Excused     map[string]int
	FirstExcuse map[string]string
	// Interleavings counts, for each order of two operations, the plans
	// counted in Plans whose history shows it (see Interleavings): which
	// interleavings the run reached, and how often.
	Interleavings map[Interleaving]int
	// Goals are the family's steering goals (Steerable), nil if it has
	// none: what the search drew toward, and what a report says it never
	// reached. Aimed counts, for each goal, the plans drawn toward it, and
	// Steered all of them. On the simulator each batch steers from its own
	// plans' interleavings only, so that a seed's plans are the same
	// whatever the machine, -parallel and the shards; elsewhere, from those
	// of the plans counted before a plan is drawn.
	Goals   []Interleaving
	Aimed   map[Interleaving]int
	Steered int
}

// A BatchRun is one batch a search ran: its number, the plans it ran, and
// the SHA-256 of those plans' JSON, one after the other (two searches drew
// the same plans exactly when the digests agree).
type BatchRun struct {
	Number, Plans int
	Digest        string
}

// batch is how many plans a batch of rapid's draws: plan k of a seed is
// case k%batch of rapid's batch k/batch, on every target.
const batch = 500

// Run runs the search.
func (s Search) Run() (*Outcome, error) {
	if s.Plans <= 0 && s.Until.IsZero() {
		return nil, fmt.Errorf("prover: a search needs a number of plans or a deadline")
	}
	if s.Config.Subject == nil {
		return nil, fmt.Errorf("lockprover: Config.Subject is nil: say what to prove")
	}
	if s.Shards <= 0 {
		s.Shard, s.Shards = 0, 1
	}
	if s.Shrink == 0 {
		s.Shrink = 30 * time.Second
	}
	ctx := s.Context
	if ctx == nil {
		ctx = context.Background()
	}
	if pf, ok := s.Config.Subject.(Preflighter); ok {
		if err := pf.Preflight(ctx); err != nil {
			if ctx.Err() != nil {
				return &Outcome{Interrupted: true}, nil
			}
			return nil, err
		}
	}
	r := &searching{s: s, ctx: ctx, cur: -1, start: time.Now(),
		out: &Outcome{FoundBatch: -1, FoundIndex: -1, Verdicts: map[string]map[verdict.Status]int{}}}
	s.Config.ctx = ctx
	s.Config.tolerateInconclusive = true
	s.Config.stop = r.stop
	s.Config.runError = func(err error) {
		if r.runErr == nil && ctx.Err() == nil {
			r.runErr = err
		}
	}
	r.simulated = s.Config.Subject.Deterministic()
	r.goals = goals(s.Config.Subject)
	r.steer = newSteering(r.goals)
	r.out.Goals = r.goals
	s.Config.goal = r.goal
	defer func() {
		if r.endRapid != nil {
			r.endRapid()
		}
	}()
	if err := r.run(s.Config.property(r.seen)); err != nil {
		return nil, err
	}
	out := r.out
	out.Found, out.Elapsed = r.last, time.Since(r.start)
	out.Interrupted = ctx.Err() != nil
	if r.runErr != nil && r.last == nil && !out.Interrupted {
		return out, fmt.Errorf("prover: a plan could not run: %w", r.runErr)
	}
	return out, nil
}

// searching is a search under way.
type searching struct {
	s      Search
	ctx    context.Context
	start  time.Time
	out    *Outcome
	cur    int       // the batch running, its index in out.Batches; -1 between batches
	digest hash.Hash // of the running batch's plans
	last   *Counterexample
	runErr error
	// simulated: the family is deterministic (a simulator), and plans run
	// in batches of a fixed size.
	simulated bool
	endRapid  func() // ends the rapidbatch session once begun (rapid)
	// shrinkUntil is when shrinking the first violation must end.
	shrinkUntil time.Time
	goals       []Interleaving // the family's steering goals
	steer       *steering      // the same, numbered for the tallies of batches (nil for none)
	// shrinkGoal is the goal the first violating plan was drawn toward,
	// what rapid draws toward while shrinking it; batch is the counts of
	// the batch rapid's own loop runs (sequential), which it steers from.
	shrinkGoal *Interleaving
	batch      *tally
	// aiming counts, on a real target, the plans drawn toward each goal
	// so far, those still running too, so that plans drawn before the
	// first ends aim at different goals.
	aiming map[Interleaving]int
}

// goal is the goal the next plan rapid's own loop draws is steered
// toward: while shrinking, the violating plan's; in a batch rapid runs,
// the one its plans so far say (aim), as a worker would.
func (r *searching) goal() *Interleaving {
	switch {
	case r.last != nil:
		return r.shrinkGoal
	case r.batch != nil:
		return r.batch.aim(r.batch.plans)
	}
	return nil
}

// rapid begins the search's rapidbatch session, if it has none yet, for
// what only rapid's own loop can do: shrink, or run a simulator's batches
// after a rejected draw. rapid's settings are process-wide, so a session
// waits for any other search's to end; the plans themselves are drawn
// without one (rapidbatch.Case), so that searches in one process (a test
// binary's, say) run their plans at once, and take turns only to shrink.
func (r *searching) rapid() error {
	if r.endRapid != nil {
		return nil
	}
	end, err := rapidbatch.Begin(r.s.Shrink)
	if err != nil {
		return fmt.Errorf("prover: %w", err)
	}
	r.endRapid = end
	return nil
}

// stop says whether the next plan should not run: the search was
// interrupted, or (before a violation, which is shrunk whatever the
// search's deadline) its deadline has passed, or (while shrinking) the
// shrink's has. rapid checks its own budget only between the blocks it
// minimises, and one 64-bit block whose value matters (a schedule's
// seed) takes it some 130 plans with no check between them: a shrink of
// 30 s took 198 s on MariaDB, where a plan takes a second or more
// (TestShrinkKeepsToItsBudget: 310 plans of 10 ms for a budget of
// 200 ms, without this). Past it, every plan rapid tries passes at once,
// unrun, and the smallest violation found so far stands.
func (r *searching) stop() bool {
	return r.ctx.Err() != nil || r.last == nil && r.halt() ||
		r.last != nil && !r.shrinkUntil.IsZero() && time.Now().After(r.shrinkUntil)
}

// seen counts a plan's outcome, as rapid runs it: see tally. While
// shrinking, a smaller violating plan becomes the counterexample.
func (r *searching) seen(cx *Counterexample) {
	if r.out.Found != nil || r.last != nil || r.runErr != nil {
		if cx.violated() {
			r.last = cx // a smaller failing plan, while shrinking
		}
		return
	}
	t := tally{digest: r.digest}
	t.add(cx)
	if r.batch != nil {
		r.batch.add(cx)
	}
	r.merge(&t)
}

// A tally counts the outcomes of plans of one batch, in the seed's order:
// their operations and verdicts, the batch's digest, inconclusive plans,
// and the violation that ends the search.
type tally struct {
	plans, ops, judged, inconclusive int
	verdicts                         map[string]map[verdict.Status]int
	excused                          map[string]int
	firstExcuse                      map[string]string
	interleavings                    map[Interleaving]*reach
	aimed                            map[Interleaving]int
	firstInconclusive, violation     *Counterexample
	digest                           io.Writer // the plans' JSON goes there; nil: nowhere
	json                             []byte    // a plan's JSON, for the digest (jsonAppender)
	// steer, if set, is the search's goals: goalReached and goalAimed
	// count the plans that reached each and were aimed at it, by its
	// place in steer.goals, for aim.
	steer                  *steering
	goalReached, goalAimed []int
}

// A jsonAppender is a plan that writes its own JSON, as encoding/json's
// Encoder writes it, byte for byte (newline included), without its
// reflection: a search writes every plan it draws into a digest.
type jsonAppender interface {
	AppendJSON([]byte) []byte
}

// reach counts the plans of a tally that reached an interleaving.
type reach struct {
	n      int
	places []int // its places among the search's goals, if it is one
}

// steerBy makes t count the plans that reached and were aimed at each of
// s's goals (none for nil).
func (t *tally) steerBy(s *steering) {
	if s != nil {
		t.steer, t.goalReached, t.goalAimed = s, make([]int, len(s.goals)), make([]int, len(s.goals))
	}
}

// aim is the goal plan k of t's batch is drawn toward, from t's plans
// before it (see aim).
func (t *tally) aim(k int) *Interleaving {
	if t.steer == nil {
		return nil
	}
	return aim(t.steer.goals, t.goalReached, t.goalAimed, k)
}

func (t *tally) add(cx *Counterexample) {
	t.plans++
	t.ops += len(cx.Result.History) / 2
	t.judged += len(cx.Report.Verdicts)
	if t.verdicts == nil {
		t.verdicts = map[string]map[verdict.Status]int{}
	}
	for _, v := range cx.Report.Verdicts {
		if t.verdicts[v.Property] == nil {
			t.verdicts[v.Property] = map[verdict.Status]int{}
		}
		t.verdicts[v.Property][v.Status]++
		if v.Status == verdict.Pass && len(v.Excuses) > 0 {
			if t.excused == nil {
				t.excused, t.firstExcuse = map[string]int{}, map[string]string{}
			}
			if t.excused[v.Property]++; t.excused[v.Property] == 1 {
				t.firstExcuse[v.Property] = v.Excuses[0].Why
			}
		}
	}
	if t.interleavings == nil {
		t.interleavings = map[Interleaving]*reach{}
	}
	for _, i := range cx.reached {
		c := t.interleavings[i]
		if c == nil {
			c = &reach{}
			if t.steer != nil {
				c.places = t.steer.places[i]
			}
			t.interleavings[i] = c
		}
		c.n++
		for _, g := range c.places {
			t.goalReached[g]++
		}
	}
	if cx.aimed != nil {
		if t.aimed == nil {
			t.aimed = map[Interleaving]int{}
		}
		t.aimed[*cx.aimed]++
		if t.steer != nil {
			for _, g := range t.steer.places[*cx.aimed] {
				t.goalAimed[g]++
			}
		}
	}
	if t.digest != nil {
		// Compact, a newline after: the digest is the plan's JSON.
		if a, ok := cx.Plan.(jsonAppender); ok {
			t.json = a.AppendJSON(t.json[:0])
			t.digest.Write(t.json)
		} else {
			json.NewEncoder(t.digest).Encode(cx.Plan)
		}
	}
	switch {
	case cx.violated():
		t.violation = cx
	case cx.Inconclusive:
		t.inconclusive++
		if t.firstInconclusive == nil {
			t.firstInconclusive = cx
		}
	}
}

// merge adds t to the outcome, as the plans after those counted so far
// (in the batch r.cur, if any); its violation becomes the counterexample.
func (r *searching) merge(t *tally) {
	out := r.out
	before := out.Plans
	out.Plans += t.plans
	out.Ops += t.ops
	out.Judged += t.judged
	for p, byStatus := range t.verdicts {
		if out.Verdicts[p] == nil {
			out.Verdicts[p] = map[verdict.Status]int{}
		}
		for st, n := range byStatus {
			out.Verdicts[p][st] += n
		}
	}
	for p, n := range t.excused {
		if out.Excused == nil {
			out.Excused, out.FirstExcuse = map[string]int{}, map[string]string{}
		}
		if out.Excused[p] == 0 {
			out.FirstExcuse[p] = t.firstExcuse[p]
		}
		out.Excused[p] += n
	}
	if out.Interleavings == nil && len(t.interleavings) > 0 {
		out.Interleavings = map[Interleaving]int{}
	}
	for i, c := range t.interleavings {
		out.Interleavings[i] += c.n
	}
	for i, n := range t.aimed {
		if out.Aimed == nil {
			out.Aimed = map[Interleaving]int{}
		}
		out.Aimed[i] += n
		out.Steered += n
	}
	out.Inconclusive += t.inconclusive
	if out.FirstInconclusive == nil {
		out.FirstInconclusive = t.firstInconclusive
	}
	if r.cur >= 0 {
		b := &out.Batches[r.cur]
		b.Plans += t.plans
		if t.violation != nil {
			out.FoundBatch, out.FoundIndex = b.Number, b.Plans-1
		}
	}
	if t.violation != nil {
		r.last, r.shrinkGoal = t.violation, t.violation.aimed
		r.shrinkUntil = time.Now().Add(r.s.Shrink)
	}
	if r.s.Progress != nil && out.Plans > before {
		r.s.Progress(out.Plans, out.Judged)
	}
}
