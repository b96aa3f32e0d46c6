package histories

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
)

// A Value is an operation's argument (on its invoke) or result (on its
// completion): a flat set of named fields, each an integer, a boolean or a
// string. The format knows no lock family's fields: each lock kind's
// family declares the type of its values, and the fields they may hold
// (DeclareKind), and the faults' values are [Fault]s. A Value a history
// holds is a pointer to its family's type.
type Value interface {
	// WriteFields hands w the fields the value holds, in canonical order
	// (the order its ValueType declares them): a field with nothing to
	// say (a nil number, an empty string, a false flag) is left out.
	WriteFields(w *FieldWriter)
	// Text is the value as a person reads it in a report: "slot 2",
	// "from 3, to 2", "not held"; "" for none.
	Text() string
}

// Of is v as a Value: nil, no value, when v is a nil pointer. A family
// that hands a *V that may be nil on as a Value passes it through Of, for
// a nil *V in a Value is not no value (it would be written as one).
func Of[V any, P interface {
	*V
	Value
}](v P) Value {
	if v == nil {
		return nil
	}
	return v
}

// noValue says whether v is no value: nil, or a nil pointer of a family's
// type handed on as a Value (which Of avoids, and the Recorder and Write
// take for no value).
func noValue(v Value) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	return rv.Kind() == reflect.Pointer && rv.IsNil()
}

// TextOf is v.Text(), "" for no value.
func TextOf(v Value) string {
	if noValue(v) {
		return ""
	}
	return v.Text()
}

// A FieldType is what a field of a value holds.
type FieldType uint8

const (
	// IntField is a JSON integer (a Go *int: nil when absent).
	IntField FieldType = iota + 1
	// BoolField is true or false (a Go *bool: nil when absent).
	BoolField
	// StringField is a non-empty string ("" when absent). Strings that
	// repeat (reasons, process names) are read into one shared copy.
	StringField
	// FlagField can only be true (a Go bool: false when absent), so that
	// a history has one spelling of it.
	FlagField
)

// A Field is one field a lock kind's values may hold.
type Field struct {
	// Name is its JSON name: "slot", "token", "ttl_ms".
	Name string
	Type FieldType
	// Unique says its strings rarely repeat (tokens), so they are not
	// shared; strings are by default.
	Unique bool
}

// A ValueType is the type of a lock kind's values, as its family declares
// it (DeclareKind): the fields they may hold and how a value is made of
// the fields a history's line holds. Its fields' order is the canonical
// order in which Write writes them and messages name them.
type ValueType struct {
	Fields []Field
	// Make makes the value of the fields r read (at least one).
	Make func(r *FieldReader) Value
	// Check, if set, says what is wrong with the values of v's fields, ""
	// for nothing: a number out of its range, a field without the one it
	// goes with. A message names the field ("value.slot: want an integer
	// >= 1, got 0"). The reasons of a fail are the shapes' to check.
	Check func(v Value) string
	// Patched, if set, names the Flag field that marks a completion the
	// runner settled from a simulator's ground truth (docs/histories.md):
	// only an acquire or release that completes ok or fail may hold it,
	// and a patched fail says NotApplied.
	Patched string

	labels []string // "value.slot", ...: the fields as messages name them
}

// prepare makes t ready to read values.
func (t *ValueType) prepare() *ValueType {
	t.labels = make([]string, len(t.Fields))
	for i, f := range t.Fields {
		t.labels[i] = "value." + f.Name
	}
	return t
}

// index is the position of the field named name, or -1.
func (t *ValueType) index(name string) int {
	for i := range t.Fields {
		if t.Fields[i].Name == name {
			return i
		}
	}
	return -1
}

// names are t's field names, for a message.
func (t *ValueType) names() string {
	n := make([]string, len(t.Fields))
	for i, f := range t.Fields {
		n[i] = f.Name
	}
	return strings.Join(n, ", ")
}

