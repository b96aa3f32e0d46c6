package dbsemaphore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/lockprover/lockprover/dbsem"
	"github.com/lockprover/lockprover/families/lease"
	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/model"
	"github.com/lockprover/lockprover/prover"
)

// restartDowntime is how long a restarted server refuses connections.
const restartDowntime = 200 * time.Millisecond

// A client that cannot open the semaphore (the server restarting, its
// connection cut) tries openTries times, openBackoff apart.
const (
	openTries   = 100
	openBackoff = 50 * time.Millisecond
)

// Simulate runs p against the reference (or p's mutant of it) on a fresh
// simulated database: the same plan always gives the same history. trace,
// if set, receives the simulator's trace.
func Simulate(p *Plan, trace io.Writer) (*prover.Result, error) {
	b := newSimBackend(p, trace)
	r := newRunner(context.Background(), p, b)
	r.begin()
	if err := b.w.Run(); err != nil {
		return nil, err
	}
	return r.result()
}

// newRunner makes a runner of p on b, recording by b's clock.
func newRunner(ctx context.Context, p *Plan, b backend) *runner {
	r := &runner{ctx: ctx, p: p, b: b, prefix: "lp_", clients: map[string]*client{}, offsets: map[string]time.Duration{}}
	r.rec = histories.NewRecorder(b.Now)
	return r
}

// begin starts the plan: the key is set up with the plan's max before
// anything else (the first acquire of a key records its max), so that a
// client's acquire with another max disagrees with it rather than setting
// it; then the clients and the nemesis start.
func (r *runner) begin() {
	setup := &client{script: []Step{{Op: histories.Acquire}, {Op: histories.Release}}}
	r.clients["setup"] = setup
	r.afterSetup = func() {
		for i, script := range r.p.Clients {
			name := clientName(i)
			st := &client{script: script}
			r.clients[name] = st
			r.start(name, st)
		}
		r.nemesis()
	}
	r.b.Lock()
	defer r.b.Unlock()
	r.start("setup", setup)
}

// result is the run's history and evidence, or why the plan did not end.
func (r *runner) result() (*prover.Result, error) {
	r.b.Lock()
	defer r.b.Unlock()
	if r.stuck != nil {
		return nil, r.stuck
	}
	return &prover.Result{History: r.rec.Events(), Evidence: model.Evidence{Lock: r.p.Key, Problems: r.problems}}, nil
}

// A client is a process's place in its script and the lease it believes
// it holds; both survive a kill (the restarted process goes on with its
// script, holding nothing).
type client struct {
	script []Step
	pos    int
	token  string
	gen    int    // incarnations started
	proc   string // the current incarnation's process in the simulator
	// dropArmed: the reply to the process's next COMMIT will be dropped.
	dropArmed bool
	done      bool // its script has ended
	running   *histories.Event
}

// runner runs one plan on the simulator.
type runner struct {
	ctx      context.Context
	p        *Plan
	b        backend
	prefix   string // of the semaphore's tables
	rec      *histories.Recorder
	clients  map[string]*client
	offsets  map[string]time.Duration // clock offsets in force, by target ("" the server)
	problems []string
	// held are the pauses and partitions in force, by fault and target;
	// each lasts until its end (resume, heal) or the end of the run.
	held map[heldBy]bool
	// afterSetup starts the clients and the nemesis once the key is set up.
	afterSetup func()
	stuck      error // the plan did not finish
	ending     bool  // the faults have ended: no new one strikes
}

// start starts an incarnation of client name.
//
// Each incarnation is a process of its own in the simulator (c1, then
// c1#2 after a kill, ...): a killed process stops only at its next safe
// call, and until then it may still be running its code, which the
// runner then ignores (see live).
func (r *runner) start(name string, st *client) {
	st.gen++
	gen := st.gen
	st.proc = name
	if gen > 1 {
		st.proc = fmt.Sprintf("%s#%d", name, gen)
	}
	r.b.Go(st.proc, func(proc proc) {
		r.b.Lock()
		defer r.b.Unlock()
		r.run(proc, name, st, gen)
	})
}

// live says whether incarnation gen is the client's current one: a killed
// one's code may run on for a while, and must neither record nor move the
// script.
func (st *client) live(gen int) bool { return st.gen == gen }

