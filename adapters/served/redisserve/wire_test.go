package redisserve_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockprover/lockprover/adapters/served/redisserve"
	"github.com/lockprover/lockprover/sim/redissim"
)

// A command the simulator does not serve gets Redis's own refusal and is
// named; bad RESP gets Redis's protocol error, the connection closes, and
// it is named.
func TestUnservedAndBadInput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var raw string
	_, s, errs := serve(t, redissim.Options{}, redisserve.Options{}, map[string]client{"c1": func(w *redissim.World, wp *redissim.Process, sp *redisserve.Process) error {
		c := goRedis(sp, 0)
		defer c.Close()
		err := c.Do(ctx, "sadd", "s", "m").Err()
		if err == nil || err.Error() != "ERR unknown command 'sadd', with args beginning with: 's' 'm' " {
			return fmt.Errorf("SADD: %v", err)
		}
		if err := c.Ping(ctx).Err(); err != nil {
			return fmt.Errorf("PING after: %v", err)
		}
		nc, err := net.Dial("tcp", sp.Addrs()[0])
		if err != nil {
			return err
		}
		defer nc.Close()
		nc.Write([]byte("*abc\r\n"))
		nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		b, err := io.ReadAll(nc)
		raw = string(b)
		return err
	}})
	check(errs, t)
	if raw != "-ERR Protocol error: invalid multibulk length\r\n" {
		t.Errorf("bad input answered %q", raw)
	}
	if u := s.Unserved(); !slices.Equal(u, []string{"SADD"}) {
		t.Errorf("unserved %q, want SADD", u)
	}
	if r := s.Refused(); len(r) != 1 || !strings.Contains(r[0], "invalid multibulk length") {
		t.Errorf("refused %q", r)
	}
}

// contend is two clients taking the lock "lk" with SET NX PX on server
// 0, counting with INCR, and releasing with the script: the holders' log
// lines say who held when.
func contend(name string) client {
	return func(w *redissim.World, wp *redissim.Process, sp *redisserve.Process) error {
		ctx := context.Background()
		c := goRedis(sp, 0)
		defer c.Close()
		for i := range 3 {
			ok, err := c.SetNX(ctx, "lk", fmt.Sprintf("%s-%d", name, i), time.Second).Result()
			if err != nil {
				return err
			}
			if err := c.Incr(ctx, "n").Err(); err != nil {
				return err
			}
			if ok {
				if err := c.Eval(ctx, release, []string{"lk"}, fmt.Sprintf("%s-%d", name, i)).Err(); err != nil {
					return err
				}
			}
		}
		return nil
	}
}

// Two processes' commands interleave as the World's Decider says; a
// replay given the log takes the same steps: the same log, the same trace
// of the World byte for byte.
func TestInterleaveAndReplay(t *testing.T) {
	t.Parallel()
	run := func(script map[string][]string) (string, *redisserve.Broker) {
		var trace bytes.Buffer
		r := rand.New(rand.NewSource(7))
		_, s, errs := serve(t, redissim.Options{Trace: &trace, Decide: func(n int) int { return r.Intn(n) }},
			redisserve.Options{Script: script}, map[string]client{"c1": contend("c1"), "c2": contend("c2")})
		check(errs, t)
		return trace.String(), s
	}
	trace, s := run(nil)
	if !strings.Contains(trace, "s0 <- c1: set lk") || !strings.Contains(trace, "s0 <- c2: set lk") {
		t.Fatalf("the trace has not both clients' commands:\n%s", trace)
	}
	if !strings.Contains(trace, `incr n -> 6`) {
		t.Errorf("six INCRs did not count to 6:\n%s", trace)
	}
	trace2, s2 := run(s.Log())
	if d := s2.Diverged(); len(d) > 0 {
		t.Fatalf("diverged: %q", d)
	}
	for _, n := range []string{"c1", "c2"} {
		if got, want := s2.Log()[n], s.Log()[n]; !slices.Equal(got, want) {
			t.Errorf("%s replayed %q\nthe log was %q", n, got, want)
		}
	}
	if trace2 != trace {
		t.Errorf("the replay's trace differs:\n%s\nthe run's:\n%s", trace2, trace)
	}
}

