package redlockrun

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/histories/verdict"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/model"
	"github.com/lockprover/lockprover/model/lease"
)

// attemptsOnRedis bounds the runs of a mutant's plan on Redis: a run the
// machine's delays moved out of its script proves nothing, and runs again.
// Beside a loaded suite (two busy loops, a load of 20 to 35) no-elapsed's
// acquire ended off its script 4 runs in a row.
const attemptsOnRedis = 8

// Every mutant of the catalogue is caught on real redis-servers by the
// property the catalogue names, on a plan written for it
// (testdata/mutants/<name>.json) whose faults and sleeps expose it
// deterministically; the reference passes that property on the same plan.
// A run is judged only if it went as its script meant (onScript): its
// operations ended as planned, within windows of hundreds of
// milliseconds. One that did not (a loaded machine delayed it) is said
// and run again, up to attemptsOnRedis times. The plans run all at once,
// each on servers of its own (they mostly sleep), whatever -parallel says;
// each mutant's subtest reports its own.
func TestMutantsCaughtOnRedis(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts redis-servers")
	}
	mutantsOnRedis(t, onRedis(t), Mutants)
}

// mutantsOnRedis runs each of ms's plans on target at once, and reports
// each mutant in a subtest of its own.
func mutantsOnRedis(t *testing.T, target Redis, ms []*Mutant) {
	reports := make([]*report, len(ms))
	var wg sync.WaitGroup
	for i, m := range ms {
		reports[i] = &report{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			reports[i].mutantOnRedis(target, m)
		}()
	}
	wg.Wait()
	for i, m := range ms {
		t.Run(m.Name, func(t *testing.T) {
			for _, l := range reports[i].logs {
				t.Log(l)
			}
			for _, e := range reports[i].errs {
				t.Error(e)
			}
		})
	}
}

// A report is what a check run away from its test found: lines to log
// and errors.
type report struct{ logs, errs []string }

func (r *report) logf(format string, args ...any) {
	r.logs = append(r.logs, fmt.Sprintf(format, args...))
}
func (r *report) errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// mutantOnRedis runs m's plan on Redis until it is caught (caughtOnRedis),
// then the reference on the same plan.
func (r *report) mutantOnRedis(target Redis, m *Mutant) {
	script := onScript[m.Name]
	if script == nil {
		r.errorf("no plan for real Redis (testdata/mutants/%s.json and onScript)", m.Name)
		return
	}
	p, err := ReadPlan(filepath.Join("testdata", "mutants", m.Name+".json"))
	if err != nil {
		r.errorf("%v", err)
		return
	}
	if p.Mutant != m.Name {
		r.errorf("the plan's mutant is %q", p.Mutant)
		return
	}
	if !r.caughtOnRedis(target, p, m.Property, script) {
		return
	}
	ref := *p
	ref.Mutant = ""
	if refScript := refOnScript[m.Name]; refScript != nil {
		r.referenceOnRedis(target, &ref, refScript)
		return
	}
	res, err := target.Run(context.Background(), &ref)
	if err != nil {
		r.errorf("the reference: %v", err)
		return
	}
	if v := verdictOf(res, &ref, m.Property); v.Status == verdict.Fail {
		r.errorf("the reference fails %s on the same plan: %s\n%s", m.Property, v.Detail, historyText(res))
	}
}

// caughtOnRedis runs p (a mutant's plan) on Redis until a run goes as
// script says, and says whether property failed on it.
func (r *report) caughtOnRedis(target Redis, p *Plan, property string, script func(*schedule)) bool {
	for attempt := 1; attempt <= attemptsOnRedis; attempt++ {
		start := time.Now()
		res, err := target.Run(context.Background(), p)
		if err != nil {
			r.errorf("run %d: %v", attempt, err)
			return false
		}
		v := verdictOf(res, p, property)
		s := newSchedule(res.History, p.TTLMs)
		script(s)
		// A run off its script is no catch either: it shows a timing,
		// not the plan's defect.
		if len(s.off) > 0 {
			r.logf("run %d was not as scripted (%s): %s %v, not counted; running it again", attempt, strings.Join(s.off, "; "), property, v.Status)
			continue
		}
		if v.Status == verdict.Fail {
			r.logf("caught by %s on run %d (%.1fs): %s", property, attempt, time.Since(start).Seconds(), v.Detail)
			return true
		}
		r.errorf("run %d went as scripted, yet %s %v: %s\n%s", attempt, property, v.Status, v.Detail, historyText(res))
		return false
	}
	r.errorf("in %d runs the machine never ran the plan as scripted", attemptsOnRedis)
	return false
}

