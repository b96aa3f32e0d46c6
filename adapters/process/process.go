// Package process runs lock implementations written in any language as
// processes that speak lockprover's JSON-lines protocol (docs/protocol.md):
// Impl is the harness side, one process per client and admin of a run, and
// Serve is the implementation side, which serves lockprover's own reference
// (and its mutants) over the protocol.
package process

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/lockprover/lockprover/families/amqp"
	"github.com/lockprover/lockprover/prover"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/lockprover/lockprover/adapters/rabbitmq"
	"github.com/lockprover/lockprover/amqplocks/broker"
)

// Impl is an implementation under test that runs as processes: Command is
// started (by /bin/sh -c, in a process group of its own) for each client
// and admin, and spoken to over the protocol.
type Impl struct {
	Command string
	// Timeout bounds an operation; 0 means 30 s. A process that does not
	// answer in time is killed and its operation's outcome is unknown.
	Timeout time.Duration
	// InitTimeout bounds the reply to init; 0 means 10 s, the protocol's
	// (docs/protocol.md). A process that does not answer in time did not
	// start.
	InitTimeout time.Duration

	mu     sync.Mutex
	broken error // set after the implementation failed to start twice
	starts int   // failed starts so far
	procs  map[*client]bool
}

// handshake bounds the init exchange: the protocol's 10 s.
const handshake = 10 * time.Second

// Connect starts a process for the client name of plan p and shakes hands.
// The broker must be a real one that gives each process its own URL (the
// RabbitMQ target's fault proxy). The implementation failing to start (it
// exited, hung, wrote garbage or refused before init_ok) is a
// *prover.ImplementationError; after two, Impl starts no more processes
// and every Connect fails with one. Any other error (the broker out of
// reach, as the process said with an error without definite; ctx done)
// may pass if tried again.
func (i *Impl) Connect(ctx context.Context, b broker.Broker, p *amqp.Plan, name string) (amqp.Client, error) {
	u, ok := b.(interface{ URL() string })
	if !ok {
		return nil, &prover.ImplementationError{Msg: "an implementation in processes needs a real broker (--target rabbitmq)"}
	}
	i.mu.Lock()
	if i.broken != nil {
		i.mu.Unlock()
		return nil, &prover.ImplementationError{Msg: fmt.Sprintf("%s not started: the implementation failed to start twice (%v)", name, i.broken)}
	}
	i.mu.Unlock()
	c, err := i.launch(ctx, name, p.Kind, p.Lock, u.URL(), int(p.Options.Heartbeat().Milliseconds()))
	i.mu.Lock()
	defer i.mu.Unlock()
	var ie *prover.ImplementationError
	if errors.As(err, &ie) {
		if i.starts++; i.starts >= 2 {
			i.broken = err
		}
	}
	if err != nil {
		return nil, err
	}
	if i.procs == nil {
		i.procs = map[*client]bool{}
	}
	i.procs[c] = true
	c.gone = func() {
		i.mu.Lock()
		delete(i.procs, c)
		i.mu.Unlock()
	}
	return c, nil
}

// launch starts a process as client name of the lock (kind, lock) on the
// broker at url and shakes hands. On failure the process is gone, and the
// error is a *prover.ImplementationError when the implementation cannot
// start; anything else (the broker out of reach, ctx done) may pass if
// tried again.
func (i *Impl) launch(ctx context.Context, name, kind, lock, url string, heartbeatMs int) (*client, error) {
	c, err := start(i.Command, name, i.timeout())
	if err != nil {
		return nil, err
	}
	c.kind = kind
	_, err = c.amqpCall(ctx, i.initTimeout(), request{"type": "init", "client": name, "lock": kind, "name": lock, "url": url, "heartbeat_ms": heartbeatMs}, "init_ok")
	if err == nil {
		return c, nil
	}
	var re *errorReply // without definite: amqpCall made a definite one a *amqp.Failure
	var f *amqp.Failure
	switch {
	case ctx.Err() != nil, errors.As(err, &re):
		// Cut short by the harness (its client was killed), or the broker
		// out of reach (a fault, say).
	case errors.As(err, &f):
		err = &prover.ImplementationError{Msg: rabbitmq.Redact(fmt.Sprintf("%s refused to start: %s", name, f.Reason))}
	default:
		why := strings.TrimPrefix(c.Crashed(), "crashed: ")
		if why == "" {
			why = err.Error()
		}
		err = &prover.ImplementationError{Msg: rabbitmq.Redact(fmt.Sprintf("%s did not start: %s", name, why))}
	}
	c.Signal(syscall.SIGKILL)
	c.wait()
	return nil, err
}

// Preflight starts one process as the probe of a throwaway lock of the
// given kind on the broker at url, shakes hands and ends it: an
// implementation that cannot start fails here at once, with its stderr,
// rather than in every plan of a run.
func (i *Impl) Preflight(ctx context.Context, url, kind string) error {
	c, err := i.launch(ctx, "probe", kind, rabbitmq.UniqueName("lp-preflight-"), url, 1000)
	var re *errorReply
	switch {
	case errors.As(err, &re):
		return fmt.Errorf("probe could not reach the broker: %v", re)
	case err != nil:
		return err
	}
	return c.Close()
}

