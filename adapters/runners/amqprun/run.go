package amqprun

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/lockprover/lockprover/adapters/servers/rabbitmq/amqpproxy"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/internal/prover/run"
	"github.com/lockprover/lockprover/model"
	"github.com/lockprover/lockprover/model/amqpcheck"
	"github.com/lockprover/lockprover/sim/rabbitmqsim"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/model/amqplocks/broker"
)

// procState is a process's place in its script; it survives restarts
// (its Gen moves on at a kill: the killed goroutine stops recording).
type procState struct {
	run.Proc
	pos    int
	first  bool
	create bool // the first admin's create was attempted
	script []Step
	// crashes are pending admin-crashes: methods into a change or destroy.
	crashes []int
}

// runner plays a plan on a place, on the skeleton every family's runner
// shares (run.Runner: processes, nemesis, holds, the quiescent end). Its
// state is guarded by mu, which is never held across a broker call (the
// simulator moves one process at a time, and a process blocked on mu would
// stall it).
type runner struct {
	run.Runner
	p    *Plan
	impl Impl
	eng  place
	lock string
	hb   time.Duration

	mu        sync.Mutex
	states    map[string]*procState
	costs     map[int]broker.Cost
	killed    map[string]bool   // processes killed while heartbeats are off (made on first use)
	created   bool              // the first admin's create has ended or was cut short
	awaiting  map[string]bool   // in an exhaustive search, the processes awaiting it (made on first use)
	destroyed bool              // the probe's destroy succeeded
	live      map[string]Client // each process's current client, for signals
	// heartbeatOnly are the processes whose client declared it ends a
	// socket without a connection.close only when its heartbeat deadline
	// passes (heartbeatCloser).
	heartbeatOnly map[string]bool
	dialling      map[string]context.CancelFunc // cuts short a process's Connect when it is killed
	ledgers       map[string]*ledger            // each process's connection and channels, from its method counts
	waste         map[int]string                // how an operation wasted connections or channels
	problems      []string
	notes         []string // what a reader must be told: Evidence.Trace
}

func newRunner(plan *Plan, impl Impl, eng place, lock string) *runner {
	p := *plan
	p.Lock = lock // what implementations work on: unique per run on a real broker
	steps := planSteps(&p)
	r := &runner{p: &p, impl: impl, eng: eng, lock: lock,
		hb: p.Options.Heartbeat(), states: map[string]*procState{}, costs: make(map[int]broker.Cost, steps),
		live: map[string]Client{}, heartbeatOnly: map[string]bool{},
		dialling: map[string]context.CancelFunc{}, ledgers: map[string]*ledger{}, waste: map[int]string{},
		created: p.Kind != histories.Semaphore || len(p.Admins) == 0}
	r.Init(run.Config{Lock: &r.mu, Now: eng.Now, Poll: poll, Ends: ends})
	r.Rec.Grow(2*steps + 4*len(p.Nemesis)) // an invoke and a completion a step, two events a fault and its end
	return r
}

// poll is how the runner awaits (the first admin's create, the end of the
// processes): every millisecond at first, then less often, at most every
// second.
var poll = run.Poll{First: time.Millisecond, Max: time.Second}

// ends is the order in which a process's pause and partition end at the
// quiescent end.
var ends = []string{histories.Pause, histories.Partition}

// planSteps is about how many operations p's run records: its scripts'
// steps but their sleeps, a final release per client, and the probe's.
// newRunner sizes the history and the costs by it (a guess: only
// allocations depend on it, and an event is 128 bytes to be zeroed).
func planSteps(p *Plan) int {
	n := 6 + len(p.Clients)
	for _, scripts := range [][][]Step{p.Admins, p.Clients} {
		for _, script := range scripts {
			for _, s := range script {
				if s.Op != Sleep {
					n++
				}
			}
		}
	}
	return n
}

// begin starts every process of the plan and the nemesis.
func (r *runner) begin() {
	for i, script := range r.p.Admins {
		r.start(adminName(i), &procState{first: i == 0, script: script})
	}
	for i, script := range r.p.Clients {
		r.start(clientName(i), &procState{script: script})
	}
	for _, f := range r.p.Nemesis {
		switch {
		case f.Fault == AdminCrash:
			st := r.states[f.Target]
			st.crashes = append(st.crashes, max(1, f.AfterCalls))
		case f.AfterCalls > 0:
			f := f
			r.eng.AfterMethods(f.Target, f.AfterCalls, func() { r.strikeFor(f) })
		}
	}
	r.eng.Go("nemesis", r.nemesis)
}

