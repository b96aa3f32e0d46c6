package redlock

import (
	"net"
	"sync"
	"testing"
	"time"
)

// Each Redlock defect shows its effect next to the reference's answer in
// the same situation.

// expiredThenTaken leaves lease a expired and its key taken by b, on one
// server; it returns both.
func expiredThenTaken(t *testing.T, ref *Redlock, k string) (a, b Lease) {
	t.Helper()
	// 1 s: the servers took 239 ms of a 200 ms ttl beside the suite.
	a = acquire(t, ref, k, time.Second)
	waitGone(t, raw(t, ref.addrs[0]), k, 5*time.Second)
	return a, acquire(t, ref, k, 10*time.Second)
}

func TestDefectPlainDelRelease(t *testing.T) {
	addrs := shared(t)[:1]
	ref := newRedlock(t, addrs, Options{})
	mut := newRedlock(t, addrs, Options{Defects: Defects{PlainDelRelease: true}})
	for _, c := range []struct {
		r    *Redlock
		want error
		held bool
	}{{ref, ErrExpired, true}, {mut, nil, false}} {
		k := key(t)
		a, b := expiredThenTaken(t, ref, k)
		wantErr(t, "release of an expired lease", c.r.Release(ctx(t), a), c.want)
		if ok, _ := ref.Verify(ctx(t), b); ok != c.held {
			t.Errorf("successor held: %v, want %v", ok, c.held)
		}
	}
}

func TestDefectPlainPexpireRefresh(t *testing.T) {
	addrs := shared(t)[:1]
	ref := newRedlock(t, addrs, Options{})
	mut := newRedlock(t, addrs, Options{Defects: Defects{PlainPexpireRefresh: true}})
	k := key(t)
	a, _ := expiredThenTaken(t, ref, k)
	_, err := ref.Refresh(ctx(t), a, time.Minute)
	wantErr(t, "reference refresh of an expired lease", err, ErrExpired)
	_, err = mut.Refresh(ctx(t), a, time.Minute)
	wantErr(t, "mutant refresh of an expired lease", err, nil)
	if p := raw(t, addrs[0]).PTTL(ctx(t), k).Val(); p < 50*time.Second {
		t.Errorf("the successor's key has PTTL %v: the mutant did not extend it", p)
	}
}

func TestDefectAlwaysOK(t *testing.T) {
	addrs := shared(t)[:1]
	ref := newRedlock(t, addrs, Options{})
	mut := newRedlock(t, addrs, Options{Defects: Defects{AlwaysOK: true}})
	k := key(t)
	a, b := expiredThenTaken(t, ref, k)
	for _, c := range []struct {
		r    *Redlock
		want error
	}{{ref, ErrExpired}, {mut, nil}} {
		_, err := c.r.Refresh(ctx(t), a, time.Second)
		wantErr(t, "refresh of an expired lease", err, c.want)
		wantErr(t, "release of an expired lease", c.r.Release(ctx(t), a), c.want)
	}
	if ok, _ := ref.Verify(ctx(t), b); !ok {
		t.Error("the successor's lease was harmed: AlwaysOK must only misreport")
	}
}

func TestDefectSetNXOnExtend(t *testing.T) {
	addrs := shared(t)[:1]
	ref := newRedlock(t, addrs, Options{})
	mut := newRedlock(t, addrs, Options{Defects: Defects{SetNXOnExtend: true}})
	k := key(t)
	// 1 s: the servers took 210 ms of a 200 ms ttl beside the suite at
	// load 36.
	a := acquire(t, ref, k, time.Second)
	waitGone(t, raw(t, addrs[0]), k, 5*time.Second)
	_, err := ref.Refresh(ctx(t), a, time.Minute)
	wantErr(t, "reference refresh of an expired lease", err, ErrExpired)
	_, err = mut.Refresh(ctx(t), a, time.Minute)
	wantErr(t, "mutant refresh of an expired lease", err, nil)
	if v := raw(t, addrs[0]).Get(ctx(t), k).Val(); v != a.Token {
		t.Errorf("key holds %q: the mutant did not revive the lease", v)
	}
	_, err = ref.Acquire(ctx(t), k, time.Second)
	wantErr(t, "acquire after the revival", err, ErrHeld)
}

// A holder with a majority (two of three servers): the mutant, content with
// one, takes the lock too.
func TestDefectQuorumHalf(t *testing.T) {
	addrs := shared(t)
	ref := newRedlock(t, addrs, Options{})
	mut := newRedlock(t, addrs, Options{Defects: Defects{QuorumHalf: true}})
	k := key(t)
	for _, a := range addrs[:2] {
		raw(t, a).Set(ctx(t), k, "holder", 10*time.Second)
	}
	_, err := ref.Acquire(ctx(t), k, time.Second)
	wantErr(t, "reference acquire against a majority holder", err, ErrHeld)
	_, err = mut.Acquire(ctx(t), k, time.Second)
	wantErr(t, "mutant acquire against a majority holder", err, nil)
}

