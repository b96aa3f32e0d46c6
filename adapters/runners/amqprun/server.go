package amqprun

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lockprover/lockprover/adapters/host/faultnet"
	"github.com/lockprover/lockprover/adapters/servers/rabbitmq"
	"github.com/lockprover/lockprover/adapters/servers/rabbitmq/amqpproxy"
	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/internal/prover/run"
	"github.com/lockprover/lockprover/model/amqpcheck"
	"github.com/lockprover/lockprover/model/amqplocks"
)

// A serverNote is what a process's proxy saw the broker do on its own
// (amqpproxy.ServerEvent), on the history's clock, with what the broker's log
// says of that connection (or why it could not be read).
type serverNote struct {
	proc   string
	at     int64 // nanoseconds since the run began
	ev     amqpproxy.ServerEvent
	logged string
}

// serverWitness is a place whose proxies saw what the broker did.
type serverWitness interface {
	serverNotes() []serverNote
}

// versioned is a place that knows its broker's version: raceVersion is
// that version where it has the exclusive-delete race
// (rabbitmq.ExclusiveDeleteRace), "" otherwise.
type versioned interface {
	raceVersion() string
}

// brokerVersions are the versions read of each broker URL in this
// process (rabbitmq.ServerVersion): a run reads it once, at its first
// declare in flight, not once a plan.
var brokerVersions sync.Map // URL -> string ("" if unreadable)

// raceVersion reads the broker's version once a process (or "" if it
// cannot be read: no race is then blamed).
func (e *realPlace) raceVersion() string {
	v, ok := brokerVersions.Load(e.t.URL)
	if !ok {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		got, _ := rabbitmq.ServerVersion(ctx, e.t.URL)
		cancel()
		v, _ = brokerVersions.LoadOrStore(e.t.URL, got)
	}
	if s := v.(string); rabbitmq.ExclusiveDeleteRace(s) {
		return s
	}
	return ""
}

// trace is what the run's proxies saw of each connection, in the order
// seen, each line stamped with its time since the run began and its
// process (model.Evidence.Trace).
func (e *realPlace) trace() []string {
	var traces []faultnet.NamedTrace
	for _, name := range e.proxies.Names() {
		traces = append(traces, faultnet.NamedTrace{Name: name, Lines: e.proxies.Get(name).Trace()})
	}
	return faultnet.Merge(e.start, traces)
}

func (e *realPlace) serverNotes() []serverNote {
	var notes []serverNote
	for _, name := range e.proxies.Names() {
		for _, ev := range e.proxies.Get(name).ServerEvents() {
			notes = append(notes, serverNote{proc: name, at: int64(ev.At.Sub(e.start)), ev: ev})
		}
	}
	slices.SortStableFunc(notes, func(a, b serverNote) int { return int(min(max(a.at-b.at, -1), 1)) })
	e.brokerLog(notes)
	return notes
}

// brokerLog adds to each close of a connection by the broker what the
// broker's log says of that connection since the run began ("missed
// heartbeats from client, timeout: 1s"), where the log is readable here.
func (e *realPlace) brokerLog(notes []serverNote) {
	closes := slices.IndexFunc(notes, func(n serverNote) bool {
		return n.ev.What == amqpproxy.ServerClose || n.ev.What == amqpproxy.ServerEOF
	})
	if closes < 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	reasons, err := func() (map[string][]string, error) {
		path, err := e.ctl.LogFile(ctx)
		if err != nil {
			return nil, err
		}
		return rabbitmq.LogReasons(path, e.start.Add(-time.Second))
	}()
	for i := range notes {
		n := &notes[i]
		switch {
		case n.ev.What != amqpproxy.ServerClose && n.ev.What != amqpproxy.ServerEOF:
		case err != nil:
			n.logged = fmt.Sprintf("RabbitMQ's log not read: %v", err)
		case len(reasons[n.ev.Local]) > 0:
			n.logged = "RabbitMQ's log: " + strings.Join(reasons[n.ev.Local], "; ")
		default:
			n.logged = "RabbitMQ's log says nothing of it"
		}
	}
}

