package histories

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"olympos.io/encoding/edn"
)

// Imported says how a history read from Jepsen (EDN or JSON) maps back
// onto its file: the import adds events (a fault on every client) and
// leaves some out (failed acquires), so an event's index is not the op's
// :index.
type Imported struct {
	// Format is the file's format: FormatEDN or FormatJSON.
	Format string
	// Lines holds, for each event, the line of the op it comes from.
	Lines []int
	// Notes are what the import did that a reader of the verdicts should
	// know: operations left out, times put in the file's order, faults it
	// did not know, operations in flight at the end.
	Notes []string
}

// The formats of a Jepsen history, as Imported.Format names them.
const (
	FormatEDN  = "Jepsen EDN"
	FormatJSON = "Jepsen JSON"
)

// JepsenLock is the lock an imported history operates on when its ops carry
// no independent key.
const JepsenLock = "lock"

// ReadEDN reads a history that Jepsen wrote (history.edn) of a lock
// workload and returns it in this package's events, judged as a true mutex
// (kind [Mutex]) as Knossos's mutex model judges it. name is used in error
// messages.
//
// It reads one op map per line, as Jepsen writes them (an op may also span
// several lines), or a single vector of op maps. Of each op it reads :type
// (:invoke, :ok, :fail or :info), :f, :process, :time, :value and :error;
// other keys (:index, :node, ...) are ignored. :time is optional: Jepsen
// orders a history by its position in the file, and so does the import
// (times that are missing or run backwards are moved, and noted). Clients
// are integer
// processes, named "p<N>"; their :f is :acquire or :release, with a nil
// :value or a jepsen.independent tuple [key nil] naming the lock. Faults are
// ops of process :nemesis. How each is mapped is described in
// docs/histories.md:
//
//   - an :info on a client is an operation of unknown outcome: it may take
//     effect at any moment after its invoke, or never, and ends nothing
//     else (Jepsen goes on under a new process number, a new client);
//   - a failed :acquire is left out: in Jepsen a :fail says only that the
//     operation had no effect (knossos drops it too), while lockprover reads
//     a failed mutex acquire as "the mutex was held";
//   - every nemesis fault is taken to reach every client, as a partition of
//     each that starts when the fault is invoked and heals when it is over:
//     when a paired fault (:start and :stop, :start-X and :stop-X, :pause
//     and :resume, :partition and :heal) is stopped, or when a one-shot
//     fault (:kill, clock faults, ...) completes; an unknown fault is never
//     over, and is noted. Judged with model.Options.Jepsen, as check judges
//     an import, these faults excuse unknown outcomes but end no hold.
//
// The first problem is returned as an [*Error] naming the line.
func ReadEDN(r io.Reader, name string) ([]Event, *Imported, error) {
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(r); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", name, err)
	}
	return parseEDN(buf.Bytes(), name)
}

// ReadAnyFile reads the history in the file at path in whichever format it
// is: Jepsen's EDN if its name ends in .edn or, whatever its name, if it
// starts like EDN (a ';' comment, a '#' tag, a '(' list, or a '[' vector or
// '{' map whose first key is a keyword); Jepsen's ops in JSON if it is one
// JSON array, or JSON lines whose first client names its process by a
// number, as Jepsen does; else lockprover's JSON lines, as [ReadFile]. The
// Imported is nil for lockprover's JSON lines.
func ReadAnyFile(path string) ([]Event, *Imported, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	switch {
	case strings.EqualFold(filepath.Ext(path), ".edn") || LooksLikeEDN(data):
		return parseEDN(data, path)
	case looksLikeJepsenJSON(data):
		return parseJepsenJSON(data, path)
	}
	events, err := parse(data, path)
	return events, nil, err
}

