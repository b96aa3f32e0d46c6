package pgadvisory

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"syscall"
	"time"

	"github.com/lockprover/lockprover/backends/postgres"
	"github.com/lockprover/lockprover/families/lease"
	"github.com/lockprover/lockprover/families/lease/leaseplan"
	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/prover"
	"github.com/lockprover/lockprover/prover/run"
)

// restartDowntime is how long a restarted server stays down.
const restartDowntime = 200 * time.Millisecond

// opTimeout bounds one operation of a client: a statement a partition
// holds ends unknown after it.
func opTimeout(ttl time.Duration) time.Duration { return 2*ttl + time.Second }

// A client that cannot start (an implementation's process, its server
// restarting) tries openTries times, openBackoff apart.
const (
	openTries   = 40
	openBackoff = 50 * time.Millisecond
)

// runPlan runs p against impl (nil: the reference, or p's mutant of it)
// on server, each client behind a fault proxy of its own.
func runPlan(ctx context.Context, p *Plan, server *postgres.Server, impl Impl) (*prover.Result, error) {
	r := &runner{ctx: ctx, p: p, server: server, impl: impl, ttl: time.Duration(p.TTLMs) * time.Millisecond,
		clients: map[string]*client{}, start: time.Now()}
	// A key of the run's own, so that runs on one server never meet.
	r.key = int64(rand.Uint64() >> 1)
	if m := MutantNamed(p.Mutant); m != nil {
		r.defects = m.Defects()
	}
	r.Init(run.Config{Lock: &r.mu, Now: r.now, Poll: run.Poll{First: 10 * time.Millisecond, Max: 50 * time.Millisecond},
		Ends: []string{histories.Partition, histories.Pause}})
	defer r.close()
	r.mu.Lock()
	for i, script := range p.Clients {
		name := leaseplan.ClientName(i)
		st, err := r.add(name, script)
		if err != nil {
			r.mu.Unlock()
			return nil, err
		}
		r.startClient(st)
	}
	r.mu.Unlock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.nemesis()
	}()
	<-done
	r.wg.Wait()
	return r.Result(p.Key)
}

// runner runs one plan on a real server, on the skeleton every family's
// runner shares (its lock is mu: processes, timers and the nemesis run
// at once).
type runner struct {
	run.Runner
	mu      sync.Mutex
	ctx     context.Context
	p       *Plan
	server  *postgres.Server
	impl    Impl // nil: the reference
	ttl     time.Duration
	key     int64
	defects Defects
	start   time.Time
	clients map[string]*client
	wg      sync.WaitGroup
}

// A client is a process's place in its script, the lease it believes it
// holds, and its proxy; they outlive its incarnations.
type client struct {
	run.Proc
	script []lease.Step
	pos    int
	token  string
	proxy  *postgres.Proxy

	cancel         context.CancelFunc // ends the current incarnation's calls
	pc             ProcessClient      // the current incarnation's process, if an implementation's
	refs           []reference        // every incarnation's reference, closed at the run's end
	procs          []ProcessClient    // every incarnation's process, closed at the run's end
	paused, parted bool
	gate           chan struct{} // closed when a pause ends
}

func (r *runner) now() int64 { return int64(time.Since(r.start)) }

// add registers client name with its script and a proxy of its own.
func (r *runner) add(name string, script []lease.Step) (*client, error) {
	px, err := postgres.NewProxy(r.server.Addr())
	if err != nil {
		return nil, fmt.Errorf("pgadvisory: a proxy for %s: %w", name, err)
	}
	st := &client{Proc: run.Proc{Name: name}, script: script, proxy: px}
	return run.Register(&r.Runner, r.clients, &st.Proc, st), nil
}

// startClient starts the client's next incarnation (with the lock held).
func (r *runner) startClient(st *client) {
	run.Start(&r.Runner, &st.Proc, func(_ string, f func(*client)) {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			f(st)
		}()
	}, func(_ *client, gen int) { r.run(st, gen) })
}