// String is the implementation's command, for reports.
func (i *Impl) String() string { return fmt.Sprintf("the implementation %q", i.Command) }

func (i *Impl) timeout() time.Duration {
	if i.Timeout > 0 {
		return i.Timeout
	}
	return 30 * time.Second
}

func (i *Impl) initTimeout() time.Duration {
	if i.InitTimeout > 0 {
		return i.InitTimeout
	}
	return handshake
}

// Stop kills every process still running (after an interrupt, say).
func (i *Impl) Stop() {
	i.mu.Lock()
	cs := make([]*client, 0, len(i.procs))
	for c := range i.procs {
		cs = append(cs, c)
	}
	i.mu.Unlock()
	for _, c := range cs {
		c.Signal(syscall.SIGKILL)
		c.wait()
	}
}

// request is one protocol request; the id is added when it is sent.
type request map[string]any

// client is one running process, of any family: started, read, timed out,
// signalled and ended the same way, and asked by call. What its replies
// mean is the family's: ops.go for amqp-locks, lease.go for lease locks.
type client struct {
	name    string
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	lines   chan string   // stdout, line by line; closed at EOF
	exited  chan struct{} // closed once the process has been reaped
	stderr  *tail
	timeout time.Duration
	kind    string // amqp-locks: semaphore or mutex
	gone    func()

	mu       sync.Mutex
	next     int
	last     string // the last request sent
	crashed  string // why the process is gone or was given up on
	exitOnly bool   // crashed says only that it exited
	killed   bool   // the harness killed it on purpose
}

func start(command, name string, timeout time.Duration) (*client, error) {
	cmd := exec.Command("/bin/sh", "-c", command)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	// Not cmd.StdoutPipe: Wait would close it on exit, maybe before the
	// process's last lines are read.
	stdout, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdout = w
	c := &client{name: name, cmd: cmd, stdin: stdin, lines: make(chan string, 16), exited: make(chan struct{}),
		stderr: &tail{}, timeout: timeout, next: 1}
	cmd.Stderr = c.stderr
	err = cmd.Start()
	w.Close()
	if err != nil {
		stdout.Close()
		return nil, &prover.ImplementationError{Msg: fmt.Sprintf("%s: cannot start %q: %v", name, command, err)}
	}
	go func() {
		defer stdout.Close()
		r := bufio.NewReaderSize(stdout, 64<<10)
		for {
			line, err := r.ReadString('\n')
			if line != "" {
				c.lines <- strings.TrimRight(line, "\r\n")
			}
			if err != nil {
				close(c.lines)
				return
			}
		}
	}()
	go func() {
		err := cmd.Wait()
		c.mu.Lock()
		if c.crashed == "" && !c.killed {
			c.crashed, c.exitOnly = fmt.Sprintf("exited (%v)", exitStatus(err)), true
		}
		c.mu.Unlock()
		close(c.exited)
		if c.gone != nil {
			c.gone()
		}
	}()
	return c, nil
}

func exitStatus(err error) string {
	if err == nil {
		return "status 0"
	}
	return err.Error()
}

// A reply is a process's answer to a request, in no family's terms: its
// type, one the request wanted, and its fields.
type reply struct {
	typ    string
	fields map[string]json.RawMessage
}

// An errorReply is a process's answer "error", in no family's terms:
// definite, the request certainly had no effect; otherwise its outcome is
// unknown. Each family makes it an error of its own (amqpCall,
// LeaseClient.call); amqp-locks keeps one without definite as it is.
type errorReply struct {
	code, text string
	definite   bool
}

func (e *errorReply) Error() string { return rabbitmq.Redact(e.code + ": " + e.text) }

// errGone is the error of a request to a process already gone or given up
// on: nothing was sent.
var errGone = errors.New("the process is gone")

