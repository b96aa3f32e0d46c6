package histories

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// nemesis is the process that injects faults.
const nemesis = "nemesis"

// The operations each kind of process may perform, in the order messages
// list them.
var (
	semaphoreOps = []string{Acquire, Verify, Release, Create, Change, Destroy, Count, Wait}
	mutexOps     = []string{Acquire, Verify, Release}
	leaseOps     = []string{Acquire, Refresh, Release, Verify, Lost}
	nemesisOps   = []string{Kill, Pause, Resume, Partition, Heal, ForceClose, RestartBroker, DropReply, QueueDeleted,
		ClockSkew, ClockJump, ClockReset}
)

// The clock faults, aimed at one process's clock or (with no process) at
// the backend's. Their completion repeats their invoke's value.
const (
	// ClockSkew sets the clock offset_ms away from true time (ahead when
	// positive) until a ClockReset of the same clock.
	ClockSkew = "clock-skew"
	// ClockJump steps the clock by offset_ms, once; it stays stepped until
	// a ClockReset of the same clock.
	ClockJump = "clock-jump"
	// ClockReset puts the clock right.
	ClockReset = "clock-reset"
)

// EndOf is the nemesis operation that ends a fault that holds a process
// until it is ended: resume for pause, heal for partition; "" for any
// other.
func EndOf(f string) string {
	switch f {
	case Pause:
		return Resume
	case Partition:
		return Heal
	}
	return ""
}

// IsClockFault reports whether f is a clock fault.
func IsClockFault(f string) bool {
	return f == ClockSkew || f == ClockJump || f == ClockReset
}

// An Operation declares one operation of a family's lock kind (see
// DeclareKind): the value fields (by their JSON names: "slot", "token",
// "max", ...) its invoke, ok and info may hold, and the reasons its fail
// may give (a fail holds at most a reason; nil allows any).
type Operation struct {
	F                string
	Invoke, Ok, Info []string
	Reasons          []string
}

var declared struct {
	sync.RWMutex
	kinds map[string]map[string]*shapes
	ops   map[string][]string
}

// DeclareKind lets histories of a lock kind the format does not know be
// read and written: a family declares its kind and operations from an init
// function, as it registers its checker with model.Register, and the core
// needs no change. Declaring a built-in kind, a kind twice, an operation
// that is a fault, or a value field the format does not have panics: it is
// a programming error.
func DeclareKind(kind string, ops ...Operation) {
	declared.Lock()
	defer declared.Unlock()
	switch {
	case kind == "" || kind == Semaphore || kind == Mutex || kind == Lease:
		panic("histories.DeclareKind: kind " + strconv.Quote(kind) + " is built in")
	case declared.kinds[kind] != nil:
		panic("histories.DeclareKind: kind " + strconv.Quote(kind) + " declared twice")
	}
	fields := func(names []string) vfields {
		var f vfields
		for _, n := range names {
			i := slices.Index(valueNames[:], n)
			if i < 0 {
				panic("histories.DeclareKind: " + kind + ": no value field " + strconv.Quote(n) + " (want " + valueFieldNames + ")")
			}
			f |= 1 << i
		}
		return f
	}
	m := map[string]*shapes{}
	var names []string
	for _, o := range ops {
		if nemesisShapes[o.F] != nil || o.F == "" {
			panic("histories.DeclareKind: " + kind + ": operation " + strconv.Quote(o.F) + " is a fault or empty")
		}
		want := func(names []string) string {
			if len(names) == 0 {
				return "no value"
			}
			return "a value with some of " + strings.Join(names, ", ")
		}
		m[o.F] = &shapes{{allowed: fields(o.Invoke), want: want(o.Invoke)}, {allowed: fields(o.Ok), want: want(o.Ok)},
			{allowed: vReason, reasons: o.Reasons, want: `{"reason":"..."}, or no value`}, {allowed: fields(o.Info), want: want(o.Info)}}
		names = append(names, o.F)
	}
	if declared.kinds == nil {
		declared.kinds, declared.ops = map[string]map[string]*shapes{}, map[string][]string{}
	}
	declared.kinds[kind], declared.ops[kind] = m, names
}

