package redlock

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// losses records what OnLost is told.
type losses struct {
	mu   sync.Mutex
	lost []Lost
}

func (l *losses) on(x Lost) {
	l.mu.Lock()
	l.lost = append(l.lost, x)
	l.mu.Unlock()
}

func (l *losses) of(token string) (Lost, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, x := range l.lost {
		if x.Token == token {
			return x, true
		}
	}
	return Lost{}, false
}

// victimOf is a Priority (a process of its own) whose losses are recorded;
// slow, if set, delays its watchers at the named point.
func victimOf(t *testing.T, o Options, point string, slow time.Duration) (*Priority, *losses) {
	t.Helper()
	ls := &losses{}
	o.OnLost = ls.on
	p := newPriority(t, shared(t)[:1], o)
	if point != "" {
		p.hook = func(at, _ string) {
			if at == point {
				time.Sleep(slow)
			}
		}
	}
	return p, ls
}

func pacquire(t *testing.T, p *Priority, k string, ttl time.Duration, prio int64) Lease {
	t.Helper()
	l, err := p.Acquire(ctx(t), k, ttl, prio)
	if err != nil {
		t.Fatalf("acquire %s with priority %d: %v", k, prio, err)
	}
	return l
}

// steal is a thief's acquire, timed: the lease and when it returned.
func steal(t *testing.T, p *Priority, k string, ttl time.Duration, prio int64) (Lease, int64) {
	t.Helper()
	l := pacquire(t, p, k, ttl, prio)
	return l, Monotonic()
}

func TestPriorityGrantAndRefusal(t *testing.T) {
	p := newPriority(t, shared(t)[:1], Options{})
	k := key(t)
	l := pacquire(t, p, k, 10*time.Second, 5)
	if l.Fence < 1 || l.Priority != 5 || l.Validity <= 0 {
		t.Errorf("lease %+v", l)
	}
	for _, prio := range []int64{5, 4, -3} {
		_, err := p.Acquire(ctx(t), k, time.Second, prio)
		wantErr(t, "acquire against an equal or higher priority", err, ErrHeld)
		if err != nil && !strings.Contains(err.Error(), "by priority 5 ") {
			t.Errorf("the refusal does not name the holder's priority: %v", err)
		}
	}
	if ok, err := p.Verify(ctx(t), l); !ok || err != nil {
		t.Errorf("verify: %v %v", ok, err)
	}
	l2, err := p.Refresh(ctx(t), l, 20*time.Second)
	wantErr(t, "refresh", err, nil)
	if l2.ValidUntil <= l.ValidUntil {
		t.Error("refresh did not move the validity")
	}
	wantErr(t, "release", p.Release(ctx(t), l2), nil)
	wantErr(t, "second release", p.Release(ctx(t), l2), ErrExpired)
	l3 := pacquire(t, p, k, 10*time.Second, 0)
	if l3.Fence <= l.Fence {
		t.Errorf("fence %d after %d", l3.Fence, l.Fence)
	}
	p.Release(ctx(t), l3)
	if n := raw(t, shared(t)[0]).Exists(ctx(t), lockKey(k), noteKey(k, l.Token), noteKey(k, l3.Token)).Val(); n != 0 {
		t.Errorf("%d keys left behind", n)
	}
}

// A lease whose ttl passed is gone for every operation. The ttl is 2s:
// shorter ones (300ms) were once used up by the acquire itself on a loaded
// machine.
func TestPriorityExpiry(t *testing.T) {
	p := newPriority(t, shared(t)[:1], Options{})
	k := key(t)
	l := pacquire(t, p, k, 2*time.Second, 1)
	waitGone(t, raw(t, shared(t)[0]), lockKey(k), 10*time.Second)
	if ok, _ := p.Verify(ctx(t), l); ok {
		t.Error("verify true after expiry")
	}
	_, err := p.Refresh(ctx(t), l, time.Second)
	wantErr(t, "refresh after expiry", err, ErrExpired)
	l2 := pacquire(t, p, k, time.Second, 0)
	wantErr(t, "release after expiry", p.Release(ctx(t), l), ErrStolen) // another holds it now
	p.Release(ctx(t), l2)
}

