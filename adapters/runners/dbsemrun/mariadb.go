package dbsemrun

import (
	"context"
	"crypto/rand"
	"database/sql"
	sqldriver "database/sql/driver"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/lockprover/lockprover/internal/realtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	driver "github.com/go-sql-driver/mysql"

	"github.com/lockprover/lockprover/adapters/servers/mariadb"
	"github.com/lockprover/lockprover/histories"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/internal/prover/run"
	"github.com/lockprover/lockprover/model/dbsem"
	"github.com/lockprover/lockprover/model/lease"
)

// MariaDB runs plans on a real MariaDB (or MySQL) server, in real time.
// Each client process reaches the server through a fault proxy of its own
// (package adapters/servers/mariadb), which kills, partitions (a pause: the process
// is cut off and its open transaction keeps its locks), drops the reply
// to a COMMIT, counts statements and skews the clock of the process's
// sessions (the server's clock, as the semaphore sees it, is every
// client's sessions'). A force-close is KILL CONNECTION on the server. A
// restart needs a private server (Server): the machine's shared one is
// never restarted.
//
// Each run makes its tables under a prefix of its own (lp<random>_) and
// drops them when it ends, also when it fails or is cancelled.
type MariaDB struct {
	// DSN names the server and database in go-sql-driver's form, over TCP;
	// "" means mariadb.DefaultDSN. Ignored when Server is set.
	DSN string
	// Server is a private server (mariadb.StartPrivate) that plans may
	// restart; the caller starts and stops it.
	Server *mariadb.Server
	// Tables starts the prefix of each run's tables (a run adds 8 hex
	// digits and "_"): letters, digits and '_'; "" means "lp". A test
	// that checks what it left behind names its own.
	Tables string
}

// dsn is the DSN runs use.
func (t MariaDB) dsn() string {
	switch {
	case t.Server != nil:
		return t.Server.DSN()
	case t.DSN != "":
		return t.DSN
	}
	return mariadb.DefaultDSN
}

// String names the server, without its password.
func (t MariaDB) String() string {
	cfg, err := driver.ParseDSN(t.dsn())
	if err != nil {
		return "MariaDB (a DSN that does not parse)"
	}
	db := cfg.DBName
	if db == "" {
		db = "(no database)"
	}
	return fmt.Sprintf("MariaDB at %s, database %s", cfg.Addr, db)
}

// config parses the DSN: it must name a database and reach the server
// over TCP, where a proxy can stand in between.
func (t MariaDB) config() (*driver.Config, error) {
	cfg, err := driver.ParseDSN(t.dsn())
	switch {
	case err != nil:
		return nil, fmt.Errorf("MariaDB DSN: %w (want, for example, %s)", err, mariadb.DefaultDSN)
	case cfg.Net != "tcp":
		return nil, fmt.Errorf("MariaDB DSN: want a server over tcp (user@tcp(host:port)/db), not %s: faults need a proxy in between", cfg.Net)
	case cfg.DBName == "":
		return nil, fmt.Errorf("MariaDB DSN: name a database (user@tcp(host:port)/db): the semaphore's tables go there")
	}
	// The driver logs connections that die under the run's faults; the
	// history records what they did to each operation.
	cfg.Logger = quiet{}
	return cfg, nil
}

// Preflight connects to the server once, so that a server out of reach or
// a wrong user, password or database is said before any plan runs.
func (t MariaDB) Preflight(ctx context.Context) error {
	cfg, err := t.config()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c := cfg.Clone()
	c.Timeout = 5 * time.Second
	db := sql.OpenDB(mustConnector(c))
	defer db.Close()
	if err := db.PingContext(ctx); err != nil {
		return fmt.Errorf("%s: %v (name another with --dsn or $LOCKPROVER_MYSQL_DSN)", t, err)
	}
	return nil
}

