package redissim

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockprover/lockprover/model/redlock"
)

// The reference grants, refuses while held, refreshes, verifies and
// releases on three simulated servers, in virtual time.
func TestRedlockOnSimulator(t *testing.T) {
	w := world(t, Options{Servers: 3})
	w.Go("a", func(p *Process) {
		r := lock(p, redlock.Options{})
		l, err := r.Acquire(bg, "k", time.Second)
		if err != nil || l.Fence != 1 {
			t.Errorf("acquire: %+v %v", l, err)
			return
		}
		if l.ValidUntil != int64(time.Second-12*ms) {
			t.Errorf("valid until %v, want the start (0) + ttl - drift", time.Duration(l.ValidUntil))
		}
		if _, err := r.Acquire(bg, "k", time.Second); !errors.Is(err, redlock.ErrHeld) {
			t.Errorf("second acquire: %v", err)
		}
		if ok, err := r.Verify(bg, l); !ok || err != nil {
			t.Errorf("verify: %v %v", ok, err)
		}
		if _, err := r.Refresh(bg, l, time.Second); err != nil {
			t.Errorf("refresh: %v", err)
		}
		if err := r.Release(bg, l); err != nil {
			t.Errorf("release: %v", err)
		}
		if err := r.Release(bg, l); !errors.Is(err, redlock.ErrExpired) {
			t.Errorf("second release: %v", err)
		}
		l2, err := r.Acquire(bg, "k", time.Second)
		if err != nil || l2.Fence != 2 {
			t.Errorf("acquire again: %+v %v", l2, err)
		}
		p.Sleep(2 * time.Second)
		if ok, _ := r.Verify(bg, l2); ok {
			t.Error("verify after the ttl")
		}
	})
	run(t, w)
	for i := range 3 {
		ks, _ := w.Keys(i)
		if len(ks) != 1 || ks[0] != "k:fence=2" {
			t.Errorf("server %d keeps %v", i, ks)
		}
	}
}

// The servers know every script and command the reference sends, in each
// of its variants (the defects that send others): an unknown one would
// make Run fail. So the sources here are model/redlock/scripts.go's, word for
// word.
func TestScriptsAreRedlocks(t *testing.T) {
	for _, d := range []redlock.Defects{{}, {SetNXOnExtend: true}, {PlainPexpireRefresh: true}, {PlainDelRelease: true}} {
		w := world(t, Options{Servers: 3})
		w.Go("a", func(p *Process) {
			r := lock(p, redlock.Options{Defects: d})
			l, err := r.Acquire(bg, "k", time.Second)
			if err != nil {
				t.Errorf("%+v: acquire: %v", d, err)
				return
			}
			r.Refresh(bg, l, time.Second)
			r.Verify(bg, l)
			r.Release(bg, l)
			p.Sleep(2 * time.Second)
			r.Refresh(bg, l, time.Second) // refreshSetNX's other branch
		})
		run(t, w)
	}
}

// An acquire that fails cleans up every server whose answer it did not
// hear, not only those that granted it (Redlock unlocks "even the
// instances it believed it was not able to lock"): the key a lost reply
// hid is deleted. Where the cleanup cannot reach that server (a partition
// from the moment the reply was lost), the error says the key may be left
// behind (ErrLeftBehind), and it is. OnDrop hears the lost reply, when it
// is lost.
func TestFailedAcquireCleansUpLostReplies(t *testing.T) {
	for _, again := range []bool{false, true} {
		var dropped []string
		var w *World
		w = world(t, Options{Servers: 2, OnDrop: func(client string, server int) {
			dropped = append(dropped, fmt.Sprintf("%s/%d", client, server))
			if again {
				p, _ := w.base.Latest(client)
				p.cut[server] = true // the cleanup's DEL waits, and times out
			}
		}})
		var err error
		w.Go("b", func(p *Process) {
			// Another's key on server 1: b's acquire is refused there.
			if r := p.Do(1, "SET", "k", "other", "PX", "10000"); r.Err != nil {
				t.Errorf("set: %v", r.Err)
			}
			w.DropReply("b", 0)
			_, err = lock(p, redlock.Options{}).Acquire(bg, "k", time.Second)
		})
		run(t, w)
		keys, _ := w.Keys(0)
		left := slices.ContainsFunc(keys, func(k string) bool { return strings.HasPrefix(k, "k=") })
		switch {
		case !errors.Is(err, redlock.ErrHeld) || errors.Is(err, redlock.ErrLeftBehind) != again:
			t.Errorf("cleanup cut off %v: acquire: %v", again, err)
		case left != again:
			t.Errorf("cleanup cut off %v: server 0 keeps %v", again, keys)
		}
		if len(dropped) != 1 || dropped[0] != "b/0" {
			t.Errorf("cleanup cut off %v: OnDrop heard %v, want b/0 once", again, dropped)
		}
	}
}

