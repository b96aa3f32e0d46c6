package redlockrun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/lockprover/lockprover/adapters/runners/leaserun"
	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/internal/prover/run"
	"github.com/lockprover/lockprover/model/lease"
	"github.com/lockprover/lockprover/model/redlock"
)

// scheduleSalt seeds the simulator's choices once a plan's Schedule runs
// out (with its ScheduleSeed).
const scheduleSalt = 0x726c

// Simulate runs p against the reference (or p's mutant of it) on fresh
// simulated servers: the same plan always gives the same history. trace,
// if set, receives the simulator's trace.
func Simulate(p *Plan, trace io.Writer) (*prover.Result, error) {
	return Simulator{Trace: trace}.simulate(context.Background(), p)
}

// simulate runs p on fresh simulated servers: against the reference, or
// against s.Impl on the servers served on the wire, whose run logs its
// steps (p.Wire: run again, the plan replays them in their order).
func (s Simulator) simulate(ctx context.Context, p *Plan) (*prover.Result, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if s.Impl != nil && s.Wire == nil {
		return nil, errors.New("redlock: an implementation on the simulator needs its servers served on the wire (Simulator.Wire)")
	}
	r := &runner{p: p, ctx: ctx, clients: map[string]*client{}, cut: map[string]int{}}
	b, err := newSimPlace(p, s.Trace, r.dropped, r)
	if err != nil {
		return nil, err
	}
	if s.Impl == nil {
		r.begin(b)
		if err := b.w.Run(); err != nil {
			return nil, err
		}
		return r.Result(r.p.Key)
	}
	wire := s.Wire(b.w, p)
	b.served = &servedImpl{impl: s.Impl, wire: wire, procs: map[string]ProcessClient{},
		session: Session{Key: p.Key, TTL: time.Duration(p.TTLMs) * time.Millisecond, Run: wire.Name(), Limit: p.Limit}}
	if sp, ok := s.Impl.(run.Spawner); ok {
		// The World's clock stands still while a process starts: they
		// need only start side by side.
		sp.Spawn(wire.Name(), len(p.Clients))
		defer sp.Drain(wire.Name())
	}
	r.begin(b)
	runErr := b.w.Run()
	log, problems, notes, err := wire.End()
	if runErr != nil {
		return nil, runErr
	}
	p.Wire = log
	r.Problems = append(r.Problems, problems...)
	if err != nil {
		return nil, err
	}
	res, err := r.Result(r.p.Key)
	if res != nil {
		res.Evidence.Trace = append(res.Evidence.Trace, notes...)
	}
	return res, err
}

// begin starts p's clients and its nemesis on b.
func (r *runner) begin(b place) {
	r.b = b
	r.Init(leaserun.RunConfig(b, b.Now))
	b.Lock()
	defer b.Unlock()
	for i, script := range r.p.Clients {
		name := leaserun.ClientName(i)
		st := r.add(name, script)
		st.ttl = r.p.ttlOf(i)
		if i < len(r.p.Priorities) {
			st.prio = r.p.Priorities[i]
		}
		r.start(name, st)
	}
	r.nemesis()
}

// A client is a process's place in its script and the lease it believes
// it holds; the place survives a kill (the restarted process goes on with
// its script, holding nothing).
type client struct {
	run.Proc
	script []Step
	pos    int
	lease  redlock.Lease
	holds  bool
	ttl    int   // its ttl, ms
	prio   int64 // its priority (PriorityKind)
}

// runner runs one plan on the simulated servers, on the skeleton every
// family's runner shares (run.Runner).
type runner struct {
	run.Runner
	p       *Plan
	ctx     context.Context
	b       place
	timeout time.Duration // each server's bound on a round; 0: the reference's
	clients map[string]*client
	cut     map[string]int // the server (from 1) each partitioned client is cut from
}

// add registers client name with its script.
func (r *runner) add(name string, script []Step) *client {
	st := &client{Proc: run.Proc{Name: name}, script: script}
	return run.Register(&r.Runner, r.clients, &st.Proc, st)
}

