package redlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// A Priority is a handle on priority locks (after gittyeric/priority-redlock)
// kept on N independent Redis servers (N = 1 is a single instance): an
// acquirer of strictly higher priority than the holder takes the lock from
// it, and must not act on it until the holder (the victim) knows.
//
// On each server a lock on key k lives in the hash {k}:lock (the holder's
// token, priority and fence, and after a steal the victim's, so that a
// failed steal can be undone), its fence counter in {k}:fence. Acquire runs
// one script on every server in parallel: a free key is granted; a holder
// of lower priority is replaced (a new token and fence), the key's life
// becoming the longer of the victim's remaining time and the thief's ttl,
// so that should the thief die at once nobody else can take the key before
// the victim's deadline; otherwise the server refuses. Equal priority never
// steals. The acquire needs a majority (N/2+1) of servers that granted or
// were stolen from; without one it undoes what it did (a steal is undone
// by putting the victim back with its own deadline, so that a victim that
// had exactly a majority keeps it) and fails, ErrHeld when the refusals
// left no majority possible. With N > 1 the fence is written back to a
// majority, as Redlock's.
//
// After a steal the thief notifies every victim it found (those it took
// the key from, and the earlier victims of the key's chain that the steal
// named: a failed steal tells nobody, and acknowledges a thief of its key
// at once), by RPUSH on the list {k}:note:<victim's token> of each server
// that named the victim (a list keeps the note until the victim reads it;
// pub/sub would drop it while the victim is not subscribed, for instance
// while it reconnects), and waits with BLPOP on its own lists
// {k}:ack:<thief's token>. It returns the lease only once every victim
// has acknowledged or can no longer hold (its remaining time on the
// server plus drift), and only if it still holds a majority then; where
// it holds, it marks the chain below it told, so that a later thief does
// not wait for these victims again. Every lease has a watcher per server: a task (a
// goroutine, PriorityEnv.Go) blocked in BLPOP on the lease's note list on a connection of its own.
// When a note arrives the lease is marked lost (Verify answers false,
// Refresh ErrStolen), the time recorded and Options.OnLost told, and only
// then is the acknowledgement pushed, on every server. A thief robbed while
// it still waits for its own victims acknowledges its robber only after
// its victims acknowledged it (or could have ended), so a chain of thefts
// never lets two act at once.
//
// The thief's lease claims the validity of its own ttl from the start of
// its acquire (less drift), although the key lives on for the victim's
// remaining time when that is longer; a thief with a ttl shorter than the
// victim's remaining time that gets no acknowledgement therefore fails
// with ErrNoValidity. Priorities are integers of magnitude below 2^53
// (Lua's numbers are doubles).
//
// A Priority runs on a PriorityEnv: NewPriority's real one, or a
// simulator's (NewPriorityOn), through which it sends every command,
// reads its clock, starts its tasks and waits.
type Priority struct {
	env PriorityEnv
	// servers are the real servers' clients (NewPriority's), for tests
	// to reach the servers by; nil on another PriorityEnv.
	servers []*goredis.Client
	o       Options

	mu    sync.Mutex
	holds map[string]*holding // by token: leases with watchers

	// hook, if set (by tests), is called at named points ("watch": a
	// watcher is about to listen; "lost": a watcher is about to mark its
	// lease lost) with the lease's token, so that a test can slow one down.
	hook func(point, token string)
}

// Lost is what OnLost is told: a lease taken by a higher priority.
type Lost struct {
	Key, Token string
	// Thief is the token of the lease that took it.
	Thief string
	// At is when the lease was marked lost, on CLOCK_MONOTONIC
	// (Monotonic; the PriorityEnv's clock), before the thief was
	// acknowledged.
	At int64
}

// holding is a lease's watchers' state.
type holding struct {
	key, token string
	ttl        time.Duration
	settled    Signal // fired once the lease's own acquire waits for no victim
	stopped    Signal // fired by stop
	cancel     context.CancelFunc
	done       Signal // fired when every watcher has ended
	acked      Signal // fired once a theft is acknowledged

	mu        sync.Mutex
	watchers  int      // the watchers still running
	isSettled bool     // settled has fired
	isStopped bool     // stop was called
	handled   bool     // a watcher handles a theft: one does
	closers   []func() // run by stop: subscriptions to close, unblocking a receive
	until     int64    // the watchers listen until then (Monotonic): the validity's end
	lost      bool
	lostAt    int64
}

// NewPriority returns a Priority on the servers at addrs (host:port). It
// does not connect yet.
func NewPriority(addrs []string, o Options) (*Priority, error) {
	if len(addrs) == 0 {
		return nil, errors.New("redlock: no servers")
	}
	if err := o.check(true); err != nil {
		return nil, err
	}
	e := newRedisPriorityEnv(addrs)
	return &Priority{env: e, servers: e.servers, o: o, holds: map[string]*holding{}}, nil
}

// NewPriorityOn returns a Priority on the servers, clock and tasks of env
// (a simulator's, say); Close closes env.
func NewPriorityOn(env PriorityEnv, o Options) (*Priority, error) {
	if env == nil || env.Servers() < 1 {
		return nil, errors.New("redlock: no servers")
	}
	if err := o.check(true); err != nil {
		return nil, err
	}
	return &Priority{env: env, o: o, holds: map[string]*holding{}}, nil
}