// LooksLikeEDN reports whether data starts like EDN rather than JSON lines.
func LooksLikeEDN(data []byte) bool {
	data = bytes.TrimLeft(data, " \t\r\n,")
	if len(data) == 0 {
		return false
	}
	switch data[0] {
	case ';', '#', '(':
		return true
	case '[':
		data = bytes.TrimLeft(data[1:], " \t\r\n,")
		if len(data) == 0 || data[0] != '{' {
			return len(data) > 0 && (data[0] == '#' || data[0] == ']')
		}
	}
	if data[0] != '{' {
		return false
	}
	data = bytes.TrimLeft(data[1:], " \t\r\n,")
	return len(data) > 0 && data[0] == ':'
}

// A form is one top-level EDN value's text and the line it starts on.
type form struct {
	text []byte
	line int
}

// splitForms cuts data, whose first byte is on line first, into its
// top-level forms, tracking lines; it does not decode them. It returns the
// line and message of the first structural problem (an unclosed or stray
// bracket, an unterminated string).
func splitForms(data []byte, first int) ([]form, int, string) {
	s := splitter{data: data, line: first, start: -1}
	var stack []bracket // the brackets open, innermost last
	closers := map[byte]byte{'(': ')', '[': ']', '{': '}'}
	for i := 0; i < len(data); i++ {
		c := data[i]
		switch {
		case c == '\n':
			s.end(i, stack)
			s.line++
		case c == ' ' || c == '\t' || c == '\r' || c == ',' || c == '\f':
			s.end(i, stack)
		case c == ';':
			s.end(i, stack)
			i = commentEnd(data, i)
		case c == '"':
			s.begin(i)
			from := s.line
			if i = s.stringEnd(i); i >= len(data) {
				return nil, from, "invalid EDN: unterminated string"
			}
			s.end(i+1, stack)
		case c == '\\': // a character literal: \a, \newline, \u0041, \(
			s.begin(i)
			i = atomEnd(data, i+1)
			s.end(i+1, stack)
		case c == '(' || c == '[' || c == '{':
			// A '#' before it (a set, or a tag such as #jepsen.history.Op)
			// belongs to the same form, begun there.
			s.begin(i)
			stack = append(stack, bracket{c, s.line})
		case c == ')' || c == ']' || c == '}':
			if msg := closeError(stack, c, closers); msg != "" {
				return nil, s.line, msg
			}
			stack = stack[:len(stack)-1]
			s.end(i+1, stack)
		case c == '#':
			// A tag, a set or a discard: part of the form that follows.
			s.begin(i)
			i = tagEnd(data, i)
		default: // a symbol, keyword, number...
			s.begin(i)
			i = atomEnd(data, i)
			s.end(i+1, stack)
		}
	}
	if len(stack) > 0 {
		top := stack[len(stack)-1]
		return nil, top.line, fmt.Sprintf("invalid EDN: %q opened here is never closed", top.c)
	}
	s.end(len(data), stack)
	return s.forms, 0, ""
}

// A splitter is where splitForms is in its text: the forms cut so far and
// the form being read. The brackets open are kept apart, in splitForms,
// where the compiler can keep them off the heap.
type splitter struct {
	data      []byte
	forms     []form
	line      int // the line of the byte being read
	start     int // where the form being read starts; -1 for none
	startLine int // the line it starts on
}

// A bracket is an open bracket and the line it was opened on, which a
// message about it names.
type bracket struct {
	c    byte
	line int
}

// begin starts a form at i unless one is being read already, as when a
// tag or a '#' begins the form of the bracket that follows.
func (s *splitter) begin(i int) {
	if s.start < 0 {
		s.start, s.startLine = i, s.line
	}
}

// end ends the form being read just before i, if it is a top-level one
// (no bracket is open); inside brackets, the form goes on.
func (s *splitter) end(i int, open []bracket) {
	if s.start >= 0 && len(open) == 0 {
		s.forms = append(s.forms, form{s.data[s.start:i], s.startLine})
		s.start = -1
	}
}