// run is one incarnation of a client (with the lock held): the
// reference (a Lock of its own) or a process of the implementation, told
// to go through the client's proxy, and the rest of the script.
func (r *runner) run(st *client, gen int) {
	ctx, cancel := context.WithCancel(r.ctx)
	st.cancel = cancel
	// A client done with its script leaves its session open and idle, a
	// lock in it as a lease left to expire: the server ends the session
	// once it has been idle for the ttl (closing it now would free the
	// lock while the lease is still certainly valid). The run closes
	// sessions and processes at its end.
	defer cancel()
	// The run's name (the launcher counts an implementation's failed
	// starts by it) is its key's: each run's own.
	s := Session{URL: st.proxy.URL(), Key: r.key, TTL: r.ttl, Run: fmt.Sprintf("lp-%x", r.key)}
	var c Client
	if r.impl == nil {
		ref := NewReference(st.Process, s, r.defects).(reference)
		st.refs = append(st.refs, ref)
		c = ref
	} else {
		var pc ProcessClient
		err := run.Retry(openTries, openBackoff, func(d time.Duration) error { r.Outside(func() { time.Sleep(d) }); return ctx.Err() }, func() error {
			if ctx.Err() != nil || !st.Live(gen) {
				return run.Stop
			}
			var err error
			r.Outside(func() { pc, err = r.impl.Connect(ctx, st.Process, s) })
			return err
		})
		if pc != nil {
			st.procs = append(st.procs, pc)
		}
		if !st.Live(gen) {
			return
		}
		if pc == nil || err != nil {
			if err == nil {
				err = errors.New("the run ended")
			}
			r.Problems = append(r.Problems, fmt.Sprintf("%s could not start: %v", st.Name, err))
			st.Done = true
			return
		}
		st.pc = pc
		if st.paused {
			pc.Signal(syscall.SIGSTOP) // paused while it started
		}
		c = pc
	}
	for st.pos < len(st.script) && st.Live(gen) && ctx.Err() == nil {
		step := st.script[st.pos]
		st.pos++
		r.step(ctx, st, gen, c, step)
		if st.pc != nil && st.Live(gen) {
			if why := st.pc.Crashed(); why != "" {
				// The process is gone: what it held goes with its
				// session, and the client goes on as a new process, as
				// after a kill (recorded after the operation ended, so
				// that it excuses nothing).
				r.Problems = append(r.Problems, fmt.Sprintf("%s %s", st.Name, why))
				r.strike(Fault{Fault: histories.Kill, Target: st.Name}, false)
				return
			}
		}
	}
	if st.Live(gen) {
		st.Done = true
	}
}

// wait waits, without the lock, while the client is paused.
func (r *runner) wait(st *client) {
	for st.paused {
		g := st.gate
		r.Outside(func() {
			select {
			case <-g:
			case <-r.ctx.Done():
			}
		})
		if r.ctx.Err() != nil {
			return
		}
	}
}

// step runs one line of a client's script.
func (r *runner) step(ctx context.Context, st *client, gen int, c Client, s lease.Step) {
	r.wait(st)
	if !st.Live(gen) {
		return
	}
	if s.Op == lease.Sleep {
		r.Outside(func() {
			select {
			case <-time.After(time.Duration(s.Ms) * time.Millisecond):
			case <-ctx.Done():
			}
		})
		return
	}
	e := histories.Event{Process: st.Name, Type: histories.Invoke, F: s.Op, Lock: r.p.Key, Kind: histories.Lease}
	ttlMs := r.p.TTLMs
	switch {
	case s.Op == histories.Acquire && st.token == "":
		one := 1
		e.Value = &lease.Value{Max: &one, TTLMs: &ttlMs}
	case s.Op == histories.Refresh && st.token != "":
		e.Value = &lease.Value{Token: st.token, TTLMs: &ttlMs}
	case s.Op == histories.Release && st.token != "":
		e.Value = &lease.Value{Token: st.token}
	default:
		return // nothing to refresh or release, or already held
	}
	r.Invoke(&st.Proc, e)
	var token string
	var err error
	r.Outside(func() {
		x := ctx
		if r.impl == nil {
			// An implementation's process has the protocol's timeout.
			var cancel context.CancelFunc
			x, cancel = context.WithTimeout(ctx, opTimeout(r.ttl))
			defer cancel()
		}
		switch s.Op {
		case histories.Acquire:
			token, err = c.Acquire(x)
		case histories.Refresh:
			err = c.Refresh(x, st.token)
		case histories.Release:
			err = c.Release(x, st.token)
		}
	})
	if !st.Live(gen) {
		return // killed meanwhile: the kill ended the operation
	}
	r.complete(st, c, s.Op, token, err)
}

