package redlock

import (
	"context"
	"testing"
	"time"
)

// The real PriorityEnv's waits: the first signal fired, the deadline, the
// context's end; and the mailbox built on them.
func TestRealAwait(t *testing.T) {
	e := newRedisPriorityEnv([]string{"127.0.0.1:1"})
	defer e.Close()
	bg := context.Background()
	a, b := e.NewSignal(), e.NewSignal()
	b.Fire()
	b.Fire()
	if i := e.Await(bg, 0, a, b); i != 1 {
		t.Errorf("await of a fired signal: %d", i)
	}
	start := e.Now()
	if i := e.Await(bg, start+int64(20*time.Millisecond), a); i != -1 || e.Now()-start < int64(20*time.Millisecond) {
		t.Errorf("await until a deadline: %d after %v", i, time.Duration(e.Now()-start))
	}
	ctx, cancel := context.WithCancel(bg)
	e.Go(func() { time.Sleep(10 * time.Millisecond); cancel() })
	if i := e.Await(ctx, 0, a); i != -1 || ctx.Err() == nil {
		t.Errorf("await until the context ends: %d", i)
	}
	e.Go(func() { time.Sleep(10 * time.Millisecond); a.Fire() })
	if i := e.Await(bg, e.Now()+int64(time.Minute), a); i != 0 {
		t.Errorf("await until a signal fires: %d", i)
	}
	m := newMailbox(e)
	e.Go(func() { m.put("x"); m.put("y") })
	for _, want := range []string{"x", "y"} {
		if v, ok := m.take(bg, e.Now()+int64(time.Minute)); v != want || !ok {
			t.Errorf("take: %q %v, want %q", v, ok, want)
		}
	}
	if _, ok := m.take(bg, e.Now()+int64(time.Millisecond)); ok {
		t.Error("take from an empty mailbox")
	}
}