// result gathers the run's outcome once every process has ended.
func (r *runner) result() (*prover.Result, error) {
	if err := r.Stuck(); err != nil {
		return nil, err
	}
	res := &prover.Result{History: r.Rec.Take()} // the run is over: nothing records any more
	ev := &amqpcheck.Evidence{Costs: r.costs, Waste: r.waste, Methods: map[string]int{}, MaxSlots: maxSlots(r.p)}
	if c, ok := r.eng.(onCluster); ok && len(r.p.Cluster) > 0 {
		ev.Cluster = &amqpcheck.Cluster{Mode: c.partitionHandling(), NodeOf: map[string]string{}}
		for name := range r.states {
			ev.Cluster.NodeOf[name] = r.p.NodeOf(name)
		}
	}
	res.Evidence = model.Evidence{Lock: r.lock, Problems: r.problems, Family: ev}
	if w, ok := r.eng.(serverWitness); ok {
		r.addBrokerFaults(res, w.serverNotes())
	}
	if e, ok := r.eng.(*realPlace); ok {
		res.Evidence.Trace = e.trace()
	}
	res.Evidence.Trace = append(res.Evidence.Trace, r.notes...)
	var t tally
	for name := range r.states {
		for i, n := range r.counts(name, &t).Methods {
			if n > 0 {
				ev.Methods[rabbitmqsim.MethodName(i)] += n
			}
		}
		for m, n := range t.other {
			ev.Methods[m] += n
		}
	}
	qs, err := r.eng.Queues(r.lock)
	if err != nil {
		// The history stands; what the broker kept cannot be seen (on a
		// Khepri cluster after a partition, a passive declare may go
		// unanswered for a minute): no-leak says so, not judged.
		ev.Unprobed = err.Error()
	}
	if lf, ok := r.eng.(interface{ listFailed() error }); ok {
		if err := lf.listFailed(); err != nil {
			ev.Unlisted = err.Error()
		}
	}
	for _, q := range qs {
		switch {
		case q.name != r.lock && !strings.HasPrefix(q.name, r.lock+"-"):
		case q.owner == "" && !r.destroyed:
			// A queues are judged only after a successful destroy; the
			// verdict names those it could not judge.
			ev.Unjudged = append(ev.Unjudged, q.name)
		case q.owner != "" && r.hb == 0 && r.killed[q.owner]:
			// Held by a process killed while heartbeats are off: the
			// broker never notices.
		case q.how != "":
			ev.Leaks = append(ev.Leaks, fmt.Sprintf("%s (%s)", q.name, q.how))
		default:
			ev.Leaks = append(ev.Leaks, fmt.Sprintf("%s (owner %q)", q.name, q.owner))
		}
	}
	return res, nil
}

// addBrokerFaults records in res's history the faults the broker struck
// on its own (brokerFaults), keeping the evidence's indexes right.
func (r *runner) addBrokerFaults(res *prover.Result, notes []serverNote) {
	_, ref := r.impl.(reference)
	heartbeatOnly := func(proc string) string {
		r.mu.Lock()
		defer r.mu.Unlock()
		switch {
		case ref:
			return referenceClient
		case r.heartbeatOnly[proc]:
			return declaredClient
		}
		return ""
	}
	race := ""
	inFlight := slices.ContainsFunc(notes, func(n serverNote) bool { return n.ev.What == amqpproxy.DeclareInFlight && n.ev.Exclusive })
	if v, ok := r.eng.(versioned); ok && inFlight {
		race = v.raceVersion()
	}
	faults := brokerFaults(res.History, r.lock, notes, brokerGrace(max(r.hb, time.Second)), r.hb, heartbeatOnly, race)
	h, moved := run.WithFaults(res.History, faults)
	if moved == nil {
		return
	}
	res.History = h
	ev := res.Evidence.Family.(*amqpcheck.Evidence)
	costs, waste := make(map[int]broker.Cost, len(ev.Costs)), make(map[int]string, len(ev.Waste))
	for i, c := range ev.Costs {
		costs[moved[i]] = c
	}
	for i, w := range ev.Waste {
		waste[moved[i]] = w
	}
	ev.Costs, ev.Waste = costs, waste
	excuseReconnects(h, ev)
}

