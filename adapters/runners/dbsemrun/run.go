package dbsemrun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"sort"
	"time"

	"github.com/lockprover/lockprover/adapters/runners/leaserun"
	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/internal/prover/run"
	"github.com/lockprover/lockprover/model/dbsem"
	"github.com/lockprover/lockprover/model/lease"
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
	b, state := newSimPlace(p, trace)
	r := newRunner(context.Background(), p, b)
	state(b.w.Unseen(), b.w, r) // an exhaustive search's state at a choice
	r.begin()
	if err := b.w.Run(); err != nil {
		return nil, err
	}
	return r.Result(r.p.Key)
}

// newRunner makes a runner of p on b, recording by b's clock.
func newRunner(ctx context.Context, p *Plan, b place) *runner {
	r := &runner{ctx: ctx, p: p, b: b, prefix: "lp_", clients: map[string]*client{}, offsets: map[string]time.Duration{}}
	r.Init(run.Config{Lock: b, Now: b.Now, Poll: poll, Ends: ends})
	return r
}

// poll is how the runner awaits the end of its clients: every 10 ms.
var poll = run.Poll{First: 10 * time.Millisecond, Max: 10 * time.Millisecond}

// ends is the order in which a client's partition and pause end at the
// quiescent end.
var ends = []string{histories.Partition, histories.Pause}

// begin starts the plan: the key is set up with the plan's max before
// anything else (the first acquire of a key records its max), so that a
// client's acquire with another max disagrees with it rather than setting
// it; then the clients and the nemesis start.
func (r *runner) begin() {
	setup := r.add("setup", []Step{{Op: histories.Acquire}, {Op: histories.Release}})
	r.afterSetup = func() {
		for i, script := range r.p.Clients {
			name := leaserun.ClientName(i)
			r.start(name, r.add(name, script))
		}
		r.nemesis()
	}
	r.b.Lock()
	defer r.b.Unlock()
	r.start("setup", setup)
}

// A client is a process's place in its script and the lease it believes
// it holds; both survive a kill (the restarted process goes on with its
// script, holding nothing). Its Gen counts the incarnations started.
type client struct {
	run.Proc
	script []Step
	pos    int
	token  string
	// dropArmed: the reply to the process's next COMMIT will be dropped;
	// dropBase is how many of its replies had been dropped when it was
	// armed (where the place can tell).
	dropArmed bool
	dropBase  int
}

// runner runs one plan on a place, on the skeleton every family's runner
// shares (run.Runner: processes, nemesis, holds, the quiescent end; its
// lock is the place's).
type runner struct {
	run.Runner
	ctx     context.Context
	p       *Plan
	b       place
	prefix  string // of the semaphore's tables
	clients map[string]*client
	offsets map[string]time.Duration // clock offsets in force, by target ("" the server)
	// afterSetup starts the clients and the nemesis once the key is set up.
	afterSetup func()
}

// add registers client name with its script.
func (r *runner) add(name string, script []Step) *client {
	st := &client{Proc: run.Proc{Name: name}, script: script}
	return run.Register(&r.Runner, r.clients, &st.Proc, st)
}

// start starts an incarnation of client name.
//
// Each incarnation is a process of its own in the simulator (c1, then
// c1#2 after a kill, ...): a killed process stops only at its next safe
// call, and until then it may still be running its code, which the
// runner then ignores (see live).
func (r *runner) start(name string, st *client) {
	run.Start(&r.Runner, &st.Proc, r.b.Go, func(proc proc, gen int) { r.run(proc, name, st, gen) })
}

