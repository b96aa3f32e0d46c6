package consulsemrun

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/lockprover/lockprover/internal/realtime"
	"slices"
	"sync"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/lockprover/lockprover/adapters/host/faultnet"
	"github.com/lockprover/lockprover/adapters/servers/consul"
	"github.com/lockprover/lockprover/adapters/servers/etcd"
	"github.com/lockprover/lockprover/adapters/servers/versions"
	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/internal/prover/run"
	"github.com/lockprover/lockprover/model/consulsem"
	"github.com/lockprover/lockprover/model/lease"
)

// realFaults are the faults a plan can hold on a real server: those that
// strike one client, through its fault proxy or, for a lost reply, its
// backend (loseReply), and a restart of the private server (SIGTERM, down
// for the fault's time, started again on its ports and data: drawn, as
// on the simulator, where the server keeps its sessions).
var realFaults = run.Listed(histories.Kill, histories.Pause, histories.Partition, histories.DropReply, histories.RestartBroker,
	histories.ForceClose)

// RealFaults are the faults a plan can hold on a real server.
func RealFaults() []string { return slices.Clone(realFaults) }

// Preflight says whether this machine has the server of a real target
// (adapters/servers/consul.ErrNoConsul, adapters/servers/etcd.ErrNoEtcd when not).
func Preflight(target string) error {
	switch target {
	case Consul:
		_, err := consul.Find()
		return err
	case Etcd:
		_, err := etcd.Find()
		return err
	}
	return fmt.Errorf("target %q: want %s or %s", target, Consul, Etcd)
}

// PreflightVersion is Preflight of version v of target's server (the
// zero value: Preflight's): the machine's own installed, a Debian root's
// made (lockprover servers --make), or lockprover's build in its cache
// (an error matching debroot.ErrUnavailable, naming .ci/consul, when
// not).
func PreflightVersion(target string, v versions.Version) error {
	switch {
	case v.Server == "":
		return Preflight(target)
	case v.Server != target:
		return fmt.Errorf("%s is not a version of %s", v, target)
	case v.Built():
		_, err := v.Binary()
		return err
	case v.Rooted() && !v.Made():
		return fmt.Errorf("%s: its Debian %s root is not made (lockprover servers --make %s-%s)", v, v.Release, v.Server, v.Name)
	case v.Rooted():
		return nil
	}
	return Preflight(target)
}

// RunReal runs p against the reference (or p's mutant) on a real server
// of p's backend, in real time: a private Consul agent (Persistent as the
// plan says, session_ttl_min 1 s) or etcd, started for the run and
// stopped at its end. Each process reaches it through a fault proxy of
// its own (adapters/host/faultnet): a kill closes the proxy (the client goes on
// as a new process, with a new one), a pause holds its bytes both ways and
// stops the process until the resume, a partition holds its bytes both
// ways, a force-close closes its connections (the proxy listening on).
// Keys live under a prefix of the run's own (the plan's, and random
// hex); at the end, what the run left on the server (keys under it, but
// the lock key, which the recipe keeps; sessions or leases) is a problem
// of the run's evidence, which fails available.
func RunReal(ctx context.Context, p *Plan) (*prover.Result, error) { return RunOn(ctx, p, nil) }

// RunOn runs p as RunReal does, on the server the user runs at addrs (a
// Consul agent's HTTP address, or etcd's endpoints, host:port), or on a
// private one when addrs is empty. A given server is neither started nor
// stopped nor restarted (a plan with restart-broker is refused), and
// what the run left is only its own: its keys, and the sessions
// (leases) its clients created, which are ended at the end either way.
func RunOn(ctx context.Context, p *Plan, addrs []string) (*prover.Result, error) {
	return RunImpl(ctx, p, addrs, nil)
}