// brokerFaults are the faults the broker struck on its own, as nemesis
// events of the history h of lock: a connection it closed (a
// connection.close, or its socket ending first) that no fault of
// lockprover's on that process explains within grace of its end is a
// force-close of it; so is a connection whose heartbeats lapsed (see
// lapsed); a connection that ended with an exclusive declare of
// a holder's queue in flight may make RabbitMQ delete that queue (the
// exclusive-delete race of RabbitMQ before 4.2.3): a queue-deleted of each
// other process that held, or was taking, that queue's slot then. Each
// event's error says what the proxy saw.
//
// heartbeatOnly names the client of each process that closes a socket
// without a connection.close only when its heartbeat read deadline passed
// (ownDeadline), "" for the others: lockprover's reference
// (referenceClient), and a process that declared so in its init_ok
// (declaredClient). race is the broker's
// version where it has the exclusive-delete race
// (rabbitmq.ExclusiveDeleteRace), "" where it does not or is not known
// to: a declare in flight then excuses nothing.
func brokerFaults(h []histories.Event, lock string, notes []serverNote, grace int64, hb time.Duration, heartbeatOnly func(proc string) string, race string) []histories.Event {
	var out []histories.Event
	for _, n := range notes {
		switch n.ev.What {
		case amqpproxy.ClientEnd:
			why := lapsed(n, hb)
			if why == "" {
				why = deadlinePassed(h, n, hb)
			}
			if client := heartbeatOnly(n.proc); why == "" && client != "" {
				why = ownDeadline(n, hb, client)
			}
			if why == "" {
				continue
			}
			if ok, after := explained(h, n, grace); !ok {
				out = append(out, run.FaultPair(histories.ForceClose, n.proc, n.at, run.NotStruck+why+after)...)
			}
		case amqpproxy.ServerClose, amqpproxy.ServerEOF:
			ok, after := explained(h, n, grace)
			if ok {
				continue
			}
			why := fmt.Sprintf(run.NotStruck+"RabbitMQ closed %s's connection on its own (%s)", n.proc, n.ev)
			if n.logged != "" {
				why += "; " + n.logged
			}
			out = append(out, run.FaultPair(histories.ForceClose, n.proc, n.at, why+after)...)
		case amqpproxy.DeclareInFlight:
			if !n.ev.Exclusive || race == "" {
				continue
			}
			for _, hd := range holdersOf(h, lock, n.ev.Queue, n.proc, n.at) {
				why := fmt.Sprintf("not struck by lockprover: %s; RabbitMQ %s then deletes the queue of that name, %s's (the exclusive-delete race of versions before 4.2.3, docs/broker-semantics.md 7c)",
					strings.Replace(n.ev.String(), "the connection", n.proc+"'s connection", 1), race, hd.proc)
				if hd.at > n.at {
					why += fmt.Sprintf(", which %s took %v after that connection ended, before the broker may have got to the declare", hd.proc, time.Duration(hd.at-n.at).Round(time.Millisecond))
				}
				out = append(out, run.FaultPair(histories.QueueDeleted, hd.proc, hd.at, why)...)
			}
		}
	}
	return out
}

// lapsed says why a connection the client ended abruptly (n, a
// amqpproxy.ClientEnd) ended for its heartbeats, or "" if it did not: one side
// had sent nothing for two heartbeats (hb) or more, which RabbitMQ itself
// takes for a dead peer, and a client library gives up on (amqp091-go
// after three). The broker silent is the broker's stall; the client silent
// is its process's (a loaded machine did not run it: it neither sent nor
// read, and its read deadline passed); lockprover's own process stalled
// is the proxy's (nothing passed either way; what was sent meanwhile
// passes once it runs again, so neither side looks silent). Never with heartbeats off: a
// client that drops its socket for its own reasons breaks nothing.
func lapsed(n serverNote, hb time.Duration) string {
	switch {
	case hb <= 0:
		return ""
	case n.ev.Silence >= 2*hb:
		return fmt.Sprintf("RabbitMQ sent %s nothing for %v, past two heartbeats of %v, and %s's client closed the connection (%s)", n.proc, n.ev.Silence.Round(time.Millisecond), hb, n.proc, n.ev)
	case n.ev.ClientSilence >= 2*hb:
		return fmt.Sprintf("%s sent nothing for %v, past two heartbeats of %v (its process did not run: a stall of the machine, not struck by lockprover), and its client closed the connection (%s)", n.proc, n.ev.ClientSilence.Round(time.Millisecond), hb, n.ev)
	case n.ev.Stalled >= 2*hb:
		return fmt.Sprintf("lockprover's own process, which carries %s's connection through its proxy, did not run for %v, past two heartbeats of %v (a stall of the machine), and %s's client closed the connection (%s)", n.proc, n.ev.Stalled.Round(time.Millisecond), hb, n.proc, n.ev)
	}
	return ""
}