// declaredKind returns the operations of a kind declared with DeclareKind
// and their names, or nil.
func declaredKind(kind string) (map[string]*shapes, []string) {
	declared.RLock()
	defer declared.RUnlock()
	return declared.kinds[kind], declared.ops[kind]
}

// shape is what the value of one (kind, f, type) may hold.
type shape struct {
	allowed  vfields  // fields that may be present
	required vfields  // fields that must be present
	want     string   // the whole shape, for messages
	reasons  []string // the reasons allowed; nil means any
}

// shapes are an operation's value shapes, by type: invoke, ok, fail, info.
type shapes [4]shape

func typeIndex(t Type) int {
	switch t {
	case Invoke:
		return 0
	case Ok:
		return 1
	case Fail:
		return 2
	default:
		return 3
	}
}

var (
	none      = shape{want: "no value"}
	anyReason = shape{allowed: vReason, want: `no value, or {"reason":r} saying why`}
	slotArg   = shape{allowed: vSlot, required: vSlot, want: `{"slot":k} with k >= 1`}
	target    = shape{allowed: vProcess, required: vProcess, want: `{"process":p} naming the process the fault is aimed at`}
)

// semaphoreShapes and mutexShapes are the value shapes of the client and
// admin operations of each lock kind; nemesisShapes those of faults.
var (
	semaphoreShapes = map[string]*shapes{
		Acquire: {none,
			slotArg,
			{allowed: vReason, required: vReason, reasons: []string{"full", "absent", Unavailable, "contended"}, want: `{"reason":"full"|"absent"|"unavailable"|"contended"}`},
			none},
		Verify: {slotArg,
			{allowed: vHeld, required: vHeld, want: `{"held":true|false}`},
			anyReason, none},
		Release: {slotArg,
			none,
			anyReason, none},
		"create": {{allowed: vSlots, required: vSlots, want: `{"slots":n} with n >= 0`},
			none, anyReason, none},
		"change": {{allowed: vDelta, required: vDelta, want: `{"delta":d} with d != 0`},
			{allowed: vFrom | vTo, required: vFrom | vTo, want: `{"from":c,"to":c'} with c, c' >= 0`},
			anyReason, none},
		Destroy: {none,
			{allowed: vFrom, required: vFrom, want: `{"from":c} with c >= 0`},
			anyReason, none},
		Count: {none,
			{allowed: vSlots, required: vSlots, want: `{"slots":c} with c >= 0`},
			anyReason, none},
		Wait: {slotArg, none, anyReason, none},
	}
	mutexShapes = map[string]*shapes{
		Acquire: {none, none,
			{allowed: vReason, required: vReason, reasons: []string{"held"}, want: `{"reason":"held"}`},
			none},
		Verify: {none,
			{allowed: vHeld, required: vHeld, want: `{"held":true|false}`},
			anyReason, none},
		Release: {none, none, anyReason, none},
	}
	leaseShapes = map[string]*shapes{
		"acquire": {{allowed: vMax | vTTLMs | vPriority, required: vMax | vTTLMs, want: `{"max":n,"ttl_ms":t} with n, t >= 1, and "priority":p (any integer) for a priority lease`},
			{allowed: vToken | vFence | vTTLMs | vValidityMs | vStartedMs, required: vToken, want: `{"token":"..."}, with "fence":k (k >= 0) where the implementation gives numeric fencing tokens, "ttl_ms":t (t >= 1) where it says the lease it granted, "validity_ms":v where it says how long the lease is valid for from now, and "started_ms":s (s >= 0) where it says when its library started, after the invoke`},
			{allowed: vReason, reasons: []string{Full}, want: `{"reason":"full"}, or no value for a failure that claims nothing`},
			none},
		"refresh": {{allowed: vToken | vTTLMs, required: vToken | vTTLMs, want: `{"token":"...","ttl_ms":t} with t >= 1`},
			{allowed: vTTLMs | vValidityMs | vStartedMs, want: `no value, or {"ttl_ms":t} (t >= 1) where the implementation says the lease it granted, with "validity_ms":v where it says how long the lease is valid for from now, and "started_ms":s (s >= 0) where it says when its library started, after the invoke`}, expiredReason, none},
		"release": {{allowed: vToken, required: vToken, want: `{"token":"..."}`},
			none, expiredReason, none},
		// verify {token} -> ok {held}: whether the holder still holds the
		// lease, as far as the implementation can tell (aware).
		Verify: {{allowed: vToken, required: vToken, want: `{"token":"..."}`},
			{allowed: vHeld, required: vHeld, want: `{"held":true|false}`}, none, none},
		// A notice: only its info shape is used (checkNotice).
		Lost: {none, none, none, {allowed: vToken | vThief, required: vToken | vThief, want: `{"token":"...","thief":"..."}: the lease lost and the lease that took it`}},
	}
	expiredReason = shape{allowed: vReason, reasons: []string{Expired}, want: `{"reason":"expired"}, or no value for a failure that claims nothing`}
	clockShapes   = &shapes{
		{allowed: vProcess | vOffsetMs, required: vOffsetMs, want: `{"offset_ms":d} with d != 0, and "process":p for a process's clock (none: the backend's)`},
		none,
		{allowed: vProcess | vOffsetMs | vReason, want: `its invoke's value, optionally with a reason`},
		{allowed: vProcess | vOffsetMs, want: `its invoke's value`}}
	resetShapes = &shapes{
		{allowed: vProcess, want: `no value for the backend's clock, or {"process":p}`},
		none,
		{allowed: vProcess | vReason, want: `its invoke's value, optionally with a reason`},
		{allowed: vProcess, want: `its invoke's value`}}
	nemesisShapes = map[string]*shapes{
		ClockSkew:     clockShapes,
		ClockJump:     clockShapes,
		ClockReset:    resetShapes,
		Kill:          targeted,
		Pause:         targeted,
		Resume:        targeted,
		Partition:     targeted,
		Heal:          targeted,
		ForceClose:    targeted,
		DropReply:     targeted,
		QueueDeleted:  targeted,
		RestartBroker: {none, none, anyReason, none},
	}
	targeted = &shapes{target, target,
		{allowed: vProcess | vReason, required: vProcess, want: `{"process":p}, as in its invoke, optionally with a reason`},
		target}
)

