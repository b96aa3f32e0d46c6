package prover

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/lockprover/lockprover/amqplocks/broker"
	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/sim"
)

// Result is what a run gives: the history, what each operation cost, and
// what the broker held at the end.
type Result struct {
	History []histories.Event
	// Costs are the methods each completed operation sent, by the index of
	// its invoke event.
	Costs map[int]sim.Counters
	// Methods counts every AMQP method any process sent.
	Methods map[string]int
	// Leaks are the queues of the lock left on the broker after the run
	// (every client closed or detected dead, then a destroy).
	Leaks []string
	// MaxSlots is the largest number of slots the plan can have made.
	MaxSlots int
}

// Simulator runs plans on the simulated broker.
type Simulator struct {
	// Trace, if set, receives the simulator's event trace.
	Trace io.Writer
}

// procState is a process's place in its script; it survives restarts.
type procState struct {
	pos    int
	held   int // the slot the client believes it holds; -1 for a mutex held
	done   bool
	client Client
	open   int // index of the invoke of its operation in flight, or -1
	admin  bool
	first  bool // the first admin creates the semaphore
	create bool // the create is done
	script []Step
	// crashes are pending admin-crashes: methods into a change or destroy.
	crashes []int
}

type runner struct {
	p      *Plan
	impl   Impl
	w      *sim.World
	rec    *histories.Recorder
	states map[string]*procState
	costs  map[int]sim.Counters
	killed map[string]bool            // processes killed while heartbeats are off
	faulty map[string]map[string]bool // process -> pause/partition in force
	hb     time.Duration
	stuck  error // the run could not finish
	// created is set once the first admin's create has ended (or a kill
	// cut it short); every other process waits for it.
	created bool
	// ending is set once the nemesis starts ending faults: none strikes
	// after that.
	ending bool
	// destroyed is set when the probe's destroy succeeds.
	destroyed bool
}

// waitTimeout bounds an admin's wait: only a holder that is never released
// (heartbeats off and the holder killed) makes it run out.
const waitTimeout = 10 * time.Minute

// Run executes p against impl on a fresh simulated broker.
func (s Simulator) Run(p *Plan, impl Impl) (*Result, error) {
	o := sim.Options{Decider: sim.Script(p.Schedule, sim.Seeded(p.ScheduleSeed)), Trace: s.Trace}
	if p.Options.HeartbeatMs < 0 {
		o.ServerHeartbeat = -1 // heartbeats off on both sides
	}
	w := sim.New(o)
	r := &runner{p: p, impl: impl, w: w, rec: histories.NewRecorder(w.Tick),
		states: map[string]*procState{}, costs: map[int]sim.Counters{}, killed: map[string]bool{},
		faulty: map[string]map[string]bool{}, hb: p.Options.heartbeat(), created: p.Kind != "semaphore" || len(p.Admins) == 0}
	for i, script := range p.Admins {
		r.start(adminName(i), &procState{admin: true, first: i == 0, script: script, open: -1})
	}
	for i, script := range p.Clients {
		r.start(clientName(i), &procState{script: script, open: -1})
	}
	for _, f := range p.Nemesis {
		switch {
		case f.Fault == "admin-crash":
			r.states[f.Target].crashes = append(r.states[f.Target].crashes, max(1, f.AfterCalls))
		case f.AfterCalls > 0:
			f := f
			w.AfterMethods(f.Target, f.AfterCalls, func() { r.strikeFor(f) })
		}
	}
	w.Go("nemesis", r.nemesis)
	if err := w.Run(); err != nil {
		return nil, err
	}
	if r.stuck != nil {
		return nil, r.stuck
	}
	res := &Result{History: r.rec.Events(), Costs: r.costs, Methods: map[string]int{}, MaxSlots: maxSlots(p)}
	for _, name := range w.Processes() {
		c := w.Counters(name)
		for _, m := range methodNames {
			if n := c.Method(m); n > 0 {
				res.Methods[m] += n
			}
		}
	}
	res.Leaks = r.leaks()
	return res, nil
}

var methodNames = []string{
	"connection.start-ok", "connection.tune-ok", "connection.open", "connection.close", "connection.close-ok",
	"channel.open", "channel.close", "channel.close-ok", "confirm.select",
	"queue.declare", "queue.delete", "queue.purge", "queue.bind",
	"basic.publish", "basic.consume", "basic.get",
}