// stringEnd returns the position of the quote that closes the string
// opened at i (len(data) or more if none does), counting the lines it
// spans, escaped newlines included.
func (s *splitter) stringEnd(i int) int {
	data := s.data
	i++
	for ; i < len(data) && data[i] != '"'; i++ {
		switch data[i] {
		case '\\':
			i++
			if i < len(data) && data[i] == '\n' {
				s.line++
			}
		case '\n':
			s.line++
		}
	}
	return i
}

// closeError says why the bracket c cannot close the innermost of the
// brackets open: none is, or it is of another kind (closers gives each
// opening bracket its closing one); "" if c closes it.
func closeError(open []bracket, c byte, closers map[byte]byte) string {
	if len(open) == 0 {
		return fmt.Sprintf("invalid EDN: unexpected %q with nothing open", c)
	}
	top := open[len(open)-1]
	if closers[top.c] != c {
		return fmt.Sprintf("invalid EDN: %q closes the %q opened at line %d", c, top.c, top.line)
	}
	return ""
}

// commentEnd returns the position of the last byte of the comment that
// starts at i: the byte before the newline that ends it, or the last of
// data.
func commentEnd(data []byte, i int) int {
	for i+1 < len(data) && data[i+1] != '\n' {
		i++
	}
	return i
}

// atomEnd returns the position of the last byte of the symbol, keyword or
// number whose byte at i is part of it: the one before the next delimiter.
func atomEnd(data []byte, i int) int {
	for i+1 < len(data) && !isDelim(data[i+1]) {
		i++
	}
	return i
}

// tagEnd returns the position of the last byte of the tag, set or discard
// mark ('#' and what follows up to a delimiter or bracket) at i, and of
// the blanks after it: they belong to the form that follows, which is
// read next.
func tagEnd(data []byte, i int) int {
	for i+1 < len(data) && !isDelim(data[i+1]) && data[i+1] != '{' && data[i+1] != '(' && data[i+1] != '[' {
		i++
	}
	for i+1 < len(data) && (data[i+1] == ' ' || data[i+1] == '\t' || data[i+1] == ',') {
		i++
	}
	return i
}

// isDelim reports whether c ends a symbol, keyword or number.
func isDelim(c byte) bool {
	switch c {
	case ' ', '\t', '\r', '\n', '\f', ',', '(', ')', '[', ']', '{', '}', '"', ';':
		return true
	}
	return false
}

// jop is one Jepsen op, decoded.
type jop struct {
	line    int
	typ     Type
	f       string
	nemesis bool
	proc    int64 // a client's number
	time    int64
	hasTime bool
	lock    string
	err     string
}

// parseEDN reads a Jepsen history in EDN and converts it.
func parseEDN(data []byte, name string) ([]Event, *Imported, error) {
	fail := func(line int, format string, args ...any) ([]Event, *Imported, error) {
		return nil, nil, &Error{File: name, Line: line, Msg: fmt.Sprintf(format, args...)}
	}
	forms, line, msg := splitForms(data, 1)
	if msg != "" {
		return fail(line, "%s", msg)
	}
	if len(forms) == 1 && len(forms[0].text) > 0 && (forms[0].text[0] == '[' || forms[0].text[0] == '(') {
		// One vector (or list) of ops.
		f := forms[0]
		inner := f.text[1 : len(f.text)-1]
		if forms, line, msg = splitForms(inner, f.line); msg != "" {
			return fail(line, "%s", msg)
		}
	}
	ops := make([]jop, 0, len(forms))
	for _, f := range forms {
		m, msg := opMap(f)
		if msg != "" {
			return fail(f.line, "%s", msg)
		}
		o, msg := decodeOp(m, f.line)
		if msg != "" {
			return fail(f.line, "%s", msg)
		}
		ops = append(ops, o)
	}
	return convert(ops, FormatEDN, name)
}

