package histories

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// nemesis is the process that injects faults.
const nemesis = "nemesis"

// nemesisOps are the faults, in the order messages list them.
var nemesisOps = []string{Kill, Pause, Resume, Partition, Heal, ForceClose, RestartBroker, DropReply, QueueDeleted,
	ClockSkew, ClockJump, ClockReset}

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
// DeclareKind): the values its invoke, ok, fail and info may hold.
type Operation struct {
	F                      string
	Invoke, Ok, Fail, Info Shape
	// Notice says the operation is a notice, not an operation: a single
	// info event of a process (Info is its value), which neither starts
	// nor ends an operation and may come while one is in flight (a lease
	// lost to a thief).
	Notice bool
	// Patchable says a completion of F, ok or fail, may be marked patched
	// (ValueType.Patched): the runner settled it from a simulator's
	// ground truth.
	Patchable bool
	// Refused, if set, says why F, an operation of another kind, is not
	// one of this kind's: a history that holds it is refused with that
	// reason ("a true mutex has no admin").
	Refused string
}

// A Shape is what the value of one of an operation's events may hold: no
// value, when Fields is empty.
type Shape struct {
	// Fields are the fields it may hold, by their JSON names (the
	// ValueType's); Required those of them it must.
	Fields, Required []string
	// Reasons are the reasons it may give, if it may hold "reason"; nil
	// allows any.
	Reasons []string
	// Want is the shape as a message says it: `{"slot":k} with k >= 1`;
	// by default, one made of Fields.
	Want string
}

// A kind is a lock kind as its family declared it.
type kind struct {
	values    *ValueType
	ops       map[string]*shapes
	names     []string // the operations, in the order declared
	patchable string   // those that may be patched, as a message says them: "an acquire or release"
}

var declared struct {
	sync.Mutex // for DeclareKind; readers load kinds
	kinds      atomic.Pointer[map[string]*kind]
	order      []string
}

// DeclareKind lets histories of a lock kind be read and written: a family
// declares its kind, the type of its values and its operations from an
// init function, as it registers its checker with model.Register, and the
// format needs no change. The kinds a history names must have been
// declared by a family linked into the program (as image decoders are):
// semaphore and mutex by amqp-locks' checker, lease by the lease checker.
// Declaring a kind twice, an operation that is a fault, or a shape that
// names a field its values lack panics: it is a programming error.
func DeclareKind(name string, values *ValueType, ops ...Operation) {
	declared.Lock()
	defer declared.Unlock()
	switch {
	case name == "":
		panic("histories.DeclareKind: the empty kind (it means semaphore)")
	case declaredKind(name) != nil:
		panic("histories.DeclareKind: kind " + strconv.Quote(name) + " declared twice")
	case len(values.Fields) > maxFields:
		panic("histories.DeclareKind: " + name + ": more than 32 value fields")
	}
	k := &kind{values: values.prepare(), ops: map[string]*shapes{}}
	for _, o := range ops {
		if nemesisShapes[o.F] != nil || o.F == "" {
			panic("histories.DeclareKind: " + name + ": operation " + strconv.Quote(o.F) + " is a fault or empty")
		}
		sh := &shapes{notice: o.Notice, refused: o.Refused, patchable: o.Patchable}
		if o.Patchable {
			k.patchable = orWords(k.patchable, o.F)
		}
		for i, s := range []Shape{o.Invoke, o.Ok, o.Fail, o.Info} {
			sh.s[i] = values.shape(name, s)
		}
		k.ops[o.F] = sh
		if o.Refused == "" {
			k.names = append(k.names, o.F)
		}
	}
	kinds := map[string]*kind{name: k} // a new map, so that readers need no lock
	if old := declared.kinds.Load(); old != nil {
		for n, k := range *old {
			kinds[n] = k
		}
	}
	declared.kinds.Store(&kinds)
	declared.order = append(declared.order, name)
}

