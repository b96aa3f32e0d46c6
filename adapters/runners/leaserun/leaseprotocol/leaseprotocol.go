// Package leaseprotocol is what the lease families' sides of the process
// protocol (docs/protocol.md: "Redlock", "Lease locks: the database
// semaphore", "Consul's semaphore") have in common, as the harness speaks
// them: the start of a client and its handshake (Family), an
// implementation's processes, one per client (Processes), an error a
// process answered (ProcessError), and a client of one key (Conn) that
// makes the protocol's acquire, refresh and release replies errors in its
// family's terms; and, as a reference server speaks them, the shape of
// its answers (Handler, Token, Failure, Logger). Each family says those
// terms (Terms: its sentinel errors, what its messages must hide) and its
// init, and keeps the rest its own: the grant's fields beyond its token
// and fence, its reference's operations, validate-impl's checks. Written
// once here, the families cannot drift apart in what the same reply
// means.
//
// The processes themselves are launched, read, timed out, signalled and
// ended by the generic launcher (adapters/process), which knows no family;
// this package knows none either: the families import it.
package leaseprotocol

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/lockprover/lockprover/adapters/process"
)

// Terms are what one lease family's replies become: the same replies mean
// the same in every family, but each has errors (and secrets) of its own.
type Terms struct {
	// NotGranted is the family's sentinel for an acquire that certainly
	// took nothing: a definite error answering an acquire matches it
	// (errors.Is).
	NotGranted error
	// Busy is the reason of the family's acquire_fail (a lock held, a
	// semaphore full), and ErrBusy what it becomes.
	Busy    string
	ErrBusy error
	// ErrExpired is what refresh_fail and release_fail {reason: expired}
	// become.
	ErrExpired error
	// Redact, if set, hides what a process's error or crash may show that
	// must not be shown (a DSN's password, say); unset, nothing is hidden.
	Redact func(string) string
}

func (t *Terms) redact(s string) string {
	if t == nil || t.Redact == nil {
		return s
	}
	return t.Redact(s)
}

// A ProcessError is an error a process answered, or one the harness
// answers for it without asking (a request the process cannot serve).
// Definite, it certainly had no effect: for an acquire, errors.Is(err,
// NotGranted) holds for its family's NotGranted. Otherwise the outcome is
// unknown.
type ProcessError struct {
	Op, Code, Text string
	Definite       bool
	terms          *Terms
}

// Error is Said, hidden as the family's Terms say.
func (e *ProcessError) Error() string { return e.terms.redact(e.Said()) }

// Said is the error's code, and its text if it has one, as the process
// said them: nothing hidden, for a message hidden as a whole.
func (e *ProcessError) Said() string {
	if e.Text == "" {
		return e.Code
	}
	return e.Code + ": " + e.Text
}

// Is makes a definite acquire failure match its family's NotGranted.
func (e *ProcessError) Is(target error) bool {
	return e.Definite && e.Op == "acquire" && e.terms != nil && target == e.terms.NotGranted
}

// Refused is the definite error of an op the harness does not send,
// because the process could not serve it (code, text say why).
func (t *Terms) Refused(op, code, text string) error {
	return &ProcessError{Op: op, Code: code, Text: text, Definite: true, terms: t}
}

// Answered is an error reply to op as a *ProcessError; any other error as
// it is.
func (t *Terms) Answered(op string, err error) error {
	var e *process.ErrorReply
	if errors.As(err, &e) {
		return &ProcessError{Op: op, Code: e.Code, Text: e.Text, Definite: e.Definite, terms: t}
	}
	return err
}

// Reply is the reply an operation op's outcome err stands for, in
// validate-impl's messages: <op>_ok for none, acquire_fail {"reason":
// Busy} for ErrBusy, <op>_fail {"reason":"expired"} for ErrExpired; ok is
// false for any other error, which the family says in its own words.
func (t *Terms) Reply(op string, err error) (reply string, ok bool) {
	switch {
	case err == nil:
		return op + "_ok", true
	case errors.Is(err, t.ErrBusy):
		return `acquire_fail {"reason":"` + t.Busy + `"}`, true
	case errors.Is(err, t.ErrExpired):
		return op + `_fail {"reason":"expired"}`, true
	}
	return "", false
}

// A Side is one lease family's side of the handshake: its Terms, and
// the init its sessions (of type S) say.
type Side[S any] struct {
	*Terms
	// Init is the init request of client name for session s, with the
	// run s belongs to (process.Launcher counts failed starts by it) and
	// the key its process serves; an error if s cannot be said.
	Init func(name string, s S) (init process.Request, run, key string, err error)
}

// Connect starts client name of session s on l and shakes hands, as
// process.Launcher.Connect does: an error init's reply said is a
// *ProcessError.
func (f Side[S]) Connect(ctx context.Context, l *process.Launcher, name string, s S) (*Conn, error) {
	init, run, key, err := f.Init(name, s)
	if err != nil {
		return nil, err
	}
	c, err := l.Connect(ctx, run, name, init)
	if err != nil {
		return nil, f.Answered("init", err)
	}
	return &Conn{Client: c, terms: f.Terms, key: key}, nil
}