// Listening is how long from now the lock's watchers listen for thefts:
// until the last of its keys may live, which a steal kept alive until its
// victim's deadline where that was later than the thief's own validity. A
// thief of higher priority that meets such a key waits for this lock's
// acknowledgement: a caller done with the lock that closes it sooner
// leaves that thief waiting in vain, as a crash would.
func (p *Priority) Listening() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	var d time.Duration
	for _, h := range p.holds {
		d = max(d, p.untilDur(h.getUntil()))
	}
	return d
}

// Close stops every watcher (their leases stay on the servers until they
// expire) and closes the connections.
func (p *Priority) Close() error {
	p.mu.Lock()
	hs := make([]*holding, 0, len(p.holds))
	for _, h := range p.holds {
		hs = append(hs, h)
	}
	p.mu.Unlock()
	slices.SortFunc(hs, func(a, b *holding) int { return strings.Compare(a.token, b.token) })
	for _, h := range hs {
		p.drop(h)
	}
	return p.env.Close()
}

// The keys of the priority lock on key k. The braces are a hash tag: on a
// cluster they would all live in one slot, as the scripts need.
func lockKey(k string) string        { return "{" + k + "}:lock" }
func prioFenceKey(k string) string   { return "{" + k + "}:fence" }
func noteKey(k, token string) string { return "{" + k + "}:note:" + token } // thieves' tokens, for token's watchers
func ackKey(k, token string) string  { return "{" + k + "}:ack:" + token }  // victims' tokens, for thief token
func wakeKey(k, token string) string { return "{" + k + "}:wake:" + token } // wakes token's watchers when they are stopped

// flag is a script's boolean argument.
func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

func msDur(n int64) time.Duration { return time.Duration(n) * time.Millisecond }

// secs is d as BLPOP's timeout: seconds, to the millisecond.
func secs(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 3, 64) }

// untilDur is how long until t (Monotonic).
func (p *Priority) untilDur(t int64) time.Duration { return time.Duration(t - p.env.Now()) }

// at calls the test hook, if any.
func (p *Priority) at(point, token string) {
	if p.hook != nil {
		p.hook(point, token)
	}
}

func (h *holding) isLost() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lost
}

func (h *holding) setUntil(t int64) {
	h.mu.Lock()
	h.until = t
	h.mu.Unlock()
}

func (h *holding) getUntil() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.until
}

// settle says that the lease's acquire waits for no victim any more.
func (h *holding) settle() {
	h.mu.Lock()
	h.isSettled = true
	h.mu.Unlock()
	h.settled.Fire()
}

func (h *holding) hasSettled() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.isSettled
}

// stop stops the watchers: their context ends, and their subscriptions
// close.
func (h *holding) stop() {
	h.cancel()
	h.mu.Lock()
	h.isStopped = true
	cs := h.closers
	h.closers = nil
	h.mu.Unlock()
	h.stopped.Fire()
	for _, c := range cs {
		c()
	}
}

// onStop makes stop run f (at once if it has run).
func (h *holding) onStop(f func()) {
	h.mu.Lock()
	if h.isStopped {
		h.mu.Unlock()
		f()
		return
	}
	h.closers = append(h.closers, f)
	h.mu.Unlock()
}

// claim says whether the caller is the first watcher to handle a theft.
func (h *holding) claim() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	first := !h.handled
	h.handled = true
	return first
}

// watcherDone counts a watcher's end; the last fires done.
func (h *holding) watcherDone() {
	h.mu.Lock()
	h.watchers--
	last := h.watchers == 0
	h.mu.Unlock()
	if last {
		h.done.Fire()
	}
}

// maxPriority bounds priorities: Lua compares them as doubles.
const maxPriority = 1<<53 - 1

func (p *Priority) n() int      { return p.env.Servers() }
func (p *Priority) quorum() int { return p.n()/2 + 1 }

// each sends cmd to every server at once, each under its own timeout, and
// returns their answers in the servers' order.
func (p *Priority) each(ctx context.Context, timeout time.Duration, cmd Cmd) []Result {
	cmds := make([]Cmd, p.n())
	for i := range cmds {
		cmds[i] = cmd
	}
	return p.env.Send(ctx, timeout, cmds)
}

// pushTx is a transaction that pushes v on list and gives the list life.
func pushTx(list, v string, life time.Duration) Cmd {
	return Cmd{Tx: [][]string{{"rpush", list, v}, {"pexpire", list, ms(life)}}}
}

// slice reads an array reply, as go-redis's Cmd.Slice does.
func slice(x Result) ([]any, error) {
	switch v := x.Val.(type) {
	case nil:
		if x.Err != nil {
			return nil, x.Err
		}
		return nil, goredis.Nil
	case []any:
		return v, x.Err
	}
	if x.Err != nil {
		return nil, x.Err
	}
	return nil, fmt.Errorf("redis: unexpected type=%T for Slice", x.Val)
}

// text reads a bulk string reply, as go-redis's StringCmd does.
func text(x Result) (string, error) {
	if x.Err != nil {
		return "", x.Err
	}
	switch v := x.Val.(type) {
	case nil:
		return "", goredis.Nil
	case string:
		return v, nil
	}
	return fmt.Sprint(x.Val), nil
}