// A FieldReader holds the fields read of one value, for its type's Make.
type FieldReader struct {
	t     *ValueType
	has   vfields
	ints  [maxFields]int
	strs  [maxFields]string
	slabs map[reflect.Type]any // New's, by type
	next  int                  // the field after the one Make asked for last
	last  reflect.Type         // the type New gave last
	slab  any                  // its slab
}

// maxFields is the most fields a value type may declare.
const maxFields = 32

// at is the position of the field named name, which t must declare. A
// Make that asks for the fields in the order t declares them finds each
// at once.
func (r *FieldReader) at(name string, want FieldType) (int, bool) {
	i := r.next
	if i >= len(r.t.Fields) || r.t.Fields[i].Name != name {
		i = r.t.index(name)
	}
	r.next = i + 1
	if i < 0 || r.t.Fields[i].Type != want {
		panic(fmt.Sprintf("histories: the value type has no field %q of type %d", name, want))
	}
	return i, r.has&(1<<i) != 0
}

// Int returns the integer field name, nil if the value does not hold it.
// The integer is written into dst, which the result points to: a family
// boxes a value and its numbers in one allocation.
func (r *FieldReader) Int(name string, dst *int) *int {
	i, ok := r.at(name, IntField)
	if !ok {
		return nil
	}
	*dst = r.ints[i]
	return dst
}

// New returns a new T for a value being made (ValueType.Make): from a
// slab the reader keeps per type, so that a history's values cost one
// allocation per hundred rather than one each.
func New[T any](r *FieldReader) *T {
	if r.slabs == nil {
		r.slabs = map[reflect.Type]any{}
	}
	key := reflect.TypeFor[T]()
	slab, _ := r.slab.(*[]T)
	if r.last != key {
		slab, _ = r.slabs[key].(*[]T)
		if slab == nil {
			slab = new([]T)
			r.slabs[key] = slab
		}
		r.last, r.slab = key, slab
	}
	if len(*slab) == 0 {
		*slab = make([]T, slabSize)
	}
	t := &(*slab)[0]
	*slab = (*slab)[1:]
	return t
}

// slabSize is how many values a slab of New holds.
const slabSize = 128

// Bool returns the boolean field name, nil if the value does not hold
// it, written into dst as Int does.
func (r *FieldReader) Bool(name string, dst *bool) *bool {
	i, ok := r.at(name, BoolField)
	if !ok {
		return nil
	}
	*dst = r.ints[i] != 0
	return dst
}

// String returns the string field name, "" if the value does not hold it.
func (r *FieldReader) String(name string) string {
	i, _ := r.at(name, StringField)
	return r.strs[i]
}

// Flag returns whether the value holds the flag name.
func (r *FieldReader) Flag(name string) bool {
	_, ok := r.at(name, FlagField)
	return ok
}

// A FieldWriter takes a value's fields (Value.WriteFields): it writes
// them as JSON, or, scanning, notes which the value holds and what one of
// them says, for the format's own checks, writing nothing.
type FieldWriter struct {
	buf []byte
	sep byte // before the next field: '{', then ','

	scan  bool
	names []string // scanning: the fields held
	want  string   // scanning: the field to look up
	found string   // scanning: what it says, as a message quotes it ("3", "true", `"full"`)
	str   string   // scanning: what it says, if it is a string
	ok    bool     // scanning: whether the value holds it
}

func (w *FieldWriter) key(name string) {
	w.buf = append(w.buf, w.sep, '"')
	w.sep = ','
	w.buf = append(w.buf, name...)
	w.buf = append(w.buf, '"', ':')
}

// held notes, scanning, that the value holds the field name, and says
// whether it is the one looked up.
func (w *FieldWriter) held(name string) bool {
	w.names = append(w.names, name)
	w.ok = w.ok || name == w.want
	return name == w.want
}

// Int writes the integer field name, unless n is nil.
func (w *FieldWriter) Int(name string, n *int) {
	switch {
	case n == nil:
	case w.scan:
		if w.held(name) {
			w.found = strconv.Itoa(*n)
		}
	default:
		w.key(name)
		w.buf = strconv.AppendInt(w.buf, int64(*n), 10)
	}
}

