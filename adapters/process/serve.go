package process

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"sync"
)

// A Server is the implementation side's transport, for a family's
// reference served over the protocol (serve-reference): it reads requests,
// one JSON object a line, and answers each with Handle's reply, the
// request's id added, flushed at once.
type Server struct {
	// Handle answers a request of type typ, req being all its fields (id
	// and type among them). A nil reply says the type is unknown: the
	// answer is a definite "unsupported" error.
	Handle func(typ string, req map[string]json.RawMessage) map[string]any
	// Lenient keeps the replies of amqp-locks' first server to lines that
	// are not requests: a blank line is answered too, with the JSON
	// decoder's error as for any line that is not a JSON object, and a
	// missing id or type is shown as nothing. Otherwise blank lines are
	// skipped, a line that is not a JSON object is "a request must be one
	// JSON object", and a missing id or type is "absent".
	Lenient bool
	// Out, if set, is where the replies go (w is then unused): a server
	// whose processes speak unasked (a priority lock's lost notice)
	// writes its notices through it too, from any goroutine.
	Out *Lines
}

// Lines writes a server's messages to stdout, one JSON object a line, each
// flushed before Write returns, one at a time: replies and notices from
// goroutines of their own never interleave, and a notice written is on its
// way before the server does what must follow it.
type Lines struct {
	mu  sync.Mutex
	out *bufio.Writer
}

// NewLines writes to w.
func NewLines(w io.Writer) *Lines { return &Lines{out: bufio.NewWriter(w)} }

// Write writes m as one line and flushes it.
func (l *Lines) Write(m map[string]any) error {
	line, err := json.Marshal(m)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.out.Write(append(line, '\n'))
	return l.out.Flush()
}

// Serve answers the requests read from r on w until r ends. A line that
// is not a request (not a JSON object, an id that is not an integer, a
// type that is not a string) is answered with a definite "bad request"
// error, id 0 when its id cannot be read.
func (s Server) Serve(r io.Reader, w io.Writer) error {
	out := s.Out
	if out == nil {
		out = NewLines(w)
	}
	in := bufio.NewScanner(r)
	in.Buffer(make([]byte, 64<<10), 1<<20)
	for in.Scan() {
		if len(in.Bytes()) == 0 && !s.Lenient {
			continue
		}
		id, reply := s.answer(in.Bytes())
		reply["id"] = id
		if err := out.Write(reply); err != nil {
			return err
		}
	}
	return in.Err()
}

// answer is the id and the reply to one line.
func (s Server) answer(line []byte) (int, map[string]any) {
	var req map[string]json.RawMessage
	err := json.Unmarshal(line, &req)
	switch {
	case err != nil && s.Lenient:
		return 0, Refuse("bad request", err.Error())
	case err != nil || (req == nil && !s.Lenient):
		return 0, Refuse("bad request", "a request must be one JSON object")
	}
	var id int
	var typ string
	if err := json.Unmarshal(req["id"], &id); err != nil || req["id"] == nil {
		return 0, Refuse("bad request", fmt.Sprintf("id must be an integer, got %s", s.show(req["id"])))
	}
	if err := json.Unmarshal(req["type"], &typ); err != nil || req["type"] == nil {
		return id, Refuse("bad request", fmt.Sprintf("type must be a string, got %s", s.show(req["type"])))
	}
	if reply := s.Handle(typ, req); reply != nil {
		return id, reply
	}
	return id, Refuse("unsupported", "no request type "+typ)
}

// show is a request's field for a message.
func (s Server) show(raw json.RawMessage) string {
	if raw == nil && !s.Lenient {
		return "absent"
	}
	return string(raw)
}

// Refuse is a definite error reply: the request certainly had no effect.
func Refuse(code, text string) map[string]any {
	return map[string]any{"type": "error", "code": code, "text": text, "definite": true}
}

// Fields decodes a request's fields strictly, for a Server's Handle: each
// field asked for must be present and of its type, and the first that is
// not is Bad (what the reply's "bad request" says).
type Fields struct {
	Req map[string]json.RawMessage
	Bad error
}

// Get decodes field name into v, unless a field before it was bad.
func (f *Fields) Get(name string, v any) {
	if f.Bad != nil {
		return
	}
	raw, ok := f.Req[name]
	if !ok || string(raw) == "null" {
		f.Bad = fmt.Errorf("field %q is missing", name)
		return
	}
	if err := json.Unmarshal(raw, v); err != nil {
		f.Bad = fmt.Errorf("field %q: %v", name, err)
	}
}

// Positive is an integer field, at least 1.
func (f *Fields) Positive(name string) int {
	var n int
	f.Get(name, &n)
	if f.Bad == nil && n < 1 {
		f.Bad = fmt.Errorf("field %q is %d: must be at least 1", name, n)
	}
	return n
}
