package pgadvisoryrun

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/lockprover/lockprover/adapters/servers/postgres"
	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/internal/prover/run"
	"github.com/lockprover/lockprover/model/pgadvisory"
)

// runPlan runs p against impl (nil: the reference, or p's mutant of it)
// on server, each client behind a fault proxy of its own.
func runPlan(ctx context.Context, p *Plan, server *postgres.Server, impl Impl) (*prover.Result, error) {
	b := &postgresPlace{ctx: ctx, server: server, impl: impl, start: time.Now(), clients: map[string]*pgClient{}}
	// A key of the run's own, so that runs on one server never meet.
	r := newRunner(ctx, p, b, int64(rand.Uint64()>>1))
	defer b.close()
	b.mu.Lock()
	err := r.begin()
	b.mu.Unlock()
	if err != nil {
		return nil, err
	}
	b.wg.Wait()
	return r.result()
}

// postgresPlace is a private PostgreSQL server, each client behind a fault
// proxy of its own; its processes are goroutines, in real time.
type postgresPlace struct {
	mu      sync.Mutex
	ctx     context.Context
	server  *postgres.Server
	impl    Impl // nil: the reference
	start   time.Time
	clients map[string]*pgClient
	wg      sync.WaitGroup
}

// A pgClient is what the place keeps of a client across its
// incarnations: its proxy, and its current incarnation's.
type pgClient struct {
	proxy          *postgres.Proxy
	process        string             // the current incarnation
	cancel         context.CancelFunc // ends the current incarnation's calls
	pc             ProcessClient      // the current incarnation's process, if an implementation's
	refs           []reference        // every incarnation's reference, closed at the run's end
	procs          []ProcessClient    // every incarnation's process, closed at the run's end
	paused, parted bool
	gate           chan struct{} // closed when a pause ends
}

func (b *postgresPlace) Lock()                   { b.mu.Lock() }
func (b *postgresPlace) Unlock()                 { b.mu.Unlock() }
func (b *postgresPlace) Now() int64              { return int64(time.Since(b.start)) }
func (b *postgresPlace) patience() time.Duration { return time.Minute }
func (b *postgresPlace) poll() run.Poll {
	return run.Poll{First: 10 * time.Millisecond, Max: 50 * time.Millisecond}
}

func (b *postgresPlace) add(name string) error {
	px, err := postgres.NewProxy(b.server.Addr())
	if err != nil {
		return fmt.Errorf("pgadvisory: a proxy for %s: %w", name, err)
	}
	b.clients[name] = &pgClient{proxy: px}
	return nil
}

// Go runs f in a goroutine of its own; a client's incarnation gets a
// context that a kill cancels.
func (b *postgresPlace) Go(process string, f func(proc)) {
	ctx, cancel := context.WithCancel(b.ctx)
	name := process
	if i := strings.IndexByte(process, '#'); i >= 0 {
		name = process[:i]
	}
	st := b.clients[name]
	if st != nil {
		st.process, st.cancel = process, cancel
	}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		defer cancel()
		f(&pgProc{b: b, ctx: ctx, st: st, process: process})
	}()
}

// Strike kills, pauses or partitions a client's incarnation, ends the
// client's sessions (forceClose), or restarts the server.
func (b *postgresPlace) Strike(a run.Aim) error {
	if a.Fault == histories.RestartBroker {
		return b.server.Restart(b.ctx, a.Down)
	}
	return clientFaults(a, b.kill, b.pause, b.partition, b.forceClose)
}

// End resumes or heals a client's incarnation.
func (b *postgresPlace) End(a run.Aim) error { return clientEnds(a, b.resume, b.heal) }

func (b *postgresPlace) kill(name, process string) {
	st := b.clients[name]
	if st.cancel != nil {
		st.cancel()
	}
	if st.pc != nil {
		st.pc.Signal(syscall.SIGKILL) // closed with the run
		st.pc = nil
	}
	if st.paused {
		st.paused = false
		close(st.gate)
	}
	st.parted = false
	st.proxy.Heal()
	st.proxy.Kill()
}

