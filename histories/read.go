package histories

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"os"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// Read reads a whole history from r and validates it. name is used in error
// messages; it is usually the file's path.
//
// Read is strict, because a history that is silently misread proves nothing:
// every line must be one JSON object with exactly the known fields, of the
// right JSON types, and the events must make sense together (indexes in
// order, times never decreasing, each completion matching the invoke in
// flight for its process, values of the shape their operation wants). The
// first problem is returned as an [*Error] naming the line. Operations still
// in flight at the end are fine: a crashed client never completes.
//
// The lines are decoded by a small parser made for this format rather than
// by encoding/json, which matches field names case-insensitively and lets a
// duplicated field silently win; the parser is also several times faster.
func Read(r io.Reader, name string) ([]Event, error) {
	var buf bytes.Buffer
	if sized, ok := r.(interface{ Len() int }); ok { // bytes.Reader, strings.Reader, ...
		buf.Grow(sized.Len() + bytes.MinRead)
	}
	if _, err := buf.ReadFrom(r); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return parse(buf.Bytes(), name)
}

// ReadFile reads and validates the history in the file at path, as [Read].
func ReadFile(path string) ([]Event, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return parse(data, path)
}

// parse splits data into lines, decodes each into an event and validates it
// against the ones before.
func parse(data []byte, name string) ([]Event, error) {
	events := make([]Event, 0, bytes.Count(data, []byte{'\n'})+1)
	p := parser{intern: make(map[string]*symbol)}
	v := newValidator()
	v.decode = p.value
	for line := 1; len(data) > 0; line++ {
		text := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			text, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		events = append(events, Event{})
		e := &events[len(events)-1]
		if !p.event(text, e) {
			return nil, &Error{File: name, Line: line, Msg: p.msg}
		}
		if msg := v.check(line, e, p.has, 0, p.proc, p.lock); msg != "" {
			return nil, &Error{File: name, Line: line, Msg: msg}
		}
	}
	return events, nil
}

// Which top-level fields a line holds.
type fields uint16

const (
	hasIndex fields = 1 << iota
	hasTime
	hasProcess
	hasType
	hasF
	hasLock
	hasKind
	hasValue
	hasError
)

// Which fields a value holds: bit i is the i-th field its value type
// declares (ValueType.Fields).
type vfields uint32

// parser decodes one line at a time into an Event. It is made for this
// format: a flat object of known fields, one of which is a flat object of
// known fields. Anything else is an error.
type parser struct {
	b   []byte // the line
	i   int    // the next byte to read
	msg string // the problem, once parsing has failed

	has    fields  // the top-level fields seen
	vhas   vfields // the value fields seen
	proc   *symbol // the process, once seen
	lock   *symbol // the lock, once seen
	vstart int     // where the value object starts, -1 for none

	// The value as decoded where the line holds it, by the type its
	// event's kind so far wants (early): the validator's value takes
	// it, if its type is the one the whole line wants.
	early    *ValueType
	earlyHas vfields
	earlyMsg string
	kind     string // the event's kind, as the line says it

	scratch []byte             // decoded strings that had escapes
	intern  map[string]*symbol // names repeat on almost every line
	fr      FieldReader        // the value's fields, for its type's Make
}

// fail records a problem and returns false, so that parsing can stop with
// "return p.fail(...)".
func (p *parser) fail(format string, args ...any) bool {
	p.msg = fmt.Sprintf(format, args...)
	return false
}

// syntax records a JSON syntax problem at the current column.
func (p *parser) syntax(format string, args ...any) bool {
	p.msg = fmt.Sprintf("invalid JSON at column %d: %s", p.i+1, fmt.Sprintf(format, args...))
	return false
}

// unexpected records that the byte at the current position is not what the
// grammar wants there.
func (p *parser) unexpected(want string) bool {
	if p.i >= len(p.b) {
		return p.syntax("want %s, got the end of the line", want)
	}
	return p.syntax("want %s, got %s", want, quoteByte(p.b[p.i]))
}

func quoteByte(c byte) string {
	if c < utf8.RuneSelf {
		return fmt.Sprintf("%q", rune(c))
	}
	return fmt.Sprintf("byte %#02x", c)
}

// quote quotes a string from the input for a message, shortening it.
func quote(s []byte) string {
	const max = 40
	if len(s) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		return fmt.Sprintf("%q...", s[:cut])
	}
	return fmt.Sprintf("%q", s)
}

