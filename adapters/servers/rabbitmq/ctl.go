package rabbitmq

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// A Ctl asks the broker's node what it holds, and acts on it, through
// rabbitmqctl: queues (Queue, QueueNames), connections (Connections,
// CloseConnection, CloseConnectionsFrom, Alive), channels (Channels), and
// the broker's application (StopApp, StartApp, Restart). A Cleaner uses it
// to find a run's queues and close the connections that hold them.
//
// A plain rabbitmqctl command boots an Erlang VM and costs 0.4 to 1.5 s
// here, far too slow for an await loop or for an inspection that must land
// inside a heartbeat window. So a Ctl first starts one long-lived
// `rabbitmqctl eval` whose expression is a small query loop (sessionLoop):
// it reads one command a line from the CLI's standard input, answers with
// the same functions list_queues, list_connections and close_connection
// call (rabbit_amqqueue:info/2, rabbit_networking:connection_info_all/1,
// rabbit_networking:close_connection/2) and ends each answer with a line
// ".". A query then costs about a millisecond. If the session cannot be
// started (a rabbitmqctl command that does not pass standard input, say),
// every query falls back to one plain rabbitmqctl command (list_queues,
// list_connections, close_connection), which is correct but slow.
//
// Pids are opaque strings that only this Ctl compares: the session prints
// them with pid_to_list on the broker node, the plain commands as the CLI
// prints them; the two are never mixed because a Ctl uses one mode. The
// commands that are run once in a while (CloseConnectionsFrom, StopApp,
// StartApp, Restart) are always plain commands.
type Ctl struct {
	cmd   []string // the rabbitmqctl command, e.g. {"rabbitmqctl"}
	vhost string

	mu       sync.Mutex
	sess     *session // nil: plain commands
	startErr error    // why the session did not start, when one was asked for
}

// QueueInfo is a queue as list_queues describes it.
type QueueInfo struct {
	Durable, AutoDelete bool
	OwnerPid            string // "" unless exclusive
	Messages            int    // ready messages (messages_ready)
	Consumers           int
}

// sessionLoop is the expression `rabbitmqctl eval` runs: a query loop over
// standard input. Commands: "i NAME" describes a queue (nothing if it does
// not exist; a queue whose process exits while asked, being deleted, is
// looked up again), "l PREFIX" lists queue names, "c PREFIX" lists
// connections by connection_name ("PID NAME"), "k PID REASON" closes a
// connection, "h PREFIX" counts the channel processes of those
// connections, "a PID" says whether the broker still holds anything of a
// connection. It avoids $, backquotes and backslashes because the
// rabbitmqctl wrapper script passes it through `sh -c "..."`.
const sessionLoop = `V = <<"VHOST">>,
Pid = fun(P) when is_pid(P) -> pid_to_list(P); (_) -> "-" end,
CName = fun(Props) when is_list(Props) -> case lists:keyfind(<<"connection_name">>, 1, Props) of {_, _, N} when is_binary(N) -> N; _ -> <<>> end; (_) -> <<>> end,
QInfo = fun QI(N, Tries) ->
  case rabbit_amqqueue:lookup(rabbit_misc:r(V, queue, list_to_binary(N))) of
    {ok, Q} ->
      try rabbit_amqqueue:info(Q, [durable, auto_delete, owner_pid, messages_ready, consumers]) of
        I ->
          G = fun(K) -> proplists:get_value(K, I) end,
          [io_lib:format("q ~w ~w ~s ~w ~w", [G(durable), G(auto_delete), Pid(G(owner_pid)), G(messages_ready), G(consumers)])]
      catch exit:_ when Tries > 0 -> timer:sleep(1), QI(N, Tries - 1)
      end;
    _ -> []
  end
end,
Cmd = fun
  ("i", N) -> QInfo(N, 100);
  ("l", P) ->
    [binary_to_list(N) || Q <- rabbit_amqqueue:list(V), {resource, _, queue, N} <- [amqqueue:get_name(Q)], lists:prefix(P, binary_to_list(N))];
  ("c", P) ->
    [io_lib:format("~s ~s", [Pid(proplists:get_value(pid, I)), CName(proplists:get_value(client_properties, I))])
     || I <- rabbit_networking:connection_info_all([pid, client_properties]), lists:prefix(P, binary_to_list(CName(proplists:get_value(client_properties, I))))];
  ("k", A) ->
    [S, Why] = string:split(A, " "),
    ok = rabbit_networking:close_connection(list_to_pid(S), Why),
    ["ok"];
  ("h", P) ->
    Cs = [proplists:get_value(pid, I) || I <- rabbit_networking:connection_info_all([pid, client_properties]), lists:prefix(P, binary_to_list(CName(proplists:get_value(client_properties, I))))],
    [integer_to_list(length([x || I <- rabbit_channel:info_all([connection]), lists:member(proplists:get_value(connection, I), Cs)]))];
  ("a", S) ->
    P = list_to_pid(S),
    Alive = is_process_alive(P)
      orelse lists:any(fun(I) -> proplists:get_value(connection, I) =:= P end, rabbit_channel:info_all([connection]))
      orelse lists:any(fun(Q) -> amqqueue:get_exclusive_owner(Q) =:= P end, rabbit_amqqueue:list(V)),
    [case Alive of true -> "alive"; false -> "dead" end]
end,
Loop = fun L() ->
  case io:get_line("") of
    eof -> ok;
    {error, _} -> ok;
    Line ->
      [C | Rest] = string:split(string:trim(unicode:characters_to_list(Line)), " "),
      Arg = case Rest of [] -> ""; [R] -> R end,
      Out = try Cmd(C, Arg) catch K:E -> [io_lib:format("error ~w:~w", [K, E])] end,
      lists:foreach(fun(O) -> io:format("~s~n", [O]) end, Out),
      io:format(".~n"),
      L()
  end
end,
io:format(".~n"),
Loop().`

