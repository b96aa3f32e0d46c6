// Package redis runs private redis-server instances for tests and prover
// runs: a server of the caller's own on a free port of 127.0.0.1, with its
// own directory, that can be stopped, restarted (after a delay), killed
// without warning and made to live through a jump of its clock, none of
// which may be done to a shared server. StartN starts several for a quorum.
//
// It drives /usr/bin/redis-server (Debian's 7.0) through its command line
// and speaks just enough RESP to see that a server answers and to run the
// clock jump's script; clients use a real client library. Given a version
// of a Debian release's root (Options.Version: Redis 8, Valkey), it runs
// that release's redis-server or valkey-server from the root instead
// (package adapters/servers/versions), every fault alike.
package redis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/lockprover/lockprover/adapters/host/proc"
	"github.com/lockprover/lockprover/adapters/servers/versions"
)

// ErrNoRedis is returned (wrapped) by Start and StartN when this machine
// has no redis-server: tests skip on it.
var ErrNoRedis = errors.New("redis: no redis-server on this machine (Debian: apt-get install redis-server)")

// Persistence is what a server keeps across a restart or a crash.
type Persistence int

const (
	// None keeps nothing (--save '' --appendonly no): a restart, clean or
	// not, comes back empty, forgetting every lock. The default, and what
	// most deployments of Redlock run.
	None Persistence = iota
	// Always appends every write to the append-only file and fsyncs it
	// before replying (--appendonly yes --appendfsync always): a write a
	// client saw acknowledged survives a restart and a SIGKILL, keys
	// keeping their absolute expiry times. antirez's answer to Kleppmann's
	// crash without fsync.
	Always
)

// String names the persistence as the prover's options do.
func (p Persistence) String() string {
	switch p {
	case None:
		return "none"
	case Always:
		return "fsync-always"
	}
	return fmt.Sprintf("Persistence(%d)", int(p))
}

// args are redis-server's options for p.
func (p Persistence) args() []string {
	if p == Always {
		return []string{"--save", "", "--appendonly", "yes", "--appendfsync", "always"}
	}
	return []string{"--save", "", "--appendonly", "no"}
}

// Options are a private server's settings. The zero value is a server
// without persistence.
type Options struct {
	Persistence Persistence
	// Bin is the redis-server binary; "" searches $PATH and then
	// /usr/bin, /usr/local/bin and /usr/sbin.
	Bin string
	// Version, when it is a version of a Debian release's root (Redis
	// 8.0.6, Valkey 9.1.2: see versions.Version.Rooted), is what runs,
	// instead of Bin: that release's redis-server or valkey-server, from
	// the root (made first if need be: minutes, once per machine), as
	// the root's user of the server's name, in PID and mount namespaces
	// of its own, its directory bound at /lockprover, its log written to
	// its output. The zero value, or the machine's own version, runs Bin.
	Version versions.Version
}

// A Server is a private redis-server: a process of the caller's own
// listening on 127.0.0.1 at a port that stays the same across restarts,
// its files (append-only file, log) under its own directory. Its methods
// are safe for concurrent use.
//
// Its Restart stops it if it runs (SIGTERM: Redis closes every connection
// and, with persistence, fsyncs its append-only file) and starts it again
// on the same port and directory after the downtime, returning once it
// answers. A downtime longer than the longest lease is antirez's "delayed
// restart": whatever the server forgot has expired by the time it is back.
// After Kill, Restart brings the server back. Without persistence it comes
// back empty; with Always it comes back with every acknowledged write,
// keys that expired while it was down gone. Clients see their connections
// close, and dialling fail ("connection refused") while it is down. Its
// Crash is Kill, the downtime, and a start.
type Server struct {
	proc.Daemon // LogPath, PID, Restart, Crash, Stop

	bin  string
	dir  string
	port int
	o    Options

	proc proc.Proc // redis-server, its outputs appended to its log
	// run is the server's run from its version's root; nil for the
	// machine's own redis-server.
	run *versions.Run
}

// binary is where a redis-server is found when the options name none.
var binary = proc.Binary{Names: []string{"redis-server"}, Dirs: []string{"/usr/bin", "/usr/local/bin", "/usr/sbin"}, None: ErrNoRedis}