// run is one incarnation of a client: it opens the semaphore and works
// through the rest of its script.
func (r *runner) run(proc proc, name string, st *client, gen int) {
	ctx := r.ctx
	// The server may be restarting, or a fault may cut the connection
	// while the tables are made: try again, as a client would, for a while.
	// An implementation that fails itself is not tried again.
	var sem Client
	var err error
	o, s := r.options(proc, name, gen), r.session()
	for try := 0; try < openTries && ctx.Err() == nil; try++ {
		if r.outside(func() { sem, err = r.b.open(ctx, proc, name, o, s) }); err == nil {
			break
		}
		var ie *prover.ImplementationError
		if errors.As(err, &ie) {
			break
		}
		r.sleep(proc, openBackoff)
	}
	if sem == nil && err == nil {
		// The run was cancelled before a try: it ends, recording nothing.
		st.done = true
		return
	}
	if !st.live(gen) {
		return
	}
	switch {
	case isImplementationError(err):
		r.problems = append(r.problems, err.Error())
		st.done = true
		return
	case err != nil:
		r.problems = append(r.problems, fmt.Sprintf("%s could not open the semaphore in %d tries: %v", name, openTries, err))
		st.done = true
		return
	}
	for st.pos < len(st.script) && st.live(gen) {
		s := st.script[st.pos]
		st.pos++
		r.step(ctx, proc, sem, name, st, gen, s)
		if pc, ok := sem.(ProcessClient); ok && st.live(gen) {
			if why := pc.Crashed(); why != "" {
				r.problems = append(r.problems, fmt.Sprintf("%s %s", name, why))
				r.b.Kill(st.proc)
				st.done = true
				return
			}
		}
	}
	if !st.live(gen) {
		return
	}
	st.done = true
	if name == "setup" {
		r.afterSetup()
	}
}

// options are the reference's options for one incarnation: the plan's,
// its mutant's defect, tokens drawn from the plan's seed, and the client's
// own (virtual, skewable) clock for a defect that reads it.
func (r *runner) options(proc proc, name string, gen int) dbsem.Options {
	o := dbsem.Options{Prefix: r.prefix, Fencing: r.p.Options.Fencing,
		Random: rand.NewChaCha8(seedFor(r.p.ScheduleSeed, name, gen))}
	if r.p.Options.Design == "row-per-slot" {
		o.Design = dbsem.RowPerSlot
	}
	if m := MutantNamed(r.p.Mutant); m != nil {
		m.defects(&o.Defects)
		if m.options != nil {
			var po Options
			m.options(&po)
			if po.Design == "row-per-slot" {
				o.Design = dbsem.RowPerSlot
			} else if po.Design == "master-row" {
				o.Design = dbsem.MasterRow
			}
			o.Fencing = o.Fencing || po.Fencing
		}
		if o.Defects.ClientClockExpiry {
			// The client's own clock: true time and its clock faults. The
			// simulator's session clocks know nothing of it: a client's
			// clock is not the database's.
			o.Defects.Now = func() time.Time {
				r.b.Lock()
				defer r.b.Unlock()
				return proc.Now().Add(r.offsets[name])
			}
		}
	}
	return o
}

// session is what a client process of the implementation under test is
// told (the backend sets the DSN).
func (r *runner) session() Session {
	return Session{Key: r.p.Key, Prefix: r.prefix, Max: r.p.Max, TTL: time.Duration(r.p.TTLMs) * time.Millisecond,
		Design: r.p.Options.Design, Fencing: r.p.Options.Fencing}
}

// seedFor is the seed of one incarnation's tokens.
func seedFor(seed uint64, name string, gen int) [32]byte {
	var s [32]byte
	b := make([]byte, 0, 64)
	hex := strconv.AppendUint(make([]byte, 0, 16), seed, 16)
	for range 16 - len(hex) {
		b = append(b, '0')
	}
	b = append(append(append(b, hex...), name...), '#')
	copy(s[:], strconv.AppendInt(b, int64(gen), 10)) // fmt's "%016x%s#%d", without its allocations
	return s
}

// step runs one line of a client's script.
func (r *runner) step(ctx context.Context, proc proc, sem Client, name string, st *client, gen int, s Step) {
	ttl := time.Duration(r.p.TTLMs) * time.Millisecond
	e := histories.Event{Process: name, Type: histories.Invoke, F: s.Op, Lock: r.p.Key, Kind: histories.Lease}
	switch {
	case s.Op == Sleep:
		r.sleep(proc, time.Duration(s.Ms)*time.Millisecond)
		return
	case s.Op == histories.Acquire && st.token == "":
		m := r.p.Max
		if s.Max > 0 {
			m = s.Max
		}
		e.Value = maxTTLValue(m, r.p.TTLMs)
		r.invoke(st, e)
		var l dbsem.Lease
		var err error
		r.outside(func() { l, err = sem.Acquire(ctx, r.p.Key, ttl, m) })
		if st.live(gen) {
			r.acquired(st, e, l, err)
		}
	case s.Op == histories.Refresh && st.token != "":
		e.Value = tokenTTLValue(st.token, r.p.TTLMs)
		r.invoke(st, e)
		token := st.token
		var err error
		if r.outside(func() { err = sem.Refresh(ctx, r.p.Key, token, ttl) }); st.live(gen) {
			r.changed(st, e, err)
		}
	case s.Op == histories.Release && st.token != "":
		e.Value = &histories.Value{Token: st.token}
		r.invoke(st, e)
		token := st.token
		var err error
		if r.outside(func() { err = sem.Release(ctx, r.p.Key, token) }); st.live(gen) {
			r.changed(st, e, err)
		}
	}
}

