package redlockrun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/lockprover/lockprover/adapters/host/faultnet"
	"github.com/lockprover/lockprover/adapters/servers/redis"
	"github.com/lockprover/lockprover/adapters/servers/versions"
	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/internal/prover/run"
	"github.com/lockprover/lockprover/internal/realtime"
	"github.com/lockprover/lockprover/model/lease"
	"github.com/lockprover/lockprover/model/redlock"
	"github.com/lockprover/lockprover/sim/redissim"
)

// A Target runs plans: Simulator or Redis.
type Target interface {
	Run(ctx context.Context, p *Plan) (*prover.Result, error)
}

// Simulator runs plans on the simulated servers (package sim/redissim):
// deterministic, in virtual time. With Impl, an implementation's
// processes are the clients, on the servers served on the wire (Wire).
type Simulator struct {
	// Impl, if set, is the implementation the plans run against, in
	// processes of its own, instead of the reference; Wire, which it
	// needs, serves each run's servers to them (redlockprotocol.Wire).
	Impl Impl
	Wire func(w *redissim.World, p *Plan) Wire
	// Trace, if set, receives the simulator's trace of an implementation's
	// runs (replay --trace).
	Trace io.Writer
}

// A Wire is a run's simulated servers served on the wire
// (adapters/served/redisserve): each process of the World gets a port per
// server, which its implementation's process connects to.
type Wire interface {
	// Name is the served run's, unique: the run the implementation's
	// processes are started under.
	Name() string
	// Process serves the World's process p (call it from p): the servers'
	// addresses for its implementation's process, and ctx made to wait
	// on that process through the World (process.WithWaiter).
	Process(ctx context.Context, p *redissim.Process) (addrs []string, waits context.Context, err error)
	// End stops serving once the World has run, and says what the run
	// recorded (the plan's Decisions.Wire), what went wrong with the
	// implementation's side (problems), what a reader must be told
	// (notes), and an error where the run says nothing of the
	// implementation (a command the simulator does not serve).
	End() (log map[string][]string, problems, notes []string, err error)
}

// Run runs p on fresh simulated servers (see Simulate), against s.Impl
// if set.
func (s Simulator) Run(ctx context.Context, p *Plan) (*prover.Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if s.Impl == nil && p.limit() > 1 {
		return nil, fmt.Errorf("limit %d: the reference is a mutex; a semaphore needs an implementation (--impl)", p.Limit)
	}
	if s.Impl == nil {
		ctx = context.Background() // the reference's run is the plan's alone
	}
	return s.simulate(ctx, p)
}

// Preflight checks, with an implementation, that its process starts and
// answers init on a simulated server served on the wire, and ends when
// told: the probe.
func (s Simulator) Preflight(ctx context.Context) error {
	if s.Impl == nil || s.Wire == nil {
		return nil
	}
	w, err := redissim.New(redissim.Options{Servers: 1})
	if err != nil {
		return err
	}
	wire := s.Wire(w, &Plan{})
	var probeErr error
	w.Go("probe", func(p *redissim.Process) {
		addrs, waits, err := wire.Process(ctx, p)
		if err != nil {
			probeErr = err
			return
		}
		pc, err := s.Impl.Connect(waits, "probe", Session{Key: "lp-preflight", Addrs: addrs, TTL: time.Second, Run: "preflight"})
		if err != nil {
			probeErr = err
			return
		}
		probeErr = pc.Close()
	})
	runErr := w.Run()
	_, _, _, endErr := wire.End()
	return errors.Join(probeErr, runErr, endErr)
}

