package consulsim

import (
	"testing"
	"time"
)

// send sends r from p and waits for its reply (as a served connection
// does, one request at a time).
func send(p *Process, r APIRequest) APIReply {
	var rep APIReply
	var got bool
	p.Send(r, func(a APIReply, err error) {
		if err != nil {
			a = APIReply{Status: -1, Error: err.Error()}
		}
		rep, got = a, true
	})
	for !got {
		p.Wait(10 * time.Millisecond)
	}
	return rep
}

func str(s string) *string { return &s }

// The HTTP API's ?acquire, a session's destroy and its lock-delay, as
// Consul applies them: the holder's key is refused to any session for the
// delay (false, no index taken), then taken again with LockIndex + 1; a
// blocking read of the prefix returns at the write that passes its index.
func TestAPIAcquireLockDelayAndBlockingRead(t *testing.T) {
	w, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	var woke APIReply
	var at int64
	w.Go("c1", func(p *Process) {
		a := send(p, APIRequest{Op: SessionCreate, Session: APISession{TTL: "10s", LockDelay: time.Second}})
		b := send(p, APIRequest{Op: SessionCreate, Session: APISession{TTL: "10s"}})
		if r := send(p, APIRequest{Op: KVPut, Key: "lp/.lock", Acquire: str(a.ID), Flags: 7}); !r.OK {
			t.Errorf("acquire: %+v", r)
		}
		send(p, APIRequest{Op: SessionDestroy, Key: a.ID})
		if r := send(p, APIRequest{Op: KVPut, Key: "lp/.lock", Acquire: str(b.ID)}); r.OK || r.Status != 200 {
			t.Errorf("acquire during the lock-delay: %+v, want false", r)
		}
		p.Sleep(time.Second)
		if r := send(p, APIRequest{Op: KVPut, Key: "lp/.lock", Acquire: str(b.ID)}); !r.OK {
			t.Errorf("acquire after the lock-delay: %+v", r)
		}
		r := send(p, APIRequest{Op: KVGet, Key: "lp/.lock"})
		if len(r.Entries) != 1 || r.Entries[0].LockIndex != 2 || r.Entries[0].Session != b.ID || r.Index != r.Entries[0].ModifyIndex {
			t.Errorf("the key after its second acquire: %+v", r)
		}
		if r := send(p, APIRequest{Op: KVPut, Key: "lp/.lock", Acquire: str("nobody")}); r.Status != 500 || r.Error != `raft apply failed: invalid session "nobody"` {
			t.Errorf("acquire with no such session: %+v", r)
		}
	})
	w.Go("c2", func(p *Process) {
		l := send(p, APIRequest{Op: KVGet, Key: "lp/", Recurse: true})
		woke = send(p, APIRequest{Op: KVGet, Key: "lp/", Recurse: true, Index: l.Index, Wait: time.Minute})
		at = p.Now()
	})
	if err := w.Run(); err != nil {
		t.Fatal(err)
	}
	if len(woke.Entries) != 1 || at >= int64(time.Minute) {
		t.Errorf("the blocking read returned %+v at %v, want the key at its write", woke, time.Duration(at))
	}
}