// referenceOnRedis runs ref (a mutant's plan with no mutant) on Redis
// until a run goes as script says, and notes an error for every safety
// property it fails on any run, and every property it fails on the run
// that went as scripted: the reference holds every property on the plan,
// and a run off the script, which proves nothing, is no pass. (Off the
// script, the machine may have been too slow for an operation's timeout:
// in a dry run at load 30, c1's first acquire ran out of its 500 ms, and
// available failed with no fault in force.)
func (r *report) referenceOnRedis(target Redis, ref *Plan, script func(*schedule)) {
	for attempt := 1; attempt <= attemptsOnRedis; attempt++ {
		res, err := target.Run(context.Background(), ref)
		if err != nil {
			r.errorf("the reference, run %d: %v", attempt, err)
			return
		}
		s := newSchedule(res.History, ref.TTLMs)
		script(s)
		failed := false
		for _, v := range verdictsOf(res, ref) {
			if v.Status != verdict.Fail {
				continue
			}
			if len(s.off) > 0 && !slices.Contains(prioritySafety, v.Property) {
				r.logf("the reference's run %d, off its script, fails %s (not counted): %s", attempt, v.Property, v.Detail)
				continue
			}
			failed = true
			r.errorf("the reference fails %s on run %d of the same plan: %s", v.Property, attempt, v.Detail)
		}
		if failed {
			r.errorf("the reference's history:\n%s", historyText(res))
			return
		}
		if len(s.off) == 0 {
			r.logf("the reference held every property on run %d, as scripted", attempt)
			return
		}
		r.logf("the reference's run %d was not as scripted (%s): not counted; running it again", attempt, strings.Join(s.off, "; "))
	}
	r.errorf("in %d runs the machine never ran the reference as scripted", attemptsOnRedis)
}

// verdictsOf judges res, a run of p, as the family does (the priority
// lock's plans as its own), every property.
func verdictsOf(res *prover.Result, p *Plan) []verdict.Verdict {
	c := Config{Priority: p.Kind == PriorityKind}
	return prover.Judge(res, model.Options{Family: []any{c.Judging("")}}).Verdicts
}

// verdictOf judges res, a run of p, as the family does (the priority
// lock's plans as its own) and returns property's verdict.
func verdictOf(res *prover.Result, p *Plan, property string) verdict.Verdict {
	for _, v := range verdictsOf(res, p) {
		if v.Property == property {
			return v
		}
	}
	return verdict.Verdict{Property: property, Detail: "not judged"}
}

func historyText(res *prover.Result) string {
	var b strings.Builder
	histories.Write(&b, res.History)
	return b.String()
}

// A schedule is a run's operations by process and name ("c1 acquire",
// "nemesis partition"), in order, its lost notices, and what was off the
// script in it.
type schedule struct {
	ops  map[string][]schedOp
	lost []histories.Event
	ttl  int64 // the plan's ttl, ns
	off  []string
}

// A schedOp is one operation of a run: its invoke's and completion's
// times, and how it ended ("ok", a failure's reason or "fail", "info");
// a grant's token, and the ttl its acquire asked (0: not said).
type schedOp struct {
	call, ret int64
	outcome   string
	validity  *int
	token     string
	ttlMs     int
	err       string // an info's or fail's error
}

// onScriptMargin is the least room a window of a script must have left
// for a run to count as scripted.
const onScriptMargin = int64(50 * time.Millisecond)

// newSchedule reads a run's history: each completion paired with its
// process's invoke (the nemesis's faults too: a restart from its crash to
// its return), notices left out.
func newSchedule(h []histories.Event, ttlMs int) *schedule {
	s := &schedule{ops: map[string][]schedOp{}, ttl: int64(ttlMs) * int64(time.Millisecond)}
	open := map[string]histories.Event{}
	for _, e := range h {
		if histories.IsNotice(&e) {
			s.lost = append(s.lost, e)
			continue // a lost notice may come while its process's operation is in flight
		}
		if e.Type == histories.Invoke {
			open[e.Process] = e
			continue
		}
		inv, ok := open[e.Process]
		if !ok {
			continue // a notice, not a completion
		}
		delete(open, e.Process)
		o := schedOp{call: inv.Time, ret: e.Time, outcome: string(e.Type), err: e.Error}
		if e.Type == histories.Fail {
			o.outcome = "fail"
			if lease.ValueOf(&e) != nil && lease.ValueOf(&e).Reason != "" {
				o.outcome = lease.ValueOf(&e).Reason
			}
		}
		if lease.ValueOf(&e) != nil {
			o.validity = lease.ValueOf(&e).ValidityMs
			if e.Type == histories.Ok {
				o.token = lease.ValueOf(&e).Token
			}
		}
		if lease.ValueOf(&inv) != nil && lease.ValueOf(&inv).TTLMs != nil {
			o.ttlMs = *lease.ValueOf(&inv).TTLMs
		}
		name := e.Process + " " + e.F
		s.ops[name] = append(s.ops[name], o)
	}
	return s
}