// excuseReconnects excuses, for each connection the broker closed on its
// own (a force-close lockprover did not strike, known only once the run
// has ended, from what the proxy saw), the one new connection the
// process then opened: the ledger charged it at the time as opened "though
// no fault had cut it off", and the broker had.
func excuseReconnects(h []histories.Event, ev *amqpcheck.Evidence) {
	invoked := map[string]int{} // process -> index of its operation in flight
	closed := map[string]bool{} // the broker closed the process's connection: one reconnect excused
	for _, e := range h {
		switch {
		case e.Process == "nemesis" && e.F == histories.ForceClose && e.Type == histories.Info && histories.FaultOf(&e) != nil && strings.HasPrefix(e.Error, run.NotStruck):
			closed[histories.FaultOf(&e).Process] = true
		case e.Process == "nemesis":
		case e.Type == histories.Invoke:
			invoked[e.Process] = e.Index
		case closed[e.Process]:
			i := invoked[e.Process]
			if ev.Waste[i] == reconnectWaste && ev.Costs[i].Connections == 1 {
				c := ev.Costs[i]
				c.Connections = 0
				for _, m := range []string{"connection.start-ok", "connection.tune-ok", "connection.open"} {
					if c.Methods[m]--; c.Methods[m] <= 0 {
						delete(c.Methods, m)
					}
				}
				ev.Costs[i] = c
				delete(ev.Waste, i)
				closed[e.Process] = false
			}
		}
	}
}

func maxSlots(p *Plan) int {
	n := p.Slots
	for _, script := range p.Admins {
		for _, s := range script {
			if s.Op == histories.Change && s.Delta > 0 {
				n += s.Delta
			}
		}
	}
	return n
}

// start starts process name, with st its place in its script.
func (r *runner) start(name string, st *procState) {
	r.mu.Lock()
	defer r.mu.Unlock()
	st.Name = name
	run.Register(&r.Runner, r.states, &st.Proc, st)
	r.again(st)
}

// again starts st's next incarnation (run.Start), with r.mu held. On the
// broker, simulated or through its proxy, it keeps its client's name
// across incarnations: the broker counts a client's methods and aims its
// faults by that name. The incarnation's code takes r.mu itself, which it
// never holds across a broker call.
func (r *runner) again(st *procState) {
	name := st.Name
	run.Start(&r.Runner, &st.Proc, func(_ string, f func(broker.Broker)) { r.eng.Go(name, f) },
		func(b broker.Broker, gen int) { r.Outside(func() { r.run(name, st, gen, b) }) })
}

// incarnation is what one life of a process has: its client and the slot it
// believes it holds (-1 for a mutex). A killed process starts with none.
type incarnation struct {
	gen    int
	b      broker.Broker // its view of the broker
	client Client
	held   int
	// sent is what the process had sent when its operation began, then
	// when it ended: its ledger's, where the place reads the counts for
	// all the process's operations and incarnations (see runner.counts).
	sent *tally
}

// current reports whether gen is still st's incarnation.
func (r *runner) current(st *procState, gen int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return st.Live(gen)
}

// run plays a process's script from where it stands (a killed process
// restarts at the step after the one it died in).
func (r *runner) run(name string, st *procState, gen int, b broker.Broker) {
	ctx := context.Background()
	in := &incarnation{gen: gen, b: b}
	r.mu.Lock()
	in.sent = &r.ledger(name).sent
	create := st.first && !st.create && r.p.Kind == histories.Semaphore
	st.create = st.create || create
	r.mu.Unlock()
	if create {
		if r.connect(b, name, st, in) {
			r.op(name, st, in, Step{Op: histories.Create})
		}
		r.mu.Lock()
		r.created = true
		r.mu.Unlock()
	}
	// The semaphore is created before anything else, unless its creator is
	// held up by a fault: then the others go ahead without it, a second on.
	// (An exhaustive search lets a process awaiting it move last: it
	// notes which are.)
	exhaustive := r.p.Chooser != nil
	if exhaustive {
		r.mu.Lock()
		if !r.created {
			if r.awaiting == nil {
				r.awaiting = map[string]bool{}
			}
			r.awaiting[name] = true
		}
		r.mu.Unlock()
	}
	r.Await(sleeper(b), time.Second, func() bool { return r.created })
	if exhaustive {
		r.mu.Lock()
		delete(r.awaiting, name)
		r.mu.Unlock()
	}
	for {
		r.eng.Hold(b, name)
		r.mu.Lock()
		if !st.Live(gen) || st.pos >= len(st.script) {
			r.mu.Unlock()
			break
		}
		s := st.script[st.pos]
		st.pos++
		r.mu.Unlock()
		if s.Op == Sleep {
			b.Sleep(ctx, time.Duration(s.Ms)*time.Millisecond)
			continue
		}
		if r.connect(b, name, st, in) {
			r.op(name, st, in, s)
		}
	}
	if !r.current(st, gen) {
		return
	}
	// Let go of what it holds as a recorded release, not silently by
	// closing the connection.
	if in.held != 0 && in.client != nil && !in.client.Broken() {
		r.op(name, st, in, Step{Op: histories.Release})
	}
	if in.client != nil {
		in.client.Close()
	}
	r.mu.Lock()
	if st.Live(gen) {
		st.Done = true
	}
	r.mu.Unlock()
}