// Redis runs plans on real redis-servers, in real time. Each plan starts
// its own N servers (package adapters/servers/redis: private directories and
// ports, the plan's persistence), stopped and removed when it ends. Each
// client incarnation reaches each server through a TCP fault proxy of its
// own (redis.Proxy, which reads RESP): a kill closes its proxies, a
// partition holds its bytes to and from one server, a lost reply is the
// reply to its next command on that server, lost after the server applied
// it, its connection cut. A pause is SIGSTOP of a server; a restart
// SIGKILLs it and starts it again once the downtime is over, with what its
// persistence kept; a clock jump forward shortens the life of every key on
// that server at once (redis.Server.ClockJump). Not offered on it: a jump
// back; plans drawn for it hold none.
//
// The priority lock (PriorityKind) runs there too, the reference or a
// mutant of it: its watchers and its waits for acknowledgements reach the
// servers through the same proxies as its operations, so the faults
// strike them alike. A clock jump there moves no server's TIME: the
// deadlines the priority scripts keep of a chain's victims (vdl, on TIME)
// do not come closer, as on the simulator they do; only the keys' lives
// shorten.
type Redis struct {
	// Bin is the redis-server binary; "" looks for it.
	Bin string
	// Version, when a Debian release's (Redis 8, Valkey), is the version
	// the plans' servers run, from its root (see redis.Options.Version);
	// the zero value runs the machine's redis-server (Bin).
	Version versions.Version
	// Impl, if set, is the implementation the plans run against, in
	// processes of its own, instead of the reference: a Redlock, or a
	// priority Redlock for the plans of PriorityKind (its processes told
	// so, and their lost notices recorded as the reference's are).
	Impl Impl
	// Priority says Impl is a priority Redlock: the probe Preflight
	// starts is told so.
	Priority bool

	// beside, if set (tests), runs beside each plan from when its
	// servers are up: a stall of the machine lockprover does not strike.
	beside func(ctx context.Context, servers []*redis.Server)
}

// String says where plans run.
func (t Redis) String() string {
	if t.Version.Rooted() {
		return fmt.Sprintf("private %s-servers %s, each plan's own", t.Version.Server, t.Version.Name)
	}
	return "private redis-servers, each plan's own"
}

// options are the servers' options, with persistence p.
func (t Redis) options(p redis.Persistence) redis.Options {
	return redis.Options{Bin: t.Bin, Version: t.Version, Persistence: p}
}

