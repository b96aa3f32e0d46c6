package redlockrun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/lockprover/lockprover/adapters/servers/redis"
	"github.com/lockprover/lockprover/adapters/servers/versions"
	"github.com/lockprover/lockprover/internal/prover/bench"
	"github.com/lockprover/lockprover/model/redlock"
)

// The bench's series: the reference's operations and their floors.
const (
	rbAcquire, rbHeld, rbRefresh, rbRelease = "acquire", "acquire-held", "refresh", "release"
	rbSteal                                 = "steal"
	rfAcquire, rfHeld, rfRefresh, rfRelease = "F1", "F2", "F3", "F4"
)

// A floorSet is what one server must do for each operation of a kind, as
// its reference's scripts do it, sent raw by go-redis's Script.Run: the
// scripts, the keys of a lock on key, an acquire's arguments, and whether
// a server's answer to each granted (or found the token).
type floorSet struct {
	acquire, refresh, release *goredis.Script
	keys                      func(key string) (lock, fence string)
	acquireArgs               func(token string, ms int64) []any
	granted                   func(*goredis.Cmd) bool
	// what says what each floor sends, in the report's words.
	what [4]string
}

// positive says a script answered an integer above 0.
func positive(c *goredis.Cmd) bool {
	n, err := c.Int64()
	return err == nil && n > 0
}

// redlockFloors are Redlock's: SET NX PX and the fence's INCR; compare
// and PEXPIRE; compare and DEL.
var redlockFloors = floorSet{
	acquire: goredis.NewScript(`if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return redis.call('INCR', KEYS[2]) end return 0`),
	refresh: goredis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0`),
	release: goredis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`),
	keys:    func(key string) (string, string) { return key, key + "-fence" },
	acquireArgs: func(token string, ms int64) []any {
		return []any{token, ms}
	},
	granted: positive,
	what: [4]string{"SET key token NX PX ttl, then INCR the fence counter", "the same, on a key another token holds (SET refused)",
		"GET key, compare the token, PEXPIRE", "GET key, compare the token, DEL"},
}

// priorityFloors are the priority Redlock's: its own obtain, refresh and
// release scripts (redlock.ScriptSources), at priority 1.
var priorityFloors = floorSet{
	acquire: goredis.NewScript(redlock.ScriptSources()["obtain"]),
	refresh: goredis.NewScript(redlock.ScriptSources()["refreshPrio"]),
	release: goredis.NewScript(redlock.ScriptSources()["releasePrio"]),
	keys:    func(key string) (string, string) { return "{" + key + "}:lock", "{" + key + "}:fence" },
	acquireArgs: func(token string, ms int64) []any {
		return []any{token, 1, ms, "0", "0"}
	},
	granted: func(c *goredis.Cmd) bool {
		r, err := c.Slice()
		return err == nil && len(r) > 0 && r[0] != int64(0)
	},
	what: [4]string{"the obtain script on a free key (HSET the holder, INCR the fence counter, PEXPIRE)",
		"the same, on a key a holder of equal priority holds (refused)", "the refresh script: HGET the holder, compare, PEXPIRE",
		"the release script: HGET the holder, compare, DEL the key and its note list"},
}

