// Package process runs lock implementations written in any language as
// processes that speak lockprover's JSON-lines protocol (docs/protocol.md),
// for every lock family alike. A Launcher starts one process per client
// (by /bin/sh -c, in a process group of its own, the tail of its stderr
// kept), shakes hands with init, counts the starts that failed (run by
// run) and kills what is left on an interrupt; a Client sends it requests with increasing
// ids and reads their replies within a timeout, giving up on a process
// that breaks the protocol (the operation's outcome is then unknown). A
// family whose processes may speak unasked names those messages (OnNotice:
// a priority lock's victim saying its lease was taken); they are handled as
// they are read, and Drain handles what a process wrote so far. A
// Server is the implementation side's transport (Lines writes its replies
// and notices), and a Checker prints the checks of validate-impl.
//
// What a request and its reply mean is no business of this package's:
// each family brings its side of the protocol from its own folder
// (adapters/runners/amqprun, adapters/runners/dbsemrun), built on this one, which imports
// no family.
package process

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/lockprover/lockprover/adapters/servers/rabbitmq"
	"github.com/lockprover/lockprover/internal/prover"
)

// A Launcher starts the processes of an implementation under test: Command
// is started (by /bin/sh -c, in a process group of its own) for each
// client, and spoken to over the protocol. A family wraps it in its own
// terms (the init it sends, what replies mean).
type Launcher struct {
	Command string
	// Timeout bounds an operation; 0 means 30 s. A process that does not
	// answer in time is killed and its operation's outcome is unknown.
	Timeout time.Duration
	// InitTimeout bounds the reply to init; 0 means 10 s, the protocol's
	// (docs/protocol.md). A process that does not answer in time did not
	// start.
	InitTimeout time.Duration
	// Redact, if set, hides what else than a URL's password (always
	// hidden) the errors of a start may show: a DSN's password, say.
	Redact func(string) string
	// Refusal, if set, says in the family's words what a definite error
	// answering init was, for "refused to start: ..."; unset, its code
	// and text.
	Refusal func(*ErrorReply) string
	// CheckInit, if set, reads the fields an init_ok declares (a family's
	// protocol names them) and says what is wrong with one, or "": a
	// process whose init_ok it faults did not start, and the error says
	// why, rather than a declaration being ignored.
	CheckInit func(Reply) string

	mu sync.Mutex
	// failed holds, by run, the starts of the implementation that failed
	// in it so far: only runs that had one, so that it stays small.
	failed map[string][]error
	procs  map[*Client]bool
	// spares holds, by run, the processes Warm started that no Connect
	// has taken yet.
	spares map[string][]*Client
	// connecting holds, by run, the processes whose Connect has not
	// returned: on a simulator, one whose World killed it while it
	// started never returns (its coroutine is dropped), and Drain kills
	// it with the spares.
	connecting map[string][]*Client
	// parked holds, by run, the processes that declared they take
	// another run (init_ok's "reuse": true) and answered reset_ok when
	// their client closed: the run may still signal them (a fault struck
	// on a client whose script ended), so they wait for its Drain. idle
	// holds those a Drain freed, sound: Connect and Spawn take them before
	// starting new ones.
	parked map[string][]*Client
	idle   []*Client
}

// HandshakeTimeout bounds the init exchange unless Launcher.InitTimeout
// says otherwise: the protocol's 10 s.
const HandshakeTimeout = 10 * time.Second

