package redissim

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/model/redlock"
)

// Hashes, lists and their types, as Redis answers.
func TestHashesAndLists(t *testing.T) {
	steps(t, Options{}, func(p *Process, w *World) {
		want(t, "hset", p.Do(0, "HSET", "h", "a", "1", "b", "2"), int64(2))
		want(t, "hset again", p.Do(0, "HSET", "h", "a", "3", "c", "4"), int64(1))
		want(t, "hget", p.Do(0, "HGET", "h", "a"), "3")
		want(t, "hget missing", p.Do(0, "HGET", "h", "z"), nil)
		want(t, "hmget", p.Do(0, "HMGET", "h", "b", "z"), []any{"2", nil})
		want(t, "hlen", p.Do(0, "HLEN", "h"), int64(3))
		wantErr(t, "hset odd", p.Do(0, "HSET", "h", "a"), "wrong number")
		wantErr(t, "get of a hash", p.Do(0, "GET", "h"), "WRONGTYPE")
		wantErr(t, "incr of a hash", p.Do(0, "INCR", "h"), "WRONGTYPE")
		want(t, "rpush", p.Do(0, "RPUSH", "l", "x", "y"), int64(2))
		want(t, "lrange", p.Do(0, "LRANGE", "l", "0", "-1"), []any{"x", "y"})
		wantErr(t, "rpush on a hash", p.Do(0, "RPUSH", "h", "x"), "WRONGTYPE")
		wantErr(t, "hget of a list", p.Do(0, "HGET", "l", "a"), "WRONGTYPE")
		want(t, "type", p.Do(0, "TYPE", "l"), "list")
		want(t, "blpop", p.Do(0, "BLPOP", "none", "l", "1"), []any{"l", "x"})
		want(t, "blpop the last", p.Do(0, "BLPOP", "l", "1"), []any{"l", "y"})
		want(t, "an empty list is gone", p.Do(0, "EXISTS", "l"), int64(0))
		wantErr(t, "blpop timeout", p.Do(0, "BLPOP", "l", "x"), "not a float")
		wantErr(t, "blpop negative", p.Do(0, "BLPOP", "l", "-1"), "negative")
		want(t, "pexpire of a hash", p.Do(0, "PEXPIRE", "h", "10"), int64(1))
		p.Sleep(20 * ms)
		want(t, "the hash expired", p.Do(0, "HLEN", "h"), int64(0))
		want(t, "time", p.Do(0, "TIME"), []any{"1735689600", "22100"})
		want(t, "publish to nobody", p.Do(0, "PUBLISH", "ch", "m"), int64(0))
	})
}

// A transaction runs atomically, an error among its commands in its
// answer; one that cannot be queued runs nothing.
func TestTransactions(t *testing.T) {
	steps(t, Options{}, func(p *Process, w *World) {
		env := p.PriorityEnv()
		rs := env.Send(bg, 0, []redlock.Cmd{{Tx: [][]string{{"rpush", "l", "a"}, {"pexpire", "l", "x"}}}})
		if v, ok := rs[0].Val.([]any); !ok || len(v) != 2 || v[0] != int64(1) || rs[0].Err == nil {
			t.Errorf("tx: %+v", rs[0])
		}
		rs = env.Send(bg, 0, []redlock.Cmd{{Tx: [][]string{{"rpush", "l", "b"}, {"pexpire", "l"}}}})
		if rs[0].Err == nil || !strings.HasPrefix(rs[0].Err.Error(), "EXECABORT") {
			t.Errorf("tx with a bad command: %+v", rs[0])
		}
		want(t, "the list", p.Do(0, "LRANGE", "l", "0", "-1"), []any{"a"})
	})
}