func maxSlots(p *Plan) int {
	n := p.Slots
	for _, script := range p.Admins {
		for _, s := range script {
			if s.Op == "change" && s.Delta > 0 {
				n += s.Delta
			}
		}
	}
	return n
}

func (r *runner) start(name string, st *procState) {
	r.states[name] = st
	r.w.Go(name, func(b broker.Broker) { r.run(name, st, b) })
}

// run plays a process's script from where it stands (a killed process
// restarts at the step after the one it died in).
func (r *runner) run(name string, st *procState, b broker.Broker) {
	ctx := context.Background()
	if st.first && !st.create && r.p.Kind == "semaphore" {
		st.create = true // attempted once: a restarted admin does not create again
		if c := r.connect(b, name, st); c != nil {
			r.op(name, st, c, Step{Op: "create"})
		}
		r.created = true
	}
	// The semaphore is created before anything else, unless its creator is
	// held up by a fault: then the others go ahead without it, a second on.
	r.await(b, time.Second, func() bool { return r.created })
	for st.pos < len(st.script) {
		s := st.script[st.pos]
		st.pos++
		if s.Op == "sleep" {
			b.Sleep(ctx, time.Duration(s.Ms)*time.Millisecond)
			continue
		}
		if c := r.connect(b, name, st); c != nil {
			r.op(name, st, c, s)
		}
	}
	// Let go of what it holds as a recorded release, not silently by
	// closing the connection.
	if st.held != 0 && st.client != nil && !st.client.Broken() {
		r.op(name, st, st.client, Step{Op: "release"})
	}
	if st.client != nil {
		st.client.Close()
		st.client = nil
	}
	st.done = true
}

// connect returns the process's client, connecting again if its connection
// is gone (which costs it what it believed it held). It gives up after a
// while if the broker stays unreachable.
func (r *runner) connect(b broker.Broker, name string, st *procState) Client {
	if st.client != nil && !st.client.Broken() {
		return st.client
	}
	if st.client != nil {
		st.client.Close()
		st.client, st.held = nil, 0
	}
	for i := 0; i < 100; i++ {
		c, err := r.impl.Connect(context.Background(), b, r.p, name)
		if err == nil {
			st.client = c
			return c
		}
		b.Sleep(context.Background(), 100*time.Millisecond)
	}
	return nil
}

// op runs one step as an operation of the history.
func (r *runner) op(name string, st *procState, c Client, s Step) {
	e := histories.Event{Process: name, F: s.Op, Lock: r.p.Lock}
	if r.p.Kind == "mutex" {
		e.Kind = histories.Mutex
	}
	slot := st.held
	switch s.Op {
	case "acquire":
		if st.held != 0 {
			return
		}
	case "verify", "release":
		if st.held == 0 {
			return
		}
		if r.p.Kind != "mutex" {
			e.Value = &histories.Value{Slot: histories.Int(slot)}
		}
	case "create":
		e.Value = &histories.Value{Slots: histories.Int(r.p.Slots)}
	case "change":
		e.Value = &histories.Value{Delta: histories.Int(s.Delta)}
	case "wait":
		e.Value = &histories.Value{Slot: histories.Int(s.Slot)}
	}
	e.Type = histories.Invoke
	inv := r.rec.Add(e)
	st.open = inv.Index
	before := r.w.Counters(name)
	if (s.Op == "change" || s.Op == "destroy") && len(st.crashes) > 0 {
		sent := 0
		for _, n := range before.Methods {
			sent += n
		}
		r.w.AfterMethods(name, sent+st.crashes[0], func() {
			if !r.ending {
				r.strike("kill", name)
			}
		})
		st.crashes = st.crashes[1:]
	}
	ctx := context.Background()
	var res *histories.Value
	var err error
	switch s.Op {
	case "acquire":
		var got int
		if got, err = c.Acquire(ctx); err == nil {
			st.held = -1
			if r.p.Kind != "mutex" {
				st.held = got
				res = &histories.Value{Slot: histories.Int(got)}
			}
		}
	case "verify":
		var held bool
		if held, err = c.Verify(ctx, slot); err == nil {
			res = &histories.Value{Held: histories.Bool(held)}
		}
	case "release":
		err = c.Release(ctx, slot)
		st.held = 0
	case "create":
		err = c.Create(ctx, r.p.Slots)
	case "change":
		var from, to int
		if from, to, err = c.Change(ctx, s.Delta); err == nil {
			res = &histories.Value{From: histories.Int(from), To: histories.Int(to)}
		}
	case "destroy":
		var from int
		if from, err = c.Destroy(ctx); err == nil {
			res = &histories.Value{From: histories.Int(from)}
			r.destroyed = r.destroyed || name == "probe"
		}
	case "count":
		var n int
		if n, err = c.Count(ctx); err == nil {
			res = &histories.Value{Slots: histories.Int(n)}
		}
	case "wait":
		wctx, cancel := r.w.WithTimeout(ctx, waitTimeout)
		err = c.Wait(wctx, s.Slot)
		cancel()
	}
	st.open = -1
	done := histories.Event{Process: name, F: s.Op, Lock: r.p.Lock, Kind: e.Kind}
	var f *Failure
	switch {
	case err == nil:
		done.Type, done.Value = histories.Ok, res
		r.costs[inv.Index] = r.w.Counters(name).Sub(before)
	case errors.As(err, &f):
		done.Type = histories.Fail
		done.Value = &histories.Value{Reason: f.Reason}
		r.costs[inv.Index] = r.w.Counters(name).Sub(before)
	default:
		done.Type = histories.Info
	}
	r.rec.Add(done)
}

