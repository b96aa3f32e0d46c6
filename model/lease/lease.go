// Package lease judges lease locks (histories kind "lease"): counting
// semaphores whose holds expire unless refreshed, a mutex being max 1, such
// as the database semaphore, Consul's semaphore recipe and Redlock. It
// registers itself with model (model.Register) so that model.Check judges
// lease locks; a program links it in with a blank import.
//
// Every property is judged by sweeping intervals over the harness's one
// monotonic clock: a lease is certainly valid from its acquire's return
// until a release is invoked or its last grant's invoke plus ttl(1-r), and
// may be valid until its last grant's return plus ttl(1+r), r being the
// drift bound (Options.Drift). Nothing needs a linearizability
// search, so a check is O(n log n). docs/lease.md states each property
// exactly as judged here, and what is left unjudged.
package lease

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/histories/verdict"
	"github.com/lockprover/lockprover/model"
)

// The lease vocabulary: the lock kind, its operations, its reasons.
const (
	Kind    = histories.Lease
	Acquire = histories.Acquire
	Refresh = histories.Refresh
	Release = histories.Release
	Verify  = histories.Verify
	Full    = histories.Full
	Expired = histories.Expired
)

// The lease properties, in the order a report lists them.
const (
	LeaseExclusive = model.LeaseExclusive
	NoRevival      = "no-revival"
	AcquireExact   = model.AcquireExact
	Fencing        = "fencing"
	Recovers       = "recovers"
	Available      = model.Available
)

// Properties lists the lease properties in report order.
var Properties = []string{LeaseExclusive, NoRevival, AcquireExact, Fencing, Recovers, Available}

// Margin is what recovers allows a backend beyond ttl(1+r) to notice that
// a lease expired: a second covers expiry stored with one-second grain (the
// database semaphore's TIMESTAMP) and a sweeper's period.
const Margin = time.Second

func init() { model.Register(Kind, Check) }

// Options are the lease checker's own options, handed to model.Check in
// model.Options.Family (a family sets them through prover.Judging, check
// through its flags).
type Options struct {
	// Drift bounds how far the clocks that time leases may run fast or
	// slow, as a fraction of the time measured: a lease of ttl t granted at
	// g is certainly valid until g + t(1-Drift) and may be valid until
	// g + t(1+Drift). 0 means model.DefaultDrift.
	Drift float64
	// Clocks says which clocks time leases: "" (any: the backend's and
	// every process's, so that a fault of either beyond the drift bound
	// may excuse what it explains) or ClocksBackend (only the backend's,
	// as the database semaphore judges expiry by the database's clock: a
	// fault of a process's clock excuses nothing).
	Clocks string
	// Expiry is how many ttls a lease may outlive its last grant before
	// the backend may expire it: 1 (0 means 1) for a backend that expires
	// a lease after its ttl (etcd, Redis, the database semaphore), 2 for
	// Consul, which invalidates a session only after twice its TTL. A
	// lease may be valid until its last grant's return plus
	// Expiry·ttl(1+Drift); what is certainly valid does not change (the
	// ttl is a lower bound everywhere).
	Expiry float64
	// Priority says that the lock is a priority lease lock (an acquirer of
	// strictly higher priority may take a lease from its holder): the
	// steal properties are judged, and listed even where nothing was
	// stolen. Without it they are listed only for a history in which some
	// acquire says its priority or some lease was lost.
	Priority bool
	// Validity says that the implementation's grants say their validity
	// (validity_ms): validity-sound is judged, and listed even where no
	// grant said one. Without it, validity-sound is listed only for a
	// history in which some grant says its validity.
	Validity bool
	// RestartKeeps says that a restart of the backend (a restart-broker
	// aimed at no process of the history) keeps its leases and gives each
	// a fresh life from when it is back, as a persistent Consul agent and
	// etcd do: a lease that may be valid when the restart is invoked may
	// be valid until the restart's completion plus Expiry·ttl(1+Drift)
	// plus RestartGrace (etcd: its election timeout and its sweep). Its
	// certain validity does not change.
	RestartKeeps bool
	RestartGrace time.Duration
	// Elections names a cluster's servers (the nodes that keep its state
	// and elect its leader), whose faults may bring an election, at which
	// every lease gets a fresh life on the new leader (etcd's lessor
	// Promote; Consul's new leader restarts its session timers): a
	// server paused, killed or restarted, or a partition that cuts a link
	// between two servers, counts as a restart that keeps the leases
	// (RestartKeeps), from when it is over (its heal, its resume, its
	// server back) plus RestartGrace. A fault on another node (a client
	// agent cut off from the servers) brings none. Certain validity does
	// not change.
	Elections []string
	// Verify says that the implementation's holders verify (verify
	// {token} -> ok {held}): aware is judged, and listed even where no
	// verify answered held. Without it, aware is listed only for a history
	// that holds a verify.
	Verify bool
	// KillEnds says that the backend frees a lease the moment its
	// holder's process dies, as a session-level lock (a PostgreSQL
	// advisory lock, an exclusive queue) is freed when its holder's
	// connection closes: a kill of the holder's process (a nemesis kill
	// aimed at it, invoked after its acquire was) ends the lease's
	// certain validity there, as a release's invoke does. A dead holder
	// acts no more, so another taking the lock then is no double hold.
	// What may be valid does not change.
	KillEnds bool
}

