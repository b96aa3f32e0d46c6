package pgadvisoryprotocol

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	"github.com/lockprover/lockprover/adapters/process"
	"github.com/lockprover/lockprover/adapters/runners/leaserun/leaseprotocol"
	"github.com/lockprover/lockprover/adapters/runners/pgadvisoryrun"
	"github.com/lockprover/lockprover/adapters/servers/postgres"
	"github.com/lockprover/lockprover/adapters/servers/versions"
	"github.com/lockprover/lockprover/model/pgadvisory"
)

// validateTTL is the ttl of the checks' leases: long enough to be live
// through every check.
const validateTTL = 10 * time.Second

// Validate checks an implementation of the lock (docs/protocol.md,
// "PostgreSQL advisory locks") on a private PostgreSQL it starts, before
// a first prove: init, a grant with a token, held for a second client,
// refresh and release of a live lease, expired once released and for a
// token never granted, a new token for the next grant, a holder whose
// session the server ended (pg_terminate_backend) told so at its next
// refresh while another takes the lock, an unknown request, and ending.
// Each client goes through a proxy of its own. Each process gets
// initTimeout to answer init (0: the protocol's 10 s). It prints one line
// per check and reports whether every check passed; cut short when ctx
// ends. A machine without PostgreSQL is the error (the implementation is
// not started). Every process, proxy and the server are stopped at the
// end, pass, fail or cancel.
func Validate(ctx context.Context, command string, initTimeout time.Duration, out io.Writer) (bool, error) {
	v, err := versions.Lookup("postgresql", "")
	if err != nil {
		return false, err
	}
	return ValidateOn(ctx, command, initTimeout, v, nil, out)
}

// ValidateOn is Validate on a private PostgreSQL of version v
// (postgres.StartVersion: the machine's own, or one from a Debian
// release's root, made first if need be, which log hears of).
func ValidateOn(ctx context.Context, command string, initTimeout time.Duration, version versions.Version, log, out io.Writer) (bool, error) {
	if log == nil {
		log = io.Discard
	}
	server, stop, err := postgres.StartTempVersion(ctx, version, log)
	if err != nil {
		return false, err
	}
	defer stop()
	v := &validator{
		Checker: process.NewChecker(ctx, out),
		impl:    NewProcesses(command).Validating(initTimeout),
		server:  server,
		key:     int64(rand.Uint64() >> 1),
		run:     leaseprotocol.ValidateKey(),
		proxies: map[string]*postgres.Proxy{},
	}
	defer v.impl.Stop()
	defer func() {
		for _, p := range v.proxies {
			p.Close()
		}
	}()
	v.basics()
	return v.OK && ctx.Err() == nil, nil // a check cut short by the cancel passed nothing
}

type validator struct {
	process.Checker
	impl    *Processes
	server  *postgres.Server
	key     int64
	run     string
	proxies map[string]*postgres.Proxy
}

// start starts client name behind a proxy of its own and checks its
// handshake; nil if it did not start.
func (v *validator) start(name string) *Process {
	px, err := postgres.NewProxy(v.server.Addr())
	if err != nil {
		v.Check("a proxy for "+name, err)
		return nil
	}
	v.proxies[name] = px
	s := pgadvisoryrun.Session{URL: px.URL(), Key: v.key, TTL: validateTTL, Run: v.run}
	if c := side.CheckStart(&v.Checker, &v.impl.Launcher, name, s, "the PostgreSQL server", `"url"`); c != nil {
		return &Process{conn: c}
	}
	return nil
}

func describe(op, token string, err error) string { return side.Describe(op, token, err) }

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
	t1, ok := v.granted(c1, "c1's acquire of the free lock is granted")
	if !ok {
		return
	}
	t, err := c2.Acquire(v.Ctx)
	v.Expect("c2's acquire while c1 holds the lock is held", nil, errors.Is(err, pgadvisory.ErrFull),
		fmt.Sprintf(`answered %s: want acquire_fail {"reason":"held"} while another session holds the key`, describe("acquire", t, err)))
	err = c1.Refresh(v.Ctx, t1)
	v.Expect("c1's refresh of its lease is ok", nil, err == nil, fmt.Sprintf("answered %s: want refresh_ok for a lease held", describe("refresh", t1, err)))
	err = c1.Release(v.Ctx, t1)
	v.Expect("c1's release of its lease is ok", nil, err == nil, fmt.Sprintf("answered %s: want release_ok for a lease held", describe("release", t1, err)))
	v.expired("c1's second release", "release", func() error { return c1.Release(v.Ctx, t1) })
	v.expired("c1's refresh after its release", "refresh", func() error { return c1.Refresh(v.Ctx, t1) })
	never := fmt.Sprintf("lp-never-%d", rand.Uint64())
	v.expired("a refresh of a token never granted", "refresh", func() error { return c2.Refresh(v.Ctx, never) })
	v.expired("a release of a token never granted", "release", func() error { return c2.Release(v.Ctx, never) })
	t2, ok := v.granted(c2, "c2's acquire after the release is granted")
	if ok {
		v.Expect("c2's lease has a new token", nil, t2 != t1, fmt.Sprintf("c2 was granted token %q, c1's: each grant's token is its own", t2))
		err = c2.Release(v.Ctx, t2)
		v.Expect("c2's release is ok", err, err == nil, "")
	}
	v.terminated(c1, c2)
	leaseprotocol.CheckUnsupported(&v.Checker, c1.conn)
	v.Ends(c1.conn.Client)
	v.Ends(c2.conn.Client)
}

// granted checks an acquire that must be granted, with a token.
func (v *validator) granted(c *Process, name string) (string, bool) {
	t, err := c.Acquire(v.Ctx)
	v.Expect(name, nil, err == nil, fmt.Sprintf("answered %s: want acquire_ok with a token, the lock being free", describe("acquire", t, err)))
	return t, err == nil
}

// expired checks that an operation answers expired.
func (v *validator) expired(name, op string, f func() error) {
	side.CheckExpired(&v.Checker, name, op, f())
}

// terminated checks that a holder whose session the server ended learns
// it at its next refresh (expired, or an error: not refresh_ok), and
// that another client takes the lock meanwhile.
func (v *validator) terminated(c1, c2 *Process) {
	t, ok := v.granted(c1, "c1's acquire, once more, is granted")
	if !ok {
		return
	}
	pids, err := v.server.SessionsFrom(v.Ctx, v.proxies["c1"].UpstreamPorts())
	if err == nil && len(pids) == 0 {
		err = errors.New("c1 has no session through its proxy")
	}
	if err == nil {
		_, err = v.server.Terminate(v.Ctx, pids...)
	}
	if !v.Check("the server ends c1's sessions (pg_terminate_backend)", err) {
		return
	}
	t2, ok := v.granted(c2, "c2's acquire once c1's session ended is granted")
	err = c1.Refresh(v.Ctx, t)
	v.Expect("c1's refresh once the server ended its session is not ok", nil, err != nil,
		`answered refresh_ok: the lock went with c1's session, and c2 holds it now; answer refresh_fail {"reason":"expired"} (check that your session still holds the key)`)
	if ok {
		c2.Release(v.Ctx, t2)
	}
}