// nemesis strikes the plan's faults at their times, then brings the run to
// an end: it waits for the scripts, heals what is still broken, lets the
// broker notice dead connections, and runs the quiescent probe.
func (r *runner) nemesis(b broker.Broker) {
	ctx := context.Background()
	type event struct {
		at            int
		fault, target string
	}
	var evs []event
	for _, f := range r.p.Nemesis {
		if f.AfterCalls > 0 || f.Fault == "admin-crash" {
			continue // struck by the simulator, mid-operation
		}
		evs = append(evs, event{f.At, f.Fault, f.Target})
		if f.For > 0 {
			switch f.Fault {
			case "pause":
				evs = append(evs, event{f.At + f.For, "resume", f.Target})
			case "partition":
				evs = append(evs, event{f.At + f.For, "heal", f.Target})
			}
		}
	}
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].at < evs[j].at })
	for _, e := range evs {
		if d := time.Duration(e.at)*time.Millisecond - time.Duration(r.w.Now()); d > 0 {
			b.Sleep(ctx, d)
		}
		r.strike(e.fault, e.target)
	}
	// Faults meant to last until the end last until every other process is
	// done (or a virtual hour has passed); then they end, so that the
	// faulted processes can finish too.
	r.await(b, time.Hour, func() bool { return r.allDone(true) })
	r.ending = true
	for _, name := range sortedKeys(r.faulty) {
		if r.faulty[name]["pause"] {
			r.strike("resume", name)
		}
		if r.faulty[name]["partition"] {
			r.strike("heal", name)
		}
	}
	if !r.await(b, time.Hour, func() bool { return r.allDone(false) }) {
		r.stuck = fmt.Errorf("the plan did not finish within a virtual hour of its faults ending: %s still running", strings.Join(r.running(), ", "))
		return
	}
	if r.hb > 0 {
		b.Sleep(ctx, 3*r.hb+time.Second) // the broker notices every dead connection
	}
	st := &procState{open: -1, script: r.probe()}
	r.states["probe"] = st
	r.w.Go("probe", func(b broker.Broker) { r.run("probe", st, b) })
	r.await(b, 24*time.Hour, func() bool { return st.done })
}

// await polls cond, backing off from a millisecond to a second, until it
// holds (true) or limit has passed (false).
func (r *runner) await(b broker.Broker, limit time.Duration, cond func() bool) bool {
	deadline := r.w.Now() + int64(limit)
	for d := time.Millisecond; !cond(); d = min(2*d, time.Second) {
		if r.w.Now() >= deadline {
			return false
		}
		b.Sleep(context.Background(), d)
	}
	return true
}

// probe is the final quiescent script: with every other process done and
// every dead connection noticed, a fresh client counts, takes a slot,
// verifies and releases it, removes a slot and destroys the semaphore. On a
// correct implementation each of these succeeds, so every kind of operation
// gets its chance; none adds a slot, which could hide a hole.
func (r *runner) probe() []Step {
	if r.p.Kind == "mutex" {
		return []Step{{Op: "acquire"}, {Op: "verify"}, {Op: "release"}}
	}
	return []Step{{Op: "count"}, {Op: "acquire"}, {Op: "verify"}, {Op: "release"}, {Op: "change", Delta: -1}, {Op: "destroy"}}
}