// complete records an operation's outcome.
func (r *runner) complete(st *client, c Client, op, token string, err error) {
	switch {
	case err == nil && op == histories.Acquire:
		st.token = token
		r.Finish(&st.Proc, histories.Ok, &lease.Value{Token: st.token}, nil)
	case err == nil:
		if op == histories.Release {
			st.token = ""
		}
		r.Finish(&st.Proc, histories.Ok, nil, nil)
	case op == histories.Acquire && errors.Is(err, ErrFull):
		r.Finish(&st.Proc, histories.Fail, &lease.Value{Reason: histories.Full}, nil)
	case op == histories.Acquire && errors.Is(err, ErrNotSent):
		r.Finish(&st.Proc, histories.Fail, nil, err)
	case op != histories.Acquire && errors.Is(err, ErrLost):
		st.token = ""
		r.Finish(&st.Proc, histories.Fail, &lease.Value{Reason: histories.Expired}, err)
	case op != histories.Acquire && errors.Is(err, ErrNotSent):
		// Nothing reached the server: the lease is as it was, and the
		// holder cannot tell for how long; it lets it go.
		st.token = ""
		r.Finish(&st.Proc, histories.Fail, nil, err)
	default:
		// Unknown: the client gives up its lease; the reference ends its
		// session, and a lock the session may hold goes with it (an
		// implementation does as it does).
		st.token = ""
		r.Finish(&st.Proc, histories.Info, nil, err)
		if ref, ok := c.(reference); ok {
			r.Outside(ref.Close)
		}
	}
}

// nemesis strikes the plan's timed faults and brings the run to its
// quiescent end: the holds ended, every lease expired, and a probe that
// must take the lock.
func (r *runner) nemesis() {
	timeline := run.Timeline(len(r.p.Nemesis), func(i int) (int, int, bool) {
		f := r.p.Nemesis[i]
		return f.At, f.For, true
	})
	sleep := func(d time.Duration) {
		select {
		case <-time.After(d):
		case <-r.ctx.Done():
		}
	}
	r.Nemesis(timeline, run.Nemesis{
		Sleep:  run.Sleeper(r.ctx, sleep),
		Strike: func(t run.Timed) { r.Locked(func() { r.strike(r.p.Nemesis[t.Fault], t.End) }) },
		EndFaults: func() {
			r.Locked(func() {
				for _, h := range r.Holds() {
					r.strike(Fault{Fault: h.Fault, Target: h.Target}, true)
				}
			})
		},
		// Every session left idle has been ended by the server once the
		// ttl and a margin have passed: the lock must be free.
		Settle: func() { sleep(r.ttl + lease.Margin) },
		Probe: func() {
			r.Locked(func() {
				if st, err := r.add("probe", []lease.Step{{Op: histories.Acquire}, {Op: histories.Release}}); err == nil {
					r.startClient(st)
				} else {
					r.Problems = append(r.Problems, err.Error())
				}
			})
		},
		Abandon: func(name string) {
			r.Locked(func() {
				if st := r.clients[name]; st != nil {
					r.kill(st)
					st.Gen++ // the abandoned incarnation records nothing more
				}
			})
		},
		Patience:  time.Minute,
		ProbeTime: time.Minute,
	})
}