// start starts an incarnation of client name: a process of its own in
// the simulator (c1, then c1#2 after a kill, ...).
func (r *runner) start(name string, st *client) {
	run.Start(&r.Runner, &st.Proc, r.b.Go, func(p proc, gen int) { r.run(p, name, st, gen) })
}

// run is one incarnation of a client: the reference (or the plan's
// mutant), with tokens drawn from the plan's seed, through the rest of
// its script.
func (r *runner) run(p proc, name string, st *client, gen int) {
	o := redlock.Options{Random: rand.NewChaCha8(run.Seed(r.p.ScheduleSeed, name, gen)), Timeout: r.timeout}
	if m := MutantNamed(r.p.Mutant); m != nil {
		m.defects(&o.Defects)
	}
	var rl Client
	var err error
	if r.p.Kind == PriorityKind {
		o.OnLost = r.onLost(st, gen)
		r.Outside(func() { rl, err = p.openPriority(name, o, st.prio) })
	} else {
		r.Outside(func() { rl, err = p.open(name, o) })
	}
	if !st.Live(gen) {
		return // killed while it started: its successor goes on
	}
	if err != nil {
		r.Problems = append(r.Problems, fmt.Sprintf("%s: %v", name, err))
		st.Done = true
		return
	}
	defer r.Outside(func() { rl.Close() })
	for st.pos < len(st.script) && st.Live(gen) {
		s := st.script[st.pos]
		st.pos++
		r.step(p, rl, st, gen, s)
		if pc, ok := rl.(ProcessClient); ok && st.Live(gen) {
			if why := pc.Crashed(); why != "" {
				// The process is gone (it exited, or hung and was given
				// up): what it held is lost, and the client goes on as a
				// new process, as after a kill. The kill is recorded
				// after the operation ended, so it excuses nothing.
				r.Problems = append(r.Problems, fmt.Sprintf("%s %s", name, why))
				r.killCrashed(p, name)
				return
			}
		}
	}
	if r.p.Kind == PriorityKind && st.Live(gen) {
		// A client stays, listening for thefts, as long as its lock
		// listens: until its lease's validity ends (a holder at work), or
		// a key its last failed acquire set may live (the lock answers a
		// thief of it). A thief then hears from it, as from any live
		// client.
		d := time.Duration(st.ttl)*time.Millisecond*51/50 + time.Millisecond
		if st.holds {
			d = max(d, r.b.left(st.lease, r.b.Now()))
		}
		if l, ok := rl.(interface{ Listening() time.Duration }); ok {
			d = max(d, l.Listening()) // a key its steal kept alive past its ttl
		}
		r.Outside(func() { p.Sleep(d) })
	}
	if st.Live(gen) {
		st.Done = true
	}
}

