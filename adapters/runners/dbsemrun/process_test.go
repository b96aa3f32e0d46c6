package dbsemrun_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/lockprover/lockprover/adapters/process/processtest"
	"github.com/lockprover/lockprover/adapters/runners/dbsemrun/dbsemprotocol"

	"github.com/go-sql-driver/mysql"

	"github.com/lockprover/lockprover/adapters/runners/dbsemrun"
	"github.com/lockprover/lockprover/adapters/servers/mariadb/mariadbtest"
	"github.com/lockprover/lockprover/internal/prover"
	"github.com/lockprover/lockprover/internal/quick"
	"github.com/lockprover/lockprover/model/dbsem"
)

// The lease tests run against the test MariaDB (package mariadbtest:
// $LOCKPROVER_MYSQL_DSN, by default the machine's own), and skip without
// one; those of the Python example need Debian's /usr/bin/python3 with
// python3-pymysql.

// errNotGranted stands for dbsemrun.ErrNotGranted, which a definite
// acquire failure matches by its text.
var errNotGranted = dbsemrun.ErrNotGranted

// leaseDB is the test database's DSN and a pool on it; the test skips
// without one.
func leaseDB(t *testing.T) (string, *sql.DB) {
	t.Helper()
	dsn := mariadbtest.DSN(t)
	cfg, err := mariadbtest.Config()
	if err != nil {
		t.Fatal(err) // not reached: DSN skips without a database
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(conn)
	t.Cleanup(func() { db.Close() })
	return dsn, db
}

// leasePrefix is a table prefix of this test's own; every table under it
// is dropped when the test ends, pass or fail.
func leasePrefix(t *testing.T, db *sql.DB) string {
	t.Helper()
	var b [5]byte
	rand.Read(b[:])
	prefix := fmt.Sprintf("lpt_%x_", b)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, table := range leaseTables(t, ctx, db, prefix) {
			if _, err := db.ExecContext(ctx, "DROP TABLE IF EXISTS `"+table+"`"); err != nil {
				t.Errorf("drop %s: %v", table, err)
			}
		}
		if left := leaseTables(t, ctx, db, prefix); len(left) > 0 {
			t.Errorf("tables left behind: %v", left)
		}
	})
	return prefix
}

// leaseTables lists the tables of the database whose names start with
// prefix.
func leaseTables(t *testing.T, ctx context.Context, db *sql.DB, prefix string) []string {
	rows, err := db.QueryContext(ctx, "SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE()")
	if err != nil {
		t.Errorf("list tables: %v", err)
		return nil
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err == nil && strings.HasPrefix(name, prefix) {
			out = append(out, name)
		}
	}
	return out
}

// needPyMySQL skips a test without Debian's python3 and its pymysql.
func needPyMySQL(t *testing.T) {
	t.Helper()
	if err := exec.Command("/usr/bin/python3", "-c", "import pymysql").Run(); err != nil {
		t.Skip("needs Debian's /usr/bin/python3 with python3-pymysql (apt-get install python3-pymysql)")
	}
}

// pythonLease is the command of the Python example.
func pythonLease(t *testing.T) string {
	script, err := filepath.Abs(filepath.Join(pythonExample, "db_semaphore.py"))
	if err != nil {
		t.Fatal(err)
	}
	return "/usr/bin/python3 " + script
}

// serveLease builds, once for the test binary, a program that serves the
// reference over the protocol with dbsemprotocol.Serve, as `lockprover
// serve-reference --kind db-semaphore` does; it returns the program's path
// and go build's output if it failed.
var serveLease = sync.OnceValues(func() (string, string) {
	dir := filepath.Dir(lockprover) // removed by TestMain
	src := filepath.Join(dir, "main.go")
	err := os.WriteFile(src, []byte(`package main

import (
	"fmt"
	"os"

	"github.com/lockprover/lockprover/adapters/runners/dbsemrun/dbsemprotocol"
)

func main() {
	if err := dbsemprotocol.Serve(os.Stdin, os.Stdout, dbsemprotocol.ServeOptions{Log: os.Stderr}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
`), 0o644)
	if err != nil {
		return "", err.Error()
	}
	bin := filepath.Join(dir, "serve-lease")
	cmd := exec.Command("go", "build", "-o", bin, src)
	cmd.Dir = filepath.Join("..", "..", "..") // the module's root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Sprintf("%v\n%s", err, out)
	}
	return bin, ""
})

// serveLeaseBinary is serveLease's program, failing the test if it could
// not be built.
func serveLeaseBinary(t *testing.T) string {
	t.Helper()
	bin, failed := serveLease()
	if failed != "" {
		t.Fatalf("building the ServeLease program: %s", failed)
	}
	return bin
}

