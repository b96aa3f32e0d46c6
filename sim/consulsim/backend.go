package consulsim

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/lockprover/lockprover/model/consulsem"
)

// epoch is what Backend.Now reads at virtual time 0 (2025-01-01 00:00
// UTC).
var epoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// Backend is the process's view of the server as consulsem's recipe uses
// it (consulsem.On): each method is one call, as consulsem's Consul or
// Etcd makes it, taking the call's time in virtual time; Now is the
// virtual time. Use it from the process only; a Semaphore on it then
// starts no goroutine and reads no other clock, so that a run depends
// only on the World's decisions.
func (p *Process) Backend() consulsem.Backend { return backend{p: p} }

// BackendOn is Backend, its calls going through node of a cluster
// (Options.Cluster) whatever ClusterOptions.NodeOf says of the process:
// one process with clients on several nodes (the cluster differential's
// driver).
func (p *Process) BackendOn(node string) consulsem.Backend { return backend{p: p, node: node} }

// Semaphore is consulsem's reference on the process's Backend.
func (p *Process) Semaphore(o consulsem.Options) (*consulsem.Semaphore, error) {
	return consulsem.On(p.Backend(), o)
}

type backend struct {
	p    *Process
	node string // the cluster's node its calls go through ("": the process's)
}

// Timing is consulsem's for the kind: Consul's TTL timers run for up to
// twice the TTL; etcd's leases are whole seconds, revoked by a sweep
// every 500 ms.
func (b backend) Timing() consulsem.Timing {
	if b.p.w.o.Kind == Etcd {
		return consulsem.Timing{Backend: "etcd", Factor: 1, Grain: time.Second, Sweep: EtcdSweep, RestartResets: true}
	}
	return consulsem.Timing{Backend: "consul", Factor: 2, RestartResets: true}
}

func (b backend) Now() time.Time { return epoch.Add(time.Duration(b.p.w.now)) }
func (b backend) Close() error   { return nil }

func (b backend) etcd() bool { return b.p.w.o.Kind == Etcd }

// do runs one call, unless ctx has ended.
func (b backend) do(ctx context.Context, what string, wait time.Duration, op func(*server, *call)) result {
	return b.doStale(ctx, what, wait, false, op)
}

// doStale runs one call, a stale listing if stale, unless ctx has ended.
func (b backend) doStale(ctx context.Context, what string, wait time.Duration, stale bool, op func(*server, *call)) result {
	if err := ctx.Err(); err != nil {
		return result{err: err}
	}
	p := b.p
	return p.post(&call{p: p, what: what, wait: wait, op: op, conn: p.conn, stale: stale, node: b.node})
}

// now answers c with what f returns, at once.
func now(f func(s *server) result) func(*server, *call) {
	return func(s *server, c *call) { s.w.reply(c, f(s)) }
}

func (b backend) CreateSession(ctx context.Context, ttl time.Duration, release bool, lockDelay time.Duration) (string, time.Duration, error) {
	what := fmt.Sprintf("create session TTL %v release %v", ttl, release)
	if lockDelay > 0 {
		what += fmt.Sprintf(" lock-delay %v", lockDelay)
	}
	r := b.do(ctx, what, 0, func(s *server, c *call) {
		tok, granted, err := s.create(ttl, release, lockDelay)
		s.w.reply(c, result{tok: tok, ttl: granted, err: err})
	})
	return r.tok, r.ttl, r.err
}

func (b backend) RenewSession(ctx context.Context, tok string) error {
	if b.etcd() && !leaseID(tok) {
		return consulsem.ErrSessionGone
	}
	r := b.do(ctx, "renew "+tok, 0, func(s *server, c *call) { s.renew(c, tok) })
	if r.err == nil && !r.ok {
		return consulsem.ErrSessionGone
	}
	return r.err
}

func (b backend) DestroySession(ctx context.Context, tok string) error {
	if b.etcd() && !leaseID(tok) {
		return nil
	}
	return b.do(ctx, "destroy "+tok, 0, now(func(s *server) result { s.destroy(tok); return result{} })).err
}

func (b backend) PutContender(ctx context.Context, key, tok string, bound bool) (bool, error) {
	if b.etcd() && bound && !leaseID(tok) {
		return false, fmt.Errorf("token %q: want an etcd lease id, 16 hex digits", tok)
	}
	r := b.do(ctx, fmt.Sprintf("put contender %s session %s bound %v", key, tok, bound), 0, now(func(s *server) result {
		ok, err := s.putContender(key, tok, bound)
		return result{ok: ok, err: err}
	}))
	return r.ok, r.err
}

func (b backend) List(ctx context.Context, prefix string, stale bool) (consulsem.Listing, error) {
	r := b.doStale(ctx, fmt.Sprintf("list %s/ stale %v", prefix, stale), 0, stale, now(func(s *server) result {
		return result{l: s.list(prefix)}
	}))
	if r.l.Entries == nil {
		r.l.Entries = map[string]consulsem.Entry{}
	}
	return r.l, r.err
}

func (b backend) WriteLock(ctx context.Context, w consulsem.LockWrite) (uint64, error) {
	if b.etcd() && w.Live != "" && !leaseID(w.Session) {
		return 0, fmt.Errorf("token %q: want an etcd lease id, 16 hex digits", w.Session)
	}
	what := fmt.Sprintf("write %s cas %v index %d live %q session %s: %s", w.Key, w.CAS, w.Index, w.Live, w.Session, w.Value)
	r := b.do(ctx, what, 0, now(func(s *server) result {
		n, err := s.writeLock(w)
		return result{n: n, err: err}
	}))
	return r.n, r.err
}

func (b backend) DeleteKey(ctx context.Context, key string) error {
	return b.do(ctx, "delete "+key, 0, now(func(s *server) result { s.deleteKey(key); return result{} })).err
}

// WaitChange: a Consul blocking query, whose failure is an error; an etcd
// watch, whose failure the client does not look at: it waits out max.
func (b backend) WaitChange(ctx context.Context, prefix string, index uint64, max time.Duration) error {
	start := b.p.w.now
	r := b.do(ctx, fmt.Sprintf("wait for a change of %s/ after %d, at most %v", prefix, index, max), max, func(s *server, c *call) {
		s.waitChange(c, prefix, index, max)
	})
	if r.err != nil && b.etcd() && ctx.Err() == nil {
		b.p.Sleep(time.Duration(start + int64(max) - b.p.w.now))
		return nil
	}
	return r.err
}

// leaseID says whether tok can be an etcd lease id: 16 hex digits.
func leaseID(tok string) bool {
	_, err := strconv.ParseUint(tok, 16, 64)
	return err == nil && len(tok) == 16
}
