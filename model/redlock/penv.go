package redlock

import (
	"context"
	"reflect"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// A PriorityEnv is what a Priority runs on: an Env, and what the priority
// lock needs beyond rounds of commands: commands to some servers only,
// blocking commands and subscriptions on connections of their own, and
// concurrency (tasks, signals, waits on the Env's clock). NewPriority's is
// the real one: go-redis clients (a second pool per server, of up to 1000
// connections, for the blocking commands and subscriptions), goroutines,
// channels, timers on CLOCK_MONOTONIC. A simulator brings another
// (package sim/redissim, Process.PriorityEnv), on which a Priority starts
// no goroutine, reads no other clock and waits for nothing but the Env:
// every command it sends, every read of its clock, every wait and every
// concurrent task of its own goes through the PriorityEnv. (It uses
// mutexes still, each held only between two calls of the Env, so that on
// a simulator that moves one task at a time none is ever contended.)
type PriorityEnv interface {
	Env
	// Send is Round, but that a server whose command is the zero Cmd is
	// sent nothing (its Result is the zero Result).
	Send(ctx context.Context, timeout time.Duration, cmds []Cmd) []Result
	// Block sends cmd, a blocking command (BLPOP), to server i on a
	// connection of its own, bounded by timeout: a command still blocked
	// then is abandoned (the connection closes, and the server forgets
	// it). A wait the server ends (BLPOP's own timeout) is a nil Val.
	Block(ctx context.Context, timeout time.Duration, i int, cmd Cmd) Result
	// Subscribe subscribes to channel on server i, on a connection of its
	// own (SUBSCRIBE is sent; its confirmation is the first thing
	// received).
	Subscribe(ctx context.Context, i int, channel string) Subscription
	// Go runs f concurrently with its caller: in a goroutine of its own
	// (on a simulator, a task of the calling client, which dies with it).
	Go(f func())
	// NewSignal returns a Signal that has not fired.
	NewSignal() Signal
	// Await waits until one of sigs has fired, the Env's clock (Now)
	// reaches deadline (0: no deadline), or ctx ends. It returns the index
	// of the first of sigs that has fired, -1 if none had when the wait
	// ended. (A simulator does not look at ctx once the wait has begun:
	// its deadline is real time.)
	Await(ctx context.Context, deadline int64, sigs ...Signal) int
}

// A Signal fires once, and stays fired: a closed channel.
type Signal interface {
	// Fire fires the signal; firing it again does nothing.
	Fire()
}

// A Subscription is a subscription to a channel of one server.
type Subscription interface {
	// Receive waits at most d for what the server pushes next: a
	// publication's payload, or "" for a message that is not one (the
	// subscription's confirmation). An error is a failure to receive, a
	// timeout (an error whose Timeout() is true) when nothing came in d;
	// after any other error the next Receive subscribes again.
	Receive(ctx context.Context, d time.Duration) (string, error)
	// Close ends the subscription and its connection; a Receive waiting
	// meanwhile returns an error.
	Close() error
}

// redisPriorityEnv is the real PriorityEnv.
type redisPriorityEnv struct {
	*redisEnv
	watch []*goredis.Client // blocking pops and subscriptions: one connection each
}

// RedisPriorityEnv is the PriorityEnv NewPriority uses: the servers at
// addrs (host:port), a second pool per server for the blocking commands
// and subscriptions, goroutines, channels and timers on CLOCK_MONOTONIC.
// A caller wraps it, as it does RedisEnv, to watch the lock's commands
// (the prover does, to record an operation as invoked when it first sends
// one).
func RedisPriorityEnv(addrs []string) PriorityEnv { return newRedisPriorityEnv(addrs) }

func newRedisPriorityEnv(addrs []string) *redisPriorityEnv {
	e := &redisPriorityEnv{redisEnv: newRedisEnv(addrs)}
	for _, a := range addrs {
		e.watch = append(e.watch, client(a, 1000))
	}
	return e
}

// Send runs each server's command in a goroutine of its own, under a
// context of its own bounded by timeout.
func (e *redisPriorityEnv) Send(ctx context.Context, timeout time.Duration, cmds []Cmd) []Result {
	out := make([]Result, len(e.servers))
	var wg sync.WaitGroup
	for i, c := range e.servers {
		if i >= len(cmds) || cmds[i].zero() {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			c2, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			out[i] = send(c2, c, cmds[i])
		}()
	}
	wg.Wait()
	return out
}

func (e *redisPriorityEnv) Block(ctx context.Context, timeout time.Duration, i int, cmd Cmd) Result {
	c, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return send(c, e.watch[i], cmd)
}

func (e *redisPriorityEnv) Subscribe(ctx context.Context, i int, channel string) Subscription {
	return redisSub{e.watch[i].Subscribe(ctx, channel)}
}

func (e *redisPriorityEnv) Go(f func())       { go f() }
func (e *redisPriorityEnv) NewSignal() Signal { return &chanSignal{ch: make(chan struct{})} }
func (e *redisPriorityEnv) Close() error {
	first := e.redisEnv.Close()
	for _, c := range e.watch {
		if err := c.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Await selects on ctx, a timer and the signals' channels, preferring the
// first signal fired.
func (e *redisPriorityEnv) Await(ctx context.Context, deadline int64, sigs ...Signal) int {
	if i := firstFired(sigs); i >= 0 {
		return i
	}
	cases := []reflect.SelectCase{{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())}}
	if deadline != 0 {
		t := time.NewTimer(time.Duration(deadline - e.Now()))
		defer t.Stop()
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(t.C)})
	}
	for _, s := range sigs {
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(s.(*chanSignal).ch)})
	}
	reflect.Select(cases)
	return firstFired(sigs)
}

func firstFired(sigs []Signal) int {
	for i, s := range sigs {
		select {
		case <-s.(*chanSignal).ch:
			return i
		default:
		}
	}
	return -1
}

// chanSignal is a Signal on a channel, closed when it fires.
type chanSignal struct {
	once sync.Once
	ch   chan struct{}
}

func (s *chanSignal) Fire() { s.once.Do(func() { close(s.ch) }) }

// redisSub is a go-redis subscription.
type redisSub struct{ sub *goredis.PubSub }

func (s redisSub) Receive(ctx context.Context, d time.Duration) (string, error) {
	m, err := s.sub.ReceiveTimeout(ctx, d)
	if err != nil {
		return "", err
	}
	if msg, ok := m.(*goredis.Message); ok {
		return msg.Payload, nil
	}
	return "", nil
}

func (s redisSub) Close() error { return s.sub.Close() }

// zero says whether c is the zero Cmd: nothing to send.
func (c Cmd) zero() bool { return c.Script == "" && len(c.Args) == 0 && len(c.Tx) == 0 }