func (p *parser) skipSpace() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\r', '\n':
			p.i++
		default:
			return
		}
	}
}

// peek returns the next byte, or 0 at the end of the line.
func (p *parser) peek() byte {
	if p.i < len(p.b) {
		return p.b[p.i]
	}
	return 0
}

// event decodes line into e, recording which fields it held.
func (p *parser) event(line []byte, e *Event) bool {
	p.b, p.i, p.has, p.vhas, p.proc, p.lock, p.vstart, p.early = line, 0, 0, 0, nil, nil, -1, nil
	if !utf8.Valid(line) {
		return p.fail("line is not valid UTF-8")
	}
	p.skipSpace()
	if p.i == len(p.b) {
		return p.fail("empty line (want one JSON object per line, and no blank lines)")
	}
	if p.b[p.i] != '{' {
		return p.fail("want a JSON object, got %s", p.describe())
	}
	ok := p.object(func(key []byte) bool { return p.eventField(key, e) })
	if !ok {
		return false
	}
	p.skipSpace()
	if p.i < len(p.b) {
		return p.syntax("want one JSON object per line, got more after it")
	}
	return true
}

// value decodes the value object of the line read last, if it has one,
// into e: a value of type t, its kind's (a Fault for the nemesis). The
// validator calls it once it knows the kind and the operation are right
// (validator.decode), so that a value is judged by its operation's type.
// It returns the fields the value holds, or the problem.
func (p *parser) value(e *Event, t *ValueType) (vfields, string) {
	switch {
	case p.vstart < 0:
		return 0, ""
	case t == p.early && (p.earlyMsg == "" || p.kind == e.Kind):
		return p.earlyHas, p.earlyMsg // its message names the kind the line says
	}
	p.i = p.vstart
	return p.decode(e, t)
}

// decode decodes the value object at the current position into e, as a
// value of type t, and returns the fields it holds, or the problem.
func (p *parser) decode(e *Event, t *ValueType) (vfields, string) {
	p.kind = e.Kind
	p.fr.t, p.fr.has, p.fr.next = t, 0, 0
	if !p.object(func(key []byte) bool { return p.valueField(key, t) }) {
		return 0, p.msg
	}
	e.Value = t.Make(&p.fr)
	for i := range t.Fields {
		p.fr.strs[i] = ""
	}
	return p.fr.has, ""
}

// typeSoFar is the type of the value of e, as far as the line read so far
// says: a fault's for the nemesis, else the kind's (no kind yet: a
// semaphore's, as no kind means); nil before the process is read, or for
// a kind no family declared.
func (p *parser) typeSoFar(e *Event) *ValueType {
	switch {
	case p.has&hasProcess == 0:
		return nil
	case e.Process == nemesis:
		return faultType
	}
	if k := declaredKind(effectiveKind(e.Kind)); k != nil {
		return k.values
	}
	return nil
}

// object reads a JSON object, handing each key to field, which must read the
// member's value. It rejects duplicated keys through field.
func (p *parser) object(field func(key []byte) bool) bool {
	return p.members('}', func() bool {
		if p.peek() != '"' {
			return p.unexpected("a field name in double quotes")
		}
		key, ok := p.str()
		if !ok {
			return false
		}
		p.skipSpace()
		if p.peek() != ':' {
			return p.unexpected("':' after the field name")
		}
		p.i++
		p.skipSpace()
		return field(key)
	})
}

// members reads the members of a JSON object or array, the current byte
// being its opening bracket and end its closing one: member reads each.
func (p *parser) members(end byte, member func() bool) bool {
	p.i++ // '{' or '['
	p.skipSpace()
	if p.peek() == end {
		p.i++
		return true
	}
	for {
		if !member() {
			return false
		}
		p.skipSpace()
		switch p.peek() {
		case ',':
			p.i++
			p.skipSpace()
		case end:
			p.i++
			return true
		default:
			return p.unexpected("',' or '" + string(end) + "'")
		}
	}
}

const eventFieldNames = "index, time, process, type, f, lock, kind, value, error"

// eventBit returns the bit of the top-level field named key, or 0 if the
// format has no such field. It is small enough to be inlined into
// eventField, so the lookup costs no call.
func eventBit(key []byte) fields {
	switch string(key) {
	case "index":
		return hasIndex
	case "time":
		return hasTime
	case "process":
		return hasProcess
	case "type":
		return hasType
	case "f":
		return hasF
	case "lock":
		return hasLock
	case "kind":
		return hasKind
	case "value":
		return hasValue
	case "error":
		return hasError
	}
	return 0
}