// shape is s in t's fields.
func (t *ValueType) shape(kind string, s Shape) shape {
	want := s.Want
	if want == "" {
		want = "no value"
		if len(s.Fields) > 0 {
			want = "a value with some of " + strings.Join(s.Fields, ", ")
		}
	}
	return shape{allowed: t.bits(kind, s.Fields), required: t.bits(kind, s.Required), reasons: s.Reasons, want: want}
}

// bits are the fields names of t.
func (t *ValueType) bits(kind string, names []string) vfields {
	var f vfields
	for _, n := range names {
		i := t.index(n)
		if i < 0 {
			panic("histories.DeclareKind: " + kind + ": no value field " + strconv.Quote(n) + " (want " + t.names() + ")")
		}
		f |= 1 << i
	}
	return f
}

// declaredKind returns the kind declared as name, or nil.
func declaredKind(name string) *kind {
	kinds := declared.kinds.Load()
	if kinds == nil {
		return nil
	}
	return (*kinds)[name]
}

// kindNames are the kinds declared, quoted, in the order declared.
func kindNames() string {
	declared.Lock()
	defer declared.Unlock()
	q := make([]string, len(declared.order))
	for i, k := range declared.order {
		q[i] = strconv.Quote(k)
	}
	return strings.Join(q, ", ")
}

// shape is what the value of one (kind, f, type) may hold, in the bits of
// the kind's value type.
type shape struct {
	allowed  vfields  // fields that may be present
	required vfields  // fields that must be present
	oneOf    vfields  // fields of which exactly one must be present
	want     string   // the whole shape, for messages
	reasons  []string // the reasons allowed; nil means any
}

// shapes are an operation's value shapes, by type: invoke, ok, fail, info;
// and whether it is a notice.
type shapes struct {
	s         [4]shape
	notice    bool
	refused   string
	patchable bool
}

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

// The faults' value bits (faultType's fields).
const (
	fReason vfields = 1 << iota
	fProcess
	fOffsetMs
	fCut
)

var (
	none      = shape{want: "no value"}
	anyReason = shape{allowed: fReason, want: `no value, or {"reason":r} saying why`}
	target    = shape{allowed: fProcess, required: fProcess, want: `{"process":p} naming the process the fault is aimed at`}
)

// nemesisShapes are the value shapes of the faults.
var (
	clockShapes = &shapes{s: [4]shape{
		{allowed: fProcess | fOffsetMs, required: fOffsetMs, want: `{"offset_ms":d} with d != 0, and "process":p for a process's clock (none: the server's)`},
		none,
		{allowed: fProcess | fOffsetMs | fReason, want: `its invoke's value, optionally with a reason`},
		{allowed: fProcess | fOffsetMs, want: `its invoke's value`}}}
	resetShapes = &shapes{s: [4]shape{
		{allowed: fProcess, want: `no value for the server's clock, or {"process":p}`},
		none,
		{allowed: fProcess | fReason, want: `its invoke's value, optionally with a reason`},
		{allowed: fProcess, want: `its invoke's value`}}}
	// A partition and its heal are aimed at a client (process) or cut
	// links between a cluster's nodes (cut); a completion repeats it.
	cutTarget = shape{allowed: fProcess | fCut, oneOf: fProcess | fCut, want: `{"process":p} naming the client cut off, or {"cut":"a>b ..."} naming the directions cut between nodes`}
	cutShapes = &shapes{s: [4]shape{cutTarget, cutTarget,
		{allowed: fProcess | fCut | fReason, oneOf: fProcess | fCut, want: `its invoke's value, optionally with a reason`},
		cutTarget}}
	// A restart of the broker names no process, or the node of a
	// cluster it restarts.
	nodeOrNone    = shape{allowed: fProcess, want: `no value, or {"process":n} naming the cluster's node restarted`}
	restartShapes = &shapes{s: [4]shape{nodeOrNone, nodeOrNone,
		{allowed: fProcess | fReason, want: `its invoke's value, optionally with a reason`}, nodeOrNone}}
	targeted = &shapes{s: [4]shape{target, target,
		{allowed: fProcess | fReason, required: fProcess, want: `{"process":p}, as in its invoke, optionally with a reason`},
		target}}
	nemesisShapes = map[string]*shapes{
		ClockSkew:     clockShapes,
		ClockJump:     clockShapes,
		ClockReset:    resetShapes,
		Kill:          targeted,
		Pause:         targeted,
		Resume:        targeted,
		Partition:     cutShapes,
		Heal:          cutShapes,
		ForceClose:    targeted,
		DropReply:     targeted,
		QueueDeleted:  targeted,
		RestartBroker: restartShapes,
	}
	faults = &kind{values: faultType, ops: nemesisShapes, names: nemesisOps}
)

