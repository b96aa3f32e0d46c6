package consulsemprotocol

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/lockprover/lockprover/adapters/process"
	"github.com/lockprover/lockprover/adapters/runners/consulsemrun"
	"github.com/lockprover/lockprover/adapters/runners/leaserun/leaseprotocol"
	"github.com/lockprover/lockprover/adapters/servers/versions"
	"github.com/lockprover/lockprover/model/consulsem"
)

// The TTLs of the checks: one long enough to be live through every check
// that needs a live lease, and one short enough to wait out (the floor of
// both servers: Consul's session_ttl_min as lockprover starts it, etcd's
// minimum lease).
const (
	validateTTL = 10 * time.Second
	expiryTTL   = time.Second
	// expiryMargin is how long the expiry check waits past a session's
	// horizon (the backend's factor times the TTL, plus etcd's sweep): a
	// busy machine fires the server's timers late.
	expiryMargin = 700 * time.Millisecond
)

// Validate checks an implementation of Consul's semaphore (docs/protocol.md,
// "Consul's semaphore") on a private server of backend (Consul or etcd)
// it starts, before a first prove: init, a grant with a token, full for a
// second client at limit 1, mismatch for another limit, refresh, verify
// and release of a live lease, held false and expired once released,
// expired for a token never granted, fences that increase where given, a
// session left to expire gone after its horizon (no revival) and its slot
// free again, an unknown request, and ending. Each process gets
// initTimeout to answer init (0: the protocol's 10 s). It prints one line
// per check, with what to fix for each failure, and reports whether every
// check passed; cut short when ctx ends. A machine without the server is
// the error (the implementation is not started). Every process and the
// server are stopped at the end, pass, fail or cancel.
func Validate(ctx context.Context, command string, initTimeout time.Duration, backend string, out io.Writer) (bool, error) {
	return ValidateOn(ctx, command, initTimeout, backend, versions.Version{}, out)
}

// ValidateOn is Validate on a private server of backend of version v
// (adapters/servers/versions; the zero value is Validate's).
func ValidateOn(ctx context.Context, command string, initTimeout time.Duration, backend string, version versions.Version, out io.Writer) (bool, error) {
	addr, stop, err := consulsemrun.StartPrivate(ctx, backend, version)
	if err != nil {
		return false, err
	}
	defer stop()
	v := &validator{
		Checker: process.NewChecker(ctx, out),
		impl:    NewProcesses(command).Validating(initTimeout),
		prefix:  leaseprotocol.ValidateKey(),
		backend: backend,
		addr:    addr,
	}
	defer v.impl.Stop()
	v.basics()
	return v.OK && ctx.Err() == nil, nil // a check cut short by the cancel passed nothing
}

type validator struct {
	process.Checker
	impl                  *Processes
	prefix, backend, addr string
	// fences are the fences granted so far, in order (those given).
	fences []int64
}

// start starts client name and checks its handshake; nil if it did not
// start.
func (v *validator) start(name string) *Process {
	s := consulsemrun.Session{Prefix: v.prefix, Backend: v.backend, Addr: v.addr, Limit: 1, TTL: validateTTL, Run: v.prefix}
	if c := side.CheckStart(&v.Checker, &v.impl.Launcher, name, s, "the "+v.backend, `"addr"`); c != nil {
		return &Process{conn: c}
	}
	return nil
}

// describe says what an operation answered, for a failure's message.
func describe(op string, l consulsem.Lease, err error) string {
	return side.Describe(op, l.Token, err)
}