// run is one incarnation of a client: it opens the semaphore and works
// through the rest of its script.
func (r *runner) run(proc proc, name string, st *client, gen int) {
	ctx := r.ctx
	// The server may be restarting, or a fault may cut the connection
	// while the tables are made: try again, as a client would, for a while.
	// An implementation that fails itself is not tried again.
	var sem Client
	o, s := r.options(proc, name, gen), r.session()
	err := run.Retry(openTries, openBackoff, func(d time.Duration) error { r.sleep(proc, d); return nil }, func() error {
		if ctx.Err() != nil {
			return run.Stop
		}
		var err error
		r.Outside(func() { sem, err = r.b.open(ctx, proc, name, o, s) })
		return err
	})
	if sem == nil && err == nil {
		// The run was cancelled: it ends, recording nothing.
		st.Done = true
		return
	}
	if !st.Live(gen) {
		return
	}
	switch {
	case isImplementationError(err):
		r.Problems = append(r.Problems, err.Error())
		st.Done = true
		return
	case err != nil:
		r.Problems = append(r.Problems, fmt.Sprintf("%s could not open the semaphore in %d tries: %v", name, openTries, err))
		st.Done = true
		return
	}
	for st.pos < len(st.script) && st.Live(gen) {
		s := st.script[st.pos]
		st.pos++
		r.step(ctx, proc, sem, name, st, gen, s)
		if pc, ok := sem.(ProcessClient); ok && st.Live(gen) {
			if why := pc.Crashed(); why != "" {
				// The process is gone (it exited, or hung and was given
				// up): what it held is lost, and the client goes on as a
				// new process, as after a kill. The kill is recorded
				// after the operation ended, so it excuses nothing.
				r.Problems = append(r.Problems, fmt.Sprintf("%s %s", name, why))
				r.strike(Fault{Fault: histories.Kill, Target: name}, false)
				return
			}
		}
	}
	if !st.Live(gen) {
		return
	}
	st.Done = true
	if name == "setup" {
		r.afterSetup()
	}
}

// options are the reference's options for one incarnation: the plan's,
// its mutant's defect, tokens drawn from the plan's seed, and the client's
// own (virtual, skewable) clock for a defect that reads it.
func (r *runner) options(proc proc, name string, gen int) dbsem.Options {
	o := dbsem.Options{Prefix: r.prefix, Fencing: r.p.Options.Fencing,
		Random: rand.NewChaCha8(run.Seed(r.p.ScheduleSeed, name, gen))}
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
// told (the place sets the DSN).
func (r *runner) session() Session {
	return Session{Key: r.p.Key, Prefix: r.prefix, Max: r.p.Max, TTL: time.Duration(r.p.TTLMs) * time.Millisecond,
		Design: r.p.Options.Design, Fencing: r.p.Options.Fencing}
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
		r.Invoke(&st.Proc, e)
		var l dbsem.Lease
		var err error
		r.Outside(func() { l, err = sem.Acquire(ctx, r.p.Key, ttl, m) })
		if st.Live(gen) {
			r.acquired(st, e, l, err, grantedMs(sem))
		}
	case s.Op == histories.Refresh && st.token != "":
		e.Value = tokenTTLValue(st.token, r.p.TTLMs)
		r.Invoke(&st.Proc, e)
		token := st.token
		var err error
		if r.Outside(func() { err = sem.Refresh(ctx, r.p.Key, token, ttl) }); st.Live(gen) {
			r.changed(st, e, err, grantedMs(sem))
		}
	case s.Op == histories.Release && st.token != "":
		e.Value = &lease.Value{Token: st.token}
		r.Invoke(&st.Proc, e)
		token := st.token
		var err error
		if r.Outside(func() { err = sem.Release(ctx, r.p.Key, token) }); st.Live(gen) {
			r.changed(st, e, err, nil)
		}
	}
}

// dropStruck says whether the reply drop armed on st's process struck the
// operation that ended as typ with err. On a real server, whether its
// proxy dropped a COMMIT reply since it was armed, whatever the outcome
// and the error say (an implementation in a process says it in its own
// words: "the acquire's COMMIT got no reply"); an implementation that
// commits inside stored procedures sends no COMMIT, and an operation of
// unknown outcome meanwhile is not the drop's doing. On the simulator,
// whether the reference said its COMMIT got no reply.
func (r *runner) dropStruck(name string, st *client, typ histories.Type, err error) bool {
	n, known := r.b.droppedReplies(r.ProcessOf(name))
	if known {
		return n > st.dropBase
	}
	return typ == histories.Info && errors.Is(err, dbsem.ErrUnknownOutcome)
}