func (r *runner) allDone(exceptFaulty bool) bool {
	for name, st := range r.states {
		if name == "probe" || (exceptFaulty && len(r.faulty[name]) > 0) {
			continue
		}
		if !st.done {
			return false
		}
	}
	return true
}

func (r *runner) running() []string {
	var names []string
	for name, st := range r.states {
		if !st.done {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

// strikeFor strikes a fault counted in its target's calls, and ends it
// after its duration.
func (r *runner) strikeFor(f Fault) {
	if r.ending {
		return
	}
	target := f.Target
	if f.Fault == "restart-broker" {
		target = ""
	}
	r.strike(f.Fault, target)
	if f.For > 0 && (f.Fault == "pause" || f.Fault == "partition") {
		end := map[string]string{"pause": "resume", "partition": "heal"}[f.Fault]
		r.w.After(time.Duration(f.For)*time.Millisecond, func() {
			if r.faulty[f.Target][f.Fault] {
				r.strike(end, f.Target)
			}
		})
	}
}

// strike applies one fault and records it.
func (r *runner) strike(fault, target string) {
	e := histories.Event{Process: "nemesis", F: fault}
	if target != "" {
		e.Value = &histories.Value{Process: target}
	}
	e.Type = histories.Invoke
	r.rec.Add(e)
	var err error
	switch fault {
	case "kill":
		err = r.w.Kill(target)
	case "pause":
		err = r.w.Pause(target)
	case "resume":
		err = r.w.Resume(target)
	case "partition":
		err = r.w.Partition(target)
	case "heal":
		err = r.w.Heal(target)
	case "force-close":
		err = r.w.ForceClose(target)
	case "drop-reply":
		err = r.w.DropReply(target)
	case "restart-broker":
		err = r.w.RestartBroker()
	}
	switch fault {
	case "pause", "partition":
		if err == nil {
			if r.faulty[target] == nil {
				r.faulty[target] = map[string]bool{}
			}
			r.faulty[target][fault] = true
		}
	case "resume":
		delete(r.faulty[target], "pause")
	case "heal":
		delete(r.faulty[target], "partition")
	}
	e.Type = histories.Info
	if err != nil {
		e.Type = histories.Fail
		e.Value = &histories.Value{Process: target, Reason: "not applied: " + err.Error()}
		if target == "" {
			e.Value = nil
			e.Type = histories.Info
		}
	}
	r.rec.Add(e)
	if fault == "kill" && err == nil {
		r.restart(target)
	}
}

// restart brings a killed process back: its operation in flight ends with
// an unknown outcome, and a fresh incarnation (new connection, no holds)
// carries on with the script.
func (r *runner) restart(name string) {
	st := r.states[name]
	if st == nil {
		return
	}
	if st.first && st.create {
		r.created = true // its create was cut short
	}
	if st.open >= 0 {
		inv := r.rec.Events()[st.open]
		r.rec.Add(histories.Event{Process: name, Type: histories.Info, F: inv.F, Lock: inv.Lock, Kind: inv.Kind})
		st.open = -1
	}
	if r.hb == 0 {
		r.killed[name] = true
	}
	st.client, st.held = nil, 0
	if !st.done {
		r.w.Go(name, func(b broker.Broker) { r.run(name, st, b) })
	}
}

// leaks are the lock's queues still on the broker at the end: exclusive
// ones (B queues, the administration mutex) but for those of processes
// killed while heartbeats are off, which the broker never notices; and A
// queues, if the final destroy succeeded.
func (r *runner) leaks() []string {
	var out []string
	prefix := r.p.Lock
	for _, q := range r.w.Queues() {
		if q.Name != prefix && !strings.HasPrefix(q.Name, prefix+"-") {
			continue
		}
		if q.Owner == "" && !r.destroyed {
			continue
		}
		if q.Owner != "" && r.hb == 0 && r.killed[strings.Split(q.Owner, "#")[0]] {
			continue
		}
		out = append(out, fmt.Sprintf("%s (owner %q)", q.Name, q.Owner))
	}
	return out
}

func sortedKeys(m map[string]map[string]bool) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