// connect makes sure the incarnation has a working client, connecting
// again if its connection is gone (which costs it what it believed it
// held). It gives up after a while if the broker stays unreachable.
func (r *runner) connect(b broker.Broker, name string, st *procState, in *incarnation) bool {
	if in.client != nil && !in.client.Broken() {
		return true
	}
	if in.client != nil {
		in.client.Close()
		in.client, in.held = nil, 0
	}
	err := run.Retry(100, 100*time.Millisecond, sleeper(b), func() error { return r.dial(b, name, st, in) })
	if in.client != nil {
		return true
	}
	// A process that fails to start is the implementation's problem; so is
	// the probe failing to connect, as no fault is in force when it runs.
	// Anyone else may just be cut off by a fault.
	var ie *prover.ImplementationError
	if errors.As(err, &ie) || err != nil && name == "probe" {
		r.problem(fmt.Sprintf("%s could not connect: %v", name, err))
	}
	return false
}

// dial is one try at connecting the incarnation (its client, on success),
// or run.Stop once it is killed: a kill cuts short a Connect under way.
func (r *runner) dial(b broker.Broker, name string, st *procState, in *incarnation) error {
	ctx, cancel := r.eng.OpContext(false)
	defer cancel()
	r.mu.Lock()
	if !st.Live(in.gen) {
		r.mu.Unlock()
		return run.Stop
	}
	r.dialling[name] = cancel
	r.mu.Unlock()
	c, err := r.impl.Connect(ctx, b, r.p, name)
	r.mu.Lock()
	current := st.Live(in.gen)
	if current {
		delete(r.dialling, name)
		if err == nil {
			r.live[name] = c
			if hc, ok := c.(heartbeatCloser); ok && hc.ClosesOnlyOnHeartbeat() {
				r.heartbeatOnly[name] = true
			}
		}
	}
	r.mu.Unlock()
	if err == nil && !current {
		// Killed while it started: the kill found nothing to signal.
		if pc, ok := c.(ProcessClient); ok {
			pc.Signal(syscall.SIGKILL)
		}
		c.Close()
		return run.Stop
	}
	if err == nil {
		in.client = c
	}
	return err
}

// problem records something wrong with the implementation (once).
func (r *runner) problem(p string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, q := range r.problems {
		if q == p {
			return
		}
	}
	r.problems = append(r.problems, p)
}

// op runs one step as an operation of the history: it records the invoke,
// arms an admin-crash if one is due, calls the client, and records the
// completion with what the operation cost.
func (r *runner) op(name string, st *procState, in *incarnation, s Step) {
	e, ok := r.invocation(name, in, s)
	if !ok {
		return
	}
	before := r.counts(name, in.sent)
	r.mu.Lock()
	if !st.Live(in.gen) {
		r.mu.Unlock()
		return
	}
	inv := r.Invoke(&st.Proc, e)
	led := r.ledger(name)
	led.absorb(before)
	var crash int
	if (s.Op == histories.Change || s.Op == histories.Destroy) && len(st.crashes) > 0 {
		crash, st.crashes = st.crashes[0], st.crashes[1:]
	}
	r.mu.Unlock()
	if crash > 0 {
		r.eng.AfterMethods(name, before.total()+crash, func() {
			if !r.isEnding() {
				r.strike(histories.Kill, name)
			}
		})
	}
	ctx, cancel := r.eng.OpContext(s.Op == histories.Wait)
	defer cancel()
	c := in.client
	res, held, err := r.call(ctx, c, in, s)
	spent := r.counts(name, in.sent) // before is done with: the ledger copied it
	done, known := r.completion(name, inv, e.Kind, res, err)
	in.held = held
	r.mu.Lock()
	if !st.Live(in.gen) {
		r.mu.Unlock()
		return // killed meanwhile: the nemesis recorded the outcome as unknown
	}
	cost, waste := led.charge(spent)
	if known {
		r.costs[inv.Index] = cost
		if waste != "" {
			r.waste[inv.Index] = waste
		}
	}
	if s.Op == histories.Destroy && err == nil && name == "probe" {
		r.destroyed = true
	}
	r.Complete(&st.Proc, done)
	r.mu.Unlock()
	if pc, ok := c.(ProcessClient); ok && !known {
		if why := pc.Crashed(); why != "" {
			// The process is gone: what it held is lost. It is recorded as
			// killed after its operation ended, so the kill excuses nothing.
			r.problem(fmt.Sprintf("%s: %s", name, why))
			in.client = nil
			r.killCrashed(in.b, name)
		}
	}
}