// complete records the completion of the client's operation in flight.
func (r *runner) complete(st *client, typ histories.Type, v *lease.Value, err error) {
	e, _ := r.InFlight(&st.Proc)
	if st.dropArmed && r.dropStruck(e.Process, st, typ, err) {
		// The COMMIT whose reply was dropped was this operation's (the
		// reference says so, or the proxy saw it dropped: then it is
		// recorded whatever the outcome, since it struck, and disarmed,
		// so that it is never charged to a later operation; on the
		// simulator a mutant that retries hides it).
		st.dropArmed = false
		r.Struck(histories.DropReply, &histories.Fault{Process: e.Process})
	}
	r.Finish(&st.Proc, typ, histories.Of(v), err)
}

// acquired records an acquire's outcome; granted is the lease's ttl in
// ms where the implementation said it (grantedMs), nil where it did not.
func (r *runner) acquired(st *client, inv histories.Event, l dbsem.Lease, err error, granted *int) {
	switch {
	case err == nil:
		v := tokenValue(l.Token, r.p.Options.Fencing || l.Fence != 0, int(l.Fence))
		v.TTLMs = granted
		st.token = l.Token
		r.complete(st, histories.Ok, v, nil)
	case errors.Is(err, dbsem.ErrFull):
		r.complete(st, histories.Fail, &lease.Value{Reason: histories.Full}, nil)
	case errors.Is(err, ErrNotGranted):
		// Not granted (a disagreeing max, a lost connection before the
		// COMMIT): a failure that claims nothing about the semaphore.
		r.complete(st, histories.Fail, nil, err)
	default:
		r.complete(st, histories.Info, nil, err) // granted or not: the client lets it expire
	}
}

// changed records a refresh's or release's outcome; granted as for
// acquired.
func (r *runner) changed(st *client, inv histories.Event, err error, granted *int) {
	switch {
	case err == nil:
		if inv.F == histories.Release {
			st.token = ""
		}
		var v *lease.Value
		if granted != nil {
			v = &lease.Value{TTLMs: granted}
		}
		r.complete(st, histories.Ok, v, nil)
	case errors.Is(err, dbsem.ErrExpired):
		st.token = ""
		r.complete(st, histories.Fail, &lease.Value{Reason: histories.Expired}, nil)
	default:
		if inv.F == histories.Release {
			st.token = "" // the client gives up on it either way
		}
		r.complete(st, histories.Info, nil, err)
	}
}

// nemesis arranges the plan's faults (those counted in statements on
// their targets' hooks), and starts the nemesis's process
// (run.Runner.Nemesis): it strikes the timed faults, ends those that last
// until the end once every client is done, waits out every lease, and
// probes the semaphore.
func (r *runner) nemesis() {
	for _, f := range r.p.Nemesis {
		if f.AfterStatements > 0 {
			r.b.AfterStatements(f.Target, f.AfterStatements, func() { r.strikeCounted(f) })
		}
	}
	timeline := run.Timeline(len(r.p.Nemesis), func(i int) (int, int, bool) {
		f := r.p.Nemesis[i]
		return f.At, f.For, f.AfterStatements <= 0
	})
	r.b.Go("nemesis", func(proc proc) {
		r.Nemesis(timeline, run.Nemesis{
			Sleep: run.Sleeper(r.ctx, proc.Sleep),
			Strike: func(t run.Timed) {
				f := r.p.Nemesis[t.Fault]
				if _, sim := r.b.(simPlace); !sim && f.Fault == histories.RestartBroker && !t.End {
					r.restartServer(proc)
					return
				}
				r.Locked(func() { r.strike(f, t.End) })
			},
			EndFaults: func() { r.Locked(r.endFaults) },
			// Every lease has expired (or been released) once ttl and a
			// margin have passed: a probe must find the semaphore free.
			Settle:   func() { proc.Sleep(time.Duration(r.p.TTLMs)*time.Millisecond + lease.Margin) },
			Probe:    func() { r.Locked(r.probe) },
			Abandon:  r.Abandon(func(name string) { r.b.Strike(run.Aim{Fault: histories.Kill, Process: name}) }),
			Patience: r.b.stuckAfter(),
		})
	})
}

