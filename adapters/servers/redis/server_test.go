package redis

import (
	"context"
	"errors"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"
)

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// start starts a private server for the test, stopped when it ends; it
// skips the test without redis-server.
func start(t *testing.T, o Options) *Server {
	t.Helper()
	s, err := Start(ctx(t), t.TempDir(), o)
	if errors.Is(err, ErrNoRedis) {
		t.Skipf("skipped: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Stop() })
	return s
}

func do(t *testing.T, s *Server, args ...string) any {
	t.Helper()
	r, err := s.Do(ctx(t), args...)
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return r
}

func alive(pid int) bool {
	p, err := os.FindProcess(pid)
	return err == nil && p.Signal(syscall.Signal(0)) == nil
}

func TestStartStop(t *testing.T) {
	s := start(t, Options{})
	pid := s.PID()
	if pid == 0 {
		t.Fatal("no pid")
	}
	if r := do(t, s, "CONFIG", "GET", "bind"); r.([]any)[1] != "127.0.0.1" {
		t.Errorf("bind: %v", r)
	}
	if r := do(t, s, "CONFIG", "GET", "appendonly"); r.([]any)[1] != "no" {
		t.Errorf("appendonly: %v", r)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if alive(pid) {
		t.Errorf("pid %d still alive after Stop", pid)
	}
	if _, err := s.Do(ctx(t), "PING"); err == nil {
		t.Error("PING answered after Stop")
	}
	if err := s.Restart(ctx(t), 0); err == nil {
		t.Error("Restart after Stop succeeded")
	}
}

func TestStartN(t *testing.T) {
	began := time.Now()
	ss, err := StartN(ctx(t), t.TempDir(), 3, Options{})
	t.Logf("three servers answered PING %v after StartN began", time.Since(began).Round(time.Millisecond))
	if errors.Is(err, ErrNoRedis) {
		t.Skipf("skipped: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer StopAll(ss)
	seen := map[string]bool{}
	for _, a := range Addrs(ss) {
		if seen[a] {
			t.Errorf("address %s twice", a)
		}
		seen[a] = true
	}
	for _, s := range ss {
		do(t, s, "SET", "k", s.Addr())
	}
	for _, s := range ss {
		if r := do(t, s, "GET", "k"); r != s.Addr() {
			t.Errorf("%s holds %v", s.Addr(), r)
		}
	}
}

// Without persistence a restart, clean or not, forgets everything; with
// fsync always, a clean restart and a SIGKILL both keep every acknowledged
// write and its expiry.
func TestRestartPersistence(t *testing.T) {
	for _, p := range []Persistence{None, Always} {
		for _, kill := range []bool{false, true} {
			name := p.String() + "/restart"
			if kill {
				name = p.String() + "/kill"
			}
			t.Run(name, func(t *testing.T) {
				s := start(t, Options{Persistence: p})
				do(t, s, "SET", "lease", "tok", "PX", "60000")
				do(t, s, "SET", "short", "tok", "PX", "300")
				if kill {
					if err := s.Kill(); err != nil {
						t.Fatal(err)
					}
					if s.PID() != 0 {
						t.Fatal("running after Kill")
					}
				}
				began := time.Now()
				if err := s.Restart(ctx(t), 400*time.Millisecond); err != nil {
					t.Fatal(err)
				}
				t.Logf("down and back in %v (400 ms of delay)", time.Since(began).Round(time.Millisecond))
				got := do(t, s, "GET", "lease")
				if p == None && got != nil {
					t.Errorf("without persistence the lease survived: %v", got)
				}
				if p == Always {
					if got != "tok" {
						t.Errorf("with fsync always the lease is gone: %v", got)
					}
					pttl := do(t, s, "PTTL", "lease").(int64)
					if pttl > 60000-400 || pttl < 50000 {
						t.Errorf("PTTL %d after a 400 ms restart: the deadline did not survive as such", pttl)
					}
					if r := do(t, s, "GET", "short"); r != nil {
						t.Errorf("a key whose deadline passed while the server was down came back: %v", r)
					}
				}
			})
		}
	}
}

// ClockJump shortens every key's life by d and expires those with less.
func TestClockJump(t *testing.T) {
	s := start(t, Options{})
	do(t, s, "SET", "long", "x", "PX", "10000")
	do(t, s, "SET", "short", "x", "PX", "1000")
	do(t, s, "SET", "forever", "x")
	n, err := s.ClockJump(ctx(t), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Errorf("changed %d keys, want 2", n)
	}
	if p := do(t, s, "PTTL", "long").(int64); p > 8000 || p < 7000 {
		t.Errorf("long: PTTL %d after a 2 s jump of 10 s", p)
	}
	if r := do(t, s, "EXISTS", "short"); r != int64(0) {
		t.Error("short survived a jump beyond its life")
	}
	if r := do(t, s, "PTTL", "forever"); r != int64(-1) {
		t.Errorf("forever: PTTL %v", r)
	}
	if _, err := s.ClockJump(ctx(t), 0); err == nil {
		t.Error("a jump of 0 was accepted")
	}
}

// TestExpiryPrecision measures how late after its PX a key is gone (Redis
// expires lazily on access and actively 10 times a second, so an access
// sees it gone at its deadline): it logs the spread, and fails only if a key
// is seen before its deadline, or more than 500 ms after (a loaded machine
// delays the polling, not the expiry).
func TestExpiryPrecision(t *testing.T) {
	s := start(t, Options{})
	const ttl = 100 * time.Millisecond
	var worst, best time.Duration = 0, time.Hour
	for i := range 10 {
		k := "k" + strconv.Itoa(i)
		set := time.Now()
		do(t, s, "SET", k, "x", "PX", strconv.Itoa(int(ttl.Milliseconds())))
		for do(t, s, "EXISTS", k) == int64(1) {
			if time.Since(set) > ttl+time.Second {
				t.Fatalf("%s alive %v after its SET", k, time.Since(set))
			}
			time.Sleep(time.Millisecond)
		}
		gone := time.Since(set)
		if gone < ttl { // the server set the deadline after set, and saw the key gone before we read the clock

			t.Errorf("%s gone %v after its SET, before its ttl", k, gone)
		}
		worst, best = max(worst, gone-ttl), min(best, gone-ttl)
	}
	t.Logf("keys of %v seen gone %v to %v after the ttl (polling every 1 ms through a new connection)", ttl, best, worst)
	if worst > 500*time.Millisecond {
		t.Errorf("a key outlived its ttl by %v", worst)
	}
}

// A paused server answers nothing until resumed, and then has expired the
// keys whose deadline passed meanwhile; a paused server can be stopped.
func TestPauseResume(t *testing.T) {
	s := start(t, Options{})
	do(t, s, "SET", "short", "x", "PX", "100")
	do(t, s, "SET", "long", "x", "PX", "60000")
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	c, cancel := context.WithTimeout(ctx(t), 300*time.Millisecond)
	_, err := s.Do(c, "PING")
	cancel()
	if err == nil {
		t.Error("a paused server answered")
	}
	if err := s.Resume(); err != nil {
		t.Fatal(err)
	}
	if r := do(t, s, "EXISTS", "short", "long"); r != int64(1) {
		t.Errorf("after a 300 ms pause, %v of the 100 ms and 60 s keys exist, want 1", r)
	}
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(); err != nil {
		t.Errorf("stop of a paused server: %v", err)
	}
}

func TestNoRedis(t *testing.T) {
	_, err := Start(ctx(t), t.TempDir(), Options{Bin: "/nonexistent/redis-server"})
	if !errors.Is(err, ErrNoRedis) {
		t.Errorf("Start with a missing binary: %v, want ErrNoRedis", err)
	}
	_, err = StartN(ctx(t), t.TempDir(), 3, Options{Bin: "/nonexistent/redis-server"})
	if !errors.Is(err, ErrNoRedis) {
		t.Errorf("StartN with a missing binary: %v, want ErrNoRedis", err)
	}
}