// eventField reads the value of the top-level field key into e, refusing
// unknown and repeated fields. The fields found on most lines, the value
// object included, are read here, so that they cost no call more than the
// field itself; error, which is rare, is read by errorField.
func (p *parser) eventField(key []byte, e *Event) bool {
	bit := eventBit(key) // 0 for an unknown field, refused below
	if p.has&bit != 0 {
		return p.fail("duplicate field %q", key)
	}
	p.has |= bit
	switch bit {
	case hasIndex:
		n, ok := p.integer("index", math.MinInt, math.MaxInt)
		e.Index = int(n)
		return ok
	case hasTime:
		n, ok := p.integer("time", math.MinInt64, math.MaxInt64)
		e.Time = n
		return ok
	case hasProcess:
		s, ok := p.string("process")
		p.proc = p.symbol(s)
		e.Process = p.proc.name
		return ok
	case hasType:
		s, ok := p.string("type")
		e.Type = Type(p.known(s))
		return ok
	case hasF:
		s, ok := p.string("f")
		e.F = p.known(s)
		return ok
	case hasLock:
		s, ok := p.string("lock")
		p.lock = p.symbol(s)
		e.Lock = p.lock.name
		return ok
	case hasKind:
		s, ok := p.string("kind")
		e.Kind = p.known(s)
		return ok
	case hasError:
		return p.errorField(e)
	case hasValue: // an object, decoded once the kind is known (value), or null
		if p.peek() != '{' {
			if p.peek() == 'n' && p.literal("null") {
				return true // no value, as if the field were left out
			}
			return p.fail("value: want an object or null, got %s", p.describe())
		}
		p.vstart = p.i
		if t := p.typeSoFar(e); t != nil {
			// In the canonical order the process and the kind come
			// first: the value is decoded once, as it is read.
			p.early = t
			if p.earlyHas, p.earlyMsg = p.decode(e, t); p.earlyMsg == "" {
				return true
			}
			p.i = p.vstart
		}
		return p.skip()
	default:
		// bit 0, no such field, is refused here, where the switch tests it
		// anyway, rather than by a test of its own before the others.
		return p.fail("unknown field %s (want %s)", quote(key), eventFieldNames)
	}
}

// errorField reads the error field into e: a non-empty string, or null,
// which means no error, as if the field were left out.
func (p *parser) errorField(e *Event) bool {
	if p.peek() == 'n' && p.literal("null") {
		return true // no error, as if the field were left out
	}
	s, ok := p.string("error")
	if !ok {
		return false
	}
	if len(s) == 0 {
		return p.fail("error: want a non-empty string, or null (or leave the field out)")
	}
	e.Error = p.name(s)
	return true
}

// skip reads over the JSON value at the current position, checking only
// its syntax: the value object is decoded once the line is read (value).
func (p *parser) skip() bool {
	switch c := p.peek(); {
	case c == '{':
		return p.object(func([]byte) bool { return p.skip() })
	case c == '[':
		return p.members(']', p.skip)
	case c == '"':
		_, ok := p.str()
		return ok
	case c == '-' || c >= '0' && c <= '9':
		_, ok := p.number()
		return ok
	case c == 't' && p.literal("true"), c == 'f' && p.literal("false"), c == 'n' && p.literal("null"):
		return true
	}
	return p.unexpected("a JSON value")
}

// valueField reads the value of the field key of a value object of type t
// into p.fr, refusing fields t does not declare and repeated fields.
func (p *parser) valueField(key []byte, t *ValueType) bool {
	i := -1
	for j := range t.Fields {
		if t.Fields[j].Name == string(key) {
			i = j
			break
		}
	}
	if i < 0 {
		what := "a fault's value"
		if p.proc == nil || p.proc.name != nemesis {
			what = "a " + effectiveKind(p.kind) + " lock's value"
		}
		return p.fail("unknown field %s in %s (want %s)", quote(key), what, t.names())
	}
	bit := vfields(1) << i
	if p.fr.has&bit != 0 {
		return p.fail("duplicate field \"value.%s\"", key)
	}
	p.fr.has |= bit
	f := &t.Fields[i]
	switch f.Type {
	case BoolField:
		switch {
		case p.peek() == 't' && p.literal("true"):
			p.fr.ints[i] = 1
		case p.peek() == 'f' && p.literal("false"):
			p.fr.ints[i] = 0
		default:
			return p.fail("value.%s: want true or false, got %s", f.Name, p.describe())
		}
		return true
	case FlagField:
		if p.peek() != 't' || !p.literal("true") {
			return p.fail("value.%s: want true (leave the field out otherwise), got %s", f.Name, p.describe())
		}
		return true
	case StringField:
		return p.valueString(f, i)
	}
	n, ok := p.integer(t.labels[i], math.MinInt, math.MaxInt)
	p.fr.ints[i] = int(n)
	return ok
}

