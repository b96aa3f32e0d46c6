package amqpserve_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockprover/lockprover/internal/realtime"
	"github.com/lockprover/lockprover/model/amqplocks/broker"
)

// A wireClient is a client library in a process of its own (pika, amqplib)
// whose connections implement broker.Broker: the program
// (testdata/clients/<lib>_client.*) reads one JSON request a line, takes
// them one at a time, answers each with its result or the error as the
// library gave it, and writes the library's asynchronous events (a
// connection or channel closed, a return, a delivery, a consumer the
// broker cancelled) as they come, before the answer they came during. It
// is a test helper: nothing outside the wire differential needs one.
//
// The mapping is the amqp091-go adapter's (adapters/servers/rabbitmq), so
// that semantics.Run observes through pika and amqplib as through
// amqp091-go: a close the broker sent is a *broker.Error with its code,
// Server set; a call on what the library knows closed is a client-side
// 504 (Connection if the connection is closed); a socket gone without an
// AMQP close is 501 on the connection; closing a channel already closed
// is nil; Publish needs Confirm first (broker.ErrNotConfirming, nothing
// sent); a second Confirm sends nothing. Conn.Err is what the library's
// events said, with no request: the programs have their library read
// every open connection between requests.
type wireClient struct {
	lib     string
	version string // the library's, as the program says in its hello
	cmd     *exec.Cmd
	in      io.WriteCloser
	stderr  *syncBuffer
	exited  chan struct{} // closed once its stdout ended

	serial sync.Mutex // one request at a time, as the programs take them

	mu      sync.Mutex
	next    int              // the id of the last request
	answers chan clientReply // the answer to request next
	closed  map[int]error    // connections and channels that closed, by the program's id: why
	events  []string         // every event, in order, for a failure's report
	end     error            // why the program ended
}

// clientReply is one line of a program: an answer (ID), or an event.
type clientReply struct {
	ID        int          `json:"id"`
	Event     string       `json:"event"`
	Library   string       `json:"library"`
	Conn      int          `json:"conn"`
	Chan      int          `json:"chan"`
	Error     *clientError `json:"error"`
	Queue     string       `json:"queue"`
	Messages  int          `json:"messages"`
	Consumers int          `json:"consumers"`
	Count     int          `json:"count"`
	Acked     bool         `json:"acked"`
	Returned  bool         `json:"returned"`
	Got       bool         `json:"got"`
	Tag       string       `json:"tag"`
	Code      int          `json:"code"`
}

// clientError is an error as a program describes it: kind broker (the
// broker closed the channel or the connection), closed (used after it
// closed), lost (the socket went without an AMQP close), refused (no
// broker at the address), or other; scope channel or connection.
type clientError struct {
	Kind  string `json:"kind"`
	Class string `json:"class"`
	Code  int    `json:"code"`
	Text  string `json:"text"`
	Scope string `json:"scope"`
}

// err is the error as the amqp091-go adapter would give it.
func (e *clientError) err(lib string) error {
	conn := e.Scope == "connection"
	switch e.Kind {
	case "broker":
		return &broker.Error{Code: e.Code, Reason: e.Text, Server: true, Connection: conn}
	case "closed":
		return &broker.Error{Code: broker.ChannelError, Reason: lib + ": " + e.Text, Connection: conn}
	case "lost":
		return &broker.Error{Code: broker.FrameError, Reason: lib + ": " + e.Text, Connection: true}
	case "refused":
		return fmt.Errorf("%s: dial: %w: %s", lib, broker.ErrRefused, e.Text)
	}
	return fmt.Errorf("%s: %s: %s", lib, e.Class, e.Text)
}

// request is one line to a program; its fields are the programs' (see
// their doc).
type request struct {
	ID         int            `json:"id"`
	Op         string         `json:"op"`
	Conn       int            `json:"conn,omitempty"`
	Chan       int            `json:"chan,omitempty"`
	URL        string         `json:"url,omitempty"`
	Name       string         `json:"name,omitempty"`
	Heartbeat  int            `json:"heartbeat,omitempty"`
	Queue      string         `json:"queue"`
	Exchange   string         `json:"exchange,omitempty"`
	Key        string         `json:"key,omitempty"`
	Passive    bool           `json:"passive,omitempty"`
	Durable    bool           `json:"durable,omitempty"`
	Exclusive  bool           `json:"exclusive,omitempty"`
	AutoDelete bool           `json:"auto_delete,omitempty"`
	IfUnused   bool           `json:"if_unused,omitempty"`
	IfEmpty    bool           `json:"if_empty,omitempty"`
	Mandatory  bool           `json:"mandatory,omitempty"`
	Immediate  bool           `json:"immediate,omitempty"`
	Persistent bool           `json:"persistent,omitempty"`
	Args       map[string]any `json:"args,omitempty"`
	Body       []byte         `json:"body,omitempty"`
}