// inflight is an operation that has been invoked and not yet completed.
type inflight struct {
	line  int
	f     string
	lock  string
	kind  string // effective: never empty
	value *Value
}

// symbol is a name met in a history, with what the validator knows about
// the process and the lock of that name. The parser interns names as
// symbols so that validating an event costs no map lookups of its own.
type symbol struct {
	name string

	busy bool     // as a process: whether an operation is in flight
	op   inflight // as a process: that operation

	kind     string // as a lock: the kind it was first seen with, if seen
	kindLine int    // as a lock: where
}

// validator checks each event against the format and the events before it.
type validator struct {
	prevTime int64
	events   int
}

func newValidator() *validator {
	return &validator{}
}

// check validates e, found at line with the given fields present, and
// records it. proc and lock are the symbols of its process and lock (nil
// when absent). It returns the first problem, or "".
func (v *validator) check(line int, e *Event, has fields, vhas vfields, proc, lock *symbol) string {
	if msg := v.checkEvent(line, e, has, vhas, proc, lock); msg != "" {
		return msg
	}
	v.prevTime = e.Time
	v.events++
	if e.F == Lost && e.Process != nemesis && effectiveKind(e.Kind) == Lease {
		// a notice: the process's operation in flight, if any, stays so
	} else if e.Type == Invoke {
		proc.busy, proc.op = true, inflight{line, e.F, e.Lock, effectiveKind(e.Kind), e.Value}
	} else {
		proc.busy, proc.op = false, inflight{}
	}
	if lock != nil && lock.kind == "" {
		lock.kind, lock.kindLine = effectiveKind(e.Kind), line
	}
	return ""
}

func isDeclared(kind string) bool {
	ops, _ := declaredKind(kind)
	return ops != nil
}

func effectiveKind(kind string) string {
	if kind == "" {
		return Semaphore
	}
	return kind
}