// A ttl of 2 ms leaves no validity after the 2 ms of drift: the reference
// refuses it, the mutant grants a lease whose validity is already over.
func TestDefectNoValidityCheck(t *testing.T) {
	addrs := shared(t)[:1]
	ref := newRedlock(t, addrs, Options{})
	mut := newRedlock(t, addrs, Options{Defects: Defects{NoValidityCheck: true}})
	_, err := ref.Acquire(ctx(t), key(t), 2*time.Millisecond)
	wantErr(t, "reference acquire of 2 ms", err, ErrNoValidity)
	l, err := mut.Acquire(ctx(t), key(t), 2*time.Millisecond)
	wantErr(t, "mutant acquire of 2 ms", err, nil)
	if l.Validity > 0 {
		t.Errorf("validity %v", l.Validity)
	}
}

// The mutants claim a validity that ends later than the invoke plus
// ttl(1-r), the prover's bound, which the reference never does. One of the
// three servers is a black hole (it accepts connections and never answers),
// so every acquire takes the 200 ms timeout.
func TestDefectNoElapsedNoDrift(t *testing.T) {
	addrs := append(shared(t)[:2:2], blackHole(t))
	const ttl = 10 * time.Second
	for _, c := range []struct {
		name    string
		d       Defects
		tooLong bool
	}{{"reference", Defects{}, false}, {"NoElapsed", Defects{NoElapsed: true}, true}, {"NoDrift", Defects{NoDrift: true}, true}} {
		r := newRedlock(t, addrs, Options{Defects: c.d, Timeout: 200 * time.Millisecond})
		var l Lease
		var before int64
		for try := 0; ; try++ { // a real server slower than 200 ms fails the quorum: try again
			var err error
			before = Monotonic()
			if l, err = r.Acquire(ctx(t), key(t), ttl); err == nil {
				break
			} else if try == 5 {
				t.Fatal(err)
			}
		}
		if took := time.Duration(Monotonic() - before); took < 200*time.Millisecond {
			t.Fatalf("the acquire took %v, less than the black hole's timeout", took)
		}
		// 20 ms of slack for the scheduler; the mutants exceed it by 198 and 100 ms.
		if got := l.ValidUntil > before+int64(ttl-ttl/100+20*time.Millisecond); got != c.tooLong {
			t.Errorf("%s: valid until %v after the invoke (ttl(1-0.01) = %v): too long %v, want %v",
				c.name, time.Duration(l.ValidUntil-before), ttl-ttl/100, got, c.tooLong)
		}
	}
}

// blackHole is the address of a listener that accepts connections and
// never answers, closed when the test ends.
func blackHole(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	return ln.Addr().String()
}

// An acquire that fails its quorum (a holder has two of three servers)
// leaves its grant on the third with the mutant.
func TestDefectNoCleanup(t *testing.T) {
	addrs := shared(t)
	for _, c := range []struct {
		d    Defects
		left int64
	}{{Defects{}, 0}, {Defects{NoCleanup: true}, 1}} {
		r := newRedlock(t, addrs, Options{Defects: c.d})
		k := key(t)
		for _, a := range addrs[:2] {
			raw(t, a).Set(ctx(t), k, "holder", 10*time.Second)
		}
		_, err := r.Acquire(ctx(t), k, 10*time.Second)
		wantErr(t, "acquire against a majority holder", err, ErrHeld)
		if n := raw(t, addrs[2]).Exists(ctx(t), k).Val(); n != c.left {
			t.Errorf("%+v: %d keys left on the third server, want %d", c.d, n, c.left)
		}
	}
}

// With a constant token, an expired holder's release deletes its
// successor's key.
func TestDefectConstantToken(t *testing.T) {
	addrs := shared(t)[:1]
	for _, c := range []struct {
		d    Defects
		want error
		held bool
	}{{Defects{}, ErrExpired, true}, {Defects{ConstantToken: true}, nil, false}} {
		r := newRedlock(t, addrs, Options{Defects: c.d})
		k := key(t)
		a, b := expiredThenTaken(t, r, k)
		wantErr(t, "release of an expired lease", r.Release(ctx(t), a), c.want)
		if n := raw(t, addrs[0]).Exists(ctx(t), k).Val(); (n == 1) != c.held {
			t.Errorf("%+v: successor's key there: %v, want %v", c.d, n == 1, c.held)
		}
		r.Release(ctx(t), b)
	}
}

func TestDefectsRefusedByTheOtherLock(t *testing.T) {
	if _, err := New([]string{"127.0.0.1:1"}, Options{Defects: Defects{EqualSteals: true}}); err == nil {
		t.Error("Redlock took a priority defect")
	}
	if _, err := NewPriority([]string{"127.0.0.1:1"}, Options{Defects: Defects{QuorumHalf: true}}); err == nil {
		t.Error("Priority took a Redlock defect")
	}
}