// Connect starts a process as client name of run (a plan's run: each has
// a name of its own, its lock's or table prefix, say) and shakes hands
// with init (its id is added). The implementation failing to start (it
// exited, hung, wrote garbage or refused with a definite error before
// init_ok) is a *prover.ImplementationError; after two in a run, the
// Launcher starts no more processes for that run and its every Connect
// fails with one. Failures are counted run by run so that each is charged
// to the run (the plan) whose process failed, never to another that
// happens to run at the same time or next. Any other error (a backend out
// of reach, as the process said with an *ErrorReply without Definite;
// ctx done) may pass if tried again. Stop kills the processes it started.
func (l *Launcher) Connect(ctx context.Context, run, name string, init Request) (*Client, error) {
	l.mu.Lock()
	if failed := l.failed[run]; len(failed) >= 2 {
		l.mu.Unlock()
		return nil, &prover.ImplementationError{Msg: fmt.Sprintf("%s not started: the implementation failed to start twice in this run (%v)", name, failed[len(failed)-1])}
	}
	l.mu.Unlock()
	var started *Client // heard in this goroutine, before the handshake
	ctx = context.WithValue(ctx, startedKey{}, func(c *Client) { started = c; l.connect(run, c, true) })
	ahead := l.take(run, name)
	if ahead == nil {
		ahead = l.reused(name)
	}
	c, err := l.launch(ctx, ahead, name, init)
	if started != nil {
		l.connect(run, started, false)
	}
	if err == nil {
		l.register(c)
		c.pool, c.run = nil, run
		if reuses(c.initOK) {
			c.pool = l
		}
		return c, nil
	}
	var ie *prover.ImplementationError
	if errors.As(err, &ie) {
		l.mu.Lock()
		if l.failed == nil {
			l.failed = map[string][]error{}
		}
		l.failed[run] = append(l.failed[run], err)
		l.mu.Unlock()
	}
	return nil, err
}

// Launch is Connect for a process of its own, outside the count of failed
// starts and Stop's reach (a preflight's probe, which the caller ends).
// On failure the process is gone.
func (l *Launcher) Launch(ctx context.Context, name string, init Request) (*Client, error) {
	return l.launch(ctx, nil, name, init)
}

// launch is Launch on started, a process Warm started, if not nil.
func (l *Launcher) launch(ctx context.Context, started *Client, name string, init Request) (*Client, error) {
	c, err := l.handshake(ctx, started, name, init)
	if err == nil || c == nil {
		return c, err
	}
	err = l.StartFailure(ctx, c, err)
	c.Kill()
	return nil, err
}

// Handshake starts a process as client name and sends it init. With a
// client, the error is init's as the process answered it (an
// *ErrorReply), or why it did not answer init_ok (then the client's
// Crashed says more), and the process is left for the caller to judge and
// kill (validate-impl's checks); without one, nothing started.
func (l *Launcher) Handshake(ctx context.Context, name string, init Request) (*Client, error) {
	return l.handshake(ctx, nil, name, init)
}

// handshake is Handshake on started, a process Warm started, if not nil.
func (l *Launcher) handshake(ctx context.Context, started *Client, name string, init Request) (*Client, error) {
	c, err := started, error(nil)
	if c == nil {
		c, err = start(l.Command, name, l.timeout())
	}
	if err == nil {
		c.exitGrace = max(ExitGrace, l.InitTimeout)
		c.waiter, _ = ctx.Value(waiterKey{}).(Waiter)
		if started, ok := ctx.Value(startedKey{}).(func(*Client)); ok {
			started(c)
		}
	}
	if err != nil {
		var ie *prover.ImplementationError
		if errors.As(err, &ie) {
			return nil, &prover.ImplementationError{Msg: l.redact(ie.Msg)}
		}
		return nil, err
	}
	c.initOK, err = c.Call(ctx, l.InitTimeoutOrDefault(), init, "init_ok")
	if err == nil && l.CheckInit != nil {
		if why := l.CheckInit(c.initOK); why != "" {
			err = &BadInit{c.GiveUp("sent an init_ok " + why)}
		}
	}
	return c, err
}

// A BadInit is an init_ok that Launcher.CheckInit faulted: the process
// answered init, but declared what it may not. The process is killed.
type BadInit struct{ err error }

func (b *BadInit) Error() string { return b.err.Error() }

// InitOK is the process's init_ok, whose fields beyond its type say what
// the implementation declares of itself (a family's protocol names them).
func (c *Client) InitOK() Reply { return c.initOK }

