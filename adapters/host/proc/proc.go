// Package proc supervises the private servers lockprover's backends start
// for a run or a test (an etcd, a Consul agent): one process of the
// caller's own, its outputs appended to a log file, killed with the caller
// on Linux, stopped, crashed and started again on demand. What differs
// between servers (their arguments, how to tell one is ready) is the
// caller's; this package is the rest, written once: a server's type embeds
// a Daemon (its log, process id, restart, crash and stop) and finds its
// program with a Binary.
package proc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrKilled is in the error of a stop that had to kill the process after
// its grace: the process is gone all the same, late (a loaded machine, a
// server slow to shut down), which a caller may report without failing.
var ErrKilled = errors.New("killed")

// A Proc is one private server process, started again by each Launch.
// Its methods are safe for concurrent use.
type Proc struct {
	Name string // in messages: "etcd: private server"
	Log  string // both outputs of every start
	// Cred, if set, is the user and group the process runs as (the
	// caller must be allowed to switch to them: root): PostgreSQL refuses
	// to run as root.
	Cred *syscall.Credential
	// Command, if set, makes the command each Launch starts from bin and
	// args, instead of exec.Command: a server run from a Debian root
	// (versions.Run.Command), whose process is the init of a PID
	// namespace of its own, its attributes kept (it dies with its
	// launcher likewise). Signal then reaches the program itself (the
	// init's child), and Halt resumes it too.
	Command func(bin string, args []string) (*exec.Cmd, error)
	// Port, if set, is the TCP port the process listens on. Launch then
	// takes ready's yes only once the process (or one below it) holds the
	// port's listening socket: two servers may draw the same free port
	// (FreePorts), and the one that lost the bind would otherwise be
	// taken for ready on the winner's answer, its clients sharing the
	// other's server. The loser's Launch fails with an error InUse knows.
	Port int
	// Hold are the ports FreePorts reserved for the process (Port among
	// them), which Stop gives back: kept reserved while the process is
	// down for a restart, so that no other lockprover draws them then.
	Hold []int

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{} // closed once cmd has been waited for
	stopped bool
}