// Faults reach the client as on a real server: a paused server leaves a
// command unanswered (the client times out), then answers once resumed;
// a lost reply resets the connection, the command having run;
// a crashed server resets its connections and refuses dials at its port
// while down; restarted without persistence it has lost its keys, and
// the port is the same.
func TestFaultsOnTheWire(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var trace bytes.Buffer
	_, s, errs := serve(t, redissim.Options{Trace: &trace}, redisserve.Options{}, map[string]client{"c1": func(w *redissim.World, wp *redissim.Process, sp *redisserve.Process) error {
		c := redis.NewClient(&redis.Options{Addr: sp.Addrs()[0], PoolSize: 1, MaxRetries: -1, DialerRetries: 1, DialTimeout: time.Second, ReadTimeout: 300 * time.Millisecond})
		defer c.Close()
		if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
			return err
		}
		sp.Do(func() { w.Pause(0) })
		if err := c.Get(ctx, "k").Err(); err == nil || !strings.Contains(err.Error(), "timeout") {
			return fmt.Errorf("GET while paused: %v, want a timeout", err)
		}
		sp.Do(func() { w.Resume(0) })
		if v, err := c.Get(ctx, "k").Result(); err != nil || v != "v" {
			return fmt.Errorf("GET once resumed: %q %v", v, err)
		}
		sp.Do(func() { w.DropReply("c1", 0) })
		if err := c.Set(ctx, "k", "v2", 0).Err(); err == nil {
			return errors.New("SET whose reply was lost: no error")
		}
		if v, err := c.Get(ctx, "k").Result(); err != nil || v != "v2" {
			return fmt.Errorf("GET after a lost reply: %q %v, want v2 (the SET ran)", v, err)
		}
		sp.Do(func() { w.Restart(0, time.Second) })
		err := c.Get(ctx, "k").Err()
		var op *net.OpError
		if err == nil || !errors.As(err, &op) && !strings.Contains(err.Error(), "refused") && !strings.Contains(err.Error(), "reset") && !errors.Is(err, io.EOF) {
			return fmt.Errorf("GET while down: %v, want a refused or reset connection", err)
		}
		if _, err := net.DialTimeout("tcp", sp.Addrs()[0], time.Second); err == nil || !strings.Contains(err.Error(), "refused") {
			return fmt.Errorf("a dial while down: %v, want refused", err)
		}
		sp.Do(func() { wp.Sleep(2 * time.Second) })
		// go-redis's pool, once a dial failed, answers its error until a
		// dial in the background (each second) succeeds: a new client.
		c2 := goRedis(sp, 0)
		defer c2.Close()
		if err := c2.Get(ctx, "k").Err(); err != redis.Nil {
			return fmt.Errorf("GET once restarted without persistence: %v, want nil", err)
		}
		return nil
	}})
	check(errs, t)
	if u := s.Unserved(); len(u) > 0 {
		t.Errorf("unserved %q", u)
	}
	if t.Failed() {
		t.Logf("trace:\n%s\nlog %q", trace.String(), s.Log()["c1"])
	}
}

// With N servers each process gets N ports, and a connection through the
// i-th talks to server i alone; a MULTI/EXEC goes to its server as one
// transaction.
func TestAPortPerServer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w, s, errs := serve(t, redissim.Options{Servers: 3}, redisserve.Options{}, map[string]client{"c1": func(w *redissim.World, wp *redissim.Process, sp *redisserve.Process) error {
		if n := len(sp.Addrs()); n != 3 {
			return fmt.Errorf("%d ports for 3 servers", n)
		}
		for i := range 3 {
			c := goRedis(sp, i)
			defer c.Close()
			if _, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
				p.Set(ctx, fmt.Sprintf("k%d", i), "v", 0)
				p.Incr(ctx, "n")
				return nil
			}); err != nil {
				return err
			}
		}
		return nil
	}})
	check(errs, t)
	for i := range 3 {
		keys, _ := w.Keys(i)
		if want := []string{fmt.Sprintf("k%d=v", i), "n=1"}; !slices.Equal(keys, want) {
			t.Errorf("server %d holds %q, want %q", i, keys, want)
		}
	}
	if u := s.Unserved(); len(u) > 0 {
		t.Errorf("unserved %q", u)
	}
}