func (r *runner) invoke(st *client, e histories.Event) {
	e = r.rec.Add(e)
	st.running = &e
}

// complete records the completion of the client's operation in flight.
func (r *runner) complete(st *client, typ histories.Type, v *histories.Value, err error) {
	if st.dropArmed && errors.Is(err, dbsem.ErrUnknownOutcome) {
		// The COMMIT whose reply was dropped was this operation's (the
		// reference says so; a mutant that retries hides it).
		st.dropArmed = false
		dv := &histories.Value{Process: st.running.Process}
		r.rec.Add(histories.Event{Process: "nemesis", Type: histories.Invoke, F: histories.DropReply, Value: dv})
		r.rec.Add(histories.Event{Process: "nemesis", Type: histories.Info, F: histories.DropReply, Value: dv})
	}
	e := *st.running
	st.running = nil
	e.Type, e.Value, e.Error = typ, v, ""
	if err != nil {
		e.Error = err.Error()
	}
	r.rec.Add(e)
}

// acquired records an acquire's outcome.
func (r *runner) acquired(st *client, inv histories.Event, l dbsem.Lease, err error) {
	switch {
	case err == nil:
		v := tokenValue(l.Token, r.p.Options.Fencing || l.Fence != 0, int(l.Fence))
		st.token = l.Token
		r.complete(st, histories.Ok, v, nil)
	case errors.Is(err, dbsem.ErrFull):
		r.complete(st, histories.Fail, &histories.Value{Reason: histories.Full}, nil)
	case errors.Is(err, ErrNotGranted):
		// Not granted (a disagreeing max, a lost connection before the
		// COMMIT): a failure that claims nothing about the semaphore.
		r.complete(st, histories.Fail, nil, err)
	default:
		r.complete(st, histories.Info, nil, err) // granted or not: the client lets it expire
	}
}

// changed records a refresh's or release's outcome.
func (r *runner) changed(st *client, inv histories.Event, err error) {
	switch {
	case err == nil:
		if inv.F == histories.Release {
			st.token = ""
		}
		r.complete(st, histories.Ok, nil, nil)
	case errors.Is(err, dbsem.ErrExpired):
		st.token = ""
		r.complete(st, histories.Fail, &histories.Value{Reason: histories.Expired}, nil)
	default:
		if inv.F == histories.Release {
			st.token = "" // the client gives up on it either way
		}
		r.complete(st, histories.Info, nil, err)
	}
}

// nemesis arranges the plan's faults, ends those that last until the end
// once every client is done, and then probes the semaphore.
func (r *runner) nemesis() {
	type event struct {
		at    int
		fault Fault
		end   bool
	}
	var evs []event
	for _, f := range r.p.Nemesis {
		if f.AfterStatements > 0 {
			f := f
			r.b.AfterStatements(f.Target, f.AfterStatements, func() {
				if r.ending {
					return // the faults have ended: the run is closing
				}
				r.strike(f, false)
				if f.For > 0 {
					// It lasts For from when it struck.
					r.b.After(time.Duration(f.For)*time.Millisecond, func() { r.strike(f, true) })
				}
			})
			continue
		}
		evs = append(evs, event{f.At, f, false})
		if f.For > 0 {
			evs = append(evs, event{f.At + f.For, f, true})
		}
	}
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].at < evs[j].at })
	r.b.Go("nemesis", func(proc proc) {
		r.b.Lock()
		defer r.b.Unlock()
		start := r.b.Now()
		for _, e := range evs {
			if d := time.Duration(e.at)*time.Millisecond - time.Duration(r.b.Now()-start); d > 0 {
				r.sleep(proc, d)
			}
			r.strike(e.fault, e.end)
		}
		if !r.await(proc, true) {
			return
		}
		r.ending = true
		r.endFaults()
		if !r.await(proc, false) {
			return
		}
		// Every lease has expired (or been released) once ttl and a margin
		// have passed: a probe must find the semaphore free.
		r.sleep(proc, time.Duration(r.p.TTLMs)*time.Millisecond+lease.Margin)
		for i := 0; i < r.p.Max; i++ {
			name := fmt.Sprintf("probe%d", i+1)
			st := &client{script: []Step{{Op: histories.Acquire}}}
			r.clients[name] = st
			r.start(name, st)
		}
	})
}