// convert turns decoded Jepsen ops, in file order, into events.
func convert(ops []jop, format, name string) ([]Event, *Imported, error) {
	fail := func(line int, format string, args ...any) ([]Event, *Imported, error) {
		return nil, nil, &Error{File: name, Line: line, Msg: fmt.Sprintf(format, args...)}
	}
	clients := map[int64]bool{}
	for _, o := range ops {
		if !o.nemesis {
			clients[o.proc] = true
		}
	}
	c := converter{imp: &Imported{Format: format}}
	c.imp.Notes = fileOrder(ops)
	for p := range clients {
		c.clients = append(c.clients, clientName(p))
	}
	sort.Slice(c.clients, func(i, j int) bool { return natLess(c.clients[i], c.clients[j]) })
	for i := range ops {
		if msg := c.add(&ops[i]); msg != "" {
			return fail(ops[i].line, "%s", msg)
		}
	}
	if len(c.pending) > 0 {
		first := 0
		for _, i := range c.pending {
			if l := c.lines[i]; first == 0 || l < first {
				first = l
			}
		}
		c.imp.Notes = append(c.imp.Notes, fmt.Sprintf("%d %s still in flight when the history ends (first at line %d): a Jepsen history does not record a clean end, so %s unknown, and no liveness claim", len(c.pending), plural(len(c.pending), "operation is", "operations are"), first, plural(len(c.pending), "its outcome is", "their outcomes are")))
	}
	events, lines := c.result()
	c.imp.Lines = lines
	if c.dropped > 0 {
		ops := "ops"
		if c.dropped == 1 {
			ops = "op"
		}
		c.imp.Notes = append(c.imp.Notes, fmt.Sprintf("%d failed :acquire %s left out (first at line %d): a Jepsen :fail says only that the acquire had no effect, not that the mutex was held", c.dropped, ops, c.firstDrop))
	}
	if err := validateImported(events, lines, name); err != nil {
		return nil, nil, err
	}
	return events, c.imp, nil
}

func clientName(p int64) string { return "p" + strconv.FormatInt(p, 10) }

// natLess orders "p2" before "p10".
func natLess(a, b string) bool {
	if len(a) != len(b) {
		return len(a) < len(b)
	}
	return a < b
}

// decodeOp decodes one op map, found at line. A client op that is not a
// lock's is refused before anything else of it is looked at, so that a
// history of another workload is named for what it is.
func decodeOp(m map[any]any, line int) (o jop, msg string) {
	o.line = line
	if o.f, msg = opF(m); msg != "" {
		return o, msg
	}
	if msg = o.setProcess(m); msg != "" {
		return o, msg
	}
	if !o.nemesis && o.f != Acquire && o.f != Release {
		return o, fmt.Sprintf(":f: :%s is not a lock operation: this is not a lock history. lockprover checks histories of a lock (mutex) workload, whose clients do :acquire and :release, as Knossos's mutex model judges them; a workload of :read, :write, :cas and the like wants a checker of its own model", o.f)
	}
	if o.typ, msg = opType(m); msg != "" {
		return o, msg
	}
	if o.time, o.hasTime, msg = opTime(m); msg != "" {
		return o, msg
	}
	if e, ok := opGet(m, "error"); ok && e != nil {
		o.err = ednText(e)
	}
	if o.nemesis {
		return o, "" // a fault's value is the nemesis's business
	}
	o.lock, msg = opLock(m)
	return o, msg
}