// counts reads what process name has sent so far into into, and returns
// it: with no map where the place can (a countReader), so that the
// ledger's two readings an operation neither allocate nor hash a method's
// name; the ledger copies what it keeps.
func (r *runner) counts(name string, into *tally) *tally {
	if cr, ok := r.eng.(countReader); ok {
		cr.ReadCounts(name, &into.Counts)
		clear(into.other)
		return into
	}
	into.set(r.eng.Cost(name))
	return into
}

// invocation is step s's invoke event, or false when the step does not
// apply: an acquire while the client holds a slot, a verify or a release
// while it holds none.
func (r *runner) invocation(name string, in *incarnation, s Step) (histories.Event, bool) {
	e := histories.Event{Type: histories.Invoke, Process: name, F: s.Op, Lock: r.lock}
	if r.p.Kind == histories.Mutex {
		e.Kind = histories.Mutex
	}
	switch s.Op {
	case histories.Acquire:
		if in.held != 0 {
			return e, false
		}
	case histories.Verify, histories.Release:
		if in.held == 0 {
			return e, false
		}
		if r.p.Kind != histories.Mutex {
			e.Value = intValue(slotField, in.held)
		}
	case histories.Create:
		e.Value = intValue(slotsField, r.p.Slots)
	case histories.Change:
		e.Value = intValue(deltaField, s.Delta)
	case histories.Wait:
		e.Value = intValue(slotField, s.Slot)
	}
	return e, true
}

// call performs step s on the client: the completion's value, what the
// incarnation holds afterwards (a slot, -1 for a mutex, 0 for nothing),
// and the client's error.
func (r *runner) call(ctx context.Context, c Client, in *incarnation, s Step) (*amqpcheck.Value, int, error) {
	held, slot := in.held, in.held
	switch s.Op {
	case histories.Acquire:
		got, err := c.Acquire(ctx)
		if err != nil {
			return nil, held, err
		}
		if r.p.Kind == histories.Mutex {
			return nil, -1, nil
		}
		return intValue(slotField, got), got, nil
	case histories.Verify:
		ok, err := c.Verify(ctx, slot)
		if err != nil {
			return nil, held, err
		}
		return heldValue(ok), held, nil
	case histories.Release:
		return nil, 0, c.Release(ctx, slot)
	case histories.Create:
		return nil, held, c.Create(ctx, r.p.Slots)
	case histories.Change:
		from, to, err := c.Change(ctx, s.Delta)
		if err != nil {
			return nil, held, err
		}
		return fromToValue(from, to), held, nil
	case histories.Destroy:
		from, err := c.Destroy(ctx)
		if err != nil {
			return nil, held, err
		}
		return intValue(fromField, from), held, nil
	case histories.Count:
		n, err := c.Count(ctx)
		if err != nil {
			return nil, held, err
		}
		return intValue(slotsField, n), held, nil
	case histories.Wait:
		return nil, held, c.Wait(ctx, s.Slot)
	}
	return nil, held, fmt.Errorf("prover: no operation %q", s.Op)
}

// completion is the event that completes inv: ok with res, a definite
// failure with its reason, or an unknown outcome (known false), which the
// simulator may settle from its ground truth.
func (r *runner) completion(name string, inv histories.Event, kind string, res *amqpcheck.Value, err error) (histories.Event, bool) {
	done := histories.Event{Process: name, F: inv.F, Lock: r.lock, Kind: kind}
	var f *Failure
	failed := false
	if err != nil {
		f, failed = asFailure(err)
	}
	switch {
	case err == nil:
		done.Type, done.Value = histories.Ok, histories.Of(res)
	case failed:
		done.Type, done.Value = histories.Fail, &amqpcheck.Value{Reason: f.Reason}
	default:
		done.Type, done.Error = histories.Info, err.Error()
		if p := r.patch(name, inv); p != nil {
			done = *p
		}
		return done, false
	}
	return done, true
}