// valueString reads the string field f, the i-th of its type, into p.fr.
// It must not be empty: a field with nothing to say is left out. Strings
// that repeat (reasons, processes) are interned; unique ones (tokens) are
// not.
func (p *parser) valueString(f *Field, i int) bool {
	s, ok := p.string(p.fr.t.labels[i])
	if !ok {
		return false
	}
	if len(s) == 0 {
		return p.fail("value.%s: want a non-empty string (leave the field out instead)", f.Name)
	}
	if f.Unique {
		p.fr.strs[i] = string(s)
	} else {
		p.fr.strs[i] = p.name(s)
	}
	return true
}

// symbol returns the symbol named s, creating it the first time.
func (p *parser) symbol(s []byte) *symbol {
	if sym, ok := p.intern[string(s)]; ok {
		return sym
	}
	sym := &symbol{name: string(s)}
	p.intern[sym.name] = sym
	return sym
}

// name returns s as a string, sharing one copy for names that repeat.
func (p *parser) name(s []byte) string {
	return p.symbol(s).name
}

// known returns s as a string without allocating when it is one of the
// format's words.
func (p *parser) known(s []byte) string {
	switch string(s) {
	case "invoke":
		return "invoke"
	case "ok":
		return "ok"
	case "fail":
		return "fail"
	case "info":
		return "info"
	case Acquire:
		return Acquire
	case Verify:
		return Verify
	case Release:
		return Release
	case Create:
		return Create
	case Change:
		return Change
	case Destroy:
		return Destroy
	case Count:
		return Count
	case Wait:
		return Wait
	case Semaphore:
		return Semaphore
	case Mutex:
		return Mutex
	case Lease:
		return Lease
	case Refresh:
		return Refresh
	}
	return p.name(s)
}

// string reads a JSON string for field.
func (p *parser) string(field string) ([]byte, bool) {
	if p.peek() != '"' {
		return nil, p.fail("%s: want a string, got %s", field, p.describe())
	}
	return p.str()
}

// integer reads a JSON number that must be an integer in [min, max].
func (p *parser) integer(field string, min, max int64) (int64, bool) {
	if c := p.peek(); c != '-' && (c < '0' || c > '9') {
		return 0, p.fail("%s: want an integer, got %s", field, p.describe())
	}
	raw, ok := p.number()
	if !ok {
		return 0, false
	}
	n, integral, inRange := parseInt(raw)
	switch {
	case !integral:
		return 0, p.fail("%s: want an integer, got %s", field, raw)
	case !inRange || n < min || n > max:
		return 0, p.fail("%s: want an integer, got %s (out of range)", field, raw)
	}
	return n, true
}

// parseInt converts a JSON number to an int64, saying whether it is written
// as an integer (no fraction, no exponent) and whether it fits.
func parseInt(raw []byte) (n int64, integral, inRange bool) {
	neg := raw[0] == '-'
	if neg {
		raw = raw[1:]
	}
	limit := uint64(math.MaxInt64)
	if neg {
		limit++
	}
	var u uint64
	inRange = true
	for _, c := range raw {
		if c < '0' || c > '9' {
			return 0, false, false
		}
		d := uint64(c - '0')
		if u > (limit-d)/10 {
			inRange = false
			continue // keep looking for a fraction or an exponent
		}
		u = u*10 + d
	}
	if !inRange {
		return 0, true, false
	}
	if neg {
		return int64(-u), true, true // -(1<<63) wraps to itself, as wanted
	}
	return int64(u), true, true
}

