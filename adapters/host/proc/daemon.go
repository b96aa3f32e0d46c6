package proc

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// A Daemon is a private server as its package shows it to its callers:
// its log, its process id, a restart, a crash and a stop, each written
// here once for every server (etcd, Consul, Redis, MariaDB, PostgreSQL,
// and each member of a cluster). A server's type embeds it, made by
// NewDaemon from the server's Proc and its start; what a restart or a
// crash means for the server's data is the server type's to say.
type Daemon struct {
	proc  *Proc
	start func(context.Context) error
	how   How
}

// How says how a Daemon ends its server and which process it names. The
// zero value is what etcd and Consul want: SIGTERM to restart and stop,
// SIGKILL to crash, 30 s of grace for each, the process started.
type How struct {
	// Restart ends the server for a restart and for good (0: SIGTERM);
	// Crash ends it for a crash (0: SIGKILL).
	Restart, Crash syscall.Signal
	// Grace is how long a restart's or a crash's end may take before the
	// process is killed, StopGrace a stop's (0: 30 s each).
	Grace, StopGrace time.Duration
	// Program makes PID the program's (Proc.Program: the init's child, for
	// a server run from a root) rather than the process started's.
	Program bool
}

// NewDaemon is the Daemon of the server whose process is p, which start
// launches (p.Launch, with the server's command line and readiness) and
// which Restart and Crash start again.
func NewDaemon(p *Proc, start func(context.Context) error, how How) Daemon {
	how.Restart = cmp.Or(how.Restart, syscall.SIGTERM)
	how.Crash = cmp.Or(how.Crash, syscall.SIGKILL)
	how.Grace = cmp.Or(how.Grace, 30*time.Second)
	how.StopGrace = cmp.Or(how.StopGrace, 30*time.Second)
	return Daemon{proc: p, start: start, how: how}
}

// LogPath is the server's log file (both its outputs, every start).
func (d Daemon) LogPath() string { return d.proc.Log }

// PID is the server's process id, 0 while it is not running.
func (d Daemon) PID() int {
	if d.how.Program {
		return d.proc.Program()
	}
	return d.proc.PID()
}

// Restart ends the server cleanly (How.Restart), waits until its process
// has exited, stays down for downtime, and starts it again on the same
// ports and files, returning once it is ready. Should another process take
// a port while it is down, the start fails (the error quotes its log).
func (d Daemon) Restart(ctx context.Context, downtime time.Duration) error {
	return d.proc.Bounce(ctx, d.how.Restart, d.how.Grace, downtime, d.start)
}

// Crash ends the server at once (How.Crash), stays down for downtime and
// starts it again as Restart does.
func (d Daemon) Crash(ctx context.Context, downtime time.Duration) error {
	return d.proc.Bounce(ctx, d.how.Crash, d.how.Grace, downtime, d.start)
}

// Stop stops the server for good (How.Restart, SIGKILL if it has not
// exited after How.StopGrace) and waits for its process to be gone. It
// leaves the server's directory to the caller. Stopping a stopped server
// does nothing.
func (d Daemon) Stop() error { return d.proc.stop(d.how.Restart, d.how.StopGrace) }

// A Binary says where a private server's program is found, for a run
// whose options name none.
type Binary struct {
	Env   string   // a variable that names it when set ($LOCKPROVER_ETCD), or ""
	Names []string // its names, in order of preference
	Dirs  []string // where it is looked for after $PATH
	None  error    // the error when it is nowhere: tests skip on it
}

// Find is the program: the file $Env names if set (which must then be an
// executable file), else the first of Names on $PATH, else the first of
// Names in one of Dirs. Without any, it answers None.
func (b Binary) Find() (string, error) {
	if b.Env != "" {
		if p := os.Getenv(b.Env); p != "" {
			if !Executable(p) {
				return "", fmt.Errorf("%w ($%s=%s is not an executable file)", b.None, b.Env, p)
			}
			return p, nil
		}
	}
	for _, n := range b.Names {
		if p, err := exec.LookPath(n); err == nil {
			return p, nil
		}
	}
	for _, n := range b.Names {
		for _, d := range b.Dirs {
			if p := filepath.Join(d, n); Executable(p) {
				return p, nil
			}
		}
	}
	return "", b.None
}

// Prepare is what a private server starts with: bin, the program its
// options or its version name, else (bin is "") Find's; and dir made
// absolute.
func (b Binary) Prepare(bin, dir string) (string, string, error) {
	if bin == "" {
		var err error
		if bin, err = b.Find(); err != nil {
			return "", "", err
		}
	}
	abs, err := filepath.Abs(dir)
	return bin, abs, err
}

// Executable says whether p is an executable file.
func Executable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}
