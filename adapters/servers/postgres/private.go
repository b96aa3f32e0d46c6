package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lockprover/lockprover/adapters/host/proc"
	"github.com/lockprover/lockprover/adapters/servers/versions"
)

// ErrNoServer is returned (wrapped) by StartPrivate when this machine has
// no PostgreSQL server binaries (postgres and initdb): tests skip on it.
var ErrNoServer = errors.New("postgres: no postgres and initdb binaries on this machine " +
	"(install Debian's postgresql, or put a PostgreSQL bin directory on $PATH)")

// ErrNoUser is returned (wrapped) by StartPrivate when it runs as root and
// there is no user "postgres" to run the server as (PostgreSQL refuses to
// run as root): tests skip on it.
var ErrNoUser = errors.New(`postgres: running as root and no user "postgres" to run the server as`)

// A Server is a private PostgreSQL server: a postgres process of the
// caller's own, with its own data directory, port and socket directory,
// for the faults that must not touch a shared server (restarts, crashes,
// sessions terminated). Its superuser "postgres" connects over TCP to
// 127.0.0.1 without a password (trust), to database "postgres".
// Its methods are safe for concurrent use.
//
// Its Restart stops it with a fast shutdown (SIGINT: every session is
// terminated, its advisory locks with it, and the server checkpoints) and
// starts it again on the same port and data directory after the downtime,
// returning once it answers: clients read "terminating connection due to
// administrator command" (SQLSTATE 57P01), or find their connection
// closed, and dialling fails ("connection refused") while it is down. Its
// Crash stops it with an immediate shutdown (SIGQUIT: every process quits
// at once, no checkpoint; the next start recovers from the WAL) and starts
// it again: a SIGKILL of the postmaster alone would leave its backends
// running, attached to its shared memory, and the next start refusing to
// run beside them. Its PID is the postmaster's.
type Server struct {
	proc.Daemon // LogPath, PID, Restart, Crash; its Stop is its own

	bin    string // postgres
	dir    string // the caller's directory: the log
	own    string // the server's own directory (data, socket); removed by Stop
	data   string
	socket string // the Unix socket's directory
	port   int

	version versions.Version
	run     *versions.Run // a version from a root: how its programs run; nil for the machine's own
	proc    *proc.Proc    // postgres, its outputs appended to dir/postgres.log
}

// binDirs are where the PostgreSQL binaries are searched after $PATH:
// Debian keeps them out of it, under /usr/lib/postgresql/<major>/bin.
func binDirs() []string {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	// The newest major first: "15" sorts after "9.6" only by number.
	sort.Slice(dirs, func(i, j int) bool { return major(dirs[i]) > major(dirs[j]) })
	return append(dirs, "/usr/local/pgsql/bin", "/usr/pgsql/bin")
}

func major(dir string) float64 {
	f, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(dir)), 64)
	return f
}

// findBins returns the paths of postgres and initdb, from one directory.
func findBins() (server, initdb string) {
	if p, err := exec.LookPath("postgres"); err == nil {
		if i, err := exec.LookPath("initdb"); err == nil {
			return p, i
		}
	}
	for _, d := range binDirs() {
		p, i := filepath.Join(d, "postgres"), filepath.Join(d, "initdb")
		if proc.Executable(p) && proc.Executable(i) {
			return p, i
		}
	}
	return "", ""
}

// serverOptions are the settings every start passes: TCP on 127.0.0.1
// only, small memory, no durability waits (fsync off: a Crash kills the
// server, not the machine, so what it wrote is still in the kernel's
// cache), no background statistics or autovacuum (quicker starts and
// stops), and logs on stderr (the log file).
var serverOptions = []string{
	"-c", "listen_addresses=127.0.0.1",
	"-c", "shared_buffers=16MB",
	"-c", "max_connections=60",
	"-c", "fsync=off",
	"-c", "synchronous_commit=off",
	"-c", "full_page_writes=off",
	"-c", "autovacuum=off",
	"-c", "logging_collector=off",
	"-c", "log_min_messages=warning",
}