// RunImpl runs p as RunOn does, against impl, an implementation in
// processes of its own, one per incarnation of a client, each told its
// own fault proxy; nil runs the reference (or p's mutant). An
// implementation's plan holds no drop-reply (its proxy does not read
// HTTP or gRPC, and cannot lose a reply on purpose) and no mutant; a
// pause stops its process (SIGSTOP, SIGCONT) as well as holding its
// bytes; each operation is bounded by the launcher's timeout, not the
// reference's. The sessions its grants name (their tokens) are the run's
// on a given server, ended at the end; those of acquires it answered
// otherwise it must end itself, or they expire.
func RunImpl(ctx context.Context, p *Plan, addrs []string, impl Impl) (*prover.Result, error) {
	return runReal(ctx, p, addrs, impl, nil, versions.Version{})
}

// RunCluster runs p as RunImpl does, on cl, a private cluster of p's
// backend started for the run (StartCluster), which it first makes whole
// if an earlier plan left it struck: each client talks to its node's
// client agent (Consul) or member (etcd) through a fault proxy of its
// own, and the nemesis strikes the plan's faults on the nodes too
// (partitions in the lab's router, signals to the nodes' processes).
// What the run left is looked for as on a given server: its own keys and
// sessions.
func RunCluster(ctx context.Context, p *Plan, cl *Cluster, impl Impl) (*prover.Result, error) {
	if cl == nil || len(p.Cluster) == 0 {
		return nil, fmt.Errorf("cluster: the plan runs on a single %s; replay it with --target %s", p.Backend, p.Backend)
	}
	if p.Backend != cl.Backend {
		return nil, fmt.Errorf("backend: a plan for %s cannot run on a %s cluster", p.Backend, cl.Backend)
	}
	if err := cl.ready(ctx); err != nil {
		return nil, err
	}
	return runReal(ctx, p, cl.serverAddrs(), impl, cl, versions.Version{})
}

// runReal runs p on a real server: a private one (of version v: the zero
// value for the machine's own), the one at addrs, or cluster cl (whose
// servers addrs then are).
func runReal(ctx context.Context, p *Plan, addrs []string, impl Impl, cl *Cluster, v versions.Version) (*prover.Result, error) {
	if err := checkReal(p, addrs, cl != nil); err != nil {
		return nil, err
	}
	if err := checkImpl(p, impl); err != nil {
		return nil, err
	}
	q := *p
	var salt [6]byte
	rand.Read(salt[:])
	q.Prefix = fmt.Sprintf("%s-%s", p.Prefix[:min(len(p.Prefix), 48)], hex.EncodeToString(salt[:]))
	var srv *realServer
	var err error
	if len(addrs) > 0 {
		srv, err = givenServer(&q, addrs)
	} else {
		srv, err = startServer(ctx, &q, v)
	}
	if err != nil {
		return nil, err
	}
	defer srv.stop()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The plan's clients (and the probe) start together: their
	// processes' start-up is over before the clock starts.
	defer prover.Warm(ctx, impl, q.Prefix, len(q.Clients)+1)()
	w := &realPlace{ctx: ctx, start: time.Now(), addrs: srv.addrs, restart: srv.restart, backend: q.Backend, procs: map[string]*realProc{}, impl: impl}
	if cl != nil {
		w.addrsOf = func(name string) []string { return []string{cl.addr(q.nodeOf(name))} }
	}
	ttl := time.Duration(q.TTLMs) * time.Millisecond
	r := &runner{p: &q, ctx: ctx, clients: map[string]*client{}, armed: map[string]bool{}, made: map[string]bool{},
		timeout: time.Duration((Expiry(q.Backend)+1)*float64(ttl)) + time.Second, impl: impl}
	if cl != nil {
		r.nodes = cl
	}
	if impl != nil {
		r.timeout = 0 // the launcher's bounds each request
	}
	r.begin(w)
	w.wg.Wait()
	w.close()
	var only map[string]bool
	if len(addrs) > 0 {
		only = r.made
	}
	res, err := r.end(w)
	if ctx.Err() != nil || err != nil {
		if len(addrs) > 0 {
			// A given server stays: what the run left on it goes now.
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			srv.leftovers(cctx, q.Prefix, only, 0)
			cancel()
		}
		return nil, errors.Join(ctx.Err(), err)
	}
	left, err := srv.leftovers(ctx, q.Prefix, only, 2*ttl+time.Second)
	if err != nil {
		return nil, fmt.Errorf("looking for what the run left behind: %w", err)
	}
	if left != "" {
		res.Evidence.Problems = append(res.Evidence.Problems, "left behind on the server: "+left)
	}
	return res, nil
}