// clientLibs are the libraries a wireClient can be, in the order the
// differential runs them.
var clientLibs = []string{"pika", "amqplib"}

// startClient starts lib's program for t and ends it at t's end. It skips
// t when lib is not installed here, saying how to install it.
func startClient(t *testing.T, lib string) *wireClient {
	t.Helper()
	cmd, missing := clientCommand(lib)
	if missing != "" {
		t.Skip(missing)
	}
	c, err := runClient(lib, cmd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.stop)
	return c
}

// clientCommand is the command of lib's program, or why lib cannot run
// here and how to install it.
func clientCommand(lib string) (*exec.Cmd, string) {
	dir, err := filepath.Abs("testdata/clients")
	if err != nil {
		return nil, err.Error()
	}
	switch lib {
	case "pika":
		if exec.Command("/usr/bin/python3", "-c", "import pika").Run() != nil {
			return nil, "pika's differential needs Debian's python3-pika for /usr/bin/python3 (apt-get install python3-pika)"
		}
		return exec.Command("/usr/bin/python3", filepath.Join(dir, "pika_client.py")), ""
	case "amqplib":
		node, err := exec.LookPath("node")
		if err != nil {
			return nil, "amqplib's differential needs node (apt-get install nodejs)"
		}
		modules, _ := filepath.Abs("../../../examples/node/amqp-locks/node_modules")
		if _, err := os.Stat(filepath.Join(modules, "amqplib")); err != nil {
			return nil, fmt.Sprintf("amqplib's differential needs the Node example's packages: run npm ci in examples/node/amqp-locks: %v", err)
		}
		cmd := exec.Command(node, filepath.Join(dir, "amqplib_client.js"))
		cmd.Env = append(os.Environ(), "NODE_PATH="+modules)
		return cmd, ""
	}
	return nil, fmt.Sprintf("no client library %q: want one of %v", lib, clientLibs)
}

// runClient starts cmd, lib's program, and waits for its hello.
func runClient(lib string, cmd *exec.Cmd) (*wireClient, error) {
	c := &wireClient{lib: lib, cmd: cmd, stderr: &syncBuffer{}, exited: make(chan struct{}), closed: map[int]error{}}
	cmd.Stderr = c.stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	c.in = in
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s's program: %w", lib, err)
	}
	hello := make(chan struct{})
	go c.read(out, hello)
	select {
	case <-hello:
		return c, nil
	case <-c.exited:
	case <-time.After(time.Minute):
		c.stop()
	}
	return nil, fmt.Errorf("%s's program said no hello: %v\n%s", lib, c.ended(), c.stderr)
}

// stop ends the program: its stdin closes, and it is killed if it has not
// ended a few seconds later.
func (c *wireClient) stop() {
	c.in.Close()
	select {
	case <-c.exited:
	case <-time.After(5 * time.Second):
		c.cmd.Process.Kill()
		<-c.exited
	}
	c.cmd.Wait()
}

// read takes the program's lines until its stdout ends.
func (c *wireClient) read(out io.Reader, hello chan struct{}) {
	defer close(c.exited)
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<16), 1<<24)
	for sc.Scan() {
		var r clientReply
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			c.fail(fmt.Errorf("%s's program wrote %q: %v", c.lib, sc.Text(), err))
			return
		}
		if r.Event == "" {
			c.mu.Lock()
			if r.ID == c.next && c.answers != nil {
				c.answers <- r
				c.answers = nil
			}
			c.mu.Unlock()
			continue
		}
		c.event(r)
		if r.Event == "hello" {
			close(hello)
		}
	}
	c.fail(fmt.Errorf("%s's program ended: %v", c.lib, sc.Err()))
}