// texts reads an array of strings, as go-redis's StringSlice does.
func texts(x Result) ([]string, error) {
	vs, err := slice(x)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(vs))
	for i, v := range vs {
		s, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("redis: unexpected type=%T for String", v)
		}
		out[i] = s
	}
	return out, nil
}

// An obtained is one server's answer to obtain.
type obtained struct {
	kind   int64 // 0 refused, 1 granted, 2 stolen
	fence  int64
	prio   int64 // the holder's, when refused
	victim string
	left   time.Duration // the victim's remaining time
	life   time.Duration // the key's life after the steal
	// earlier are the victims before it in the key's chain, with their
	// remaining time: each may never have been told of its loss (its
	// thief's acquire failed), so the thief tells it too.
	earlier map[string]time.Duration
	err     error
}

func parseObtained(res []any, err error) obtained {
	if err != nil {
		return obtained{err: err}
	}
	n := func(i int) int64 {
		if i >= len(res) {
			return 0
		}
		v, _ := res[i].(int64)
		return v
	}
	switch {
	case len(res) >= 2 && n(0) == 0:
		return obtained{kind: 0, prio: n(1)}
	case len(res) >= 2 && n(0) == 1:
		return obtained{kind: 1, fence: n(1)}
	case len(res) >= 5 && len(res)%2 == 1 && n(0) == 2:
		v, _ := res[2].(string)
		o := obtained{kind: 2, fence: n(1), victim: v, left: msDur(n(3)), life: msDur(n(4)), earlier: map[string]time.Duration{}}
		for i := 5; i < len(res); i += 2 {
			if tok, ok := res[i].(string); ok && n(i+1) > 0 && tok != v {
				o.earlier[tok] = max(o.earlier[tok], msDur(n(i+1)))
			}
		}
		return o
	}
	return obtained{err: fmt.Errorf("redlock: the obtain script answered %v", res)}
}

// Acquire grants a lease on key for ttl (whole milliseconds, at least one)
// with priority, if on a majority of the servers the key is free or held
// by a lower priority (whose holders it then notifies, returning once they
// have acknowledged or can no longer hold). It answers ErrHeld when holders
// of equal or higher priority refused it on so many servers that no
// majority was possible, and ErrStolen when a higher priority took the key
// from it while it waited for its victims. On any other error the key is
// not held for the caller (what it did is undone, or expires).
func (p *Priority) Acquire(ctx context.Context, key string, ttl time.Duration, priority int64) (Lease, error) {
	if err := checkArgs(key, ttl); err != nil {
		return Lease{}, err
	}
	if priority > maxPriority || priority < -maxPriority {
		return Lease{}, fmt.Errorf("redlock: priority %d: magnitude must be below 2^53", priority)
	}
	d := p.o.Defects
	token := newToken(p.o)
	timeout := p.o.timeout(ttl)
	start := p.env.Now()
	res := p.each(ctx, timeout, script(obtainSrc, []string{lockKey(key), prioFenceKey(key)},
		token, strconv.FormatInt(priority, 10), ms(ttl), flag(d.EqualSteals), flag(d.StealResetsTTL)))
	rs := make([]obtained, len(res))
	for i, x := range res {
		rs[i] = parseObtained(slice(x))
		if d.DirectVictimOnly {
			rs[i].earlier = nil
		}
	}
	rnd := tallyObtained(rs, ttl)
	if err := p.quorumOf(ctx, key, priority, timeout, rnd); err != nil {
		if rnd.won > 0 || rnd.first != nil {
			fresh := make([]bool, len(rs))
			for i, r := range rs {
				fresh[i] = r.err == nil && r.kind == 1
			}
			p.undo(ctx, key, token, fresh)
			// A thief of its keys is told of every victim before it in
			// the key's chain (which this acquire never told), and tells
			// them itself: this acquire, which holds nothing, may
			// acknowledge it at once.
			p.listenAfterFailure(key, token, ttl)
		}
		if rnd.first != nil {
			// A server that did not answer may run the obtain yet (a
			// command a partition held), after the undo: its key stays
			// until it expires, refusing others, as Redlock's.
			err = fmt.Errorf("%w (%w: a server's answer was lost: %v)", err, ErrLeftBehind, rnd.first)
		}
		return Lease{}, err
	}

	l := Lease{Key: key, Token: token, Priority: priority, Fence: rnd.fence}
	until := start + int64(ttl-p.o.drift(ttl))
	if len(rnd.victims) == 0 {
		h := p.startWatch(key, token, ttl, until, true)
		if end := p.env.Now(); until <= end {
			p.drop(h)
			p.undo(ctx, key, token, nil) // a steal whose answer was lost gives its key back
			p.listenAfterFailure(key, token, ttl)
			return Lease{}, fmt.Errorf("%w: acquire of %s took %v of a ttl of %v", ErrNoValidity, key, time.Duration(end-start), ttl)
		}
		l.ValidUntil, l.Validity = until, p.untilDur(until)
		return l, nil
	}
	h := p.startWatch(key, token, ttl, start+int64(rnd.life+p.o.drift(rnd.life)), false)
	if err := p.steal(ctx, key, token, timeout, rnd, h); err != nil {
		p.drop(h)
		p.undo(ctx, key, token, nil)
		p.listenAfterFailure(key, token, ttl)
		return Lease{}, err
	}
	if end := p.env.Now(); until <= end {
		p.drop(h)
		p.undo(ctx, key, token, nil)
		p.listenAfterFailure(key, token, ttl)
		return Lease{}, fmt.Errorf("%w: acquire of %s waited %v for its victims, of a ttl of %v", ErrNoValidity, key, time.Duration(end-start), ttl)
	}
	// The watchers listen on while the key may live, not only while the
	// lease is valid: a steal kept the key alive until its victim's
	// deadline where that is later, and a thief of higher priority that
	// meets the key then waits for this holder's acknowledgement (prove
	// --kind priority-redlock --seed 2, plan 5,188: c3 waited in vain for
	// c1, whose watchers had ended with its 100 ms, on a key c2's 300 ms
	// kept).
	h.setUntil(max(h.getUntil(), until))
	l.ValidUntil, l.Validity = until, p.untilDur(until)
	return l, nil
}