// A higher priority steals; the victim observes its loss before the thief's
// acquire returns; the key keeps the victim's deadline; the victim's lease
// is gone for every operation. The victim's ttl (10s) is well above the
// thief's (3s), so that a key that took the thief's ttl shows, and the
// thief's is long enough for its wait on a loaded machine (500ms once was
// not: "waited 707ms for its victims").
func TestPrioritySteal(t *testing.T) {
	victim, ls := victimOf(t, Options{}, "", 0)
	thief := newPriority(t, shared(t)[:1], Options{})
	k := key(t)
	v := pacquire(t, victim, k, 10*time.Second, 1)
	th, returned := steal(t, thief, k, 3*time.Second, 2)
	lost, ok := ls.of(v.Token)
	if !ok {
		t.Fatal("the victim was not told of its loss before the thief's acquire returned")
	}
	if lost.At >= returned || lost.Thief != th.Token || lost.Key != k {
		t.Errorf("lost %+v, thief returned at %d", lost, returned)
	}
	if th.Fence <= v.Fence {
		t.Errorf("thief's fence %d, victim's %d", th.Fence, v.Fence)
	}
	if p := raw(t, shared(t)[0]).PTTL(ctx(t), lockKey(k)).Val(); p <= 3*time.Second {
		t.Errorf("PTTL %v after the steal: the victim's deadline (10s after its acquire) was not kept", p)
	}
	if ok, _ := victim.Verify(ctx(t), v); ok {
		t.Error("the victim still verifies")
	}
	_, err := victim.Refresh(ctx(t), v, time.Second)
	wantErr(t, "victim's refresh", err, ErrStolen)
	wantErr(t, "victim's release", victim.Release(ctx(t), v), ErrStolen)
	if ok, err := thief.Verify(ctx(t), th); !ok || err != nil {
		t.Errorf("thief's verify: %v %v", ok, err)
	}
	wantErr(t, "thief's release", thief.Release(ctx(t), th), nil)
}

// A victim slow to acknowledge (its watcher takes 300 ms to mark itself
// lost) holds the thief back until it has.
func TestPrioritySlowVictim(t *testing.T) {
	victim, ls := victimOf(t, Options{}, "lost", 300*time.Millisecond)
	thief := newPriority(t, shared(t)[:1], Options{})
	k := key(t)
	v := pacquire(t, victim, k, 5*time.Second, 1)
	start := Monotonic()
	_, returned := steal(t, thief, k, 5*time.Second, 2)
	lost, ok := ls.of(v.Token)
	if !ok || lost.At >= returned {
		t.Fatalf("thief returned at %d, victim lost %v at %d", returned, ok, lost.At)
	}
	if took := time.Duration(returned - start); took < 300*time.Millisecond {
		t.Errorf("the thief waited %v only", took)
	}
}

// A victim that is gone (its process stopped without releasing) never
// acknowledges: the thief proceeds once the victim's lease can have ended,
// and not before.
func TestPriorityDeadVictim(t *testing.T) {
	victim := newPriority(t, shared(t)[:1], Options{})
	thief := newPriority(t, shared(t)[:1], Options{})
	k := key(t)
	v := pacquire(t, victim, k, 600*time.Millisecond, 1)
	victim.Close()
	th, returned := steal(t, thief, k, 5*time.Second, 2)
	if returned < v.ValidUntil {
		t.Errorf("the thief returned %v before the dead victim's validity ended", time.Duration(v.ValidUntil-returned))
	}
	t.Logf("thief returned %v after the victim's validity ended", time.Duration(returned-v.ValidUntil))
	thief.Release(ctx(t), th)
}

// A thief that dies right after its steal (it never notifies): the key
// lives on to the victim's deadline, so nobody else takes it meanwhile;
// with StealResetsTTL a third acquirer takes it while the victim holds.
func TestPriorityDeadThief(t *testing.T) {
	for _, c := range []struct {
		d    Defects
		want error
	}{{Defects{}, ErrHeld}, {Defects{StealResetsTTL: true}, nil}} {
		victim := newPriority(t, shared(t)[:1], Options{})
		thief := newPriority(t, shared(t)[:1], Options{Defects: c.d})
		k := key(t)
		v := pacquire(t, victim, k, 3*time.Second, 1)
		// The thief's script alone: a thief that died before notifying.
		res, err := obtainScript.Run(ctx(t), thief.servers[0], []string{lockKey(k), prioFenceKey(k)},
			"dead-thief", 2, 200, flag(false), flag(c.d.StealResetsTTL)).Slice()
		if err != nil || res[0] != int64(2) {
			t.Fatalf("steal: %v %v", res, err)
		}
		time.Sleep(300 * time.Millisecond) // beyond the thief's ttl
		third := newPriority(t, shared(t)[:1], Options{})
		l, err := third.Acquire(ctx(t), k, time.Second, 0)
		wantErr(t, "a third acquire after the dead thief's ttl", err, c.want)
		if err == nil {
			if ok, _ := victim.Verify(ctx(t), v); Monotonic() >= v.ValidUntil {
				t.Fatalf("the victim's validity ended (%v): no overlap shown", ok)
			}
			third.Release(ctx(t), l)
		}
	}
}