// session is a running `rabbitmqctl eval sessionLoop`.
type session struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	lines  chan string
	stderr *bytes.Buffer
	broken error         // set on a stand-in for a session that could not restart
	done   chan struct{} // closed by close
}

const (
	// The CLI boots, connects, evaluates: about 2 s on a quiet machine;
	// more than 20 s in CI beside the suite, where conform then fell back
	// to plain commands and its timed cases diverged.
	sessionStart = time.Minute
	sessionQuery = 10 * time.Second
)

func startSession(cmd []string, vhost string) (*session, error) {
	if !safeVhost.MatchString(vhost) {
		return nil, fmt.Errorf("vhost %q: the session takes letters, digits and -_./ only", vhost)
	}
	expr := strings.ReplaceAll(strings.Join(strings.Fields(sessionLoop), " "), "VHOST", vhost)
	c := exec.Command(cmd[0], append(cmd[1:], "eval", expr)...)
	in, err := c.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := c.StdoutPipe()
	if err != nil {
		return nil, err
	}
	s := &session{cmd: c, in: in, lines: make(chan string, 64), stderr: &bytes.Buffer{}, done: make(chan struct{})}
	c.Stderr = s.stderr
	if err := c.Start(); err != nil {
		return nil, err
	}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		defer close(s.lines)
		for sc.Scan() {
			select {
			case s.lines <- sc.Text():
			case <-s.done:
				return
			}
		}
	}()
	// The loop prints "." once it runs; then it must answer a first
	// query. RabbitMQ 4.x's rabbitmqctl (measured: 4.0.5 and 4.3.6 from
	// their Debian roots) passes the expression no standard input, so its
	// loop ends at its first read: such a CLI gets plain commands.
	if _, err := s.read(sessionStart); err != nil {
		s.close()
		return nil, fmt.Errorf("rabbitmqctl eval session: %w (stderr: %s)", err, strings.TrimSpace(s.stderr.String()))
	}
	if _, err := s.query("l " + noQueue); err != nil {
		s.close()
		return nil, fmt.Errorf("rabbitmqctl eval session: its first query: %w (a rabbitmqctl whose eval reads no standard input, as 4.x's)", err)
	}
	return s, nil
}

// noQueue is a prefix no queue's name has: the session's first query
// lists nothing.
const noQueue = "lockprover-session-probe/"

// read collects lines up to the terminating ".".
func (s *session) read(timeout time.Duration) ([]string, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	var got []string
	for {
		select {
		case l, ok := <-s.lines:
			if !ok {
				return nil, errors.New("the session ended")
			}
			if l == "." {
				return got, nil
			}
			got = append(got, l)
		case <-t.C:
			return nil, fmt.Errorf("no answer within %v", timeout)
		}
	}
}

