package redisserve_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockprover/lockprover/adapters/process"
	"github.com/lockprover/lockprover/adapters/served/redisserve"
	"github.com/lockprover/lockprover/sim/redissim"
)

// A client is a real client beside the World's process wp, served as sp.
type client func(w *redissim.World, wp *redissim.Process, sp *redisserve.Process) error

// serve runs each client, in a goroutine of its own, as the World's
// process of its name (in sorted order of names), and returns what the
// World and the served servers saw.
func serve(t *testing.T, wo redissim.Options, o redisserve.Options, clients map[string]client) (*redissim.World, *redisserve.Broker, map[string]error) {
	t.Helper()
	w, err := redissim.New(wo)
	if err != nil {
		t.Fatal(err)
	}
	s := redisserve.New(w, o)
	defer s.Close()
	var mu sync.Mutex
	errs := map[string]error{}
	names := make([]string, 0, len(clients))
	for n := range clients {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, name := range names {
		w.Go(name, func(wp *redissim.Process) {
			sp, err := s.Process(wp)
			if err != nil {
				mu.Lock()
				errs[name] = err
				mu.Unlock()
				return
			}
			done := make(chan struct{})
			go func() {
				defer close(done)
				err := clients[name](w, wp, sp)
				mu.Lock()
				errs[name] = err
				mu.Unlock()
			}()
			if sp.Await(done, time.After(30*time.Second), nil) != process.Ready {
				mu.Lock()
				errs[name] = errors.New("the client did not finish in 30 s")
				mu.Unlock()
			}
		})
	}
	if err := w.Run(); err != nil {
		t.Fatal(err)
	}
	return w, s, errs
}

// goRedis is go-redis's client of server i of sp, one connection at most
// (so that the log is the same from run to run), no retries.
func goRedis(sp *redisserve.Process, i int) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: sp.Addrs()[i], PoolSize: 1, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: 2 * time.Second})
}

func check(errs map[string]error, t *testing.T) {
	t.Helper()
	for n, err := range errs {
		if err != nil {
			t.Errorf("%s: %v", n, err)
		}
	}
}

func expect(what string, got, want any) error {
	if !equal(got, want) {
		return errors.New(what + ": got " + show(got) + ", want " + show(want))
	}
	return nil
}

func show(v any) string {
	switch v := v.(type) {
	case error:
		return "error " + v.Error()
	case nil:
		return "nil"
	}
	return strings.TrimSpace(strings.ReplaceAll(fmtAny(v), "\n", " "))
}

// release is the compare-and-delete every Redis lock releases with.
const release = `if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end`

// go-redis, unmodified, on the served simulator: SET NX PX, GET, DEL,
// a release script by EVAL and by EVALSHA after SCRIPT LOAD, pcall and
// error_reply, and PTTL after virtual time passed (the key expires by the
// simulated clock, not the wall clock).
func TestGoRedisOnTheSimulator(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, s, errs := serve(t, redissim.Options{}, redisserve.Options{}, map[string]client{"c1": func(w *redissim.World, wp *redissim.Process, sp *redisserve.Process) error {
		c := goRedis(sp, 0)
		defer c.Close()
		steps := []struct {
			what      string
			got, want any
		}{}
		add := func(what string, got, want any) {
			steps = append(steps, struct {
				what      string
				got, want any
			}{what, got, want})
		}
		ok, err := c.SetNX(ctx, "lock", "tok1", 1500*time.Millisecond).Result()
		add("SET NX PX", errOr(ok, err), true)
		ok, err = c.SetNX(ctx, "lock", "tok2", 1500*time.Millisecond).Result()
		add("SET NX PX again", errOr(ok, err), false)
		v, err := c.Get(ctx, "lock").Result()
		add("GET", errOr(v, err), "tok1")
		n, err := c.Eval(ctx, release, []string{"lock"}, "tok2").Result()
		add("release by another", errOr(n, err), int64(0))
		sha, err := c.ScriptLoad(ctx, release).Result()
		add("SCRIPT LOAD", errOr(sha, err), redissim.ScriptSHA1(release))
		ex, err := c.ScriptExists(ctx, sha, "0000").Result()
		add("SCRIPT EXISTS", errOr(ex, err), []bool{true, false})
		n, err = c.EvalSha(ctx, sha, []string{"lock"}, "tok1").Result()
		add("EVALSHA release", errOr(n, err), int64(1))
		n, err = c.Del(ctx, "lock").Result()
		add("DEL of nothing", errOr(n, err), int64(0))
		_, err = c.Eval(ctx, `local r = redis.pcall("incr", KEYS[1]) if type(r) == "table" and r.err then return redis.error_reply("LOCKED " .. r.err) end return r`, []string{"s"}).Result()
		c.Set(ctx, "s", "x", 0)
		_, err = c.Eval(ctx, `local r = redis.pcall("incr", KEYS[1]) if type(r) == "table" and r.err then return redis.error_reply("LOCKED " .. r.err) end return r`, []string{"s"}).Result()
		add("pcall and error_reply", err, errors.New("LOCKED ERR value is not an integer or out of range"))
		_, err = c.Eval(ctx, `return redis.call("incr", KEYS[1])`, []string{"s"}).Result()
		add("call's error raised", err, errors.New("ERR value is not an integer or out of range script: "+redissim.ScriptSHA1(`return redis.call("incr", KEYS[1])`)+", on @user_script:1."))
		st, err := c.Eval(ctx, `return redis.status_reply("FINE")`, nil).Result()
		add("status_reply", errOr(st, err), "FINE")
		arr, err := c.Eval(ctx, `return {1, "two", false, 4.7}`, nil).Result()
		add("a table", errOr(arr, err), []any{int64(1), "two", nil, int64(4)})
		arr, err = c.Eval(ctx, `return {1, nil, 3}`, nil).Result()
		add("a table with a hole", errOr(arr, err), []any{int64(1)})
		c.Set(ctx, "lease", "tok", 1000*time.Millisecond)
		start := time.Now()
		sp.Do(func() { wp.Sleep(600 * time.Millisecond) })
		ms, err := c.PTTL(ctx, "lease").Result()
		add("PTTL after 600 ms of virtual time", errOr(ms, err), 400*time.Millisecond)
		sp.Do(func() { wp.Sleep(time.Second) })
		v2, err := c.Get(ctx, "lease").Result()
		add("GET once expired", errOr(v2, err), redis.Nil)
		if real := time.Since(start); real > 900*time.Millisecond {
			add("real time", real, "less than the virtual time")
		}
		var bad []string
		for _, st := range steps {
			if err := expect(st.what, st.got, st.want); err != nil {
				bad = append(bad, err.Error())
			}
		}
		if len(bad) > 0 {
			return errors.New(strings.Join(bad, "\n"))
		}
		return nil
	}})
	check(errs, t)
	if u := s.Unserved(); len(u) > 0 {
		t.Errorf("unserved: %q", u)
	}
	if r := s.Refused(); len(r) > 0 {
		t.Errorf("refused: %q", r)
	}
	t.Logf("log: %q", s.Log()["c1"])
}

func errOr(v any, err error) any {
	if err != nil {
		return err
	}
	return v
}