// Bench is bench --kind redlock (or, with priority, --kind
// priority-redlock): the reference on n private redis-servers it starts
// with o (the machine's redis-server, or a version's), beside floors:
// each operation's commands sent raw, one per server at once, with no
// lock library. What each sent is
// counted by command (EVALSHA for a script) and round. The priority
// reference's clients have priority 1, and a steal is measured too: a
// client of priority 2 takes the lock from one of priority 1 in a lock
// handle of its own, which acknowledges. The servers are stopped however
// it ends; an interrupted run's error wraps ctx's.
func Bench(ctx context.Context, n int, o redis.Options, priority bool, c bench.Config, out io.Writer) error {
	dir, err := os.MkdirTemp("", "lockprover-bench-redis-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	servers, err := redis.StartN(ctx, dir, n, o)
	if err != nil {
		return err
	}
	defer redis.StopAll(servers)
	b := &redisBench{ctx: ctx, run: bench.New(c), ttl: time.Minute, floors: redlockFloors, kind: Kind}
	var addrs []string
	for _, s := range servers {
		addrs = append(addrs, s.Addr())
		b.raw = append(b.raw, goredis.NewClient(&goredis.Options{Addr: s.Addr(), PoolSize: 1}))
	}
	defer func() {
		for _, r := range b.raw {
			r.Close()
		}
	}()
	if err := b.open(addrs, priority); err != nil {
		return err
	}
	defer b.rl.Close()
	if b.victim != nil {
		defer b.victim.Close()
	}
	err = b.measure()
	if ctx.Err() != nil {
		return fmt.Errorf("interrupted; its servers are stopped: %w", ctx.Err())
	}
	if err != nil {
		return err
	}
	b.report(out, n, o.Version)
	return nil
}

// open makes the reference on addrs, counting what it sends: Redlock, or
// the priority Redlock (a client of priority 1, and the victim of the
// steal's, of its own).
func (b *redisBench) open(addrs []string, priority bool) error {
	b.tally = &tally{sent: map[string]int{}}
	// A generous bound on each server's answer: a measurement is not a
	// race, and a fresh server beside CI's suite once took over a second
	// for the first script.
	o := redlock.Options{Timeout: 10 * time.Second}
	if !priority {
		rl, err := redlock.NewOn(&countingEnv{Env: redlock.RedisEnv(addrs), tally: b.tally}, o)
		b.rl = rl
		return err
	}
	b.floors, b.kind = priorityFloors, PriorityKind
	pl, err := redlock.NewPriorityOn(&countingPriorityEnv{PriorityEnv: redlock.RedisPriorityEnv(addrs), tally: b.tally}, o)
	if err != nil {
		return err
	}
	b.rl = priorityClient{pl, 1}
	victim, err := redlock.NewPriority(addrs, o)
	if err != nil {
		pl.Close()
		return err
	}
	b.victim = victim
	return nil
}

type redisBench struct {
	ctx    context.Context
	run    *bench.Run
	tally  *tally
	rl     Client
	victim *redlock.Priority // the steal's victim (the priority Redlock's)
	raw    []*goredis.Client // one per server, for the floors
	ttl    time.Duration
	floors floorSet
	kind   string
}

// tally counts what the lock sends: each command by name (EVALSHA for a
// script, as go-redis sends it first; one to each server per round).
type tally struct {
	mu   sync.Mutex
	sent map[string]int
}

func (t *tally) count(cmds []redlock.Cmd) {
	t.mu.Lock()
	for _, c := range cmds {
		if c.Script != "" || len(c.Args) > 0 || len(c.Tx) > 0 { // not a server left out
			t.sent[cmdName(c)]++
		}
	}
	t.mu.Unlock()
}

// countingEnv is the real Env, counting what the lock sends.
type countingEnv struct {
	redlock.Env
	tally *tally
}

func (e *countingEnv) Round(ctx context.Context, timeout time.Duration, cmds []redlock.Cmd) []redlock.Result {
	e.tally.count(cmds)
	return e.Env.Round(ctx, timeout, cmds)
}

// countingPriorityEnv is the priority lock's real PriorityEnv, counting
// what its operations send (not its watchers' blocking pops).
type countingPriorityEnv struct {
	redlock.PriorityEnv
	tally *tally
}

func (e *countingPriorityEnv) Send(ctx context.Context, timeout time.Duration, cmds []redlock.Cmd) []redlock.Result {
	e.tally.count(cmds)
	return e.PriorityEnv.Send(ctx, timeout, cmds)
}

func cmdName(c redlock.Cmd) string {
	switch {
	case len(c.Tx) > 0:
		return "MULTI"
	case c.Script != "" || len(c.Args) == 0:
		return "EVALSHA"
	}
	return strings.ToUpper(c.Args[0])
}

// time runs f as one measured operation of series key of the reference,
// with what it sent.
func (b *redisBench) time(key string, f func() error) error {
	b.tally.mu.Lock()
	b.tally.sent = map[string]int{}
	b.tally.mu.Unlock()
	return b.run.Time(key, f, func() map[string]int {
		b.tally.mu.Lock()
		defer b.tally.mu.Unlock()
		return maps.Clone(b.tally.sent)
	})
}

// measure runs each operation and its floor, in a fresh random order each
// iteration, on keys of their own.
func (b *redisBench) measure() error {
	held, err := b.rl.Acquire(b.ctx, "held", b.ttl)
	if err != nil {
		return err
	}
	defer b.rl.Release(context.Background(), held)
	if ok, err := b.floor(b.floors.acquire, b.floors.granted, "floor-held", b.floors.acquireArgs("holder", b.ttl.Milliseconds())...); err != nil || !ok {
		return fmt.Errorf("the floor's held key: %v", err)
	}
	steps := []func() error{b.acquire, b.held, b.refresh, b.release, b.floorAcquire, b.floorHeld, b.floorRefreshRelease}
	if b.victim != nil {
		steps = append(steps, b.steal)
	}
	return b.run.Loop(b.ctx, b.kind, steps...)
}

// steal: a steal of the priority Redlock (priority 2) from a holder of
// priority 1 (the victim's own handle, granted untimed), which
// acknowledges; then, untimed, both releases.
func (b *redisBench) steal() error {
	v, err := b.victim.Acquire(b.ctx, "s", b.ttl, 1)
	if err != nil {
		return err
	}
	thief := priorityClient{b.rl.(priorityClient).Priority, 2}
	var l redlock.Lease
	if err := b.time(rbSteal, func() (err error) { l, err = thief.Acquire(b.ctx, "s", b.ttl); return }); err != nil {
		return err
	}
	// The thief's release first: the victim's then finds the key free
	// and its lease marked lost, so that it leaves no watchers listening.
	if err := b.rl.Release(b.ctx, l); err != nil {
		return err
	}
	if err := b.victim.Release(b.ctx, v); !errors.Is(err, redlock.ErrStolen) {
		return fmt.Errorf("the victim's release after the steal: %v, want stolen", err)
	}
	return nil
}

// acquire: a free key's acquire (then, untimed, its release).
func (b *redisBench) acquire() error {
	var l redlock.Lease
	if err := b.time(rbAcquire, func() (err error) { l, err = b.rl.Acquire(b.ctx, "k", b.ttl); return }); err != nil {
		return err
	}
	return b.rl.Release(b.ctx, l)
}

// held: an acquire of a key another holds: ErrHeld.
func (b *redisBench) held() error {
	return b.time(rbHeld, func() error {
		_, err := b.rl.Acquire(b.ctx, "held", b.ttl)
		if errors.Is(err, redlock.ErrHeld) {
			return nil
		}
		return fmt.Errorf("want held, got %v", err)
	})
}

// refresh and release of a held lease (acquired untimed).
func (b *redisBench) refresh() error {
	l, err := b.rl.Acquire(b.ctx, "r", b.ttl)
	if err != nil {
		return err
	}
	if err := b.time(rbRefresh, func() (err error) { l, err = b.rl.Refresh(b.ctx, l, b.ttl); return }); err != nil {
		return err
	}
	return b.rl.Release(b.ctx, l)
}

func (b *redisBench) release() error {
	l, err := b.rl.Acquire(b.ctx, "d", b.ttl)
	if err != nil {
		return err
	}
	return b.time(rbRelease, func() error { return b.rl.Release(b.ctx, l) })
}

// floor runs s on every server at once, raw, on the lock of key, and
// says whether every server's answer granted (done, as granted says).
func (b *redisBench) floor(s *goredis.Script, granted func(*goredis.Cmd) bool, key string, args ...any) (bool, error) {
	lock, fence := b.floors.keys(key)
	keys := []string{lock, fence}
	if s != b.floors.acquire {
		keys = keys[:1]
		if s == priorityFloors.release {
			keys = append(keys, "{"+key+"}:note:"+args[0].(string))
		}
	}
	res := make([]*goredis.Cmd, len(b.raw))
	var wg sync.WaitGroup
	for i, c := range b.raw {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[i] = s.Run(b.ctx, c, keys, args...)
		}()
	}
	wg.Wait()
	done := true
	var errs []error
	for _, r := range res {
		errs = append(errs, r.Err())
		done = done && r.Err() == nil && granted(r)
	}
	return done, errors.Join(errs...)
}