// op returns the i-th operation called name, and notes it as off the
// script unless it ended as want says ("": however it ended).
func (s *schedule) op(name string, i int, want string) schedOp {
	if i >= len(s.ops[name]) {
		s.off = append(s.off, fmt.Sprintf("no %s #%d", name, i+1))
		return schedOp{call: math.MaxInt64 / 4, ret: math.MaxInt64 / 4}
	}
	o := s.ops[name][i]
	if want != "" && o.outcome != want {
		s.off = append(s.off, fmt.Sprintf("%s #%d ended %s, not %s", name, i+1, o.outcome, want))
	}
	return o
}

// need notes why the run is off the script unless cond holds.
func (s *schedule) need(cond bool, format string, args ...any) {
	if !cond {
		s.off = append(s.off, fmt.Sprintf(format, args...))
	}
}

// certain is how long after its invoke a grant of the plan's ttl is
// certainly valid (ttl(1-drift)), less the margin; longest how long after
// its return it may be valid (ttl(1+drift)), plus the margin.
func (s *schedule) certain() int64 {
	return s.ttl - int64(math.Ceil(float64(s.ttl)*model.DefaultDrift)) - onScriptMargin
}

func (s *schedule) longest() int64 {
	return s.ttl + int64(math.Ceil(float64(s.ttl)*model.DefaultDrift)) + onScriptMargin
}

// certainOf is how long after its invoke the grant a, of the ttl its
// acquire asked (the plan's if it said none), is certainly valid
// (ttl(1-drift)), less the margin.
func (s *schedule) certainOf(a schedOp) int64 {
	ttl := s.ttl
	if a.ttlMs > 0 {
		ttl = int64(a.ttlMs) * int64(time.Millisecond)
	}
	return ttl - int64(math.Ceil(float64(ttl)*model.DefaultDrift)) - onScriptMargin
}

// timeout is the runner's bound on each server's round of an operation on
// Redis (half the plan's ttl, at least 100 ms: see Redis.Run), the
// lock's Options.Timeout: an answer later than it is lost.
func (s *schedule) timeout() int64 {
	return max(s.ttl/2, int64(100*time.Millisecond))
}

// lostTo returns the lost notice of proc naming the grant a as its thief,
// and notes the run off the script unless there is one.
func (s *schedule) lostTo(proc string, a schedOp, why string) (histories.Event, bool) {
	for _, e := range s.lost {
		if e.Process == proc && a.token != "" && lease.ValueOf(&e) != nil && lease.ValueOf(&e).Thief == a.token {
			return e, true
		}
	}
	s.off = append(s.off, fmt.Sprintf("no lost notice of %s names the grant of %s", proc, why))
	return histories.Event{}, false
}

// overlaps notes a run off the script unless b was granted after a
// returned and returned while a was certainly valid: then two leases were
// certainly valid at once.
func (s *schedule) overlaps(a, b schedOp, an, bn string) {
	s.need(b.call > a.ret, "%s began before %s returned", bn, an)
	s.need(b.ret < a.call+s.certain(), "%s returned %v after %s began, when that lease may have ended", bn, time.Duration(b.ret-a.call), an)
}

// late notes a run off the script unless the refresh f began after the
// grant a could be valid.
func (s *schedule) late(a, f schedOp) {
	s.need(f.call > a.ret+s.longest(), "the refresh began %v after the grant returned, when the lease may still have been valid", time.Duration(f.call-a.ret))
}

// partitioned notes a run off the script unless the plan's partition
// held throughout a.
func (s *schedule) partitioned(a schedOp) {
	p, h := s.op("nemesis partition", 0, "info"), s.op("nemesis heal", 0, "info")
	s.need(p.ret < a.call && h.call > a.ret, "the partition was not in force throughout c1's acquire")
}

