package leaseprotocol

import (
	"errors"
	"fmt"
	"time"

	"github.com/lockprover/lockprover/adapters/process"
)

// CheckStart is validate-impl's first check of a process: it starts
// client name of session s on l, sends it init, and checks that it
// answers init_ok, saying what to fix when it does not. servers names
// what init tells the process to connect to ("the redis-servers") and
// field the init field that says where ("\"addrs\""), for the message of
// an error without definite. It returns the process, or nil if it did
// not start (or v's context is done): one that failed is killed.
func (f Side[S]) CheckStart(v *process.Checker, l *process.Launcher, name string, s S, servers, field string) *Conn {
	if v.Ctx.Err() != nil {
		return nil
	}
	c, err := f.Handshake(v.Ctx, l, name, s)
	var pe *ProcessError
	switch {
	case err == nil, c == nil:
	case errors.As(err, &pe) && pe.Definite:
		err = fmt.Errorf("%s refused init with a definite error (%v): that says it can never serve this session; answer init_ok", name, pe)
	case errors.As(err, &pe):
		err = fmt.Errorf("%s answered init with an error without \"definite\" (%v), as for a server out of reach; but %s answer lockprover: connect to init's %s, and answer init_ok", name, pe, servers, field)
	default:
		err = fmt.Errorf("%v\n      answer {\"id\":1,\"type\":\"init_ok\"} on stdout within %v of the init request, and write nothing else there", l.StartFailure(v.Ctx, c.Client, err), l.InitTimeoutOrDefault())
	}
	if !v.Check(name+" starts and answers init with init_ok", err) {
		if c != nil {
			c.Kill()
		}
		return nil
	}
	return c
}

// Describe says what an operation op answered, for a check's failure:
// acquire_ok with token, the reply err stands for (Reply), or the error.
func (t *Terms) Describe(op, token string, err error) string {
	switch reply, ok := t.Reply(op, err); {
	case err == nil && op == "acquire":
		return fmt.Sprintf("acquire_ok (token %q)", token)
	case ok:
		return reply
	}
	return "error: " + err.Error()
}

// CheckExpired is the check (name) that an operation op on a lease not
// held answered expired (err is its outcome).
func (t *Terms) CheckExpired(v *process.Checker, name, op string, err error) {
	v.Expect(name+" answers expired", nil, errors.Is(err, t.ErrExpired),
		fmt.Sprintf(`answered %s: want %s_fail {"reason":"expired"} for a lease that is not held`, t.Describe(op, "", err), op))
}

// CheckUnsupported is the check that c answers a request of a type no
// family has with a definite error, code unsupported: what lockprover
// relies on to tell what a process does not serve.
func CheckUnsupported(v *process.Checker, c *Conn) {
	_, err := c.Call(v.Ctx, c.Timeout(), process.Request{"type": "lp-no-such-request"}, "none")
	var pe *process.ErrorReply
	v.Expect("an unknown request type is a definite unsupported", nil, errors.As(err, &pe) && pe.Code == "unsupported" && pe.Definite,
		fmt.Sprintf(`answered %v: want {"type":"error","code":"unsupported","definite":true}`, err))
}

// Wait lets d pass for v's checks (a lease left to expire): false if v's
// context ended first, and the checks are cut short.
func Wait(v *process.Checker, d time.Duration) bool {
	select {
	case <-time.After(d):
		return true
	case <-v.Ctx.Done():
		return false
	}
}