// query sends one command and reads its answer. An error that is not an
// *evalError means the session is broken (its answers may no longer line
// up with its questions).
func (s *session) query(line string) ([]string, error) {
	if s.broken != nil {
		return nil, s.broken
	}
	if _, err := io.WriteString(s.in, line+"\n"); err != nil {
		return nil, err
	}
	out, err := s.read(sessionQuery)
	if err != nil {
		return nil, err
	}
	if len(out) == 1 && strings.HasPrefix(out[0], "error ") {
		return nil, &evalError{out[0]}
	}
	return out, nil
}

// evalError is an error the query loop caught and reported; the session
// goes on.
type evalError struct{ text string }

func (e *evalError) Error() string { return "rabbitmqctl eval: " + e.text }

func (s *session) close() {
	if s.cmd == nil {
		return
	}
	close(s.done)
	s.in.Close()
	done := make(chan struct{})
	go func() { s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		s.cmd.Process.Kill()
		<-done
	}
}

// NewCtl returns a Ctl for the node of a broker, on its vhost: cmd is the
// rabbitmqctl command (nil means {"rabbitmqctl"}; it must pass standard
// input through for the session). It uses a session if one starts, plain
// commands otherwise (or always, with plain set). Close it when done.
func NewCtl(cmd []string, vhost string, plain bool) *Ctl {
	if len(cmd) == 0 {
		cmd = []string{"rabbitmqctl"}
	}
	c := &Ctl{cmd: cmd, vhost: vhost}
	if !plain {
		c.sess, c.startErr = startSession(cmd, vhost)
	}
	return c
}

// Close ends the session, if one runs.
func (c *Ctl) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sess != nil {
		c.sess.close()
		c.sess = nil
	}
}

// Fast reports whether queries go through a session (about a millisecond
// each) rather than plain commands (about a second).
func (c *Ctl) Fast() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sess != nil
}

// SessionErr is why queries are plain commands although a session was
// asked for (nil otherwise): what starting it said.
func (c *Ctl) SessionErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sess != nil {
		return nil
	}
	return c.startErr
}

// query runs one session query. A broken session is replaced by a new one,
// once, and the query asked again.
func (c *Ctl) query(line string) ([]string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out, err := c.sess.query(line)
	var ee *evalError
	if err == nil || errors.As(err, &ee) {
		return out, err
	}
	c.sess.close()
	s, err2 := startSession(c.cmd, c.vhost)
	if err2 != nil {
		c.sess = &session{broken: fmt.Errorf("rabbitmqctl eval session broke (%v) and did not restart: %w", err, err2)}
		return nil, c.sess.broken
	}
	c.sess = s
	return c.sess.query(line)
}

// run runs one plain rabbitmqctl command and returns its standard output;
// its error is a *cmdError.
func (c *Ctl) run(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, c.cmd[0], append(c.cmd[1:], args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	// A cancelled command ends within a second even when a child of its
	// (a wrapper's) still holds its output open.
	cmd.WaitDelay = time.Second
	out, err := cmd.Output()
	if err != nil {
		return "", &cmdError{cmd: append(c.cmd[:len(c.cmd):len(c.cmd)], args...), err: err, stderr: strings.TrimSpace(stderr.String())}
	}
	return string(out), nil
}

// cmdError is a plain rabbitmqctl command that failed: the command line,
// what exec said (its exit status) and what rabbitmqctl said.
type cmdError struct {
	cmd    []string
	err    error
	stderr string
}

func (e *cmdError) Error() string {
	return fmt.Sprintf("%s: %v: %s", strings.Join(e.cmd, " "), e.err, e.stderr)
}

func (e *cmdError) Unwrap() error { return e.err }

// status is what exec said about a failed plain command (its exit status,
// or that rabbitmqctl is not there), without the command line and
// rabbitmqctl's words: the short form the faults and restarts report.
func status(err error) error {
	var ce *cmdError
	if errors.As(err, &ce) {
		return ce.err
	}
	return err
}

func (c *Ctl) vhostArgs() []string { return []string{"-p", c.vhost} }

// Queue describes the queue named name; ok is false when it does not exist.
func (c *Ctl) Queue(ctx context.Context, name string) (QueueInfo, bool, error) {
	if c.Fast() {
		out, err := c.query("i " + name)
		if err != nil || len(out) == 0 {
			return QueueInfo{}, false, err
		}
		return parseSessionQueue(out[0])
	}
	out, err := c.run(ctx, append([]string{"-q", "list_queues"}, append(c.vhostArgs(), "name", "durable", "auto_delete", "owner_pid", "messages_ready", "consumers", "--no-table-headers")...)...)
	if err != nil {
		return QueueInfo{}, false, err
	}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 6 || f[0] != name {
			continue
		}
		q := QueueInfo{Durable: f[1] == "true", AutoDelete: f[2] == "true", OwnerPid: f[3]}
		var err1, err2 error
		q.Messages, err1 = strconv.Atoi(f[4])
		q.Consumers, err2 = strconv.Atoi(f[5])
		if err := errors.Join(err1, err2); err != nil {
			return QueueInfo{}, false, fmt.Errorf("list_queues line %q: %w", line, err)
		}
		return q, true, nil
	}
	return QueueInfo{}, false, nil
}

