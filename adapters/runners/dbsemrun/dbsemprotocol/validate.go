package dbsemprotocol

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/lockprover/lockprover/adapters/runners/dbsemrun"

	"github.com/go-sql-driver/mysql"

	"github.com/lockprover/lockprover/adapters/process"
	"github.com/lockprover/lockprover/model/dbsem"
)

// Validate checks a lease-lock implementation's handling of the
// protocol (docs/protocol.md, "Lease locks: the database semaphore")
// against the database dsn names, before a first prove: init, acquire,
// full, refresh, release, expired, expiry by the ttl, the agreed max,
// fences (with o.Fencing), errors, a database out of reach at init, and
// ending. Its sessions have o's design and fencing. It prints one line
// per check, with what to fix for each failure, and reports whether every
// check passed; cut short when ctx ends (the checks left are not run).
//
// The database is tried first: one that cannot be used is the error (and
// the implementation is not started), not blamed on the implementation.
// Every process is killed and every table under the validation's own
// prefix dropped at the end, pass, fail or cancel.
func Validate(ctx context.Context, command, dsn string, o dbsemrun.Options, out io.Writer) (bool, error) {
	return ValidateInit(ctx, command, 0, dsn, o, out)
}

// ValidateInit is Validate giving each process initTimeout to answer
// init (0 for the protocol's 10 s).
func ValidateInit(ctx context.Context, command string, initTimeout time.Duration, dsn string, o dbsemrun.Options, out io.Writer) (bool, error) {
	pctx, cancel := context.WithTimeout(ctx, databaseWait)
	err := (dbsemrun.MariaDB{DSN: dsn}).Preflight(pctx)
	timedOut := pctx.Err() == context.DeadlineExceeded
	cancel()
	switch {
	case err != nil && timedOut && ctx.Err() == nil:
		return false, fmt.Errorf("%v: nothing answered within %v", err, databaseWait)
	case err != nil:
		return false, err
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return false, err
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Second
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return false, err
	}
	var b [4]byte
	rand.Read(b[:])
	tag := hex.EncodeToString(b[:])
	v := &leaseValidator{
		Checker: process.NewChecker(ctx, redactingOut{out}),
		impl:    &Processes{process.Launcher{Command: command, Timeout: 10 * time.Second, InitTimeout: initTimeout, Redact: redactDSN}},
		admin:   sql.OpenDB(conn),
		base:    dbsemrun.Session{DSN: dsn, Prefix: "lpv" + tag + "_", Design: o.Design, Fencing: o.Fencing},
		key:     "lp-validate-" + tag,
	}
	defer v.cleanup()
	if v.basics() {
		v.expiries()
		v.unreachable()
	}
	return v.OK && ctx.Err() == nil, nil // a check cut short by the cancel passed nothing
}

// redactingOut hides the passwords of DSNs and URLs written through it:
// the requests and stderr a failure shows carry the DSN.
type redactingOut struct{ w io.Writer }