func (v *validator) checkEvent(line int, e *Event, has fields, vhas vfields, proc, lock *symbol) string {
	if msg := v.checkPlace(e, has); msg != "" {
		return msg
	}
	if msg := checkWho(e, has); msg != "" {
		return msg
	}
	kind := effectiveKind(e.Kind)
	op, msg := operationShapes(e, has, kind)
	if msg != "" {
		return msg
	}
	in := proc.op
	if kind == Lease && e.F == Lost {
		return checkNotice(e, &op[3], vhas, lock)
	}
	if msg := checkInFlight(e, kind, proc, lock); msg != "" {
		return msg
	}
	// The value.
	if msg := checkValue(&op[typeIndex(e.Type)], e, kind, vhas, in); msg != "" {
		return msg
	}
	if e.Process == nemesis && IsClockFault(e.F) && e.Type != Invoke {
		return checkClockEcho(e, vhas, in)
	}
	return ""
}

// checkPlace checks where the event is in the history: its index and time.
func (v *validator) checkPlace(e *Event, has fields) string {
	switch {
	case has&hasIndex == 0:
		return fmt.Sprintf("index: missing (want %d, the event's 0-based position)", v.events)
	case e.Index != v.events:
		return fmt.Sprintf("index: want %d (the event's 0-based position), got %d", v.events, e.Index)
	case has&hasTime == 0:
		return "time: missing (want the event's time in nanoseconds)"
	case e.Time < 0:
		return fmt.Sprintf("time: want an integer >= 0 (nanoseconds), got %d", e.Time)
	case v.events > 0 && e.Time < v.prevTime:
		return fmt.Sprintf("time: %d is before the previous event's time %d (times must not decrease)", e.Time, v.prevTime)
	}
	return ""
}

// checkWho checks who does what, to which lock.
func checkWho(e *Event, has fields) string {
	switch {
	case has&hasProcess == 0:
		return `process: missing (want a client such as "c1", "admin" or "nemesis")`
	case e.Process == "":
		return "process: want a non-empty string"
	case has&hasType == 0:
		return "type: missing (want invoke, ok, fail or info)"
	case e.Type != Invoke && e.Type != Ok && e.Type != Fail && e.Type != Info:
		return fmt.Sprintf("type: want invoke, ok, fail or info, got %q", e.Type)
	case has&hasF == 0:
		return "f: missing (want the operation, such as acquire)"
	case has&hasKind != 0 && e.Kind != Semaphore && e.Kind != Mutex && e.Kind != Lease && !isDeclared(e.Kind):
		return fmt.Sprintf("kind: want %q, %q or %q (or no kind, meaning semaphore; or a kind a family declared), got %q", Semaphore, Mutex, Lease, e.Kind)
	case has&hasLock != 0 && e.Lock == "":
		return "lock: want a non-empty string"
	case e.Error != "" && e.Type == Invoke:
		return "error: not allowed on an invoke (an error belongs to the operation's completion: fail, info or ok)"
	}
	return ""
}

// operationShapes finds the value shapes of the event's operation: a fault
// for the nemesis, an operation of the lock's kind for anyone else.
func operationShapes(e *Event, has fields, kind string) (*shapes, string) {
	fault := nemesisShapes[e.F]
	if e.Process == nemesis {
		switch {
		case fault == nil:
			return nil, fmt.Sprintf("f: process %q only injects faults (want one of %s), got %q", nemesis, strings.Join(nemesisOps, ", "), e.F)
		case has&hasLock != 0:
			return nil, fmt.Sprintf("lock: a nemesis event names no lock, got %q", e.Lock)
		case has&hasKind != 0:
			return nil, fmt.Sprintf("kind: a nemesis event names no lock, so no kind, got %q", e.Kind)
		case e.Type == Ok:
			return nil, "type: a nemesis operation completes with info once the fault is in place (or fail if it could not be applied), not ok"
		}
		return fault, ""
	}
	switch {
	case fault != nil:
		return nil, fmt.Sprintf("f: %q is a fault; only process %q may inject it", e.F, nemesis)
	case has&hasLock == 0:
		return nil, fmt.Sprintf("lock: missing (every %s names the lock it operates on)", e.F)
	}
	switch kind {
	case Semaphore:
	case Lease:
		if op := leaseShapes[e.F]; op != nil {
			return op, ""
		}
		return nil, fmt.Sprintf("f: unknown operation %q for a lease lock (want one of %s)", e.F, strings.Join(leaseOps, ", "))
	case Mutex:
		if op := mutexShapes[e.F]; op != nil {
			return op, ""
		}
		if semaphoreShapes[e.F] != nil {
			return nil, fmt.Sprintf("f: %q is a semaphore admin operation, but lock %q is a mutex: a true mutex has no admin", e.F, e.Lock)
		}
		return nil, fmt.Sprintf("f: unknown operation %q for a mutex lock (want one of %s)", e.F, strings.Join(mutexOps, ", "))
	default:
		ops, names := declaredKind(kind)
		if op := ops[e.F]; op != nil {
			return op, ""
		}
		return nil, fmt.Sprintf("f: unknown operation %q for a %s lock (want one of %s)", e.F, kind, strings.Join(names, ", "))
	}
	if op := semaphoreShapes[e.F]; op != nil {
		return op, ""
	}
	return nil, fmt.Sprintf("f: unknown operation %q for a semaphore lock (want one of %s)", e.F, strings.Join(semaphoreOps, ", "))
}