func parseSessionQueue(line string) (QueueInfo, bool, error) {
	f := strings.Fields(line)
	if len(f) != 6 || f[0] != "q" {
		return QueueInfo{}, false, fmt.Errorf("rabbitmqctl eval: unexpected answer %q", line)
	}
	q := QueueInfo{Durable: f[1] == "true", AutoDelete: f[2] == "true"}
	if f[3] != "-" {
		q.OwnerPid = f[3]
	}
	var err1, err2 error
	q.Messages, err1 = strconv.Atoi(f[4])
	q.Consumers, err2 = strconv.Atoi(f[5])
	if err := errors.Join(err1, err2); err != nil {
		return QueueInfo{}, false, fmt.Errorf("rabbitmqctl eval: answer %q: %w", line, err)
	}
	return q, true, nil
}

// QueueNames lists the queues whose names start with prefix.
func (c *Ctl) QueueNames(ctx context.Context, prefix string) ([]string, error) {
	if c.Fast() {
		names, err := c.query("l " + prefix)
		if err == nil || ctx.Err() != nil {
			return names, err
		}
		// The session failed (on a node of a Debian root it ended at its
		// first query: not diagnosed): a plain list_queues, a second of
		// CPU, rather than no listing.
	}
	out, err := c.run(ctx, append([]string{"-q", "list_queues"}, append(c.vhostArgs(), "name", "--no-table-headers")...)...)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, n := range strings.Split(out, "\n") {
		if strings.HasPrefix(n, prefix) {
			names = append(names, n)
		}
	}
	return names, nil
}

var safeVhost = regexp.MustCompile(`^[A-Za-z0-9_./-]+$`)

// VhostOf is the vhost an amqp:// URL names, "/" when it names none.
func VhostOf(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "/"
	}
	vhost := strings.TrimPrefix(u.Path, "/")
	if vhost == "" {
		vhost = "/"
	}
	vhost, _ = url.PathUnescape(vhost)
	return vhost
}

var connectionName = regexp.MustCompile(`\{"connection_name","([^"]*)"\}`)

// Connections maps the pid of every connection whose connection_name
// starts with prefix to that name.
func (c *Ctl) Connections(ctx context.Context, prefix string) (map[string]string, error) {
	m := map[string]string{}
	if c.Fast() {
		out, err := c.query("c " + prefix)
		if err != nil {
			return nil, err
		}
		for _, l := range out {
			pid, name, _ := strings.Cut(l, " ")
			m[pid] = name
		}
		return m, nil
	}
	out, err := c.run(ctx, append([]string{"-q", "list_connections"}, append(c.vhostArgs(), "pid", "client_properties", "--no-table-headers")...)...)
	if err != nil {
		return nil, err
	}
	for _, l := range strings.Split(out, "\n") {
		pid, props, ok := strings.Cut(l, "\t")
		if !ok {
			continue
		}
		if n := connectionName.FindStringSubmatch(props); n != nil && strings.HasPrefix(n[1], prefix) {
			m[pid] = n[1]
		}
	}
	return m, nil
}

// CloseConnection closes a connection from the broker, as rabbitmqctl
// close_connection does: the client gets 320 CONNECTION_FORCED - reason.
func (c *Ctl) CloseConnection(ctx context.Context, pid, reason string) error {
	if c.Fast() {
		_, err := c.query("k " + pid + " " + reason)
		return err
	}
	_, err := c.run(ctx, "close_connection", pid, reason)
	return err
}