// basics are the checks, in order; each needs the ones before it.
func (v *validator) basics() {
	c1, c2 := v.start("c1"), v.start("c2")
	for _, c := range []*Process{c1, c2} {
		if c != nil {
			defer c.conn.Kill() // the checks may end early; Ends ends them otherwise
		}
	}
	if c1 == nil || c2 == nil {
		return
	}
	l1, ok := v.granted(c1, "c1's acquire of the free semaphore (limit 1) is granted", validateTTL)
	if !ok {
		return
	}
	l, err := c2.Acquire(v.Ctx, v.prefix, 1, validateTTL)
	v.Expect("c2's acquire while c1 holds the only slot is full", nil, errors.Is(err, consulsem.ErrFull),
		fmt.Sprintf(`answered %s: want acquire_fail {"reason":"full"} while limit holders are alive`, describe("acquire", l, err)))
	l, err = c2.Acquire(v.Ctx, v.prefix, 2, validateTTL)
	v.Expect("c2's acquire with limit 2, the lock key saying 1, is a definite mismatch", nil, errors.Is(err, consulsem.ErrMismatch),
		fmt.Sprintf(`answered %s: want {"type":"error","code":"mismatch","definite":true}: the first acquire's limit, in the lock key, is the semaphore's`, describe("acquire", l, err)))
	err = c1.Refresh(v.Ctx, v.prefix, l1.Token)
	v.Expect("c1's refresh of its lease is ok", nil, err == nil, fmt.Sprintf("answered %s: want refresh_ok for a lease held", describe("refresh", l1, err)))
	v.held("c1's verify of its lease", c1, l1.Token, true)
	err = c1.Release(v.Ctx, v.prefix, l1.Token)
	v.Expect("c1's release of its lease is ok", nil, err == nil, fmt.Sprintf("answered %s: want release_ok for a lease held", describe("release", l1, err)))
	v.held("c1's verify after its release", c1, l1.Token, false)
	v.expired("c1's second release", "release", func() error { return c1.Release(v.Ctx, v.prefix, l1.Token) })
	v.expired("c1's refresh after its release", "refresh", func() error { return c1.Refresh(v.Ctx, v.prefix, l1.Token) })
	never := v.neverGranted()
	v.expired("a refresh of a token never granted", "refresh", func() error { return c2.Refresh(v.Ctx, v.prefix, never) })
	v.expired("a release of a token never granted", "release", func() error { return c2.Release(v.Ctx, v.prefix, never) })
	l2, ok := v.granted(c2, "c2's acquire after the release is granted", validateTTL)
	if ok {
		v.Expect("c2's lease has a new token", nil, l2.Token != l1.Token, fmt.Sprintf("c2 was granted token %q, c1's: a token is the grant's own session", l2.Token))
		err = c2.Release(v.Ctx, v.prefix, l2.Token)
		v.Expect("c2's release is ok", err, err == nil, "")
	}
	v.expiry(c1, c2)
	leaseprotocol.CheckUnsupported(&v.Checker, c1.conn)
	v.Ends(c1.conn.Client)
	v.Ends(c2.conn.Client)
}

// neverGranted is a token of the backend's form that no session has: a
// random UUID (Consul), 16 random hex digits (etcd).
func (v *validator) neverGranted() string {
	var b [16]byte
	rand.Read(b[:])
	h := hex.EncodeToString(b[:])
	if v.backend == consulsemrun.Etcd {
		return "7" + h[1:16]
	}
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// granted checks an acquire (limit 1) that must be granted, with a token,
// and a fence above every earlier one, if it gives one.
func (v *validator) granted(c *Process, name string, ttl time.Duration) (consulsem.Lease, bool) {
	l, err := c.Acquire(v.Ctx, v.prefix, 1, ttl)
	v.Expect(name, nil, err == nil, fmt.Sprintf("answered %s: want acquire_ok with a token, a slot being free", describe("acquire", l, err)))
	if err != nil {
		return l, false
	}
	if l.Fence != consulsemrun.NoFence {
		if n := len(v.fences); n > 0 {
			v.Expect(name+": its fence is above the earlier grants'", nil, l.Fence > v.fences[n-1],
				fmt.Sprintf("fence %d is not greater than the earlier grant's %d: a fence increases, strictly, in the order grants took effect (the lock key's ModifyIndex, the grant's revision)", l.Fence, v.fences[n-1]))
		}
		v.fences = append(v.fences, l.Fence)
	}
	return l, true
}

// held checks a verify that must answer want.
func (v *validator) held(name string, c *Process, token string, want bool) {
	held, err := c.Verify(v.Ctx, v.prefix, token)
	fix := fmt.Sprintf(`answered {"held":%t}: want verify_ok {"held":%t}`, held, want)
	if !want {
		fix += ": the lease is not held once released or expired"
	}
	v.Expect(fmt.Sprintf("%s answers held %t", name, want), err, held == want, fix)
}

// expired checks that an operation answers expired.
func (v *validator) expired(name, op string, f func() error) {
	side.CheckExpired(&v.Checker, name, op, f())
}

// expiry checks that a session left to expire is gone after its horizon:
// verify says not held, a refresh does not revive it, and its slot is
// free again for another client.
func (v *validator) expiry(c1, c2 *Process) {
	l, ok := v.granted(c1, fmt.Sprintf("c1's acquire with a TTL of %v is granted", expiryTTL), expiryTTL)
	if !ok {
		return
	}
	horizon := time.Duration(consulsemrun.Expiry(v.backend)*float64(l.TTL)) + expiryMargin
	if !leaseprotocol.Wait(&v.Checker, horizon) {
		return
	}
	v.held(fmt.Sprintf("c1's verify %v after its grant, unrenewed,", horizon), c1, l.Token, false)
	v.expired(fmt.Sprintf("c1's refresh %v after its grant (no revival)", horizon), "refresh", func() error {
		return c1.Refresh(v.Ctx, v.prefix, l.Token)
	})
	l2, ok := v.granted(c2, "c2's acquire once c1's session expired is granted (its dead holder pruned)", validateTTL)
	if ok {
		c2.Release(v.Ctx, v.prefix, l2.Token)
	}
}
