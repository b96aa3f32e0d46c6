package postgres

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/lockprover/lockprover/adapters/versions"
)

// A supervisor runs the server's process: proc.Proc for the machine's own
// PostgreSQL, rootProc for one from a Debian release's root.
type supervisor interface {
	Launch(ctx context.Context, bin string, args []string, where string, ready func(context.Context) error) error
	Halt(sig syscall.Signal, grace time.Duration) error
	Stop(grace time.Duration) error
	PID() int
	LogTail() string
}

// rootProc is a server run from a root (versions.Run.Command): the
// command's process is the init of a PID namespace of the run's own, which
// forwards only SIGTERM and SIGINT (as SIGTERM) to the program it starts,
// so a signal meant for the server (SIGINT, a fast shutdown; SIGQUIT, an
// immediate one) goes to the program itself, the init's only child. When
// the program exits the init does, and the kernel ends whatever else the
// namespace holds; a SIGKILL of the init ends it all at once.
type rootProc struct {
	name string
	log  string // both outputs of every start
	run  *versions.Run

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{}
	stopped bool
}

// Launch starts bin (a path inside the root) with args as a command of
// the run, its outputs appended to p.log, and returns once ready says the
// server is ready, polling every 50 ms (as proc.Proc.Launch does).
func (p *rootProc) Launch(ctx context.Context, bin string, args []string, where string, ready func(context.Context) error) error {
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		return fmt.Errorf("%s: stopped", p.name)
	}
	logf, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		p.mu.Unlock()
		return fmt.Errorf("%s: %w", p.name, err)
	}
	fmt.Fprintf(logf, "==> lockprover: starting %s %s from %s's root\n", bin, strings.Join(args, " "), p.run.Version)
	// The server outlives the start's ctx: it runs until Halt or Stop.
	cmd, err := p.run.Command(context.Background(), append([]string{bin}, args...)...)
	if err != nil {
		logf.Close()
		p.mu.Unlock()
		return fmt.Errorf("%s: %w", p.name, err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	err = cmd.Start()
	logf.Close()
	if err != nil {
		p.mu.Unlock()
		return fmt.Errorf("%s: %w", p.name, err)
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	p.cmd, p.exited = cmd, exited
	p.mu.Unlock()

	var last error
	for {
		if last = ready(ctx); last == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("%s exited at start (%v)\n%s", p.name, cmd.ProcessState, p.LogTail())
		case <-ctx.Done():
			return fmt.Errorf("%s %s not ready: %w (last: %v)\n%s", p.name, where, ctx.Err(), last, p.LogTail())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// program is the host's pid of the program the init runs (its only
// child), 0 when it has none.
func program(init int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", init, init))
	if err != nil {
		return 0
	}
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil {
			return pid
		}
	}
	return 0
}

// PID is the server's process id on the machine (the program's, or its
// init's while it has none), 0 while it is not running.
func (p *rootProc) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return 0
	}
	select {
	case <-p.exited:
		return 0
	default:
	}
	if pid := program(p.cmd.Process.Pid); pid != 0 {
		return pid
	}
	return p.cmd.Process.Pid
}

// Halt sends sig (and SIGCONT) to the program and waits for the run to
// end, killing it all (SIGKILL to the init) after grace. Halting a run
// that is down does nothing.
func (p *rootProc) Halt(sig syscall.Signal, grace time.Duration) error {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	if cmd == nil {
		return nil
	}
	if pid := program(cmd.Process.Pid); pid != 0 {
		syscall.Kill(pid, sig)
		syscall.Kill(pid, syscall.SIGCONT)
	} else {
		// No program (yet, or any more): the init ends the run on
		// SIGTERM, and SIGKILL ends it at once.
		cmd.Process.Signal(syscall.SIGTERM)
	}
	var err error
	select {
	case <-exited:
	case <-time.After(grace):
		cmd.Process.Kill()
		<-exited
		err = fmt.Errorf("%s did not stop within %v of %v: killed", p.name, grace, sig)
	}
	p.mu.Lock()
	if p.cmd == cmd {
		p.cmd, p.exited = nil, nil
	}
	p.mu.Unlock()
	return err
}

// Stop halts the run for good with SIGTERM; Launch refuses to start it
// again.
func (p *rootProc) Stop(grace time.Duration) error {
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
	return p.Halt(syscall.SIGTERM, grace)
}

// LogTail is the end of the log, for error messages.
func (p *rootProc) LogTail() string {
	b, _ := os.ReadFile(p.log)
	return tail(b)
}