// checkNotice checks a lost notice: an info event on its own, whatever
// the process has in flight, whose value has the shape sh.
func checkNotice(e *Event, sh *shape, vhas vfields, lock *symbol) string {
	if e.Type != Info {
		return fmt.Sprintf("type: a lost notice is a single info event (no invoke, no completion), got %s", e.Type)
	}
	if lock.kind != "" && lock.kind != Lease {
		return fmt.Sprintf("kind: lock %q is a lease here but was a %s at line %d (no kind means semaphore)", e.Lock, lock.kind, lock.kindLine)
	}
	if e.Value == nil {
		vhas = 0
	}
	return checkFields(sh, e, vhas, inflight{}, func() string { return "lease lost notice" })
}

// checkInFlight checks the operations in flight: one per process, and a
// completion that matches it; and that a lock keeps its kind.
func checkInFlight(e *Event, kind string, proc, lock *symbol) string {
	in, busy := proc.op, proc.busy
	if e.Type == Invoke {
		if busy {
			return fmt.Sprintf("type: process %q invokes %s while its %s invoked at line %d is still in flight (a process has at most one operation in flight)", e.Process, e.F, in.f, in.line)
		}
	} else {
		switch {
		case !busy:
			return fmt.Sprintf("type: %s for process %q, which has no operation in flight (want an invoke first)", e.Type, e.Process)
		case e.F != in.f:
			return fmt.Sprintf("f: this %s completes %s, but the operation invoked at line %d is %s", e.Type, e.F, in.line, in.f)
		case e.Lock != in.lock:
			return fmt.Sprintf("lock: this %s is on lock %q, but the operation invoked at line %d is on lock %q", e.Type, e.Lock, in.line, in.lock)
		case e.Process != nemesis && kind != in.kind:
			return fmt.Sprintf("kind: this %s says %s, but the operation invoked at line %d says %s", e.Type, kind, in.line, in.kind)
		}
	}
	if e.Process != nemesis && lock.kind != "" && lock.kind != kind {
		return fmt.Sprintf("kind: lock %q is a %s here but was a %s at line %d (no kind means semaphore)", e.Lock, kind, lock.kind, lock.kindLine)
	}
	return ""
}

// checkClockEcho checks that a clock fault's completion repeats its
// invoke's value: which clock, and by how much.
func checkClockEcho(e *Event, vhas vfields, in inflight) string {
	if e.Value == nil {
		vhas = 0
	}
	var want vfields
	if in.value != nil {
		want = fieldsOf(in.value) & (vProcess | vOffsetMs)
	}
	if missing := want &^ vhas; missing != 0 {
		return fmt.Sprintf("value.%s: missing: a %s completion repeats its invoke's value (line %d)", firstField(missing), e.F, in.line)
	}
	if extra := vhas &^ (want | vReason); extra != 0 {
		return fmt.Sprintf("value.%s: not allowed: its invoke at line %d has none (a %s completion repeats its invoke's value)", firstField(extra), in.line, e.F)
	}
	return ""
}