// StartFailure is err, the failure of c's handshake, as Connect reports
// it: a *prover.ImplementationError when the implementation failed itself
// (a definite refusal, a crash, a broken or missing reply); as it is when
// it may pass if tried again (an *ErrorReply without Definite: a backend
// out of reach; ctx done).
func (l *Launcher) StartFailure(ctx context.Context, c *Client, err error) error {
	var e *ErrorReply
	switch {
	case ctx.Err() != nil, errors.As(err, &e) && !e.Definite:
		return err
	case errors.As(err, &e):
		refusal := e.describe()
		if l.Refusal != nil {
			refusal = l.Refusal(e)
		}
		return &prover.ImplementationError{Msg: l.redact(fmt.Sprintf("%s refused to start: %s", c.name, refusal))}
	}
	why := strings.TrimPrefix(c.Crashed(), "crashed: ")
	if why == "" {
		why = err.Error()
	}
	return &prover.ImplementationError{Msg: l.redact(fmt.Sprintf("%s did not start: %s", c.name, why))}
}

// redact hides URLs' passwords in s, and whatever Redact hides.
func (l *Launcher) redact(s string) string {
	if l.Redact != nil {
		s = l.Redact(s)
	}
	return rabbitmq.Redact(s)
}

// String is the implementation's command, for reports.
func (l *Launcher) String() string { return fmt.Sprintf("the implementation %q", l.Command) }

func (l *Launcher) timeout() time.Duration {
	if l.Timeout > 0 {
		return l.Timeout
	}
	return 30 * time.Second
}

// InitTimeoutOrDefault is how long a process has to answer init.
func (l *Launcher) InitTimeoutOrDefault() time.Duration {
	if l.InitTimeout > 0 {
		return l.InitTimeout
	}
	return HandshakeTimeout
}

// Stop kills every process Connect started that is still running (after
// an interrupt, say).
func (l *Launcher) Stop() {
	l.mu.Lock()
	cs := make([]*Client, 0, len(l.procs))
	for c := range l.procs {
		cs = append(cs, c)
	}
	l.idle, l.parked = nil, nil
	l.mu.Unlock()
	for _, c := range cs {
		c.Kill()
	}
}

// A Request is one protocol request: its type and fields; Call adds the
// id.
type Request map[string]any

// A Client is one running process, of any family: started, read, timed
// out, signalled and ended the same way, and asked by Call. What its
// replies mean is its family's.
type Client struct {
	name    string
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	replies *inbox        // stdout's replies, line by line, and its end
	exited  chan struct{} // closed once the process has been reaped
	stderr  *tail
	timeout time.Duration
	gone    func()
	// exitGrace is how long the process has to exit once its stdin
	// closes (Checker.Ends): ExitGrace, or the init timeout the launcher
	// was given (Launcher.InitTimeout, --init-timeout) if longer.
	exitGrace time.Duration
	// initOK is the process's answer to init (InitOK).
	initOK Reply

	// out is stdout, read in full by whoever holds rmu: the reader's
	// goroutine, or Drain. partial is a line not ended yet; notices, if
	// set, handles the lines no request asked for (see OnNotice).
	out     syscall.RawConn
	rmu     sync.Mutex
	partial []byte
	eof     bool
	notices *noticeHandler

	mu       sync.Mutex
	next     int
	last     string // the last request sent
	crashed  string // why the process is gone or was given up on
	exitOnly bool   // crashed says only that it exited
	hung     bool   // crashed says that an operation got no answer in time
	killed   bool   // the harness killed it on purpose
	stopped  bool   // the harness paused it (SIGSTOP) and has not resumed it

	// waiter, if set, is how the client waits on the process (WithWaiter).
	waiter Waiter
	// pool, if set, is the launcher Close gives the process back to for
	// another run, reset, when it declared it takes one (reuses); run is
	// the run Connect started it for, whose Drain frees it for another.
	pool *Launcher
	run  string
}