// Preflight starts a server and stops it, so that a machine without
// redis-server is said before any plan runs.
func (t Redis) Preflight(ctx context.Context) error {
	dir, err := os.MkdirTemp("", "lockprover-redis-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	s, err := redis.Start(ctx, dir, t.options(redis.None))
	if err != nil {
		return err
	}
	defer s.Stop()
	if t.Impl == nil {
		return nil
	}
	pc, err := t.Impl.Connect(ctx, "probe", Session{Key: "lp-preflight-" + filepath.Base(dir), Addrs: []string{s.Addr()}, TTL: time.Second, Run: "preflight", Priority: t.Priority})
	if err != nil {
		return err
	}
	return pc.Close()
}

// Run starts p's servers, runs p on them against the reference (or p's
// mutant), and stops them.
func (t Redis) Run(ctx context.Context, p *Plan) (*prover.Result, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if p.limit() > 1 && t.Impl == nil {
		return nil, fmt.Errorf("limit %d: the reference is a mutex; a semaphore needs an implementation (--impl)", p.Limit)
	}
	for i, f := range p.Nemesis {
		if f.Fault == histories.ClockJump && f.OffsetMs < 0 {
			return nil, fmt.Errorf("nemesis[%d]: %s is not offered on real Redis (clock jumps back)", i, describeFault(f))
		}
	}
	quietOnce.Do(func() { goredis.SetLogger(quiet{}) })
	dir, err := os.MkdirTemp("", "lockprover-redis-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	o := t.options(redis.None)
	if p.Persistence == PersistAlways {
		o.Persistence = redis.Always
	}
	servers, err := redis.StartN(ctx, dir, p.Servers, o)
	if err != nil {
		return nil, err
	}
	defer redis.StopAll(servers)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if t.beside != nil {
		go t.beside(ctx, servers)
	}
	// Run names this run alone (its servers' directory), for the
	// implementation's count of failed starts and its processes started
	// ahead: plans run beside each other share their key.
	name := filepath.Base(dir)
	// The plan's clients start together: their processes' start-up is
	// over before the clock starts.
	defer prover.Warm(ctx, t.Impl, name, len(p.Clients))()
	b := &redisPlace{ctx: ctx, start: time.Now(), refStart: redlock.Monotonic(), servers: servers, procs: map[string]*redisProc{}, paused: map[int]bool{},
		impl: t.Impl, session: Session{Key: p.Key, TTL: time.Duration(p.TTLMs) * time.Millisecond, Run: name, Limit: p.Limit}}
	r := &runner{p: p, ctx: ctx, clients: map[string]*client{}, cut: map[string]int{},
		timeout: max(time.Duration(p.TTLMs)*time.Millisecond/2, 100*time.Millisecond)}
	b.lost = r.dropped
	r.begin(b)
	b.wg.Wait()
	b.close()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := errors.Join(b.errs...); err != nil {
		return nil, err
	}
	res, err := r.Result(r.p.Key)
	if res != nil {
		if t.Impl == nil {
			res.History, _ = run.WithFaults(res.History, machineStalls(res.History, b.start, b.roundsOf()))
		}
		res.Evidence.Trace = b.trace()
	}
	return res, err
}

// A tracedProxy is one proxy of a process to a server, named
// "c1->redis2".
type tracedProxy struct {
	name string
	px   *redis.Proxy
}

// trace is what the run's proxies saw, in time order, each line stamped
// with its time since the run began (model.Evidence.Trace): which
// command of which process reached which server when, and the answer.
func (b *redisPlace) trace() []string {
	traces := make([]faultnet.NamedTrace, len(b.traced))
	for i, tp := range b.traced {
		traces[i] = faultnet.NamedTrace{Name: tp.name, Lines: tp.px.Trace()}
	}
	return faultnet.Merge(b.start, traces)
}

// go-redis logs each failed dial to stderr, which the faults make many
// of (a killed process's proxies, a server down): the history says what
// happened. Its logger is the process's, set once.
var quietOnce sync.Once

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// describeFault names a fault of a plan, for an error.
func describeFault(f Fault) string {
	if f.Fault == histories.ClockJump {
		return fmt.Sprintf("a clock jump of %d ms", f.OffsetMs)
	}
	return f.Fault
}

// redisPlace is one plan's run on its real servers.
type redisPlace struct {
	ctx   context.Context
	start time.Time
	// refStart is CLOCK_MONOTONIC (the lock's clock) at start.
	refStart int64
	// traced are every proxy the run started, a killed incarnation's too,
	// by process and server, for the run's trace.
	traced  []tracedProxy
	servers []*redis.Server
	// lost records a reply a proxy lost (the runner's dropped).
	lost func(proc string, server int)
	// impl, if set, runs in the plan's processes (session says them what
	// to serve), instead of the reference.
	impl    Impl
	session Session

	mu     sync.Mutex // the runner's lock (see place)
	procs  map[string]*redisProc
	paused map[int]bool // servers paused (SIGSTOP) now
	wg     sync.WaitGroup
	ended  bool
	errs   []error // a proxy that would not start, a fault that failed
}

// A redisProc is one process: its proxies, one per server (none for the
// nemesis), and what ends its sleeps once it is killed.
type redisProc struct {
	b       *redisPlace
	proxies []*redis.Proxy
	ctx     context.Context
	kill    context.CancelFunc
	armed   func() // see arm
	// pc is the implementation's process of this incarnation, once
	// started (guarded by the place's lock); killed says the process
	// was killed.
	pc     ProcessClient
	killed bool
}

func (b *redisPlace) Lock()                     { b.mu.Lock() }
func (b *redisPlace) Unlock()                   { b.mu.Unlock() }
func (b *redisPlace) Now() int64                { return int64(time.Since(b.start)) }
func (b *redisPlace) stuckAfter() time.Duration { return 2 * time.Minute }

// left maps l's end to the history's clock, from the two clocks' readings
// at its start: a goroutine the machine did not run between the lock's
// return and the record then cannot make a claim look longer than it was.
func (b *redisPlace) left(l redlock.Lease, recorded int64) time.Duration {
	return time.Duration(l.ValidUntil - b.refStart - recorded)
}

// Go starts process name, a client with a proxy to each server; a proxy
// that cannot start ends the run with an error.
func (b *redisPlace) Go(name string, f func(proc)) {
	if b.ended {
		return
	}
	ctx, kill := context.WithCancel(b.ctx)
	p := &redisProc{b: b, ctx: ctx, kill: kill}
	if name != "nemesis" {
		for i, s := range b.servers {
			px, err := redis.Listen(s.Addr())
			if err != nil {
				b.errs = append(b.errs, fmt.Errorf("%s: %w", name, err))
				p.closeProxies()
				return
			}
			px.OnDrop(func() { b.replyLost(p, name, i) })
			p.proxies = append(p.proxies, px)
			b.traced = append(b.traced, tracedProxy{name: fmt.Sprintf("%s->redis%d", name, i+1), px: px})
		}
	}
	b.procs[name] = p
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		f(p)
	}()
}

// Sleep lets d pass, or less if the process is killed or the run ends.
func (p *redisProc) Sleep(d time.Duration) { realtime.Sleep(p.ctx, d) }

// proxyAddrs are where the process's proxies listen, in the servers'
// order; an error once the process is killed.
func (p *redisProc) proxyAddrs() ([]string, error) {
	if p.ctx.Err() != nil {
		return nil, errors.New("killed")
	}
	addrs := make([]string, len(p.proxies))
	for i, px := range p.proxies {
		addrs[i] = px.Addr()
	}
	return addrs, nil
}

// open makes the process's lock on its proxies: the reference, on an Env
// that runs what arm set when the lock first reads its clock; or the
// implementation's process, told the proxies, whose every operation runs
// what arm set as it is sent.
func (p *redisProc) open(name string, o redlock.Options) (Client, error) {
	addrs, err := p.proxyAddrs()
	if err != nil {
		return nil, err
	}
	if p.b.impl == nil {
		rl, err := redlock.NewOn(startEnv{redlock.RedisEnv(addrs), p}, o)
		if err != nil {
			return nil, err
		}
		return rl, nil
	}
	s := p.b.session
	s.Addrs = addrs
	return p.connect(name, s)
}

// connect starts the implementation's process of client name for s.
func (p *redisProc) connect(name string, s Session) (Client, error) {
	pc, err := lease.StartProcess(p.ctx, p.b.impl, name, s, p.b, func() bool { return p.killed },
		func(pc ProcessClient) { pc.Close() }, func(pc ProcessClient) { p.pc = pc })
	if err != nil {
		return nil, err
	}
	return armedClient{pc, p}, nil
}

// openPriority makes the process's priority lock, of priority prio, on its
// proxies: the reference, on a PriorityEnv that runs what arm set when an
// operation sends its first command (startPriorityEnv). Its watchers and
// waits for acknowledgements reach the servers through the same proxies,
// on connections of their own: a kill, a partition or a lost reply strikes
// them as it strikes the operations. An implementation's process is told
// its priority and the proxies, and its lost notices go to o.OnLost, as
// the reference's do.
func (p *redisProc) openPriority(name string, o redlock.Options, prio int64) (Client, error) {
	addrs, err := p.proxyAddrs()
	if err != nil {
		return nil, err
	}
	if p.b.impl != nil {
		s := p.b.session
		s.Addrs, s.Priority, s.Prio, s.OnLost = addrs, true, prio, o.OnLost
		return p.connect(name, s)
	}
	pl, err := redlock.NewPriorityOn(startPriorityEnv{redlock.RedisPriorityEnv(addrs), p}, o)
	if err != nil {
		return nil, err
	}
	return startPriority{priorityClient{pl, prio}, p}, nil
}

// armedClient is an implementation's process whose every operation first
// runs what the runner armed (its invoke's record), outside the runner's
// lock: the history's invoke then comes just before the request is sent.
type armedClient struct {
	ProcessClient
	p *redisProc
}

func (c armedClient) Acquire(ctx context.Context, key string, ttl time.Duration) (redlock.Lease, error) {
	c.p.fire()
	return c.ProcessClient.Acquire(ctx, key, ttl)
}

func (c armedClient) Refresh(ctx context.Context, l redlock.Lease, ttl time.Duration) (redlock.Lease, error) {
	c.p.fire()
	return c.ProcessClient.Refresh(ctx, l, ttl)
}

func (c armedClient) Release(ctx context.Context, l redlock.Lease) error {
	c.p.fire()
	return c.ProcessClient.Release(ctx, l)
}

// arm sets f to run at the operation's start (its first reading of the
// clock, its first command: see startEnv, startPriorityEnv). The runner
// arms and checks with its lock held, and the process runs one operation
// at a time, from its client's goroutine, the only one to fire it:
// armed needs no lock of its own.
func (p *redisProc) arm(f func()) { p.armed = f }

// fire runs what arm set, once.
func (p *redisProc) fire() {
	if f := p.armed; f != nil {
		p.armed = nil
		f()
	}
}

func (p *redisProc) fired() bool {
	f := p.armed == nil
	p.armed = nil
	return f
}

// startEnv is the real servers' Env, but that its first reading of the
// clock in an operation runs what the process armed: the runner records
// the operation as invoked then, at its start as the lock counts it,
// rather than before the call, which a busy machine may not run for tens
// of milliseconds (and the validity the lock claims, from its start,
// would look longer than the history's invoke allows).
type startEnv struct {
	redlock.Env
	p *redisProc
}

// Now reads the clock before it runs the armed function (which may wait
// for the runner's lock): the history's invoke is then never before the
// start the lock counts from.
func (e startEnv) Now() int64 {
	t := e.Env.Now()
	e.p.fire()
	return t
}

// opKey marks the context of an operation of a process's priority lock
// (startPriority); its value is the process.
type opKey struct{}

// startPriority is the priority reference of a process on its proxies,
// each operation's context marked, so that its PriorityEnv tells the
// operation's commands from those of the lock's watchers.
type startPriority struct {
	priorityClient
	p *redisProc
}

func (c startPriority) Acquire(ctx context.Context, key string, ttl time.Duration) (redlock.Lease, error) {
	return c.priorityClient.Acquire(context.WithValue(ctx, opKey{}, c.p), key, ttl)
}

func (c startPriority) Refresh(ctx context.Context, l redlock.Lease, ttl time.Duration) (redlock.Lease, error) {
	return c.Priority.Refresh(context.WithValue(ctx, opKey{}, c.p), l, ttl)
}

func (c startPriority) Release(ctx context.Context, l redlock.Lease) error {
	return c.Priority.Release(context.WithValue(ctx, opKey{}, c.p), l)
}

// startPriorityEnv is startEnv for the priority lock. Its watchers read
// the clock, from goroutines of their own, at any time, so what the
// process armed runs at the first command an operation sends (one whose
// context startPriority marked), not at a reading of the clock. Each
// operation reads its start (Acquire's and Refresh's start, Release's
// began) just before its first command: the history's invoke then comes
// after the start the lock counts from, and before anything is sent.
type startPriorityEnv struct {
	redlock.PriorityEnv
	p *redisProc
}

func (e startPriorityEnv) Send(ctx context.Context, timeout time.Duration, cmds []redlock.Cmd) []redlock.Result {
	if ctx.Value(opKey{}) == e.p {
		e.p.fire()
	}
	return e.PriorityEnv.Send(ctx, timeout, cmds)
}

func (p *redisProc) closeProxies() {
	for _, px := range p.proxies {
		px.Close()
	}
}

// Strike kills a client's process, partitions it from a server, loses
// the server's next reply to it, or pauses a server.
func (b *redisPlace) Strike(a run.Aim) error {
	switch a.Fault {
	case histories.RestartBroker:
		return b.restart(a)
	case histories.ClockJump:
		return b.clockJump(a.Server, a.Offset)
	}
	return strike(a, b.kill, b.partition, b.dropReply, b.pause)
}

// End heals a client's partition from a server, or resumes a server.
func (b *redisPlace) End(a run.Aim) error { return end(a, b.heal, b.resume) }

// kill ends process name: its sleeps end and its proxies close, so that
// it sends nothing more (what it does next fails, and the runner ignores
// it).
func (b *redisPlace) kill(name string) {
	if p := b.procs[name]; p != nil {
		p.kill()
		p.closeProxies()
		p.killed = true
		if p.pc != nil {
			p.pc.Signal(syscall.SIGKILL)
		}
	}
}

func (b *redisPlace) proxy(name string, server int) *redis.Proxy {
	if p := b.procs[name]; p != nil && server < len(p.proxies) {
		return p.proxies[server]
	}
	return nil
}

func (b *redisPlace) partition(name string, server int) {
	if px := b.proxy(name, server); px != nil {
		px.Partition()
	}
}

func (b *redisPlace) heal(name string, server int) {
	if px := b.proxy(name, server); px != nil {
		px.Heal()
	}
}

// dropReply arms process name's proxy to server: its next reply is lost
// (replyLost records it when it is).
func (b *redisPlace) dropReply(name string, server int) {
	if px := b.proxy(name, server); px != nil {
		px.DropReply()
	}
}

// replyLost records a reply p's proxy to server lost, as the proxy loses
// it, before the connection is cut (so before the operation ends). It
// runs on the proxy's goroutine, which a kill's closing of the proxies
// waits for while the runner's lock is held: it takes the lock only if it
// can, and gives up once p is killed (its operation then ends killed).
func (b *redisPlace) replyLost(p *redisProc, name string, server int) {
	for !b.mu.TryLock() {
		if p.ctx.Err() != nil {
			return
		}
		time.Sleep(100 * time.Microsecond)
	}
	defer b.mu.Unlock()
	if p.ctx.Err() == nil && b.lost != nil {
		b.lost(name, server)
	}
}

func (b *redisPlace) pause(server int) {
	b.paused[server] = true
	if err := b.servers[server].Pause(); err != nil {
		b.errs = append(b.errs, fmt.Errorf("pause of redis%d: %w", server+1, err))
	}
}

func (b *redisPlace) resume(server int) {
	delete(b.paused, server)
	if err := b.servers[server].Resume(); err != nil {
		b.errs = append(b.errs, fmt.Errorf("resume of redis%d: %w", server+1, err))
	}
}

// restart kills a's server (SIGKILL), waits its downtime and starts it
// again. The kill and a.Struck run under the runner's lock: a client
// whose operation the crash ended records that only after the crash is
// recorded (killed first, and recorded later, an acquire's EOF came
// before the crash in the history, with no fault in force: available
// failed).
func (b *redisPlace) restart(a run.Aim) error {
	s := b.servers[a.Server]
	b.mu.Lock()
	err := s.Kill()
	if err == nil {
		a.Struck()
	}
	b.mu.Unlock()
	if err != nil {
		return err
	}
	a.Wait(a.Down)
	return s.Restart(b.ctx, 0)
}

// clockJump shortens the life of every key on server by d (forward only).
// A paused server runs no script: the jump is refused (not struck, not
// recorded) rather than left waiting for the resume.
func (b *redisPlace) clockJump(server int, d time.Duration) error {
	if b.paused[server] {
		return fmt.Errorf("redis%d is paused", server+1)
	}
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	_, err := b.servers[server].ClockJump(ctx, d)
	return err
}

// close ends the run: every process's proxies closed.
func (b *redisPlace) close() {
	for _, p := range lease.Ending(&b.mu, &b.ended, b.procs) {
		p.kill()
		p.closeProxies()
		lease.Kill(&b.mu, &p.pc)
	}
}