// timeFloor runs f as one measured operation of floor series key: one
// EVALSHA per server.
func (b *redisBench) timeFloor(key string, f func() error) error {
	return b.run.Time(key, f, func() map[string]int { return map[string]int{"EVALSHA": len(b.raw)} })
}

// floorAcquire (F1): the grant on the free key "floor", then, untimed,
// its release.
func (b *redisBench) floorAcquire() error {
	args := b.floors.acquireArgs("floor-token", b.ttl.Milliseconds())
	if err := b.timeFloor(rfAcquire, func() error {
		ok, err := b.floor(b.floors.acquire, b.floors.granted, "floor", args...)
		if err == nil && !ok {
			err = errors.New("the floor's key was held")
		}
		return err
	}); err != nil {
		return err
	}
	_, err := b.floor(b.floors.release, positive, "floor", "floor-token")
	return err
}

// floorHeld (F2): the grant on "floor-held", which another token holds.
func (b *redisBench) floorHeld() error {
	return b.timeFloor(rfHeld, func() error {
		ok, err := b.floor(b.floors.acquire, b.floors.granted, "floor-held", b.floors.acquireArgs("floor-token", b.ttl.Milliseconds())...)
		if err == nil && ok {
			err = errors.New("the floor's held key was granted")
		}
		return err
	})
}

