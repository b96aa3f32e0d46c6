package redissim

import (
	"strings"
	"testing"
	"time"
)

// script1 is "EVAL acquire" of key k, token tok, ttl ms, as args.
func acquireArgs(k, tok, ttl string) []string {
	return []string{"EVAL", scriptNamed("acquire").src, "2", k, k + ":fence", tok, ttl}
}

// steps runs f as a client "c" of a World of o, and returns the World.
func steps(t *testing.T, o Options, f func(p *Process, w *World)) *World {
	t.Helper()
	w := world(t, o)
	w.Go("c", func(p *Process) { f(p, w) })
	run(t, w)
	return w
}

func want(t *testing.T, what string, got Result, val any) {
	t.Helper()
	if got.Err != nil || valText(got.Val) != valText(val) {
		t.Errorf("%s: got %s, want %s", what, got, valText(val))
	}
}

func wantErr(t *testing.T, what string, got Result, prefix string) {
	t.Helper()
	if got.Err == nil || !strings.Contains(got.Err.Error(), prefix) {
		t.Errorf("%s: got %s, want an error with %q", what, got, prefix)
	}
}

// A key lives until its deadline on its server's clock, and not a
// millisecond more; NX refuses a live key and takes an expired one.
func TestExpiryAndNX(t *testing.T) {
	steps(t, Options{}, func(p *Process, w *World) {
		want(t, "set", p.Do(0, "SET", "k", "a", "NX", "PX", "10"), "OK")
		want(t, "set nx", p.Do(0, "SET", "k", "b", "NX", "PX", "10"), nil)
		want(t, "pttl", p.Do(0, "PTTL", "k"), int64(10))
		p.Sleep(10*ms - 300*time.Microsecond) // 10 ms after the SET: at its deadline
		want(t, "get at the deadline", p.Do(0, "GET", "k"), "a")
		p.Sleep(ms)
		want(t, "get past it", p.Do(0, "GET", "k"), nil)
		want(t, "pttl past it", p.Do(0, "PTTL", "k"), int64(-2))
		want(t, "set nx again", p.Do(0, "SET", "k", "b", "NX", "PX", "10"), "OK")
		want(t, "pexpire", p.Do(0, "PEXPIRE", "k", "1000"), int64(1))
		want(t, "pexpire 0 deletes", p.Do(0, "PEXPIRE", "k", "0"), int64(1))
		want(t, "exists", p.Do(0, "EXISTS", "k"), int64(0))
		want(t, "pexpire missing", p.Do(0, "PEXPIRE", "k", "10"), int64(0))
		want(t, "incr", p.Do(0, "INCR", "n"), int64(1))
		want(t, "pttl without deadline", p.Do(0, "PTTL", "n"), int64(-1))
		wantErr(t, "set px 0", p.Do(0, "SET", "k", "b", "PX", "0"), "invalid expire time")
		want(t, "set", p.Do(0, "SET", "t", "tok"), "OK")
		wantErr(t, "incr of a token", p.Do(0, "INCR", "t"), "not an integer")
	})
}

// Scripts are known by their source (EVAL) and then their SHA1 (EVALSHA);
// an unknown script is an error naming it, and Run fails; so does a
// command the simulator does not model.
func TestScripts(t *testing.T) {
	steps(t, Options{}, func(p *Process, w *World) {
		sc := scriptNamed("release")
		wantErr(t, "evalsha before eval", p.Do(0, "EVALSHA", sc.sha, "1", "k", "t"), "NOSCRIPT")
		want(t, "acquire", p.Do(0, acquireArgs("k", "t", "100")...), int64(1))
		want(t, "release of another", p.Do(0, "EVAL", sc.src, "1", "k", "u"), int64(0))
		want(t, "release by sha", p.Do(0, "EVALSHA", sc.sha, "1", "k", "t"), int64(1))
		want(t, "fence kept", p.Do(0, "GET", "k:fence"), "1")
	})
	w := world(t, Options{})
	w.Go("c", func(p *Process) {
		wantErr(t, "unknown script", p.Do(0, "EVAL", "return 1", "0"), "unknown script")
	})
	if err := w.Run(); err == nil || !strings.Contains(err.Error(), "return 1") {
		t.Errorf("Run after an unknown script: %v", err)
	}
	w = world(t, Options{})
	w.Go("c", func(p *Process) { wantErr(t, "unknown command", p.Do(0, "SADD", "s", "m"), "unknown command") })
	if err := w.Run(); err == nil || !strings.Contains(err.Error(), "SADD") {
		t.Errorf("Run after an unknown command: %v", err)
	}
	if _, err := New(Options{Servers: -1}); err == nil {
		t.Error("New accepted -1 servers")
	}
	if err := w.Pause(3); err == nil {
		t.Error("Pause accepted a server out of range")
	}
}