// A Waiter is how a Client waits on its process when something must go on
// meanwhile: a served simulator (adapters/served) takes the process's
// frames while the client waits for its reply, and only then, since the
// simulator moves one process at a time.
type Waiter interface {
	// Sending is called before a request is written to the process.
	Sending()
	// Await returns once one of ready, expired or done has a value or
	// is closed: Ready, Expired or Done says which (it took that value).
	Await(ready <-chan struct{}, expired <-chan time.Time, done <-chan struct{}) Woke
}

// A ClockedWaiter is a Waiter with a clock of its own (a served
// simulator's virtual time), on which a request's bound is measured too:
// a request after init has d of real time and d of the waiter's time,
// whichever ends first, so that a process waiting on a simulated server
// is given up at the same point of the simulator's time in every run.
type ClockedWaiter interface {
	Waiter
	// Deadline is when d will have passed on the waiter's clock.
	Deadline(d time.Duration) int64
	// AwaitUntil is Await that also ends, Expired, once the waiter's
	// clock reaches deadline.
	AwaitUntil(deadline int64, ready <-chan struct{}, expired <-chan time.Time, done <-chan struct{}) Woke
}

// Woke is which of its channels ended a Waiter's Await.
type Woke int

// What ended an Await.
const (
	Ready Woke = iota
	Expired
	Done
)

type waiterKey struct{}

// startedKey is the context key of what Connect hears of a process it
// started, before its handshake.
type startedKey struct{}

// connect notes c, started for run, as connecting (on), or no longer.
func (l *Launcher) connect(run string, c *Client, on bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if on {
		if l.connecting == nil {
			l.connecting = map[string][]*Client{}
		}
		l.connecting[run] = append(l.connecting[run], c)
		return
	}
	l.connecting[run] = slices.DeleteFunc(l.connecting[run], func(x *Client) bool { return x == c })
	if len(l.connecting[run]) == 0 {
		delete(l.connecting, run)
	}
}

// WithWaiter returns ctx carrying w: a Client started by a Launcher with
// it waits through w, for init and every request and end after it.
func WithWaiter(ctx context.Context, w Waiter) context.Context {
	return context.WithValue(ctx, waiterKey{}, w)
}

// await waits, through the waiter if there is one, for one of the three.
func (c *Client) await(ready <-chan struct{}, expired <-chan time.Time, done <-chan struct{}) Woke {
	if c.waiter != nil {
		return c.waiter.Await(ready, expired, done)
	}
	select {
	case <-ready:
		return Ready
	case <-expired:
		return Expired
	case <-done:
		return Done
	}
}

func start(command, name string, timeout time.Duration) (*Client, error) {
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
	c := &Client{name: name, cmd: cmd, stdin: stdin, replies: newInbox(), exited: make(chan struct{}),
		stderr: &tail{}, timeout: timeout, next: 1}
	cmd.Stderr = c.stderr
	err = cmd.Start()
	w.Close()
	if err != nil {
		stdout.Close()
		return nil, &prover.ImplementationError{Msg: fmt.Sprintf("%s: cannot start %q: %v", name, command, err)}
	}
	go c.read(stdout)
	go func() {
		err := cmd.Wait()
		c.mu.Lock()
		if c.crashed == "" && !c.killed {
			c.crashed, c.exitOnly = fmt.Sprintf("exited (%v)", exitStatus(err)), true
		}
		gone := c.gone
		c.gone = func() {} // what registers it later has nothing to undo
		c.mu.Unlock()
		close(c.exited)
		if gone != nil {
			gone()
		}
	}()
	return c, nil
}

// read reads stdout until it ends, as its bytes come (see pull).
func (c *Client) read(stdout *os.File) {
	defer stdout.Close()
	raw, err := stdout.SyscallConn()
	if err != nil {
		c.replies.end()
		return
	}
	c.rmu.Lock()
	c.out = raw
	c.rmu.Unlock()
	raw.Read(func(fd uintptr) bool { return c.pull(fd) })
	c.rmu.Lock()
	if !c.eof { // the pipe failed: nothing more can be read
		c.finish()
	}
	c.rmu.Unlock()
}

