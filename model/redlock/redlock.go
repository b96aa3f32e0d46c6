// Package redlock is lockprover's reference implementation of Redlock, the
// Redis lease lock, and of Redlock with priority stealing (after
// gittyeric/priority-redlock), on github.com/redis/go-redis/v9.
//
// Redlock (type Redlock) runs on N independent Redis servers. Acquire sets
// the key to a fresh random token with SET NX PX on every server in
// parallel, each bounded by a timeout, and grants the lease if a majority
// (N/2+1) set it and some validity is left: validity = ttl - the time the
// acquire took - drift, drift = ttl*DriftFactor + 2 ms. Otherwise it
// deletes the keys it did set, on every server, and fails. Refresh and
// Release are Lua scripts that compare the key's value with the caller's
// token before they PEXPIRE or DEL it, so they touch only the caller's own
// grant; they succeed when a majority did.
//
// The random token is no fencing token: it says who holds the key, not in
// which order grants happened. So every grant also gets a fence, from a
// counter per key (key + ":fence", no expiry) incremented by the script
// that sets the key. With one server the fence is that server's count.
// With N, the grant takes the largest count among the servers that set the
// key and writes it back to every server (keeping each counter's larger
// value) before it is granted, which needs a majority too: any two
// majorities share a server, so a grant that begins after another was
// granted counts past it there, and fences increase in the order of
// grants. A fence is only as durable as the counters: a server restarted
// without persistence counts from zero again, and with a majority of them
// fences can go backwards (use Always persistence, or a resource that
// remembers the highest fence it saw).
//
// Validity is measured on CLOCK_MONOTONIC (Monotonic), the clock every
// process of a machine shares, so the prover can judge the validity a lease
// claims. It is sound only while the servers' clocks run within the drift
// bound and keys expire on time: a server restarted without persistence, or
// whose clock jumps forward, loses keys early, as Kleppmann pointed out;
// antirez's answer is a restart delayed beyond the longest ttl, or fsync on
// every write.
//
// Priority (type Priority) is the priority lock, on N servers too; see its
// documentation. Options.Defects switches on deliberate bugs, for the
// prover's mutants.
package redlock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
	"golang.org/x/sys/unix"
)

// Errors an operation may return (wrapped, with detail). Any other error
// leaves a refresh's or a release's outcome unknown; an acquire that
// returns an error was not granted (its partial grants were deleted, or
// expire).
var (
	// ErrHeld: acquire was refused by so many servers (the key held by
	// another) that no majority could grant it; for the priority lock, the
	// holder's priority was at least the acquirer's.
	ErrHeld = errors.New("redlock: the lock is held")
	// ErrExpired: refresh or release found the caller's token on fewer than
	// a majority of servers (the lease expired, was released, or, under a
	// defect, was overwritten).
	ErrExpired = errors.New("redlock: the lease is not held")
	// ErrStolen (priority lock): a holder of higher priority took the
	// lease (or took the key from an acquire still waiting for its victim).
	ErrStolen = errors.New("redlock: the lease was taken by a higher priority")
	// ErrPartial: refresh or release, begun within the lease's validity,
	// found the caller's token on some servers, and acted there, but on
	// fewer than a majority, the others answering that they do not hold
	// it: the lease may have been valid
	// until then (a release that deleted the key on one server while the
	// others' answers were late ended a lease that was still held), so
	// its outcome is unknown. After a release the lease is over either
	// way.
	ErrPartial = errors.New("redlock: done on too few servers to tell whether the lease was still held")
	// ErrNoQuorum: too few servers answered (errors or timeouts) to reach a
	// majority, either way.
	ErrNoQuorum = errors.New("redlock: too few servers answered")
	// ErrNoValidity: a majority granted or extended the lease, but by the
	// time they had answered no validity was left.
	ErrNoValidity = errors.New("redlock: no validity left")
	// ErrOutwaited: a priority acquire's own lease expired while it
	// waited for its victims, and every server answered that it no longer
	// holds the key there: it holds nothing, certainly (a thief whose ttl
	// is shorter than its victim's time left).
	ErrOutwaited = errors.New("redlock: outwaited by its victims")
	// ErrLeftBehind, wrapped with the reason a failed acquire failed: its
	// key may stay on some servers until it expires (they may have set it,
	// and their answers to the acquire and to its cleanup were lost),
	// refusing other acquirers there meanwhile.
	ErrLeftBehind = errors.New("its key may be left behind until it expires")
)