// ClocksBackend is Options.Clocks for designs whose leases are timed by the
// backend's clock alone.
const ClocksBackend = "backend"

// DriftBound is o.Drift, or model.DefaultDrift when o.Drift is 0.
func (o Options) DriftBound() float64 {
	if o.Drift == 0 {
		return model.DefaultDrift
	}
	return o.Drift
}

// never is the return time of an operation whose outcome is unknown, and
// the end of what never ends.
const never = math.MaxInt64

// An op is one client operation: its invoke and its completion.
type op struct {
	index, done int // the events' indexes; done -1 if it never completed
	proc        string
	f           string
	typ         histories.Type // the completion's type; "" if none
	call, ret   int64          // ret is never when the outcome is unknown
	heard       int64          // when its completion came, an info's too; never if none did
	arg, res    *Value
	err         string
	lease       *lease // the lease an acquire granted or a refresh or release names
}

func (o *op) unknown() bool { return o.typ == histories.Info || o.typ == "" }
func (o *op) ok() bool      { return o.typ == histories.Ok }
func (o *op) failed() bool  { return o.typ == histories.Fail }

// reason is a failure's reason, or "".
func (o *op) reason() string {
	if o.failed() && o.res != nil {
		return o.res.Reason
	}
	return ""
}

// ttl is an acquire's or refresh's ttl, in nanoseconds: the lease it
// granted where the implementation said so (an ok completion's ttl_ms: a
// backend with a grain of whole seconds grants 100 ms as 1 s), else the
// ttl it asked for. Judging by what was granted keeps a lease longer
// than asked from looking revived.
func (o *op) ttl() int64 {
	if o.ok() && o.res != nil && o.res.TTLMs != nil {
		return int64(*o.res.TTLMs) * int64(time.Millisecond)
	}
	if o.arg == nil || o.arg.TTLMs == nil {
		return 0
	}
	return int64(*o.arg.TTLMs) * int64(time.Millisecond)
}

func (o *op) max() int {
	if o.arg == nil || o.arg.Max == nil {
		return 1
	}
	return *o.arg.Max
}

func (o *op) token() string {
	if o.f == Acquire {
		if o.res != nil {
			return o.res.Token
		}
		return ""
	}
	if o.arg != nil {
		return o.arg.Token
	}
	return ""
}

