package redlock

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

	"github.com/lockprover/lockprover/backends/redis"
	"github.com/lockprover/lockprover/prover/bench"
	"github.com/lockprover/lockprover/redlock"
)

// The bench's series: the reference's operations and their floors.
const (
	rbAcquire, rbHeld, rbRefresh, rbRelease = "acquire", "acquire-held", "refresh", "release"
	rfAcquire, rfHeld, rfRefresh, rfRelease = "F1", "F2", "F3", "F4"
)

// The floors' scripts: what one server must do for each operation, as the
// reference's scripts do it (SET NX PX and the fence's INCR; compare and
// PEXPIRE; compare and DEL), sent by go-redis's Script.Run.
var (
	floorAcquire = goredis.NewScript(`if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return redis.call('INCR', KEYS[2]) end return 0`)
	floorRefresh = goredis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0`)
	floorRelease = goredis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)
)

// Bench is bench --kind redlock: the reference on n private redis-servers
// it starts (bin, "" to look for it), beside floors: each operation's
// commands sent raw, one per server at once, with no lock library. What
// each sent is counted by command (EVALSHA for a script) and round. The
// servers are stopped however it ends; an interrupted run's error wraps
// ctx's.
func Bench(ctx context.Context, n int, bin string, c bench.Config, out io.Writer) error {
	dir, err := os.MkdirTemp("", "lockprover-bench-redis-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	servers, err := redis.StartN(ctx, dir, n, redis.Options{Bin: bin})
	if err != nil {
		return err
	}
	defer redis.StopAll(servers)
	b := &redisBench{ctx: ctx, run: bench.New(c), ttl: time.Minute}
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
	b.env = &countingEnv{Env: redlock.RedisEnv(addrs), sent: map[string]int{}}
	// A generous bound on each server's answer: a measurement is not a
	// race, and a fresh server beside CI's suite once took over a second
	// for the first script.
	if b.rl, err = redlock.NewOn(b.env, redlock.Options{Timeout: 10 * time.Second}); err != nil {
		return err
	}
	defer b.rl.Close()
	err = b.measure()
	if ctx.Err() != nil {
		return fmt.Errorf("interrupted; its servers are stopped: %w", ctx.Err())
	}
	if err != nil {
		return err
	}
	b.report(out, n)
	return nil
}

type redisBench struct {
	ctx context.Context
	run *bench.Run
	env *countingEnv
	rl  *redlock.Redlock
	raw []*goredis.Client // one per server, for the floors
	ttl time.Duration
}

// countingEnv is the real Env, counting what the lock sends: each
// command by name (EVALSHA for a script, as go-redis sends it first; one
// to each server per round).
type countingEnv struct {
	redlock.Env
	mu   sync.Mutex
	sent map[string]int
}

func (e *countingEnv) Round(ctx context.Context, timeout time.Duration, cmds []redlock.Cmd) []redlock.Result {
	e.mu.Lock()
	for _, c := range cmds {
		e.sent[cmdName(c)]++
	}
	e.mu.Unlock()
	return e.Env.Round(ctx, timeout, cmds)
}

func cmdName(c redlock.Cmd) string {
	if c.Script != "" || len(c.Args) == 0 {
		return "EVALSHA"
	}
	return strings.ToUpper(c.Args[0])
}

// time runs f as one measured operation of series key of the reference,
// with what it sent.
func (b *redisBench) time(key string, f func() error) error {
	b.env.mu.Lock()
	b.env.sent = map[string]int{}
	b.env.mu.Unlock()
	return b.run.Time(key, f, func() map[string]int {
		b.env.mu.Lock()
		defer b.env.mu.Unlock()
		return maps.Clone(b.env.sent)
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
	if ok, err := b.floor(floorAcquire, []string{"floor-held", "floor-fence"}, "holder", b.ttl.Milliseconds()); err != nil || !ok {
		return fmt.Errorf("the floor's held key: %v", err)
	}
	return b.run.Loop(b.ctx, "redlock", b.acquire, b.held, b.refresh, b.release, b.floorAcquire, b.floorHeld, b.floorRefreshRelease)
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

// floor runs s on every server at once, raw, and says whether every
// server answered 1 or more (done).
func (b *redisBench) floor(s *goredis.Script, keys []string, args ...any) (bool, error) {
	res := make([]int64, len(b.raw))
	errs := make([]error, len(b.raw))
	var wg sync.WaitGroup
	for i, c := range b.raw {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[i], errs[i] = s.Run(b.ctx, c, keys, args...).Int64()
		}()
	}
	wg.Wait()
	done := true
	for _, r := range res {
		done = done && r > 0
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
	ms := b.ttl.Milliseconds()
	if err := b.timeFloor(rfAcquire, func() error {
		ok, err := b.floor(floorAcquire, []string{"floor", "floor-fence"}, "floor-token", ms)
		if err == nil && !ok {
			err = errors.New("the floor's key was held")
		}
		return err
	}); err != nil {
		return err
	}
	_, err := b.floor(floorRelease, []string{"floor"}, "floor-token")
	return err
}

// floorHeld (F2): the grant on "floor-held", which another token holds.
func (b *redisBench) floorHeld() error {
	return b.timeFloor(rfHeld, func() error {
		ok, err := b.floor(floorAcquire, []string{"floor-held", "floor-fence"}, "floor-token", b.ttl.Milliseconds())
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
	if _, err := b.floor(floorAcquire, []string{"floor", "floor-fence"}, "floor-token", ms); err != nil {
		return err
	}
	for _, f := range []struct {
		key    string
		script *goredis.Script
		args   []any
	}{{rfRefresh, floorRefresh, []any{"floor-token", ms}}, {rfRelease, floorRelease, []any{"floor-token"}}} {
		if err := b.timeFloor(f.key, func() error {
			ok, err := b.floor(f.script, []string{"floor"}, f.args...)
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
func (b *redisBench) report(w io.Writer, n int) {
	fmt.Fprintf(w, "lockprover bench --kind redlock: the reference on %d private redis-server(s), no persistence, on this machine; %d iterations after %d warm-up; seed %d\n\n",
		n, b.run.N, b.run.Warmup, b.run.Seed)
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
	fmt.Fprintf(w, "\nsent/op counts the commands sent to all %d server(s), one per server and round (a script as EVALSHA). Floors: one round, the operation's script on each server at once (go-redis, one connection each), no lock library:\n", n)
	fmt.Fprintln(w, "\n| floor | what | p50 | p99 |")
	fmt.Fprintln(w, "| --- | --- | --: | --: |")
	for _, f := range [][2]string{
		{rfAcquire, "SET key token NX PX ttl, then INCR the fence counter"},
		{rfHeld, "the same, on a key another token holds (SET refused)"},
		{rfRefresh, "GET key, compare the token, PEXPIRE"},
		{rfRelease, "GET key, compare the token, DEL"},
	} {
		s := b.run.Stats(f[0])
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", f[0], f[1], bench.US(s.P50), bench.US(s.P99))
	}
}