// preflightImpl starts one process of impl as the probe of a throwaway key,
// waits for it to be ready and ends it: an implementation that cannot
// start fails here at once, with what it said, rather than in every plan.
// The tables it made, if any, are dropped.
func (t MariaDB) preflightImpl(ctx context.Context, impl Impl, o Options) error {
	cfg, err := t.config()
	if err != nil {
		return err
	}
	admin := sql.OpenDB(mustConnector(cfg))
	defer admin.Close()
	prefix := t.uniquePrefix()
	defer dropTables(admin, prefix)
	s := Session{Key: "lp-preflight", DSN: t.dsn(), Prefix: prefix, Max: 1, TTL: time.Second, Design: o.Design, Fencing: o.Fencing}
	pc, err := impl.Connect(ctx, "probe", s)
	if err != nil {
		return fmt.Errorf("%s failed its preflight: %w", impl, err)
	}
	return pc.Close()
}

// mustConnector is driver.NewConnector, which fails only on a nil config.
func mustConnector(c *driver.Config) sqldriver.Connector {
	conn, err := driver.NewConnector(c)
	if err != nil {
		panic(err)
	}
	return conn
}

// Run runs p on the server against impl (nil: the reference, or p's
// mutant, in this process), each client through its own proxy.
func (t MariaDB) Run(ctx context.Context, p *Plan, impl Impl) (*prover.Result, error) {
	for _, f := range p.Nemesis {
		if f.Fault == histories.RestartBroker && t.Server == nil {
			return nil, errors.New("the plan restarts the server: that needs a private server of the run's own (--private-server), never the shared one")
		}
	}
	cfg, err := t.config()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	prefix := t.uniquePrefix()
	// The plan's clients (and the process that sets the key's max first)
	// start together: their processes' start-up is over before the clock
	// starts.
	defer prover.Warm(ctx, impl, prefix, len(p.Clients)+1)()
	b := &mariadbPlace{t: t, impl: impl, cfg: cfg, ctx: ctx, start: time.Now(), procs: map[string]*mariaProc{},
		pending: map[string][]hook{}, idle: make(chan struct{})}
	b.admin = sql.OpenDB(mustConnector(cfg))
	defer b.admin.Close()
	defer prover.Leave("the tables " + prefix + "* on " + t.String())()
	defer dropTables(b.admin, prefix)
	r := newRunner(ctx, p, b)
	r.prefix = prefix
	r.begin()
	b.wait()
	b.close()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := errors.Join(b.errs...); err != nil {
		return nil, fmt.Errorf("%s: %w", t, err)
	}
	return r.Result(r.p.Key)
}

// uniquePrefix is a table prefix no other run uses: t.Tables (or "lp"),
// 8 random hex digits, "_".
func (t MariaDB) uniquePrefix() string {
	var b [4]byte
	rand.Read(b[:])
	start := t.Tables
	if start == "" {
		start = "lp"
	}
	return start + hex.EncodeToString(b[:]) + "_"
}

// quiet is a driver logger that says nothing.
type quiet struct{}

func (quiet) Print(...any) {}

// A hook is a fault waiting for a process's n-th statement.
type hook struct {
	n int
	f func()
}

// mariadbPlace is one run on a real server.
type mariadbPlace struct {
	t     MariaDB
	impl  Impl // nil: the reference
	cfg   *driver.Config
	ctx   context.Context
	start time.Time
	admin *sql.DB // straight to the server: KILL CONNECTION, cleanup

	mu      sync.Mutex // the runner's lock (see place)
	procs   map[string]*mariaProc
	pending map[string][]hook // AfterStatements for processes not started yet
	active  int               // processes started and neither ended nor killed
	timers  []*time.Timer
	skew    time.Duration
	ended   bool
	idle    chan struct{} // closed once active falls to 0
	wg      sync.WaitGroup
	errs    []error // a proxy that would not start, a restart that failed
	// restarting is set while the private server is down for a restart
	// and until it is up again.
	restarting atomic.Bool
}