// A restart without persistence forgets every key and script; with
// Always it keeps the keys (not the scripts), those whose deadline passed
// while it was down gone; a down server refuses connections.
func TestRestart(t *testing.T) {
	for _, pers := range []Persistence{None, Always} {
		steps(t, Options{Persistence: pers}, func(p *Process, w *World) {
			want(t, "set long", p.Do(0, "SET", "long", "a", "PX", "60000"), "OK")
			want(t, "set short", p.Do(0, "SET", "short", "a", "PX", "5"), "OK")
			want(t, "acquire", p.Do(0, acquireArgs("k", "t", "60000")...), int64(1))
			w.Crash(0)
			wantErr(t, "while down", p.Do(0, "GET", "long"), "connection refused")
			w.Restart(0, 10*ms)
			p.Sleep(10 * ms)
			wantErr(t, "evalsha after restart", p.Do(0, "EVALSHA", scriptNamed("release").sha, "1", "k", "t"), "NOSCRIPT")
			keep := map[Persistence]any{None: nil, Always: "a"}[pers]
			want(t, pers.String()+": long", p.Do(0, "GET", "long"), keep)
			want(t, pers.String()+": short", p.Do(0, "GET", "short"), nil)
		})
	}
}

// A paused server answers nothing until it resumes (the client times
// out), then runs what waited; keys expire meanwhile. A clock jump brings
// deadlines closer.
func TestPauseAndClockJump(t *testing.T) {
	steps(t, Options{}, func(p *Process, w *World) {
		want(t, "set", p.Do(0, "SET", "k", "a", "PX", "20"), "OK")
		w.Pause(0)
		rs := p.Round(5*ms, map[int][]string{0: {"SET", "j", "b"}})
		if len(rs) != 1 || rs[0].Err != errTimeout {
			t.Errorf("round to a paused server: %v", rs)
		}
		p.Sleep(30 * ms)
		w.Resume(0)
		want(t, "expired while paused", p.Do(0, "GET", "k"), nil)
		want(t, "the command that waited ran", p.Do(0, "GET", "j"), "b")
		want(t, "set", p.Do(0, "SET", "k", "a", "PX", "100"), "OK")
		w.ClockJump(0, 60*ms)
		want(t, "pttl after the jump", p.Do(0, "PTTL", "k"), int64(40))
		w.ClockJump(0, 40*ms)
		want(t, "at its deadline", p.Do(0, "PTTL", "k"), int64(0))
		w.ClockJump(0, ms)
		want(t, "gone past it", p.Do(0, "GET", "k"), nil)
	})
}

// A partition holds commands and replies until it heals; a lost reply
// resets the connection though the command ran.
func TestPartitionAndLostReply(t *testing.T) {
	steps(t, Options{Servers: 2}, func(p *Process, w *World) {
		w.Partition("c", 1)
		rs := p.Round(5*ms, map[int][]string{0: {"SET", "k", "a"}, 1: {"SET", "k", "a"}})
		if rs[0].Err != nil || rs[1].Err != errTimeout {
			t.Errorf("round across a partition: %v", rs)
		}
		w.Heal("c", 1)
		want(t, "the held command ran on heal", p.Do(1, "GET", "k"), "a")
		w.DropReply("c", 0)
		if r := p.Do(0, "SET", "k", "b"); r.Err != errReset {
			t.Errorf("lost reply: %s", r)
		}
		want(t, "the command ran", p.Do(0, "GET", "k"), "b")
	})
}

// A killed client stops in its round; the command it sent still runs.
func TestKill(t *testing.T) {
	w := world(t, Options{})
	w.Pause(0)
	w.Go("c", func(p *Process) {
		p.Do(0, "SET", "k", "a")
		t.Error("the killed client went on")
	})
	w.Go("n", func(p *Process) {
		p.Sleep(ms)
		w.Kill("c")
		w.Resume(0)
		p.Sleep(ms)
		want(t, "its command ran", p.Do(0, "GET", "k"), "a")
	})
	run(t, w)
}