// checkReal says why p cannot run on a real server (on the given one at
// addrs, if any; on a cluster): an invalid plan, a fault not offered
// there, a restart of a server lockprover did not start.
func checkReal(p *Plan, addrs []string, cluster bool) error {
	if err := p.Validate(); err != nil {
		return err
	}
	if len(p.Cluster) > 0 && !cluster {
		return fmt.Errorf("cluster: the plan runs on a %s cluster: replay it with --target %s-cluster", p.Backend, p.Backend)
	}
	for i, f := range p.Nemesis {
		if !slices.Contains(realFaults, f.Fault) {
			return fmt.Errorf("nemesis[%d]: %s is not offered on a real %s (only %v)", i, f.Fault, p.Backend, realFaults)
		}
		if f.Fault == histories.RestartBroker && len(addrs) > 0 && !cluster {
			return fmt.Errorf("nemesis[%d]: %w", i, ErrGivenRestart(p.Backend))
		}
	}
	return nil
}

// checkImpl says why p cannot run against impl (nil: the reference): a
// mutant (of the reference), a drop-reply (which no proxy of an
// implementation can strike).
func checkImpl(p *Plan, impl Impl) error {
	if impl == nil {
		return nil
	}
	if p.Mutant != "" {
		return fmt.Errorf("mutant: %s is a variant of the reference; it cannot run against %s", p.Mutant, impl)
	}
	for i, f := range p.Nemesis {
		if f.Fault == histories.DropReply {
			return fmt.Errorf("nemesis[%d]: %s is not offered for an implementation (its proxy does not read HTTP or gRPC, so it cannot lose a reply on purpose)", i, f.Fault)
		}
	}
	return nil
}

// ImplFaults are the faults a plan can hold for an implementation on a
// real server: RealFaults but drop-reply.
func ImplFaults() []string {
	return slices.DeleteFunc(RealFaults(), func(f string) bool { return f == histories.DropReply })
}

// ErrGivenRestart is why a plan cannot restart the given server of
// backend: lockprover did not start it, so it cannot stop and start it
// again. It names the fault and the flag that gave the server.
func ErrGivenRestart(backend string) error {
	return fmt.Errorf("%s cannot be done to the %s given with --%s: lockprover did not start it (leave out --%s for a private one it can restart)",
		histories.RestartBroker, backend, AddrFlag(backend), AddrFlag(backend))
}

// AddrFlag is the flag that gives a server of backend the user runs:
// consul-addr or etcd-endpoints.
func AddrFlag(backend string) string {
	if backend == Etcd {
		return "etcd-endpoints"
	}
	return "consul-addr"
}

// end is the run's result once its processes are over: an error if a
// process would not start or a restart failed.
func (r *runner) end(w *realPlace) (*prover.Result, error) {
	if err := errors.Join(w.errs...); err != nil {
		return nil, err
	}
	if err := errors.Join(r.failed...); err != nil {
		return nil, err
	}
	return r.Result(r.p.Prefix)
}