// A mariaProc is one process: its proxy and its connection pool (the
// reference's), or the implementation's process.
type mariaProc struct {
	name   string
	proxy  *mariadb.Proxy
	db     *sql.DB
	pc     ProcessClient // the implementation's process, once started
	ctx    context.Context
	kill   context.CancelFunc // ends its sleeps once it is killed
	killed bool
	// stopped: paused by SIGSTOP. The reference, in this process, is
	// paused by its proxy and gate instead.
	stopped bool
	paused  bool // the reference, paused
	cut     bool // partitioned: its proxy holds its bytes both ways
	// gate, while the reference is paused, is closed when it resumes: its
	// sleeps end no sooner.
	gate atomic.Pointer[chan struct{}]
	over bool // returned, or killed: no longer counted as active
}

func (m *mariaProc) DB() *sql.DB    { return m.db }
func (m *mariaProc) Now() time.Time { return time.Now() }
func (m *mariaProc) Sleep(d time.Duration) {
	if realtime.Sleep(m.ctx, d) != nil {
		return
	}
	for g := m.gate.Load(); g != nil; g = m.gate.Load() {
		select {
		case <-*g:
		case <-m.ctx.Done():
			return
		}
	}
}

// hold partitions the process's proxy while it is paused (the reference)
// or partitioned, and heals it when neither.
func (m *mariaProc) hold() {
	if m.paused || m.cut {
		m.proxy.Partition()
	} else {
		m.proxy.Heal()
	}
}

func (b *mariadbPlace) Lock()   { b.mu.Lock() }
func (b *mariadbPlace) Unlock() { b.mu.Unlock() }

func (b *mariadbPlace) Now() int64 { return int64(time.Since(b.start)) }

func (b *mariadbPlace) stuckAfter() time.Duration { return 5 * time.Minute }

// Go starts process name with a proxy and a connection pool of its own.
// A proxy that cannot start ends the process at once (the run reports it).
func (b *mariadbPlace) Go(name string, f func(proc)) {
	if b.ended {
		return
	}
	px, err := mariadb.Listen(b.cfg.Addr)
	if err != nil {
		b.errs = append(b.errs, fmt.Errorf("%s: %w", name, err))
		return
	}
	px.Skew(b.skew)
	ctx, kill := context.WithCancel(b.ctx)
	p := &mariaProc{name: name, proxy: px, db: sql.OpenDB(mustConnector(px.Config(b.cfg))), ctx: ctx, kill: kill}
	b.procs[name] = p
	for _, h := range b.pending[name] {
		b.hookOn(p, h)
	}
	delete(b.pending, name)
	b.active++
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		f(p)
		b.mu.Lock()
		pc := p.pc
		if p.killed {
			pc = nil
		}
		b.mu.Unlock()
		if pc != nil {
			pc.Close()
		}
		b.mu.Lock()
		b.over(p)
		b.mu.Unlock()
	}()
}

// open opens the semaphore for proc: the reference through proc's pool, or
// the implementation's process, told proc's proxy as its DSN.
func (b *mariadbPlace) open(ctx context.Context, pr proc, name string, o dbsem.Options, s Session) (Client, error) {
	p := pr.(*mariaProc)
	if b.impl == nil {
		sem, err := dbsem.Open(ctx, p.db, o)
		if err != nil {
			return nil, err
		}
		return reference{sem}, nil
	}
	s.DSN = p.proxy.Config(b.cfg).FormatDSN()
	pc, err := lease.StartProcess(ctx, b.impl, name, s, &b.mu, func() bool { return p.killed }, nil, func(pc ProcessClient) { p.pc = pc })
	if err != nil {
		return nil, err
	}
	return pc, nil
}

// over counts p out of the active processes (once).
func (b *mariadbPlace) over(p *mariaProc) {
	if p.over {
		return
	}
	p.over = true
	if b.active--; b.active == 0 && !b.ended {
		b.ended = true
		close(b.idle)
	}
}

// wait returns once every process has ended or been killed, or the run is
// cancelled.
func (b *mariadbPlace) wait() {
	select {
	case <-b.idle:
	case <-b.ctx.Done():
	}
}