// checkValue checks that e's value, holding the fields vhas, has the shape
// sh; kind is e's lock kind and in the invoke e completes, if it is a
// completion. A completion may repeat fields of its invoke's value (an
// echo, as Jepsen's clients return the op they were given): they must
// agree with the invoke, and they are not the completion's own fields.
func checkValue(sh *shape, e *Event, kind string, vhas vfields, in inflight) string {
	val := e.Value
	if val == nil {
		vhas = 0
	}
	if e.Process == nemesis {
		kind = nemesis
	}
	what := func() string { return kind + " " + e.F + " " + string(e.Type) }
	var echo vfields // the fields repeated from the invoke
	if e.Type != Invoke && vhas != 0 && in.value != nil {
		echo = vhas & fieldsOf(in.value)
		if msg := checkEcho(echo, val, in); msg != "" {
			return msg
		}
	}
	if vhas&vPatched != 0 {
		if msg, done := checkPatched(e, kind, vhas, echo, what); done {
			return msg
		}
		vhas &^= vPatched
	}
	vhas &^= echo &^ sh.allowed // echoes are checked; the shape is about the rest
	if msg := checkFields(sh, e, vhas, in, what); msg != "" {
		return msg
	}
	if val == nil {
		return ""
	}
	return checkRanges(sh, val)
}

// checkPatched checks a value marked patched (vhas holds vPatched): only an
// acquire or release completing ok or fail may be, and a patched fail
// holds only the not-applied reason besides the echo. done says the
// verdict is msg (a patched fail needs no further checks); otherwise the
// value is checked as if it were not marked.
func checkPatched(e *Event, kind string, vhas, echo vfields, what func() string) (msg string, done bool) {
	if kind == nemesis || kind == Lease || (e.F != Acquire && e.F != Release) || (e.Type != Ok && e.Type != Fail) {
		return fmt.Sprintf("value.patched: not allowed: only an acquire or release that completes ok or fail may be patched, not a %s", what()), true
	}
	if e.Type == Fail && e.Value.Reason != NotApplied {
		return fmt.Sprintf("value.reason: a patched fail says %q, got %q", NotApplied, e.Value.Reason), true
	}
	if e.Type == Fail {
		if extra := vhas &^ (vReason | vPatched | echo); extra != 0 {
			return fmt.Sprintf("value.%s: not allowed: a patched fail holds only its reason (and what it repeats of its invoke)", firstField(extra)), true
		}
		return "", true
	}
	return "", false
}

// checkFields checks that the fields vhas (echoes of the invoke taken out)
// are those the shape sh allows and include those it requires.
func checkFields(sh *shape, e *Event, vhas vfields, in inflight, what func() string) string {
	if extra := vhas &^ sh.allowed; extra != 0 {
		f := firstField(extra)
		also := ""
		if in.value != nil && e.Type != Invoke {
			also = fmt.Sprintf(" (besides the fields of its invoke at line %d, which it may repeat)", in.line)
		}
		if sh.allowed == 0 {
			return fmt.Sprintf("value.%s: not allowed: a %s carries no value%s", f, what(), also)
		}
		return fmt.Sprintf("value.%s: not allowed: a %s wants %s%s", f, what(), sh.want, also)
	}
	if missing := sh.required &^ vhas; missing != 0 {
		return fmt.Sprintf("value.%s: missing: a %s wants %s", firstField(missing), what(), sh.want)
	}
	return ""
}

// checkRanges checks that each field val holds is in its range (and a
// reason among those sh allows), in the order the fields are documented.
func checkRanges(sh *shape, val *Value) string {
	if val.Slot != nil && *val.Slot < 1 {
		return fmt.Sprintf("value.slot: want an integer >= 1, got %d", *val.Slot)
	}
	if val.Reason != "" && sh.reasons != nil && !slices.Contains(sh.reasons, val.Reason) {
		return fmt.Sprintf("value.reason: want %s, got %q", orList(sh.reasons), val.Reason)
	}
	if val.Slots != nil && *val.Slots < 0 {
		return fmt.Sprintf("value.slots: want an integer >= 0, got %d", *val.Slots)
	}
	if val.Delta != nil && *val.Delta == 0 {
		return "value.delta: want a non-zero integer, got 0"
	}
	if val.From != nil && *val.From < 0 {
		return fmt.Sprintf("value.from: want an integer >= 0, got %d", *val.From)
	}
	if val.To != nil && *val.To < 0 {
		return fmt.Sprintf("value.to: want an integer >= 0, got %d", *val.To)
	}
	if val.Max != nil && *val.Max < 1 {
		return fmt.Sprintf("value.max: want an integer >= 1, got %d", *val.Max)
	}
	if val.TTLMs != nil && *val.TTLMs < 1 {
		return fmt.Sprintf("value.ttl_ms: want an integer >= 1 (milliseconds), got %d", *val.TTLMs)
	}
	if val.Fence != nil && *val.Fence < 0 {
		return fmt.Sprintf("value.fence: want an integer >= 0, got %d", *val.Fence)
	}
	if val.StartedMs != nil && *val.StartedMs < 0 {
		return fmt.Sprintf("value.started_ms: want an integer >= 0 (milliseconds after the invoke), got %d", *val.StartedMs)
	}
	if val.StartedMs != nil && val.ValidityMs == nil {
		return "value.started_ms: only with validity_ms (the start the validity counts from)"
	}
	if val.OffsetMs != nil && *val.OffsetMs == 0 {
		return "value.offset_ms: want a non-zero integer (milliseconds; ahead when positive), got 0"
	}
	return ""
}