// Bool writes the boolean field name, unless b is nil.
func (w *FieldWriter) Bool(name string, b *bool) {
	switch {
	case b == nil:
	case w.scan:
		if w.held(name) {
			w.found = strconv.FormatBool(*b)
		}
	default:
		w.key(name)
		w.buf = strconv.AppendBool(w.buf, *b)
	}
}

// String writes the string field name, unless s is empty.
func (w *FieldWriter) String(name, s string) {
	switch {
	case s == "":
	case w.scan:
		if w.held(name) {
			w.found, w.str = strconv.Quote(s), s
		}
	default:
		w.key(name)
		w.buf = appendString(w.buf, s)
	}
}

// Flag writes the flag name, if it is set.
func (w *FieldWriter) Flag(name string, set bool) {
	switch {
	case !set:
	case w.scan:
		if w.held(name) {
			w.found = "true"
		}
	default:
		w.key(name)
		w.buf = append(w.buf, "true"...)
	}
}

// scanFor scans v, looking up the field want ("" for none): w.names are
// then the fields v holds, and w.found, w.str and w.ok what want says.
func (w *FieldWriter) scanFor(v Value, want string) *FieldWriter {
	w.scan, w.names, w.want, w.found, w.str, w.ok = true, w.names[:0], want, "", "", false
	v.WriteFields(w)
	return w
}

// A TextWriter builds a value's Text, part by part, in the order a person
// reads them: "slot 2, held", "token a, fence 3".
type TextWriter struct{ parts []string }

// Int adds "name n", unless n is nil.
func (t *TextWriter) Int(name string, n *int) {
	if n != nil {
		t.parts = append(t.parts, name+" "+strconv.Itoa(*n))
	}
}

// Bool adds yes or no as b says, unless b is nil.
func (t *TextWriter) Bool(yes, no string, b *bool) {
	switch {
	case b == nil:
	case *b:
		t.parts = append(t.parts, yes)
	default:
		t.parts = append(t.parts, no)
	}
}

// String adds "name s", unless s is empty.
func (t *TextWriter) String(name, s string) {
	if s != "" {
		t.parts = append(t.parts, name+" "+s)
	}
}

// Text is the parts added, joined by commas.
func (t *TextWriter) Text() string { return strings.Join(t.parts, ", ") }

// appendValue appends v as a JSON object to buf, through w.
func (w *FieldWriter) appendValue(buf []byte, v Value) []byte {
	w.buf, w.sep, w.scan = buf, '{', false
	v.WriteFields(w)
	if w.sep == '{' {
		w.buf = append(w.buf, '{')
	}
	buf, w.buf = append(w.buf, '}'), nil
	return buf
}

// Lookup returns what the field name of v says, as a message quotes it
// ("3", "true", `"full"`), and whether v holds it: for code that knows no
// family's value type (a report, the format's own checks).
func Lookup(v Value, name string) (string, bool) {
	if noValue(v) {
		return "", false
	}
	w := new(FieldWriter).scanFor(v, name)
	return w.found, w.ok
}

// Reason is v's reason field (why an operation failed), "" if it has
// none: every family's values that may explain a failure name it
// "reason".
func Reason(v Value) string {
	if noValue(v) {
		return ""
	}
	return new(FieldWriter).scanFor(v, "reason").str
}

// IsPatched says whether v is marked patched (ValueType.Patched): a
// family's value type that has such a flag says so with a method
// IsPatched() bool.
func IsPatched(v Value) bool {
	p, ok := v.(interface{ IsPatched() bool })
	return ok && !noValue(v) && p.IsPatched()
}

