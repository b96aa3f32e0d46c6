package amqpcheck

import (
	"fmt"

	"github.com/lockprover/lockprover/histories"
)

// A Value is the argument or result of an operation on a semaphore or a
// true mutex (histories.Semaphore, histories.Mutex); a field is nil (or
// empty) when the operation does not carry it. Which fields an event may
// carry depends on its kind, f and type, as this package declares them
// (histories.DeclareKind), and histories.Read enforces it:
//
//	semaphore acquire   -> ok {slot}, fail {reason: full|absent|unavailable|contended}
//	semaphore verify    {slot} -> ok {held}
//	semaphore release   {slot}
//	admin create {slots}; change {delta} -> ok {from, to};
//	      destroy -> ok {from}; count -> ok {slots}; wait {slot}
//	mutex acquire -> fail {reason: held}; verify -> ok {held}; release
//
// A failed operation other than acquire may explain itself with a reason.
type Value struct {
	// Slot is the semaphore slot taken, verified, released or waited for
	// (1-based).
	Slot *int `json:"slot,omitempty"`
	// Held is verify's answer: whether the client still holds the lock.
	Held *bool `json:"held,omitempty"`
	// Reason says why an operation failed.
	Reason string `json:"reason,omitempty"`
	// Slots is the number of slots, created or counted.
	Slots *int `json:"slots,omitempty"`
	// Delta is the change asked of the number of slots; never zero.
	Delta *int `json:"delta,omitempty"`
	// From is the number of slots before a change or a destroy.
	From *int `json:"from,omitempty"`
	// To is the number of slots after a change.
	To *int `json:"to,omitempty"`
	// Patched marks an acquire or release completion that the process saw
	// as unknown and the runner settled from the simulator's ground truth
	// (a fail then says "not applied"). It is what happened, but not what
	// the implementation answered: available still wants a fault to excuse
	// it.
	Patched bool `json:"patched,omitempty"`
}

// WriteFields writes v's fields in canonical order: slot, held, reason,
// slots, delta, from, to, patched.
func (v *Value) WriteFields(w *histories.FieldWriter) {
	w.Int("slot", v.Slot)
	w.Bool("held", v.Held)
	w.String("reason", v.Reason)
	w.Int("slots", v.Slots)
	w.Int("delta", v.Delta)
	w.Int("from", v.From)
	w.Int("to", v.To)
	w.Flag("patched", v.Patched)
}

// IsPatched says whether the runner settled the completion (Patched).
func (v *Value) IsPatched() bool { return v.Patched }

// Text is the value as a person reads it: "slot 2", "from 3, to 2", "not
// held".
func (v *Value) Text() string {
	var t histories.TextWriter
	t.Int("slot", v.Slot)
	t.Int("slots", v.Slots)
	t.Int("delta", v.Delta)
	t.Int("from", v.From)
	t.Int("to", v.To)
	t.Bool("held", "not held", v.Held)
	return t.Text()
}

// ValueOf is e's value, nil if it has none (or is not a semaphore's or a
// mutex's).
func ValueOf(e *histories.Event) *Value { return histories.As[*Value](e) }

// box is a Value and the numbers it points to, in one allocation.
type box struct {
	v                            Value
	slot, slots, delta, from, to int
	held                         bool
}

// values is the type of the semaphore's and the mutex's values.
var values = &histories.ValueType{
	Fields: []histories.Field{{Name: "slot", Type: histories.IntField}, {Name: "held", Type: histories.BoolField},
		{Name: "reason", Type: histories.StringField}, {Name: "slots", Type: histories.IntField},
		{Name: "delta", Type: histories.IntField}, {Name: "from", Type: histories.IntField},
		{Name: "to", Type: histories.IntField}, {Name: "patched", Type: histories.FlagField}},
	Make: func(r *histories.FieldReader) histories.Value {
		b := histories.New[box](r)
		b.v = Value{Slot: r.Int("slot", &b.slot), Held: r.Bool("held", &b.held), Reason: r.String("reason"),
			Slots: r.Int("slots", &b.slots), Delta: r.Int("delta", &b.delta), From: r.Int("from", &b.from),
			To: r.Int("to", &b.to), Patched: r.Flag("patched")}
		return &b.v
	},
	Check:   checkRanges,
	Patched: "patched",
}