// fieldsOf says which fields v holds.
func fieldsOf(v *Value) vfields {
	var fs vfields
	set := func(bit vfields, present bool) {
		if present {
			fs |= bit
		}
	}
	set(vSlot, v.Slot != nil)
	set(vHeld, v.Held != nil)
	set(vReason, v.Reason != "")
	set(vSlots, v.Slots != nil)
	set(vDelta, v.Delta != nil)
	set(vFrom, v.From != nil)
	set(vTo, v.To != nil)
	set(vProcess, v.Process != "")
	set(vPatched, v.Patched)
	set(vMax, v.Max != nil)
	set(vTTLMs, v.TTLMs != nil)
	set(vToken, v.Token != "")
	set(vFence, v.Fence != nil)
	set(vOffsetMs, v.OffsetMs != nil)
	set(vValidityMs, v.ValidityMs != nil)
	set(vPriority, v.Priority != nil)
	set(vThief, v.Thief != "")
	set(vStartedMs, v.StartedMs != nil)
	return fs
}

// checkEcho checks that the fields echo of val, which the invoke in also
// holds, agree with it.
func checkEcho(echo vfields, val *Value, in inflight) string {
	for i, name := range valueNames {
		bit := vfields(1) << i
		if echo&bit == 0 {
			continue
		}
		want, got := fieldText(bit, in.value), fieldText(bit, val)
		if want != got {
			return fmt.Sprintf("value.%s: want %s, as in the invoke at line %d, got %s (a completion may repeat its invoke's value, not contradict it)", name, want, in.line, got)
		}
	}
	return ""
}

// fieldText renders one field of v for comparison and messages.
func fieldText(bit vfields, v *Value) string {
	switch bit {
	case vSlot:
		return strconv.Itoa(*v.Slot)
	case vHeld:
		return strconv.FormatBool(*v.Held)
	case vReason:
		return strconv.Quote(v.Reason)
	case vSlots:
		return strconv.Itoa(*v.Slots)
	case vDelta:
		return strconv.Itoa(*v.Delta)
	case vFrom:
		return strconv.Itoa(*v.From)
	case vTo:
		return strconv.Itoa(*v.To)
	case vProcess:
		return strconv.Quote(v.Process)
	case vMax:
		return strconv.Itoa(*v.Max)
	case vTTLMs:
		return strconv.Itoa(*v.TTLMs)
	case vToken:
		return strconv.Quote(v.Token)
	case vFence:
		return strconv.Itoa(*v.Fence)
	case vOffsetMs:
		return strconv.Itoa(*v.OffsetMs)
	case vValidityMs:
		return strconv.Itoa(*v.ValidityMs)
	case vPriority:
		return strconv.Itoa(*v.Priority)
	case vThief:
		return strconv.Quote(v.Thief)
	case vStartedMs:
		return strconv.Itoa(*v.StartedMs)
	default: // vPatched
		return strconv.FormatBool(v.Patched)
	}
}

// firstField names the first field in fs, in canonical order.
func firstField(fs vfields) string {
	for i, name := range valueNames {
		if fs&(1<<i) != 0 {
			return name
		}
	}
	return ""
}

// orList quotes words and joins them as `"a", "b" or "c"`.
func orList(words []string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = fmt.Sprintf("%q", w)
	}
	if len(q) == 1 {
		return q[0]
	}
	return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}