// An obtainRound is what the servers answered an acquire's obtain script.
type obtainRound struct {
	won, refused int
	fence        int64
	holderPrio   int64         // the highest refusing holder's priority
	life         time.Duration // the longest life of the key where won
	first        error
	victims      map[string]time.Duration // victim → its longest remaining time
	stolenOn     map[string][]int         // victim → the servers stolen from it
}

// tallyObtained counts the servers' answers to obtain.
func tallyObtained(rs []obtained, ttl time.Duration) obtainRound {
	rnd := obtainRound{victims: map[string]time.Duration{}, stolenOn: map[string][]int{}}
	for i, r := range rs {
		switch {
		case r.err != nil:
			if rnd.first == nil {
				rnd.first = r.err
			}
		case r.kind == 0:
			if rnd.refused == 0 || r.prio > rnd.holderPrio {
				rnd.holderPrio = r.prio
			}
			rnd.refused++
		default:
			rnd.won++
			rnd.fence = max(rnd.fence, r.fence)
			rnd.life = max(rnd.life, ttl, r.life)
			if r.kind == 2 {
				rnd.victims[r.victim] = max(rnd.victims[r.victim], r.left)
				rnd.stolenOn[r.victim] = append(rnd.stolenOn[r.victim], i)
				for v, left := range r.earlier {
					rnd.victims[v] = max(rnd.victims[v], left)
					rnd.stolenOn[v] = append(rnd.stolenOn[v], i)
				}
			}
		}
	}
	return rnd
}

// quorumOf says why the round does not hold key (ErrHeld, ErrNoQuorum),
// nil when it does: won on a majority, and the fence raised on a majority
// (on more than one server).
func (p *Priority) quorumOf(ctx context.Context, key string, priority int64, timeout time.Duration, rnd obtainRound) error {
	q, n := p.quorum(), p.n()
	switch {
	case rnd.won < q && rnd.refused > n-q:
		return fmt.Errorf("%w: %s by priority %d (asked %d) on %d of %d servers", ErrHeld, key, rnd.holderPrio, priority, rnd.refused, n)
	case rnd.won < q:
		return fmt.Errorf("%w: %s obtained on %d of %d servers, %d needed: %v", ErrNoQuorum, key, rnd.won, n, q, rnd.first)
	case n > 1:
		raised := 0
		for _, x := range p.each(ctx, timeout, script(raiseSrc, []string{prioFenceKey(key)}, strconv.FormatInt(rnd.fence, 10))) {
			if x.Err == nil {
				raised++
			}
		}
		if raised < q {
			return fmt.Errorf("%w: the fence of %s reached %d of %d servers, %d needed", ErrNoQuorum, key, raised, n, q)
		}
	}
	return nil
}

// steal tells every victim of the round, waits for them, and says whether
// token still holds key on a majority after it (nil), or why not; the
// caller drops h and releases on an error.
func (p *Priority) steal(ctx context.Context, key, token string, timeout time.Duration, rnd obtainRound, h *holding) error {
	d := p.o.Defects
	var longest time.Duration
	victims := make([]string, 0, len(rnd.victims))
	for v := range rnd.victims {
		victims = append(victims, v)
	}
	slices.Sort(victims) // one order, for a simulator's sake
	for _, v := range victims {
		left := rnd.victims[v]
		wait := left + p.o.drift(left)
		if d.ProceedOnAckTimeout {
			wait /= 4
		}
		longest = max(longest, wait)
		p.notify(ctx, key, v, token, rnd.stolenOn[v], wait)
	}
	if !d.NoAckWait {
		p.awaitAcks(ctx, key, token, rnd.victims, p.env.Now()+int64(longest))
	}
	h.settle()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("redlock: acquire of %s: %w", key, err)
	}
	// Still ours on a majority? A higher priority may have taken it
	// meanwhile. Where it is, the victims before it are marked told.
	held, robbed, _, first := countPrio(p.each(ctx, timeout, script(settleSrc, []string{lockKey(key)}, token)))
	switch {
	case held >= p.quorum() && !h.isLost():
		return nil
	case robbed > 0 || h.isLost():
		// Let the watchers acknowledge the robber before they stop.
		p.env.Await(context.Background(), p.env.Now()+int64(p.o.opTimeout()), h.acked)
		return fmt.Errorf("%w: %s, while its acquire waited for its victims", ErrStolen, key)
	case first != nil && held+robbed < p.quorum():
		return fmt.Errorf("%w: acquire of %s: held on %d of %d servers after the wait: %v", ErrNoQuorum, key, held, p.n(), first)
	}
	if held == 0 && first == nil {
		return fmt.Errorf("%w: %s expired on every server while its acquire waited for its victims", ErrOutwaited, key)
	}
	return fmt.Errorf("%w: %s expired while its acquire waited for its victims", ErrNoValidity, key)
}