// event records one of the library's events.
func (c *wireClient) event(r clientReply) {
	c.mu.Lock()
	defer c.mu.Unlock()
	line := r.Event
	if r.Error == nil && (r.Event == "conn-closed" || r.Event == "chan-closed") {
		r.Error = &clientError{Kind: "other", Class: "none", Text: c.lib + "'s program gave no reason"}
	}
	switch r.Event {
	case "hello":
		c.version = r.Library
	case "conn-closed":
		r.Error.Scope = "connection"
		c.closed[r.Conn] = r.Error.err(c.lib)
		line += fmt.Sprintf(" %d: %v", r.Conn, c.closed[r.Conn])
	case "chan-closed":
		c.closed[r.Chan] = r.Error.err(c.lib)
		line += fmt.Sprintf(" %d: %v", r.Chan, c.closed[r.Chan])
	default:
		line += fmt.Sprintf(" on channel %d %s %d", r.Chan, r.Tag, r.Code)
	}
	c.events = append(c.events, line)
}

func (c *wireClient) fail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.end == nil {
		c.end = err
	}
}

func (c *wireClient) ended() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.end
}

// Err says why the program ended, with what it wrote on stderr, or nil
// while it runs.
func (c *wireClient) Err() error {
	if err := c.ended(); err != nil {
		return fmt.Errorf("%w\n%s", err, c.stderr)
	}
	return nil
}

// closedErr is why the connection or channel of that id closed, or nil.
func (c *wireClient) closedErr(id int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed[id]
}

// do sends req and waits for its answer. The answer's error is mapped
// (clientError.err). If ctx ends first, the request is abandoned: its
// answer, when it comes, is dropped, and conn (if not 0) counts as lost,
// as the amqp091-go adapter tears down a connection whose request it
// gave up on.
func (c *wireClient) do(ctx context.Context, conn int, req request) (clientReply, error) {
	if err := ctx.Err(); err != nil {
		return clientReply{}, err
	}
	c.serial.Lock()
	defer c.serial.Unlock()
	answer := make(chan clientReply, 1)
	c.mu.Lock()
	if c.end != nil {
		c.mu.Unlock()
		return clientReply{}, c.Err()
	}
	c.next++
	req.ID = c.next
	c.answers = answer
	c.mu.Unlock()
	line, err := json.Marshal(req)
	if err != nil {
		return clientReply{}, err
	}
	if _, err := c.in.Write(append(line, '\n')); err != nil {
		return clientReply{}, fmt.Errorf("%s's program: %w", c.lib, err)
	}
	select {
	case r := <-answer:
		if r.Error != nil {
			return r, r.Error.err(c.lib)
		}
		return r, nil
	case <-c.exited:
		return clientReply{}, c.Err()
	case <-ctx.Done():
		be := &broker.Error{Code: broker.FrameError, Reason: fmt.Sprintf("%s: %s abandoned: %v", c.lib, req.Op, ctx.Err()), Connection: true}
		c.mu.Lock()
		c.answers = nil
		if conn != 0 && c.closed[conn] == nil {
			c.closed[conn] = be
		}
		c.mu.Unlock()
		return clientReply{}, fmt.Errorf("%w: %w", ctx.Err(), be)
	}
}

// Events are the library's events so far, one a line, for a failure's
// report.
func (c *wireClient) Events() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.Join(c.events, "\n")
}

// at is the client's broker.Broker dialling url: conform.Options.Client's
// shape.
func (c *wireClient) at(url string) broker.Broker { return &clientBroker{c: c, url: url} }

// clientBroker dials url through the client's library.
type clientBroker struct {
	c   *wireClient
	url string

	mu      sync.Mutex
	dialled []*clientConn
}

func (b *clientBroker) Dial(ctx context.Context, cfg broker.Config) (broker.Conn, error) {
	hb := 0
	switch {
	case cfg.Heartbeat < 0:
		hb = -1
	case cfg.Heartbeat > 0:
		hb = int((cfg.Heartbeat + time.Second - 1) / time.Second)
	}
	r, err := b.c.do(ctx, 0, request{Op: "dial", URL: b.url, Name: cfg.Name, Heartbeat: hb})
	if err != nil {
		return nil, err
	}
	cn := &clientConn{c: b.c, id: r.Conn, name: cfg.Name}
	b.mu.Lock()
	b.dialled = append(b.dialled, cn)
	b.mu.Unlock()
	return cn, nil
}

func (b *clientBroker) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	return realtime.Sleep(ctx, d)
}

// noticed waits until every connection dialled with name knows it is
// closed (its library's event came), at most 5 s: after a fault, as
// conform's Env waits for amqp091-go.
func (b *clientBroker) noticed(name string) error {
	b.mu.Lock()
	dialled := append([]*clientConn(nil), b.dialled...)
	b.mu.Unlock()
	deadline := time.Now().Add(5 * time.Second)
	for _, cn := range dialled {
		for cn.name == name && cn.Err() == nil {
			if time.Now().After(deadline) {
				return fmt.Errorf("%s did not notice its connection %s closing within 5 s\nits events:\n%s", b.c.lib, name, b.c.Events())
			}
			time.Sleep(time.Millisecond)
		}
	}
	return nil
}

