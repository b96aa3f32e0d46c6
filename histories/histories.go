// Package histories defines lockprover's history format: what every client
// of a lock saw, one event per line, in Jepsen's vocabulary.
//
// A history is a sequence of [Event]s in JSON lines:
//
//	{"index":0,"time":1200,"process":"c1","type":"invoke","f":"acquire","lock":"sem"}
//	{"index":1,"time":1800,"process":"c1","type":"ok","f":"acquire","lock":"sem","value":{"slot":2}}
//	{"index":2,"time":2500,"process":"nemesis","type":"invoke","f":"kill","value":{"process":"c1"}}
//	{"index":3,"time":2510,"process":"nemesis","type":"info","f":"kill","value":{"process":"c1"}}
//
// Every operation is an invoke followed by at most one completion from the
// same process: ok (it happened), fail (it certainly did not happen) or info
// (unknown: it may take effect at any time after its invoke). A process has at
// most one operation in flight. An operation still in flight at the end of a
// history belongs to a client that crashed: its outcome is unknown, as with
// info.
//
// Histories come from anywhere (the simulator, a real broker, another
// language's harness), so [Read] validates them strictly and reports the
// first problem as an [*Error] naming the file and line. [Write] produces the
// canonical form, which Read accepts and which is stable byte for byte.
// A [Recorder] builds a history while a run is going on.
//
// [ReadEDN] imports the history.edn that Jepsen writes for a lock workload,
// a true mutex to be judged as Knossos's mutex model judges it, and
// [ReadAnyFile] reads any of the formats (Jepsen's JSON too). The
// project's docs/histories.md describes both formats completely.
package histories

import (
	"fmt"
)

// Type says whether an event starts an operation or how it ended.
type Type string

// The event types, as in Jepsen.
const (
	// Invoke starts an operation.
	Invoke Type = "invoke"
	// Ok ends an operation that took effect.
	Ok Type = "ok"
	// Fail ends an operation that certainly did not take effect.
	Fail Type = "fail"
	// Info ends an operation whose outcome is unknown: it may have taken
	// effect at any time after its invoke, or never.
	Info Type = "info"
)

// The lock kinds an event's Kind may name. An absent kind means Semaphore.
const (
	// Semaphore is the persistent semaphore; a persistent mutex is a
	// one-slot semaphore.
	Semaphore = "semaphore"
	// Mutex is the true mutex: no slots and no admin operations.
	Mutex = "mutex"
	// Lease is a lease lock: a counting semaphore whose holds expire unless
	// refreshed (a mutex is max 1). Its operations are acquire, refresh and
	// release; docs/lease.md describes the family.
	Lease = "lease"
)

// The operations, an event's F: clients acquire, verify, release (and, on
// a lease, refresh); admins create, change, count, wait for and destroy a
// semaphore. Plans name their steps with the same words.
const (
	Acquire = "acquire"
	Verify  = "verify"
	Release = "release"
	Refresh = "refresh"
	Create  = "create"
	Change  = "change"
	Count   = "count"
	Wait    = "wait"
	Destroy = "destroy"
	// Lost is a lease lock's notice, not an operation: an info event of
	// the victim's process, with no invoke, recorded when the process
	// marked its lease (token) lost to the lease of a higher priority
	// (thief), before it acknowledged the theft. It may come while the
	// process has an operation in flight, and leaves it in flight.
	Lost = "lost"
)

// IsNotice says whether e is a notice (a lost event): a single info event
// that neither starts nor ends an operation, as its kind declares it
// (Operation.Notice).
func IsNotice(e *Event) bool {
	if e.Type != Info || e.Process == nemesis {
		return false
	}
	k := declaredKind(effectiveKind(e.Kind))
	return k != nil && k.ops[e.F] != nil && k.ops[e.F].notice
}

// The faults, a nemesis event's F. Pause and partition last until the
// matching resume and heal. The clock faults (ClockSkew, ClockJump,
// ClockReset) belong to lease histories.
const (
	Kill          = "kill"
	Pause         = "pause"
	Resume        = "resume"
	Partition     = "partition"
	Heal          = "heal"
	ForceClose    = "force-close"
	DropReply     = "drop-reply"
	RestartBroker = "restart-broker"
	// QueueDeleted says the broker may have deleted, on its own, a queue
	// the process holds (a slot it holds): RabbitMQ before 4.2.3 deletes an
	// exclusive queue by name when another connection's exclusive declare
	// of that name was in flight as its socket closed (docs/broker-
	// semantics.md, 7c). A run on a real broker records it where its
	// proxies saw that signature; the event's error says so.
	QueueDeleted = "queue-deleted"
)

// Unavailable is the reason of a semaphore acquire that found no slot, from
// an implementation that cannot tell a full semaphore from an absent one:
// the spec's plain "lock-acquire failure". It claims what full or absent
// claims, less which of the two.
const Unavailable = "unavailable"

// The reasons of the lease vocabulary: an acquire that found max leases
// valid, and a refresh or release of a lease that had expired.
const (
	Full    = "full"
	Expired = "expired"
)

// NotApplied is the reason of a patched fail: the operation certainly had
// no effect.
const NotApplied = "not applied"

// Event is one line of a history: the invocation or the completion of one
// operation by one process.
type Event struct {
	// Index is the event's 0-based position in the history.
	Index int `json:"index"`
	// Time is when the event was recorded, in monotonic nanoseconds (virtual
	// time in the simulator). Times never decrease along a history, so the
	// real-time order of operations is never lost.
	Time int64 `json:"time"`
	// Process is who performed the operation: a client ("c1", ...),
	// "admin", or "nemesis" for faults.
	Process string `json:"process"`
	// Type is invoke or one of the completions ok, fail and info.
	Type Type `json:"type"`
	// F is the operation: acquire, verify, release, an admin operation
	// (create, change, destroy, count, wait) or a fault.
	F string `json:"f"`
	// Lock names the lock operated on; locks are checked independently.
	// Nemesis events name no lock.
	Lock string `json:"lock,omitempty"`
	// Kind is the lock's kind, Semaphore (the default when empty) or Mutex.
	Kind string `json:"kind,omitempty"`
	// Value is the operation's argument (on invoke) or result (on
	// completion), nil when it has none ("value":null reads as none): a
	// value of the type the event's kind declares (DeclareKind), a *Fault
	// for a nemesis event.
	Value Value `json:"value,omitempty"`
	// Error is what the process said went wrong, kept as it was given: on a
	// completion, usually a fail or an info (Jepsen's :error, in EDN text
	// when the history was imported from EDN). Empty when there is none. It
	// explains; it is never judged.
	Error string `json:"error,omitempty"`
}

// Error is a problem found in a history, located so a person can go and look
// at it.
type Error struct {
	File string // the name given to Read, usually a path
	Line int    // 1-based
	Msg  string // what is wrong and what was expected
}

// Error returns "FILE:LINE: MSG", the form editors and terminals link to.
func (e *Error) Error() string {
	return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
}

// Int returns a pointer to n, for building a [Value].
func Int(n int) *int { return &n }

// Bool returns a pointer to b, for building a [Value].
func Bool(b bool) *bool { return &b }
