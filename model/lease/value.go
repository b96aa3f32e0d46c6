package lease

import (
	"fmt"
	"strconv"

	"github.com/lockprover/lockprover/histories"
)

// A Value is the argument or result of an operation on a lease lock
// (histories.Lease); a field is nil (or empty) when the operation does
// not carry it. Which fields an event may carry depends on its f and
// type, as this package declares them (histories.DeclareKind), and
// histories.Read enforces it:
//
//	acquire {max, ttl_ms, priority?} -> ok {token, fence?, ttl_ms?, validity_ms?, started_ms?, replied_ms?}, fail {reason: full}?
//	refresh {token, ttl_ms} -> ok {ttl_ms?, validity_ms?, started_ms?, replied_ms?}, fail {reason: expired}?
//	release {token} -> fail {reason: expired}?
//	verify {token} -> ok {held}
//	lost (info, no invoke: a notice) {token, thief}
type Value struct {
	// Held is verify's answer: whether the holder still holds the lease,
	// as far as the implementation can tell.
	Held *bool `json:"held,omitempty"`
	// Reason says why an operation failed.
	Reason string `json:"reason,omitempty"`
	// Max is the most leases a lease acquire allows at once on its lock (1
	// for a mutex).
	Max *int `json:"max,omitempty"`
	// TTLMs is the time to live, in milliseconds, a lease acquire or
	// refresh asks for.
	TTLMs *int `json:"ttl_ms,omitempty"`
	// Token names a lease: what its acquire returned, and what refresh and
	// release name.
	Token string `json:"token,omitempty"`
	// Fence is a lease's numeric fencing token, where the implementation
	// gives one.
	Fence *int `json:"fence,omitempty"`
	// ValidityMs is how long a lease a granting acquire or refresh
	// returned is valid for, by the implementation's own reckoning, from
	// its return (Redlock's validity: the ttl less the time the servers
	// took and the clock drift), rounded down: 0 is under a millisecond,
	// less says none was left.
	ValidityMs *int `json:"validity_ms,omitempty"`
	// Priority is a priority lease acquire's priority (any integer): an
	// acquirer of strictly higher priority may take the lease from its
	// holder (docs/lease.md, "Priority leases").
	Priority *int `json:"priority,omitempty"`
	// Thief names, in a lost notice, the token of the lease that took the
	// notice's lease (its token).
	Thief string `json:"thief,omitempty"`
	// StartedMs, on a grant with ValidityMs, is when the library the
	// implementation wraps started it by its own reckoning (the clock
	// reading it counts the validity from), in milliseconds after the
	// invoke, rounded down, as the implementation said: a library that
	// claims validity with no margin is judged from there (validity-sound
	// shows it as an excuse), rather than from the invoke.
	StartedMs *int `json:"started_ms,omitempty"`
	// RepliedMs, on a grant with ValidityMs, is when the implementation
	// replied, by its own reckoning, in milliseconds after the invoke,
	// rounded down, where its reply was read only after the validity it
	// claimed had run out (a loaded machine's delay between a process's
	// reply and its reading): ValidityMs, counted from the reading, is
	// then negative, and validity-sound judges the claim at the reply
	// (shown as an excuse) rather than at the reading.
	RepliedMs *int `json:"replied_ms,omitempty"`
}

// WriteFields writes v's fields in canonical order: held, reason, max,
// ttl_ms, token, fence, validity_ms, priority, thief, started_ms,
// replied_ms.
func (v *Value) WriteFields(w *histories.FieldWriter) {
	w.Bool("held", v.Held)
	w.String("reason", v.Reason)
	w.Int("max", v.Max)
	w.Int("ttl_ms", v.TTLMs)
	w.String("token", v.Token)
	w.Int("fence", v.Fence)
	w.Int("validity_ms", v.ValidityMs)
	w.Int("priority", v.Priority)
	w.String("thief", v.Thief)
	w.Int("started_ms", v.StartedMs)
	w.Int("replied_ms", v.RepliedMs)
}

