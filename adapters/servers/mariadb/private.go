package mariadb

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	driver "github.com/go-sql-driver/mysql"
	"github.com/lockprover/lockprover/adapters/host/proc"
	"github.com/lockprover/lockprover/adapters/servers/versions"
)

// ErrNoServer is returned (wrapped) by StartPrivate when this machine has
// no MariaDB (or MySQL) server binary or no script to initialise a data
// directory: tests skip on it.
var ErrNoServer = errors.New("mysql: no mariadbd/mysqld or mariadb-install-db/mysql_install_db on this machine")

// A Server is a private MariaDB server: a mariadbd process of the caller's
// own, with its own data directory, port and socket, for the faults that
// must not touch a shared server (restarts, crashes). Its root user has no
// password and may connect from 127.0.0.1; its database "test" exists.
// Its methods are safe for concurrent use.
//
// Its Restart stops it cleanly (SIGTERM: it rolls back open transactions,
// closes every connection and flushes InnoDB) and starts it again on the
// same port and data directory after the downtime, returning once it
// answers: clients see their connections close ("invalid connection", or
// "Server shutdown in progress" for a statement under way) and dialling
// fail ("connection refused") while it is down; committed data survives.
// Its Crash kills it (SIGKILL: no shutdown, connections reset) and starts
// it again: InnoDB recovers, committed transactions survive, open ones
// are rolled back. Its PID is mariadbd's, under its root's init for a
// version from a root.
type Server struct {
	proc.Daemon // LogPath, PID, Restart, Crash; its Stop is its own

	bin     string // mariadbd
	dir     string // the caller's directory
	datadir string
	socket  string
	sockDir string // a directory of the socket's own, when dir's path is too long for one; removed by Stop
	errLog  string
	pidFile string
	port    int

	version versions.Version
	run     *versions.Run // a version from a root: how its programs run; nil for the machine's own
	proc    *proc.Proc    // mariadbd, its outputs appended to errLog
}

// The server binaries, searched in $PATH and then where Debian, Red Hat and
// /usr/local installs put them (sbin is not on every user's $PATH).
var (
	binDirs       = []string{"/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin", "/usr/libexec"}
	serverBinary  = proc.Binary{Names: []string{"mariadbd", "mysqld"}, Dirs: binDirs, None: ErrNoServer}
	installBinary = proc.Binary{Names: []string{"mariadb-install-db", "mysql_install_db"}, Dirs: binDirs, None: ErrNoServer}
)

// serverOptions are the options every start of a private server passes
// (after --no-defaults), and so does the data directory's initialisation:
// small InnoDB files and buffer pool (a 4 MiB redo log instead of 96 MiB),
// no buffer pool dump and load (quicker stops and starts), TCP on
// 127.0.0.1 only, no host name lookups. Durability is the default's
// (innodb_flush_log_at_trx_commit=1): a committed transaction survives
// Crash.
var serverOptions = []string{
	"--innodb-log-file-size=4M",
	"--innodb-buffer-pool-size=32M",
	"--innodb-buffer-pool-dump-at-shutdown=OFF",
	"--innodb-buffer-pool-load-at-startup=OFF",
	"--skip-name-resolve",
}

