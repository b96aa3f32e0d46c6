package consulsemrun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"syscall"
	"time"

	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/internal/prover/run"
	"github.com/lockprover/lockprover/sim/consulsim"
)

// An implementation on the simulated Consul agent served on the wire
// (adapters/served/consulserve): each incarnation of a client is a process
// of the implementation, told its own port of the agent in init's addr,
// as a real agent's fault proxy is told; its requests are the World's
// steps, logged in the plan (Wire) and replayed in their order. Every
// fault of the simulator strikes: a kill kills the process (SIGKILL) as
// well as the World's, a pause stops it (SIGSTOP, SIGCONT) as well as
// the World's, a partition holds its requests and their answers, a
// drop-reply loses the agent's next answer to it (its connection
// reset), a force-close resets its connections, a restart of the agent
// resets every connection and refuses at the ports while it is down.

// A Wire is a run's simulated agent served on the wire
// (adapters/served/consulserve, through consulsemprotocol.Wire): each
// process of the World gets a port, which its implementation's process
// connects to.
type Wire interface {
	// Name is the served run's, unique: the run the implementation's
	// processes are started under.
	Name() string
	// Process serves the World's process p (call it from p): the agent's
	// address for its implementation's process, and ctx made to wait on
	// that process through the World.
	Process(ctx context.Context, p *consulsim.Process) (addr string, waits context.Context, err error)
	// Flush makes a fault struck by another process (a force-close, a
	// restart) true on the wire at once.
	Flush()
	// End stops serving once the World has run, and says what the run
	// recorded (the plan's Wire), what went wrong with the
	// implementation's side (problems), what a reader must be told
	// (notes), and an error where the run says nothing of the
	// implementation (a path the agent does not serve).
	End() (log map[string][]string, problems, notes []string, err error)
}

// A Serve makes a run's Wire: the World's agent served, the plan's log
// (its Wire) replayed.
type Serve func(w *consulsim.World, p *Plan) (Wire, error)

// ErrServedEtcd is why an implementation cannot run on the simulated
// etcd: its gRPC API is not served on the wire.
var ErrServedEtcd = errors.New("the simulated etcd is not served on the wire (only Consul's HTTP API is): run an implementation on etcd with --target etcd")

// SimulateImpl runs p against impl, in processes of its own, on a fresh
// simulated Consul agent served on the wire; p.Wire, the steps the run
// logged, is replayed if set and is the new run's log after. trace, if
// set, receives the simulator's trace.
func SimulateImpl(ctx context.Context, p *Plan, impl Impl, serve Serve, trace io.Writer) (*prover.Result, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := checkServed(p, impl); err != nil {
		return nil, err
	}
	if serve == nil {
		return nil, errors.New("served: an implementation on the simulator needs its agent served on the wire (consulsemprotocol.Wire)")
	}
	r := &runner{p: p, clients: map[string]*client{}, armed: map[string]bool{}, ctx: ctx, impl: impl}
	var w *consulsim.World
	decide, state := p.Decider(scheduleSalt, func() int { return w.Keep() })
	w, err := consulsim.New(consulsim.Options{Kind: consulsim.Consul, Persistent: p.Persistent, Decide: decide, Trace: trace, OnDrop: r.dropped})
	if err != nil {
		return nil, err
	}
	r.sim = w
	state(w.Unseen(), w, r)
	b, err := serve(w, p)
	if err != nil {
		return nil, err
	}
	sv := &servedImpl{b: b, impl: impl, procs: map[string]ProcessClient{}}
	if sp, ok := impl.(run.Spawner); ok {
		// The World's clock stands still while a process starts: they
		// need only start side by side.
		sp.Spawn(b.Name(), len(p.Clients))
		defer sp.Drain(b.Name())
	}
	r.begin(servedPlace{simPlace{w}, sv})
	runErr := w.Run()
	log, refused, diverged, err := b.End()
	if runErr != nil {
		return nil, runErr
	}
	p.Wire = log
	r.Problems = append(r.Problems, refused...)
	if err != nil {
		return nil, err
	}
	res, err := r.Result(r.p.Prefix)
	if res != nil {
		res.Evidence.Trace = append(res.Evidence.Trace, diverged...)
	}
	return res, err
}