// A fault is a nemesis operation.
type fault struct {
	index  int
	f      string
	target string // the process aimed at; "" for the backend
	call   int64
	end    int64  // when it completed (in place, or failed); never if it did not
	over   int64  // when it stops being in force
	cut    string // the links between a cluster's nodes a partition cut (its heal restores them)
	reset  int64  // a clock fault's: the invoke of the clock-reset that ends it; never if none
	offset int64  // a clock fault's amount, in nanoseconds, made positive
	said   string // its completion's error: what the run measured of a fault it did not strike, or why one did not end as it should
}

// firstGrant is the invoke of the lease's first grant: its acquire, or
// (a lease no ok acquire granted) its first operation; never if none.
func (l *lease) firstGrant() int64 {
	switch {
	case l.acq != nil:
		return l.acq.call
	case len(l.ops) > 0:
		return l.ops[0].call
	}
	return never
}

func (f *fault) clock() bool { return f.f == histories.ClockSkew || f.f == histories.ClockJump }

// atClient says whether f is aimed at a process of the history. A fault
// aimed at none ("") or at a name no process of the history has (a
// server, "redis2"; a Jepsen node) strikes the backend, or a part of it.
func (h *history) atClient(f *fault) bool { return f.target != "" && h.procs[f.target] }

// describe renders a fault: "kill c1 (#4)", "clock-jump of the server by
// 8000 ms (#6)".
func (f *fault) describe() string {
	who := f.target
	if f.clock() {
		if who == "" {
			who = "of the server"
		} else {
			who = "of " + who + "'s clock"
		}
		return fmt.Sprintf("%s %s by %d ms (#%d)", f.f, who, f.offset/int64(time.Millisecond), f.index)
	}
	switch {
	case f.cut != "":
		return fmt.Sprintf("%s %s (#%d)", f.f, f.cut, f.index)
	case who == "":
		return fmt.Sprintf("%s (#%d)", f.f, f.index)
	}
	return fmt.Sprintf("%s %s (#%d)", f.f, who, f.index)
}

// A lease is what one acquire granted, with the refreshes and releases
// that name its token.
type lease struct {
	id    int
	token string
	acq   *op // nil for a token no ok acquire granted (an unknown acquire's, maybe)
	proc  string
	max   int
	ops   []*op // refreshes and releases, in invoke order
	// lost is when its holder marked it lost to a thief (its first lost
	// notice), never if it did not: it ends its certain validity there.
	lost   int64
	lostBy *notice
	// killed is the invoke of the first kill of its holder's process
	// after its acquire's invoke, where a kill ends a lease
	// (Options.KillEnds); never otherwise.
	killed int64

	certain []span // where it is certainly valid
	may     []span // where it may be valid, expiry counted (no margin)
	held    span   // where it may be held, expiry ignored: until an ok release returned

	revivals []revival // refreshes and ok releases invoked after it had certainly ended
	ghosts   []*op     // refreshes of unknown outcome invoked after it had certainly ended
}

func (l *lease) name() string {
	if l.acq == nil {
		return fmt.Sprintf("lease %s (granted by no acquire the history shows complete)", l.token)
	}
	return fmt.Sprintf("%s's lease %s (acquire #%d)", l.proc, l.token, l.acq.index)
}

// A span is [from, to) on the harness's clock; byTTL when to is an expiry
// (drift-shrunk or -stretched), not a release's invoke or return.
type span struct {
	from, to int64
	byTTL    bool
}