// number reads a JSON number and returns its text.
func (p *parser) number() ([]byte, bool) {
	start := p.i
	if p.peek() == '-' {
		p.i++
	}
	switch c := p.peek(); {
	case c == '0':
		p.i++
	case c >= '1' && c <= '9':
		p.digits()
	default:
		return nil, p.unexpected("a digit")
	}
	if p.peek() == '.' {
		p.i++
		if c := p.peek(); c < '0' || c > '9' {
			return nil, p.unexpected("a digit after the decimal point")
		}
		p.digits()
	}
	if c := p.peek(); c == 'e' || c == 'E' {
		p.i++
		if c := p.peek(); c == '+' || c == '-' {
			p.i++
		}
		if c := p.peek(); c < '0' || c > '9' {
			return nil, p.unexpected("a digit in the exponent")
		}
		p.digits()
	}
	return p.b[start:p.i], true
}

func (p *parser) digits() {
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		p.i++
	}
}

// literal consumes word (true, false or null) if it is next.
func (p *parser) literal(word string) bool {
	if bytes.HasPrefix(p.b[p.i:], []byte(word)) {
		p.i += len(word)
		return true
	}
	return false
}

// describe says what the JSON value at the current position is, for a
// message about a value of the wrong type. It may consume the value; the
// caller is about to fail anyway.
func (p *parser) describe() string {
	switch c := p.peek(); {
	case c == '"':
		start := p.i
		s, ok := p.str()
		if !ok {
			p.i = start
			return "an unterminated or malformed string"
		}
		return "the string " + quote(s)
	case c == '{':
		return "an object"
	case c == '[':
		return "an array"
	case c == 't' && p.literal("true"):
		return "true"
	case c == 'f' && p.literal("false"):
		return "false"
	case c == 'n' && p.literal("null"):
		return "null"
	case c == '-' || c >= '0' && c <= '9':
		start := p.i
		raw, ok := p.number()
		if !ok {
			p.i = start
			return "a malformed number"
		}
		return string(raw)
	case p.i >= len(p.b):
		return "the end of the line"
	default:
		return "invalid JSON starting with " + quoteByte(c)
	}
}

// str reads a JSON string, the current byte being its opening quote. The
// result aliases the line or the parser's scratch buffer: it is only valid
// until the next call.
func (p *parser) str() ([]byte, bool) {
	p.i++
	start := p.i
	for p.i < len(p.b) && plain[p.b[p.i]] {
		p.i++
	}
	switch {
	case p.i == len(p.b):
		return nil, p.syntax("unterminated string")
	case p.b[p.i] == '"':
		p.i++
		return p.b[start : p.i-1], true
	case p.b[p.i] == '\\':
		return p.strEscaped(start)
	default:
		return nil, p.syntax("control character %#02x in a string (escape it)", p.b[p.i])
	}
}

// plain tells the bytes that stand for themselves in a JSON string.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// strEscaped finishes reading a string that has escapes, decoding them as
// encoding/json does (a lone surrogate becomes U+FFFD).
func (p *parser) strEscaped(start int) ([]byte, bool) {
	buf := append(p.scratch[:0], p.b[start:p.i]...)
	defer func() { p.scratch = buf[:0] }()
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			p.i++
			return buf, true
		case c < 0x20:
			return nil, p.syntax("control character %#02x in a string (escape it)", c)
		case c != '\\':
			buf = append(buf, c)
			p.i++
			continue
		}
		p.i++ // the backslash
		if p.i >= len(p.b) {
			break
		}
		switch c := p.b[p.i]; c {
		case '"', '\\', '/':
			buf = append(buf, c)
		case 'b':
			buf = append(buf, '\b')
		case 'f':
			buf = append(buf, '\f')
		case 'n':
			buf = append(buf, '\n')
		case 'r':
			buf = append(buf, '\r')
		case 't':
			buf = append(buf, '\t')
		case 'u':
			r, ok := hex4(p.b[p.i+1:])
			if !ok {
				p.i--
				return nil, p.syntax(`invalid \u escape (want four hexadecimal digits)`)
			}
			p.i += 4
			if utf16.IsSurrogate(r) {
				r2, ok := rune(-1), false
				if rest := p.b[p.i+1:]; len(rest) >= 6 && rest[0] == '\\' && rest[1] == 'u' {
					r2, ok = hex4(rest[2:])
				}
				if d := utf16.DecodeRune(r, r2); ok && d != unicode.ReplacementChar {
					r = d
					p.i += 6
				} else {
					r = unicode.ReplacementChar
				}
			}
			buf = utf8.AppendRune(buf, r)
		default:
			p.i--
			return nil, p.syntax("invalid escape in a string (want one of \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX)")
		}
		p.i++
	}
	return nil, p.syntax("unterminated string")
}

// hex4 decodes the four hexadecimal digits at the start of b.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}