// Start starts a private redis-server whose files live in dir (created if
// need be; the caller owns and removes it, such as a test's t.TempDir()):
// its log dir/redis.log and, with persistence, its append-only files. It
// listens on 127.0.0.1 on a free port, and Start returns once it answers
// PING. The caller must Stop it; on Linux it is also killed if the calling
// process dies, so that none is left behind.
//
// With a version of a root (o.Version), the server is that version's,
// run from the root: dir is given to the root's user of the server's
// name (redis, valkey). An error that says the root cannot be had
// matches debroot.ErrUnavailable.
func Start(ctx context.Context, dir string, o Options) (*Server, error) {
	if o.Persistence != None && o.Persistence != Always {
		return nil, fmt.Errorf("redis: unknown persistence %d", int(o.Persistence))
	}
	bin := o.Bin
	switch {
	case o.Version.Rooted():
		if o.Version.Server != "redis" && o.Version.Server != "valkey" {
			return nil, fmt.Errorf("redis: %s is not a version of Redis or Valkey", o.Version)
		}
		bin = "/usr/bin/" + o.Version.Server + "-server"
	case bin != "":
		if _, err := os.Stat(bin); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrNoRedis, err)
		}
	}
	bin, dir, err := binary.Prepare(bin, dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("redis: private server: %w", err)
	}
	var run *versions.Run
	if o.Version.Rooted() {
		if run, err = o.Version.Prepare(ctx, dir, o.Version.Server, "", nil, nil); err != nil {
			return nil, fmt.Errorf("redis: private %s-server %s: %w", o.Version.Server, o.Version.Name, err)
		}
	}
	var s *Server
	err = proc.Retry(func() error {
		ports, err := proc.FreePorts(1, false)
		if err != nil {
			return fmt.Errorf("redis: private server: free port: %w", err)
		}
		s = &Server{bin: bin, dir: dir, o: o, port: ports[0], run: run}
		s.proc = proc.Proc{Name: "redis: private server", Log: s.logFile(), Port: s.port, Hold: ports}
		if run != nil {
			s.proc.Name = fmt.Sprintf("redis: private %s-server %s", o.Version.Server, o.Version.Name)
			s.proc.Command = run.Launcher()
		}
		s.Daemon = proc.NewDaemon(&s.proc, s.start, proc.How{})
		if err := s.start(ctx); err != nil {
			s.Stop()
			return err
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// StartN starts n private servers (Start) at once, the i-th in dir/<i>
// (from 1), for a quorum. On error it stops those it started.
func StartN(ctx context.Context, dir string, n int, o Options) ([]*Server, error) {
	if n < 1 {
		return nil, fmt.Errorf("redis: %d servers: need at least one", n)
	}
	ss := make([]*Server, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ss[i], errs[i] = Start(ctx, filepath.Join(dir, strconv.Itoa(i+1)), o)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, s := range ss {
			if s != nil {
				s.Stop()
			}
		}
		if errors.Is(err, ErrNoRedis) {
			return nil, ErrNoRedis
		}
		return nil, err
	}
	return ss, nil
}

// StopAll stops every server of ss, returning the first error.
func StopAll(ss []*Server) error {
	var first error
	for _, s := range ss {
		if err := s.Stop(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Addrs are the servers' addresses, in order.
func Addrs(ss []*Server) []string {
	a := make([]string, len(ss))
	for i, s := range ss {
		a[i] = s.Addr()
	}
	return a
}

// start starts redis-server and waits until it answers PING.
func (s *Server) start(ctx context.Context) error {
	dir, log := s.dir, s.logFile()
	if s.run != nil {
		// The root's user writes in its directory, seen at /lockprover,
		// and logs to its output, which goes to the log.
		dir, log = s.run.In(s.dir), ""
	}
	args := append([]string{"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--dir", dir, "--logfile", log, "--daemonize", "no", "--databases", "1"},
		s.o.Persistence.args()...)
	return s.proc.Launch(ctx, s.bin, args, "on "+s.Addr(), func(ctx context.Context) error {
		c, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		r, err := s.Do(c, "PING")
		if err == nil && r != "PONG" {
			err = fmt.Errorf("PING answered %v", r)
		}
		return err
	})
}

// Addr is the server's host:port (on 127.0.0.1), the same across restarts.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Dir is the server's directory.
func (s *Server) Dir() string { return s.dir }

// Persistence is what the server keeps across restarts.
func (s *Server) Persistence() Persistence { return s.o.Persistence }

func (s *Server) logFile() string { return filepath.Join(s.dir, "redis.log") }

// Kill kills the server (SIGKILL: no shutdown, no last fsync, connections
// reset) and waits until its process is gone; it stays down until Restart.
// Killing a server that is down does nothing.
func (s *Server) Kill() error {
	return s.proc.Halt(syscall.SIGKILL, 30*time.Second)
}

// Pause stops the server's process (SIGSTOP) without closing anything:
// connections stay open and commands wait, unanswered, as behind a stalled
// machine, until Resume. Redis's clock runs on meanwhile, so keys whose
// deadline passes during the pause are expired as soon as it resumes.
func (s *Server) Pause() error { return s.proc.Signal(syscall.SIGSTOP) }

// Resume continues a paused server (SIGCONT).
func (s *Server) Resume() error { return s.proc.Signal(syscall.SIGCONT) }