// Handshake starts client name of session s on l and sends it init, as
// process.Launcher.Handshake does, for validate-impl: with a process, the
// error is init's as the process answered it (a *ProcessError), or why it
// did not answer init_ok, and the process is left for the caller to kill;
// without one, nothing started.
func (f Side[S]) Handshake(ctx context.Context, l *process.Launcher, name string, s S) (*Conn, error) {
	init, _, key, err := f.Init(name, s)
	if err != nil {
		return nil, err
	}
	c, err := l.Handshake(ctx, name, init)
	if c == nil {
		return nil, err
	}
	return &Conn{Client: c, terms: f.Terms, key: key}, f.Answered("init", err)
}

// A Conn is one running process of a lease family's implementation: a
// client of one key, spoken to in its family's Terms. Requests go one at
// a time: its methods must not be called concurrently.
type Conn struct {
	*process.Client
	terms  *Terms
	key    string
	closed atomic.Bool // Close was called
}

// Key checks that key is the one the process serves: otherwise op is
// refused (a *ProcessError, definite) and must not be sent.
func (c *Conn) Key(op, key string) error {
	if key == c.key {
		return nil
	}
	return c.terms.Refused(op, "wrong key", fmt.Sprintf("%s serves key %q, not %q", c.Name(), c.key, key))
}

// Do is the client's call in the lease protocol's terms: an error reply to
// op becomes a *ProcessError (definite or not), and a process already gone
// says its name; anything else that goes wrong is an error of unknown
// outcome with the process given up on.
func (c *Conn) Do(ctx context.Context, op string, req process.Request, wants ...string) (process.Reply, error) {
	r, err := c.Call(ctx, c.Timeout(), req, wants...)
	var e *process.ErrorReply
	switch {
	case errors.As(err, &e):
		return process.Reply{}, c.terms.Answered(op, err)
	case errors.Is(err, process.ErrGone):
		return process.Reply{}, fmt.Errorf("%s: %w", c.Name(), err)
	}
	return r, err
}

// Acquire sends req, an acquire: the acquire_ok's fields, or the family's
// ErrBusy for acquire_fail {reason: Busy}.
func (c *Conn) Acquire(ctx context.Context, req process.Request) (map[string]json.RawMessage, error) {
	r, err := c.Do(ctx, "acquire", req, "acquire_ok", "acquire_fail")
	if err != nil {
		return nil, err
	}
	if r.Type == "acquire_fail" {
		if err := c.reason(r.Fields, r.Type, c.terms.Busy); err != nil {
			return nil, err
		}
		return nil, c.terms.ErrBusy
	}
	return r.Fields, nil
}

// Change sends req, a refresh or release (op): <op>_ok, or the family's
// ErrExpired for <op>_fail {reason: expired}.
func (c *Conn) Change(ctx context.Context, op string, req process.Request) (process.Reply, error) {
	r, err := c.Do(ctx, op, req, op+"_ok", op+"_fail")
	if err != nil {
		return r, err
	}
	if r.Type == op+"_fail" {
		if err := c.reason(r.Fields, r.Type, "expired"); err != nil {
			return r, err
		}
		return r, c.terms.ErrExpired
	}
	return r, nil
}

// reason checks that a _fail reply's reason is want.
func (c *Conn) reason(f map[string]json.RawMessage, typ, want string) error {
	var reason string
	if err := json.Unmarshal(f["reason"], &reason); err != nil || reason != want {
		return c.GiveUp(fmt.Sprintf("sent %s whose \"reason\" is %s: want %q (answer other failures with an error)", typ, OrAbsent(f["reason"]), want))
	}
	return nil
}

// OrAbsent is a reply's field as it came, for a message: "absent" if it
// did not.
func OrAbsent(raw json.RawMessage) string {
	if raw == nil {
		return "absent"
	}
	return string(raw)
}

// Fence is an acquire_ok's optional "fence" (ok, if it has one): an
// integer >= 0, or the process is given up on.
func (c *Conn) Fence(f map[string]json.RawMessage) (fence int64, ok bool, err error) {
	raw, ok := f["fence"]
	if !ok || string(raw) == "null" {
		return 0, false, nil
	}
	if err := json.Unmarshal(raw, &fence); err != nil || fence < 0 {
		return 0, false, c.GiveUp(fmt.Sprintf("sent an acquire_ok whose \"fence\" is not an integer >= 0: %s", raw))
	}
	return fence, true, nil
}

// Crashed says why the process is gone, with its last request and the end
// of its stderr, if it crashed or was given up on (not if the harness
// killed it, nor if it exited with status 0 after Close), hidden as the
// family's Terms say; "" otherwise.
func (c *Conn) Crashed() string {
	if c.closed.Load() && c.ExitedCleanly() {
		return ""
	}
	return c.terms.redact(c.Client.Crashed())
}

// Close ends the process as the protocol says: stdin closes, then SIGTERM
// after 5 s, then SIGKILL after 5 more.
func (c *Conn) Close() error {
	c.closed.Store(true)
	return c.Client.Close()
}