// A Fault is the value of a fault, a nemesis event: the process it is
// aimed at (none: the server), a clock fault's offset, the links a
// partition of a cluster cuts, and why it could not be applied.
type Fault struct {
	// Reason says why the fault could not be applied (on its fail).
	Reason string `json:"reason,omitempty"`
	// Process is what a fault is aimed at: a client, or a server by the
	// name its family gives it (a Redis server, a cluster's node).
	Process string `json:"process,omitempty"`
	// OffsetMs is how far, in milliseconds, a clock fault moves a clock:
	// ahead when positive. A clock-skew sets the clock that far from true
	// time; a clock-jump steps it by that much.
	OffsetMs *int `json:"offset_ms,omitempty"`
	// Cut is what a partition of a cluster cuts, and its heal restores:
	// directions between the cluster's nodes (or the clients' side,
	// "local"), each "from>to" (from's packets to "to" are dropped),
	// separated by spaces: "n1>n2 n2>n1" cuts n1 and n2 off from each
	// other, "n1>n2" one way only. A partition aimed at a process cuts
	// that client's connection instead, and has no Cut.
	Cut string `json:"cut,omitempty"`
}

// WriteFields writes f's fields: reason, process, offset_ms, cut.
func (f *Fault) WriteFields(w *FieldWriter) {
	w.String("reason", f.Reason)
	w.String("process", f.Process)
	w.Int("offset_ms", f.OffsetMs)
	w.String("cut", f.Cut)
}

// Text is the fault's offset and cut, if any: "offset_ms 250",
// "cut n1>n2 n2>n1".
func (f *Fault) Text() string {
	var t TextWriter
	t.Int("offset_ms", f.OffsetMs)
	t.String("cut", f.Cut)
	return t.Text()
}

// Directions are the directions a cut names, each [from, to], in its
// order; nil for none.
func (f *Fault) Directions() [][2]string {
	var out [][2]string
	for _, d := range strings.Fields(f.Cut) {
		from, to, _ := strings.Cut(d, ">")
		out = append(out, [2]string{from, to})
	}
	return out
}

// CheckCut says what is wrong with f's cut, "" if nothing: each
// direction "from>to", two different names, given once, separated by
// single spaces.
func (f *Fault) CheckCut() string { return checkCut(f.Cut) }

func checkCut(cut string) string {
	seen := map[string]bool{}
	for _, d := range strings.Split(cut, " ") {
		from, to, ok := strings.Cut(d, ">")
		switch {
		case !ok || from == "" || to == "" || strings.Contains(to, ">"):
			return fmt.Sprintf("value.cut: want directions \"from>to\" separated by single spaces, got %q", cut)
		case from == to:
			return fmt.Sprintf("value.cut: %q cuts %s off from itself", d, from)
		case seen[d]:
			return fmt.Sprintf("value.cut: %q given twice", d)
		}
		seen[d] = true
	}
	return ""
}

// As is e's value as a P, a family's value type (the zero P, nil, if e
// has none or one of another type): each family's ValueOf.
func As[P Value](e *Event) P {
	v, _ := e.Value.(P)
	return v
}

// FaultOf is e's value as a fault's, nil if it has none (or is not a
// nemesis event's).
func FaultOf(e *Event) *Fault { return As[*Fault](e) }

// faultBox is a Fault and its offset, in one allocation.
type faultBox struct {
	v      Fault
	offset int
}

// faultType is the type of the faults' values.
var faultType = (&ValueType{
	Fields: []Field{{Name: "reason", Type: StringField}, {Name: "process", Type: StringField}, {Name: "offset_ms", Type: IntField}, {Name: "cut", Type: StringField}},
	Make: func(r *FieldReader) Value {
		f := New[faultBox](r)
		f.v = Fault{Reason: r.String("reason"), Process: r.String("process"), OffsetMs: r.Int("offset_ms", &f.offset), Cut: r.String("cut")}
		return &f.v
	},
	Check: func(v Value) string {
		f := v.(*Fault)
		if f.OffsetMs != nil && *f.OffsetMs == 0 {
			return "value.offset_ms: want a non-zero integer (milliseconds; ahead when positive), got 0"
		}
		if f.Cut != "" {
			return checkCut(f.Cut)
		}
		return ""
	},
}).prepare()
