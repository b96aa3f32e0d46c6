package leaseprotocol

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/lockprover/lockprover/adapters/process"
)

// A Handler is the shape every lease family's reference server
// (serve-reference) answers requests in, as a process.Server's Handle: init
// first, then the family's operations.
type Handler struct {
	// Init answers init, with its fields.
	Init func(f *process.Fields) map[string]any
	// Ready says whether init succeeded: until then, every other request
	// is refused (definite).
	Ready func() bool
	// Op answers any other request of type typ, with its fields: nil for
	// a type the family does not serve (unsupported).
	Op func(typ string, f *process.Fields) map[string]any
}

// Handle answers one request of type typ (process.Server's Handle).
func (h Handler) Handle(typ string, req map[string]json.RawMessage) map[string]any {
	f := &process.Fields{Req: req}
	if typ == "init" {
		return h.Init(f)
	}
	if !h.Ready() {
		return process.Refuse("not initialised", "the first request must be init")
	}
	return h.Op(typ, f)
}

// Token is a request's "token", which must be a non-empty string: f.Bad
// says why, if it is not (unless f was bad already).
func Token(f *process.Fields) string {
	var token string
	f.Get("token", &token)
	if f.Bad == nil && token == "" {
		f.Bad = errors.New(`field "token" is empty`)
	}
	return token
}

// Failure is a reference server's error reply of unknown outcome (not
// definite): code names what failed (the family's server: "redis",
// "server").
func Failure(code string, err error) map[string]any {
	return map[string]any{"type": "error", "code": code, "text": err.Error()}
}

// A Logger tells a reference server's failed operations, a line each,
// named by its client (init's "client"), to Log (stderr, say; nil: told
// nowhere), hidden as Redact (if set) says.
type Logger struct {
	Client string
	Log    io.Writer
	Redact func(string) string
}

// Logf tells one failed operation, as fmt.Sprintf(format, args...).
func (l *Logger) Logf(format string, args ...any) {
	if l.Log == nil {
		return
	}
	line := fmt.Sprintf(format, args...)
	if l.Redact != nil {
		line = l.Redact(line)
	}
	fmt.Fprintf(l.Log, "%s: %s\n", l.Client, line)
}