// A chain: T1 steals from V (which is slow to acknowledge), T2 steals from
// T1 while T1 waits. T2 returns only after V knows (T2 tells V itself, the
// key's chain naming it, and T1 acknowledges only after V did); T1 fails.
func TestPriorityChain(t *testing.T) {
	if chainTry(t, Defects{}) {
		t.Error("T2 returned before V knew")
	}
}

// A failed steal robbed in turn: T1 took V's key and failed without telling
// V (its answer lost, say), and listens; T2 steals the key from T1. The
// obtain names V, the chain before T1, and T2 tells V and waits for it,
// while T1 acknowledges at once (it holds nothing). With DirectVictimOnly,
// T2 tells T1 only, and returns while V, never told, still holds.
func TestPriorityChainOfFailedSteal(t *testing.T) {
	for _, d := range []Defects{{}, {DirectVictimOnly: true}} {
		victim, ls := victimOf(t, Options{}, "", 0)
		t1 := newPriority(t, shared(t)[:1], Options{})
		t2 := newPriority(t, shared(t)[:1], Options{Defects: d})
		k := key(t)
		v := pacquire(t, victim, k, 5*time.Second, 1)
		// T1's steal, its answer lost: the script alone, then its failure's
		// listening.
		res, err := obtainScript.Run(ctx(t), t1.servers[0], []string{lockKey(k), prioFenceKey(k)},
			"t1", 2, 5000, flag(false), flag(false)).Slice()
		if err != nil || res[0] != int64(2) {
			t.Fatalf("T1's steal: %v %v", res, err)
		}
		t1.listenAfterFailure(k, "t1", 5*time.Second)
		_, returned := steal(t, t2, k, 5*time.Second, 3)
		lost, told := ls.of(v.Token)
		if early := !told || lost.At > returned; early != d.DirectVictimOnly {
			t.Errorf("%+v: T2 returned before V knew: %v (told %v)", d, early, told)
		}
	}
}

// chainTry is TestPriorityChain's race: V holds, T1 steals from it and
// is robbed by T2 while it waits for V's acknowledgement; it says whether
// T2 returned before V knew it had lost.
func chainTry(t *testing.T, d Defects) (early bool) {
	t.Helper()
	victim, ls := victimOf(t, Options{}, "lost", 500*time.Millisecond)
	t1 := newPriority(t, shared(t)[:1], Options{Defects: d})
	t2 := newPriority(t, shared(t)[:1], Options{})
	k := key(t)
	v := pacquire(t, victim, k, 5*time.Second, 1)
	errc := make(chan error, 1)
	go func() {
		_, err := t1.Acquire(ctx(t), k, 5*time.Second, 2)
		errc <- err
	}()
	// Wait until T1's steal took effect.
	c0 := raw(t, shared(t)[0])
	for end := time.Now().Add(2 * time.Second); c0.HGet(ctx(t), lockKey(k), "acq").Val() == v.Token; {
		if time.Now().After(end) {
			t.Fatal("T1 did not steal")
		}
		time.Sleep(time.Millisecond)
	}
	_, returned := steal(t, t2, k, 5*time.Second, 3)
	lost, ok := ls.of(v.Token)
	if err := <-errc; !errors.Is(err, ErrStolen) {
		t.Errorf("T1's acquire: %v, want ErrStolen", err)
	}
	return !ok || lost.At > returned
}

func TestPriorityDefectEqualSteals(t *testing.T) {
	for _, c := range []struct {
		d    Defects
		want error
	}{{Defects{}, ErrHeld}, {Defects{EqualSteals: true}, nil}} {
		victim := newPriority(t, shared(t)[:1], Options{})
		thief := newPriority(t, shared(t)[:1], Options{Defects: c.d})
		k := key(t)
		pacquire(t, victim, k, 5*time.Second, 3)
		_, err := thief.Acquire(ctx(t), k, time.Second, 3)
		wantErr(t, "acquire of equal priority", err, c.want)
	}
}