// holders counts the servers on which token holds key, those on which
// another does, those on which nobody does, and keeps the first error.
func (p *Priority) holders(ctx context.Context, key, token string, timeout time.Duration) (held, other, none int, first error) {
	for _, x := range p.each(ctx, timeout, Cmd{Args: []string{"hget", lockKey(key), "acq"}}) {
		v, err := text(x)
		switch {
		case err == nil && v == token:
			held++
		case err == nil:
			other++
		case errors.Is(err, goredis.Nil):
			none++
		case first == nil:
			first = err
		}
	}
	return held, other, none, first
}

// notify tells victim of the theft on the servers stolen from it: RPUSH of
// the thief's token on the victim's note list, which lives as long as the
// thief may wait (or, with Defects.PubSubNotify, a PUBLISH). Errors are
// ignored: the thief then waits out the victim's time.
func (p *Priority) notify(ctx context.Context, key, victim, thief string, on []int, wait time.Duration) {
	cmds := make([]Cmd, p.n())
	for _, i := range on {
		if p.o.Defects.PubSubNotify {
			cmds[i] = Cmd{Args: []string{"publish", noteKey(key, victim), thief}}
		} else {
			cmds[i] = pushTx(noteKey(key, victim), thief, wait+time.Second)
		}
	}
	p.env.Send(ctx, p.o.timeout(wait), cmds)
}

// A mailbox is a queue of strings that tasks put into and one task takes
// from, waiting through the PriorityEnv (a channel's stand-in).
type mailbox struct {
	env   PriorityEnv
	mu    sync.Mutex
	items []string
	more  Signal // fires at the next put
}

func newMailbox(env PriorityEnv) *mailbox { return &mailbox{env: env, more: env.NewSignal()} }

func (m *mailbox) put(v string) {
	m.mu.Lock()
	m.items = append(m.items, v)
	more := m.more
	m.more = m.env.NewSignal()
	m.mu.Unlock()
	more.Fire()
}

// take takes the oldest item, waiting for one until deadline (or ctx's
// end): false if none came.
func (m *mailbox) take(ctx context.Context, deadline int64) (string, bool) {
	for {
		m.mu.Lock()
		if len(m.items) > 0 {
			v := m.items[0]
			m.items = m.items[1:]
			m.mu.Unlock()
			return v, true
		}
		more := m.more
		m.mu.Unlock()
		if m.env.Await(ctx, deadline, more) < 0 {
			return "", false
		}
	}
}

// awaitAcks waits (BLPOP on the thief's ack list of every server) until
// every victim has acknowledged or deadline (Monotonic) passes, retrying
// after connection errors; it deletes the lists before returning.
func (p *Priority) awaitAcks(ctx context.Context, key, token string, victims map[string]time.Duration, deadline int64) {
	ctx, cancel := context.WithCancel(ctx)
	over := p.env.NewSignal()
	acks := newMailbox(p.env)
	for i := range p.n() {
		p.env.Go(func() {
			for {
				left := p.untilDur(deadline)
				if left < time.Millisecond || ctx.Err() != nil {
					return
				}
				v, err := p.blpop(ctx, i, ackKey(key, token), left)
				if err != nil {
					p.env.Await(ctx, min(p.env.Now()+int64(10*time.Millisecond), deadline), over)
					continue
				}
				if v != "" {
					acks.put(v)
				}
			}
		})
	}
	pending := len(victims)
	acked := map[string]bool{}
	for pending > 0 {
		v, ok := acks.take(ctx, deadline)
		if !ok {
			break
		}
		if _, ok := victims[v]; ok && !acked[v] {
			acked[v] = true
			pending--
		}
	}
	cancel()
	over.Fire()
	// Blocked pops end by their deadline; do not wait for them.
	p.each(context.WithoutCancel(ctx), p.o.opTimeout(), Cmd{Args: []string{"del", ackKey(key, token)}})
}

// blpop pops one element of list on server i, waiting at most d: the
// element, or "" if none came. The wait ends on our clock, not Redis's:
// Redis checks BLPOP timeouts on its 100 ms cron (hz 10), so a BLPOP of
// 0.05 s returns after 100 ms and one of 0.253 s after 300 ms (measured
// here, and later still on a busy machine). So the server is given a
// second more, and the command's timeout ends the wait (go-redis then
// closes the connection, and the server forgets the BLPOP).
func (p *Priority) blpop(ctx context.Context, i int, list string, d time.Duration) (string, error) {
	r, err := texts(p.env.Block(ctx, d, i, Cmd{Args: []string{"BLPOP", list, secs(d + time.Second)}}))
	switch {
	case err == nil && len(r) == 2:
		return r[1], nil
	case err == nil:
		return "", fmt.Errorf("redlock: BLPOP answered %q", r)
	case errors.Is(err, goredis.Nil), isTimeout(err), errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		return "", nil
	}
	return "", err
}