func (b *postgresPlace) pause(name, process string) {
	st := b.clients[name]
	if !st.paused { // a second pause of a paused client keeps its gate
		st.paused, st.gate = true, make(chan struct{})
		if st.pc != nil {
			st.pc.Signal(syscall.SIGSTOP)
		}
	}
	b.hold(st)
}

func (b *postgresPlace) resume(name, process string) {
	st := b.clients[name]
	if st.paused {
		st.paused = false
		close(st.gate)
		if st.pc != nil {
			st.pc.Signal(syscall.SIGCONT)
		}
	}
	b.hold(st)
}

func (b *postgresPlace) partition(name, process string) {
	st := b.clients[name]
	st.parted = true
	b.hold(st)
}

func (b *postgresPlace) heal(name, process string) {
	st := b.clients[name]
	st.parted = false
	b.hold(st)
}

// hold makes the client's proxy hold its bytes while it is partitioned,
// or, the reference, paused (a statement it sent is held, as if sent just
// before the pause; an implementation's process is stopped with SIGSTOP).
func (b *postgresPlace) hold(st *pgClient) {
	if (st.paused && b.impl == nil) || st.parted {
		st.proxy.Partition()
	} else {
		st.proxy.Heal()
	}
}

// forceClose terminates every session the client has through its proxy
// (found by the proxy's ports, whatever the client is).
func (b *postgresPlace) forceClose(name string) error {
	b.mu.Lock()
	ports := b.clients[name].proxy.UpstreamPorts()
	b.mu.Unlock()
	pids, err := b.server.SessionsFrom(b.ctx, ports)
	if err == nil && len(pids) > 0 {
		_, err = b.server.Terminate(b.ctx, pids...)
	}
	return err
}

// close closes every session of the run, and the clients' proxies, once
// every incarnation has ended.
func (b *postgresPlace) close() {
	b.wg.Wait()
	for _, st := range b.clients {
		for _, ref := range st.refs {
			ref.Close()
		}
		for _, pc := range st.procs {
			pc.Close()
		}
		st.proxy.Close()
	}
}

// pgProc is a goroutine of the run: the nemesis, or a client's
// incarnation (st set).
type pgProc struct {
	b       *postgresPlace
	ctx     context.Context
	st      *pgClient
	process string
}

func (p *pgProc) Sleep(d time.Duration) {
	select {
	case <-time.After(d):
	case <-p.ctx.Done():
	}
}

// wait waits, without the lock, while the client is paused.
func (p *pgProc) wait() {
	for p.st.paused {
		g := p.st.gate
		p.b.mu.Unlock()
		select {
		case <-g:
		case <-p.b.ctx.Done():
		}
		p.b.mu.Lock()
		if p.b.ctx.Err() != nil {
			return
		}
	}
}

func (p *pgProc) context(ttl time.Duration) (context.Context, context.CancelFunc) {
	if p.b.impl != nil {
		return p.ctx, func() {} // an implementation's process has the protocol's timeout
	}
	return context.WithTimeout(p.ctx, opTimeout(ttl))
}

// open makes the reference (a Lock of its own, through the client's
// proxy), or starts the implementation's process, told to go through it.
func (p *pgProc) open(name string, s Session, d pgadvisory.Defects) (Client, error) {
	s.URL = p.st.proxy.URL()
	if p.b.impl == nil {
		ref := NewReference(name, s, d).(reference)
		p.b.mu.Lock()
		p.st.refs = append(p.st.refs, ref)
		p.b.mu.Unlock()
		return ref, nil
	}
	pc, err := p.b.impl.Connect(p.ctx, name, s)
	p.b.mu.Lock()
	defer p.b.mu.Unlock()
	if pc != nil {
		p.st.procs = append(p.st.procs, pc)
		if p.st.process == p.process {
			p.st.pc = pc
			if p.st.paused {
				pc.Signal(syscall.SIGSTOP) // paused while it started
			}
		}
	}
	if err != nil {
		return nil, err
	}
	return pc, nil
}