// leaseImpls are the implementations proven here: the reference through
// ServeLease, and the Python example.
func leaseImpls(t *testing.T) []struct{ name, cmd string } {
	impls := []struct{ name, cmd string }{{"reference", serveLeaseBinary(t)}}
	if exec.Command("/usr/bin/python3", "-c", "import pymysql").Run() == nil {
		impls = append(impls, struct{ name, cmd string }{"python", pythonLease(t)})
	} else {
		t.Log("the Python example is left out: needs Debian's /usr/bin/python3 with python3-pymysql")
	}
	return impls
}

// connect starts client name, failing the test if it cannot.
func connect(t *testing.T, impl *dbsemprotocol.Processes, name string, in dbsemrun.Session) *dbsemprotocol.Process {
	t.Helper()
	pc, err := impl.Connect(context.Background(), name, in)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	c := pc.(*dbsemprotocol.Process)
	t.Cleanup(func() { c.Close() })
	return c
}

func acquired(t *testing.T, c *dbsemprotocol.Process, key string, ttl time.Duration, max int) dbsem.Lease {
	t.Helper()
	l, err := c.Acquire(context.Background(), key, ttl, max)
	if err != nil {
		t.Fatalf("%s acquire: %v (%s)", c.Name(), err, c.Crashed())
	}
	if l.Token == "" {
		t.Fatalf("%s acquire: no token", c.Name())
	}
	return l
}

func isErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: %v, want %v", what, err, want)
	}
}

// ended closes a client and checks that it exits at once on its stdin's
// end, as a clean exit, not a crash.
func ended(t *testing.T, c *dbsemprotocol.Process) {
	t.Helper()
	start := time.Now()
	c.Close()
	// Close sends SIGTERM after 5 s, and SIGKILL 5 s later. A process
	// that needed SIGKILL ignored both its stdin closing and SIGTERM; one
	// that took over 5 s may just be slow (5.5 s for the Python example
	// at load 25 to 30). Exiting within 5 s, or the init timeout given,
	// is validate-impl's check (TestValidateLeasePasses).
	if d := time.Since(start); d > 9*time.Second {
		t.Errorf("%s took %v to exit after its stdin closed: it needed SIGKILL", c.Name(), d)
	}
	if why := c.Crashed(); why != "" {
		t.Errorf("%s %s", c.Name(), why)
	}
}

// Both implementations, in both designs, keep the semaphore's promises
// through the protocol: a limit, full, release, refresh, expiry by the
// database's clock, fencing, the agreed max, exclusivity under
// concurrency, and leases outliving a killed holder until they expire.
func TestLeaseImplementations(t *testing.T) {
	t.Parallel()
	dsn, db := leaseDB(t)
	for _, impl := range leaseImpls(t) {
		for _, design := range []string{"master-row", "row-per-slot"} {
			t.Run(impl.name+"/"+design, func(t *testing.T) {
				t.Parallel()
				in := dbsemrun.Session{DSN: dsn, Prefix: leasePrefix(t, db), Design: design, Fencing: true}
				li := loaded(impl.cmd)
				li.Timeout = 20 * time.Second
				t.Cleanup(li.Stop)
				t.Run("basics", func(t *testing.T) { leaseBasics(t, li, in) })
				t.Run("expiry", func(t *testing.T) { leaseExpiry(t, li, in) })
				t.Run("concurrency", func(t *testing.T) { leaseConcurrency(t, li, in) })
				t.Run("kill", func(t *testing.T) { leaseKill(t, li, in) })
			})
		}
	}
}

func leaseBasics(t *testing.T, li *dbsemprotocol.Processes, in dbsemrun.Session) {
	ctx := context.Background()
	in.Key, in.Max, in.TTL = "basics", 2, 10*time.Second
	c1, c2, c3 := connect(t, li, "c1", in), connect(t, li, "c2", in), connect(t, li, "c3", in)
	l1 := acquired(t, c1, in.Key, in.TTL, 2)
	l2 := acquired(t, c2, in.Key, in.TTL, 2)
	if l1.Fence < 1 || l2.Fence <= l1.Fence {
		t.Fatalf("fences %d then %d: want increasing from 1", l1.Fence, l2.Fence)
	}
	if l1.Token == l2.Token {
		t.Fatalf("two leases with the token %s", l1.Token)
	}
	_, err := c3.Acquire(ctx, in.Key, in.TTL, 2)
	isErr(t, "acquire with max leases held", err, dbsem.ErrFull)

	isErr(t, "release", c1.Release(ctx, in.Key, l1.Token), nil)
	isErr(t, "release again", c1.Release(ctx, in.Key, l1.Token), dbsem.ErrExpired)
	isErr(t, "refresh after release", c1.Refresh(ctx, in.Key, l1.Token, in.TTL), dbsem.ErrExpired)
	isErr(t, "refresh of a token never granted", c1.Refresh(ctx, in.Key, "no-such-token", in.TTL), dbsem.ErrExpired)
	l3 := acquired(t, c3, in.Key, in.TTL, 2)
	if l3.Fence <= l2.Fence {
		t.Fatalf("fence %d after %d: want increasing", l3.Fence, l2.Fence)
	}
	isErr(t, "refresh", c2.Refresh(ctx, in.Key, l2.Token, in.TTL), nil)

	// A disagreeing max is a definite failure, and takes nothing.
	_, err = c1.Acquire(ctx, in.Key, in.TTL, 3)
	var le *dbsemprotocol.ProcessError
	if !errors.Is(err, errNotGranted) || !errors.As(err, &le) || le.Code != "mismatch" {
		t.Fatalf("acquire with another max: %v, want a definite mismatch", err)
	}
	_, err = c1.Acquire(ctx, in.Key, in.TTL, 2)
	isErr(t, "acquire after the mismatch", err, dbsem.ErrFull)
	// Neither is a key the process does not serve.
	_, err = c1.Acquire(ctx, "other", in.TTL, 2)
	if !errors.Is(err, errNotGranted) {
		t.Fatalf("acquire of another key: %v, want a definite failure", err)
	}
	for _, c := range []*dbsemprotocol.Process{c1, c2, c3} {
		ended(t, c)
	}
}