// PreflightAddrs says whether the server of target at addrs answers,
// within a few seconds: a Consul agent with a leader (GET
// /v1/status/leader) that grants sessions of ttl (its session_ttl_min,
// default 10 s, is not above it), or every etcd endpoint (Status).
func PreflightAddrs(ctx context.Context, target string, addrs []string, ttl time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	switch target {
	case Consul:
		for _, a := range addrs {
			if err := preflightAgent(ctx, consulHTTP{url: "http://" + a}, ttl); err != nil {
				return err
			}
		}
		return nil
	case Etcd:
		cli, err := clientv3.New(clientv3.Config{Endpoints: addrs, DialTimeout: 3 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			return err
		}
		defer cli.Close()
		for _, a := range addrs {
			if _, err := cli.Status(ctx, a); err != nil {
				return fmt.Errorf("no etcd answers at %s: %w", a, err)
			}
		}
		return nil
	}
	return fmt.Errorf("target %q: want %s or %s", target, Consul, Etcd)
}

// PreflightImpl starts one process of impl as the probe of a throwaway
// prefix on the server of target (the one at addrs, or a private one of
// version v started for it and stopped), waits for its init_ok and ends
// it: an implementation that cannot start fails here at once, with what
// it said, rather than in every plan.
func PreflightImpl(ctx context.Context, target string, addrs []string, v versions.Version, impl Impl) error {
	p := &Plan{Backend: target}
	var srv *realServer
	var err error
	if len(addrs) > 0 {
		srv, err = givenServer(p, addrs)
	} else {
		srv, err = startServer(ctx, p, v)
	}
	if err != nil {
		return err
	}
	defer srv.stop()
	var salt [4]byte
	rand.Read(salt[:])
	s := Session{Prefix: "lp-preflight-" + hex.EncodeToString(salt[:]), Backend: target, Addr: srv.addrs[0], Limit: 1, TTL: 2 * time.Second, Run: "preflight"}
	pc, err := impl.Connect(ctx, "probe", s)
	if err != nil {
		return err
	}
	return pc.Close()
}

// consulTTLMin is a Consul agent's session_ttl_min unless its
// configuration sets one (its /v1/agent/self says 0s then).
const consulTTLMin = 10 * time.Second

// preflightAgent says whether the agent c has a leader and grants
// sessions of ttl. An agent that does not show its configuration (ACLs)
// is taken to.
func preflightAgent(ctx context.Context, c consulHTTP, ttl time.Duration) error {
	var leader string
	if err := c.get(ctx, "/v1/status/leader", &leader); err != nil {
		return fmt.Errorf("no Consul agent answers: %w", err)
	}
	if leader == "" {
		return fmt.Errorf("the agent at %s has no leader", c.url)
	}
	var self struct {
		DebugConfig struct{ SessionTTLMin string }
	}
	if c.get(ctx, "/v1/agent/self", &self) != nil {
		return nil
	}
	floor, err := time.ParseDuration(self.DebugConfig.SessionTTLMin)
	if err == nil && floor == 0 {
		floor = consulTTLMin // not set: Consul's default
	}
	if err == nil && floor > ttl {
		return fmt.Errorf("the agent's session_ttl_min is %v, above the sessions' TTL of %v (start it with -hcl 'session_ttl_min = \"1s\"', or give --ttl)", floor, ttl)
	}
	return nil
}

// errReplyLost is what a granting write whose reply was lost answers.
var errReplyLost = errors.New("the reply was lost (drop-reply)")

// loseReply is a real server's granting write, which a drop-reply armed
// for the client strikes: the write reaches the server and is answered,
// the answer is lost, recorded then (the acquire still in flight), and
// the recipe sees the write fail, its outcome unknown. A write that got
// no answer (a partition, a kill) loses none: the drop stays armed.
func (d dropping) loseReply(ctx context.Context, w consulsem.LockWrite) (uint64, error) {
	d.r.w.Lock()
	armed := d.st.acquiring && d.st.Live(d.gen) && d.r.armed[d.st.Name]
	delete(d.r.armed, d.st.Name)
	d.r.w.Unlock()
	idx, err := d.Backend.WriteLock(ctx, w)
	if !armed {
		return idx, err
	}
	answered := err == nil || errors.Is(err, consulsem.ErrCASLost) || errors.Is(err, consulsem.ErrNotLive)
	d.r.w.Lock()
	defer d.r.w.Unlock()
	switch {
	case !d.st.Live(d.gen):
		return idx, err
	case !answered:
		d.r.armed[d.st.Name] = true
		return idx, err
	}
	d.r.record(histories.DropReply, d.st.Name)
	return 0, errReplyLost
}

// realPlace is a real server as a place: each client process a goroutine
// with a fault proxy and a client of its own, on the wall clock.
type realPlace struct {
	ctx   context.Context
	start time.Time
	addrs []string // the server's host:port (etcd: each endpoint's)
	// restart restarts the server (realServer.restart); nil for a
	// given one, which is not lockprover's to restart.
	restart func(ctx context.Context, down time.Duration) error
	// addrsOf, if set, is the host:port process name talks to instead
	// (a cluster's: its node's).
	addrsOf func(name string) []string
	backend string
	// impl, if set, runs in the clients' processes: they get proxies but
	// no client of the reference.
	impl Impl

	mu    sync.Mutex // the runner's lock
	procs map[string]*realProc
	wg    sync.WaitGroup
	ended bool
	errs  []error // a proxy or client that would not start
}

// A realProc is one process: its proxy and client (none for the
// nemesis), what ends its sleeps once it is killed, and whether it is
// paused or cut off.
type realProc struct {
	ctx  context.Context
	kill context.CancelFunc
	pxs  []*faultnet.Proxy // one to each of the server's addresses
	b    consulsem.Backend
	etcd *clientv3.Client

	mu          sync.Mutex
	paused, cut bool
	resumed     chan struct{} // closed when not paused
	// pc is the implementation's process of this incarnation, once
	// started; killed says the incarnation was killed (or the run ended).
	pc     ProcessClient
	killed bool
}

func (w *realPlace) Lock()      { w.mu.Lock() }
func (w *realPlace) Unlock()    { w.mu.Unlock() }
func (w *realPlace) Now() int64 { return int64(time.Since(w.start)) }

// Go starts process name: a client with a proxy of its own to the server
// (the nemesis has none); one that cannot start ends the run with an
// error. Called with the lock held.
func (w *realPlace) Go(name string, f func(proc)) {
	if w.ended {
		return
	}
	ctx, kill := context.WithCancel(w.ctx)
	p := &realProc{ctx: ctx, kill: kill, resumed: make(chan struct{})}
	close(p.resumed)
	if name != "nemesis" {
		addrs := w.addrs
		if w.addrsOf != nil {
			addrs = w.addrsOf(name)
		}
		if err := p.connect(addrs, w.backend, w.impl == nil); err != nil {
			w.errs = append(w.errs, fmt.Errorf("%s: %w", name, err))
			p.close()
			return
		}
	}
	w.procs[name] = p
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		f(p)
	}()
}