// close ends the run: timers stopped, proxies closed (a killed process
// still blocked in a statement then fails and returns), pools closed.
func (b *mariadbPlace) close() {
	b.mu.Lock()
	b.ended = true
	for _, t := range b.timers {
		t.Stop()
	}
	procs := make([]*mariaProc, 0, len(b.procs))
	for _, p := range b.procs {
		procs = append(procs, p)
	}
	b.mu.Unlock()
	for _, p := range procs {
		p.kill()
		p.proxy.Close()
		b.stop(p)
	}
	b.wg.Wait()
	for _, p := range procs {
		b.stop(p) // one whose process started while the run was ending
	}
	for _, p := range procs {
		p.db.Close()
	}
}

// stop kills the implementation's process of p, if it has one (lease.Kill).
func (b *mariadbPlace) stop(p *mariaProc) { lease.Kill(&b.mu, &p.pc) }

// dropTables drops the tables whose names start with prefix, with a
// context of its own: the run's may have been cancelled.
func dropTables(admin *sql.DB, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	like := strings.ReplaceAll(prefix, "_", `\_`) + "%"
	rows, err := admin.QueryContext(ctx, "SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name LIKE ?", like)
	if err != nil {
		return
	}
	var names []string
	for rows.Next() {
		var n string
		if rows.Scan(&n) == nil {
			names = append(names, n)
		}
	}
	rows.Close()
	for _, n := range names {
		admin.ExecContext(ctx, "DROP TABLE IF EXISTS `"+n+"`")
	}
}

// After runs f, with the runner's lock, once d has passed (unless the run
// has ended).
func (b *mariadbPlace) After(d time.Duration, f func()) {
	b.timers = append(b.timers, time.AfterFunc(d, func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if !b.ended {
			f()
		}
	}))
}

// AfterStatements sets f on the proxy of the process named name, or on the
// next process of that name to start.
func (b *mariadbPlace) AfterStatements(name string, n int, f func()) {
	if p := b.live(name); p != nil {
		b.hookOn(p, hook{n, f})
		return
	}
	b.pending[name] = append(b.pending[name], hook{n, f})
}

func (b *mariadbPlace) hookOn(p *mariaProc, h hook) {
	p.proxy.AfterStatements(h.n, func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if !b.ended {
			h.f()
		}
	})
}

// live is the process named name, if it runs.
func (b *mariadbPlace) live(name string) *mariaProc {
	if p := b.procs[name]; p != nil && !p.over {
		return p
	}
	return nil
}

// Strike kills, pauses or partitions the process a names, closes its
// connections (killConnections) or loses its next COMMIT's reply.
func (b *mariadbPlace) Strike(a run.Aim) error {
	switch a.Fault {
	case histories.ForceClose:
		if !b.killConnections(a.Process) {
			return run.ErrStruckNothing
		}
		return nil
	case histories.DropReply:
		b.dropCommitReply(a.Process)
		return nil
	case histories.RestartBroker:
		if a.Wait != nil {
			return b.restartWait(a.Down)
		}
		if !b.restartMeanwhile(a.Down) {
			return run.ErrStruckNothing
		}
		return nil
	case histories.ClockSkew:
		if a.Process != "" {
			return run.CannotStrike(a) // a client's clock is its own: the runner's
		}
		b.skewClock(a.Offset)
		return nil
	}
	return run.StrikeProcess(a, b.kill, b.pause, b.partition)
}

// End resumes or heals the process a names.
func (b *mariadbPlace) End(a run.Aim) error { return run.EndProcess(a, b.resume, b.heal) }

// kill ends process name as a crash would: its proxy cut off for good and
// its connections closed both ways, so the server rolls back its open
// transactions; its code, still running until its call returns, is
// ignored by the runner and can reach the server no more.
func (b *mariadbPlace) kill(name string) {
	p := b.live(name)
	if p == nil {
		return
	}
	p.killed = true
	p.proxy.Partition()
	p.proxy.Kill()
	if p.pc != nil {
		p.pc.Signal(syscall.SIGKILL)
	}
	p.kill()
	b.over(p)
}