// margin covers the difference between this process's clock and the
// database's (the same machine's), and DATETIME(6)'s rounding.
const margin = 50 * time.Millisecond

// sleepUntil sleeps until t (at once if it has passed).
func sleepUntil(t time.Time) { time.Sleep(time.Until(t)) }

// checkLive checks an operation's answer where the lease model is sure of
// it: while a lease is certainly live (the operation returned before
// liveUntil), it must be want; once it has certainly expired (invoked
// after expiredFrom), wantAfter. In between, either is right: a loaded
// machine only makes fewer answers certain.
func checkLive(t *testing.T, what string, err error, returned, liveUntil time.Time, want error) {
	t.Helper()
	if returned.Before(liveUntil) && !errors.Is(err, want) {
		t.Fatalf("%s, %v before the lease could expire: %v, want %v", what, liveUntil.Sub(returned), err, want)
	}
	if !returned.Before(liveUntil) {
		t.Logf("%s: too slow to judge (%v late), answered %v", what, returned.Sub(liveUntil), err)
	}
}

// releaseLate releases the lease of an acquire that checkLive let pass as
// too slow to judge (granted once the lease it was to find live had
// expired), so that the key is free for the checks after it, as it would
// have been had the acquire been in time.
func releaseLate(t *testing.T, c *dbsemprotocol.Process, key string, l dbsem.Lease, err error) {
	t.Helper()
	if err != nil {
		return
	}
	if err := c.Release(context.Background(), key, l.Token); err != nil && !errors.Is(err, dbsem.ErrExpired) {
		t.Fatalf("%s release of a lease granted too late to judge: %v", c.Name(), err)
	}
}

func leaseExpiry(t *testing.T, li *dbsemprotocol.Processes, in dbsemrun.Session) {
	ctx := context.Background()
	ttl := time.Second
	in.Key, in.Max, in.TTL = "expiry", 1, ttl
	c1, c2 := connect(t, li, "c1", in), connect(t, li, "c2", in)
	a1 := time.Now()
	l1 := acquired(t, c1, in.Key, ttl, 1)
	a1ret := time.Now() // l1's deadline is between a1 and a1ret, plus ttl
	l, err := c2.Acquire(ctx, in.Key, ttl, 1)
	checkLive(t, "acquire while held", err, time.Now(), a1.Add(ttl), dbsem.ErrFull)
	releaseLate(t, c2, in.Key, l, err)

	sleepUntil(a1.Add(ttl * 6 / 10))
	r1 := time.Now()
	err = c1.Refresh(ctx, in.Key, l1.Token, ttl)
	r1ret := time.Now()
	checkLive(t, "refresh in time", err, r1ret, a1.Add(ttl), nil)
	if err != nil {
		t.Skipf("refresh too late to go on: %v", err)
	}
	sleepUntil(a1ret.Add(ttl + margin)) // past the first deadline, not the refreshed one
	l, err = c2.Acquire(ctx, in.Key, ttl, 1)
	checkLive(t, "acquire while held after a refresh", err, time.Now(), r1.Add(ttl), dbsem.ErrFull)
	releaseLate(t, c2, in.Key, l, err)

	sleepUntil(r1ret.Add(ttl + margin))
	isErr(t, "refresh of an expired lease", c1.Refresh(ctx, in.Key, l1.Token, ttl), dbsem.ErrExpired)
	isErr(t, "release of an expired lease", c1.Release(ctx, in.Key, l1.Token), dbsem.ErrExpired)
	l2 := acquired(t, c2, in.Key, ttl, 1)
	a2ret := time.Now()
	if l2.Fence <= l1.Fence {
		t.Fatalf("fence %d after %d: want increasing", l2.Fence, l1.Fence)
	}
	// Nobody has taken the slot of an expired lease: still expired.
	sleepUntil(a2ret.Add(ttl + margin))
	isErr(t, "refresh of an expired lease nobody took over", c2.Refresh(ctx, in.Key, l2.Token, ttl), dbsem.ErrExpired)
	isErr(t, "release of an expired lease nobody took over", c2.Release(ctx, in.Key, l2.Token), dbsem.ErrExpired)
	ended(t, c1)
	ended(t, c2)
}