// checkServed says why p cannot run against impl on the served agent: a
// plan of etcd, of a cluster, of a mutant of the reference.
func checkServed(p *Plan, impl Impl) error {
	switch {
	case impl == nil:
		return errors.New("served: no implementation to run")
	case p.Backend != Consul:
		return ErrServedEtcd
	case len(p.Cluster) > 0:
		return fmt.Errorf("cluster: the simulated cluster is not served on the wire; run an implementation on a real cluster (--target %s-cluster)", p.Backend)
	case p.Mutant != "":
		return fmt.Errorf("mutant: %s is a variant of the reference; it cannot run against %s", p.Mutant, impl)
	}
	return nil
}

// PreflightServed starts one process of impl as the probe of a throwaway
// prefix on a simulated agent served on the wire by serve, waits for its
// init_ok and ends it: an implementation that cannot start fails here at
// once.
func PreflightServed(ctx context.Context, impl Impl, serve Serve) error {
	w, err := consulsim.New(consulsim.Options{})
	if err != nil {
		return err
	}
	b, err := serve(w, &Plan{})
	if err != nil {
		return err
	}
	var probeErr error
	w.Go("probe", func(p *consulsim.Process) {
		addr, waits, err := b.Process(ctx, p)
		if err != nil {
			probeErr = err
			return
		}
		s := Session{Prefix: "lp-preflight", Backend: Consul, Addr: addr, Limit: 1, TTL: 2 * time.Second, Run: "preflight"}
		pc, err := impl.Connect(waits, "probe", s)
		if err != nil {
			probeErr = err
			return
		}
		probeErr = pc.Close()
	})
	runErr := w.Run()
	_, _, _, endErr := b.End()
	return errors.Join(probeErr, runErr, endErr)
}

// servedImpl is the implementation on the served agent: each incarnation
// of a client a process of impl, by World process (a kill of the World's
// kills it too).
type servedImpl struct {
	b     Wire
	impl  Impl
	procs map[string]ProcessClient
}

// servedPlace is the simulator as a place whose clients are an
// implementation's processes on the served agent.
type servedPlace struct {
	simPlace
	sv *servedImpl
}

func (b servedPlace) Go(name string, f func(proc)) {
	b.World.Go(name, func(p *consulsim.Process) { f(servedProc{p, b.sv}) })
}

// Strike strikes a as the simulator does, and on the implementation's
// process: SIGKILL for a kill, SIGSTOP for a pause; a force-close's
// resets and a restart's reach the wire at once (its ports closed while
// the agent is down).
func (b servedPlace) Strike(a run.Aim) error {
	switch a.Fault {
	case histories.Kill:
		b.signal(a.Process, syscall.SIGKILL)
		delete(b.sv.procs, a.Process)
	case histories.Pause:
		b.signal(a.Process, syscall.SIGSTOP)
	case histories.ForceClose:
		defer b.sv.b.Flush()
	case histories.RestartBroker:
		if err := b.World.Restart(a.Down); err != nil {
			return err
		}
		b.sv.b.Flush()
		a.Struck()
		a.Wait(a.Down)
		b.sv.b.Flush()
		return nil
	}
	return b.simPlace.Strike(a)
}

// End resumes (SIGCONT too) or heals the process a names.
func (b servedPlace) End(a run.Aim) error {
	if a.Fault == histories.Pause {
		b.signal(a.Process, syscall.SIGCONT)
	}
	return b.simPlace.End(a)
}

func (b servedPlace) signal(name string, sig syscall.Signal) {
	if pc := b.sv.procs[name]; pc != nil {
		pc.Signal(sig)
	}
}

// servedProc is a World process whose client is the implementation's.
type servedProc struct {
	*consulsim.Process
	sv *servedImpl
}

// start starts the implementation's process of client name for s, on
// the agent served to this World process: it waits on the process
// through the World (its requests are the World's steps).
func (p servedProc) start(impl Impl, name string, s Session) (ProcessClient, error) {
	addr, waits, err := p.sv.b.Process(context.Background(), p.Process)
	if err != nil {
		return nil, err
	}
	s.Addr, s.Run = addr, p.sv.b.Name()
	pc, err := impl.Connect(waits, name, s)
	if err != nil {
		return nil, err
	}
	p.sv.procs[p.Name()] = pc
	return pc, nil
}
