package redlockprotocol

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/lockprover/lockprover/adapters/process"
	"github.com/lockprover/lockprover/adapters/runners/leaserun/leaseprotocol"
	"github.com/lockprover/lockprover/adapters/runners/redlockrun"
	"github.com/lockprover/lockprover/adapters/servers/redis"
	ref "github.com/lockprover/lockprover/model/redlock"
)

// The ttls of the checks: one long enough to be live through every check
// that needs a live lease, and one short enough to wait out.
const (
	validateTTL = 10 * time.Second
	expiryTTL   = 500 * time.Millisecond
	// expiryWait is how long the expiry check waits after the grant: the
	// ttl and Redis's own lateness (a key lives until its millisecond
	// deadline has passed).
	expiryWait = expiryTTL + 300*time.Millisecond
)

// Validate checks a Redlock implementation's handling of the protocol
// (docs/protocol.md, "Redlock") on three private redis-servers it starts
// (with bin, "" to look for it on PATH and in the cache), before a first
// prove: init, acquire, held, refresh, release, expired, expiry by the
// ttl (no revival), fences where given, a claimed validity within the
// ttl, an unknown request, and ending. Each process gets initTimeout to
// answer init (0: the protocol's 10 s). It prints one line per check,
// with what to fix for each failure, and reports whether every check
// passed; cut short when ctx ends. A machine without redis-server is the
// error (the implementation is not started). Every process and server is
// stopped at the end, pass, fail or cancel. With priority, the
// implementation is a priority Redlock: the same checks run with clients
// of one priority, and then the steal's (see stealing).
func Validate(ctx context.Context, command string, initTimeout time.Duration, bin string, out io.Writer, priority bool) (bool, error) {
	return ValidateOn(ctx, command, initTimeout, redis.Options{Bin: bin}, out, priority)
}

// ValidateOn is Validate on three private servers started with o: the
// machine's redis-server, or a version's (o.Version: Redis 8, Valkey).
func ValidateOn(ctx context.Context, command string, initTimeout time.Duration, o redis.Options, out io.Writer, priority bool) (bool, error) {
	return validateOn(ctx, command, initTimeout, o, out, priority, stealHold)
}

// validateOn is ValidateOn with the steal check's victim stopped for up
// to hold.
func validateOn(ctx context.Context, command string, initTimeout time.Duration, o redis.Options, out io.Writer, priority bool, hold time.Duration) (bool, error) {
	dir, err := os.MkdirTemp("", "lockprover-validate-")
	if err != nil {
		return false, err
	}
	defer os.RemoveAll(dir)
	servers, err := redis.StartN(ctx, dir, 3, o)
	if err != nil {
		return false, err
	}
	defer redis.StopAll(servers)
	v := &validator{
		Checker: process.NewChecker(ctx, out),
		impl:    NewProcesses(command).Validating(initTimeout),
		key:     leaseprotocol.ValidateKey(),
		prio:    priority,
		hold:    hold,
	}
	for _, s := range servers {
		v.addrs = append(v.addrs, s.Addr())
	}
	defer v.impl.Stop()
	v.basics()
	if priority && v.OK {
		v.stealing()
	}
	return v.OK && ctx.Err() == nil, nil // a check cut short by the cancel passed nothing
}

type validator struct {
	process.Checker
	impl  *Processes
	key   string
	addrs []string
	// prio says the implementation is a priority Redlock; lost, the lost
	// notices its processes wrote, as they were read.
	prio bool
	mu   sync.Mutex
	lost []ref.Lost
	// hold is the longest the steal check keeps its victim stopped
	// (stealHold).
	hold time.Duration
}

// start starts client name and checks its handshake; nil if it did not
// start. A priority Redlock's client has priority 1 (start's clients are
// equals: none steals from another).
func (v *validator) start(name string) *Process {
	return v.startAt(name, 1)
}