// call sends req and waits up to d (within ctx) for its reply, which must
// echo its id and have one of the types wants, or be an error. It returns
// the reply; an error reply is an *errorReply, a process already gone
// errGone, and anything else that goes wrong an error of unknown outcome
// with the process given up on.
func (c *client) call(ctx context.Context, d time.Duration, req request, wants ...string) (reply, error) {
	c.mu.Lock()
	if c.crashed != "" || c.killed {
		c.mu.Unlock()
		return reply{}, errGone
	}
	id := c.next
	c.next++
	req["id"] = id
	line, _ := json.Marshal(req)
	c.last = string(line)
	c.mu.Unlock()
	if _, err := c.stdin.Write(append(line, '\n')); err != nil {
		return reply{}, c.ended(fmt.Sprintf("could not be written to (%v)", err))
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	var text string
	select {
	case l, ok := <-c.lines:
		if !ok {
			return reply{}, c.ended("closed its stdout")
		}
		text = l
	case <-timer.C:
		return reply{}, c.giveUp(fmt.Sprintf("did not answer within %v", d))
	case <-ctx.Done():
		return reply{}, c.giveUp(fmt.Sprintf("did not answer before %v", ctx.Err()))
	}
	r, err := c.read(text, id, wants)
	if err != nil {
		return reply{}, err
	}
	if r.typ != "error" {
		return r, nil
	}
	return reply{}, c.readError(r.fields, text)
}

// read decodes text, the reply to request id, which must be a JSON object
// with that id and a type, one of wants or "error".
func (c *client) read(text string, id int, wants []string) (reply, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal([]byte(text), &fields); err != nil || fields == nil {
		return reply{}, c.giveUp(fmt.Sprintf("wrote a line that is not a JSON object: %.200q", text))
	}
	rawID, ok := fields["id"]
	if !ok {
		return reply{}, c.giveUp(fmt.Sprintf("answered without an id: %.200s", text))
	}
	var gotID int
	if err := json.Unmarshal(rawID, &gotID); err != nil {
		return reply{}, c.giveUp(fmt.Sprintf("answered with an id that is not an integer (%s): %.200s", rawID, text))
	}
	var typ string
	if err := json.Unmarshal(fields["type"], &typ); err != nil || fields["type"] == nil {
		return reply{}, c.giveUp(fmt.Sprintf("answered without a \"type\" string: %.200s", text))
	}
	if gotID != id {
		return reply{}, c.giveUp(fmt.Sprintf("answered id %d to request id %d: %.200s", gotID, id, text))
	}
	if typ != "error" && !slices.Contains(wants, typ) {
		return reply{}, c.giveUp(fmt.Sprintf("answered %q to a request that wants %s: %.200s", typ, strings.Join(quoted(wants), " or "), text))
	}
	return reply{typ: typ, fields: fields}, nil
}

// readError decodes an error reply's fields (text is the whole line, for
// messages) into an *errorReply.
func (c *client) readError(fields map[string]json.RawMessage, text string) error {
	e := &errorReply{}
	if err := json.Unmarshal(fields["code"], &e.code); err != nil || e.code == "" {
		return c.giveUp(fmt.Sprintf("sent an error without a \"code\" string: %.200s", text))
	}
	if raw, ok := fields["text"]; ok {
		if err := json.Unmarshal(raw, &e.text); err != nil {
			return c.giveUp(fmt.Sprintf("sent an error whose \"text\" is not a string: %.200s", text))
		}
	}
	if raw, ok := fields["definite"]; ok {
		if err := json.Unmarshal(raw, &e.definite); err != nil {
			return c.giveUp(fmt.Sprintf("sent an error whose \"definite\" is not true or false: %.200s", text))
		}
	}
	return e
}

func quoted(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}

// giveUp kills the process and records why (rather than a bare exit, which
// says less); the operation's outcome is unknown.
func (c *client) giveUp(why string) error {
	why = rabbitmq.Redact(why)
	c.mu.Lock()
	if c.crashed == "" || c.exitOnly {
		c.crashed, c.exitOnly = why, false
	}
	c.mu.Unlock()
	syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
	return fmt.Errorf("%s %s", c.name, why)
}

// ended is the error of a request the process can no longer answer: most
// often it has exited, and the error says so; one still running a second
// later is given up on for why.
func (c *client) ended(why string) error {
	select {
	case <-c.exited:
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.crashed != "" {
			why = c.crashed
		}
		return fmt.Errorf("%s %s", c.name, why)
	case <-time.After(time.Second):
		return c.giveUp(why)
	}
}

// why describes the process's end for a report: the reason, its last
// request, and the end of its stderr.
func (c *client) why() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.crashed
	if s == "" {
		s = "gone"
	}
	if c.last != "" {
		s += "; last request: " + c.last
	}
	if t := c.stderr.String(); t != "" {
		s += "; stderr ends: " + t
	}
	return rabbitmq.Redact(s)
}

func (c *client) Crashed() string {
	c.mu.Lock()
	crashed := c.crashed != "" && !c.killed
	c.mu.Unlock()
	if !crashed {
		return ""
	}
	return "crashed: " + c.why()
}

func (c *client) Broken() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.crashed != "" || c.killed
}

// Signal delivers sig to the process group; a SIGKILL is the harness's own
// doing, not a crash. Once the process has exited (and was reaped, so its
// number may be another's) it does nothing.
func (c *client) Signal(sig syscall.Signal) {
	select {
	case <-c.exited:
		return
	default:
	}
	if sig == syscall.SIGKILL {
		c.mu.Lock()
		c.killed = true
		c.mu.Unlock()
	}
	syscall.Kill(-c.cmd.Process.Pid, sig)
}

// Close ends the process as the protocol says: stdin closes, then SIGTERM
// after 5 s, then SIGKILL after 5 more.
func (c *client) Close() error {
	c.stdin.Close()
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		select {
		case <-c.exited:
			return nil
		case <-time.After(5 * time.Second):
			c.mu.Lock()
			c.killed = true
			c.mu.Unlock()
			syscall.Kill(-c.cmd.Process.Pid, sig)
		}
	}
	c.wait()
	return nil
}

func (c *client) wait() { <-c.exited }

// tail keeps the last few kilobytes a process wrote to stderr.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

const tailSize = 2 << 10

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > tailSize {
		t.buf = t.buf[len(t.buf)-tailSize:]
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.buf))
}