// step runs one line of a client's script.
func (r *runner) step(p proc, rl Client, st *client, gen int, s Step) {
	ctx := r.ctx
	ttl := time.Duration(st.ttl) * time.Millisecond
	e := histories.Event{Process: st.Name, Type: histories.Invoke, F: s.Op, Lock: r.p.Key, Kind: histories.Lease}
	switch {
	case s.Op == Sleep:
		r.Outside(func() { p.Sleep(time.Duration(s.Ms) * time.Millisecond) })
	case s.Op == histories.Acquire && !st.holds:
		v := &lease.Value{Max: histories.Int(r.p.limit()), TTLMs: histories.Int(st.ttl)}
		if r.p.Kind == PriorityKind {
			v.Priority = histories.Int(int(st.prio))
		}
		e.Value = v
		r.invokeAtStart(p, st, gen, e)
		var l redlock.Lease
		var err error
		var ret int64
		r.Outside(func() { l, err = rl.Acquire(ctx, r.p.Key, ttl); ret = r.b.Now() })
		r.invoked(p, st, gen, e)
		if !st.Live(gen) {
			return
		}
		switch {
		case err == nil:
			st.lease, st.holds = l, true
			v := &lease.Value{Token: l.Token}
			if l.Fence != NoFence {
				v.Fence = histories.Int(int(l.Fence))
			}
			r.granted(rl, st, v, l, ret)
		case errors.Is(err, redlock.ErrHeld) && !errors.Is(err, redlock.ErrLeftBehind):
			r.complete(st, histories.Fail, &lease.Value{Reason: histories.Full}, nil)
		case errors.Is(err, ErrNotGranted), errors.Is(err, redlock.ErrStolen), errors.Is(err, redlock.ErrOutwaited):
			// Stolen: a higher priority took the key while the acquire
			// waited for its own victims; outwaited: its key expired
			// everywhere meanwhile. Either way it holds nothing.
			r.complete(st, histories.Fail, nil, err)
		default:
			// Too few servers answered, no validity was left, or its
			// key may be left behind: it may stay on some servers until
			// it expires, refusing others (a command a partition held
			// may still set one), as a grant of unknown outcome does.
			r.complete(st, histories.Info, nil, err)
		}
	case s.Op == histories.Refresh && st.holds:
		e.Value = &lease.Value{Token: st.lease.Token, TTLMs: histories.Int(st.ttl)}
		r.invokeAtStart(p, st, gen, e)
		var l redlock.Lease
		var err error
		var ret int64
		held := st.lease
		r.Outside(func() { l, err = rl.Refresh(ctx, held, ttl); ret = r.b.Now() })
		r.invoked(p, st, gen, e)
		if st.Live(gen) {
			if err == nil {
				st.lease = l
				r.granted(rl, st, &lease.Value{}, l, ret)
				return
			}
			r.changed(st, err)
		}
	case s.Op == histories.Release && st.holds:
		e.Value = &lease.Value{Token: st.lease.Token}
		r.invokeAtStart(p, st, gen, e)
		var err error
		held := st.lease
		r.Outside(func() { err = rl.Release(ctx, held) })
		r.invoked(p, st, gen, e)
		if st.Live(gen) {
			st.holds = false // the client gives up on it either way
			r.changed(st, err)
		}
	}
}

// granted records a grant's ok completion, at ret, when the call
// returned, before the events recorded since (a loaded machine may not
// run the runner for tens of milliseconds, and a completion recorded
// then, its claim run out, overstated it: see docs/redlock.md), with v
// and validity_ms: the
// validity the grant claims, left at the completion's time (the history
// counts it from there), in whole milliseconds, rounded down: never more
// than it claims. The reference's claim is l's; an implementation's
// process's, what its reply said (none: no validity_ms), counted from the
// invoke, since its own start can only be later: the check is then of the
// time it says it took and the validity it says is left. Where the reply
// says when the library it wraps started (started_ms), the grant records
// that too, from the invoke, for validity-sound to judge the claim from.
// Where the claim ran out before the call's return was seen (a process's
// reply read late on a loaded machine), validity_ms is negative and the
// grant records when the lock replied (replied_ms, from the invoke):
// validity-sound judges the claim at the reply, with an excuse that says
// so, rather than moving the claim's end to the reading.
func (r *runner) granted(rl Client, st *client, v *lease.Value, l redlock.Lease, ret int64) {
	invoke, _ := r.InFlight(&st.Proc)
	e := r.FinishAt(&st.Proc, histories.Ok, v, nil, ret)
	took := time.Duration(e.Time - invoke.Time)
	var left, replied time.Duration
	if pc, ok := rl.(ProcessClient); ok {
		c, said := pc.Claimed()
		if !said {
			return
		}
		left = time.Duration(invoke.Time) + c.Until - time.Duration(e.Time)
		replied = c.Elapsed
		if s := startedMs(c.Started, took); s > 0 {
			v.StartedMs = histories.Int(s)
		}
	} else {
		left = r.b.left(l, e.Time)
		replied = took + left - l.Validity // the lock's return: its validity's reading
	}
	if l.Validity >= 0 && left < 0 {
		// The lock claimed validity when it replied; its reply was seen
		// after that ran out.
		v.RepliedMs = histories.Int(int(min(max(replied, 0), took) / time.Millisecond))
	}
	ms := left.Milliseconds()
	if left < 0 && left%time.Millisecond != 0 {
		ms-- // towards minus infinity
	}
	v.ValidityMs = histories.Int(int(ms)) // the recorded event holds v
}