// asFailure is errors.As(err, &f) for a *Failure f, in a function of its
// own so that f escapes to the heap only when there is an error to look
// into (completion's f did on every operation).
func asFailure(err error) (*Failure, bool) {
	var f *Failure
	ok := errors.As(err, &f)
	return f, ok
}

// brokerUp is a place that can tell whether its broker is up.
type brokerUp interface{ BrokerUp() bool }

// whenUp records e once the broker is up again, looking every millisecond
// at first and then less often (at most every 16 ms): the record may come
// that much after the broker is back, which only widens the fault's
// window.
func (r *runner) whenUp(u brokerUp, e histories.Event) { r.pollUp(u, e, time.Millisecond) }

func (r *runner) pollUp(u brokerUp, e histories.Event, d time.Duration) {
	r.eng.After(d, func() {
		if !u.BrokerUp() {
			r.pollUp(u, e, min(2*d, 16*time.Millisecond))
			return
		}
		r.mu.Lock()
		r.Rec.Add(e)
		r.mu.Unlock()
	})
}

// ledger is process name's ledger; r.mu must be held or the process be
// the only one touching it.
func (r *runner) ledger(name string) *ledger {
	l := r.ledgers[name]
	if l == nil {
		l = &ledger{}
		r.ledgers[name] = l
	}
	return l
}

func (r *runner) isEnding() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.Ending()
}

// nemesis strikes the plan's faults at their times, then brings the run to
// an end (run.Runner.Nemesis): it waits for the scripts, heals what is
// still broken, lets the broker notice dead connections, and runs the
// quiescent probe.
func (r *runner) nemesis(b broker.Broker) {
	timeline := run.Timeline(len(r.p.Nemesis), func(i int) (int, int, bool) {
		f := r.p.Nemesis[i]
		lasts := 0
		if r.endOf(f.Fault, f.aim()) != "" {
			lasts = f.For
		}
		return f.At, lasts, f.AfterCalls <= 0 && f.Fault != AdminCrash // the others strike mid-operation, by method counts
	})
	r.Nemesis(timeline, run.Nemesis{
		Sleep: sleeper(b),
		Strike: func(t run.Timed) {
			f := r.p.Nemesis[t.Fault]
			if t.End {
				r.strike(r.endOf(f.Fault, f.aim()), f.aim())
			} else {
				r.strike(f.Fault, f.aim())
			}
		},
		EndFaults: func() {
			r.mu.Lock()
			holds := r.Holds()
			r.mu.Unlock()
			for _, h := range holds {
				r.strike(r.endOf(h.Fault, h.Target), h.Target)
			}
		},
		Settle: func() {
			if s, ok := r.eng.(settler); ok {
				s.Settle() // a cluster agrees again
			}
			if r.hb > 0 {
				r.eng.Notice(b, r.lock, 3*r.hb+time.Second) // the broker notices every dead connection
			}
		},
		Probe:     func() { r.start("probe", &procState{script: r.probe()}) },
		Patience:  time.Hour,
		ProbeTime: 24 * time.Hour,
	})
}

// sleeper is Sleep on b, for run.Runner's Await and Nemesis.
func sleeper(b broker.Broker) func(time.Duration) error {
	return func(d time.Duration) error { return b.Sleep(context.Background(), d) }
}

// probe is the final quiescent script: with every other process done and
// every dead connection noticed, a fresh client counts, takes a slot,
// verifies and releases it, removes a slot and destroys the semaphore. On a
// correct implementation each of these succeeds, so every kind of operation
// gets its chance; none adds a slot, which could hide a hole.
func (r *runner) probe() []Step {
	if r.p.Kind == histories.Mutex {
		return []Step{{Op: histories.Acquire}, {Op: histories.Verify}, {Op: histories.Release}}
	}
	return []Step{{Op: histories.Count}, {Op: histories.Acquire}, {Op: histories.Verify}, {Op: histories.Release}, {Op: histories.Change, Delta: -1}, {Op: histories.Destroy}}
}

// strikeFor strikes a fault counted in its target's calls, and ends it
// after its duration.
func (r *runner) strikeFor(f Fault) {
	if r.isEnding() {
		return
	}
	target := f.aim()
	r.strike(f.Fault, target)
	if end := r.endOf(f.Fault, target); f.For > 0 && end != "" {
		r.eng.After(time.Duration(f.For)*time.Millisecond, func() {
			r.mu.Lock()
			on := r.Held(f.Fault, target)
			r.mu.Unlock()
			if on {
				r.strike(end, target)
			}
		})
	}
}