// pull reads everything stdout holds now, without waiting, and hands its
// lines on (dispatch), with rmu held: the reader's goroutine and Drain
// read alike, one at a time. It says whether stdout has ended.
func (c *Client) pull(fd uintptr) bool {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	if c.eof {
		return true
	}
	var buf [64 << 10]byte
	for {
		n, err := syscall.Read(int(fd), buf[:])
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			return false
		case n > 0:
			c.split(buf[:n])
			continue
		}
		c.finish()
		return true
	}
}

// split hands on each whole line of what was read, keeping the rest.
func (c *Client) split(b []byte) {
	c.partial = append(c.partial, b...)
	for {
		i := bytes.IndexByte(c.partial, '\n')
		if i < 0 {
			return
		}
		line := strings.TrimRight(string(c.partial[:i]), "\r")
		c.partial = c.partial[i+1:]
		c.dispatch(line)
	}
}

// finish ends stdout (rmu held): a last line without its newline is
// handed on too.
func (c *Client) finish() {
	c.eof = true
	if len(c.partial) > 0 {
		line := strings.TrimRight(string(c.partial), "\r")
		c.partial = nil
		c.dispatch(line)
	}
	c.replies.end()
}

func exitStatus(err error) string {
	if err == nil {
		return "status 0"
	}
	return err.Error()
}

// Name is the client's name (c1, admin, probe, ...).
func (c *Client) Name() string { return c.name }

// Pid is the process's id (the leader of its process group).
func (c *Client) Pid() int { return c.cmd.Process.Pid }

// Timeout is the Launcher's bound on an operation.
func (c *Client) Timeout() time.Duration { return c.timeout }

// SetTimeout bounds the client's operations from now on by d instead:
// for a check whose request waits, by design, for another process the
// checker holds stopped (validate-impl's steal). Not for use while a
// request is under way.
func (c *Client) SetTimeout(d time.Duration) { c.timeout = d }

// A Reply is a process's answer to a request, in no family's terms: its
// type, one the request wanted, and its fields.
type Reply struct {
	Type   string
	Fields map[string]json.RawMessage
}

// An ErrorReply is a process's answer "error", in no family's terms:
// Definite, the request certainly had no effect; otherwise its outcome is
// unknown. Each family makes it an error of its own.
type ErrorReply struct {
	Code, Text string
	Definite   bool
}

func (e *ErrorReply) Error() string { return rabbitmq.Redact(e.Code + ": " + e.Text) }

// describe is the error's code, and its text if it has one.
func (e *ErrorReply) describe() string {
	if e.Text == "" {
		return e.Code
	}
	return e.Code + ": " + e.Text
}

// ErrGone is the error of a request to a process already gone or given up
// on: nothing was sent.
var ErrGone = errors.New("the process is gone")

// Call sends req and waits up to d (within ctx) for its reply, which must
// echo its id and have one of the types wants, or be an error. It returns
// the reply; an error reply is an *ErrorReply, a process already gone
// ErrGone, and anything else that goes wrong an error of unknown outcome
// with the process given up on.
func (c *Client) Call(ctx context.Context, d time.Duration, req Request, wants ...string) (Reply, error) {
	c.mu.Lock()
	if c.crashed != "" || c.killed {
		c.mu.Unlock()
		return Reply{}, ErrGone
	}
	id := c.next
	c.next++
	req["id"] = id
	line, _ := json.Marshal(req)
	c.last = string(line)
	c.mu.Unlock()
	if c.waiter != nil {
		c.waiter.Sending()
	}
	if _, err := c.stdin.Write(append(line, '\n')); err != nil {
		return Reply{}, c.ended(fmt.Sprintf("could not be written to (%v)", err))
	}
	text, err := c.reply(ctx, d, req["type"])
	if err != nil {
		return Reply{}, err
	}
	r, err := c.decode(text, id, wants)
	if err != nil {
		return Reply{}, err
	}
	if r.Type != "error" {
		return r, nil
	}
	return Reply{}, c.decodeError(r.Fields, text)
}