// connect starts p's proxies to the server at addrs (one each) and, with
// reference, the reference's client on them.
func (p *realProc) connect(addrs []string, backend string, reference bool) error {
	var eps []string
	for _, a := range addrs {
		px, err := faultnet.Listen(a)
		if err != nil {
			return err
		}
		p.pxs = append(p.pxs, px)
		eps = append(eps, "http://"+px.Addr())
	}
	if !reference {
		return nil
	}
	var err error
	if backend == Consul {
		p.b, err = consulsem.ConsulBackend(p.pxs[0].Addr(), nil)
		return err
	}
	p.etcd, err = clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	p.b, err = consulsem.EtcdBackend(p.etcd)
	return err
}

// start starts the implementation's process for p as client name of s,
// told p's first proxy (etcd: one endpoint is enough; each is behind a
// proxy of p's own). One started as p was killed is killed at once; one
// started as p was paused is stopped.
func (p *realProc) start(impl Impl, name string, s Session) (ProcessClient, error) {
	s.Addr = p.pxs[0].Addr()
	return lease.StartProcess(p.ctx, impl, name, s, &p.mu, func() bool { return p.killed }, nil, func(pc ProcessClient) {
		p.pc = pc
		if p.paused {
			pc.Signal(syscall.SIGSTOP)
		}
	})
}

// close ends p: its sleeps end, its proxy closes (every connection cut,
// no new one), its client is closed, its process killed.
func (p *realProc) close() {
	p.mu.Lock()
	p.killed = true
	if p.pc != nil {
		p.pc.Signal(syscall.SIGKILL)
	}
	p.mu.Unlock()
	p.kill()
	for _, px := range p.pxs {
		px.Close()
	}
	if p.b != nil {
		p.b.Close()
	}
	if p.etcd != nil {
		p.etcd.Close()
	}
}

func (p *realProc) Backend() consulsem.Backend { return p.b }