// A heldBy is a fault that holds a client until it ends: a pause or a
// partition, and its target.
type heldBy struct{ fault, target string }

// await waits until every client is done (but those paused or
// partitioned, with exceptHeld), for at most the backend's stuckAfter (an hour of virtual
// time on the simulator) or until the run is cancelled; then it says why
// the plan is stuck (the run returns it) and ends every process.
func (r *runner) await(proc proc, exceptHeld bool) bool {
	for start := r.b.Now(); !r.allDone(exceptHeld); r.sleep(proc, 10*time.Millisecond) {
		if err := r.ctx.Err(); err != nil {
			r.stuck = err
			r.killAll()
			return false
		}
		if time.Duration(r.b.Now()-start) > r.b.stuckAfter() {
			var names []string
			for name, st := range r.clients {
				if !st.done {
					names = append(names, name)
				}
			}
			sort.Strings(names)
			r.stuck = fmt.Errorf("dbsemaphore: the plan did not finish within %s: %s still running", r.within(), strings.Join(names, ", "))
			r.killAll()
			return false
		}
	}
	return true
}

// within says how long await waits, for its message.
func (r *runner) within() string {
	if _, ok := r.b.(simBackend); ok {
		return "an hour of virtual time"
	}
	return r.b.stuckAfter().String()
}