// reply waits up to d (within ctx) for the next reply line of a request
// of type typ.
func (c *Client) reply(ctx context.Context, d time.Duration, typ any) (string, error) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	await := c.await
	if cw, ok := c.waiter.(ClockedWaiter); ok && c.initOK.Type != "" {
		// An operation's bound, not init's: a process starting up is
		// not waiting on the simulator, and its start costs the
		// simulator no time.
		deadline := cw.Deadline(d)
		await = func(ready <-chan struct{}, expired <-chan time.Time, done <-chan struct{}) Woke {
			return cw.AwaitUntil(deadline, ready, expired, done)
		}
	}
	for {
		line, ok, ended := c.replies.take()
		switch {
		case ok:
			return line, nil
		case ended:
			return "", c.ended("closed its stdout")
		}
		switch await(c.replies.more, timer.C, ctx.Done()) {
		case Expired:
			return "", c.hang(typ, d)
		case Done:
			return "", c.GiveUp(fmt.Sprintf("did not answer before %v", ctx.Err()))
		}
	}
}

// An inbox holds the reply lines read and not yet taken, in order, and
// says when stdout has ended: the reader never waits for a taker.
type inbox struct {
	mu    sync.Mutex
	lines []string
	ended bool
	more  chan struct{} // has a value after a put or the end
}

func newInbox() *inbox { return &inbox{more: make(chan struct{}, 1)} }

func (b *inbox) put(line string) {
	b.mu.Lock()
	b.lines = append(b.lines, line)
	b.mu.Unlock()
	b.signal()
}

func (b *inbox) end() {
	b.mu.Lock()
	b.ended = true
	b.mu.Unlock()
	b.signal()
}

func (b *inbox) signal() {
	select {
	case b.more <- struct{}{}:
	default:
	}
}

// take is the oldest line (ok), or says that none is left and stdout has
// ended.
func (b *inbox) take() (line string, ok, ended bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.lines) > 0 {
		line = b.lines[0]
		b.lines = b.lines[1:]
		return line, true, false
	}
	return "", false, b.ended
}

// A Notice is a message a process wrote unasked: a JSON object with a
// "type" the family named (OnNotice) and no "id".
type Notice struct {
	Type   string
	Fields map[string]json.RawMessage
}

// noticeHandler is what OnNotice set.
type noticeHandler struct {
	types  []string
	handle func(Notice) error
}

// OnNotice makes the process's lines without an "id" notices, which
// handle receives as they are read (from the reader's goroutine, or from
// Drain's caller, one at a time), if their type is one of types: a family
// whose processes may speak unasked (a priority lock's victim saying that
// its lease was taken) names what they may say. Once it is set, a line
// without an id of any other type, or one handle refuses (its error says
// why), breaks the protocol: the process is given up on, at once. Set it
// before the first request that may cause a notice; replies (lines with an
// id) are read as ever.
func (c *Client) OnNotice(types []string, handle func(Notice) error) {
	c.rmu.Lock()
	c.notices = &noticeHandler{types: types, handle: handle}
	c.rmu.Unlock()
}

// Drain reads what the process has written to stdout so far and handles
// its notices before it returns (a line the process has not finished
// writing excepted). A notice the process wrote before something that
// another process then did, which lockprover saw (a thief's grant that
// the notice's acknowledgement allowed), is then handled before lockprover
// handles that: the reader's goroutine alone would handle it some time
// after the process wrote it, with no bound. It must not be called from a
// notice handler.
func (c *Client) Drain() {
	c.rmu.Lock()
	raw := c.out
	c.rmu.Unlock()
	if raw != nil {
		raw.Control(func(fd uintptr) { c.pull(fd) })
	}
}

