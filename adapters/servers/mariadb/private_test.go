package mariadb

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	driver "github.com/go-sql-driver/mysql"

	"github.com/lockprover/lockprover/model/dbsem"
)

// startPrivate starts a private server in the test's directory, stopped
// when the test ends; it skips the test without the binaries.
func startPrivate(t *testing.T) *Server {
	t.Helper()
	start := time.Now()
	// A bound for a wedged server, not a measure: mariadb-install-db and
	// the first start took longer than ctx's 20 s beside a loaded suite
	// (the fourteenth clean clone: "mariadb-install-db: signal: killed").
	x, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	s, err := StartPrivate(x, t.TempDir())
	if errors.Is(err, ErrNoServer) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("initialised and started in %v (pid %d, %s)", time.Since(start).Round(time.Millisecond), s.PID(), s.Addr())
	t.Cleanup(func() { s.Stop() })
	return s
}

// gone reports whether no process has the pid any more (or a zombie
// that is not ours: our own are reaped by Wait).
func gone(pid int) bool {
	err := syscall.Kill(pid, 0)
	return errors.Is(err, syscall.ESRCH)
}

// serversUnder lists the pids of mariadbd processes whose command line
// names dir.
func serversUnder(dir string) []int {
	out, _ := exec.Command("pgrep", "-f", "--", "--datadir="+dir).Output()
	var pids []int
	for _, f := range strings.Fields(string(out)) {
		if n, err := strconv.Atoi(f); err == nil {
			pids = append(pids, n)
		}
	}
	return pids
}

func TestPrivateServerRestartCrashStop(t *testing.T) {
	restartCrashStop(t, startPrivate(t))
}

// restartCrashStop holds a lease and a session across a restart (the
// session ends, the lease stays), a committed lease across a crash, and
// stops s, which leaves no process behind and starts no more.
func restartCrashStop(t *testing.T, s *Server) {
	// A bound for a wedged server, not a measure: a restart and a crash
	// recovery each took 6 s and more beside a loaded suite, and 20 s
	// for both (ctx's) once ran out while 11.8's crash recovery was
	// nearly done.
	x, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cfg, err := driver.ParseDSN(s.DSN())
	if err != nil {
		t.Fatal(err)
	}
	cfg.Timeout = time.Second
	db := openCfg(cfg)
	defer db.Close()

	// A lease through a proxy in front of the private server.
	p, err := Listen(s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	viaProxy := openCfg(p.Config(cfg))
	defer viaProxy.Close()
	sem, err := dbsem.Open(x, viaProxy, dbsem.Options{Prefix: "private_"})
	if err != nil {
		t.Fatal(err)
	}
	lease, err := sem.Acquire(x, "k", time.Minute, 1)
	if err != nil {
		t.Fatal(err)
	}
	held := session(t, viaProxy) // a session open across the restart
	if err := held.PingContext(x); err != nil {
		t.Fatal(err)
	}

	pid := s.PID()
	start := time.Now()
	if err := s.Restart(x, 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	t.Logf("restarted (SIGTERM, 200 ms down, start) in %v", time.Since(start).Round(time.Millisecond))
	if !gone(pid) || s.PID() == 0 || s.PID() == pid {
		t.Fatalf("old pid %d gone %v, new pid %d", pid, gone(pid), s.PID())
	}
	if err := held.PingContext(x); err == nil {
		t.Fatal("a session survived the restart")
	}
	for deadline := time.Now().Add(5 * time.Second); len(p.ConnectionIDs()) != 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the proxy still has connections %v to the old server", p.ConnectionIDs())
		}
	}
	// The lease survived: the server is the same, its data too.
	if _, err := sem.Acquire(x, "k", time.Minute, 1); !errors.Is(err, dbsem.ErrFull) {
		t.Fatalf("acquire after the restart: %v, want ErrFull", err)
	}
	if err := sem.Release(x, "k", lease.Token); err != nil {
		t.Fatal(err)
	}
	// A committed lease survives a crash too.
	if lease, err = sem.Acquire(x, "k", time.Minute, 1); err != nil {
		t.Fatal(err)
	}
	pid = s.PID()
	start = time.Now()
	if err := s.Crash(x, 0); err != nil {
		t.Fatal(err)
	}
	t.Logf("crashed (SIGKILL) and started in %v", time.Since(start).Round(time.Millisecond))
	if !gone(pid) {
		t.Fatalf("pid %d still there after Crash", pid)
	}
	if err := sem.Release(x, "k", lease.Token); err != nil {
		t.Fatalf("release after the crash: %v", err)
	}
	var n int
	if err := db.QueryRowContext(x, "SELECT COUNT(*) FROM private_tokens").Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d token rows, %v", n, err)
	}

	pid = s.PID()
	start = time.Now()
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	t.Logf("stopped in %v", time.Since(start).Round(time.Millisecond))
	if !gone(pid) || s.PID() != 0 {
		t.Fatalf("pid %d: gone %v after Stop; PID() = %d", pid, gone(pid), s.PID())
	}
	if left := left(s); len(left) != 0 {
		t.Fatalf("processes left on the data directory: %v", left)
	}
	if err := s.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if err := s.Restart(x, 0); err == nil {
		t.Fatal("Restart of a stopped server succeeded")
	}
	if s.PID() != 0 {
		t.Fatal("a stopped server restarted")
	}
	c, cancel := context.WithTimeout(x, time.Second)
	defer cancel()
	if err := db.PingContext(c); err == nil {
		t.Fatal("the stopped server answers")
	}
}