// startWatch registers a lease and starts its watchers, listening until
// until (Monotonic). settled says whether its acquire is done with victims.
func (p *Priority) startWatch(key, token string, ttl time.Duration, until int64, settled bool) *holding {
	ctx, cancel := context.WithCancel(context.Background())
	h := &holding{key: key, token: token, ttl: ttl, until: until, cancel: cancel, watchers: p.n(),
		settled: p.env.NewSignal(), stopped: p.env.NewSignal(), done: p.env.NewSignal(), acked: p.env.NewSignal()}
	if settled {
		h.settle()
	}
	p.mu.Lock()
	p.holds[token] = h
	p.mu.Unlock()
	for i := range p.n() {
		p.env.Go(func() {
			defer h.watcherDone()
			p.watchLease(ctx, h, i)
		})
	}
	return h
}

// drop stops a lease's watchers and forgets the lease. A watcher blocked
// in BLPOP is woken by a push on its wake list (go-redis does not abandon
// a blocking command when its context ends).
func (p *Priority) drop(h *holding) {
	h.stop()
	wake := wakeKey(h.key, h.token)
	p.each(context.Background(), p.o.opTimeout(), pushTx(wake, "stop", 10*time.Second))
	p.env.Await(context.Background(), 0, h.done)
	p.each(context.Background(), p.o.opTimeout(), Cmd{Args: []string{"del", wake}})
	p.forget(h)
}

func (p *Priority) forget(h *holding) {
	p.mu.Lock()
	if p.holds[h.token] == h {
		delete(p.holds, h.token)
	}
	p.mu.Unlock()
}

// watchLease is a lease's watcher on server i: it listens for a theft
// until the lease's validity has passed (or it is stopped), and handles
// one.
func (p *Priority) watchLease(ctx context.Context, h *holding, i int) {
	p.at("watch", h.token)
	note := noteKey(h.key, h.token)
	var sub Subscription
	if p.o.Defects.PubSubNotify {
		sub = p.env.Subscribe(ctx, i, note)
		defer sub.Close()
		h.onStop(func() { sub.Close() }) // unblocks a receive
	}
	for ctx.Err() == nil {
		left := p.untilDur(h.getUntil())
		if left <= 0 && h.hasSettled() { // the lease is over
			h.stop()
			p.forget(h)
			return
		}
		wait := min(max(left, 10*time.Millisecond), time.Second)
		var thief string
		var err error
		if sub != nil {
			if thief, err = sub.Receive(ctx, wait); isTimeout(err) {
				err = nil
			}
		} else {
			thief, err = p.watchPop(ctx, i, note, wakeKey(h.key, h.token), wait)
		}
		if err != nil {
			p.env.Await(ctx, p.env.Now()+int64(watchRetry), h.stopped)
			continue
		}
		if thief != "" {
			if h.claim() {
				p.theft(ctx, h, thief)
			} else {
				p.lateTheft(ctx, h, thief)
			}
		}
	}
}

// watchRetry is how long a watcher waits after a connection error before
// it listens again.
var watchRetry = 100 * time.Millisecond

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

// watchPop is one BLPOP of a watcher on server i, on its note list and
// its wake list: the thief's token, or "" after d or when woken.
func (p *Priority) watchPop(ctx context.Context, i int, note, wake string, d time.Duration) (string, error) {
	cmd := Cmd{Args: []string{"BLPOP", note, wake, secs(max(d, time.Millisecond))}}
	r, err := texts(p.env.Block(ctx, d+p.o.opTimeout()+time.Second, i, cmd))
	if errors.Is(err, goredis.Nil) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	if len(r) != 2 {
		return "", fmt.Errorf("redlock: BLPOP answered %q", r)
	}
	if r[0] != note {
		return "", nil
	}
	return r[1], nil
}

// theft handles the first note: the lease is lost to thief. Unless its
// own acquire still waits for its victims (then it waits for that first),
// it marks the lease lost, tells OnLost, and acknowledges. The thief tells
// those victims itself (they are the key's chain before this lease), so
// the wait is not what keeps them safe; it keeps a chain's order (a victim
// knows before its thief's robber acts) at no cost: the robber waits for
// them anyway.
func (p *Priority) theft(ctx context.Context, h *holding, thief string) {
	if p.env.Await(ctx, 0, h.settled, h.stopped) != 0 {
		return
	}
	// Once the lease is known lost the thief must hear of it, even if the
	// lease's owner stops the watchers meanwhile.
	ctx = context.WithoutCancel(ctx)
	if p.o.Defects.AckBeforeLost {
		p.ack(ctx, h, thief)
		p.markLost(h, thief)
	} else {
		p.markLost(h, thief)
		p.ack(ctx, h, thief)
	}
	// The watchers listen on until the lease's end: another thief (one
	// that stole from it while it stole, a chain) is acknowledged too.
	h.acked.Fire()
}

// lateTheft handles a note after the first: the lease is lost already
// (or being marked so); once the first thief is acknowledged, so is this
// one.
func (p *Priority) lateTheft(ctx context.Context, h *holding, thief string) {
	if p.env.Await(ctx, 0, h.acked, h.stopped) == 0 {
		p.ack(context.WithoutCancel(ctx), h, thief)
	}
}