// clientConn is one connection of the library.
type clientConn struct {
	c    *wireClient
	id   int
	name string
}

func (cn *clientConn) Err() error { return cn.c.closedErr(cn.id) }

func (cn *clientConn) Channel(ctx context.Context) (broker.Channel, error) {
	r, err := cn.c.do(ctx, cn.id, request{Op: "channel", Conn: cn.id})
	if err != nil {
		return nil, err
	}
	return &clientChan{cn: cn, id: r.Chan}, nil
}

// Close sends connection.close, 30 s at most, as the amqp091-go adapter.
func (cn *clientConn) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := cn.c.do(ctx, cn.id, request{Op: "close", Conn: cn.id})
	return err
}

// clientChan is one channel of the library.
type clientChan struct {
	cn         *clientConn
	id         int
	confirming bool
}

func (ch *clientChan) do(ctx context.Context, req request) (clientReply, error) {
	req.Chan = ch.id
	return ch.cn.c.do(ctx, ch.cn.id, req)
}

// shut is the client-side 504 of a call on a channel its library knows
// closed, or nil while it is open.
func (ch *clientChan) shut() error {
	if ch.cn.c.closedErr(ch.id) == nil && ch.cn.Err() == nil {
		return nil
	}
	return &broker.Error{Code: broker.ChannelError, Reason: "channel/connection is not open", Connection: ch.cn.Err() != nil}
}

func (ch *clientChan) Confirm(ctx context.Context) error {
	if ch.confirming {
		return ch.shut()
	}
	_, err := ch.do(ctx, request{Op: "confirm"})
	ch.confirming = err == nil
	return err
}

func (ch *clientChan) Declare(ctx context.Context, name string, o broker.DeclareOptions) (broker.Queue, error) {
	r, err := ch.do(ctx, request{Op: "declare", Queue: name, Passive: o.Passive, Durable: o.Durable,
		Exclusive: o.Exclusive, AutoDelete: o.AutoDelete, Args: o.Args})
	return broker.Queue{Name: r.Queue, Messages: r.Messages, Consumers: r.Consumers}, err
}

func (ch *clientChan) Delete(ctx context.Context, name string, o broker.DeleteOptions) (int, error) {
	r, err := ch.do(ctx, request{Op: "delete", Queue: name, IfUnused: o.IfUnused, IfEmpty: o.IfEmpty})
	return r.Count, err
}

func (ch *clientChan) Publish(ctx context.Context, p broker.Publishing) (broker.Confirmation, error) {
	if !ch.confirming {
		if err := ch.shut(); err != nil {
			return broker.Confirmation{}, err
		}
		return broker.Confirmation{}, broker.ErrNotConfirming
	}
	r, err := ch.do(ctx, request{Op: "publish", Exchange: p.Exchange, Key: p.Key, Mandatory: p.Mandatory,
		Immediate: p.Immediate, Persistent: p.Persistent, Body: p.Body})
	return broker.Confirmation{Returned: r.Returned, Acked: r.Acked}, err
}

func (ch *clientChan) Consume(ctx context.Context, queue string, exclusive bool) (string, error) {
	r, err := ch.do(ctx, request{Op: "consume", Queue: queue, Exclusive: exclusive})
	return r.Tag, err
}

func (ch *clientChan) Get(ctx context.Context, queue string) (bool, error) {
	r, err := ch.do(ctx, request{Op: "get", Queue: queue})
	return r.Got, err
}

func (ch *clientChan) Purge(ctx context.Context, queue string) (int, error) {
	r, err := ch.do(ctx, request{Op: "purge", Queue: queue})
	return r.Count, err
}

func (ch *clientChan) Bind(ctx context.Context, queue, exchange, key string) error {
	_, err := ch.do(ctx, request{Op: "bind", Queue: queue, Exchange: exchange, Key: key})
	return err
}

// Close sends channel.close; a channel already closed gives nil, as
// amqp091-go's Close does.
func (ch *clientChan) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := ch.do(ctx, request{Op: "close_channel"})
	var be *broker.Error
	if errors.As(err, &be) && !be.Server && be.Code == broker.ChannelError {
		return nil
	}
	return err
}

// syncBuffer is a bytes.Buffer safe for a process's stderr and a reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