// startAt starts client name of priority prio (a priority Redlock's) and
// checks its handshake; nil if it did not start.
func (v *validator) startAt(name string, prio int64) *Process {
	if v.Ctx.Err() != nil {
		return nil
	}
	s := redlockrun.Session{Key: v.key, Addrs: v.addrs, TTL: validateTTL, Run: v.key, Priority: v.prio, Prio: prio}
	if v.prio {
		s.OnLost = func(x ref.Lost) {
			v.mu.Lock()
			v.lost = append(v.lost, x)
			v.mu.Unlock()
		}
	}
	if c := side.CheckStart(&v.Checker, &v.impl.Launcher, name, s, "the redis-servers", `"addrs"`); c != nil {
		return v.impl.Open(c, s).(*Process)
	}
	return nil
}

// describe says what an operation answered, for a failure's message.
func describe(op string, l ref.Lease, err error) string { return side.Describe(op, l.Token, err) }

// basics are the checks, in order; each needs the ones before it.
func (v *validator) basics() {
	c1, c2 := v.start("c1"), v.start("c2")
	if c1 == nil || c2 == nil {
		return
	}
	l1, ok := v.granted(c1, "c1's acquire of the free lock is granted", validateTTL)
	if !ok {
		return
	}
	_, err := c2.Acquire(v.Ctx, v.key, validateTTL)
	v.Expect("c2's acquire while c1 holds is held", nil, errors.Is(err, ref.ErrHeld),
		fmt.Sprintf(`answered %s: want acquire_fail {"reason":"held"} while another client holds the lock`, describe("acquire", ref.Lease{}, err)))
	sent := time.Now()
	l, err := c1.Refresh(v.Ctx, l1, validateTTL)
	took := time.Since(sent)
	v.Expect("c1's refresh of its lease is ok", nil, err == nil, fmt.Sprintf("answered %s: want refresh_ok for a lease held", describe("refresh", l, err)))
	v.claims("c1's refresh", c1, l, err, validateTTL, took)
	err = c1.Release(v.Ctx, l1)
	v.Expect("c1's release of its lease is ok", nil, err == nil, fmt.Sprintf("answered %s: want release_ok for a lease held", describe("release", l, err)))
	v.expired("c1's second release", "release", func() error { return c1.Release(v.Ctx, l1) })
	v.expired("c1's refresh after its release", "refresh", func() error { _, err := c1.Refresh(v.Ctx, l1, validateTTL); return err })
	v.expired("a refresh of a token never granted", "refresh", func() error {
		_, err := c2.Refresh(v.Ctx, ref.Lease{Key: v.key, Token: "lp-never-granted"}, validateTTL)
		return err
	})
	l2, ok := v.granted(c2, "c2's acquire after the release is granted", validateTTL)
	if ok {
		v.Expect("c2's lease has a new token", nil, l2.Token != l1.Token, fmt.Sprintf("c2 was granted token %q, c1's: a token must name one grant", l2.Token))
		if l1.Fence != redlockrun.NoFence && l2.Fence != redlockrun.NoFence {
			v.Expect("fences increase", nil, l2.Fence > l1.Fence, fmt.Sprintf("c2's fence %d is not greater than c1's earlier %d", l2.Fence, l1.Fence))
		}
		err = c2.Release(v.Ctx, l2)
		v.Expect("c2's release is ok", err, err == nil, "")
	}
	v.expiry(c1, c2)
	leaseprotocol.CheckUnsupported(&v.Checker, c1.conn)
	v.Ends(c1.conn.Client)
	v.Ends(c2.conn.Client)
}

// granted checks an acquire that must be granted, and the validity it
// claims.
func (v *validator) granted(c *Process, name string, ttl time.Duration) (ref.Lease, bool) {
	sent := time.Now()
	l, err := c.Acquire(v.Ctx, v.key, ttl)
	took := time.Since(sent)
	v.Expect(name, nil, err == nil, fmt.Sprintf("answered %s: want acquire_ok, the lock being free", describe("acquire", l, err)))
	v.claims(name, c, l, err, ttl, took)
	return l, err == nil
}