// checkRanges says which of v's numbers is out of its range.
func checkRanges(val histories.Value) string {
	v := val.(*Value)
	for _, f := range []struct {
		name     string
		n        *int
		min      int
		nonZero  bool
		describe string
	}{{"slot", v.Slot, 1, false, ">= 1"}, {"slots", v.Slots, 0, false, ">= 0"}, {"delta", v.Delta, 0, true, ""},
		{"from", v.From, 0, false, ">= 0"}, {"to", v.To, 0, false, ">= 0"}} {
		switch {
		case f.n == nil:
		case f.nonZero && *f.n == 0:
			return fmt.Sprintf("value.%s: want a non-zero integer, got 0", f.name)
		case !f.nonZero && *f.n < f.min:
			return fmt.Sprintf("value.%s: want an integer %s, got %d", f.name, f.describe, *f.n)
		}
	}
	return ""
}

// The value shapes of the semaphore's and the mutex's operations.
var (
	anyReason = histories.Shape{Fields: []string{"reason"}, Want: `no value, or {"reason":r} saying why`}
	slotArg   = histories.Shape{Fields: []string{"slot"}, Required: []string{"slot"}, Want: `{"slot":k} with k >= 1`}
	heldOk    = histories.Shape{Fields: []string{"held"}, Required: []string{"held"}, Want: `{"held":true|false}`}
)

func init() {
	histories.DeclareKind(histories.Semaphore, values,
		histories.Operation{F: histories.Acquire, Ok: slotArg, Patchable: true,
			Fail: histories.Shape{Fields: []string{"reason"}, Required: []string{"reason"}, Reasons: []string{"full", "absent", histories.Unavailable, "contended"}, Want: `{"reason":"full"|"absent"|"unavailable"|"contended"}`}},
		histories.Operation{F: histories.Verify, Invoke: slotArg, Ok: heldOk, Fail: anyReason},
		histories.Operation{F: histories.Release, Invoke: slotArg, Fail: anyReason, Patchable: true},
		histories.Operation{F: histories.Create, Invoke: histories.Shape{Fields: []string{"slots"}, Required: []string{"slots"}, Want: `{"slots":n} with n >= 0`}, Fail: anyReason},
		histories.Operation{F: histories.Change, Invoke: histories.Shape{Fields: []string{"delta"}, Required: []string{"delta"}, Want: `{"delta":d} with d != 0`},
			Ok: histories.Shape{Fields: []string{"from", "to"}, Required: []string{"from", "to"}, Want: `{"from":c,"to":c'} with c, c' >= 0`}, Fail: anyReason},
		histories.Operation{F: histories.Destroy, Ok: histories.Shape{Fields: []string{"from"}, Required: []string{"from"}, Want: `{"from":c} with c >= 0`}, Fail: anyReason},
		histories.Operation{F: histories.Count, Ok: histories.Shape{Fields: []string{"slots"}, Required: []string{"slots"}, Want: `{"slots":c} with c >= 0`}, Fail: anyReason},
		histories.Operation{F: histories.Wait, Invoke: slotArg, Fail: anyReason},
	)
	mutex := []histories.Operation{
		{F: histories.Acquire, Patchable: true,
			Fail: histories.Shape{Fields: []string{"reason"}, Required: []string{"reason"}, Reasons: []string{"held"}, Want: `{"reason":"held"}`}},
		{F: histories.Verify, Ok: heldOk, Fail: anyReason},
		{F: histories.Release, Fail: anyReason, Patchable: true},
	}
	for _, f := range []string{histories.Create, histories.Change, histories.Destroy, histories.Count, histories.Wait} {
		mutex = append(mutex, histories.Operation{F: f, Refused: "a true mutex has no admin (" + f + " is a semaphore's)"})
	}
	histories.DeclareKind(histories.Mutex, values, mutex...)
}