// restartServer restarts a real server as the nemesis's process p,
// without the runner's lock, and waits until it is up again (Aim.Wait):
// a real server's restart takes real time, going down only once its
// shutdown is done and answering again only once it has started. The
// restart is recorded as in force from just before it began until the
// server answers again (or its restart failed, saying why), so that what
// a client completed while the server was shutting down comes before it,
// and what failed until it was back is excused by it. Recorded as struck
// at once, the restart excused nothing after a client's last clean
// completion, and one that came while MariaDB 11.8 shut down left the
// unknown outcomes after it unexcused: available FAIL (prove --kind
// db-semaphore --private-server --server-version 11.8 --seed 118). The
// nemesis waits: a fault timed within the restart strikes once it is
// over, as on Redis.
func (r *runner) restartServer(p proc) {
	r.Locked(func() { r.Began(histories.RestartBroker, nil) })
	err := r.b.Strike(run.Aim{Fault: histories.RestartBroker, Down: restartDowntime, Wait: p.Sleep})
	r.Locked(func() { r.Ended(histories.RestartBroker, nil, err) })
}

// strikeCounted strikes a fault counted in its target's statements (from
// the place's hook, with the lock held), unless the run is ending; it
// lasts For from when it struck.
func (r *runner) strikeCounted(f Fault) {
	if r.Ending() {
		return // the faults have ended: the run is closing
	}
	r.strike(f, false)
	if f.For > 0 {
		r.b.After(time.Duration(f.For)*time.Millisecond, func() { r.strike(f, true) })
	}
}

// probe starts the quiescent probe: as many clients as the semaphore has
// places, each acquiring once.
func (r *runner) probe() {
	for i := 0; i < r.p.Max; i++ {
		name := fmt.Sprintf("probe%d", i+1)
		r.start(name, r.add(name, []Step{{Op: histories.Acquire}}))
	}
}

// sleep lets d pass for proc, without the runner's lock.
func (r *runner) sleep(proc proc, d time.Duration) { r.Outside(func() { proc.Sleep(d) }) }

