package leaseprotocol

import (
	"errors"
	"strings"
	"testing"

	"github.com/lockprover/lockprover/adapters/process"
)

var errNotGranted = errors.New("not granted")

// TestProcessErrorInItsFamilysTerms checks that an error reply becomes a
// *ProcessError that matches its family's NotGranted only for a definite
// acquire, and is hidden as its family's Terms say.
func TestProcessErrorInItsFamilysTerms(t *testing.T) {
	hide := &Terms{NotGranted: errNotGranted, Redact: func(s string) string { return strings.ReplaceAll(s, "secret", "xxxxx") }}
	plain := &Terms{NotGranted: errNotGranted}
	reply := &process.ErrorReply{Code: "database", Text: "dsn u:secret@tcp(h)/db", Definite: true}
	for _, c := range []struct {
		terms     *Terms
		op        string
		reply     error
		said, err string
		notGrant  bool
	}{
		{hide, "acquire", reply, "database: dsn u:secret@tcp(h)/db", "database: dsn u:xxxxx@tcp(h)/db", true},
		{plain, "acquire", reply, "database: dsn u:secret@tcp(h)/db", "database: dsn u:secret@tcp(h)/db", true},
		{plain, "refresh", reply, "database: dsn u:secret@tcp(h)/db", "database: dsn u:secret@tcp(h)/db", false},
		{plain, "acquire", &process.ErrorReply{Code: "redis"}, "redis", "redis", false},
	} {
		err := c.terms.Answered(c.op, c.reply)
		var pe *ProcessError
		if !errors.As(err, &pe) {
			t.Fatalf("%v answering %s: %T, want a *ProcessError", c.reply, c.op, err)
		}
		if pe.Said() != c.said || pe.Error() != c.err || errors.Is(err, errNotGranted) != c.notGrant {
			t.Errorf("%v answering %s: said %q, error %q, not granted %v; want %q, %q, %v", c.reply, c.op, pe.Said(), pe.Error(), errors.Is(err, errNotGranted), c.said, c.err, c.notGrant)
		}
	}
	other := errors.New("no reply")
	if err := plain.Answered("acquire", other); err != other {
		t.Errorf("an error that is no reply became %v", err)
	}
	refused := plain.Refused("acquire", "wrong key", "c1 serves key \"a\", not \"b\"")
	if !errors.Is(refused, errNotGranted) || refused.Error() != `wrong key: c1 serves key "a", not "b"` {
		t.Errorf("refused: %v, not granted %v", refused, errors.Is(refused, errNotGranted))
	}
}

// TestReplySaysTheFamilysReason checks the replies validate-impl's
// messages name for an operation's outcome.
func TestReplySaysTheFamilysReason(t *testing.T) {
	errHeld, errExpired := errors.New("held"), errors.New("expired")
	terms := &Terms{Busy: "held", ErrBusy: errHeld, ErrExpired: errExpired}
	for _, c := range []struct {
		op    string
		err   error
		reply string
		ok    bool
	}{
		{"release", nil, "release_ok", true},
		{"acquire", errHeld, `acquire_fail {"reason":"held"}`, true},
		{"refresh", errExpired, `refresh_fail {"reason":"expired"}`, true},
		{"acquire", errors.New("gone"), "", false},
	} {
		if reply, ok := terms.Reply(c.op, c.err); reply != c.reply || ok != c.ok {
			t.Errorf("%s answering %v: %q, %v; want %q, %v", c.op, c.err, reply, ok, c.reply, c.ok)
		}
	}
}