// endOf is the fault that ends fault struck at aim: resume for a pause,
// heal for a partition, and for a node killed, its start (restart-broker
// aimed at it); "" for a fault that does not last.
func (r *runner) endOf(fault, aim string) string {
	if fault == histories.Kill && slices.Contains(r.p.Cluster, aim) {
		return histories.RestartBroker
	}
	return histories.EndOf(fault)
}

// onCluster says whether aim is a node of the plan's cluster or a cut
// between its nodes, not a process.
func (r *runner) onCluster(aim string) bool {
	return slices.Contains(r.p.Cluster, aim) || strings.Contains(aim, ">")
}

// aimValue is how a history records a fault's aim: the process or node
// it strikes, or the directions it cuts between nodes.
func aimValue(aim string) *histories.Fault {
	if strings.Contains(aim, ">") {
		return &histories.Fault{Cut: aim}
	}
	return &histories.Fault{Process: aim}
}

// throughNode is what a fault on a node of a cluster does to the plan's
// processes connected to it, in the history's own terms, which the
// checker judges holds by: while the node is down (killed, until its
// start; stopped for a restart; paused, until its resume) they are cut off
// from the broker, a partition of each; its start, the end of a restart
// and its resume heal them. cut says a partition begins with the fault,
// heal that one ends once it is in place (a restart: both).
func (r *runner) throughNode(fault, node string) (cut, heal bool) {
	if !slices.Contains(r.p.Cluster, node) {
		return false, false
	}
	switch fault {
	case histories.Kill, histories.Pause:
		return true, false
	case histories.Resume:
		return false, true
	case histories.RestartBroker:
		r.mu.Lock()
		down := r.Held(histories.Kill, node)
		r.mu.Unlock()
		return !down, true
	}
	return false, false
}

// onNode lists the plan's processes that connect to node.
func (r *runner) onNode(node string) []string {
	var out []string
	for _, name := range r.p.processes() {
		if r.p.NodeOf(name) == node {
			out = append(out, name)
		}
	}
	return out
}

// throughNodeEvents records fault (a partition or a heal) of each of
// procs, invoked and in place one after the other (the nemesis has one
// operation in flight at a time), saying which fault on which node struck
// it.
func (r *runner) throughNodeEvents(fault string, procs []string, node, nodeFault string) {
	for _, p := range procs {
		v := &histories.Fault{Process: p}
		r.Rec.Add(histories.Event{Process: "nemesis", Type: histories.Invoke, F: fault, Value: v})
		r.Rec.Add(histories.Event{Process: "nemesis", Type: histories.Info, F: fault, Value: v,
			Error: fmt.Sprintf("struck through its node: %s %s", node, nodeFaultWords[nodeFault])})
	}
}

// nodeFaultWords says what a fault did to a node, for the history.
var nodeFaultWords = map[string]string{histories.Kill: "killed", histories.RestartBroker: "restarted",
	histories.Pause: "paused", histories.Resume: "resumed"}

// strike applies one fault and records it. A fault on a node is recorded
// with what it does to the processes connected to the node
// (throughNode): the cut first, so that it is in force for the whole of
// the node's fault, the heal once the node is back (at once, if the
// node's fault could not be applied).
func (r *runner) strike(fault, target string) {
	cut, heal := r.throughNode(fault, target)
	var hit []string
	if cut || heal {
		hit = r.onNode(target)
	}
	if cut {
		r.throughNodeEvents(histories.Partition, hit, target, fault)
	}
	e := histories.Event{Process: "nemesis", F: fault}
	if target != "" {
		e.Value = aimValue(target)
	}
	e.Type = histories.Invoke
	r.Rec.Add(e)
	r.signal(fault, target)
	err := run.Apply(r.eng, fault, target)
	defer func() {
		if heal || cut && err != nil {
			r.throughNodeEvents(histories.Heal, hit, target, fault)
		}
	}()
	r.mu.Lock()
	cluster := r.onCluster(target)
	switch fault {
	case histories.Pause, histories.Partition:
		if err == nil {
			r.Hold(fault, target)
		}
	case histories.Kill:
		if err == nil && cluster {
			r.Hold(fault, target) // until its node starts again
		}
	case histories.RestartBroker:
		r.Unhold(histories.Kill, target)
	case histories.Resume:
		r.Unhold(histories.Pause, target)
	case histories.Heal:
		r.Unhold(histories.Partition, target)
	}
	if err == nil && fault != histories.Resume && fault != histories.Heal {
		for name := range r.states {
			if target == "" || cluster || name == target {
				r.ledger(name).cut()
			}
		}
	}
	e.Type = histories.Info
	if err != nil && target != "" {
		e.Type = histories.Fail
		e.Value = aimValue(target)
		e.Value.(*histories.Fault).Reason = "not applied: " + err.Error()
	}
	if u, ok := r.eng.(brokerUp); ok && err == nil && fault == histories.RestartBroker && !u.BrokerUp() {
		// Struck from outside any process (in the middle of an
		// operation), the restart is still under way: it is over, and
		// recorded so, once the broker is back.
		r.whenUp(u, e)
	} else {
		r.Rec.Add(e)
	}
	r.mu.Unlock()
	if fault == histories.Kill && err == nil && !cluster {
		r.restart(target)
	}
}