// inflight is an operation that has been invoked and not yet completed.
type inflight struct {
	line  int
	f     string
	lock  string
	kind  string // effective: never empty
	value Value
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
	fw FieldWriter // scans values (fieldsOf), allocating nothing after the first

	// decode, if set, decodes the value of the event being checked, of
	// the type given, once its kind and operation are known to be right
	// (the reader's parser.value); unset, values are decoded already.
	decode func(e *Event, t *ValueType) (vfields, string)

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
	if IsNotice(e) {
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

func isDeclared(kind string) bool { return declaredKind(kind) != nil }

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
	k, op, msg := operationShapes(e, has, kind)
	if msg != "" {
		return msg
	}
	if v.decode != nil {
		if vhas, msg = v.decode(e, k.values); msg != "" {
			return msg
		}
	}
	in := proc.op
	if op.notice {
		return checkNotice(e, k, &op.s[3], vhas, lock)
	}
	if msg := checkInFlight(e, kind, proc, lock); msg != "" {
		return msg
	}
	// The value.
	if msg := checkValue(&v.fw, k, op, e, kind, vhas, in); msg != "" {
		return msg
	}
	if e.Process == nemesis && IsClockFault(e.F) && e.Type != Invoke {
		return checkClockEcho(&v.fw, e, vhas, in)
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
	case has&hasKind != 0 && !isDeclared(e.Kind):
		return fmt.Sprintf("kind: want one of %s (or no kind, meaning semaphore: the kinds the families linked in declare), got %q", kindNames(), e.Kind)
	case has&hasLock != 0 && e.Lock == "":
		return "lock: want a non-empty string"
	case e.Error != "" && e.Type == Invoke:
		return "error: not allowed on an invoke (an error belongs to the operation's completion: fail, info or ok)"
	}
	return ""
}

// operationShapes finds the event's kind (the faults' for the nemesis) and
// the value shapes of its operation: a fault for the nemesis, an operation
// of the lock's kind for anyone else.
func operationShapes(e *Event, has fields, kind string) (*kind, *shapes, string) {
	fault := nemesisShapes[e.F]
	if e.Process == nemesis {
		switch {
		case fault == nil:
			return nil, nil, fmt.Sprintf("f: process %q only injects faults (want one of %s), got %q", nemesis, strings.Join(nemesisOps, ", "), e.F)
		case has&hasLock != 0:
			return nil, nil, fmt.Sprintf("lock: a nemesis event names no lock, got %q", e.Lock)
		case has&hasKind != 0:
			return nil, nil, fmt.Sprintf("kind: a nemesis event names no lock, so no kind, got %q", e.Kind)
		case e.Type == Ok:
			return nil, nil, "type: a nemesis operation completes with info once the fault is in place (or fail if it could not be applied), not ok"
		}
		return faults, fault, ""
	}
	switch {
	case fault != nil:
		return nil, nil, fmt.Sprintf("f: %q is a fault; only process %q may inject it", e.F, nemesis)
	case has&hasLock == 0:
		return nil, nil, fmt.Sprintf("lock: missing (every %s names the lock it operates on)", e.F)
	}
	k := declaredKind(kind)
	if k == nil {
		return nil, nil, fmt.Sprintf("kind: no kind means %s, which no family linked into this program declares (want one of %s)", Semaphore, kindNames())
	}
	if op := k.ops[e.F]; op != nil && op.refused == "" {
		return k, op, ""
	} else if op != nil {
		return nil, nil, fmt.Sprintf("f: %q on lock %q, a %s: %s", e.F, e.Lock, kind, op.refused)
	}
	return nil, nil, fmt.Sprintf("f: unknown operation %q for a %s lock (want one of %s)", e.F, kind, strings.Join(k.names, ", "))
}

// checkNotice checks a notice (a lost lease): an info event on its own,
// whatever the process has in flight, whose value has the shape sh.
func checkNotice(e *Event, k *kind, sh *shape, vhas vfields, lock *symbol) string {
	kind := effectiveKind(e.Kind)
	if e.Type != Info {
		return fmt.Sprintf("type: a %s notice is a single info event (no invoke, no completion), got %s", e.F, e.Type)
	}
	if lock.kind != "" && lock.kind != kind {
		return fmt.Sprintf("kind: lock %q is a %s here but was a %s at line %d (no kind means semaphore)", e.Lock, kind, lock.kind, lock.kindLine)
	}
	if e.Value == nil {
		vhas = 0
	}
	return checkFields(k, sh, e, vhas, inflight{}, func() string { return kind + " " + e.F + " notice" })
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
func checkClockEcho(w *FieldWriter, e *Event, vhas vfields, in inflight) string {
	if e.Value == nil {
		vhas = 0
	}
	var want vfields
	if in.value != nil {
		want = fieldsOf(w, faultType, in.value) & (fProcess | fOffsetMs)
	}
	if missing := want &^ vhas; missing != 0 {
		return fmt.Sprintf("value.%s: missing: a %s completion repeats its invoke's value (line %d)", faultType.first(missing), e.F, in.line)
	}
	if extra := vhas &^ (want | fReason); extra != 0 {
		return fmt.Sprintf("value.%s: not allowed: its invoke at line %d has none (a %s completion repeats its invoke's value)", faultType.first(extra), in.line, e.F)
	}
	return ""
}

// checkValue checks that e's value, holding the fields vhas of k's value
// type, has the shape sh; kind is e's lock kind and in the invoke e
// completes, if it is a completion. A completion may repeat fields of its
// invoke's value (an echo, as Jepsen's clients return the op they were
// given): they must agree with the invoke, and they are not the
// completion's own fields.
func checkValue(w *FieldWriter, k *kind, op *shapes, e *Event, kind string, vhas vfields, in inflight) string {
	sh := &op.s[typeIndex(e.Type)]
	val := e.Value
	if val == nil {
		vhas = 0
	}
	if e.Process == nemesis {
		kind = nemesis
	}
	what := func() string { return kind + " " + e.F + " " + string(e.Type) }
	t := k.values
	var echo vfields // the fields repeated from the invoke
	if e.Type != Invoke && vhas != 0 && in.value != nil {
		echo = vhas & fieldsOf(w, t, in.value)
		if msg := checkEcho(w, t, echo, val, in); msg != "" {
			return msg
		}
	}
	if patched := t.patchedBit(); vhas&patched != 0 {
		if msg, done := checkPatched(w, k, op, e, vhas, echo, patched, what); done {
			return msg
		}
		vhas &^= patched
	}
	vhas &^= echo &^ sh.allowed // echoes are checked; the shape is about the rest
	if msg := checkFields(k, sh, e, vhas, in, what); msg != "" {
		return msg
	}
	if val == nil {
		return ""
	}
	return checkRanges(w, t, sh, val)
}

// patchedBit is the bit of t's Patched field, 0 if it has none.
func (t *ValueType) patchedBit() vfields {
	if t.Patched == "" {
		return 0
	}
	return 1 << t.index(t.Patched)
}

// checkPatched checks a value marked patched (vhas holds the bit patched):
// only a completion, ok or fail, of an operation op of k that is
// Patchable may be, and a patched fail holds only the not-applied reason
// besides the echo. done says the verdict is msg (a patched fail needs no
// further checks); otherwise the value is checked as if it were not
// marked.
func checkPatched(w *FieldWriter, k *kind, op *shapes, e *Event, vhas, echo, patched vfields, what func() string) (msg string, done bool) {
	if !op.patchable || (e.Type != Ok && e.Type != Fail) {
		return fmt.Sprintf("value.patched: not allowed: only %s that completes ok or fail may be patched, not a %s", k.patchable, what()), true
	}
	if reason := w.scanFor(e.Value, "reason").str; e.Type == Fail && reason != NotApplied {
		return fmt.Sprintf("value.reason: a patched fail says %q, got %q", NotApplied, reason), true
	}
	if e.Type == Fail {
		reason := vfields(0)
		if i := k.values.index("reason"); i >= 0 {
			reason = 1 << i
		}
		if extra := vhas &^ (reason | patched | echo); extra != 0 {
			return fmt.Sprintf("value.%s: not allowed: a patched fail holds only its reason (and what it repeats of its invoke)", k.values.first(extra)), true
		}
		return "", true
	}
	return "", false
}

// checkFields checks that the fields vhas (echoes of the invoke taken out)
// are those the shape sh allows and include those it requires.
func checkFields(k *kind, sh *shape, e *Event, vhas vfields, in inflight, what func() string) string {
	if extra := vhas &^ sh.allowed; extra != 0 {
		f := k.values.first(extra)
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
		return fmt.Sprintf("value.%s: missing: a %s wants %s", k.values.first(missing), what(), sh.want)
	}
	if sh.oneOf != 0 {
		switch has := vhas & sh.oneOf; {
		case has == 0:
			return fmt.Sprintf("value.%s: missing: a %s wants %s", k.values.first(sh.oneOf), what(), sh.want)
		case has&(has-1) != 0:
			return fmt.Sprintf("value.%s: not allowed with value.%s: a %s wants %s", k.values.first(has&(has-1)), k.values.first(has), what(), sh.want)
		}
	}
	return ""
}

// checkRanges checks that the reason val gives is one sh allows, and that
// its fields are in their ranges (the value type's Check).
func checkRanges(w *FieldWriter, t *ValueType, sh *shape, val Value) string {
	if sh.reasons != nil {
		if r := w.scanFor(val, "reason").str; r != "" && !slices.Contains(sh.reasons, r) {
			return fmt.Sprintf("value.reason: want %s, got %q", orList(sh.reasons), r)
		}
	}
	if t.Check != nil {
		return t.Check(val)
	}
	return ""
}

// typeOf is the type of e's value: a Fault for a nemesis event, or its
// kind's values; nil if no family declared its kind.
func typeOf(e *Event) *ValueType {
	if e.Process == nemesis {
		return faultType
	}
	if k := declaredKind(effectiveKind(e.Kind)); k != nil {
		return k.values
	}
	return nil
}

// fieldsOf says which fields of t v holds, scanning it with w.
func fieldsOf(w *FieldWriter, t *ValueType, v Value) vfields {
	var fs vfields
	for _, name := range w.scanFor(v, "").names {
		if i := t.index(name); i >= 0 {
			fs |= 1 << i
		}
	}
	return fs
}

// checkEcho checks that the fields echo of val, which the invoke in also
// holds, agree with it.
func checkEcho(w *FieldWriter, t *ValueType, echo vfields, val Value, in inflight) string {
	for i, f := range t.Fields {
		if echo&(1<<i) == 0 {
			continue
		}
		want := w.scanFor(in.value, f.Name).found
		got := w.scanFor(val, f.Name).found
		if want != got {
			return fmt.Sprintf("value.%s: want %s, as in the invoke at line %d, got %s (a completion may repeat its invoke's value, not contradict it)", f.Name, want, in.line, got)
		}
	}
	return ""
}

// first names the first field in fs, in canonical order.
func (t *ValueType) first(fs vfields) string {
	for i, f := range t.Fields {
		if fs&(1<<i) != 0 {
			return f.Name
		}
	}
	return ""
}

// orWords adds word to the words of list, "an acquire or release": the
// article is the first word's.
func orWords(list, word string) string {
	if list != "" {
		return list + " or " + word
	}
	if strings.ContainsRune("aeiou", rune(word[0])) {
		return "an " + word
	}
	return "a " + word
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