// fileOrder puts the ops' times in the order of the file, as Jepsen and
// Knossos order a history (a time is only a label: Jepsen stamps an op
// before it journals it, so a time may be earlier than the one written
// before it): a missing time, or one earlier than the op before it, is
// moved to just after that op's. It returns notes that say what it moved.
func fileOrder(ops []jop) []string {
	missing, back, firstMissing, firstBack := 0, 0, 0, 0
	var most int64 // the most a time went back
	prev := int64(-1)
	for i := range ops {
		o := &ops[i]
		switch {
		case !o.hasTime:
			if missing == 0 {
				firstMissing = o.line
			}
			missing++
			o.time = prev + 1
		case o.time < prev:
			if back == 0 {
				firstBack = o.line
			}
			back++
			most = max(most, prev-o.time)
			o.time = prev + 1
		}
		prev = o.time
	}
	var notes []string
	switch {
	case missing == len(ops) && missing > 0:
		notes = append(notes, "no op has a :time (a Knossos-era history): the ops are ordered by their position in the file, and timed by it (1 ns apart)")
	case missing > 0:
		notes = append(notes, fmt.Sprintf("%d %s no :time (first at line %d): ordered by position in the file, each timed 1 ns after the op before it", missing, plural(missing, "op has", "ops have"), firstMissing))
	}
	if back > 0 {
		notes = append(notes, fmt.Sprintf("%d %s a :time earlier than the op written before %s (first at line %d; up to %s earlier): Jepsen orders a history by position in the file, and so does lockprover; each such time was moved to 1 ns after the op before it", back, plural(back, "op has", "ops have"), plural(back, "it", "them"), firstBack, time.Duration(most)))
	}
	return notes
}

// plural is one when n is 1, else many.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// opMap decodes the form f into the op's map, seeing through a record tag
// such as #jepsen.history.Op. It refuses a map with a key twice, which the
// decoder would let silently win.
func opMap(f form) (map[any]any, string) {
	var v any
	if err := unmarshalEDN(f.text, &v); err != nil {
		return nil, "invalid EDN: " + err.Error()
	}
	if t, ok := v.(edn.Tag); ok { // a record, such as #jepsen.history.Op{...}
		v = t.Value
	}
	m, ok := v.(map[any]any)
	if !ok {
		return nil, fmt.Sprintf("want an op map such as {:type :invoke, :f :acquire, :process 0, :time 0}, got %s", shorten(ednText(v)))
	}
	if open := bytes.IndexByte(f.text, '{'); open >= 0 && f.text[len(f.text)-1] == '}' {
		// The decoder lets a repeated key silently win: count the forms.
		if inner, _, _ := splitForms(f.text[open+1:len(f.text)-1], f.line); len(inner) != 2*len(m) {
			return nil, "invalid EDN: a key appears twice in the op map"
		}
	}
	return m, ""
}

// opGet returns the value of the keyword k in the op map m, and whether m
// has it.
func opGet(m map[any]any, k string) (any, bool) {
	x, ok := m[edn.Keyword(k)]
	return x, ok
}

// opType returns the op's :type, which must be :invoke, :ok, :fail or
// :info.
func opType(m map[any]any) (Type, string) {
	t, ok := opGet(m, "type")
	switch kw, _ := t.(edn.Keyword); {
	case !ok:
		return "", ":type: missing (want :invoke, :ok, :fail or :info)"
	case kw == "invoke" || kw == "ok" || kw == "fail" || kw == "info":
		return Type(kw), ""
	default:
		return "", fmt.Sprintf(":type: want :invoke, :ok, :fail or :info, got %s", shorten(ednText(t)))
	}
}

// opF returns the op's :f, which must be a keyword; which ones a client
// may do is checked once the process is known.
func opF(m map[any]any) (string, string) {
	fv, ok := opGet(m, "f")
	kw, isKw := fv.(edn.Keyword)
	switch {
	case !ok:
		return "", ":f: missing (want :acquire or :release, or a nemesis operation)"
	case !isKw || kw == "":
		return "", fmt.Sprintf(":f: want a keyword, got %s", shorten(ednText(fv)))
	}
	return string(kw), ""
}