// StartPrivate starts a private MariaDB server whose files live under dir
// (which the caller owns and removes, such as a test's t.TempDir()): the
// data directory dir/data, initialised with mariadb-install-db (or
// mysql_install_db) unless it holds one already, the socket dir/sock, the
// error log dir/error.log. The server listens on 127.0.0.1 on a free port
// and runs as the current user (as root, it is told --user=root, without
// which mariadbd refuses to run as root). StartPrivate returns once the
// server answers: initialising the data directory took 1 to 2.5 s on a
// busy 2-CPU machine, starting 0.15 to 0.3 s.
// The caller must Stop it. On Linux the server is also killed if the
// calling process dies, so that none is left behind.
func StartPrivate(ctx context.Context, dir string) (*Server, error) {
	bin, err1 := serverBinary.Find()
	install, err2 := installBinary.Find()
	if err1 != nil || err2 != nil {
		return nil, ErrNoServer
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	s := &Server{bin: bin, dir: dir, datadir: filepath.Join(dir, "data"),
		socket: filepath.Join(dir, "sock"), errLog: filepath.Join(dir, "error.log"),
		pidFile: filepath.Join(dir, "mariadbd.pid")}
	s.version, _ = versions.Lookup("mariadb", "")
	if len(s.socket) > 100 { // a socket path must fit in 108 bytes
		if s.sockDir, err = os.MkdirTemp("", "mariadb"); err != nil {
			return nil, err
		}
		s.socket = filepath.Join(s.sockDir, "sock")
	}
	if _, err := os.Stat(filepath.Join(s.datadir, "mysql")); err != nil {
		if err := s.initialise(ctx, install); err != nil {
			s.removeSockDir()
			return nil, err
		}
	}
	if err := s.firstStart(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// StartVersion starts a private MariaDB server of version v (one of
// versions.Of("mariadb")), as StartPrivate does: the machine's own for its
// default, or else mariadb-install-db and mariadbd --no-defaults from the
// root of v's Debian release (made first if need be, which log hears of;
// an error matching debroot.ErrUnavailable says what cannot be had), as
// the root's user mysql. Its files are under dir/server, which the server
// sees as /lockprover: the data directory data (initialised unless it
// holds one already), the socket sock, the pid file mariadbd.pid and the
// error log error.log. Nothing of it outlives Stop but dir's files: no
// process, no mount.
func StartVersion(ctx context.Context, dir string, v versions.Version, log io.Writer) (*Server, error) {
	if v.Server != "mariadb" {
		return nil, fmt.Errorf("mysql: private server of %s: not a MariaDB version", v)
	}
	if !v.Rooted() {
		return StartPrivate(ctx, dir)
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	own := filepath.Join(dir, "server")
	run, err := v.Prepare(ctx, own, "mysql", "", nil, log)
	if err != nil {
		return nil, fmt.Errorf("mysql: private server of %s: %w", v, err)
	}
	s := &Server{bin: "/usr/sbin/mariadbd", dir: dir, datadir: filepath.Join(own, "data"),
		socket: filepath.Join(own, "sock"), errLog: filepath.Join(own, "error.log"),
		pidFile: filepath.Join(own, "mariadbd.pid"), version: v, run: run}
	// The error log is the server's (--log-error) and the launcher's
	// (what the run itself says): the server's user must be able to
	// write it.
	if err := createAs(s.errLog, own); err != nil {
		return nil, fmt.Errorf("mysql: private server of %s: %w", v, err)
	}
	if _, err := os.Stat(filepath.Join(s.datadir, "mysql")); err != nil {
		if err := s.initialise(ctx, "/usr/bin/mariadb-install-db"); err != nil {
			return nil, err
		}
	}
	if err := s.firstStart(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// createAs creates the file path (if missing), owned by the owner of
// the directory like.
func createAs(path, like string) error {
	st, err := os.Stat(like)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return err
	}
	f.Close()
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		return os.Chown(path, int(sys.Uid), int(sys.Gid))
	}
	return nil
}

// firstStart starts the initialised server on a free port (another, if
// somebody took the one drawn), then makes database test.
func (s *Server) firstStart(ctx context.Context) error {
	err := proc.Retry(func() error {
		ports, err := proc.FreePorts(1, false)
		if err != nil {
			return fmt.Errorf("mysql: private server: free port: %w", err)
		}
		s.port = ports[0]
		s.proc = s.supervisor()
		s.proc.Hold = ports
		s.Daemon = proc.NewDaemon(s.proc, s.start, proc.How{Grace: 60 * time.Second, Program: true})
		if err := s.start(ctx); err != nil {
			s.proc.Stop(30 * time.Second)
			return err
		}
		return nil
	})
	if err != nil {
		s.removeSockDir()
		return err
	}
	db, err := s.open("")
	if err != nil {
		s.Stop()
		return err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS test"); err != nil {
		s.Stop()
		return fmt.Errorf("mysql: private server: create database test: %w", err)
	}
	return nil
}

// supervisor is a fresh supervisor of the server's process: from its
// version's root when it has one.
func (s *Server) supervisor() *proc.Proc {
	p := &proc.Proc{Name: "mysql: private server", Log: s.errLog, Command: s.run.Launcher(), Port: s.port}
	if s.run != nil {
		p.Name += " " + s.version.Name
	}
	return p
}

// in is path (under the server's directory) as the server sees it: under
// /lockprover when it runs from a root.
func (s *Server) in(path string) string {
	if s.run == nil {
		return path
	}
	return s.run.In(path)
}

// Version is the server's version, as adapters/servers/versions names it
// ("mariadb 11.8").
func (s *Server) Version() versions.Version { return s.version }

// userArgs runs the server as root when we are root (the machine's own
// server; one from a root runs as the root's user mysql).
func (s *Server) userArgs() []string {
	if s.run == nil && os.Geteuid() == 0 {
		return []string{"--user=root"}
	}
	return nil
}

// initialise makes s's data directory with install (mariadb-install-db).
// Its bootstrap server crashed now and then beside a loaded suite (a
// segmentation fault in a clean clone's run, an abort in another, once
// each in some 25 such runs, the same test fine alone): a crash is tried
// once more on an emptied data directory, and the crashed attempt's
// output is kept at the head of the error log.
func (s *Server) initialise(ctx context.Context, install string) error {
	for attempt := 1; ; attempt++ {
		out, err := s.installDB(ctx, install)
		if err == nil {
			return nil
		}
		err = fmt.Errorf("mysql: private server: %s: %w\n%s", filepath.Base(install), err, tail(out))
		if attempt == 2 || ctx.Err() != nil || !installCrashed(out) {
			return err
		}
		if f, ferr := os.OpenFile(s.errLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640); ferr == nil {
			fmt.Fprintf(f, "lockprover: %v\nlockprover: its bootstrap crashed: tried once more on an emptied data directory\n", err)
			f.Close()
		}
		if rerr := os.RemoveAll(s.datadir); rerr != nil {
			return fmt.Errorf("%w (and emptying the data directory to try again: %v)", err, rerr)
		}
	}
}

// installDB runs install once, and returns what it printed.
func (s *Server) installDB(ctx context.Context, install string) ([]byte, error) {
	args := append([]string{"--no-defaults", "--datadir=" + s.in(s.datadir),
		"--auth-root-authentication-method=normal", "--skip-test-db"}, s.userArgs()...)
	args = append(args, serverOptions...)
	var cmd *exec.Cmd
	if s.run != nil {
		var err error
		if cmd, err = s.run.Command(ctx, append([]string{install}, args...)...); err != nil {
			return nil, err
		}
	} else {
		cmd = exec.CommandContext(ctx, install, args...)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.Bytes(), err
}

// installCrashed says mariadb-install-db's output tells of its bootstrap
// server's crash, not of a refusal.
func installCrashed(out []byte) bool {
	return bytes.Contains(out, []byte("Segmentation fault")) || bytes.Contains(out, []byte("Aborted"))
}

// start starts mariadbd and waits until it answers.
func (s *Server) start(ctx context.Context) error {
	args := append([]string{"--no-defaults", "--datadir=" + s.in(s.datadir),
		"--port=" + strconv.Itoa(s.port), "--bind-address=127.0.0.1", "--socket=" + s.in(s.socket),
		"--pid-file=" + s.in(s.pidFile), "--log-error=" + s.in(s.errLog)}, s.userArgs()...)
	args = append(args, serverOptions...)
	db, err := s.open("")
	if err != nil {
		return err
	}
	defer db.Close()
	return s.proc.Launch(ctx, s.bin, args, "on "+s.Addr(), func(ctx context.Context) error {
		c, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		return db.PingContext(c)
	})
}

// open is a pool on the server as root, on database db.
func (s *Server) open(db string) (*sql.DB, error) {
	cfg := driver.NewConfig()
	cfg.User, cfg.Net, cfg.Addr, cfg.DBName = "root", "tcp", s.Addr(), db
	cfg.Timeout = time.Second
	c, err := driver.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(c), nil
}

// Addr is the server's host:port (on 127.0.0.1), the same across restarts.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// DSN is a go-sql-driver DSN for the server's database test as root.
func (s *Server) DSN() string { return "root@tcp(" + s.Addr() + ")/test" }

// Socket is the path of the server's Unix socket.
func (s *Server) Socket() string { return s.socket }

// Stop stops the server (SIGTERM, SIGKILL if it has not exited 30 s
// later), waits for its process to be gone, and removes the socket's own
// directory if it has one. It leaves dir to the caller. Stopping a stopped
// server does nothing.
func (s *Server) Stop() error {
	err := s.Daemon.Stop()
	s.removeSockDir()
	return err
}

func (s *Server) removeSockDir() {
	if s.sockDir != "" {
		os.RemoveAll(s.sockDir)
	}
}

func tail(b []byte) string {
	const n = 2000
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// StartTemp starts a private server (StartPrivate) in a temporary
// directory of its own, which the returned stop removes once the server
// has stopped: for a command's run, which has no test directory.
func StartTemp(ctx context.Context) (s *Server, stop func(), err error) {
	return proc.Temp("lockprover-mariadb-", func(dir string) (*Server, error) { return StartPrivate(ctx, dir) })
}

// StartTempVersion is StartTemp of version v (StartVersion; log hears of
// a root being made).
func StartTempVersion(ctx context.Context, v versions.Version, log io.Writer) (s *Server, stop func(), err error) {
	return proc.Temp("lockprover-mariadb-", func(dir string) (*Server, error) { return StartVersion(ctx, dir, v, log) })
}