// A release that finds its token on some servers but fewer than a
// majority, the others saying they do not hold it, deleted the key where
// it found it: it answers ErrPartial, not ErrExpired (which says the
// lease had ended before: it may not have, the servers' answers being
// late), and a refresh likewise; on none of them, ErrExpired.
func TestPartialReleaseIsNotExpired(t *testing.T) {
	w := world(t, Options{Servers: 3})
	w.Go("a", func(p *Process) {
		r := lock(p, redlock.Options{})
		l, err := r.Acquire(bg, "k", time.Second)
		if err != nil {
			t.Errorf("acquire: %v", err)
			return
		}
		p.Do(1, "DEL", "k")
		p.Do(2, "DEL", "k")
		if _, err := r.Refresh(bg, l, time.Second); !errors.Is(err, redlock.ErrPartial) || errors.Is(err, redlock.ErrExpired) {
			t.Errorf("refresh on 1 of 3: %v, want ErrPartial", err)
		}
		if err := r.Release(bg, l); !errors.Is(err, redlock.ErrPartial) || errors.Is(err, redlock.ErrExpired) {
			t.Errorf("release on 1 of 3: %v, want ErrPartial", err)
		}
		if ks, _ := w.Keys(0); slices.ContainsFunc(ks, func(k string) bool { return strings.HasPrefix(k, "k=") }) {
			t.Errorf("server 0 keeps the key: %v", ks)
		}
		if err := r.Release(bg, l); !errors.Is(err, redlock.ErrExpired) {
			t.Errorf("release on none: %v, want ErrExpired", err)
		}
	})
	run(t, w)
}

// A script whose round timed out is not sent again as EVAL when its
// EVALSHA, held by a partition, meets a server that has lost its scripts
// (a restart): go-redis's Script.Run has returned with the timeout, and
// sends nothing more. The simulator once sent the EVAL at the heal, after
// the acquire's cleanup, and the failed acquire's key appeared on the
// server (prove --kind redlock, seed 2: acquire-exact).
func TestTimedOutScriptIsNotSentAgain(t *testing.T) {
	w := world(t, Options{Servers: 1})
	var err error
	w.Go("c1", func(p *Process) {
		rl := lock(p, redlock.Options{Timeout: 50 * ms})
		l, aerr := rl.Acquire(bg, "warm", time.Second) // the server now has the scripts
		if aerr != nil {
			t.Errorf("warm-up acquire: %v", aerr)
			return
		}
		rl.Release(bg, l)
		if err := w.Restart(0, ms); err != nil { // and now not
			t.Error(err)
		}
		p.Sleep(10 * ms)
		rl.Release(bg, l) // but for release's, loaded again
		p.Sleep(10 * ms)
		w.Partition("c1", 0)
		w.After(200*ms, func() { w.Heal("c1", 0) })
		_, err = rl.Acquire(bg, "k", time.Second)
		p.Sleep(time.Second / 2) // past the heal: what was held has run
	})
	run(t, w)
	keys, _ := w.Keys(0)
	if !errors.Is(err, redlock.ErrLeftBehind) {
		t.Errorf("acquire cut off: %v, want a key possibly left behind", err)
	}
	if slices.ContainsFunc(keys, func(k string) bool { return strings.HasPrefix(k, "k=") }) {
		t.Errorf("the timed-out acquire set its key after the heal: server 0 keeps %v", keys)
	}
}