// deadlinePassed says why a connection the client ended abruptly (n, a
// amqpproxy.ClientEnd) ended for its own heartbeat deadline though no
// side was silent for two heartbeats, or "" if it did not. amqp091-go
// gives a connection up when no frame was read for three heartbeats
// after its heartbeat goroutine last moved the read deadline on: a
// goroutine a loaded machine does not run for a few seconds lets the
// deadline pass while the broker's frames wait, read, in the socket (the
// soak of issue 55: a probe's change delta answered "read tcp ...: i/o
// timeout" with RabbitMQ sending every second). The one read deadline
// amqp091-go sets is that one, so an operation of n's process answering
// an i/o timeout on its read says so: one whose error names n's
// connection by the client's address ("read tcp CLIENT->PROXY"), whenever
// it came (an admin idle when its connection ended learns of it at its
// next operation, which the client library answers with the same error:
// a false available FAIL of the suite's, issue 55); where the error names
// no address the proxy saw, one within three heartbeats of n. Never with
// heartbeats off.
func deadlinePassed(h []histories.Event, n serverNote, hb time.Duration) string {
	if hb <= 0 {
		return ""
	}
	invoked := int64(-1) // the invoke of n.proc's operation in flight
	for _, e := range h {
		if e.Process == n.proc && e.Type == histories.Invoke {
			invoked = e.Time
		}
		if e.Process != n.proc || e.Type == histories.Invoke || e.Type == histories.Ok || !strings.HasSuffix(e.Error, "i/o timeout") {
			continue
		}
		client, _, ok := run.TimedOut(e.Error, "read")
		if !ok {
			continue
		}
		if n.ev.Client != "" && client != n.ev.Client {
			continue // another connection of n.proc's
		}
		// Within three heartbeats of the end, or the operation in flight
		// when the connection ended: its answer may be recorded later
		// than that on a loaded machine (a process's reply read late).
		inFlight := invoked >= 0 && invoked <= n.at && n.at <= e.Time
		named := n.ev.Client != "" && e.Time >= n.at
		if d := e.Time - n.at; named || inFlight || (d >= -int64(3*hb) && d <= int64(3*hb)) {
			return fmt.Sprintf("%s's client library gave its connection up when its read deadline of three heartbeats of %v passed (%q), though neither side was silent for two (RabbitMQ silent %v, %s silent %v): its process did not run in time, a stall of the machine (%s)",
				n.proc, hb, e.Error, n.ev.Silence.Round(time.Millisecond), n.proc, n.ev.ClientSilence.Round(time.Millisecond), n.ev)
		}
	}
	return ""
}

// A heartbeatCloser is a Client that says whether its library ends a
// connection's socket without a connection.close only when its heartbeat
// read deadline passes, as amqp091-go does: an implementation's process
// declares it in its init_ok ("abrupt_close": "heartbeat",
// docs/protocol-amqp-locks.md), so that such an end, where lockprover
// struck nothing, is recorded as the stall of the machine it is and not
// left for the checker to judge the hold it cost as a lie (the reference
// served through the protocol, beside two busy loops: its holder, idle
// for 3 s, reconnected and rightly said not held).
type heartbeatCloser interface{ ClosesOnlyOnHeartbeat() bool }