// startedMs is the library's start an implementation said (started, after
// its own start), as the history records it: from the invoke (no later
// than the process's own start), in whole milliseconds rounded up, since
// validity_ms is rounded down, by up to a millisecond, and a library that
// claims exactly ttl(1-drift) from its start must not fail by the two
// roundings (a claim past that by a millisecond or more still fails); but
// never after the grant's return as recorded (took after the invoke): no
// library starts later.
func startedMs(started, took time.Duration) int {
	s := int((started + time.Millisecond - 1) / time.Millisecond)
	return min(s, int(took/time.Millisecond))
}

// invokeAtStart records e, the invocation of st's next operation, when
// the lock starts it (proc.arm): at once on the simulator; on a real
// server from inside the call, taking the runner's lock then. An
// incarnation killed meanwhile records nothing.
func (r *runner) invokeAtStart(p proc, st *client, gen int, e histories.Event) {
	p.arm(func() {
		r.Locked(func() {
			if st.Live(gen) {
				r.Invoke(&st.Proc, e)
			}
		})
	})
}

// invoked records e after the call (the lock held), if the call never
// read the clock (an argument it refused).
func (r *runner) invoked(p proc, st *client, gen int, e histories.Event) {
	if !p.fired() && st.Live(gen) {
		r.Invoke(&st.Proc, e)
	}
}

// changed records a refresh's or release's outcome.
func (r *runner) changed(st *client, err error) {
	switch {
	case err == nil:
		r.complete(st, histories.Ok, nil, nil)
	case errors.Is(err, redlock.ErrExpired), errors.Is(err, redlock.ErrStolen):
		// A lease a higher priority took has ended too: the error says
		// which.
		st.holds = false
		var why error
		if errors.Is(err, redlock.ErrStolen) {
			why = err
		}
		r.complete(st, histories.Fail, &lease.Value{Reason: histories.Expired}, why)
	default:
		r.complete(st, histories.Info, nil, err)
	}
}

// complete records the completion of the client's operation in flight,
// and returns it as recorded.
func (r *runner) complete(st *client, typ histories.Type, v *lease.Value, err error) histories.Event {
	return r.Finish(&st.Proc, typ, histories.Of(v), err)
}

// nemesis starts the nemesis's process (run.Runner.Nemesis): it strikes
// the plan's faults at their times, ends those that last until the end
// once every client is done, waits out every lease, and probes the lock.
// The Runner calls these without the lock.
func (r *runner) nemesis() {
	timeline := leaserun.Timeline(r.p.Nemesis, Fault.timing)
	r.b.Go("nemesis", func(p proc) {
		r.Nemesis(timeline, run.Nemesis{
			Sleep:     run.Sleeper(r.ctx, p.Sleep),
			Strike:    func(t run.Timed) { r.strike(p, r.p.Nemesis[t.Fault], t.End) },
			EndFaults: func() { r.Locked(func() { r.endFaults(p) }) },
			// Every lease has expired (or been released) once its ttl, a
			// margin and any clock set back have passed: a probe must
			// find the lock free.
			Settle:   func() { p.Sleep(time.Duration(r.p.longestTTL())*time.Millisecond + lease.Margin + r.behind()) },
			Probe:    func() { r.Locked(r.probe) },
			Abandon:  r.Abandon(func(name string) { r.b.Strike(run.Aim{Fault: histories.Kill, Process: name}) }),
			Patience: r.b.stuckAfter(),
		})
	})
}

// behind is how far the plan's clock jumps set the servers' clocks back,
// in all: a key then lives that much longer.
func (r *runner) behind() time.Duration {
	var d time.Duration
	for _, f := range r.p.Nemesis {
		if f.Fault == histories.ClockJump && f.OffsetMs < 0 {
			d -= time.Duration(f.OffsetMs) * time.Millisecond
		}
	}
	return d
}