// history is one lease lock's history.
type history struct {
	lock    string
	ops     []*op // in invoke order
	faults  []*fault
	leases  []*lease
	phantom []*op // acquires of unknown outcome: each may hold a lease from its invoke on
	procs   map[string]bool
	byProc  map[string][]*op // each process's operations, in invoke order
	orphans []*op            // ok refreshes and releases of a token nobody could have granted
	r       float64
	// k is the expiry factor (Options.Expiry): a lease may be valid
	// until k·ttl(1+r) after its last grant's return.
	k float64
	// backendClock: only the backend's clock times leases, so a fault of a
	// process's clock excuses nothing.
	backendClock bool
	// validities: some grant says its validity (validity_ms).
	validities bool
	// notices are the lost notices (priority leases), in history order.
	notices []*notice
	// verifies are the verifies, in invoke order, with the lease each
	// names.
	verifies []verified
	// restartKeeps: a restart of the backend gives every lease a fresh
	// life, and restartGrace more (Options.RestartKeeps).
	restartKeeps bool
	restartGrace int64
	// elections are a cluster's servers, whose faults count as restarts
	// that keep the leases (Options.Elections).
	elections []string
	// killEnds: a kill of a holder's process ends its lease
	// (Options.KillEnds).
	killEnds bool
}

// verified is a verify and the lease it names (nil for none granted).
type verified struct {
	o *op
	l *lease
}

// A notice is a lost notice: process proc marked its lease token lost to
// the lease thief at time at.
type notice struct {
	index        int
	proc         string
	at           int64
	token, thief string
	victim, by   *lease // the leases named, where the history shows them granted
}

// Check judges one lease lock: its events and the history's nemesis
// events, as model.Check hands them to a registered family, with its
// Options from o.Family.
func Check(events []histories.Event, o model.Options) []verdict.Verdict {
	lo := model.FamilyOptions[Options](o)
	h := build(events, lo)
	h.backendClock = lo.Clocks == ClocksBackend
	vs := []verdict.Verdict{
		h.exclusive(),
		h.noRevival(),
	}
	exact, recovers := h.exactAndRecovers()
	vs = append(vs, exact, h.fencing())
	if lo.Validity || h.validities {
		vs = append(vs, h.validitySound())
	}
	vs = append(vs, recovers, h.available(o.Jepsen))
	if lo.Verify || len(h.verifies) > 0 {
		vs = append(vs, h.aware())
	}
	if lo.Priority || h.priorities() {
		vs = append(vs, h.stealOrder(), h.stealExact())
	}
	for i := range vs {
		vs[i].Lock = h.lock
	}
	return vs
}

// build pairs invokes with completions, faults with what ends them, and
// operations with their leases.
func build(events []histories.Event, lo Options) *history {
	h := &history{procs: map[string]bool{}, byProc: map[string][]*op{}, r: lo.DriftBound()}
	if lo.Expiry > 1 {
		h.k = lo.Expiry
	}
	if lo.RestartKeeps || len(lo.Elections) > 0 {
		h.restartKeeps, h.restartGrace = true, max(int64(lo.RestartGrace), 0)
	}
	h.elections = lo.Elections
	h.killEnds = lo.KillEnds
	inflight := map[string]*op{}
	invokes := 0
	for i := range events {
		if events[i].Type == histories.Invoke && events[i].Process != "nemesis" {
			invokes++
		}
	}
	ops := make([]op, 0, invokes) // every op, in one allocation: never appended beyond its capacity
	h.ops = make([]*op, 0, invokes)
	var nemesis *fault
	for _, e := range events {
		if e.Process == "nemesis" {
			if e.Type == histories.Invoke {
				f := &fault{index: e.Index, f: e.F, call: e.Time, end: never}
				if fv := histories.FaultOf(&e); fv != nil {
					f.target, f.cut = fv.Process, fv.Cut
					if fv.OffsetMs != nil {
						f.offset = int64(*fv.OffsetMs) * int64(time.Millisecond)
						if f.offset < 0 {
							f.offset = -f.offset
						}
					}
				}
				h.faults = append(h.faults, f)
				nemesis = f
			} else if nemesis != nil {
				nemesis.end, nemesis.said = e.Time, e.Error
				nemesis = nil
			}
			continue
		}
		h.lock = e.Lock
		h.procs[e.Process] = true
		if histories.IsNotice(&e) {
			n := &notice{index: e.Index, proc: e.Process, at: e.Time}
			if v := ValueOf(&e); v != nil {
				n.token, n.thief = v.Token, v.Thief
			}
			h.notices = append(h.notices, n)
			continue
		}
		if e.Type == histories.Invoke {
			ops = append(ops, op{index: e.Index, done: -1, proc: e.Process, f: e.F, call: e.Time, ret: never, heard: never, arg: ValueOf(&e)})
			o := &ops[len(ops)-1]
			h.ops = append(h.ops, o)
			h.byProc[e.Process] = append(h.byProc[e.Process], o)
			inflight[e.Process] = o
			continue
		}
		o := inflight[e.Process]
		if o == nil { // a validated history never gets here
			continue
		}
		delete(inflight, e.Process)
		o.done, o.typ, o.res, o.err, o.heard = e.Index, e.Type, ValueOf(&e), e.Error, e.Time
		h.validities = h.validities || (o.res != nil && o.res.ValidityMs != nil)
		if e.Type != histories.Info {
			o.ret = e.Time
		}
	}
	h.overs()
	h.attach()
	for _, l := range h.leases {
		h.spans(l)
	}
	h.stealSpans()
	return h
}