// StartPrivate starts a private PostgreSQL server, the machine's own
// (StartVersion of the default version). Its log is
// dir/postgres.log (dir is the caller's, such as a test's t.TempDir(),
// and outlives the server, for a post-mortem); its data directory and
// socket directory are in a temporary directory of the server's own,
// which Stop removes (and StartPrivate, when it fails): as root, the
// server runs as user postgres, which must own its data and may not be
// able to reach dir. The data directory is initialised with initdb
// (about 1.5 s on a busy 2-CPU machine), and the server listens on
// 127.0.0.1 on a free port; StartPrivate returns once it answers.
// The caller must Stop it. On Linux the server is also killed if the
// calling process dies, so that none is left running.
func StartPrivate(ctx context.Context, dir string) (*Server, error) {
	bin, initdb := findBins()
	if bin == "" {
		return nil, ErrNoServer
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		if cred, err = postgresUser(); err != nil {
			return nil, err
		}
	}
	own, err := os.MkdirTemp("", "lockprover-pg-")
	if err != nil {
		return nil, fmt.Errorf("postgres: private server: %w", err)
	}
	s := &Server{bin: bin, dir: dir, own: own, data: filepath.Join(own, "data"), socket: own}
	s.version, _ = versions.Lookup("postgresql", "")
	s.proc = &proc.Proc{Name: "postgres: private server", Log: filepath.Join(dir, "postgres.log"), Cred: cred}
	s.Daemon = proc.NewDaemon(s.proc, s.start, how)
	if cred != nil {
		if err := os.Chown(own, int(cred.Uid), int(cred.Gid)); err != nil {
			s.removeOwn()
			return nil, fmt.Errorf("postgres: private server: %w", err)
		}
	}
	if err := s.initialise(ctx, initdb, cred); err != nil {
		s.removeOwn()
		return nil, err
	}
	if err := s.firstStart(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// StartVersion starts a private PostgreSQL server of version v (one of
// versions.Of("postgresql")), as StartPrivate does: the machine's own for
// its default, or else initdb and postgres from /usr/lib/postgresql/N/bin
// in the root of v's Debian release (made first if need be, which log
// hears of; an error matching debroot.ErrUnavailable says what cannot be
// had), as the root's user postgres, the data directory and the Unix
// socket under /lockprover, bound to the server's own directory. Nothing
// of it outlives Stop: no process, no mount, no directory.
func StartVersion(ctx context.Context, dir string, v versions.Version, log io.Writer) (*Server, error) {
	if v.Server != "postgresql" {
		return nil, fmt.Errorf("postgres: private server of %s: not a PostgreSQL version", v)
	}
	if !v.Rooted() {
		return StartPrivate(ctx, dir)
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	own, err := os.MkdirTemp("", "lockprover-pg-")
	if err != nil {
		return nil, fmt.Errorf("postgres: private server: %w", err)
	}
	s := &Server{dir: dir, own: own, data: filepath.Join(own, "data"), socket: own, version: v}
	run, err := v.Prepare(ctx, own, "postgres", "", nil, log)
	if err != nil {
		s.removeOwn()
		return nil, fmt.Errorf("postgres: private server of %s: %w", v, err)
	}
	bindir := "/usr/lib/postgresql/" + v.Name + "/bin"
	s.run, s.bin = run, bindir+"/postgres"
	s.proc = &proc.Proc{Name: "postgres: private server " + v.Name, Log: filepath.Join(dir, "postgres.log"), Command: run.Launcher()}
	s.Daemon = proc.NewDaemon(s.proc, s.start, how)
	if err := s.initialise(ctx, bindir+"/initdb", nil); err != nil {
		s.removeOwn()
		return nil, err
	}
	if err := s.firstStart(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// firstStart starts the initialised server on a free port (another, if
// somebody took the one drawn), stopping it and removing its directory
// if it cannot.
func (s *Server) firstStart(ctx context.Context) error {
	err := proc.Retry(func() error {
		ports, err := proc.FreePorts(1, false)
		if err != nil {
			return fmt.Errorf("postgres: private server: free port: %w", err)
		}
		s.port = ports[0]
		s.proc.Port, s.proc.Hold = s.port, ports
		if err := s.start(ctx); err != nil {
			s.proc.Halt(syscall.SIGQUIT, 30*time.Second)
			proc.ReleasePorts(ports...)
			return err
		}
		return nil
	})
	if err != nil {
		s.Stop()
	}
	return err
}

// postgresUser is the credential of user postgres, for a server started
// by root.
func postgresUser() (*syscall.Credential, error) {
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoUser, err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("%w: uid %q, gid %q", ErrNoUser, u.Uid, u.Gid)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// initialise runs initdb: superuser postgres, trust authentication (the
// server listens on 127.0.0.1 only), UTF-8, no locale.
func (s *Server) initialise(ctx context.Context, initdb string, cred *syscall.Credential) error {
	argv := []string{initdb, "-D", s.in(s.data), "-U", "postgres", "--auth=trust",
		"--encoding=UTF8", "--no-locale", "--no-sync", "--no-instructions"}
	var cmd *exec.Cmd
	if s.run != nil {
		var err error
		if cmd, err = s.run.Command(ctx, argv...); err != nil {
			return fmt.Errorf("postgres: private server: initdb: %w", err)
		}
	} else {
		cmd = exec.CommandContext(ctx, argv[0], argv[1:]...)
		if cred != nil {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		}
		cmd.Dir = s.own
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("postgres: private server: initdb: %w\n%s", err, tail(out.Bytes()))
	}
	return nil
}

// start starts postgres and waits until it answers.
func (s *Server) start(ctx context.Context) error {
	args := append([]string{"-D", s.in(s.data), "-p", strconv.Itoa(s.port), "-k", s.in(s.socket)}, serverOptions...)
	return s.proc.Launch(ctx, s.bin, args, "on "+s.Addr(), func(ctx context.Context) error {
		c, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		conn, err := pgx.Connect(c, s.URL())
		if err != nil {
			return err
		}
		return conn.Close(c)
	})
}

// in is path (under the server's own directory) as the server sees it:
// under /lockprover when it runs from a root.
func (s *Server) in(path string) string {
	if s.run == nil {
		return path
	}
	return s.run.In(path)
}

// Version is the server's version, as adapters/servers/versions names it
// ("postgresql 18").
func (s *Server) Version() versions.Version { return s.version }

// Addr is the server's host:port (on 127.0.0.1), the same across restarts.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// URL is a connection URL for the server's superuser on database postgres,
// over TCP, without TLS.
func (s *Server) URL() string { return URL(s.Addr()) }

// URL is a connection URL for user postgres on database postgres at addr
// (host:port: a private server's, or a Proxy's in front of it), over TCP,
// without TLS, with a 2 s connect timeout.
func URL(addr string) string {
	return "postgres://postgres@" + addr + "/postgres?sslmode=disable&connect_timeout=2"
}

// how is how a private server ends: a fast shutdown to restart and stop,
// an immediate one to crash, and PID the postmaster's.
var how = proc.How{Restart: syscall.SIGINT, Crash: syscall.SIGQUIT, Grace: 60 * time.Second, Program: true}

// Stop stops the server for good (fast shutdown, SIGKILL if it has not
// exited 30 s later), waits for it to be gone, and removes its data
// directory. It leaves dir (the log) to the caller. Stopping a stopped
// server does nothing.
func (s *Server) Stop() error {
	err := s.Daemon.Stop()
	s.removeOwn()
	return err
}

func (s *Server) removeOwn() {
	if s.own != "" {
		os.RemoveAll(s.own)
	}
}

// Dir is the server's own directory (its data directory and socket), which
// Stop removes.
func (s *Server) Dir() string { return s.own }

func tail(b []byte) string {
	const n = 2000
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// StartTemp starts a private server (StartPrivate) with its log in a
// temporary directory of its own, which the returned stop removes once the
// server has stopped: for a command's run, which has no test directory.
func StartTemp(ctx context.Context) (s *Server, stop func(), err error) {
	return proc.Temp("lockprover-postgres-", func(dir string) (*Server, error) { return StartPrivate(ctx, dir) })
}

// StartTempVersion is StartTemp of version v (StartVersion; log hears of
// a root being made).
func StartTempVersion(ctx context.Context, v versions.Version, log io.Writer) (s *Server, stop func(), err error) {
	return proc.Temp("lockprover-postgres-", func(dir string) (*Server, error) { return StartVersion(ctx, dir, v, log) })
}
