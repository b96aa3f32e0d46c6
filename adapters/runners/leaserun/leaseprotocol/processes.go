package leaseprotocol

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"time"

	"github.com/lockprover/lockprover/adapters/process"
)

// Processes is a lease family's implementation under test that runs as
// processes: the Launcher's Command is started for each client of a run
// (of sessions S), shakes hands as the family says, and is spoken to as
// the family's client P. Make one with NewProcesses.
type Processes[S, P any] struct {
	process.Launcher
	side Side[S]
	open func(c *Conn, s S) P
}

// NewProcesses is the implementation that command starts, one process per
// client, speaking f's family's side of the protocol; open makes a process
// that shook hands for session s the family's client.
func NewProcesses[S, P any](f Side[S], command string, open func(c *Conn, s S) P) *Processes[S, P] {
	return &Processes[S, P]{Launcher: process.Launcher{Command: command}, side: f, open: open}
}

// Connect starts a process as client name (c1, c2, ..., probe1, ...) of
// session s, and shakes hands (init says s). The implementation failing
// to start (it exited, hung, wrote garbage or refused with a definite
// error before init_ok) is a *prover.ImplementationError; after two in a
// run, no more of its processes start. Any other error (a server out of
// reach, as the process said with an error without definite; ctx done)
// may pass if tried again.
func (i *Processes[S, P]) Connect(ctx context.Context, name string, s S) (P, error) {
	c, err := i.side.Connect(ctx, &i.Launcher, name, s)
	if err != nil {
		var none P
		return none, err
	}
	return i.open(c, s), nil
}

// Open is the family's client of c, a process that shook hands for
// session s (CheckStart's, say).
func (i *Processes[S, P]) Open(c *Conn, s S) P { return i.open(c, s) }

// Validating is i as validate-impl runs it: every request answered within
// 10 s, init within initTimeout (0: the protocol's 10 s).
func (i *Processes[S, P]) Validating(initTimeout time.Duration) *Processes[S, P] {
	i.Timeout, i.InitTimeout = 10*time.Second, initTimeout
	return i
}

// ValidateKey is a key (or prefix) of validate-impl's own: lp-validate-
// and 8 random hex digits, so that its checks meet no other run's keys on
// the servers.
func ValidateKey() string {
	var b [4]byte
	rand.Read(b[:])
	return "lp-validate-" + hex.EncodeToString(b[:])
}