// probe starts the quiescent probe: a client that acquires once.
func (r *runner) probe() {
	st := r.add("probe1", []Step{{Op: histories.Acquire}})
	st.ttl, st.prio = r.p.TTLMs, r.p.lowestPriority() // it steals from nobody
	r.start("probe1", st)
}

// onLost records an incarnation's lost notices (redlock.Options.OnLost):
// when its lease was marked lost, before it acknowledged the thief.
func (r *runner) onLost(st *client, gen int) func(redlock.Lost) {
	return func(x redlock.Lost) {
		r.Locked(func() {
			if st.Live(gen) {
				r.Rec.Add(histories.Event{Process: st.Name, Type: histories.Info, F: histories.Lost, Lock: r.p.Key, Kind: histories.Lease,
					Value: &lease.Value{Token: x.Token, Thief: x.Thief}})
			}
		})
	}
}

// endFaults ends the faults meant to last until the end: pauses and
// partitions.
func (r *runner) endFaults(p proc) {
	for _, h := range r.Holds() {
		f := Fault{Fault: h.Fault}
		if h.Fault == histories.Partition {
			f.Target, f.Server = h.Target, r.cut[h.Target]
		} else {
			f.Server = serverOf(h.Target)
		}
		r.strikeLocked(p, f, true)
	}
}

// serverOf is the server (from 1) a history's name for it names.
func serverOf(name string) int {
	n, _ := strconv.Atoi(strings.TrimPrefix(name, "redis"))
	return n
}

// strike applies a fault (or, with end, ends it: resume, heal) as the
// nemesis's process p, and records it once in place (struck from the
// nemesis's process, a fault on the simulator is applied when the
// scheduler serves it). It takes the runner's lock; a restart lets go of
// it while the server is down.
func (r *runner) strike(p proc, f Fault, end bool) {
	if f.Fault == histories.RestartBroker {
		r.restartServer(p, f)
		return
	}
	r.Locked(func() { r.strikeLocked(p, f, end) })
}

// A selfKiller is a place whose processes cannot strike a kill on
// themselves: the simulator's, where a kill is the World's, struck on a
// process that is not the one running.
type selfKiller interface {
	// KillSelf has strike (the kill of p's process) run at once from
	// outside it, and p wait there for it.
	KillSelf(p proc, strike func())
}

// killCrashed strikes the kill of client name's process, found crashed
// after its operation (it exited, or hung and was given up): the history
// records it, and a fresh incarnation carries on with the script.
func (r *runner) killCrashed(p proc, name string) {
	kill := func() { r.strikeLocked(p, Fault{Fault: histories.Kill, Target: name}, false) }
	if k, ok := r.b.(selfKiller); ok {
		k.KillSelf(p, kill)
		return
	}
	kill()
}

// strikeLocked is strike, with the lock held, but for a restart. A fault
// that cannot strike (a second partition of a client already cut off, a
// second pause, a clock jump the server did not take) is neither applied
// nor recorded.
func (r *runner) strikeLocked(p proc, f Fault, end bool) {
	server := serverName(f.Server - 1)
	at := r.from()
	switch f.Fault {
	case histories.Kill:
		if st := r.clients[f.Target]; st != nil && !st.Done {
			r.b.Strike(run.Aim{Fault: histories.Kill, Process: st.Process})
			r.recordFrom(histories.Kill, f.Target, 0, at)
			r.restart(f.Target)
		}
	case histories.Partition:
		r.partition(f, end)
	case histories.DropReply:
		// Armed now; recorded when it strikes (dropped), if it does.
		r.b.Strike(run.Aim{Fault: histories.DropReply, Process: r.ProcessOf(f.Target), Server: f.Server - 1})
	case histories.Pause:
		switch {
		case end && r.Held(histories.Pause, server):
			r.Unhold(histories.Pause, server)
			r.b.End(run.Aim{Fault: histories.Pause, Server: f.Server - 1})
			r.record(histories.Resume, server, 0)
		case !end && !r.Held(histories.Pause, server):
			r.b.Strike(run.Aim{Fault: histories.Pause, Server: f.Server - 1})
			r.Hold(histories.Pause, server)
			r.recordFrom(histories.Pause, server, 0, at)
		}
	case histories.ClockJump:
		if err := r.b.Strike(run.Aim{Fault: histories.ClockJump, Server: f.Server - 1, Offset: time.Duration(f.OffsetMs) * time.Millisecond}); err == nil {
			r.recordFrom(histories.ClockJump, server, f.OffsetMs, at)
		}
	}
}