// overs sets when each fault stops being in force: a pause or a partition
// at the completion of the resume or heal of its target that follows it, a
// clock fault at the completion of the clock-reset of its clock that
// follows it, any other fault once it is in place.
func (h *history) overs() {
	for i, f := range h.faults {
		f.over = f.end
		ender := histories.EndOf(f.f)
		if f.clock() {
			ender = histories.ClockReset
		}
		if ender == "" {
			continue
		}
		f.over, f.reset = never, never
		for _, g := range h.faults[i+1:] {
			if g.f == ender && g.target == f.target && g.cut == f.cut && g.end != never {
				f.over, f.reset = g.end, g.call
				break
			}
		}
	}
}

// attach makes a lease of every ok acquire and hands each refresh and
// release to the latest lease of its token whose acquire was invoked before
// it. A token no ok acquire granted may be an acquire of unknown outcome's
// (its token never reached the history): its lease is one of those
// phantoms, with no acquire. If no acquire of unknown outcome was invoked
// before the operation returned, nobody could have granted it.
func (h *history) attach() {
	byToken := map[string][]*lease{}
	for _, o := range h.ops {
		if o.f == Acquire && o.ok() {
			l := &lease{id: len(h.leases), token: o.token(), acq: o, proc: o.proc, max: o.max(), lost: never, killed: h.killOf(o)}
			o.lease = l
			h.leases = append(h.leases, l)
			byToken[l.token] = append(byToken[l.token], l)
		}
		if o.f == Acquire && o.unknown() {
			h.phantom = append(h.phantom, o)
		}
	}
	orphan := map[string]*lease{}
	for _, o := range h.ops {
		if o.f == Acquire {
			continue
		}
		var l *lease
		for _, c := range byToken[o.token()] {
			if c.acq.call < o.call {
				l = c
			}
		}
		if o.isVerify() {
			// It neither grants nor ends: aware judges it on its own.
			h.verifies = append(h.verifies, verified{o, l})
			continue
		}
		if l == nil {
			// The largest max of the unknown acquires that could have
			// granted it: the most leniently judged.
			m := 0
			for _, p := range h.phantom {
				if p.call < o.ret {
					m = max(m, p.max())
				}
			}
			if m == 0 {
				if o.ok() {
					h.orphans = append(h.orphans, o)
				}
				continue
			}
			if l = orphan[o.token()]; l == nil {
				l = &lease{id: len(h.leases), token: o.token(), proc: o.proc, max: m, lost: never, killed: never}
				orphan[o.token()] = l
				h.leases = append(h.leases, l)
			}
		}
		o.lease = l
		l.ops = append(l.ops, o)
	}
	h.attachNotices(byToken)
}