// A Lease is a granted lock.
type Lease struct {
	// Key is the lock's key.
	Key string
	// Token identifies the grant to Refresh, Release and Verify: 32 random
	// hex digits.
	Token string
	// Fence increases from grant to grant of the key (see the package
	// documentation for how far that holds).
	Fence int64
	// Priority is the priority it was acquired with (Priority only).
	Priority int64
	// Validity is how long the lease was valid for when the grant (or the
	// latest refresh) returned.
	Validity time.Duration
	// ValidUntil is when the validity ends, in nanoseconds of
	// CLOCK_MONOTONIC (Monotonic): the start of the grant, plus its ttl,
	// less the drift.
	ValidUntil int64
}

// Monotonic reads CLOCK_MONOTONIC, in nanoseconds: the clock Lease's
// ValidUntil and Lost's At are on, shared by every process of the machine
// and never stepped.
func Monotonic() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic("redlock: clock_gettime(CLOCK_MONOTONIC): " + err.Error())
	}
	return ts.Nano()
}

// A Redlock is a handle on a lock kept on N independent Redis servers (N
// = 1 is a single instance). It holds the servers' connection pools and is
// safe for concurrent use.
type Redlock struct {
	env   Env
	addrs []string
	o     Options
}

// New returns a Redlock on the servers at addrs (host:port), N = len(addrs).
// It does not connect yet.
func New(addrs []string, o Options) (*Redlock, error) {
	if len(addrs) == 0 {
		return nil, errors.New("redlock: no servers")
	}
	if err := o.check(false); err != nil {
		return nil, err
	}
	return &Redlock{env: newRedisEnv(addrs), addrs: append([]string(nil), addrs...), o: o}, nil
}

// NewOn returns a Redlock on the servers and clock of env (a simulator's,
// say); Close closes env.
func NewOn(env Env, o Options) (*Redlock, error) {
	if env == nil || env.Servers() < 1 {
		return nil, errors.New("redlock: no servers")
	}
	if err := o.check(false); err != nil {
		return nil, err
	}
	return &Redlock{env: env, o: o}, nil
}

// client is a go-redis client for the lock's traffic: RESP2 and no
// handshake extras (nothing that Redis 7.0 or a fault proxy might trip
// on), one dial per attempt and no automatic retries (a retried script could take effect twice and
// misreport), the context's deadline as the socket's.
func client(addr string, pool int) *goredis.Client {
	return goredis.NewClient(&goredis.Options{
		Addr:                     addr,
		Protocol:                 2,
		DisableIdentity:          true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
		MaxRetries:               -1,
		ContextTimeoutEnabled:    true,
		DialTimeout:              time.Second,
		DialerRetries:            1, // a down server answers at once; the lock's timeouts decide
		PoolSize:                 pool,
	})
}

// Close closes the connection pools.
func (r *Redlock) Close() error { return r.env.Close() }

// quorum is how many servers make a majority.
func (r *Redlock) quorum() int {
	if r.o.Defects.QuorumHalf {
		return r.env.Servers() / 2
	}
	return r.env.Servers()/2 + 1
}

// newToken is a grant's token: 16 random bytes in hex.
func newToken(o Options) string {
	if o.Defects.ConstantToken {
		return "redlock-constant-token"
	}
	var b [16]byte
	random := o.Random
	if random == nil {
		random = rand.Reader
	}
	if _, err := io.ReadFull(random, b[:]); err != nil {
		panic("redlock: no random bits: " + err.Error())
	}
	return hex.EncodeToString(b[:])
}

func checkArgs(key string, ttl time.Duration) error {
	if key == "" || len(key) > 1024 {
		return fmt.Errorf("redlock: key of %d bytes: must be 1 to 1024", len(key))
	}
	if ttl < time.Millisecond {
		return fmt.Errorf("redlock: ttl %v: must be at least 1ms", ttl)
	}
	return nil
}