// The victim's watcher takes 1 s to mark itself lost. The reference thief
// returns after it has; NoAckWait returns before; so does
// ProceedOnAckTimeout, whose patience (a quarter of the victim's remaining
// 2 s) runs out first; AckBeforeLost acknowledges before it marks
// itself lost, so its thief returns before the loss too.
func TestPriorityDefectsThiefAhead(t *testing.T) {
	for _, c := range []struct {
		name   string
		thief  Defects
		victim Defects
		ahead  bool
	}{
		{"reference", Defects{}, Defects{}, false},
		{"NoAckWait", Defects{NoAckWait: true}, Defects{}, true},
		{"ProceedOnAckTimeout", Defects{ProceedOnAckTimeout: true}, Defects{}, true},
		{"AckBeforeLost", Defects{}, Defects{AckBeforeLost: true}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			victim, ls := victimOf(t, Options{Defects: c.victim}, "lost", time.Second)
			thief := newPriority(t, shared(t)[:1], Options{Defects: c.thief})
			k := key(t)
			v := pacquire(t, victim, k, 2*time.Second, 1)
			_, returned := steal(t, thief, k, 5*time.Second, 2)
			lost, ok := ls.of(v.Token)
			if ahead := !ok || lost.At > returned; ahead != c.ahead {
				t.Errorf("thief returned before the victim knew: %v, want %v", ahead, c.ahead)
			}
			if c.ahead && returned >= v.ValidUntil {
				t.Errorf("the thief returned after the victim's validity: no overlap shown")
			}
		})
	}
}

// The victim's watcher is slow to start listening (300 ms). A note on a
// list waits for it: the victim learns, and the thief returns soon after.
// A PUBLISH finds nobody subscribed and is lost: the victim never learns,
// and the thief waits out the victim's whole remaining time.
func TestPriorityDefectPubSubNotify(t *testing.T) {
	for _, c := range []struct {
		d      Defects
		learns bool
	}{{Defects{}, true}, {Defects{PubSubNotify: true}, false}} {
		victim, ls := victimOf(t, Options{Defects: c.d}, "watch", 300*time.Millisecond)
		thief := newPriority(t, shared(t)[:1], Options{Defects: c.d})
		k := key(t)
		v := pacquire(t, victim, k, 1500*time.Millisecond, 1)
		_, returned := steal(t, thief, k, 5*time.Second, 2)
		_, learnt := ls.of(v.Token)
		if learnt != c.learns {
			t.Errorf("%+v: the victim learnt of its loss: %v, want %v", c.d, learnt, c.learns)
		}
		if waited := returned >= v.ValidUntil; waited == c.learns {
			t.Errorf("%+v: thief waited out the victim's validity: %v", c.d, waited)
		}
	}
}

// On three servers: a steal notifies the victim, which knows before the
// thief returns; the victim's deadline is kept on every server.
func TestPriorityThreeServers(t *testing.T) {
	addrs := shared(t)
	ls := &losses{}
	victim := newPriority(t, addrs, Options{OnLost: ls.on})
	thief := newPriority(t, addrs, Options{})
	k := key(t)
	v := pacquire(t, victim, k, 3*time.Second, 1)
	l2, err := victim.Refresh(ctx(t), v, 3*time.Second)
	wantErr(t, "refresh on three servers", err, nil)
	// The thief's ttl leaves room for the victims' acknowledgements on a
	// loaded machine (794 ms once, beside the suite, against 500 ms), and
	// is still under the 2 s of the victim's deadline the check below
	// wants kept (a steal that reset it to the thief's ttl would fail).
	th, returned := steal(t, thief, k, 1500*time.Millisecond, 2)
	lost, ok := ls.of(v.Token)
	if !ok || lost.At >= returned {
		t.Fatalf("victim told %v at %d, thief returned at %d", ok, lost.At, returned)
	}
	if th.Fence <= v.Fence {
		t.Errorf("thief's fence %d, victim's %d", th.Fence, v.Fence)
	}
	for _, a := range addrs {
		if p := raw(t, a).PTTL(ctx(t), lockKey(k)).Val(); p < 2*time.Second {
			t.Errorf("%s: PTTL %v after the steal: the victim's deadline was not kept", a, p)
		}
	}
	if ok, _ := victim.Verify(ctx(t), l2); ok {
		t.Error("the victim still verifies")
	}
	wantErr(t, "victim's release", victim.Release(ctx(t), l2), ErrStolen)
	wantErr(t, "thief's release", thief.Release(ctx(t), th), nil)
}