// Sleep lets d pass, or less if the process is killed or the run ends;
// a paused process wakes only once it is resumed.
func (p *realProc) Sleep(d time.Duration) {
	realtime.Sleep(p.ctx, d)
	p.waitResumed()
}

// waitResumed returns once p is not paused (or is killed).
func (p *realProc) waitResumed() {
	p.mu.Lock()
	ch := p.resumed
	p.mu.Unlock()
	select {
	case <-ch:
	case <-p.ctx.Done():
	}
}

// outside runs f without the lock; a paused process goes on (and its
// outcome is recorded) only once it is resumed, as a process the machine
// stopped would.
func (w *realPlace) outside(pr proc, f func()) {
	w.mu.Unlock()
	defer w.mu.Lock()
	f()
	pr.(*realProc).waitResumed()
}

// Strike kills, pauses or partitions the process a names, closes its
// connections (forceClose), or restarts the server: recorded down
// (a.Struck) from before its stop, and back once Strike returns.
func (w *realPlace) Strike(a run.Aim) error {
	switch a.Fault {
	case histories.ForceClose:
		return struck(w.forceClose(a.Process))
	case histories.RestartBroker:
		if w.restart == nil {
			return run.CannotStrike(a) // a given server: refused before the run (checkReal)
		}
		a.Struck()
		return w.restart(w.ctx, a.Down)
	}
	return run.StrikeProcess(a, w.kill, w.pause, w.partition)
}

// End resumes or heals the process a names.
func (w *realPlace) End(a run.Aim) error { return run.EndProcess(a, w.resume, w.heal) }

// kill ends process name's current incarnation: its connections are cut
// and its proxy takes no new one, so it reaches the server no more.
func (w *realPlace) kill(name string) {
	if p := w.procs[name]; p != nil {
		p.close()
	}
}

// pause stops process name: its bytes are held both ways, and it goes on
// with nothing until resume (an implementation's process is stopped,
// SIGSTOP, and continued, SIGCONT).
func (w *realPlace) pause(name string) {
	w.hold(name, func(p *realProc) {
		if !p.paused {
			p.paused, p.resumed = true, make(chan struct{})
			if p.pc != nil {
				p.pc.Signal(syscall.SIGSTOP)
			}
		}
	})
}

// resume lets a paused process go on.
func (w *realPlace) resume(name string) {
	w.hold(name, func(p *realProc) {
		if p.paused {
			p.paused = false
			close(p.resumed)
			if p.pc != nil {
				p.pc.Signal(syscall.SIGCONT)
			}
		}
	})
}

// partition holds process name's bytes both ways, until heal.
func (w *realPlace) partition(name string) { w.hold(name, func(p *realProc) { p.cut = true }) }

// heal ends a partition: the held bytes go on.
func (w *realPlace) heal(name string) { w.hold(name, func(p *realProc) { p.cut = false }) }

// forceClose closes process name's current connections through its
// proxies, both sockets of each (the server's side closed, bytes held by
// a pause or partition lost), and says how it went: false when it had
// none open (its client had not connected yet, or its connections had
// closed), a fault that struck nothing, not recorded. The proxies keep
// listening, so the client connects again at its next call (a kill
// closes them).
func (w *realPlace) forceClose(name string) bool {
	p := w.procs[name]
	if p == nil {
		return false
	}
	closed := false
	for _, px := range p.pxs {
		for _, c := range px.Conns() {
			select {
			case <-c.Done(): // ended already, not yet forgotten
			default:
				c.Kill()
				closed = true
			}
		}
	}
	return closed
}

// hold changes process name's state with f, then holds its proxy's bytes
// while it is paused or cut off, and lets them go otherwise.
func (w *realPlace) hold(name string, f func(*realProc)) {
	p := w.procs[name]
	if p == nil || len(p.pxs) == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	f(p)
	for _, px := range p.pxs {
		if p.paused || p.cut {
			px.Partition()
		} else {
			px.Heal()
		}
	}
}

// close ends the run: every process ended.
func (w *realPlace) close() {
	for _, p := range lease.Ending(&w.mu, &w.ended, w.procs) {
		p.close()
	}
}