// pause stops process name: an implementation's process with SIGSTOP;
// the reference, in this process, as SIGSTOP would as far as the server
// and the history can tell: its connections stay open and pass nothing
// (its transaction keeps its locks), and its sleeps end no sooner than it
// resumes. (A statement it sends meanwhile is held by the proxy, as if
// sent just before the pause.)
func (b *mariadbPlace) pause(name string) {
	switch p := b.live(name); {
	case p == nil:
	case p.pc != nil:
		p.stopped = true
		p.pc.Signal(syscall.SIGSTOP)
	case !p.paused:
		p.paused = true
		g := make(chan struct{})
		p.gate.Store(&g)
		p.hold()
	}
}

// resume lets a paused process go on.
func (b *mariadbPlace) resume(name string) {
	switch p := b.live(name); {
	case p == nil:
	case p.stopped:
		p.stopped = false
		p.pc.Signal(syscall.SIGCONT)
	case p.paused:
		p.paused = false
		p.hold()
		close(*p.gate.Swap(nil))
	}
}

// partition cuts process name off the server both ways: its proxy holds
// the bytes until the heal, while the process runs on.
func (b *mariadbPlace) partition(name string) {
	if p := b.live(name); p != nil {
		p.cut = true
		p.hold()
	}
}

// heal ends process name's partition: the held bytes go through.
func (b *mariadbPlace) heal(name string) {
	if p := b.live(name); p != nil {
		p.cut = false
		p.hold()
	}
}

// killConnections closes process name's connections from the server's
// side (KILL CONNECTION). Not while the server is down for a restart:
// every connection ended with it, and there is no server to ask (the soak
// of issue 55: a KILL refused mid-restart on a loaded machine, whose
// restart took longer, had ended the run as unable to run its plan).
func (b *mariadbPlace) killConnections(name string) bool {
	p := b.live(name)
	if p == nil || b.restarting.Load() {
		return false
	}
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	if err := mariadb.KillConnections(ctx, b.admin, p.proxy.ConnectionIDs()...); err != nil {
		b.mu.Lock()
		b.errs = append(b.errs, err)
		b.mu.Unlock()
	}
	return true
}

// dropCommitReply loses the reply to process name's next COMMIT.
func (b *mariadbPlace) dropCommitReply(name string) {
	if p := b.live(name); p != nil {
		p.proxy.DropCommitReply()
	}
}

func (b *mariadbPlace) droppedReplies(name string) (int, bool) {
	if p := b.live(name); p != nil {
		return p.proxy.Counts().Dropped, true
	}
	return 0, true
}

// restartMeanwhile restarts the private server; the runner goes on
// meanwhile (a fault counted in statements). A restart while one is under
// way (a loaded machine's mariadbd can take seconds to come up) strikes
// nothing: two at once launched two mariadbds on one port, and the second
// restart failed the run, "another server answers there" (the soak's 5615
// and 5715).
func (b *mariadbPlace) restartMeanwhile(downtime time.Duration) bool {
	if !b.restarting.CompareAndSwap(false, true) {
		return false
	}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		b.restart(downtime)
	}()
	return true
}

// restartWait restarts the private server and returns once it answers
// again, or why it did not (the nemesis's timed restarts, Aim.Wait).
func (b *mariadbPlace) restartWait(downtime time.Duration) error {
	if !b.restarting.CompareAndSwap(false, true) {
		return errors.New("a restart of the server is under way")
	}
	return b.restart(downtime)
}

// restart restarts the private server, restarting set by its caller and
// cleared once the server answers again; a restart that failed (but for
// the run's end) is the run's error too.
func (b *mariadbPlace) restart(downtime time.Duration) error {
	defer b.restarting.Store(false)
	err := b.t.Server.Restart(b.ctx, downtime)
	if err != nil && b.ctx.Err() == nil {
		b.mu.Lock()
		b.errs = append(b.errs, fmt.Errorf("restart: %w", err))
		b.mu.Unlock()
	}
	return err
}

// skewClock offsets the clock of every client session, now and later,
// from the server's true one.
func (b *mariadbPlace) skewClock(offset time.Duration) {
	b.skew = offset
	for _, p := range b.procs {
		p.proxy.Skew(offset)
	}
}