func (p *Priority) markLost(h *holding, thief string) {
	p.at("lost", h.token)
	h.mu.Lock()
	h.lost, h.lostAt = true, p.env.Now()
	at := h.lostAt
	h.mu.Unlock()
	if p.o.OnLost != nil {
		p.o.OnLost(Lost{Key: h.key, Token: h.token, Thief: thief, At: at})
	}
}

// ack pushes the acknowledgement (the victim's token) on the thief's list
// of every server, until one took it or the thief can no longer be
// waiting (the lease's ttl).
func (p *Priority) ack(ctx context.Context, h *holding, thief string) {
	end := p.env.Now() + int64(h.ttl)
	list := ackKey(h.key, thief)
	for p.env.Now() < end {
		ok := false
		for _, x := range p.each(ctx, p.o.timeout(h.ttl), pushTx(list, h.token, h.ttl+time.Second)) {
			if x.Err == nil {
				ok = true
			}
		}
		if ok {
			return
		}
		p.env.Await(ctx, p.env.Now()+int64(10*time.Millisecond))
	}
}

// undo takes back what a failed acquire did on every server: a key it
// holds is given back to the victim it stole it from, with the victim's
// own deadline, or deleted.
//
// fresh says, server by server, that the acquire's key there was a fresh
// grant (it answered so): where a thief took it, the acquire gives up its
// claim to it (see undoSrc). Nil: nowhere.
func (p *Priority) undo(ctx context.Context, key, token string, fresh []bool) {
	cmds := make([]Cmd, p.n())
	for i := range cmds {
		cmds[i] = script(undoSrc, []string{lockKey(key)}, token, flag(i < len(fresh) && fresh[i]))
	}
	p.env.Send(context.WithoutCancel(ctx), p.o.opTimeout(), cmds)
}

// listenAfterFailure has watchers listen, for a failed acquire (or a
// release that found its lease taken), until a key it set may have lived
// (ttl, and drift, from now): a thief that took one meanwhile waits for
// an acknowledgement, which they give (the acquire never held the lock,
// the release gave it up: nothing is left to give up), telling OnLost
// first as for any lease. Without them a thief would wait out the
// key's time in vain (and, with a shorter ttl, fail); a chain behind it
// with it.
func (p *Priority) listenAfterFailure(key, token string, ttl time.Duration) {
	p.mu.Lock()
	_, watched := p.holds[token]
	p.mu.Unlock()
	if !watched {
		p.startWatch(key, token, ttl, p.env.Now()+int64(ttl+p.o.drift(ttl)), true)
	}
}

// releaseAll deletes key where token holds it, on every server, and the
// token's note lists: it returns how many servers answered that token held
// it, that another did, that none did, and the first error.
func (p *Priority) releaseAll(ctx context.Context, key, token string) (yes, other, none int, first error) {
	rs := p.each(context.WithoutCancel(ctx), p.o.opTimeout(), script(releasePrioSrc, []string{lockKey(key), noteKey(key, token)}, token))
	return countPrio(rs)
}

// countPrio counts the answers 1 (yes), -1 (other) and 0 (none) of the
// priority lock's refresh and release, and keeps the first error.
func countPrio(rs []Result) (yes, other, none int, first error) {
	for _, x := range rs {
		n, err := integer(x)
		switch {
		case err != nil:
			if first == nil {
				first = err
			}
		case n > 0:
			yes++
		case n < 0:
			other++
		default:
			none++
		}
	}
	return yes, other, none, first
}

// Refresh gives l ttl more from now on every server where it still holds
// the key, and returns it with its new validity if a majority did. It
// answers ErrStolen if a higher priority took it, ErrExpired if the key
// has expired or was released; ErrNoQuorum leaves the outcome unknown.
func (p *Priority) Refresh(ctx context.Context, l Lease, ttl time.Duration) (Lease, error) {
	if err := checkArgs(l.Key, ttl); err != nil {
		return Lease{}, err
	}
	p.mu.Lock()
	h := p.holds[l.Token]
	p.mu.Unlock()
	if h != nil && h.isLost() {
		// Known lost: a server may still name l its holder (a thief's
		// undo put it back there), which a refresh would keep alive
		// past l's deadline for a holder who will never acknowledge the
		// next thief, who then waits in vain (prove --kind
		// priority-redlock --seed 1, plan 12,833).
		return Lease{}, fmt.Errorf("%w: refresh of %s", ErrStolen, l.Key)
	}
	start := p.env.Now()
	yes, other, no, first := countPrio(p.each(ctx, p.o.timeout(ttl), script(refreshPrioSrc, []string{lockKey(l.Key)}, l.Token, ms(ttl))))
	q := p.quorum()
	switch {
	case h != nil && h.isLost():
		return Lease{}, fmt.Errorf("%w: refresh of %s", ErrStolen, l.Key)
	case yes >= q:
	case other > 0 && other+no > p.n()-q:
		p.giveUp(ctx, l, start, yes)
		return Lease{}, fmt.Errorf("%w: refresh of %s", ErrStolen, l.Key)
	case other+no > p.n()-q:
		p.giveUp(ctx, l, start, yes)
		return Lease{}, fmt.Errorf("%w: refresh of %s", ErrExpired, l.Key)
	default:
		return Lease{}, fmt.Errorf("%w: refresh of %s: %d of %d servers did it, %d needed: %v", ErrNoQuorum, l.Key, yes, p.n(), q, first)
	}
	until := start + int64(ttl-p.o.drift(ttl))
	end := p.env.Now()
	if h != nil {
		h.setUntil(max(h.getUntil(), until))
	} else { // its watchers had ended with its validity
		p.startWatch(l.Key, l.Token, ttl, until, true)
	}
	if until <= end {
		return Lease{}, fmt.Errorf("%w: refresh of %s took %v of a ttl of %v", ErrNoValidity, l.Key, time.Duration(end-start), ttl)
	}
	l.ValidUntil, l.Validity = until, time.Duration(until-end)
	return l, nil
}