// A BLPOP on empty lists waits: a push serves it, after the pushing
// command; its own timeout ends it on the server's clock, which a jump
// brings closer; a paused server times it out only once resumed; a crash
// resets it; a round's timeout abandons it (the server forgets it), but
// through a partition only once healed, and meanwhile a push is lost to
// the dead connection.
func TestBlockingPop(t *testing.T) {
	blpop := func(p *Process, timeout time.Duration, keys ...string) (Result, time.Duration) {
		t0 := p.Now()
		r := p.PriorityEnv().Block(bg, timeout, 0, redlock.Cmd{Args: append([]string{"BLPOP"}, keys...)})
		return Result{Val: r.Val, Err: r.Err}, time.Duration(p.Now() - t0)
	}
	w := world(t, Options{})
	w.Go("a", func(p *Process) {
		r, d := blpop(p, time.Second, "l", "0.5")
		if r.String() != `["l" "x"]` || d != 10*ms+100*time.Microsecond {
			t.Errorf("served: %s after %v", r, d)
		}
		r, d = blpop(p, time.Second, "l", "0.05")
		if r.Err != nil || r.Val != nil || d < 50*ms || d > 52*ms {
			t.Errorf("its timeout: %s after %v", r, d)
		}
		r, d = blpop(p, time.Second, "l", "0.5")
		if r.Err != nil || r.Val != nil || d >= 300*ms {
			t.Errorf("after a clock jump: %s after %v", r, d)
		}
		r, _ = blpop(p, 20*ms, "l", "5")
		if !isTimeout(r.Err) {
			t.Errorf("abandoned: %s", r)
		}
		want(t, "not popped by the abandoned", p.Do(0, "RPUSH", "l", "y"), int64(1))
		want(t, "still there", p.Do(0, "LLEN", "l"), int64(1))
	})
	w.Go("b", func(p *Process) {
		p.Sleep(10 * ms)
		want(t, "push", p.Do(0, "RPUSH", "l", "x"), int64(1))
		p.Sleep(100 * ms)
		w.ClockJump(0, 300*ms)
	})
	run(t, w)

	w = world(t, Options{})
	w.Go("a", func(p *Process) {
		w.Partition("a", 0)
		r, _ := blpop(p, 20*ms, "l", "5") // held by the partition, then blocks once healed
		if !isTimeout(r.Err) {
			t.Errorf("abandoned through a partition: %s", r)
		}
		p.Sleep(200 * ms)
	})
	w.Go("b", func(p *Process) {
		p.Sleep(50 * ms)
		w.Heal("a", 0) // the BLPOP arrives, blocks, and is forgotten at once
		want(t, "push", p.Do(0, "RPUSH", "l", "z"), int64(1))
		want(t, "kept", p.Do(0, "LLEN", "l"), int64(1))
	})
	run(t, w)

	w = world(t, Options{})
	w.Go("a", func(p *Process) {
		r, _ := blpop(p, 20*ms, "l", "5") // blocks, then partitioned: its close waits
		if !isTimeout(r.Err) {
			t.Errorf("abandoned, then partitioned: %s", r)
		}
		p.Sleep(200 * ms)
	})
	w.Go("b", func(p *Process) {
		p.Sleep(ms)
		w.Partition("a", 0)
		p.Sleep(50 * ms)
		want(t, "push", p.Do(0, "RPUSH", "l", "z"), int64(1))
		want(t, "lost to the dead connection", p.Do(0, "LLEN", "l"), int64(0))
		w.Heal("a", 0)
	})
	run(t, w)

	w = world(t, Options{})
	w.Go("a", func(p *Process) {
		r, d := blpop(p, time.Second, "l", "0.05")
		if r.Err != nil || r.Val != nil || d < 200*ms || d > 202*ms {
			t.Errorf("timed out once resumed: %s after %v", r, d)
		}
		r, _ = blpop(p, time.Second, "l", "5")
		if r.Err == nil || isTimeout(r.Err) {
			t.Errorf("crashed: %s", r)
		}
	})
	w.Go("b", func(p *Process) {
		p.Sleep(ms)
		w.Pause(0)
		p.Sleep(200 * ms)
		w.Resume(0)
		p.Sleep(10 * ms)
		w.Crash(0)
	})
	run(t, w)
}

// A subscription receives its confirmation, then what is published while
// it is registered, through the partitions; a crash breaks it, and the
// next Receive subscribes again; Close wakes a Receive.
func TestSubscriptions(t *testing.T) {
	w := world(t, Options{})
	w.Go("a", func(p *Process) {
		sub := p.PriorityEnv().Subscribe(bg, 0, "ch")
		got := func(want string, wantErr bool) {
			t.Helper()
			m, err := sub.Receive(bg, time.Second)
			if m != want || (err != nil) != wantErr {
				t.Errorf("received %q %v, want %q (error %v)", m, err, want, wantErr)
			}
		}
		got("", false)   // the confirmation
		got("m1", false) // published at 10 ms
		got("", true)    // the crash at 20 ms
		p.Sleep(5 * ms)
		got("", false) // subscribed again
		got("m2", false)
		p.PriorityEnv().Go(func() {
			p.w.sched.Running().Sleep(10 * ms)
			sub.Close()
		})
		if _, err := sub.Receive(context.Background(), time.Second); err == nil || isTimeout(err) {
			t.Errorf("a receive across Close: %v", err)
		}
	})
	w.Go("b", func(p *Process) {
		p.Sleep(10 * ms)
		want(t, "publish", p.Do(0, "PUBLISH", "ch", "m1"), int64(1))
		want(t, "publish elsewhere", p.Do(0, "PUBLISH", "other", "m"), int64(0))
		p.Sleep(10 * ms)
		w.Restart(0, ms)
		p.Sleep(20 * ms)
		want(t, "publish again", p.Do(0, "PUBLISH", "ch", "m2"), int64(1))
	})
	run(t, w)
}

func isTimeout(err error) bool {
	t, ok := err.(interface{ Timeout() bool })
	return ok && t.Timeout()
}
