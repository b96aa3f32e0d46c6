package rabbitmq_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockprover/lockprover/adapters/servers/rabbitmq"
	"github.com/lockprover/lockprover/adapters/servers/rabbitmq/rabbitmqtest"
	"github.com/lockprover/lockprover/model/amqplocks/broker"
)

// runPrefix makes this run's queue names unique.
var runPrefix = func() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return "lp-adapter-test-" + hex.EncodeToString(b) + "-"
}()

// env is one test's broker, connections and queues. Its cleanup closes the
// connections, deletes the queues (also when the test failed) and checks
// that no adapter or amqp091-go goroutine is left.
type env struct {
	t   testing.TB
	url string
	b   broker.Broker

	mu     sync.Mutex
	conns  []broker.Conn
	queues []string
}

func newEnv(t testing.TB) *env {
	t.Helper()
	e := &env{t: t, url: rabbitmqtest.URL(t)}
	e.b = rabbitmq.New(e.url)
	t.Cleanup(e.cleanup)
	return e
}

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// queue returns a fresh queue name for this run and test, deleted at cleanup.
func (e *env) queue(suffix string) string {
	name := runPrefix + unsafeChars.ReplaceAllString(e.t.Name(), "-") + "-" + suffix
	e.mu.Lock()
	e.queues = append(e.queues, name)
	e.mu.Unlock()
	return name
}

func (e *env) dialConfig(cfg broker.Config) broker.Conn {
	e.t.Helper()
	return e.dialVia(e.b, cfg)
}

func (e *env) dialVia(b broker.Broker, cfg broker.Config) broker.Conn {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if cfg.Name == "" {
		cfg.Name = runPrefix + e.t.Name()
	}
	c, err := b.Dial(ctx, cfg)
	if err != nil {
		e.t.Fatalf("dial: %v", err)
	}
	e.mu.Lock()
	e.conns = append(e.conns, c)
	e.mu.Unlock()
	return c
}

func (e *env) dial() broker.Conn {
	e.t.Helper()
	return e.dialConfig(broker.Config{})
}

func (e *env) channel(c broker.Conn) broker.Channel {
	e.t.Helper()
	ch, err := c.Channel(ctxT(e.t))
	if err != nil {
		e.t.Fatalf("channel: %v", err)
	}
	return ch
}

func (e *env) confirmChannel(c broker.Conn) broker.Channel {
	e.t.Helper()
	ch := e.channel(c)
	if err := ch.Confirm(ctxT(e.t)); err != nil {
		e.t.Fatalf("confirm: %v", err)
	}
	return ch
}

func (e *env) cleanup() {
	e.mu.Lock()
	conns, queues := e.conns, e.queues
	e.mu.Unlock()
	for _, c := range conns {
		_ = c.Close() // errors expected for connections a test killed
	}
	if len(queues) > 0 {
		e.deleteQueues(queues)
	}
	checkNoLeaks(e.t)
}

func (e *env) deleteQueues(queues []string) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// A killed connection's exclusive queue goes asynchronously: Cleanup
	// retries it.
	left, err := rabbitmq.Cleanup(ctx, e.url, runPrefix, queues...)
	if err != nil || left != nil {
		e.t.Errorf("cleanup: queues %q not deleted: %v", left, err)
	}
}

// checkNoLeaks fails if goroutines of the adapter or of amqp091-go outlive
// every connection's Close. It looks at every goroutine of the test
// binary: the tests that call it (through newEnv) must not run in
// parallel with others that talk to a broker.
func checkNoLeaks(t testing.TB) {
	t.Helper()
	var leaked []string
	for deadline := time.Now().Add(10 * time.Second); ; {
		leaked = leaked[:0]
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		for _, g := range strings.Split(string(buf), "\n\n") {
			if strings.Contains(g, "rabbitmq/amqp091-go.") || strings.Contains(g, "lockprover/adapters/servers/rabbitmq.") {
				leaked = append(leaked, g)
			}
		}
		if len(leaked) == 0 {
			return
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Errorf("%d goroutines leaked after Close:\n%s", len(leaked), strings.Join(leaked, "\n\n"))
}

// ctxT is a generous per-call deadline, so that a hung call fails the test
// instead of the whole binary.
func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// brokerErr asserts that err is a *broker.Error and returns it.
func brokerErr(t testing.TB, err error) *broker.Error {
	t.Helper()
	var be *broker.Error
	if !errors.As(err, &be) {
		t.Fatalf("error %v (%T) is not a *broker.Error", err, err)
	}
	return be
}

// wantErr asserts the code, scope and origin of a broker error.
func wantErr(t testing.TB, err error, code int, connection, server bool) *broker.Error {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want code %d", code)
	}
	be := brokerErr(t, err)
	if be.Code != code || be.Connection != connection || be.Server != server {
		t.Fatalf("got %+v, want Code %d Connection %v Server %v", *be, code, connection, server)
	}
	return be
}

// released reports whether a fresh connection can declare q exclusively
// within d (the broker releases a dead connection's queues asynchronously),
// and logs how long it took after what.
func (e *env) released(q string, d time.Duration, after string) bool {
	e.t.Helper()
	taker := e.dial()
	start := time.Now()
	ok := eventually(d, func() bool {
		tch, err := taker.Channel(ctxT(e.t))
		if err != nil {
			e.t.Fatal(err)
		}
		defer tch.Close()
		_, err = tch.Declare(ctxT(e.t), q, exclusive)
		return err == nil
	})
	if ok {
		e.t.Logf("released %v after the %s", time.Since(start), after)
	}
	return ok
}

// eventually polls f until it returns true or d passes.
func eventually(d time.Duration, f func() bool) bool {
	for deadline := time.Now().Add(d); ; {
		if f() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// proxy is a TCP forwarder to the broker that can black-hole traffic, as a
// silent network partition would. Closing the client side closes the broker
// side too, so the broker sees the client's socket close.
type proxy struct {
	l      net.Listener
	target string
	frozen atomic.Bool
	wg     sync.WaitGroup

	mu    sync.Mutex
	conns []net.Conn
}

func newProxy(t testing.TB, target string) *proxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{l: l, target: target}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(p.close)
	return p
}

func (p *proxy) addr() string { return p.l.Addr().String() }

func (p *proxy) freeze() { p.frozen.Store(true) }

func (p *proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		u, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, u)
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(u, c)
		go p.pipe(c, u)
	}
}

// pipe copies src to dst, dropping bytes while frozen, and closes both ends
// when src ends.
func (p *proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !p.frozen.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // EOF or closed: the deferred closes propagate it
		}
	}
}

func (p *proxy) close() {
	p.l.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