// claims checks that a grant claims no more than its ttl, and, where it
// says when its library started (started_ms), that the times it says lie
// within the call as lockprover timed it (took, from the request's sending
// to the reply's reading): its elapsed_ms no longer, so that its own
// start, and the library's after it, came no earlier than the request.
// (started_ms after the reply the reply itself refuses.)
func (v *validator) claims(name string, c *Process, l ref.Lease, err error, ttl, took time.Duration) {
	x, said := c.Claimed()
	if err != nil || !said {
		return
	}
	v.Expect(name+": the validity claimed is within the ttl", nil, x.Until <= ttl,
		fmt.Sprintf("elapsed_ms plus validity_ms is %v, more than the ttl %v: a grant is valid for less than its ttl, less the time it took and the drift", x.Until, ttl))
	if x.Started > 0 {
		v.Expect(name+": started_ms lies within the call", nil, x.Elapsed <= took,
			fmt.Sprintf("elapsed_ms is %v, but the call took %v from the request to the reply: count elapsed_ms, and started_ms after it, from your own first reading of your clock for the operation, after the request came", x.Elapsed, took))
	}
}

// expired checks that an operation answers expired.
func (v *validator) expired(name, op string, f func() error) {
	side.CheckExpired(&v.Checker, name, op, f())
}

// expiry checks that a lease ends with its ttl: once it has passed, a
// refresh must not revive it, and another client's acquire is granted.
func (v *validator) expiry(c1, c2 *Process) {
	l, ok := v.granted(c1, fmt.Sprintf("c1's acquire with a ttl of %v is granted", expiryTTL), expiryTTL)
	if !ok || !leaseprotocol.Wait(&v.Checker, expiryWait) {
		return
	}
	v.expired(fmt.Sprintf("c1's refresh %v after its grant (no revival)", expiryWait), "refresh", func() error {
		_, err := c1.Refresh(v.Ctx, l, validateTTL)
		return err
	})
	l2, ok := v.granted(c2, "c2's acquire once c1's lease expired is granted", validateTTL)
	if ok {
		c2.Release(v.Ctx, l2)
	}
}

// stealing checks a priority Redlock's steal, one request at a time: c4
// (priority 2) takes the lease of c3 (priority 1) while c3 is stopped
// (SIGSTOP, then SIGCONT once c4's acquire returns, or after v.hold):
// c4 is granted only once c3's lost notice has come or c3's lease could
// have ended, c3's refresh then answers expired, and a lost notice of
// c3's, if one came, names c4's token; c5, of c4's priority, and c3 are
// held while c4 holds.
func (v *validator) stealing() {
	c3, c4, c5 := v.start("c3"), v.startAt("c4", 2), v.startAt("c5", 2)
	if c3 == nil || c4 == nil || c5 == nil {
		return
	}
	asked := time.Now()
	l3, ok := v.granted(c3, "c3's acquire (priority 1) of the free lock is granted", validateTTL)
	if !ok {
		return
	}
	s := v.stealFromStopped(c3, c4)
	l4, err := s.lease, s.err
	v.Expect("c4's acquire (priority 2) while c3 holds steals: it is granted", nil, err == nil,
		fmt.Sprintf("answered %s: want acquire_ok, a priority strictly above the holder's (steal, notify the victim, wait for its acknowledgement)", describe("acquire", l4, err)))
	if err != nil {
		return
	}
	notice := noticeOf(s.lost, l3.Token)
	ended := !s.returned.Before(asked.Add(validateTTL))
	v.Expect("c4 is granted only after c3's lost notice came, or once c3's lease could have ended", nil, notice != nil || ended,
		fmt.Sprintf("c4's acquire_ok came %v after c3 asked for its %v lease, c3 stopped for %v of it, before a lost notice of c3's token (notices: %v): the thief acts while its victim still thinks it holds (wait for the victim's acknowledgement, or until its lease could have ended; the victim writes {\"type\":\"lost\",\"token\":...,\"thief\":...} before it acknowledges)", s.returned.Sub(asked).Round(time.Millisecond), validateTTL, s.stopped.Round(time.Millisecond), s.lost))
	v.expired("c3's refresh after the theft", "refresh", func() error { _, err := c3.Refresh(v.Ctx, l3, validateTTL); return err })
	if notice := noticeOf(v.notices(), l3.Token); notice != nil {
		v.Expect("c3's lost notice names c4's token as the thief", nil, notice.Thief == l4.Token,
			fmt.Sprintf("the notice said thief %q: want c4's token %q", notice.Thief, l4.Token))
	}
	_, err = c5.Acquire(v.Ctx, v.key, validateTTL)
	v.Expect("c5's acquire of c4's priority while c4 holds is held", nil, errors.Is(err, ref.ErrHeld),
		fmt.Sprintf(`answered %s: want acquire_fail {"reason":"held"}: equal priority never steals`, describe("acquire", ref.Lease{}, err)))
	_, err = c3.Acquire(v.Ctx, v.key, validateTTL)
	v.Expect("c3's acquire of a lower priority while c4 holds is held", nil, errors.Is(err, ref.ErrHeld),
		fmt.Sprintf(`answered %s: want acquire_fail {"reason":"held"}: a lower priority never steals`, describe("acquire", ref.Lease{}, err)))
	err = c4.Release(v.Ctx, l4)
	v.Expect("c4's release is ok", err, err == nil, "")
	v.Ends(c3.conn.Client)
	v.Ends(c4.conn.Client)
	v.Ends(c5.conn.Client)
}