// How ownDeadline names a client that ends a socket so only when its
// heartbeat deadline passes.
const (
	referenceClient = "amqp091-go, lockprover's reference"
	declaredClient  = `whose init_ok declared "abrupt_close": "heartbeat"`
)

// ownDeadline says why the reference's client ended a connection (n, a
// amqpproxy.ClientEnd) when no side was silent for two heartbeats and no
// operation of its process was in flight to answer the error: amqp091-go
// closes its socket without a connection.close only on a read error, and
// the one read deadline it sets is three heartbeats after its heartbeat
// goroutine last moved it on, which a loaded machine may not run in time
// (the soak of issue 55: a mutex holder idle for 3 s, its verify then
// finding its queue gone, on RabbitMQ 3.10.8 and 4.3.6 alike). "" with
// heartbeats off. Only for the reference and the processes that declare
// the same of their client (heartbeatCloser): another client may end its
// socket for its own reasons.
func ownDeadline(n serverNote, hb time.Duration, client string) string {
	if hb <= 0 {
		return ""
	}
	return fmt.Sprintf("%s's client (%s) closed its socket without a connection.close, which it does only when its heartbeat read deadline passed (three heartbeats of %v, for amqp091-go): its process did not run in time, a stall of the machine (%s)", n.proc, client, hb, n.ev)
}

// explained says whether a fault lockprover struck on n's process (or on
// every process: a broker restart; a fault on a node of a cluster is
// recorded as a fault on each process it strikes) explains the broker closing its
// connection: n came after the fault began and no later than grace after
// it ended, and the process began no operation between the fault's end
// and n. The checker takes a hold taken by an acquire begun after a fault
// was over as safe from that fault (docs/checking.md), so a close after
// such an operation began must be recorded however soon after the fault
// it came (a process that did not run for two heartbeats on a loaded
// machine, within 10 s of a kill or a resume of it with 3 s heartbeats):
// left out, it let that hold outlive the connection and made the next
// holder a double hold (issue 55). Where a fault's grace covered n but an
// operation began after the fault, after says so, for the close's record;
// otherwise it is "".
func explained(h []histories.Event, n serverNote, grace int64) (ok bool, after string) {
	open := map[string]int64{} // fault -> when it began, while it lasts
	// within says whether n came no later than grace after the fault
	// ended at end (the event h[i]), with no operation begun since.
	within := func(i int, end int64) bool {
		if n.at > end+grace {
			return false
		}
		if op := begunBetween(h, n.proc, end, n.at); op >= 0 {
			f := h[i].F
			if f == histories.Resume || f == histories.Heal {
				f = startOf(f)
			}
			after = fmt.Sprintf("; recorded though it came within the grace of lockprover's %s of %s: %s began its %s after that %s was over, and the checker takes what a process begins after a fault as safe from it", f, n.proc, n.proc, h[op].F, f)
			return false
		}
		return true
	}
	for i, e := range h {
		if e.Process != "nemesis" || e.Type != histories.Invoke {
			continue
		}
		target := ""
		if f := histories.FaultOf(&e); f != nil {
			target = f.Process
		}
		if target != n.proc && (e.F != histories.RestartBroker || target != "") {
			continue // a fault on another process, or on a node of a cluster
		}
		switch e.F {
		case histories.Pause, histories.Partition:
			open[e.F] = e.Time
		case histories.Resume, histories.Heal:
			began, ok := open[startOf(e.F)]
			if ok && began <= n.at && within(i, e.Time) {
				return true, ""
			}
			delete(open, startOf(e.F))
		case histories.Kill, histories.ForceClose, histories.RestartBroker, histories.DropReply:
			if e.Time <= n.at && within(i, e.Time) {
				return true, ""
			}
		}
	}
	for _, began := range open { // lasting to the end
		if began <= n.at {
			return true, ""
		}
	}
	return false, after
}

// begunBetween is the index in h of the first operation proc began after
// from and no later than to, or -1.
func begunBetween(h []histories.Event, proc string, from, to int64) int {
	for i, e := range h {
		if e.Process == proc && e.Type == histories.Invoke && from < e.Time && e.Time <= to {
			return i
		}
	}
	return -1
}