// floorRefreshRelease (F3, F4): a refresh and a release of a grant of the
// floor's own (made untimed).
func (b *redisBench) floorRefreshRelease() error {
	ms := b.ttl.Milliseconds()
	if _, err := b.floor(b.floors.acquire, b.floors.granted, "floor", b.floors.acquireArgs("floor-token", ms)...); err != nil {
		return err
	}
	for _, f := range []struct {
		key    string
		script *goredis.Script
		args   []any
	}{{rfRefresh, b.floors.refresh, []any{"floor-token", ms}}, {rfRelease, b.floors.release, []any{"floor-token"}}} {
		if err := b.timeFloor(f.key, func() error {
			ok, err := b.floor(f.script, positive, "floor", f.args...)
			if err == nil && !ok {
				err = fmt.Errorf("the floor's %s found no key", f.key)
			}
			return err
		}); err != nil {
			return err
		}
	}
	return nil
}

// report prints the table: each operation beside its floor.
func (b *redisBench) report(w io.Writer, n int, v versions.Version) {
	servers := "redis-server(s)"
	if v.Rooted() {
		servers = fmt.Sprintf("%s-server(s) %s", v.Server, v.Name)
	}
	fmt.Fprintf(w, "lockprover bench --kind %s: the reference on %d private %s, no persistence, on this machine; %d iterations after %d warm-up; seed %d\n\n",
		b.kind, n, servers, b.run.N, b.run.Warmup, b.run.Seed)
	fmt.Fprintln(w, "| operation | p50 | p99 | mean | sent/op | floor (p50) | ratio |")
	fmt.Fprintln(w, "| --- | --: | --: | --: | --- | --- | --: |")
	for _, r := range [][3]string{
		{"acquire, key free", rbAcquire, rfAcquire},
		{"acquire, key held", rbHeld, rfHeld},
		{"refresh, lease held", rbRefresh, rfRefresh},
		{"release, lease held", rbRelease, rfRelease},
	} {
		s, f := b.run.Stats(r[1]), b.run.Stats(r[2])
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s: %s | %.2fx |\n", r[0], bench.US(s.P50), bench.US(s.P99), bench.US(s.Mean), s.Sent, r[2], bench.US(f.P50), bench.Ratio(s.P50, f.P50))
	}
	if b.victim != nil {
		s := b.run.Stats(rbSteal)
		fmt.Fprintf(w, "| acquire, steal (priority 2 from 1) | %s | %s | %s | %s | none | |\n", bench.US(s.P50), bench.US(s.P99), bench.US(s.Mean), s.Sent)
	}
	counted := "a script as EVALSHA"
	if b.victim != nil {
		counted += ", a transaction as MULTI; not the watchers' blocking pops"
	}
	fmt.Fprintf(w, "\nsent/op counts the commands sent to all %d server(s), one per server and round (%s). Floors: one round, the operation's script on each server at once (go-redis, one connection each), no lock library:\n", n, counted)
	fmt.Fprintln(w, "\n| floor | what | p50 | p99 |")
	fmt.Fprintln(w, "| --- | --- | --: | --: |")
	for i, f := range []string{rfAcquire, rfHeld, rfRefresh, rfRelease} {
		s := b.run.Stats(f)
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", f, b.floors.what[i], bench.US(s.P50), bench.US(s.P99))
	}
}