func (r redactingOut) Write(p []byte) (int, error) {
	if _, err := io.WriteString(r.w, redactLease(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}

type leaseValidator struct {
	process.Checker
	impl  *Processes
	admin *sql.DB
	base  dbsemrun.Session // DSN, Prefix, Design, Fencing
	key   string
	procs []*Process
	// halted names the process whose loss stops the checks of the group
	// under way ("" while they go on).
	halted string
}

// databaseWait bounds the first connection to the database.
const databaseWait = 8 * time.Second

// The ttls of the checks: long enough to be live through every check that
// needs a live lease, and short enough to wait out.
const (
	validateTTL = 10 * time.Second
	expiryTTL   = time.Second
	// expiryTries bounds the expiry group's attempts: each one the
	// machine was too slow to judge is tried again with three times the
	// ttl (1s, 3s, 9s).
	expiryTries = 3
	// expiryMargin covers DATETIME(6)'s rounding and the time between
	// a grant's statement and its reply, when waiting out a lease.
	expiryMargin = 250 * time.Millisecond
)

// session is the session of key with limit max and lease time ttl.
func (v *leaseValidator) session(key string, max int, ttl time.Duration) dbsemrun.Session {
	s := v.base
	s.Key, s.Max, s.TTL = key, max, ttl
	return s
}

// start starts client name of s and checks its handshake; nil if it did
// not start.
func (v *leaseValidator) start(name string, s dbsemrun.Session) *Process {
	if v.Ctx.Err() != nil {
		return nil
	}
	c, err := v.impl.initialise(v.Ctx, name, s)
	if c != nil {
		v.procs = append(v.procs, c)
	}
	var le *ProcessError
	switch {
	case err == nil, c == nil:
	case errors.As(err, &le) && le.Definite:
		fix := "answer init_ok"
		var asked []string
		if s.Design != "" && s.Design != dbsem.MasterRow.String() {
			asked = append(asked, "design="+s.Design)
		}
		if s.Fencing {
			asked = append(asked, "fencing")
		}
		if len(asked) > 0 {
			fix = fmt.Sprintf("this session asked for %s (--options): validate and prove with the options you have", strings.Join(asked, ","))
		}
		err = fmt.Errorf("%s refused init with a definite error (%s): that says it can never serve this session (a lock kind, design or fencing it does not have); %s", name, le.Said(), fix)
	case errors.As(err, &le):
		err = fmt.Errorf("%s answered init with an error without \"definite\" (%s), as for a database out of reach; but the database at init's dsn answers lockprover: connect with init's \"dsn\" (or \"url\"), and answer init_ok", name, le.Said())
	default:
		err = fmt.Errorf("%v\n      answer {\"id\":1,\"type\":\"init_ok\"} on stdout within %v of the init request, and write nothing else there", v.impl.StartFailure(v.Ctx, c.conn.Client, err), v.impl.InitTimeoutOrDefault())
	}
	if !v.Check(fmt.Sprintf("%s starts and answers init with init_ok", name), err) {
		return nil
	}
	return c
}

// step runs check name unless the group has halted; afterwards, a process
// of cs that is gone (given up on for breaking the protocol, or exited)
// halts the group, whose remaining checks would only say so again.
func (v *leaseValidator) step(name string, f func() error, cs ...*Process) bool {
	if v.halted != "" || v.Ctx.Err() != nil {
		return false
	}
	passed := v.Check(name, f())
	for _, c := range cs {
		if c.Broken() {
			v.halted = c.Name()
			fmt.Fprintf(v.Out, "      (%s is gone: the rest of these checks need it, and are not run)\n", c.Name())
			break
		}
	}
	return passed
}

// group begins a group of checks.
func (v *leaseValidator) group() { v.halted = "" }

// describe says what operation op answered (l, err), for a failure's
// message.
func describe(op string, l dbsem.Lease, err error) string {
	var le *ProcessError
	switch reply, ok := side.Reply(op, err); {
	case err == nil && op == "acquire":
		return fmt.Sprintf("acquire_ok (token %q, fence %d)", l.Token, l.Fence)
	case ok:
		return reply
	case errors.As(err, &le) && le.Definite:
		return fmt.Sprintf("a definite error (%s)", le.Said())
	case errors.As(err, &le):
		return fmt.Sprintf("an error without \"definite\" (%s)", le.Said())
	}
	return err.Error()
}

// protocolError is an operation's error that is not an answer the
// protocol allows for it (a broken reply, no reply, a crash): it is the
// check's failure as it is.
func protocolError(err error) bool {
	var le *ProcessError
	return err != nil && !errors.Is(err, dbsem.ErrFull) && !errors.Is(err, dbsem.ErrExpired) && !errors.As(err, &le)
}

// granted is the check of an acquire that must be granted.
func granted(what string, l dbsem.Lease, err error) error {
	if err == nil || protocolError(err) {
		return err
	}
	return fmt.Errorf("%s must be granted (acquire_ok with a token), answered %s", what, describe("acquire", l, err))
}

// answered is the check of a refresh or release that must answer want
// (nil for _ok, dbsem.ErrExpired for _fail expired).
func answered(op string, err, want error, fix string) error {
	switch {
	case protocolError(err):
		return err
	case errors.Is(err, want):
		return nil
	case want == nil:
		return fmt.Errorf(`answered %s: want {"type":"%s_ok"}; %s`, describe(op, dbsem.Lease{}, err), op, fix)
	}
	return fmt.Errorf(`answered %s: want {"type":"%s_fail","reason":"expired"}; %s`, describe(op, dbsem.Lease{}, err), op, fix)
}

// fenced checks, with fencing, that fence came after last.
func (v *leaseValidator) fenced(l dbsem.Lease, last int64) error {
	if v.base.Fencing && l.Fence <= last {
		return fmt.Errorf("fence %d after a grant with fence %d: fences must increase, strictly, in the order grants took effect (a per-key counter incremented in the granting transaction)", l.Fence, last)
	}
	return nil
}

// live is what a live lease is, for the messages of checks that want one.
const live = "a lease is live until its deadline (the database's UTC_TIMESTAMP(6) at the grant or last refresh, plus ttl_ms) or its release"

// grantRelease is the check of an acquire of key with max 1 that must be
// granted (what says why), and whose lease is released at once: a token
// other than the one before (more, if set, says), with fencing a fence
// greater than *last (which becomes it), and release_ok.
func (v *leaseValidator) grantRelease(c *Process, key, what string, last *int64, more func(dbsem.Lease) error) error {
	l, err := c.Acquire(v.Ctx, key, validateTTL, 1)
	if err := granted(what, l, err); err != nil {
		return err
	}
	released := answered("release", c.Release(v.Ctx, key, l.Token), nil, live)
	if more != nil {
		if err := more(l); err != nil {
			return err
		}
	}
	fenced := v.fenced(l, *last)
	*last = l.Fence
	if fenced != nil {
		return fenced
	}
	return released
}

// fenceNote is what the name of an acquire check says about its fence.
func (v *leaseValidator) fenceNote(more string) string {
	if v.base.Fencing {
		return " with a token and a " + more + "fence"
	}
	return " with a token"
}

// basics: one key with max 1 and two clients: grant, full, refresh,
// release, expired, a disagreeing max, fences, an unknown request, ending.
// It says whether the implementation starts at all.
func (v *leaseValidator) basics() bool {
	v.group()
	s := v.session(v.key, 1, validateTTL)
	c1 := v.start("c1", s)
	if c1 == nil {
		return false
	}
	c2 := v.start("c2", s)
	if c2 == nil {
		return false
	}
	if l1 := v.firstGrant(c1, c2, s); l1.Token != "" { // the checks below need a lease
		last := v.afterRelease(c1, c2, s, l1)
		v.agreedMax(c1, c2, s, &last)
		v.fences(c1, s, &last)
		v.unknownRequest(c1)
	}
	if v.halted == "" {
		v.Ends(c1.conn.Client)
		v.Ends(c2.conn.Client)
	}
	return true
}

// firstGrant: c1's acquire of the free key is granted (with a fence, if
// asked), its tables carry init's prefix, and c2 then finds the key full.
// It returns c1's lease (no token if it was not granted).
func (v *leaseValidator) firstGrant(c1, c2 *Process, s dbsemrun.Session) dbsem.Lease {
	ctx := v.Ctx
	ttl := validateTTL.Milliseconds()
	var l1 dbsem.Lease
	v.step(fmt.Sprintf("acquire {max:1, ttl_ms:%d} -> acquire_ok%s", ttl, v.fenceNote("")), func() error {
		var err error
		l1, err = c1.Acquire(ctx, s.Key, validateTTL, 1)
		return granted("the first acquire of a free key", l1, err)
	}, c1)
	v.step(fmt.Sprintf("its tables are named with init's prefix (%s)", v.base.Prefix), func() error {
		if n := len(v.tables()); n == 0 {
			return fmt.Errorf("after an acquire_ok no table's name starts with init's \"prefix\" %q: keep leases in tables (the processes share nothing else) and name every table prefix + something, creating it with CREATE TABLE IF NOT EXISTS", v.base.Prefix)
		}
		return nil
	})
	v.step(`a second client's acquire while the first holds (max 1) -> acquire_fail {reason:"full"}`, func() error {
		l, err := c2.Acquire(ctx, s.Key, validateTTL, 1)
		switch {
		case errors.Is(err, dbsem.ErrFull):
			return nil
		case protocolError(err):
			return err
		case err == nil:
			c2.Release(ctx, s.Key, l.Token)
			return fmt.Errorf(`granted a second lease (token %q) with max 1 and one lease live: at most max leases of a key may be live, and deciding that fewer are and granting one must be one atomic decision; answer {"type":"acquire_fail","reason":"full"}`, l.Token)
		}
		return fmt.Errorf(`answered %s: with max leases live, answer {"type":"acquire_fail","reason":"full"}, not an error`, describe("acquire", l, err))
	}, c2)
	return l1
}

// afterRelease: refresh and release of c1's live lease succeed, then
// refresh and release of it, and refresh of a token never granted, are
// expired; c2's acquire after the release is granted with a new token. It
// returns the last fence seen.
func (v *leaseValidator) afterRelease(c1, c2 *Process, s dbsemrun.Session, l1 dbsem.Lease) int64 {
	ctx := v.Ctx
	ttl := validateTTL.Milliseconds()
	v.step(fmt.Sprintf("refresh {token, ttl_ms:%d} of the live lease -> refresh_ok", ttl), func() error {
		return answered("refresh", c1.Refresh(ctx, s.Key, l1.Token, validateTTL), nil, live)
	}, c1)
	v.step("release {token} of the live lease -> release_ok", func() error {
		return answered("release", c1.Release(ctx, s.Key, l1.Token), nil, live)
	}, c1)
	const notLive = `a lease that is not live (released, expired, or never granted) is "expired"`
	v.step(`refresh of the released lease -> refresh_fail {reason:"expired"}`, func() error {
		return answered("refresh", c1.Refresh(ctx, s.Key, l1.Token, validateTTL), dbsem.ErrExpired, notLive)
	}, c1)
	v.step(`release of the released lease -> release_fail {reason:"expired"}`, func() error {
		return answered("release", c1.Release(ctx, s.Key, l1.Token), dbsem.ErrExpired, notLive)
	}, c1)
	v.step(`refresh of a token never granted -> refresh_fail {reason:"expired"}`, func() error {
		return answered("refresh", c1.Refresh(ctx, s.Key, "lp-never-granted", validateTTL), dbsem.ErrExpired, notLive)
	}, c1)
	last := l1.Fence
	v.step("another client's acquire after the release -> acquire_ok"+v.fenceNote("greater ")+", then release_ok", func() error {
		return v.grantRelease(c2, s.Key, "an acquire of a key whose only lease was released", &last, func(l dbsem.Lease) error {
			if l.Token == l1.Token {
				return fmt.Errorf("the token %q again: a token names one grant, and no other grant on the key may ever get it (a random UUID, say)", l.Token)
			}
			return nil
		})
	}, c2)
	return last
}

// agreedMax: an acquire asking for another max than the key's is refused
// with a definite error and takes nothing.
func (v *leaseValidator) agreedMax(c1, c2 *Process, s dbsemrun.Session, last *int64) {
	ctx := v.Ctx
	refused := false
	v.step("acquire {max:2} of the key agreed with max 1 -> a definite error (code \"mismatch\")", func() error {
		l, err := c1.Acquire(ctx, s.Key, validateTTL, 2)
		var le *ProcessError
		switch {
		case protocolError(err):
			return err
		case err == nil:
			c1.Release(ctx, s.Key, l.Token)
			return fmt.Errorf(`granted a lease (token %q) to an acquire with max 2 on a key whose max is 1 (init's, and the first acquire's): record the key's max and answer an acquire that asks for another with {"type":"error","code":"mismatch","definite":true}, taking nothing; callers that disagree on max would exceed the smaller one`, l.Token)
		case errors.As(err, &le) && le.Definite:
			refused = true
			return nil
		}
		return fmt.Errorf(`answered %s: an acquire whose max disagrees with the key's takes nothing: answer {"type":"error","code":"mismatch","definite":true}`, describe("acquire", l, err))
	}, c1)
	if refused {
		v.step("the refused acquire took nothing: acquire {max:1} -> acquire_ok, then release_ok", func() error {
			return v.grantRelease(c2, s.Key, "after a refused acquire, an acquire of the free key", last, nil)
		}, c2)
	}
}

// fences: with fencing, fences increase over grants in a row.
func (v *leaseValidator) fences(c1 *Process, s dbsemrun.Session, last *int64) {
	if v.base.Fencing {
		const grants = 8
		v.step(fmt.Sprintf("fences increase over %d grants in a row (acquire, release)", grants), func() error {
			for i := 0; i < grants; i++ {
				if err := v.grantRelease(c1, s.Key, fmt.Sprintf("acquire %d of the free key", i+1), last, nil); err != nil {
					return err
				}
			}
			return nil
		}, c1)
	}
}

// unknownRequest: a request type the implementation does not know gets a
// definite "unsupported" error.
func (v *leaseValidator) unknownRequest(c1 *Process) {
	ctx := v.Ctx
	v.step(`an unknown request -> error {code:"unsupported", definite:true}`, func() error {
		_, err := c1.conn.Do(ctx, "frobnicate", process.Request{"type": "frobnicate"}, "frobnicate_ok")
		var le *ProcessError
		switch {
		case errors.As(err, &le) && le.Code == "unsupported" && le.Definite:
			return nil
		case errors.As(err, &le):
			return fmt.Errorf(`answered an error with code %q, definite %v: answer a request type you do not support with {"type":"error","code":"unsupported","definite":true}`, le.Code, le.Definite)
		case err != nil:
			return fmt.Errorf(`%v: answer a request type you do not support with {"type":"error","code":"unsupported","definite":true}`, err)
		}
		return errors.New(`answered "frobnicate_ok": answer a request type you do not support with {"type":"error","code":"unsupported","definite":true}`)
	}, c1)
}

// fullWhileLive: another client's acquire while the first lease is live
// (invoked less than its ttl ago) is refused full. On a machine too slow
// to ask in time it is not judged and answers false: a second lease
// granted then may have cleared the first one's row, and the expiry
// checks after it would judge nothing.
func (v *leaseValidator) fullWhileLive(s dbsemrun.Session, c4 *Process, invoked time.Time) bool {
	ctx := v.Ctx
	name := `another client's acquire before the ttl passed -> acquire_fail {reason:"full"}`
	l, err := c4.Acquire(ctx, s.Key, s.TTL, 1)
	judged := time.Since(invoked) < s.TTL || protocolError(err)
	if judged {
		v.step(name, func() error {
			switch {
			case errors.Is(err, dbsem.ErrFull):
				return nil
			case protocolError(err):
				return err
			case err == nil:
				return fmt.Errorf("granted a second lease (token %q) with max 1 and a lease granted less than its ttl ago: a lease is live until its deadline, the database's UTC_TIMESTAMP(6) at the grant plus ttl_ms; compare deadlines with the database's clock, never the process's", l.Token)
			}
			return fmt.Errorf(`answered %s: with max leases live, answer {"type":"acquire_fail","reason":"full"}`, describe("acquire", l, err))
		}, c4)
	}
	if err == nil {
		c4.Release(ctx, s.Key, l.Token)
	}
	return judged
}

// expiries runs the expiry group, again with a longer ttl while the
// machine is too slow to judge it, and says so each time.
func (v *leaseValidator) expiries() {
	ttl := expiryTTL
	for try := 1; try <= expiryTries; try++ {
		again := "no more tries: the expiry checks are not judged"
		if try < expiryTries {
			again = fmt.Sprintf("trying the expiry checks again with a ttl of %v", 3*ttl)
		}
		if v.expiry(fmt.Sprintf("%s-e%d", v.key, try), ttl, again) || v.halted != "" || v.Ctx.Err() != nil {
			return
		}
		ttl *= 3
	}
}

// expiry: a lease whose ttl passed is expired (refresh and release say
// so, and do not revive it), and its slot can be taken again; a live one
// keeps it. It answers false if the machine was too slow to judge the
// group: nothing after the first acquire was checked, the skip says why
// and what happens next (again), and its processes are ended.
func (v *leaseValidator) expiry(key string, ttl time.Duration, again string) bool {
	ctx := v.Ctx
	v.group()
	s := v.session(key, 1, ttl)
	c3 := v.start("c3", s)
	if c3 == nil {
		return true
	}
	c4 := v.start("c4", s)
	if c4 == nil {
		return true
	}
	var l3 dbsem.Lease
	var granted3 time.Time
	invoked := time.Now()
	if !v.step(fmt.Sprintf("acquire {max:1, ttl_ms:%d} -> acquire_ok", ttl.Milliseconds()), func() error {
		var err error
		l3, err = c3.Acquire(ctx, s.Key, ttl, 1)
		granted3 = time.Now()
		return granted("the first acquire of a free key", l3, err)
	}, c3) {
		return true
	}
	if !v.fullWhileLive(s, c4, invoked) {
		fmt.Fprintf(v.Out, "skip  another client's acquire before the ttl passed -> acquire_fail {reason:\"full\"}\n      the machine was too slow to judge it: the answer came %v after the first acquire, past the ttl of %v; %s\n", time.Since(invoked).Round(time.Millisecond), ttl, again)
		v.Ends(c3.conn.Client)
		v.Ends(c4.conn.Client)
		return false
	}
	// Wait out l3: its deadline is at most its grant's reply plus the ttl.
	wait := func(from time.Time) {
		select {
		case <-time.After(time.Until(from.Add(ttl + expiryMargin))):
		case <-ctx.Done():
		}
	}
	wait(granted3)
	const expired = `a lease whose deadline has passed is not live, whether or not another client has taken its slot since (compare deadlines with the database's UTC_TIMESTAMP(6), never the process's clock)`
	// Refresh first: a release that wrongly answers ok clears the token,
	// and a refresh after it would find nothing to revive.
	revived := time.Time{}
	v.step(`refresh of a lease whose ttl passed -> refresh_fail {reason:"expired"}`, func() error {
		err := c3.Refresh(ctx, s.Key, l3.Token, ttl)
		if err == nil {
			revived = time.Now()
		}
		return answered("refresh", err, dbsem.ErrExpired, expired+`: refresh must not revive it`)
	}, c3)
	if !revived.IsZero() {
		wait(revived) // the refresh above revived it: wait it out again
	}
	v.step(`release of a lease whose ttl passed -> release_fail {reason:"expired"}`, func() error {
		return answered("release", c3.Release(ctx, s.Key, l3.Token), dbsem.ErrExpired, expired+`: release must not report release_ok for it`)
	}, c3)
	v.step("another client's acquire after the ttl passed -> acquire_ok"+v.fenceNote("greater "), func() error {
		l, err := c4.Acquire(ctx, s.Key, ttl, 1)
		if err := granted("an acquire of a key whose only lease has expired", l, err); err != nil {
			return err
		}
		return v.fenced(l, l3.Fence)
	}, c4)
	if v.halted == "" {
		v.Ends(c3.conn.Client)
		v.Ends(c4.conn.Client)
	}
	return true
}

// unreachable: init with the database out of reach is an error without
// definite (lockprover starts a new process later), or init_ok and an
// error at the first operation; either within the time lockprover waits.
func (v *leaseValidator) unreachable() {
	if v.Ctx.Err() != nil {
		return
	}
	name := `init with the database out of reach -> error without "definite" (or init_ok, and an error to the first acquire)`
	s := v.session(v.key+"-u", 1, validateTTL)
	cfg, err := mysql.ParseDSN(s.DSN)
	if err != nil {
		v.Check(name, err)
		return
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		v.Check(name, fmt.Errorf("not judged: no closed port to point init at: %v", err))
		return
	}
	cfg.Addr = l.Addr().String()
	l.Close()
	s.DSN = cfg.FormatDSN()
	c, err := v.impl.initialise(v.Ctx, "c5", s)
	if c != nil {
		v.procs = append(v.procs, c)
	}
	var le *ProcessError
	switch {
	case c == nil:
	case errors.As(err, &le) && !le.Definite:
		err = nil
	case errors.As(err, &le):
		err = fmt.Errorf(`answered init with a definite error (%s): a database out of reach is no reason to fail the run; answer an error without "definite" (code "database", say), and lockprover starts a new process a little later (a definite error is for a session you can never serve)`, le.Said())
	case err != nil:
		err = fmt.Errorf("%v\n      with the database out of reach, answer init within %v: an error without \"definite\" (code \"database\", say), or init_ok; bound the connection attempt (a connect timeout)", v.impl.StartFailure(v.Ctx, c.conn.Client, err), v.impl.InitTimeoutOrDefault())
	default:
		_, err = c.Acquire(v.Ctx, s.Key, validateTTL, 1)
		switch {
		case err == nil:
			err = fmt.Errorf("answered init_ok with nothing listening at init's dsn (%s), then granted a lease", cfg.Addr)
		case errors.As(err, &le):
			err = nil
		case errors.Is(err, dbsem.ErrFull):
			err = fmt.Errorf(`answered init_ok with nothing listening at init's dsn (%s), then acquire_fail {"reason":"full"}: an acquire that cannot reach the database answers an error (definite if it certainly took nothing)`, cfg.Addr)
		}
	}
	v.Check(name, err)
	if c != nil && !c.Broken() {
		v.Ends(c.conn.Client)
	}
}

// tables lists the tables under the validation's prefix.
func (v *leaseValidator) tables() []string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	like := strings.ReplaceAll(v.base.Prefix, "_", `\_`) + "%"
	rows, err := v.admin.QueryContext(ctx, "SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name LIKE ?", like)
	if err != nil {
		return nil
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var n string
		if rows.Scan(&n) == nil {
			names = append(names, n)
		}
	}
	return names
}

// cleanup kills what is left and drops every table under the prefix.
func (v *leaseValidator) cleanup() {
	for _, c := range v.procs {
		c.conn.Kill()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, n := range v.tables() {
		v.admin.ExecContext(ctx, "DROP TABLE IF EXISTS `"+n+"`")
	}
	v.admin.Close()
}