// onScript says, for each mutant's plan, what a run of it must show to
// have gone as scripted; a run that did must fail the mutant's property.
var onScript = map[string]func(*schedule){
	// c1's lease expires; c2 takes the lock; c1's late release deletes
	// c2's key; c3 takes the lock while c2 holds it.
	"plain-del-release": func(s *schedule) {
		s.op("c1 acquire", 0, "ok")
		a2 := s.op("c2 acquire", 0, "ok")
		s.op("c1 release", 0, "ok")
		s.overlaps(a2, s.op("c3 acquire", 0, "ok"), "c2's acquire", "c3's acquire")
	},
	// c1's lease expires; c2 takes the lock; c1's late PEXPIRE extends
	// c2's key and reports success.
	"plain-pexpire-refresh": func(s *schedule) {
		a1 := s.op("c1 acquire", 0, "ok")
		s.op("c2 acquire", 0, "ok")
		s.late(a1, s.op("c1 refresh", 0, "ok"))
	},
	// c1 refreshes after its lease expired: the refresh script finds no
	// token and answers 0, counted as a success.
	"always-ok": func(s *schedule) {
		s.late(s.op("c1 acquire", 0, "ok"), s.op("c1 refresh", 0, "ok"))
	},
	// c1 refreshes after its key expired: the refresh sets it again.
	"setnx-on-extend": func(s *schedule) {
		s.late(s.op("c1 acquire", 0, "ok"), s.op("c1 refresh", 0, "ok"))
	},
	// Two servers, one of them restarted empty while c1 holds both: c2
	// is granted by that one, which is "half".
	"quorum-half": func(s *schedule) {
		s.overlaps(s.op("c1 acquire", 0, "ok"), s.op("c2 acquire", 0, "ok"), "c1's acquire", "c2's acquire")
	},
	// c1 is cut from one of three servers: its acquire and fence rounds
	// each wait out that server's timeout, half the ttl, and the grant
	// has no validity left (negative validity_ms).
	"no-validity-check": func(s *schedule) {
		s.partitioned(s.op("c1 acquire", 0, "ok"))
	},
	// The same plan: the second the grant took is not subtracted.
	"no-elapsed": func(s *schedule) {
		s.partitioned(s.op("c1 acquire", 0, "ok"))
	},
	// A grant of 5 s claims its whole ttl from the lock's start, 50 ms
	// more than ttl(1-drift). The claim tells when the lock started; a
	// run whose invoke was recorded that long after proves nothing.
	"no-drift": func(s *schedule) {
		a := s.op("c1 acquire", 0, "ok")
		if a.validity == nil {
			s.need(false, "the grant said no validity")
			return
		}
		lag := s.ttl - (a.ret + int64(*a.validity)*int64(time.Millisecond) - a.call)
		s.need(lag < int64(math.Ceil(float64(s.ttl)*model.DefaultDrift))-int64(time.Millisecond),
			"the invoke was recorded %v after the lock's start", time.Duration(lag))
	},
	// Two servers: c1's release is held from server 2 by a partition
	// while c2's acquire is granted by server 1 (already released) and
	// refused by server 2; c2 fails and leaves its key on server 1. Once
	// c1's release returns ok, c3 alone is refused by that key.
	"no-cleanup": func(s *schedule) {
		r1 := s.op("c1 release", 0, "ok")
		a2 := s.op("c2 acquire", 0, "full")
		a3 := s.op("c3 acquire", 0, "full")
		h := s.op("nemesis heal", 0, "info")
		s.need(a3.call > max(r1.ret, a2.ret, h.ret), "c3's acquire did not run alone, after c1's release, c2's acquire and the heal")
	},
	// c2's acquire is refused by c1's key and its answer lost: its
	// cleanup's compare-and-delete, with the same token, deletes c1's
	// key, and c3 takes the lock while c1 holds it.
	"constant-token": func(s *schedule) {
		a1 := s.op("c1 acquire", 0, "ok")
		s.op("c2 acquire", 0, "info")
		s.overlaps(a1, s.op("c3 acquire", 0, "ok"), "c1's acquire", "c3's acquire")
	},
	// c2, of c1's priority, acquires while c1's lease is certainly valid:
	// it must be refused (the mutant steals).
	"equal-steals": func(s *schedule) {
		a1 := s.op("c1 acquire", 0, "ok")
		a2 := s.op("c2 acquire", 0, "ok")
		s.need(a2.call > a1.ret && a2.call < a1.call+s.certain(), "c2's acquire did not begin while c1's lease was certainly valid")
	},
	"no-ack-wait":            cutVictim,
	"proceed-on-ack-timeout": cutVictim,
	"steal-resets-ttl":       deadVictim,
	"ack-before-lost":        slowAck,
	"direct-victim-only":     failedStealRobbed,
}

// refOnScript says, for a mutant's plan, what the reference's run of it
// must show to count as a pass (the mutant's script, where it says
// nothing that only the mutant does); a mutant without one has its
// reference judged on its property, on one run, whatever its timing.
var refOnScript = map[string]func(*schedule){
	"steal-resets-ttl":   deadVictim,
	"ack-before-lost":    slowAck,
	"direct-victim-only": failedStealRobbed,
}