// endFaults ends the faults meant to last until the end: pauses,
// partitions and clock offsets.
func (r *runner) endFaults() {
	for _, h := range r.Holds() {
		r.strike(Fault{Fault: h.Fault, Target: h.Target}, true)
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
	name, v := f.Fault, &histories.Fault{}
	if f.Target != "" {
		v.Process = f.Target
	}
	switch {
	case end && histories.EndOf(f.Fault) != "":
		if !r.Held(f.Fault, f.Target) {
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
		if st := r.clients[f.Target]; st != nil && !st.Done {
			st.dropArmed = true
			st.dropBase, _ = r.b.droppedReplies(r.ProcessOf(f.Target))
			r.apply(name, f)
		}
		return
	}
	// Recorded once in place: struck from the nemesis's process, a fault
	// on the simulator is applied when the scheduler serves it, and a
	// fault a hook strikes meanwhile must not come between the two events
	// (nor a resume between a pause and its taking effect).
	at := r.from()
	if !r.apply(name, f) {
		return // it struck nothing: not recorded
	}
	if end {
		at = math.MaxInt64 // an end is recorded once it is over
	}
	r.StruckFrom(name, histories.Of(v), at)
	if name == histories.Kill {
		r.restart(f.Target)
	}
}

// from is the reading a fault about to be applied is recorded from
// (run.Runner.StruckFrom): the clock's now on a real server, where it
// strikes at once and a loaded machine may run others before the nemesis
// records it; on the simulator none (math.MaxInt64), where it is applied
// when the scheduler serves it and recorded then.
func (r *runner) from() int64 {
	if _, sim := r.b.(simPlace); sim {
		return math.MaxInt64
	}
	return r.Now()
}

// apply makes the place strike fault name, and reports whether it
// struck (a force-close may not: run.ErrStruckNothing; nor a restart
// of a real server while its last is under way).
func (r *runner) apply(name string, f Fault) bool {
	// A hold is noted once the place has done it (see strike), its end
	// before: the place may run what the end lets through at once, and a
	// hook there may strike a new hold.
	switch name {
	case histories.Kill:
		r.b.Strike(run.Aim{Fault: histories.Kill, Process: r.ProcessOf(f.Target)})
		// A new incarnation starts unpaused, with connections of its own.
		r.Unhold(histories.Pause, f.Target)
		r.Unhold(histories.Partition, f.Target)
	case histories.Pause:
		r.b.Strike(run.Aim{Fault: histories.Pause, Process: r.ProcessOf(f.Target)})
		r.Hold(histories.Pause, f.Target)
	case histories.Resume:
		r.Unhold(histories.Pause, f.Target)
		r.b.End(run.Aim{Fault: histories.Pause, Process: r.ProcessOf(f.Target)})
	case histories.Partition:
		r.b.Strike(run.Aim{Fault: histories.Partition, Process: r.ProcessOf(f.Target)})
		r.Hold(histories.Partition, f.Target)
	case histories.Heal:
		r.Unhold(histories.Partition, f.Target)
		r.b.End(run.Aim{Fault: histories.Partition, Process: r.ProcessOf(f.Target)})
	case histories.ForceClose:
		if r.b.Strike(run.Aim{Fault: histories.ForceClose, Process: r.ProcessOf(f.Target)}) != nil {
			return false
		}
	case histories.DropReply:
		r.b.Strike(run.Aim{Fault: histories.DropReply, Process: r.ProcessOf(f.Target)})
	case histories.RestartBroker:
		if r.b.Strike(run.Aim{Fault: histories.RestartBroker, Down: restartDowntime}) != nil {
			return false
		}
	case histories.ClockSkew:
		r.offsets[f.Target] = time.Duration(f.OffsetMs) * time.Millisecond
	case histories.ClockJump:
		r.offsets[f.Target] += time.Duration(f.OffsetMs) * time.Millisecond
	case histories.ClockReset:
		r.offsets[f.Target] = 0
	}
	if histories.IsClockFault(name) && f.Target == "" {
		// The server's clock: every session's, set to its offset now. A
		// client's clock is its own (see options), which the reference
		// never reads.
		r.b.Strike(run.Aim{Fault: histories.ClockSkew, Offset: r.offsets[""]})
	}
	return true
}

// restart starts a killed client again: its operation in flight ends
// unknown, and it holds nothing.
func (r *runner) restart(name string) {
	st := r.clients[name]
	if st == nil || st.Done {
		return
	}
	if _, ok := r.InFlight(&st.Proc); ok {
		r.complete(st, histories.Info, nil, errors.New("killed"))
	}
	st.token, st.dropArmed = "", false // the new incarnation's COMMITs are its own
	r.start(name, st)
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
	v    lease.Value
	a, b int
}

// grantedMs is the lease sem's last acquire or refresh granted, in ms,
// where sem is a process that said it (Process.Granted); nil otherwise.
func grantedMs(sem Client) *int {
	if g, ok := sem.(interface{ Granted() time.Duration }); ok && g.Granted() > 0 {
		ms := int(g.Granted().Milliseconds())
		return &ms
	}
	return nil
}

// maxTTLValue is an acquire's Value: max and ttl_ms.
func maxTTLValue(max, ttlMs int) *lease.Value {
	x := &boxedValue{a: max, b: ttlMs}
	x.v.Max, x.v.TTLMs = &x.a, &x.b
	return &x.v
}

// tokenTTLValue is a refresh's Value: the token and ttl_ms.
func tokenTTLValue(token string, ttlMs int) *lease.Value {
	x := &boxedValue{v: lease.Value{Token: token}, a: ttlMs}
	x.v.TTLMs = &x.a
	return &x.v
}

// tokenValue is a granted acquire's Value: the token, and its fence if
// fenced.
func tokenValue(token string, fenced bool, fence int) *lease.Value {
	x := &boxedValue{v: lease.Value{Token: token}, a: fence}
	if fenced {
		x.v.Fence = &x.a
	}
	return &x.v
}