func ms(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

func fenceKey(key string) string { return key + ":fence" }

// A reply is one server's answer to one round.
type reply struct {
	n   int64
	err error
}

// each sends cmd to every server at once, each under its own timeout, and
// returns their answers in the servers' order, read by f.
func (r *Redlock) each(ctx context.Context, timeout time.Duration, cmd Cmd, f func(Result) (int64, error)) []reply {
	cmds := make([]Cmd, r.env.Servers())
	for i := range cmds {
		cmds[i] = cmd
	}
	rs := r.env.Round(ctx, timeout, cmds)
	out := make([]reply, len(rs))
	for i, x := range rs {
		out[i].n, out[i].err = f(x)
	}
	return out
}

// integer reads an integer reply, as go-redis's Cmd.Int64 does.
func integer(x Result) (int64, error) {
	if x.Err != nil {
		return 0, x.Err
	}
	switch v := x.Val.(type) {
	case int64:
		return v, nil
	case string:
		return strconv.ParseInt(v, 10, 64)
	case nil:
		return 0, goredis.Nil
	}
	return 0, fmt.Errorf("redis: unexpected type=%T for Int64", x.Val)
}

// script is a run of the Lua source src.
func script(src string, keys []string, args ...string) Cmd {
	return Cmd{Script: src, Keys: keys, Args: args}
}

// tally counts the servers that answered yes (n > 0), no (n <= 0) and not
// at all, and keeps the first error.
func tally(rs []reply) (yes, no int, first error) {
	for _, x := range rs {
		switch {
		case x.err != nil:
			if first == nil {
				first = x.err
			}
		case x.n > 0:
			yes++
		default:
			no++
		}
	}
	return yes, no, first
}

// validUntil is the end of the validity of a grant of ttl that started at
// start (Monotonic) and whose servers had all answered at end.
func (o Options) validUntil(start, end int64, ttl time.Duration) int64 {
	from := start
	if o.Defects.NoElapsed {
		from = end
	}
	return from + int64(ttl-o.drift(ttl))
}

// Acquire grants a lease on key for ttl (whole milliseconds, at least one)
// if a majority of the servers grant it and validity is left once they have
// answered. It never waits for the key: when the key is held on enough
// servers that no majority can grant it, it answers ErrHeld. A failed
// acquire deletes the keys it may have set on every server
// (compare-and-delete, so it touches no one else's), and says where it
// could not (ErrLeftBehind).
func (r *Redlock) Acquire(ctx context.Context, key string, ttl time.Duration) (Lease, error) {
	if err := checkArgs(key, ttl); err != nil {
		return Lease{}, err
	}
	token := newToken(r.o)
	timeout := r.o.timeout(ttl)
	start := r.env.Now()
	rs := r.each(ctx, timeout, script(acquireSrc, []string{key, fenceKey(key)}, token, ms(ttl)), integer)
	granted, refused, first := tally(rs)
	q, n := r.quorum(), r.env.Servers()
	var fence int64
	for _, x := range rs {
		if x.err == nil {
			fence = max(fence, x.n)
		}
	}
	var err error
	switch {
	case granted < q && refused > n-q:
		err = fmt.Errorf("%w: %s refused by %d of %d servers", ErrHeld, key, refused, n)
	case granted < q:
		err = fmt.Errorf("%w: %s granted by %d of %d servers, %d needed: %v", ErrNoQuorum, key, granted, n, q, first)
	case n > 1:
		// Write the fence back so that the next grant counts past it.
		rs := r.each(ctx, timeout, script(raiseSrc, []string{fenceKey(key)}, strconv.FormatInt(fence, 10)), integer)
		if raised, _, first := tally(rs); raised < q {
			err = fmt.Errorf("%w: the fence of %s reached %d of %d servers, %d needed: %v", ErrNoQuorum, key, raised, n, q, first)
		}
	}
	end := r.env.Now()
	until := r.o.validUntil(start, end, ttl)
	if err == nil && until <= end && !r.o.Defects.NoValidityCheck {
		err = fmt.Errorf("%w: %s: the servers took %v of a ttl of %v", ErrNoValidity, key, time.Duration(end-start), ttl)
	}
	if err != nil {
		return Lease{}, r.cleanup(ctx, key, token, timeout, rs, err)
	}
	return Lease{Key: key, Token: token, Fence: fence, Validity: time.Duration(until - end), ValidUntil: until}, nil
}

// cleanup deletes the keys a failed acquire may have set: on every server
// that granted it or whose answer was lost (Redlock unlocks "even the
// instances it believed it was not able to lock"). A server that may hold
// the key and did not answer the cleanup either may keep it until it
// expires, refusing others meanwhile: the error then wraps ErrLeftBehind.
func (r *Redlock) cleanup(ctx context.Context, key, token string, timeout time.Duration, rs []reply, err error) error {
	if r.o.Defects.NoCleanup {
		return err
	}
	maybe := 0
	for _, x := range rs {
		if x.err != nil || x.n > 0 {
			maybe++
		}
	}
	if maybe == 0 {
		return err
	}
	left := 0
	for i, x := range r.release(ctx, key, token, timeout) {
		if x.err != nil && (rs[i].err != nil || rs[i].n > 0) {
			left++
		}
	}
	if left > 0 {
		return fmt.Errorf("%w (%w: on %d server(s), whose answers to the acquire and its cleanup were lost)", err, ErrLeftBehind, left)
	}
	return err
}

// release runs the compare-and-delete on every server, whatever the
// caller's context says (a cancelled acquire still cleans up).
func (r *Redlock) release(ctx context.Context, key, token string, timeout time.Duration) []reply {
	return r.each(context.WithoutCancel(ctx), timeout, script(releaseSrc, []string{key}, token), integer)
}

// Refresh extends l to ttl from now on every server that still holds its
// token, and returns it with its new validity if a majority did and
// validity is left. It answers ErrExpired when no server holds the token
// (or fewer than a majority do, and l's validity had passed when it
// began), ErrNoValidity when they answered too late; an ErrPartial (some
// but fewer than a majority held it, within l's validity) or an
// ErrNoQuorum leaves the outcome unknown (the servers that answered did
// extend it).
func (r *Redlock) Refresh(ctx context.Context, l Lease, ttl time.Duration) (Lease, error) {
	if err := checkArgs(l.Key, ttl); err != nil {
		return Lease{}, err
	}
	d := r.o.Defects
	start := r.env.Now()
	cmd := script(refreshSrc, []string{l.Key}, l.Token, ms(ttl))
	switch {
	case d.PlainPexpireRefresh:
		cmd = Cmd{Args: []string{"pexpire", l.Key, ms(ttl)}}
	case d.SetNXOnExtend:
		cmd = script(refreshSetNXSrc, []string{l.Key}, l.Token, ms(ttl))
	}
	rs := r.each(ctx, r.o.timeout(ttl), cmd, r.counted)
	if err := r.judge("refresh", l.Key, rs, start >= l.ValidUntil); err != nil {
		return Lease{}, err
	}
	end := r.env.Now()
	until := r.o.validUntil(start, end, ttl)
	if until <= end && !d.NoValidityCheck {
		return Lease{}, fmt.Errorf("%w: refresh of %s: the servers took %v of a ttl of %v", ErrNoValidity, l.Key, time.Duration(end-start), ttl)
	}
	l.Validity, l.ValidUntil = time.Duration(until-end), until
	return l, nil
}

// judge turns the servers' answers to a refresh or release into its error;
// lapsed says the lease's validity had passed when the operation began.
func (r *Redlock) judge(op, key string, rs []reply, lapsed bool) error {
	yes, no, first := tally(rs)
	q := r.quorum()
	switch {
	case yes >= q:
		return nil
	case no > r.env.Servers()-q && yes == 0:
		return fmt.Errorf("%w: %s of %s: the token is held by none of %d servers", ErrExpired, op, key, r.env.Servers())
	case no > r.env.Servers()-q && lapsed:
		return fmt.Errorf("%w: %s of %s: its validity had passed, and %d of %d servers still held the token", ErrExpired, op, key, yes, r.env.Servers())
	case no > r.env.Servers()-q:
		return fmt.Errorf("%w: %s of %s: %d of %d servers held the token and did it, %d needed", ErrPartial, op, key, yes, r.env.Servers(), q)
	default:
		return fmt.Errorf("%w: %s of %s: %d of %d servers did it, %d needed: %v", ErrNoQuorum, op, key, yes, r.env.Servers(), q, first)
	}
}

// Release deletes l's key on every server that still holds its token, and
// succeeds if a majority did. It answers ErrExpired when none held it (or
// fewer than a majority did, and l's validity had passed when it began);
// an ErrPartial (some but fewer than a majority did, within l's validity)
// or an ErrNoQuorum leaves the outcome unknown.
func (r *Redlock) Release(ctx context.Context, l Lease) error {
	if err := checkArgs(l.Key, time.Millisecond); err != nil {
		return err
	}
	cmd := script(releaseSrc, []string{l.Key}, l.Token)
	if r.o.Defects.PlainDelRelease {
		cmd = Cmd{Args: []string{"del", l.Key}}
	}
	lapsed := r.env.Now() >= l.ValidUntil
	return r.judge("release", l.Key, r.each(ctx, r.o.opTimeout(), cmd, r.counted), lapsed)
}

// counted reads a refresh's or a release's integer reply; with
// Defects.AlwaysOK every answer counts as a success.
func (r *Redlock) counted(x Result) (int64, error) {
	n, err := integer(x)
	if err == nil && r.o.Defects.AlwaysOK {
		n = 1
	}
	return n, err
}

// Verify tells whether l is still held: its validity has not passed and a
// majority of the servers still hold its token. An error means too few
// servers answered to tell.
func (r *Redlock) Verify(ctx context.Context, l Lease) (bool, error) {
	if r.env.Now() >= l.ValidUntil {
		return false, nil
	}
	rs := r.each(ctx, r.o.opTimeout(), Cmd{Args: []string{"get", l.Key}}, func(x Result) (int64, error) {
		if x.Err != nil {
			return 0, x.Err
		}
		if v, ok := x.Val.(string); ok && v == l.Token {
			return 1, nil
		}
		return 0, nil
	})
	err := r.judge("verify", l.Key, rs, false)
	if errors.Is(err, ErrExpired) || errors.Is(err, ErrPartial) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return r.env.Now() < l.ValidUntil, nil
}