// With one of three servers down, leases are granted, stolen, refreshed
// and released on the other two; with two down, nothing is granted.
func TestPriorityOneServerDown(t *testing.T) {
	ss := own(t, 3, redisNone)
	addrs := addrsOf(ss)
	ls := &losses{}
	victim := newPriority(t, addrs, Options{OnLost: ls.on, Timeout: 500 * time.Millisecond})
	thief := newPriority(t, addrs, Options{Timeout: 500 * time.Millisecond})
	k := key(t)
	if err := ss[0].Kill(); err != nil {
		t.Fatal(err)
	}
	v := pacquire(t, victim, k, 5*time.Second, 1)
	if _, err := victim.Refresh(ctx(t), v, 5*time.Second); err != nil {
		t.Fatalf("refresh with one server down: %v", err)
	}
	th, returned := steal(t, thief, k, 5*time.Second, 2)
	if lost, ok := ls.of(v.Token); !ok || lost.At >= returned {
		t.Fatalf("victim told %v at %d, thief returned at %d", ok, lost.At, returned)
	}
	if ok, err := thief.Verify(ctx(t), th); !ok || err != nil {
		t.Errorf("thief's verify: %v %v", ok, err)
	}
	wantErr(t, "thief's release", thief.Release(ctx(t), th), nil)
	if err := ss[1].Kill(); err != nil {
		t.Fatal(err)
	}
	_, err := victim.Acquire(ctx(t), k, 5*time.Second, 1)
	wantErr(t, "acquire with two servers down", err, ErrNoQuorum)
}

// A steal that misses its majority is undone: the victim holds its key
// again, with its own deadline, where the thief had taken it.
func TestPriorityFailedStealUndone(t *testing.T) {
	addrs := shared(t)
	k := key(t)
	hold := func(a, token string, prio int, ttl time.Duration) {
		c := raw(t, a)
		c.HSet(ctx(t), lockKey(k), "acq", token, "prio", prio, "fence", 1)
		c.PExpire(ctx(t), lockKey(k), ttl)
	}
	hold(addrs[0], "victim", 1, 5*time.Second)
	hold(addrs[1], "high", 9, 5*time.Second)
	hold(addrs[2], "high", 9, 5*time.Second)
	thief := newPriority(t, addrs, Options{})
	_, err := thief.Acquire(ctx(t), k, 10*time.Second, 5)
	wantErr(t, "a steal refused by a majority", err, ErrHeld)
	c := raw(t, addrs[0])
	if v := c.HGet(ctx(t), lockKey(k), "acq").Val(); v != "victim" {
		t.Errorf("server 1 is held by %q, not the victim again", v)
	}
	if p := c.PTTL(ctx(t), lockKey(k)).Val(); p > 5*time.Second || p < 4*time.Second {
		t.Errorf("the victim's key has PTTL %v, not its own deadline (about 5 s)", p)
	}
	if n := c.HLen(ctx(t), lockKey(k)).Val(); n != 3 {
		t.Errorf("the restored hash has %d fields", n)
	}
}

// Undoing a steal after the victim's deadline passed frees the key rather
// than bring the victim back.
func TestPriorityUndoAfterVictimsDeadline(t *testing.T) {
	c := raw(t, shared(t)[0])
	k := key(t)
	c.HSet(ctx(t), lockKey(k), "acq", "victim", "prio", 1, "fence", 1)
	c.PExpire(ctx(t), lockKey(k), 100*time.Millisecond)
	res, err := obtainScript.Run(ctx(t), c, []string{lockKey(k), prioFenceKey(k)}, "thief", 2, 10000, "0", "0").Slice()
	if err != nil || res[0] != int64(2) {
		t.Fatalf("steal: %v %v", res, err)
	}
	time.Sleep(150 * time.Millisecond)
	if n, err := undoScript.Run(ctx(t), c, []string{lockKey(k)}, "thief").Int64(); n != 1 || err != nil {
		t.Errorf("undo: %v %v, want 1 (deleted)", n, err)
	}
	if n := c.Exists(ctx(t), lockKey(k)).Val(); n != 0 {
		t.Error("the key survived the undo")
	}
	if n, _ := undoScript.Run(ctx(t), c, []string{lockKey(k)}, "thief").Int64(); n != 0 {
		t.Errorf("a second undo answered %d", n)
	}
}