// strike applies a fault (or, with end, ends it) and records it.
func (r *runner) strike(f Fault, end bool) {
	st := r.clients[f.Target]
	name := f.Fault
	if end {
		if !r.Held(f.Fault, f.Target) {
			return
		}
		name = histories.EndOf(f.Fault)
	}
	var v *histories.Fault
	if f.Target != "" {
		v = &histories.Fault{Process: f.Target}
	}
	if st != nil && st.Done && !end {
		return // the client has finished its script
	}
	switch name {
	case histories.Kill:
		r.Struck(name, histories.Of(v))
		r.kill(st)
		r.startClient(st) // its next incarnation: the old one is no longer Live
		return
	case histories.Pause:
		if !st.paused { // a second pause of a paused client keeps its gate
			st.paused, st.gate = true, make(chan struct{})
			if st.pc != nil {
				st.pc.Signal(syscall.SIGSTOP)
			}
		}
		r.Hold(histories.Pause, f.Target)
		r.hold(st)
	case histories.Resume:
		r.Unhold(histories.Pause, f.Target)
		st.paused = false
		close(st.gate)
		if st.pc != nil {
			st.pc.Signal(syscall.SIGCONT)
		}
		r.hold(st)
	case histories.Partition:
		st.parted = true
		r.Hold(histories.Partition, f.Target)
		r.hold(st)
	case histories.Heal:
		r.Unhold(histories.Partition, f.Target)
		st.parted = false
		r.hold(st)
	case histories.ForceClose:
		// The server ends every session the client has through its proxy
		// (found by the proxy's ports, whatever the client is).
		r.Began(name, histories.Of(v))
		ports := st.proxy.UpstreamPorts()
		var err error
		r.Outside(func() {
			var pids []uint32
			if pids, err = r.server.SessionsFrom(r.ctx, ports); err == nil && len(pids) > 0 {
				_, err = r.server.Terminate(r.ctx, pids...)
			}
		})
		if err != nil {
			r.Problems = append(r.Problems, fmt.Sprintf("force-close of %s: %v", f.Target, err))
		}
		r.Ended(name, histories.Of(v), nil)
		return
	case histories.RestartBroker:
		r.Began(name, nil)
		var err error
		r.Outside(func() { err = r.server.Restart(r.ctx, restartDowntime) })
		r.Ended(name, nil, err)
		return
	}
	r.Struck(name, histories.Of(v))
}

// hold makes the client's proxy hold its bytes while it is partitioned,
// or, the reference, paused (a statement it sent is held, as if sent just
// before the pause; an implementation's process is stopped with SIGSTOP).
func (r *runner) hold(st *client) {
	if (st.paused && r.impl == nil) || st.parted {
		st.proxy.Partition()
	} else {
		st.proxy.Heal()
	}
}

// kill ends the client's current incarnation: its connections close (the
// server ends its session, and its lock), its operation in flight ends
// unknown, and it holds nothing; it is no longer paused or partitioned.
func (r *runner) kill(st *client) {
	if _, ok := r.InFlight(&st.Proc); ok {
		r.Finish(&st.Proc, histories.Info, nil, errors.New("killed"))
	}
	if st.cancel != nil {
		st.cancel()
	}
	if st.pc != nil {
		st.pc.Signal(syscall.SIGKILL) // closed with the run
		st.pc = nil
	}
	st.token = ""
	if st.paused {
		st.paused = false
		close(st.gate)
	}
	st.parted = false
	r.Unhold(histories.Pause, st.Name)
	r.Unhold(histories.Partition, st.Name)
	st.proxy.Heal()
	st.proxy.Kill()
}

// close closes every session of the run, and the clients' proxies, once
// every incarnation has ended.
func (r *runner) close() {
	r.wg.Wait()
	for _, st := range r.clients {
		for _, ref := range st.refs {
			ref.Close()
		}
		for _, pc := range st.procs {
			pc.Close()
		}
		st.proxy.Close()
	}
}