// leaseConcurrency has clients race for two slots: no more than two hold
// at once (each counted from its acquire's return to its release's
// invoke, within the time it really held), and fences never repeat.
func leaseConcurrency(t *testing.T, li *dbsemprotocol.Processes, in dbsemrun.Session) {
	in.Key, in.Max, in.TTL = "race", 2, 20*time.Second
	const clients = 5
	var holders, most, grants, fulls atomic.Int32
	var mu sync.Mutex
	fences := map[int64]bool{}
	var wg sync.WaitGroup
	cs := make([]*dbsemprotocol.Process, clients)
	for i := range cs {
		cs[i] = connect(t, li, fmt.Sprintf("c%d", i+1), in)
	}
	// A second and a half of racing, and on a machine too busy for one
	// grant a client in that time, on until there have been that many
	// (for a minute at most).
	start := time.Now()
	racing := func() bool {
		d := time.Since(start)
		return d < 1500*time.Millisecond || grants.Load() < clients && d < time.Minute
	}
	for _, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			for racing() {
				l, err := c.Acquire(ctx, in.Key, in.TTL, in.Max)
				if errors.Is(err, dbsem.ErrFull) {
					fulls.Add(1)
					continue
				}
				if err != nil {
					t.Errorf("%s acquire: %v", c.Name(), err)
					return
				}
				grants.Add(1)
				n := holders.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				mu.Lock()
				if fences[l.Fence] {
					t.Errorf("fence %d granted twice", l.Fence)
				}
				fences[l.Fence] = true
				mu.Unlock()
				time.Sleep(time.Millisecond)
				holders.Add(-1)
				if err := c.Release(ctx, in.Key, l.Token); err != nil {
					t.Errorf("%s release: %v", c.Name(), err)
					return
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("%d grants, %d full, at most %d holders", grants.Load(), fulls.Load(), most.Load())
	if most.Load() > int32(in.Max) {
		t.Errorf("%d holders at once, max %d", most.Load(), in.Max)
	}
	if grants.Load() < clients {
		t.Errorf("only %d grants", grants.Load())
	}
}

// leaseKill kills holders: by the harness (not a crash), and from outside
// in the middle of an operation (a crash, reported with the request); the
// lease of either stays taken until it expires.
func leaseKill(t *testing.T, li *dbsemprotocol.Processes, in dbsemrun.Session) {
	ctx := context.Background()
	ttl := time.Second
	in.Key, in.Max, in.TTL = "kill", 1, ttl
	// c2 starts before c1 takes its lease, so that its acquire comes while
	// the lease is live unless the machine is very slow.
	c1, c2 := connect(t, li, "c1", in), connect(t, li, "c2", in)
	a1 := time.Now()
	acquired(t, c1, in.Key, ttl, 1)
	a1ret := time.Now()
	c1.Signal(syscall.SIGKILL)
	if !c1.Broken() || c1.Crashed() != "" {
		t.Fatalf("after the harness's kill: broken %v, crashed %q; want broken, not crashed", c1.Broken(), c1.Crashed())
	}
	if _, err := c1.Acquire(ctx, in.Key, ttl, 1); err == nil || errors.Is(err, errNotGranted) {
		t.Fatalf("acquire on a killed process: %v, want an unknown outcome", err)
	}
	l, err := c2.Acquire(ctx, in.Key, ttl, 1)
	checkLive(t, "acquire while the killed holder's lease is live", err, time.Now(), a1.Add(ttl), dbsem.ErrFull)
	releaseLate(t, c2, in.Key, l, err)
	sleepUntil(a1ret.Add(ttl + margin))
	acquired(t, c2, in.Key, ttl, 1)

	// A process that dies in the middle of an operation: paused, asked,
	// and killed from outside.
	c3 := connect(t, li, "c3", in)
	stop(t, c3)
	done := make(chan error, 1)
	go func() {
		_, err := c3.Acquire(ctx, in.Key, ttl, 1)
		done <- err
	}()
	time.Sleep(200 * time.Millisecond)
	syscall.Kill(-c3.Pid(), syscall.SIGKILL)
	select {
	case err := <-done:
		if err == nil || errors.Is(err, errNotGranted) || errors.Is(err, dbsem.ErrFull) {
			t.Fatalf("acquire of a process killed meanwhile: %v, want an unknown outcome", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("an acquire of a killed process did not return")
	}
	why := c3.Crashed()
	if !strings.Contains(why, "exited (signal: killed)") || !strings.Contains(why, `"type":"acquire"`) {
		t.Fatalf("crashed: %q; want the kill and the request", why)
	}

	// A paused process that does not answer in time is given up on.
	c4 := connect(t, li, "c4", in)
	stop(t, c4)
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	_, err = c4.Acquire(short, in.Key, ttl, 1)
	if err == nil || !strings.Contains(c4.Crashed(), "did not answer before context deadline exceeded") {
		t.Fatalf("acquire of a paused process: %v, crashed %q", err, c4.Crashed())
	}
}

// stop pauses c's processes with SIGSTOP and waits until every thread of
// each has stopped. A signal is only queued when kill returns: the thread
// it wakes stops the others when it next runs, which on a loaded machine
// can be after another thread of the process has read a request, asked
// the database and answered (a "paused" process answered "full" once).
func stop(t *testing.T, c *dbsemprotocol.Process) {
	t.Helper()
	c.Signal(syscall.SIGSTOP)
	deadline := time.Now().Add(10 * time.Second)
	for {
		running, err := runningThreads(c.Pid())
		if err != nil {
			t.Fatalf("%s: %v", c.Name(), err)
		}
		if running == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d threads of its processes still not stopped 10 s after SIGSTOP", c.Name(), running)
		}
		time.Sleep(time.Millisecond)
	}
}

// runningThreads counts the threads of process group pgid that can still
// run, from Linux's /proc: those whose state (in each thread's stat) is
// neither T (stopped) nor Z or X (dead).
func runningThreads(pgid int) (int, error) {
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return 0, fmt.Errorf("cannot see whether a process has stopped without Linux's /proc: %v", err)
	}
	running, members := 0, 0
	for _, p := range procs {
		var pid int
		if _, err := fmt.Sscan(p.Name(), &pid); err != nil {
			continue
		}
		if g, _ := statField(fmt.Sprintf("/proc/%d/stat", pid), 2); g != fmt.Sprint(pgid) {
			continue
		}
		members++
		tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		for _, task := range tasks {
			if st, ok := statField(fmt.Sprintf("/proc/%d/task/%s/stat", pid, task.Name()), 0); ok && !strings.Contains("TZX", st) {
				running++
			}
		}
	}
	if members == 0 {
		return 0, fmt.Errorf("no process in group %d", pgid)
	}
	return running, nil
}

// statField is field i of a /proc stat file after the command's name
// (0 is the state, 2 the process group), or false if it cannot be read
// (the process is gone).
func statField(path string, i int) (string, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", false
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if i >= len(fields) {
		return "", false
	}
	return fields[i], true
}

// Implementations that break the protocol get clear errors, and leave no
// process behind.
func TestLeaseBrokenImplementations(t *testing.T) {
	t.Parallel()
	in := dbsemrun.Session{Key: "k", DSN: "root@tcp(127.0.0.1:1)/test", Prefix: "lpt_", Max: 1, TTL: time.Second, Fencing: true}
	initOK := `read l; echo '{"id":1,"type":"init_ok"}'; `
	answer := func(reply string) string { return initOK + `while read l; do echo '` + reply + `'; done` }
	for _, tc := range []struct {
		name, script string
		start        bool   // init succeeds
		want         string // in the error (of Connect, or of the acquire)
		crashed      bool   // the acquire leaves the process crashed
		notGranted   bool   // the acquire's error is a definite failure
	}{
		{name: "exits at start", script: `echo "no config" >&2; exit 3`, want: "c1 did not start: exited (exit status 3)"},
		{name: "writes garbage at init", script: `read l; echo garbage`, want: `c1 did not start: wrote a line that is not a JSON object: "garbage"`},
		{name: "refuses", script: `read l; echo '{"id":1,"type":"error","code":"unsupported","text":"no leases here","definite":true}'`, want: "c1 refused to start: unsupported: no leases here"},
		{name: "database out of reach", script: `read l; echo '{"id":1,"type":"error","code":"database","text":"connection refused"}'`, want: "database: connection refused"},
		{name: "exits after init", script: initOK + `read l; exit 5`, start: true, want: "exited (exit status 5)", crashed: true},
		{name: "writes garbage", script: initOK + `read l; echo 'not JSON'; sleep 600`, start: true, want: "wrote a line that is not a JSON object", crashed: true},
		{name: "answers the wrong id", script: answer(`{"id":999,"type":"acquire_ok","token":"t","fence":1}`), start: true, want: "answered id 999 to request id 2", crashed: true},
		{name: "answers the wrong type", script: answer(`{"id":2,"type":"release_ok"}`), start: true, want: `answered "release_ok" to a request that wants "acquire_ok" or "acquire_fail"`, crashed: true},
		{name: "fails for another reason", script: answer(`{"id":2,"type":"acquire_fail","reason":"held"}`), start: true, want: `acquire_fail whose "reason" is "held": want "full"`, crashed: true},
		{name: "grants no token", script: answer(`{"id":2,"type":"acquire_ok","fence":1}`), start: true, want: `"token" is not a non-empty string`, crashed: true},
		{name: "grants no fence", script: answer(`{"id":2,"type":"acquire_ok","token":"t"}`), start: true, want: `without a "fence", though init asked for fencing`, crashed: true},
		{name: "a negative fence", script: answer(`{"id":2,"type":"acquire_ok","token":"t","fence":-1}`), start: true, want: `"fence" is not an integer >= 0`, crashed: true},
		{name: "a definite error", script: answer(`{"id":2,"type":"error","code":"mismatch","text":"max 2","definite":true}`), start: true, want: "mismatch: max 2", notGranted: true},
		{name: "an error", script: answer(`{"id":2,"type":"error","code":"database","text":"lost"}`), start: true, want: "database: lost"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			marker := processtest.Marker("LPTEST")
			li := dbsemprotocol.NewProcesses(fmt.Sprintf("%s=1; %s", marker, tc.script))
			li.Timeout = 5 * time.Second
			defer func() {
				li.Stop()
				if pids, _ := exec.Command("pgrep", "-f", marker+"=").Output(); len(pids) > 0 {
					t.Errorf("processes left behind: %s", pids)
				}
			}()
			c, err := li.Connect(context.Background(), "c1", in)
			if !tc.start {
				var se *prover.ImplementationError
				switch {
				case err == nil:
					t.Fatal("started")
				case c != nil:
					t.Fatalf("%v, and a client that is not a nil interface: %#v", err, c)
				case !strings.Contains(err.Error(), tc.want):
					t.Fatalf("%v, want %q", err, tc.want)
				case errors.As(err, &se) == (tc.name == "database out of reach"):
					t.Fatalf("%v: a start error %v", err, errors.As(err, &se))
				}
				if tc.name == "exits at start" && !strings.Contains(err.Error(), "stderr ends: no config") {
					t.Errorf("%v does not show the stderr", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_, err = c.Acquire(context.Background(), "k", time.Second, 1)
			if err == nil || !strings.Contains(err.Error(), tc.want) || errors.Is(err, errNotGranted) != tc.notGranted {
				t.Fatalf("acquire: %v, want %q (not granted: %v)", err, tc.want, tc.notGranted)
			}
			if why := c.Crashed(); (why != "") != tc.crashed || tc.crashed && (!strings.Contains(why, tc.want) && !strings.Contains(why, "exited") || !strings.Contains(why, `last request: {"id":2,"max":1,"ttl_ms":1000,"type":"acquire"}`)) {
				t.Fatalf("crashed: %q (want crashed %v)", why, tc.crashed)
			}
		})
	}
}

// Refresh and release answer only expired as a failure.
func TestLeaseBrokenRefreshAndRelease(t *testing.T) {
	t.Parallel()
	in := dbsemrun.Session{Key: "k", DSN: "root@tcp(127.0.0.1:1)/test", Max: 1, TTL: time.Second}
	li := dbsemprotocol.NewProcesses(`read l; echo '{"id":1,"type":"init_ok"}'; read l; echo '{"id":2,"type":"refresh_fail","reason":"expired"}'; read l; echo '{"id":3,"type":"release_fail","reason":"gone"}'; sleep 600`)
	defer li.Stop()
	c, err := li.Connect(context.Background(), "c1", in)
	if err != nil {
		t.Fatal(err)
	}
	isErr(t, "refresh", c.Refresh(context.Background(), "k", "t", time.Second), dbsem.ErrExpired)
	err = c.Release(context.Background(), "k", "t")
	if err == nil || errors.Is(err, dbsem.ErrExpired) || !strings.Contains(c.Crashed(), `release_fail whose "reason" is "gone": want "expired"`) {
		t.Fatalf("release: %v, crashed %q", err, c.Crashed())
	}
}

// After two failed starts in a run no more of its processes are started; messages never
// show the database's password, neither the DSN's nor the URL's.
func TestLeaseGivesUpAndHidesThePassword(t *testing.T) {
	t.Parallel()
	in := dbsemrun.Session{Key: "k", DSN: "u:s3cr3t@tcp(127.0.0.1:1)/db?timeout=1s", Prefix: "p_", Max: 2, TTL: 1500 * time.Millisecond}
	li := dbsemprotocol.NewProcesses(`read -r line; exit 4`)
	for _, name := range []string{"c1", "c2"} {
		_, err := li.Connect(context.Background(), name, in)
		want := name + ` did not start: exited (exit status 4); last request: {"client":"` + name + `","design":"master-row","dsn":"u:xxxxx@tcp(127.0.0.1:1)/db?timeout=1s","fencing":false,"id":1,"lock":"db-semaphore","max":2,"name":"k","prefix":"p_","ttl_ms":1500,"type":"init","url":"mysql://u:xxxxx@127.0.0.1:1/db"}`
		if err == nil || err.Error() != want {
			t.Fatalf("%s: %v\nwant %s", name, err, want)
		}
	}
	_, err := li.Connect(context.Background(), "c3", in)
	var se *prover.ImplementationError
	if !errors.As(err, &se) || !strings.HasPrefix(se.Msg, "c3 not started: the implementation failed to start twice in this run (c2 did not start") || strings.Contains(se.Msg, "s3cr3t") {
		t.Fatalf("%v", err)
	}
}

func TestMySQLURL(t *testing.T) {
	for dsn, want := range map[string]string{
		"root@tcp(127.0.0.1:3306)/test":                  "mysql://root@127.0.0.1:3306/test",
		"u:p%40ss@w/rd@tcp(db.example:4000)/x?tls=false": "mysql://u:p%2540ss%40w%2Frd@db.example:4000/x",
		"root:pw@/test": "mysql://root:pw@127.0.0.1:3306/test",
	} {
		if got, err := dbsemprotocol.MySQLURL(dsn); err != nil || got != want {
			t.Errorf("MySQLURL(%s) = %q, %v; want %q", dsn, got, err, want)
		}
	}
	if _, err := dbsemprotocol.MySQLURL("root@unix(/run/mysqld.sock)/test"); err == nil {
		t.Error("a unix socket has no mysql:// URL")
	}
}

// loaded is an implementation's processes with a minute to answer init: a
// Python process took more than the protocol's 10 s to start and reach
// MariaDB beside the whole suite with two busy loops.
func loaded(cmd string) *dbsemprotocol.Processes {
	li := dbsemprotocol.NewProcesses(cmd)
	li.InitTimeout = time.Minute
	return li
}

// Preflight passes both implementations, and says why one cannot start.
func TestLeasePreflight(t *testing.T) {
	quick.Skip(t, "processes")
	t.Parallel()
	dsn, db := leaseDB(t)
	in := dbsemrun.Session{DSN: dsn, Prefix: leasePrefix(t, db), Max: 1, TTL: time.Second, Fencing: true}
	for _, impl := range leaseImpls(t) {
		t.Run(impl.name, func(t *testing.T) {
			t.Parallel()
			if err := loaded(impl.cmd).Preflight(context.Background(), in); err != nil {
				t.Fatal(err)
			}
			bad := in
			bad.DSN = "root@tcp(127.0.0.1:1)/test"
			err := loaded(impl.cmd).Preflight(context.Background(), bad)
			if err == nil || !strings.HasPrefix(err.Error(), "probe could not reach the database: database: ") {
				t.Fatalf("a database out of reach: %v", err)
			}
		})
	}
	err := dbsemprotocol.NewProcesses(`echo "no config" >&2; exit 3`).Preflight(context.Background(), in)
	if err == nil || !strings.Contains(err.Error(), "probe did not start: exited (exit status 3)") {
		t.Fatalf("%v", err)
	}
}

// exchange sends lines to an implementation (a command, or ServeLease in
// this process) on its stdin, closes it, and returns its replies; the
// process must exit 0 at the end of its input.
func exchange(t *testing.T, cmd string, lines ...string) []map[string]any {
	t.Helper()
	input := strings.Join(lines, "\n") + "\n"
	var out bytes.Buffer
	if cmd == "" {
		if err := dbsemprotocol.Serve(strings.NewReader(input), &out, dbsemprotocol.ServeOptions{}); err != nil {
			t.Fatal(err)
		}
	} else {
		c := exec.Command("/bin/sh", "-c", cmd)
		c.Stdin, c.Stdout = strings.NewReader(input), &out
		var stderr bytes.Buffer
		c.Stderr = &stderr
		if err := c.Run(); err != nil {
			t.Fatalf("%s: %v\n%s", cmd, err, stderr.String())
		}
	}
	var replies []map[string]any
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("reply %q: %v", sc.Text(), err)
		}
		replies = append(replies, m)
	}
	return replies
}

// leaseInitLine is an init request.
func leaseInitLine(dsn, prefix string, edit func(map[string]any)) string {
	m := map[string]any{"id": 1, "type": "init", "client": "c1", "lock": "db-semaphore", "name": "k", "dsn": dsn,
		"prefix": prefix, "max": 1, "ttl_ms": 1000, "design": "master-row", "fencing": false}
	if u, err := dbsemprotocol.MySQLURL(dsn); err == nil {
		m["url"] = u
	}
	if edit != nil {
		edit(m)
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// want checks a reply's type, code and definite.
func want(t *testing.T, what string, got map[string]any, typ, code string, definite bool) {
	t.Helper()
	d, _ := got["definite"].(bool)
	c, _ := got["code"].(string)
	if got["type"] != typ || c != code || d != definite {
		t.Errorf("%s: %v; want type %s, code %q, definite %v", what, got, typ, code, definite)
	}
}

// Requests that cannot be served get the protocol's errors, from both
// implementations: before init, malformed, of unknown types, of another
// lock kind; a database out of reach at init is not definite.
func TestLeaseRequestErrors(t *testing.T) {
	t.Parallel()
	unreachable := "root@tcp(127.0.0.1:1)/test"
	impls := []struct{ name, cmd string }{{"ServeLease", ""}}
	if exec.Command("/usr/bin/python3", "-c", "import pymysql").Run() == nil {
		impls = append(impls, struct{ name, cmd string }{"python", pythonLease(t)})
	}
	for _, impl := range impls {
		t.Run(impl.name, func(t *testing.T) {
			t.Parallel()
			r := exchange(t, impl.cmd,
				`{"id":1,"type":"acquire","max":1,"ttl_ms":1000}`,
				`not JSON`,
				leaseInitLine(unreachable, "p_", func(m map[string]any) { m["id"] = 2; m["lock"] = "mutex" }),
				leaseInitLine(unreachable, "p_", func(m map[string]any) { m["id"] = 3; m["design"] = "sideways" }),
				leaseInitLine(unreachable, "p_", func(m map[string]any) { m["id"] = 4; delete(m, "name") }),
				leaseInitLine(unreachable, "p_", func(m map[string]any) { m["id"] = 5 }),
			)
			if len(r) != 6 {
				t.Fatalf("%d replies: %v", len(r), r)
			}
			want(t, "acquire before init", r[0], "error", "not initialised", true)
			want(t, "not JSON", r[1], "error", "bad request", true)
			if r[1]["id"] != 0.0 {
				t.Errorf("not JSON answered with id %v, want 0", r[1]["id"])
			}
			want(t, "another lock kind", r[2], "error", "unsupported", true)
			want(t, "another design", r[3], "error", "unsupported", true)
			want(t, "init without a name", r[4], "error", "bad request", true)
			want(t, "init with the database out of reach", r[5], "error", "database", false)
			for i, m := range r {
				if i > 1 && m["id"] != float64(i) {
					t.Errorf("reply %d has id %v", i, m["id"])
				}
			}
		})
	}
	t.Run("ServeLease refuses a defect its design cannot have", func(t *testing.T) {
		t.Parallel()
		var out bytes.Buffer
		o := dbsemprotocol.ServeOptions{Defects: dbsem.Defects{NoSkipLocked: true}}
		if err := dbsemprotocol.Serve(strings.NewReader(leaseInitLine(unreachable, "p_", nil)+"\n"), &out, o); err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		json.Unmarshal(out.Bytes(), &m)
		want(t, "init", m, "error", "unsupported", true)
		if !strings.Contains(fmt.Sprint(m["text"]), "NoSkipLocked needs design row-per-slot") {
			t.Errorf("%v", m)
		}
	})
}

// With a database: unknown request types and malformed operations.
func TestLeaseRequestErrorsAfterInit(t *testing.T) {
	t.Parallel()
	dsn, db := leaseDB(t)
	prefix := leasePrefix(t, db)
	impls := []struct{ name, cmd string }{{"ServeLease", ""}}
	if exec.Command("/usr/bin/python3", "-c", "import pymysql").Run() == nil {
		impls = append(impls, struct{ name, cmd string }{"python", pythonLease(t)})
	}
	for _, impl := range impls {
		t.Run(impl.name, func(t *testing.T) {
			t.Parallel()
			r := exchange(t, impl.cmd,
				leaseInitLine(dsn, prefix, nil),
				`{"id":2,"type":"frobnicate"}`,
				`{"id":3,"type":"acquire","ttl_ms":1000}`,
				`{"id":4,"type":"refresh","token":"","ttl_ms":1000}`,
				`{"id":5,"type":"release"}`,
				`{"id":6,"type":"acquire","max":1,"ttl_ms":0}`,
				leaseInitLine(dsn, prefix, func(m map[string]any) { m["id"] = 7 }),
				`{"id":8,"type":"release","token":"never-granted"}`,
			)
			if len(r) != 8 {
				t.Fatalf("%d replies: %v", len(r), r)
			}
			if r[0]["type"] != "init_ok" {
				t.Fatalf("init: %v", r[0])
			}
			want(t, "an unknown type", r[1], "error", "unsupported", true)
			want(t, "acquire without max", r[2], "error", "bad request", true)
			want(t, "refresh with an empty token", r[3], "error", "bad request", true)
			want(t, "release without a token", r[4], "error", "bad request", true)
			want(t, "acquire with ttl 0", r[5], "error", "bad request", true)
			want(t, "a second init", r[6], "error", "bad request", true)
			if r[7]["type"] != "release_fail" || r[7]["reason"] != "expired" {
				t.Errorf("release of a token never granted: %v", r[7])
			}
		})
	}
}

// lockprover is the binary built for these tests, whose serve-reference
// --kind db-semaphore puts the reference (and its mutants) behind the
// protocol.
var lockprover string

func TestMain(m *testing.M) { processtest.Main(m, &lockprover) }

// pythonExample is the folder of the Python example implementations.
var pythonExample = filepath.Join("..", "..", "..", "examples", "python")