// restartServer restarts f's server, down for f.For, as the nemesis's
// process p: it is recorded as in force from the crash (once in place)
// until the server is up again (its completion), so that it excuses what
// fails meanwhile; a restart that does not come back says why. The nemesis waits for it: a
// fault timed within the downtime strikes once the server is back.
func (r *runner) restartServer(p proc, f Fault) {
	v := &histories.Fault{Process: serverName(f.Server - 1)}
	down := time.Duration(f.For) * time.Millisecond
	struck := false
	err := r.b.Strike(run.Aim{Fault: histories.RestartBroker, Server: f.Server - 1, Down: down, Wait: p.Sleep, Struck: func() {
		struck = true
		r.Began(histories.RestartBroker, v)
	}})
	if !struck {
		return // it never went down: nothing to record
	}
	r.Locked(func() { r.Ended(histories.RestartBroker, v, err) })
}

// partition cuts f's client from f's server, or (end) heals that cut.
func (r *runner) partition(f Fault, end bool) {
	held := r.Held(histories.Partition, f.Target)
	switch {
	case end && held && r.cut[f.Target] == f.Server:
		r.Unhold(histories.Partition, f.Target)
		delete(r.cut, f.Target)
		r.b.End(run.Aim{Fault: histories.Partition, Process: r.ProcessOf(f.Target), Server: f.Server - 1})
		r.record(histories.Heal, f.Target, 0)
	case !end && !held:
		at := r.from()
		r.b.Strike(run.Aim{Fault: histories.Partition, Process: r.ProcessOf(f.Target), Server: f.Server - 1})
		r.Hold(histories.Partition, f.Target)
		r.cut[f.Target] = f.Server
		r.recordFrom(histories.Partition, f.Target, 0, at)
	}
}

// record records fault name, aimed at target (a client, or a server by
// its history name), as nemesis events; offset is a clock jump's.
func (r *runner) record(name, target string, offset int) {
	r.recordFrom(name, target, offset, math.MaxInt64)
}

// recordFrom is record of a fault applied from at (run.Runner.StruckFrom:
// the clock's reading before a real server's fault was applied). The end
// of a fault (a resume, a heal) is recorded once it is over.
func (r *runner) recordFrom(name, target string, offset int, at int64) {
	v := &histories.Fault{Process: target}
	if offset != 0 {
		v.OffsetMs = histories.Int(offset)
	}
	r.StruckFrom(name, v, at)
}

// from is the reading a fault about to be applied is recorded from: the
// clock's now on real servers, where it strikes at once; on the simulator
// none (math.MaxInt64), where it is applied when the scheduler serves it
// and recorded then.
func (r *runner) from() int64 {
	if _, sim := r.b.(simPlace); sim {
		return math.MaxInt64
	}
	return r.Now()
}

// dropped records a lost reply when it is lost (redissim.Options.OnDrop):
// to the current incarnation of a client only (an old one's operation is
// over, recorded as unknown when it was killed).
func (r *runner) dropped(proc string, _ int) {
	if p := r.Current(proc); p != nil {
		r.record(histories.DropReply, p.Name, 0)
	}
}

// restart starts a killed client again: its operation in flight ends
// unknown, and it holds nothing. A new incarnation has connections of its
// own: no partition holds it (recorded as the partition's heal).
func (r *runner) restart(name string) {
	st := r.clients[name]
	if _, ok := r.InFlight(&st.Proc); ok {
		r.complete(st, histories.Info, nil, errors.New("killed"))
	}
	st.holds = false
	if r.Held(histories.Partition, name) {
		r.Unhold(histories.Partition, name)
		delete(r.cut, name)
		r.record(histories.Heal, name, 0)
	}
	r.start(name, st)
}