// CloseConnectionsFrom closes, as CloseConnection does, every connection
// whose client address (host:port as the broker sees it, such as a
// proxy's BrokerSide) is one of addrs. It lists them with a plain
// list_connections (which names each "CLIENT -> BROKER") and closes them
// with plain close_connection commands.
func (c *Ctl) CloseConnectionsFrom(ctx context.Context, addrs []string, reason string) error {
	if len(addrs) == 0 {
		return nil
	}
	out, err := c.run(ctx, "-q", "list_connections", "pid", "name")
	if err != nil {
		return fmt.Errorf("force-close needs rabbitmqctl: %v", status(err))
	}
	for _, line := range strings.Split(out, "\n") {
		pid, name, ok := strings.Cut(strings.TrimSpace(line), "\t")
		if !ok {
			continue
		}
		for _, a := range addrs {
			if strings.HasPrefix(name, a+" ") {
				if _, err := c.run(ctx, "-q", "close_connection", pid, reason); err != nil {
					return fmt.Errorf("rabbitmqctl close_connection: %v", status(err))
				}
			}
		}
	}
	return nil
}

// StopApp stops the broker's application (rabbitmqctl stop_app): every
// client of the broker is cut off and new ones are refused until StartApp.
func (c *Ctl) StopApp(ctx context.Context) error {
	_, err := c.run(ctx, "stop_app")
	return err
}

// StartApp starts the broker's application again (rabbitmqctl start_app).
func (c *Ctl) StartApp(ctx context.Context) error {
	_, err := c.run(ctx, "start_app")
	return err
}

// Restart stops and starts the broker's application and waits until it
// has started (rabbitmqctl stop_app, start_app, await_startup of up to
// 60 s).
func (c *Ctl) Restart(ctx context.Context) error {
	for _, args := range [][]string{{"stop_app"}, {"start_app"}, {"await_startup", "--timeout", "60"}} {
		if _, err := c.run(ctx, append([]string{"-q"}, args...)...); err != nil {
			return fmt.Errorf("rabbitmqctl %s: %v", args[0], status(err))
		}
	}
	return nil
}

// Channels counts the live channel processes of the connections whose
// connection_name starts with prefix. Plain mode (a rabbitmqctl whose
// eval serves no session, as 4.x's) asks list_connections, then
// list_channels: two commands, a second or two.
func (c *Ctl) Channels(prefix string) (int, error) {
	if !c.Fast() {
		ctx, cancel := context.WithTimeout(context.Background(), sessionStart)
		defer cancel()
		conns, err := c.Connections(ctx, prefix)
		if err != nil {
			return 0, err
		}
		out, err := c.run(ctx, "-q", "list_channels", "connection", "--no-table-headers")
		if err != nil {
			return 0, err
		}
		n := 0
		for _, l := range strings.Split(out, "\n") {
			if _, ok := conns[strings.TrimSpace(l)]; ok {
				n++
			}
		}
		return n, nil
	}
	out, err := c.query("h " + prefix)
	if err != nil {
		return 0, err
	}
	if len(out) != 1 {
		return 0, fmt.Errorf("rabbitmqctl eval: unexpected answer %q", out)
	}
	return strconv.Atoi(out[0])
}

// Alive reports whether the broker still holds anything of the connection
// with this pid: its process, one of its channels, or an exclusive queue it
// owns. Plain mode sees only the last two, through list_connections and
// list_queues.
func (c *Ctl) Alive(ctx context.Context, pid, prefix string) (bool, error) {
	if c.Fast() {
		out, err := c.query("a " + pid)
		if err != nil {
			return false, err
		}
		return len(out) == 1 && out[0] == "alive", nil
	}
	conns, err := c.Connections(ctx, prefix)
	if err != nil {
		return false, err
	}
	if _, ok := conns[pid]; ok {
		return true, nil
	}
	out, err := c.run(ctx, append([]string{"-q", "list_queues"}, append(c.vhostArgs(), "owner_pid", "--no-table-headers")...)...)
	if err != nil {
		return false, err
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.TrimSpace(l) == pid {
			return true, nil
		}
	}
	return false, nil
}