// setProcess sets the op's process from its :process: a client's number
// (an integer >= 0) or :nemesis.
func (o *jop) setProcess(m map[any]any) string {
	p, ok := opGet(m, "process")
	switch p := p.(type) {
	case int64:
		if p < 0 {
			return fmt.Sprintf(":process: want an integer >= 0 (a client) or :nemesis, got %d", p)
		}
		o.proc = p
	case edn.Keyword:
		if p != "nemesis" {
			return fmt.Sprintf(":process: want an integer (a client) or :nemesis, got %s", ednText(p))
		}
		o.nemesis = true
	default:
		if !ok {
			return ":process: missing (want an integer, a client, or :nemesis)"
		}
		return fmt.Sprintf(":process: want an integer (a client) or :nemesis, got %s", shorten(ednText(p)))
	}
	return ""
}

// opTime returns the op's :time, in nanoseconds, which must be an integer
// >= 0 if present; has says whether it is (nil counts as absent).
func opTime(m map[any]any) (t int64, has bool, msg string) {
	tm, _ := opGet(m, "time")
	switch tm := tm.(type) {
	case nil:
		return 0, false, ""
	case int64:
		if tm < 0 {
			return 0, false, fmt.Sprintf(":time: want an integer >= 0 (nanoseconds), got %d", tm)
		}
		return tm, true, ""
	default:
		return 0, false, fmt.Sprintf(":time: want an integer (nanoseconds), got %s", shorten(ednText(tm)))
	}
}

// opLock returns the lock a client's op is on, from its :value: nil for
// JepsenLock, or a jepsen.independent tuple [key nil] whose key names the
// lock (a string as it is, any other key as its EDN text, less a keyword's
// colon).
func opLock(m map[any]any) (string, string) {
	lock := JepsenLock
	switch val, _ := opGet(m, "value"); val := val.(type) {
	case nil:
	case []any: // a jepsen.independent tuple [key value]
		if len(val) != 2 || val[1] != nil {
			return lock, fmt.Sprintf(":value: want nil or an independent tuple [key nil], got %s", shorten(ednText(val)))
		}
		lock = strings.TrimPrefix(ednText(val[0]), ":")
		if s, ok := val[0].(string); ok {
			lock = s
		}
		if lock == "" || val[0] == nil {
			return lock, fmt.Sprintf(":value: the key of an independent tuple names the lock, got %s", shorten(ednText(val[0])))
		}
	default:
		return lock, fmt.Sprintf(":value: want nil (a lock operation carries no value) or an independent tuple [key nil], got %s", shorten(ednText(val)))
	}
	return lock, ""
}

// unmarshalEDN decodes data, turning any panic of the decoder into an error.
func unmarshalEDN(data []byte, v any) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	return edn.Unmarshal(data, v)
}

// shorten cuts a long rendering for a message.
func shorten(s string) string {
	const max = 60
	if len(s) > max {
		cut := max
		for cut > 0 && s[cut]&0xC0 == 0x80 {
			cut--
		}
		return s[:cut] + "..."
	}
	return s
}

// ednText renders a decoded EDN value as EDN text, deterministically (maps
// and sets sorted).
func ednText(v any) string {
	var b strings.Builder
	writeEDN(&b, v)
	return b.String()
}