// killOf is when a kill ends the lease acquire a granted: the invoke of
// the first kill aimed at its process after its invoke, where kills end
// leases (Options.KillEnds); never otherwise.
func (h *history) killOf(a *op) int64 {
	if h.killEnds {
		for _, f := range h.faults {
			if f.f == histories.Kill && f.target == a.proc && f.call > a.call {
				return f.call
			}
		}
	}
	return never
}

// shrink and stretch are a ttl as the harness's clock may see it: ttl(1-r)
// and ttl(1+r) (k·ttl(1+r) where the backend may let a lease outlive its
// ttl k times), rounded to the lenient side.
func (h *history) shrink(ttl int64) int64 {
	return ttl - int64(math.Ceil(float64(ttl)*h.r))
}

func (h *history) stretch(ttl int64) int64 {
	if h.k > 1 {
		return int64(math.Ceil(h.k * float64(ttl) * (1 + h.r)))
	}
	return ttl + int64(math.Ceil(float64(ttl)*h.r))
}

// horizon names what stretch measures, for explanations: "ttl(1+drift)",
// or "2·ttl(1+drift)" for a backend that lets a lease outlive its ttl
// twice.
func (h *history) horizon() string {
	if h.k > 1 {
		return fmt.Sprintf("%g·ttl(1+drift)", h.k)
	}
	return "ttl(1+drift)"
}

// seconds renders a time of the history for a person.
func seconds(t int64) string {
	if t == never {
		return "for ever"
	}
	return fmt.Sprintf("%.3fs", float64(t)/1e9)
}

// describeOp renders an operation as every family does: "c1 acquire max
// 1, ttl_ms 1000 -> ok token a, fence 3 (#2)".
func describeOp(o *op) string {
	return model.DescribeOp(o.proc, o.f, histories.Of(o.arg), histories.Of(o.res), o.typ, o.err, o.index)
}

// clockSlack is how far the clock faults that may bear on this lock were
// from true time, in total, at some moment of [from, to]: those aimed at
// the backend's clock (or at a part of it, see atClient) or at the clock
// of a process that operates on the lock, in force then. It returns the
// faults too, for the report.
func (h *history) clockSlack(from, to int64) (int64, []*fault) {
	return h.slack(from, to, false)
}

// stepSlack is clockSlack for a lease granted at from: how far the clock
// faults could have moved its end by to. The backend measures a lease
// against its own clock alone (a deadline set and read on it, or a ttl it
// counts down), so an offset it had all along changes nothing: only a
// step of its clock within [from, to] counts, the fault's own or its
// clock-reset's. A process's clock, where the design reads clients'
// clocks too, counts as in clockSlack: two clocks that disagree set and
// read one deadline.
func (h *history) stepSlack(from, to int64) (int64, []*fault) {
	return h.slack(from, to, true)
}

func (h *history) slack(from, to int64, steps bool) (int64, []*fault) {
	var slack int64
	var fs []*fault
	for _, f := range h.faults {
		if !f.clock() || (h.atClient(f) && h.backendClock) {
			continue
		}
		if steps && !h.atClient(f) {
			stepped := f.call <= to && f.end >= from
			reset := f.over != never && f.reset <= to && f.over >= from
			if !stepped && !reset {
				continue
			}
		} else if f.call > to || f.over <= from {
			continue
		}
		slack += f.offset
		fs = append(fs, f)
	}
	return slack, fs
}

func describeFaults(fs []*fault) string {
	s := make([]string, len(fs))
	for i, f := range fs {
		s[i] = f.describe()
	}
	return strings.Join(s, ", ")
}

// sortedOps returns ops sorted by invoke time (stable: invoke order).
func sortedOps(ops []*op) []*op {
	s := append([]*op(nil), ops...)
	slices.SortStableFunc(s, func(a, b *op) int { return cmp.Compare(a.call, b.call) })
	return s
}