// Text is the value as a person reads it: "max 1, ttl_ms 500", "token t1,
// fence 3".
func (v *Value) Text() string {
	var t histories.TextWriter
	t.Int("max", v.Max)
	t.Int("ttl_ms", v.TTLMs)
	t.Int("validity_ms", v.ValidityMs)
	t.Int("started_ms", v.StartedMs)
	t.Int("replied_ms", v.RepliedMs)
	t.Int("priority", v.Priority)
	t.Bool("held", "not held", v.Held)
	t.String("token", v.Token)
	t.String("thief", v.Thief)
	t.Int("fence", v.Fence)
	return t.Text()
}

// ValueOf is e's value, nil if it has none (or is not a lease's).
func ValueOf(e *histories.Event) *Value { return histories.As[*Value](e) }

// box is a Value and the numbers it points to, in one allocation.
type box struct {
	v                                                     Value
	max, ttl, fence, validity, started, replied, priority int
	held                                                  bool
}

// values is the type of a lease's values.
var values = &histories.ValueType{
	Fields: []histories.Field{{Name: "held", Type: histories.BoolField}, {Name: "reason", Type: histories.StringField},
		{Name: "max", Type: histories.IntField}, {Name: "ttl_ms", Type: histories.IntField},
		{Name: "token", Type: histories.StringField, Unique: true}, {Name: "fence", Type: histories.IntField},
		{Name: "validity_ms", Type: histories.IntField}, {Name: "priority", Type: histories.IntField},
		{Name: "thief", Type: histories.StringField, Unique: true}, {Name: "started_ms", Type: histories.IntField},
		{Name: "replied_ms", Type: histories.IntField}},
	Make: func(r *histories.FieldReader) histories.Value {
		b := histories.New[box](r)
		b.v = Value{Held: r.Bool("held", &b.held), Reason: r.String("reason"), Max: r.Int("max", &b.max),
			TTLMs: r.Int("ttl_ms", &b.ttl), Token: r.String("token"), Fence: r.Int("fence", &b.fence),
			ValidityMs: r.Int("validity_ms", &b.validity), Priority: r.Int("priority", &b.priority),
			Thief: r.String("thief"), StartedMs: r.Int("started_ms", &b.started),
			RepliedMs: r.Int("replied_ms", &b.replied)}
		return &b.v
	},
	Check: checkRanges,
}

// checkRanges says which of v's numbers is out of its range.
func checkRanges(val histories.Value) string {
	v := val.(*Value)
	switch {
	case v.Max != nil && *v.Max < 1:
		return fmt.Sprintf("value.max: want an integer >= 1, got %d", *v.Max)
	case v.TTLMs != nil && *v.TTLMs < 1:
		return fmt.Sprintf("value.ttl_ms: want an integer >= 1 (milliseconds), got %d", *v.TTLMs)
	case v.Fence != nil && *v.Fence < 0:
		return fmt.Sprintf("value.fence: want an integer >= 0, got %d", *v.Fence)
	case v.StartedMs != nil && *v.StartedMs < 0:
		return fmt.Sprintf("value.started_ms: want an integer >= 0 (milliseconds after the invoke), got %d", *v.StartedMs)
	case v.StartedMs != nil && v.ValidityMs == nil:
		return "value.started_ms: only with validity_ms (the start the validity counts from)"
	case v.RepliedMs != nil && *v.RepliedMs < 0:
		return fmt.Sprintf("value.replied_ms: want an integer >= 0 (milliseconds after the invoke), got %d", *v.RepliedMs)
	case v.RepliedMs != nil && v.ValidityMs == nil:
		return "value.replied_ms: only with validity_ms (the reply whose claim it dates)"
	}
	return ""
}

// expiredReason is the fail of a refresh or a release.
var expiredReason = histories.Shape{Fields: []string{"reason"}, Reasons: []string{Expired}, Want: `{"reason":"expired"}, or no value for a failure that claims nothing`}