func writeEDN(b *strings.Builder, v any) {
	switch v := v.(type) {
	case nil:
		b.WriteString("nil")
	case bool:
		b.WriteString(strconv.FormatBool(v))
	case int64:
		b.WriteString(strconv.FormatInt(v, 10))
	case big.Int:
		b.WriteString(v.String() + "N")
	case *big.Int:
		b.WriteString(v.String() + "N")
	case float64:
		b.WriteString(strconv.FormatFloat(v, 'g', -1, 64))
	case string:
		b.WriteString(strconv.Quote(v))
	case rune:
		b.WriteString(`\` + string(v))
	case edn.Keyword:
		b.WriteString(":" + string(v))
	case edn.Symbol:
		b.WriteString(string(v))
	case time.Time:
		b.WriteString(`#inst "` + v.Format(time.RFC3339Nano) + `"`)
	case []byte:
		b.WriteString(`#base64 "` + base64.StdEncoding.EncodeToString(v) + `"`)
	case edn.Tag:
		b.WriteString("#" + v.Tagname + " ")
		writeEDN(b, v.Value)
	case []any:
		b.WriteByte('[')
		for i, x := range v {
			if i > 0 {
				b.WriteByte(' ')
			}
			writeEDN(b, x)
		}
		b.WriteByte(']')
	case map[any]any:
		entries := make([]string, 0, len(v))
		for k, x := range v {
			entries = append(entries, ednText(deref(k))+" "+ednText(x))
		}
		slices.Sort(entries)
		b.WriteString("{" + strings.Join(entries, ", ") + "}")
	case map[any]bool:
		entries := make([]string, 0, len(v))
		for k := range v {
			entries = append(entries, ednText(deref(k)))
		}
		slices.Sort(entries)
		b.WriteString("#{" + strings.Join(entries, " ") + "}")
	default:
		fmt.Fprintf(b, "%v", v)
	}
}

// deref undoes the decoder's boxing of unhashable set members.
func deref(k any) any {
	if p, ok := k.(*any); ok {
		return *p
	}
	return k
}

// converter turns Jepsen ops into events.
type converter struct {
	imp     *Imported
	clients []string // every client of the history, in order

	events []Event
	lines  []int
	drop   []bool

	pending map[string]int // a client's invoke in flight: its event
	nem     *jop           // the nemesis op in flight
	nemLine int

	faults    map[string]int // paired faults in force, counted by the f that stops them
	oneShot   int            // one-shot faults in force
	unknown   bool           // an unknown fault is in force for ever
	inForce   bool           // whether every client is partitioned now
	dropped   int
	firstDrop int
}

func (c *converter) emit(e Event, line int) int {
	e.Index = len(c.events)
	c.events = append(c.events, e)
	c.lines = append(c.lines, line)
	c.drop = append(c.drop, false)
	return e.Index
}

// add converts one op.
func (c *converter) add(o *jop) string {
	if c.pending == nil {
		c.pending, c.faults = map[string]int{}, map[string]int{}
	}
	if o.nemesis {
		return c.nemesis(o)
	}
	name := clientName(o.proc)
	e := Event{Time: o.time, Process: name, Type: o.typ, F: o.f, Lock: o.lock, Kind: Mutex, Error: o.err}
	if o.typ == Invoke {
		c.pending[name] = c.emit(e, o.line)
		return ""
	}
	inv, ok := c.pending[name]
	delete(c.pending, name)
	if ok && o.typ == Fail && o.f == Acquire && c.events[inv].F == Acquire && c.events[inv].Lock == o.lock {
		c.drop[inv] = true
		if c.dropped == 0 {
			c.firstDrop = o.line
		}
		c.dropped++
		return ""
	}
	// An :info is an unknown outcome, and no more: Knossos lets it take
	// effect at any moment after its invoke, or never. Jepsen goes on under
	// a new process number, which is a new client here too.
	c.emit(e, o.line)
	return ""
}

// stops maps a paired fault's f to the f that stops it.
func stops(f string) (string, bool) {
	switch {
	case f == "start":
		return "stop", true
	case f == "partition":
		return "heal", true
	case f == "pause":
		return "resume", true
	case strings.HasPrefix(f, "start-"):
		return "stop-" + strings.TrimPrefix(f, "start-"), true
	}
	return "", false
}

// isStop reports whether f stops paired faults.
func isStop(f string) bool {
	return f == "stop" || f == "heal" || f == "resume" || strings.HasPrefix(f, "stop-")
}

// oneShots are the faults, other than paired ones, that are over once
// their op completes: kills and restarts of nodes, clock changes.
var oneShots = map[string]bool{
	"kill": true, "crash": true, "restart": true, "bump-clock": true, "reset-clock": true,
	"strobe-clock": true, "check-clock-offsets": true, "bump": true, "strobe": true, "reset": true,
}

// nemesis converts one op of the nemesis: Jepsen's nemesis invokes with
// :invoke or :info and completes with :info (or :ok, :fail).
func (c *converter) nemesis(o *jop) string {
	if c.nem == nil {
		if o.typ == Ok || o.typ == Fail {
			return fmt.Sprintf(":type: a nemesis :%s with no nemesis operation in flight (want an :invoke or :info first)", o.typ)
		}
		c.nem, c.nemLine = o, o.line
		if !isStop(o.f) {
			c.open(o) // the fault may strike from its invocation on
		}
		return ""
	}
	inv := c.nem
	if o.f != inv.f {
		return fmt.Sprintf(":f: this nemesis :%s completes :%s, but the nemesis operation invoked at line %d is :%s", o.typ, o.f, c.nemLine, inv.f)
	}
	c.nem = nil
	switch stop, paired := stops(o.f); {
	case isStop(o.f):
		if o.typ != Fail { // it stops every fault of the kind it stops
			delete(c.faults, o.f)
		}
	case paired:
		if o.typ == Fail { // not in place: in force only while it was tried
			if c.faults[stop]--; c.faults[stop] <= 0 {
				delete(c.faults, stop)
			}
		}
	case oneShots[o.f]:
		c.oneShot--
	}
	c.update(o)
	return ""
}

// open puts the fault o invokes in force.
func (c *converter) open(o *jop) {
	switch stop, paired := stops(o.f); {
	case paired:
		c.faults[stop]++
	case oneShots[o.f]:
		c.oneShot++
	default:
		if !c.unknown {
			c.imp.Notes = append(c.imp.Notes, fmt.Sprintf("nemesis :%s (line %d) is not a fault lockprover knows: it is taken to reach every client from then to the end of the history, which can excuse but never accuse", o.f, o.line))
		}
		c.unknown = true
	}
	c.update(o)
}

// update partitions every client when faults come into force, and heals
// them when none is left.
func (c *converter) update(o *jop) {
	now := c.unknown || c.oneShot > 0 || len(c.faults) > 0
	if now == c.inForce {
		return
	}
	c.inForce = now
	f := Partition
	if !now {
		f = Heal
	}
	for _, p := range c.clients {
		c.emit(Event{Time: o.time, Process: nemesis, Type: Invoke, F: f, Value: &Fault{Process: p}}, o.line)
		c.emit(Event{Time: o.time, Process: nemesis, Type: Info, F: f, Value: &Fault{Process: p}}, o.line)
	}
}

// result returns the events without those left out, renumbered, and the
// line of each.
func (c *converter) result() ([]Event, []int) {
	events := make([]Event, 0, len(c.events))
	lines := make([]int, 0, len(c.events))
	for i := range c.events {
		if c.drop[i] {
			continue
		}
		e := c.events[i]
		e.Index = len(events)
		events = append(events, e)
		lines = append(lines, c.lines[i])
	}
	return events, lines
}

// validateImported runs the reader's checks over converted events, naming
// the EDN line of a problem.
func validateImported(events []Event, lines []int, name string) error {
	v := newValidator()
	syms := map[string]*symbol{}
	sym := func(s string) *symbol {
		if s == "" {
			return nil
		}
		if x, ok := syms[s]; ok {
			return x
		}
		x := &symbol{name: s}
		syms[s] = x
		return x
	}
	for i := range events {
		e := &events[i]
		has := hasIndex | hasTime | hasProcess | hasType | hasF
		if e.Lock != "" {
			has |= hasLock
		}
		if e.Kind != "" {
			has |= hasKind
		}
		var vhas vfields
		if e.Value != nil {
			has |= hasValue
			if t := typeOf(e); t != nil {
				vhas = fieldsOf(&v.fw, t, e.Value)
			}
		}
		if msg := v.check(lines[i], e, has, vhas, sym(e.Process), sym(e.Lock)); msg != "" {
			return &Error{File: name, Line: lines[i], Msg: msg}
		}
	}
	return nil
}