// Launch starts bin with args, its outputs appended to p.Log (after a line
// that says what started), and returns once ready says it is ready,
// polling every 50 ms. If the process exits first, or ctx ends, the error
// quotes the end of the log; where names the server in it ("on
// 127.0.0.1:2379"). A Proc that was stopped launches nothing.
func (p *Proc) Launch(ctx context.Context, bin string, args []string, where string, ready func(context.Context) error) error {
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		return fmt.Errorf("%s: stopped", p.Name)
	}
	logf, err := os.OpenFile(p.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		p.mu.Unlock()
		return fmt.Errorf("%s: %w", p.Name, err)
	}
	fmt.Fprintf(logf, "==> lockprover: starting %s %s\n", bin, strings.Join(args, " "))
	var cmd *exec.Cmd
	if p.Command != nil {
		if cmd, err = p.Command(bin, args); err != nil {
			logf.Close()
			p.mu.Unlock()
			return fmt.Errorf("%s: %w", p.Name, err)
		}
	} else {
		cmd = exec.Command(bin, args...)
		cmd.SysProcAttr = sysProcAttr()
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if p.Cred != nil {
		if cmd.SysProcAttr == nil {
			cmd.SysProcAttr = &syscall.SysProcAttr{}
		}
		cmd.SysProcAttr.Credential = p.Cred
	}
	err = cmd.Start()
	logf.Close() // the child has its own descriptor
	if err != nil {
		p.mu.Unlock()
		return fmt.Errorf("%s: %w", p.Name, err)
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	p.cmd, p.exited = cmd, exited
	p.mu.Unlock()

	var last error
	var foreign time.Time // since when another's server has answered on p.Port
	for {
		if last = ready(ctx); last == nil {
			if last = p.owns(cmd, exited, &foreign); last == nil {
				return nil
			}
			if InUse(last) {
				p.Halt(syscall.SIGKILL, 10*time.Second)
				return last
			}
		}
		select {
		case <-exited:
			if !foreign.IsZero() {
				return fmt.Errorf("%s: port %d: address already in use: another server answers there, and this one exited (%v)\n%s", p.Name, p.Port, cmd.ProcessState, p.LogTail())
			}
			return fmt.Errorf("%s exited at start (%v)\n%s", p.Name, cmd.ProcessState, p.LogTail())
		case <-ctx.Done():
			return fmt.Errorf("%s %s not ready: %w (last: %v)\n%s", p.Name, where, ctx.Err(), last, p.LogTail())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// owns is nil if p has no Port, or if cmd's process holds the port's
// listening socket. Another's server answering on the port is an error
// InUse knows, once cmd's process has exited (it lost the bind) or has
// not taken the port after a second; until then, or where /proc cannot
// tell, it is an error that Launch's loop polls past.
func (p *Proc) owns(cmd *exec.Cmd, exited chan struct{}, since *time.Time) error {
	if p.Port == 0 {
		return nil
	}
	ok, err := listens(cmd.Process.Pid, p.Port)
	switch {
	case err != nil:
		return nil // cannot tell here: ready's answer stands
	case ok:
		return nil
	}
	if since.IsZero() {
		*since = time.Now()
	}
	select {
	case <-exited:
	default:
		if time.Since(*since) < time.Second {
			return fmt.Errorf("%s: port %d answers, but not from this process yet", p.Name, p.Port)
		}
	}
	who := ""
	if h := holders(p.Port); h != "" {
		who = fmt.Sprintf(" (%s; this one is pid %d)", h, cmd.Process.Pid)
	}
	return fmt.Errorf("%s: port %d: address already in use: another server answers there%s", p.Name, p.Port, who)
}

// running is the command of the process while it runs, else nil.
func (p *Proc) running() *exec.Cmd {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return nil
	}
	select {
	case <-p.exited:
		return nil
	default:
		return p.cmd
	}
}

// PID is the process's id, 0 while it is not running.
func (p *Proc) PID() int {
	if cmd := p.running(); cmd != nil {
		return cmd.Process.Pid
	}
	return 0
}

// Bounce ends the process with sig (SIGTERM: a clean stop; SIGKILL: a
// crash), waits until it has exited (killing it after grace), stays down
// for downtime and calls start to launch it again.
func (p *Proc) Bounce(ctx context.Context, sig syscall.Signal, grace, downtime time.Duration, start func(context.Context) error) error {
	if err := p.Halt(sig, grace); err != nil {
		return err
	}
	if downtime > 0 {
		t := time.NewTimer(downtime)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
	return start(ctx)
}

// Halt sends sig to the process (and SIGCONT: a paused process must run
// to stop) and waits for it to exit, killing it if it takes longer than
// grace. It stays down until the next Launch. Halting a process that is
// down does nothing.
func (p *Proc) Halt(sig syscall.Signal, grace time.Duration) error {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	if cmd == nil {
		return nil
	}
	// From a root, sig goes to the program itself: its init passes on
	// only SIGTERM and SIGINT, and as SIGTERM (PostgreSQL's fast and
	// immediate shutdowns are SIGINT and SIGQUIT). With no program (yet,
	// or any more) the init ends the run on SIGTERM.
	switch pid := p.program(cmd); {
	case pid > 0 && pid != cmd.Process.Pid:
		syscall.Kill(pid, sig)
		syscall.Kill(pid, syscall.SIGCONT)
	case pid == 0:
		cmd.Process.Signal(syscall.SIGTERM)
	default:
		cmd.Process.Signal(sig)
		cmd.Process.Signal(syscall.SIGCONT)
	}
	var err error
	select {
	case <-exited:
	case <-time.After(grace):
		cmd.Process.Kill()
		<-exited
		err = fmt.Errorf("%s did not stop within %v of %v: %w", p.Name, grace, sig, ErrKilled)
	}
	p.mu.Lock()
	if p.cmd == cmd {
		p.cmd, p.exited = nil, nil
	}
	p.mu.Unlock()
	return err
}

// Signal sends sig to the running process (SIGSTOP and SIGCONT pause and
// resume it); an error if it is not running.
func (p *Proc) Signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return fmt.Errorf("%s: not running (%v)", p.Name, sig)
	}
	select {
	case <-p.exited:
		return fmt.Errorf("%s: not running (%v)", p.Name, sig)
	default:
	}
	if pid := p.program(p.cmd); pid != p.cmd.Process.Pid {
		if pid == 0 {
			return fmt.Errorf("%s: its program is not running under its init (%v)", p.Name, sig)
		}
		return syscall.Kill(pid, sig)
	}
	return p.cmd.Process.Signal(sig)
}

// Program is the process id of the program itself, 0 while it is not
// running: PID's, or for a program run from a root (Command) the init's
// child.
func (p *Proc) Program() int {
	if cmd := p.running(); cmd != nil {
		return p.program(cmd)
	}
	return 0
}

// program is the process that runs the program cmd started: cmd's own,
// or, for a command Command made (the init of a PID namespace, running
// the program as its one child), that child, 0 if it has none (gone).
func (p *Proc) program(cmd *exec.Cmd) int {
	if p.Command == nil {
		return cmd.Process.Pid
	}
	pid := cmd.Process.Pid
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	child, _ := strconv.Atoi(f[0])
	return child
}

// Stop stops the process for good (SIGTERM, SIGKILL if it has not exited
// after grace) and waits for it to be gone. Stopping a stopped Proc does
// nothing.
func (p *Proc) Stop(grace time.Duration) error { return p.stop(syscall.SIGTERM, grace) }

// stop is Stop with sig rather than SIGTERM (a Daemon's How.Restart).
func (p *Proc) stop(sig syscall.Signal, grace time.Duration) error {
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
	err := p.Halt(sig, grace)
	ReleasePorts(p.Hold...)
	return err
}

// LogTail is the end of the log, for error messages.
func (p *Proc) LogTail() string {
	b, _ := os.ReadFile(p.Log)
	const n = 3000
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// Temp starts a server (start, given a directory) in a temporary directory
// of its own, which the returned stop removes once the server has stopped:
// for a command's run, which has no test directory.
func Temp[S interface{ Stop() error }](pattern string, start func(dir string) (S, error)) (s S, stop func(), err error) {
	dir, err := os.MkdirTemp("", pattern)
	if err != nil {
		return s, nil, err
	}
	s, err = start(dir)
	if err != nil {
		os.RemoveAll(dir)
		return s, nil, err
	}
	return s, func() { s.Stop(); os.RemoveAll(dir) }, nil
}

// FreePorts are n distinct ports on 127.0.0.1 on which nobody listens just
// now, over TCP and, with udp, over UDP too (Consul's Serf uses both),
// each reserved for this process until ReleasePorts gives it back (a
// Proc's Stop gives back its Hold).
//
// They are drawn at random below the kernel's ephemeral range: a port the
// kernel handed out for ":0" is one it hands out again as the local port
// of somebody's outgoing connection, and a private redis-server lost its
// port that way to the suite's own clients between the choice and its
// bind. The reservation (on Linux, an abstract Unix socket named after
// the port, which the kernel frees when this process ends) keeps other
// lockprover processes, and this one, from drawing a port while its
// server is down for a restart: a private MariaDB restarted under load
// once found another's server on its port. Two choosers may still draw the
// same port where the reservation cannot be made; [InUse] tells a server
// that lost that race, for [Retry].
func FreePorts(n int, udp bool) ([]int, error) {
	lo, hi := portRange()
	var ports []int
	var held []io.Closer
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for tries := 0; len(ports) < n; tries++ {
		if tries > 1000 {
			ReleasePorts(ports...)
			return nil, fmt.Errorf("no free port in %d-%d after 1000 tries", lo, hi)
		}
		port := lo + rand.IntN(hi-lo+1)
		if !reservePort(port) {
			continue
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			ReleasePorts(port)
			continue
		}
		held = append(held, ln)
		if udp {
			pc, err := net.ListenPacket("udp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
			if err != nil {
				ReleasePorts(port)
				continue
			}
			held = append(held, pc)
		}
		ports = append(ports, port)
	}
	return ports, nil
}

// reservations are the ports this process reserved (FreePorts), each
// with what holds it.
var reservations sync.Map // int -> io.Closer

// reservePort reserves port for this process; false if it is reserved,
// by this process or another.
func reservePort(port int) bool {
	c, ok := reserve(port)
	if !ok {
		return false
	}
	if _, dup := reservations.LoadOrStore(port, c); dup {
		c.Close()
		return false
	}
	return true
}

// ReleasePorts gives back ports FreePorts reserved; others are ignored.
func ReleasePorts(ports ...int) {
	for _, p := range ports {
		if c, ok := reservations.LoadAndDelete(p); ok {
			c.(io.Closer).Close()
		}
	}
}

// portRange is where FreePorts draws from: from 20000 up to just below the
// ephemeral range that /proc/sys/net/ipv4/ip_local_port_range gives
// (32768 by default, and where it cannot be read).
func portRange() (lo, hi int) {
	lo, hi = 20000, 32767
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return lo, hi
	}
	f := strings.Fields(string(b))
	if len(f) < 1 {
		return lo, hi
	}
	if first, err := strconv.Atoi(f[0]); err == nil && first > 1024+1000 {
		hi = first - 1
		lo = min(lo, hi-1000)
	}
	return lo, hi
}

// InUse says whether err is a server's failure to bind a port somebody
// else took, as the tail of its log quotes it ("Address already in use",
// "bind: address already in use").
func InUse(err error) bool {
	return err != nil && strings.Contains(strings.ToLower(err.Error()), "address already in use")
}

// Retry calls start until it succeeds, fails for another reason than
// [InUse], or has failed five times: start draws its own ports each time.
func Retry(start func() error) error {
	var err error
	for range 5 {
		if err = start(); !InUse(err) {
			return err
		}
	}
	return err
}