// killAll kills every client not done.
func (r *runner) killAll() {
	var names []string
	for name, st := range r.clients {
		if !st.done {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		r.b.Kill(r.procOf(name))
		r.clients[name].done = true
	}
}

// outside runs f, a call that may wait (a statement), without the
// runner's lock.
func (r *runner) outside(f func()) {
	r.b.Unlock()
	defer r.b.Lock()
	f()
}

// sleep lets d pass for proc, without the runner's lock.
func (r *runner) sleep(proc proc, d time.Duration) { r.outside(func() { proc.Sleep(d) }) }

// allDone says whether every client has ended its script (but those
// paused or partitioned, with exceptHeld).
func (r *runner) allDone(exceptHeld bool) bool {
	for name, st := range r.clients {
		held := r.held[heldBy{histories.Pause, name}] || r.held[heldBy{histories.Partition, name}]
		if !st.done && !(exceptHeld && held) {
			return false
		}
	}
	return true
}

// endFaults ends the faults meant to last until the end: pauses,
// partitions and clock offsets.
func (r *runner) endFaults() {
	var held []heldBy
	for h, on := range r.held {
		if on {
			held = append(held, h)
		}
	}
	sort.Slice(held, func(i, j int) bool {
		return held[i].target < held[j].target || held[i].target == held[j].target && held[i].fault < held[j].fault
	})
	for _, h := range held {
		r.strike(Fault{Fault: h.fault, Target: h.target}, true)
	}
	var clocks []string
	for target, off := range r.offsets {
		if off != 0 {
			clocks = append(clocks, target)
		}
	}
	sort.Strings(clocks)
	for _, target := range clocks {
		r.strike(Fault{Fault: histories.ClockSkew, Target: target}, true)
	}
}

// strike applies a fault (or, with end, ends it: resume, clock reset) and
// records it as nemesis events.
func (r *runner) strike(f Fault, end bool) {
	name, v := f.Fault, &histories.Value{}
	if f.Target != "" {
		v.Process = f.Target
	}
	switch {
	case end && histories.EndOf(f.Fault) != "":
		if !r.held[heldBy{f.Fault, f.Target}] {
			return
		}
		name = histories.EndOf(f.Fault)
	case end:
		if r.offsets[f.Target] == 0 {
			return
		}
		name = histories.ClockReset
	case histories.IsClockFault(f.Fault):
		v.OffsetMs = histories.Int(f.OffsetMs)
	}
	if v.Process == "" && v.OffsetMs == nil {
		v = nil
	}
	if name == histories.DropReply {
		// Armed now, in place only at the target's next COMMIT: recorded
		// then (see complete), so that the history shows it in force
		// while the operation whose reply it lost ran.
		if st := r.clients[f.Target]; st != nil && !st.done {
			st.dropArmed = true
			r.apply(name, f)
		}
		return
	}
	// Recorded once in place: struck from the nemesis's process, a fault
	// on the simulator is applied when the scheduler serves it, and a
	// fault a hook strikes meanwhile must not come between the two events
	// (nor a resume between a pause and its taking effect).
	r.apply(name, f)
	r.rec.Add(histories.Event{Process: "nemesis", Type: histories.Invoke, F: name, Value: v})
	r.rec.Add(histories.Event{Process: "nemesis", Type: histories.Info, F: name, Value: v})
	if name == histories.Kill {
		r.restart(f.Target)
	}
}

// apply makes the simulator strike fault name.
func (r *runner) apply(name string, f Fault) {
	if r.held == nil {
		r.held = map[heldBy]bool{}
	}
	// A hold is noted once the backend has done it (see strike), its end
	// before: the backend may run what the end lets through at once, and a
	// hook there may strike a new hold.
	switch name {
	case histories.Kill:
		r.b.Kill(r.procOf(f.Target))
		// A new incarnation starts unpaused, with connections of its own.
		r.held[heldBy{histories.Pause, f.Target}] = false
		r.held[heldBy{histories.Partition, f.Target}] = false
	case histories.Pause:
		r.b.Pause(r.procOf(f.Target))
		r.held[heldBy{histories.Pause, f.Target}] = true
	case histories.Resume:
		r.held[heldBy{histories.Pause, f.Target}] = false
		r.b.Resume(r.procOf(f.Target))
	case histories.Partition:
		r.b.Partition(r.procOf(f.Target))
		r.held[heldBy{histories.Partition, f.Target}] = true
	case histories.Heal:
		r.held[heldBy{histories.Partition, f.Target}] = false
		r.b.Heal(r.procOf(f.Target))
	case histories.ForceClose:
		r.b.KillConnections(r.procOf(f.Target))
	case histories.DropReply:
		r.b.DropCommitReply(r.procOf(f.Target))
	case histories.RestartBroker:
		r.b.Restart(restartDowntime)
	case histories.ClockSkew:
		r.offsets[f.Target] = time.Duration(f.OffsetMs) * time.Millisecond
	case histories.ClockJump:
		r.offsets[f.Target] += time.Duration(f.OffsetMs) * time.Millisecond
	case histories.ClockReset:
		r.offsets[f.Target] = 0
	}
	if histories.IsClockFault(name) && f.Target == "" {
		// The server's clock: every session's. A client's clock is its
		// own (see options), which the reference never reads.
		r.b.SkewServerClock(r.offsets[""])
	}
}

// restart starts a killed client again: its operation in flight ends
// unknown, and it holds nothing.
func (r *runner) restart(name string) {
	st := r.clients[name]
	if st == nil || st.done {
		return
	}
	if st.running != nil {
		r.complete(st, histories.Info, nil, errors.New("killed"))
	}
	st.token, st.dropArmed = "", false // the new incarnation's COMMITs are its own
	r.start(name, st)
}

// procOf is the simulator's process of client name's current incarnation.
func (r *runner) procOf(name string) string {
	if st := r.clients[name]; st != nil && st.proc != "" {
		return st.proc
	}
	return name
}

// isImplementationError is errors.As(err, &ie) for a
// *prover.ImplementationError ie, in a function of its own so that ie
// escapes only when there is an error to look into.
func isImplementationError(err error) bool {
	var ie *prover.ImplementationError
	return errors.As(err, &ie)
}

// A boxedValue is a history Value with room for the numbers it points to,
// so that a Value and its fields are one allocation rather than one each
// (histories.Int).
type boxedValue struct {
	v    histories.Value
	a, b int
}

// maxTTLValue is an acquire's Value: max and ttl_ms.
func maxTTLValue(max, ttlMs int) *histories.Value {
	x := &boxedValue{a: max, b: ttlMs}
	x.v.Max, x.v.TTLMs = &x.a, &x.b
	return &x.v
}

// tokenTTLValue is a refresh's Value: the token and ttl_ms.
func tokenTTLValue(token string, ttlMs int) *histories.Value {
	x := &boxedValue{v: histories.Value{Token: token}, a: ttlMs}
	x.v.TTLMs = &x.a
	return &x.v
}

// tokenValue is a granted acquire's Value: the token, and its fence if
// fenced.
func tokenValue(token string, fenced bool, fence int) *histories.Value {
	x := &boxedValue{v: histories.Value{Token: token}, a: fence}
	if fenced {
		x.v.Fence = &x.a
	}
	return &x.v
}