// notices are the lost notices read so far.
func (v *validator) notices() []ref.Lost {
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.Clone(v.lost)
}

// noticeOf is the lost notice of token among lost, nil if none.
func noticeOf(lost []ref.Lost, token string) *ref.Lost {
	for i := range lost {
		if lost[i].Token == token {
			return &lost[i]
		}
	}
	return nil
}

// The steal check's bounds. The victim stays stopped until the thief
// returns, or for stealHold, a second past its whole lease: a thief that
// does not wait for its victim returns while the victim is stopped unless
// its acquire takes as long as the lease (a pause of four times the
// slowest grant, at most 2.5 s, let such a thief slowed beside a loaded
// suite return after the victim had resumed and written its notice, once
// in six loaded runs). A thief that waits can then return only once the
// victim's lease could have ended (no acknowledgement can come from a
// stopped victim), which the check accepts, as the protocol does: so its
// own lease is stealTTL, three leases, lest its key expire while it waits
// (outwaited), and its acquire may take stealTimeout, not every other
// request's 10 s.
const (
	stealHold    = validateTTL + time.Second
	stealTTL     = 3 * validateTTL
	stealTimeout = 4 * validateTTL
)

// A steal is what stealFromStopped saw: the thief's answer, the lost
// notices read by the time it came, when it came and how long the victim
// was stopped.
type steal struct {
	lease    ref.Lease
	err      error
	lost     []ref.Lost
	returned time.Time
	stopped  time.Duration
}

// stealFromStopped has c4 acquire (for stealTTL) while c3 is stopped, and
// resumes c3 once c4's acquire returns or v.hold has passed, whichever
// is first.
func (v *validator) stealFromStopped(c3, c4 *Process) steal {
	type answer struct {
		l   ref.Lease
		err error
	}
	defer c4.conn.SetTimeout(c4.conn.Timeout())
	c4.conn.SetTimeout(stealTimeout)
	c3.Signal(syscall.SIGSTOP)
	start := time.Now()
	got := make(chan answer, 1)
	go func() {
		l, err := c4.Acquire(v.Ctx, v.key, stealTTL)
		got <- answer{l, err}
	}()
	hold := time.NewTimer(v.hold)
	defer hold.Stop()
	var a answer
	select {
	case a = <-got:
	case <-hold.C:
		c3.Signal(syscall.SIGCONT)
		a = <-got
	}
	returned := time.Now()
	lost := v.notices()
	c3.Signal(syscall.SIGCONT)
	return steal{a.l, a.err, lost, returned, min(returned.Sub(start), v.hold)}
}