func init() {
	token := histories.Shape{Fields: []string{"token"}, Required: []string{"token"}, Want: `{"token":"..."}`}
	histories.DeclareKind(Kind, values,
		histories.Operation{F: Acquire,
			Invoke: histories.Shape{Fields: []string{"max", "ttl_ms", "priority"}, Required: []string{"max", "ttl_ms"}, Want: `{"max":n,"ttl_ms":t} with n, t >= 1, and "priority":p (any integer) for a priority lease`},
			Ok:     histories.Shape{Fields: []string{"token", "fence", "ttl_ms", "validity_ms", "started_ms", "replied_ms"}, Required: []string{"token"}, Want: `{"token":"..."}, with "fence":k (k >= 0) where the implementation gives numeric fencing tokens, "ttl_ms":t (t >= 1) where it says the lease it granted, "validity_ms":v where it says how long the lease is valid for from now, "started_ms":s (s >= 0) where it says when its library started, after the invoke, and "replied_ms":r (r >= 0) where its reply was read after its claim ran out`},
			Fail:   histories.Shape{Fields: []string{"reason"}, Reasons: []string{Full}, Want: `{"reason":"full"}, or no value for a failure that claims nothing`}},
		histories.Operation{F: Refresh,
			Invoke: histories.Shape{Fields: []string{"token", "ttl_ms"}, Required: []string{"token", "ttl_ms"}, Want: `{"token":"...","ttl_ms":t} with t >= 1`},
			Ok:     histories.Shape{Fields: []string{"ttl_ms", "validity_ms", "started_ms", "replied_ms"}, Want: `no value, or {"ttl_ms":t} (t >= 1) where the implementation says the lease it granted, with "validity_ms":v where it says how long the lease is valid for from now, "started_ms":s (s >= 0) where it says when its library started, after the invoke, and "replied_ms":r (r >= 0) where its reply was read after its claim ran out`},
			Fail:   expiredReason},
		histories.Operation{F: Release, Invoke: token, Fail: expiredReason},
		// verify {token} -> ok {held}: whether the holder still holds the
		// lease, as far as the implementation can tell (aware).
		histories.Operation{F: Verify, Invoke: token,
			Ok: histories.Shape{Fields: []string{"held"}, Required: []string{"held"}, Want: `{"held":true|false}`}},
		histories.Operation{F: histories.Lost, Notice: true,
			Info: histories.Shape{Fields: []string{"token", "thief"}, Required: []string{"token", "thief"}, Want: `{"token":"...","thief":"..."}: the lease lost and the lease that took it`}},
	)
}

// AsLease returns a history that histories.ReadEDN or ReadAnyFile
// imported from Jepsen (true mutexes) as the history of lease locks: the
// lens for a lock known to be lease-based, under which a hold may end when
// its lease can have run out. Each acquire asks for a lease of max 1 and
// ttl ttlMs (the lock's, which a Jepsen history does not record); its ok
// grants the token "pN/k", its process's k-th acquire; each release names
// the token of its process's last acquire ("pN/0" if there was none).
// Faults and errors are kept; indexes, and so an Imported's lines, are
// unchanged. The events are new; h is not modified.
func AsLease(h []histories.Event, ttlMs int) []histories.Event {
	out := make([]histories.Event, len(h))
	acquires := map[string]int{}
	for i, e := range h {
		if e.Kind != histories.Mutex {
			out[i] = e
			continue
		}
		e.Kind = Kind
		token := e.Process + "/" + strconv.Itoa(acquires[e.Process])
		switch {
		case e.F == Acquire && e.Type == histories.Invoke:
			acquires[e.Process]++
			e.Value = &Value{Max: histories.Int(1), TTLMs: histories.Int(ttlMs)}
		case e.F == Acquire && e.Type == histories.Ok:
			e.Value = &Value{Token: token}
		case e.F == Release && e.Type == histories.Invoke:
			e.Value = &Value{Token: token}
		default:
			e.Value = nil
		}
		out[i] = e
	}
	return out
}