// dispatch hands on a whole line read (rmu held): a notice to its handler
// at once, anything else to the replies.
func (c *Client) dispatch(line string) {
	h := c.notices
	if h == nil {
		c.replies.put(line)
		return
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal([]byte(line), &fields) != nil || fields == nil || fields["id"] != nil {
		c.replies.put(line) // a reply, or garbage that the next call reports
		return
	}
	var typ string
	if err := json.Unmarshal(fields["type"], &typ); err != nil || !slices.Contains(h.types, typ) {
		c.GiveUp(fmt.Sprintf("wrote a message without an id whose \"type\" is %s: only %s may come unasked: %.200s", orAbsent(fields["type"]), strings.Join(quoted(h.types), " or "), line))
		return
	}
	if err := h.handle(Notice{Type: typ, Fields: fields}); err != nil {
		c.GiveUp(fmt.Sprintf("wrote a %s notice that breaks the protocol (%v): %.200s", typ, err, line))
	}
}

// orAbsent is a field as it came, for a message: "absent" if it did not.
func orAbsent(raw json.RawMessage) string {
	if raw == nil {
		return "absent"
	}
	return string(raw)
}

// decode decodes text, the reply to request id, which must be a JSON
// object with that id and a type, one of wants or "error".
func (c *Client) decode(text string, id int, wants []string) (Reply, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal([]byte(text), &fields); err != nil || fields == nil {
		return Reply{}, c.GiveUp(fmt.Sprintf("wrote a line that is not a JSON object: %.200q", text))
	}
	rawID, ok := fields["id"]
	if !ok {
		return Reply{}, c.GiveUp(fmt.Sprintf("answered without an id: %.200s", text))
	}
	var gotID int
	if err := json.Unmarshal(rawID, &gotID); err != nil {
		return Reply{}, c.GiveUp(fmt.Sprintf("answered with an id that is not an integer (%s): %.200s", rawID, text))
	}
	var typ string
	if err := json.Unmarshal(fields["type"], &typ); err != nil || fields["type"] == nil {
		return Reply{}, c.GiveUp(fmt.Sprintf("answered without a \"type\" string: %.200s", text))
	}
	if gotID != id {
		return Reply{}, c.GiveUp(fmt.Sprintf("answered id %d to request id %d: %.200s", gotID, id, text))
	}
	if typ != "error" && !slices.Contains(wants, typ) {
		return Reply{}, c.GiveUp(fmt.Sprintf("answered %q to a request that wants %s: %.200s", typ, strings.Join(quoted(wants), " or "), text))
	}
	return Reply{Type: typ, Fields: fields}, nil
}

// decodeError decodes an error reply's fields (text is the whole line,
// for messages) into an *ErrorReply.
func (c *Client) decodeError(fields map[string]json.RawMessage, text string) error {
	e := &ErrorReply{}
	if err := json.Unmarshal(fields["code"], &e.Code); err != nil || e.Code == "" {
		return c.GiveUp(fmt.Sprintf("sent an error without a \"code\" string: %.200s", text))
	}
	if raw, ok := fields["text"]; ok {
		if err := json.Unmarshal(raw, &e.Text); err != nil {
			return c.GiveUp(fmt.Sprintf("sent an error whose \"text\" is not a string: %.200s", text))
		}
	}
	if raw, ok := fields["definite"]; ok {
		if err := json.Unmarshal(raw, &e.Definite); err != nil {
			return c.GiveUp(fmt.Sprintf("sent an error whose \"definite\" is not true or false: %.200s", text))
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

// GiveUp kills the process and records why (rather than a bare exit, which
// says less): a reply the family cannot read, say. The operation's outcome
// is unknown; the error says the process's name and why.
func (c *Client) GiveUp(why string) error {
	why = rabbitmq.Redact(why)
	c.mu.Lock()
	if c.crashed == "" || c.exitOnly {
		c.crashed, c.exitOnly = why, false
	}
	c.mu.Unlock()
	syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
	return fmt.Errorf("%s %s", c.name, why)
}

// hang gives the process up because it did not answer an operation of
// type typ within d, and says so plainly: a hang is a finding of its own
// ("hung: no answer to its refresh within 30s"), not a crash. An init
// that gets no answer is a start that failed, said as before ("did not
// answer within 10s (--init-timeout gives a process more)").
func (c *Client) hang(typ any, d time.Duration) error {
	if typ == "init" {
		return c.GiveUp(fmt.Sprintf("did not answer within %v (--init-timeout gives a process more)", d))
	}
	c.mu.Lock()
	c.hung = c.crashed == "" || c.exitOnly // GiveUp's why is the one kept
	c.mu.Unlock()
	return c.GiveUp(fmt.Sprintf("hung: no answer to its %v within %v", typ, d))
}

// ended is the error of a request the process can no longer answer: most
// often it has exited, and the error says so; one still running a second
// later is given up on for why.
func (c *Client) ended(why string) error {
	select {
	case <-c.exited:
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.crashed != "" {
			why = c.crashed
		}
		return fmt.Errorf("%s %s", c.name, why)
	case <-time.After(time.Second):
		return c.GiveUp(why)
	}
}

// Why describes the process's end for a report: the reason, its last
// request, and the end of its stderr.
func (c *Client) Why() string {
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

// Crashed says why the process is gone, with Why, if it crashed or was
// given up on (not if the harness killed it); "" otherwise. A process
// that hung says "hung: ..." (which operation, for how long) rather than
// "crashed: ...".
func (c *Client) Crashed() string {
	c.mu.Lock()
	crashed, hung := c.crashed != "" && !c.killed, c.hung
	c.mu.Unlock()
	switch {
	case !crashed:
		return ""
	case hung:
		return c.Why()
	}
	return "crashed: " + c.Why()
}

// ExitedCleanly says whether the process exited by itself with status 0.
func (c *Client) ExitedCleanly() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.exitOnly && c.crashed == "exited (status 0)"
}

// Broken says whether the process is gone or was given up on.
func (c *Client) Broken() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.crashed != "" || c.killed
}

// Signal delivers sig to the process group; a SIGKILL is the harness's own
// doing, not a crash. Once the process has exited (and was reaped, so its
// number may be another's) it does nothing.
func (c *Client) Signal(sig syscall.Signal) {
	select {
	case <-c.exited:
		return
	default:
	}
	c.mu.Lock()
	switch sig {
	case syscall.SIGKILL:
		c.killed = true
	case syscall.SIGSTOP:
		c.stopped = true
	case syscall.SIGCONT:
		c.stopped = false
	}
	c.mu.Unlock()
	syscall.Kill(-c.cmd.Process.Pid, sig)
}

// Kill kills the process group and waits for the process to be reaped.
func (c *Client) Kill() {
	c.Signal(syscall.SIGKILL)
	<-c.exited
}

// Close ends the process as the protocol says: stdin closes, then SIGTERM
// after 5 s, then SIGKILL after 5 more.
//
// A process that declared it takes another run (init_ok's "reuse": true),
// still sound, is sent reset instead and, once it answers reset_ok, kept
// for the launcher's next Connect (docs/protocol.md, "Ending").
func (c *Client) Close() error {
	if c.reset() {
		return nil
	}
	c.stdin.Close()
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		if c.await(c.exited, time.After(5*time.Second), nil) == Ready {
			return nil
		}
		c.mu.Lock()
		c.killed = true
		c.mu.Unlock()
		syscall.Kill(-c.cmd.Process.Pid, sig)
	}
	<-c.exited
	return nil
}

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

// reset forgets what the process wrote (its run is over).
func (t *tail) reset() {
	t.mu.Lock()
	t.buf = nil
	t.mu.Unlock()
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.buf))
}