// Nothing a served World opens outlives its Close: every goroutine (the
// ports' accepts, each connection's reader) has ended, also for a
// connection the client left open.
func TestCloseLeavesNothing(t *testing.T) {
	// A World leaves its idle coroutines for the next (sched.Pool): one
	// run first, so that they are counted before.
	serve(t, redissim.Options{}, redisserve.Options{}, map[string]client{"c1": func(*redissim.World, *redissim.Process, *redisserve.Process) error { return nil }})
	before := runtime.NumGoroutine()
	var left net.Conn
	serve(t, redissim.Options{Servers: 2}, redisserve.Options{}, map[string]client{"c1": func(w *redissim.World, wp *redissim.Process, sp *redisserve.Process) error {
		var err error
		left, err = net.Dial("tcp", sp.Addrs()[1])
		return err
	}})
	defer left.Close()
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<16)
		t.Fatalf("%d goroutines left of %d before:\n%s", n, before, buf[:runtime.Stack(buf, true)])
	}
}

// A process killed in the World loses its connections as a crashed
// client does: its blocked BLPOP is forgotten by its server, and takes
// nothing pushed after.
func TestKilledProcessForgotten(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var pushed []string
	_, _, errs := serve(t, redissim.Options{}, redisserve.Options{}, map[string]client{
		"c1": func(w *redissim.World, wp *redissim.Process, sp *redisserve.Process) error {
			c := goRedis(sp, 0)
			defer c.Close()
			c.Options().ReadTimeout = -1
			c.BLPop(ctx, 0, "q") // ends when the process is killed
			return nil
		},
		"c2": func(w *redissim.World, wp *redissim.Process, sp *redisserve.Process) error {
			c := goRedis(sp, 0)
			defer c.Close()
			time.Sleep(300 * time.Millisecond) // c1 blocks meanwhile
			sp.Do(func() { w.Kill("c1") })
			if err := c.RPush(ctx, "q", "x").Err(); err != nil {
				return err
			}
			var err error
			pushed, err = c.LRange(ctx, "q", 0, -1).Result()
			return err
		},
	})
	if errs["c2"] != nil {
		t.Fatal(errs["c2"])
	}
	if !slices.Equal(pushed, []string{"x"}) {
		t.Errorf("the list holds %q once the blocked process was killed, want [x]", pushed)
	}
}

// A lost reply loses the reply to a command of the lock's that changed
// what it may have changed, as the real servers' proxy does: not a
// NOSCRIPT, which the client answers itself with an EVAL. go-redis's
// Script.Run sends EVALSHA, reads NOSCRIPT, sends EVAL: the EVAL's reply
// is the one lost, after the script ran.
func TestLostReplySparesNoScript(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var trace bytes.Buffer
	_, _, errs := serve(t, redissim.Options{Trace: &trace}, redisserve.Options{}, map[string]client{"c1": func(w *redissim.World, wp *redissim.Process, sp *redisserve.Process) error {
		c := redis.NewClient(&redis.Options{Addr: sp.Addrs()[0], PoolSize: 1, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: time.Second})
		defer c.Close()
		sp.Do(func() { w.DropReply("c1", 0) })
		script := redis.NewScript(`return redis.call('SET', KEYS[1], ARGV[1])`)
		if err := script.Run(ctx, c, []string{"k"}, "v").Err(); err == nil {
			return errors.New("a script whose EVAL's reply was lost: no error")
		}
		if v, err := c.Get(ctx, "k").Result(); err != nil || v != "v" {
			return fmt.Errorf("GET after the lost EVAL reply: %q %v, want v (the EVAL ran)", v, err)
		}
		return nil
	}})
	check(errs, t)
	if !strings.Contains(trace.String(), "NOSCRIPT") || !strings.Contains(trace.String(), "the reply is lost") {
		t.Errorf("the trace shows no NOSCRIPT then a lost reply:\n%s", trace.String())
	}
}