// left lists the processes of s left after Stop: mariadbd processes on
// its data directory, or, for a server from a root, whatever still names
// the directory the root's run binds (the run's init does).
func left(s *Server) []int {
	if s.run == nil {
		return serversUnder(s.datadir)
	}
	var pids []int
	ds, _ := os.ReadDir("/proc")
	for _, d := range ds {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		if b, _ := os.ReadFile("/proc/" + d.Name() + "/cmdline"); strings.Contains(string(b), s.run.Data) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// A second StartPrivate on the same directory reuses the data directory.
func TestPrivateServerReusesDataDir(t *testing.T) {
	dir := t.TempDir()
	// An install and two starts: a bound for a wedged server, as
	// startPrivate's. ctx's 20 s ran out beside a loaded suite (the
	// fourteenth session's run 2 at b1e653a: the second start not ready).
	x, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	s, err := StartPrivate(x, dir)
	if errors.Is(err, ErrNoServer) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	db, err := sql.Open("mysql", s.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(x, "CREATE TABLE kept (k INT PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	s.Stop()
	start := time.Now()
	s2, err := StartPrivate(x, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Stop()
	t.Logf("started on an existing data directory in %v", time.Since(start).Round(time.Millisecond))
	db2, err := sql.Open("mysql", s2.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	if _, err := db2.ExecContext(x, "SELECT * FROM kept"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir + "/error.log"); err != nil {
		t.Fatal(err)
	}
}

// A mariadb-install-db whose bootstrap server crashes is run once more on
// an emptied data directory, the crash kept in the error log; one that
// refuses, or crashes twice, is not run again.
func TestInitialiseTriesACrashOnce(t *testing.T) {
	for _, tc := range []struct {
		name   string
		script string // run with the data directory's parent as $D
		runs   string // how many times it ran
		ok     bool
	}{
		{"crash then ok", `n=$(cat "$D/runs" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "$D/runs"
if [ $n = 1 ]; then mkdir -p "$D/data"; touch "$D/data/half"; echo "Segmentation fault"; exit 1; fi
test -e "$D/data/half" && exit 3; mkdir -p "$D/data/mysql"`, "2", true},
		{"refused", `n=$(cat "$D/runs" 2>/dev/null || echo 0); echo $((n+1)) > "$D/runs"; echo "unknown option"; exit 1`, "1", false},
		{"crash twice", `n=$(cat "$D/runs" 2>/dev/null || echo 0); echo $((n+1)) > "$D/runs"; echo "Aborted"; exit 1`, "2", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			install := dir + "/install"
			if err := os.WriteFile(install, []byte("#!/bin/sh\nD="+dir+"\n"+tc.script+"\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			s := &Server{dir: dir, datadir: dir + "/data", errLog: dir + "/error.log"}
			err := s.initialise(context.Background(), install)
			if (err == nil) != tc.ok {
				t.Fatalf("initialise: %v, want ok %v", err, tc.ok)
			}
			runs, _ := os.ReadFile(dir + "/runs")
			if got := strings.TrimSpace(string(runs)); got != tc.runs {
				t.Errorf("install ran %s times, want %s", got, tc.runs)
			}
			log, _ := os.ReadFile(s.errLog)
			if crashed := strings.Contains(string(log), "its bootstrap crashed"); crashed != (tc.runs == "2") {
				t.Errorf("error log %q: a crash noted %v, want %v", log, crashed, tc.runs == "2")
			}
		})
	}
}