// giveUp deletes l's key where a refresh that began once l was over (by
// its own clock, at start) and found it gone extended it (yes servers):
// left there, it would outlive l for a holder that answers no thief, and
// the next thief of higher priority would wait for its acknowledgement
// in vain (prove --kind priority-redlock --seed 1, plan 31,723: a key a
// partition had set late still lived on one server when the lease
// expired, and the failed refresh gave it a second life). Within l's
// validity it deletes nothing: the refresh may have met a thief whose
// acquire then failed, and l is still valid, as the holder was told
// nothing (deleting the key there let a third acquire in: a double hold).
func (p *Priority) giveUp(ctx context.Context, l Lease, start int64, yes int) {
	if yes > 0 && start >= l.ValidUntil {
		p.releaseAll(ctx, l.Key, l.Token)
	}
}

// Release deletes l's key on every server where l still holds it, and
// stops its watchers; it succeeds if a majority held it. It answers
// ErrStolen or ErrExpired when l no longer held it; ErrNoQuorum leaves the
// outcome unknown.
func (p *Priority) Release(ctx context.Context, l Lease) error {
	if err := checkArgs(l.Key, time.Millisecond); err != nil {
		return err
	}
	p.mu.Lock()
	h := p.holds[l.Token]
	p.mu.Unlock()
	began := p.env.Now()
	// The watchers listen on while the release runs: a thief's note
	// that comes meanwhile is heard and acknowledged (the release
	// deletes the note list only where it deleted its own key).
	yes, other, none, first := p.releaseAll(ctx, l.Key, l.Token)
	if h != nil {
		p.drop(h)
	}
	if other > 0 {
		// Taken meanwhile: a thief's note, come or to come, waits
		// where the thief holds the key (the release left the note list
		// there), and the thief waits for it to be acknowledged.
		ttl := p.untilDur(l.ValidUntil)
		if h != nil {
			ttl = h.ttl
		}
		p.listenAfterFailure(l.Key, l.Token, max(ttl, p.o.opTimeout()))
	}
	q := p.quorum()
	switch {
	case yes >= q:
		return nil
	case other+none > p.n()-q && yes > 0 && other > 0 && began < l.ValidUntil && !(h != nil && h.isLost()):
		// A thief holds the key where the lease does not, and has not
		// yet been told the lease is gone (not lost): it waits for this
		// holder's acknowledgement, so the lease was valid until this
		// release, which ended it (and acknowledged the thief's notes, or
		// will). Released, certainly: no fault is needed for a thief to
		// race a release, so an unknown here would leave a client
		// without an answer where nothing is broken.
		return nil
	case other+none > p.n()-q && yes > 0 && began < l.ValidUntil && !(h != nil && h.isLost()):
		// It deleted the key somewhere, within the lease's validity, not
		// yet known lost: it may have ended a lease still valid
		// (Redlock's ErrPartial), even where a thief holds the rest.
		// Begun after, the lease had expired by its own clock, as
		// Redlock answers.
		return fmt.Errorf("%w: release of %s: %d of %d servers held it", ErrPartial, l.Key, yes, p.n())
	case other+none > p.n()-q: // no majority held it
		if other > 0 || h != nil && h.isLost() {
			return fmt.Errorf("%w: release of %s", ErrStolen, l.Key)
		}
		return fmt.Errorf("%w: release of %s", ErrExpired, l.Key)
	}
	return fmt.Errorf("%w: release of %s: %d of %d servers held it, %d needed: %v", ErrNoQuorum, l.Key, yes, p.n(), q, first)
}

// Verify tells whether l is still held: not marked lost, its validity not
// passed, and a majority of the servers still hold its token.
func (p *Priority) Verify(ctx context.Context, l Lease) (bool, error) {
	p.mu.Lock()
	h := p.holds[l.Token]
	p.mu.Unlock()
	if h != nil && h.isLost() || p.env.Now() >= l.ValidUntil {
		return false, nil
	}
	held, other, none, first := p.holders(ctx, l.Key, l.Token, p.o.opTimeout())
	q := p.quorum()
	if held < q && other+none <= p.n()-q {
		return false, fmt.Errorf("redlock: verify of %s: %d of %d servers answered that it holds: %v", l.Key, held, p.n(), first)
	}
	return held >= q && p.env.Now() < l.ValidUntil && !(h != nil && h.isLost()), nil
}