// startOf is the fault an ending ends: pause for resume, partition for
// heal.
func startOf(end string) string {
	if end == histories.Resume {
		return histories.Pause
	}
	return histories.Partition
}

// lateDelete bounds how long after a connection with an exclusive declare
// in flight ended RabbitMQ may still delete the queue of that name
// (docs/broker-semantics.md 7c): its queue process for that declare runs
// when the broker gets to it, 0.35 to 9.5 ms after the other
// connection's declare-ok on a quiet machine, and at least 70 ms after
// the end on a loaded one (the soak of issue 55, mutex seed 5612: c2
// declared the queue 70 ms after c1's connection ended, and its verify
// found it gone). Generous: what it excuses is shown.
const lateDelete = time.Second

// A holder is a process the exclusive-delete race may strike, and from when.
type holder struct {
	proc string
	at   int64
}

// holdersOf lists the processes other than not that held queue q of lock
// (a holder queue, or the mutex's own) at at, or took it up to lateDelete
// after: RabbitMQ may delete the queue by name until then, whoever holds
// it. One that held it at at is struck from at; one that took it after,
// from its acquire's completion (the queue must exist to be deleted), so
// that its hold, begun before, is not safe from it.
func holdersOf(h []histories.Event, lock, q, not string, at int64) []holder {
	slot := 0
	if q != lock {
		mid, ok := strings.CutPrefix(q, lock+"-")
		mid, ok2 := strings.CutSuffix(mid, "-B")
		l, err := strconv.Atoi(mid)
		if !ok || !ok2 || err != nil || l < 1 || amqplocks.HolderQueue(lock, l) != q {
			return nil // not a holder queue of this lock
		}
		slot = l
	}
	since := map[string]int64{} // process -> when its acquire of q began, while it may hold q
	var later []holder
	for i, e := range h {
		if e.Lock != lock || e.Process == not || e.F != histories.Acquire && e.F != histories.Release {
			continue
		}
		switch {
		case e.F == histories.Acquire && e.Type == histories.Invoke && e.Time <= at:
			if gets(h, i, slot) {
				since[e.Process] = e.Time
			}
		case e.F == histories.Acquire && e.Type == histories.Invoke && e.Time <= at+int64(lateDelete):
			if gets(h, i, slot) && !slices.ContainsFunc(later, func(x holder) bool { return x.proc == e.Process }) {
				later = append(later, holder{e.Process, completion(h, i)})
			}
		case e.F == histories.Release && e.Type == histories.Ok && e.Time < at:
			delete(since, e.Process)
		}
	}
	var who []holder
	for p := range since {
		who = append(who, holder{p, at})
	}
	for _, l := range later {
		if _, ok := since[l.proc]; !ok {
			who = append(who, l)
		}
	}
	slices.SortFunc(who, func(a, b holder) int { return strings.Compare(a.proc, b.proc) })
	return who
}

// completion is when the operation invoked at h[i] completed, or, if it
// never did, when it was invoked.
func completion(h []histories.Event, i int) int64 {
	for _, e := range h[i+1:] {
		if e.Process == h[i].Process && e.Type != histories.Invoke {
			return e.Time
		}
	}
	return h[i].Time
}

// gets says whether the acquire invoked at h[i] took slot (0: the mutex)
// or may have: it returned it, or never returned.
func gets(h []histories.Event, i, slot int) bool {
	inv := h[i]
	for _, e := range h[i+1:] {
		if e.Process != inv.Process || e.Type == histories.Invoke {
			continue
		}
		switch e.Type {
		case histories.Ok:
			v := amqpcheck.ValueOf(&e)
			return slot == 0 || v != nil && v.Slot != nil && *v.Slot == slot
		case histories.Info:
			return true
		}
		return false
	}
	return true
}

// brokerGrace is how long after lockprover's fault on a process ends the
// broker may still close that process's connection for it: three
// heartbeats (the broker's detection) and a second.
func brokerGrace(hb time.Duration) int64 { return int64(3*hb + time.Second) }