// signal delivers a fault to the target's process, when it runs in one.
func (r *runner) signal(fault, target string) {
	r.mu.Lock()
	pc, ok := r.live[target].(ProcessClient)
	r.mu.Unlock()
	if !ok {
		return
	}
	switch fault {
	case histories.Kill:
		pc.Signal(syscall.SIGKILL)
	case histories.Pause:
		pc.Signal(syscall.SIGSTOP)
	case histories.Resume:
		pc.Signal(syscall.SIGCONT)
	}
}

// A selfKiller is a place whose processes cannot strike a kill on
// themselves: the simulator's, where a kill is the World's, struck on a
// process that is not the one running.
type selfKiller interface {
	// KillSelf has strike (the kill of the process whose view is b) run
	// at once from outside it, and b's process wait there for it.
	KillSelf(b broker.Broker, strike func())
}

// killCrashed strikes the kill of a process found crashed after its
// operation (it exited, hung, panicked): the history records it, the
// World (on the simulator) silences its sockets as a dead host's, and a
// fresh incarnation carries on with the script.
func (r *runner) killCrashed(b broker.Broker, name string) {
	if k, ok := r.eng.(selfKiller); ok {
		k.KillSelf(b, func() { r.strike(histories.Kill, name) })
		return
	}
	r.strike(histories.Kill, name)
}

// restart brings a killed process back: its operation in flight ends with
// an unknown outcome, and a fresh incarnation (new connection, no holds)
// carries on with the script.
func (r *runner) restart(name string) {
	r.mu.Lock()
	st := r.states[name]
	if st == nil {
		r.mu.Unlock()
		return
	}
	if cancel := r.dialling[name]; cancel != nil {
		cancel()
		delete(r.dialling, name)
	}
	if st.first && st.create {
		r.created = true // its create was cut short
	}
	if inv, ok := r.InFlight(&st.Proc); ok {
		done := histories.Event{Process: name, Type: histories.Info, F: inv.F, Lock: inv.Lock, Kind: inv.Kind}
		if p := r.patch(name, inv); p != nil {
			done = *p
		}
		r.Complete(&st.Proc, done)
	}
	if r.hb == 0 {
		if r.killed == nil {
			r.killed = map[string]bool{}
		}
		r.killed[name] = true
	}
	delete(r.live, name)
	if st.Done {
		st.Gen++ // the killed incarnation records no more
	} else {
		r.again(st) // a new incarnation: the killed one records no more, and its client is dropped (the kill severed it)
	}
	r.mu.Unlock()
}

// A boxedValue is a history Value with room for the numbers and the
// answer it points to, so that a Value and its fields are one allocation
// rather than one each (histories.Int, histories.Bool).
type boxedValue struct {
	v    amqpcheck.Value
	a, b int
	held bool
}

// valueField is which of a Value's int fields intValue sets.
type valueField uint8

const (
	slotField valueField = iota
	slotsField
	deltaField
	fromField
)

// intValue is a Value whose field f is n.
func intValue(f valueField, n int) *amqpcheck.Value {
	x := &boxedValue{a: n}
	switch f {
	case slotField:
		x.v.Slot = &x.a
	case slotsField:
		x.v.Slots = &x.a
	case deltaField:
		x.v.Delta = &x.a
	case fromField:
		x.v.From = &x.a
	}
	return &x.v
}

// fromToValue is a change's Value: from and to.
func fromToValue(from, to int) *amqpcheck.Value {
	x := &boxedValue{a: from, b: to}
	x.v.From, x.v.To = &x.a, &x.b
	return &x.v
}

// heldValue is a verify's Value: held or not.
func heldValue(held bool) *amqpcheck.Value {
	x := &boxedValue{held: held}
	x.v.Held = &x.held
	return &x.v
}
