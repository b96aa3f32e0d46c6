package redlock

import (
	"context"
	"errors"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// An Env is what a Redlock runs on: a clock, and N Redis servers to which
// it sends rounds of commands, one command per server at once. New's is
// the real one: CLOCK_MONOTONIC (Monotonic) and a go-redis client per
// server, a goroutine per server and round. A simulator brings another
// (package sim/redissim), on which a run depends only on its seed: a
// Redlock reads no other clock and starts no goroutine of its own.
type Env interface {
	// Now reads the clock Lease.ValidUntil is on, in nanoseconds.
	Now() int64
	// Servers is N, the number of servers.
	Servers() int
	// Round sends cmds[i] to server i (len(cmds) is N), all at once, each
	// bounded by timeout, and returns each server's result, in the
	// servers' order, once every server has answered or timed out.
	Round(ctx context.Context, timeout time.Duration, cmds []Cmd) []Result
	// Close closes the connections to the servers.
	Close() error
}

// A Cmd is one command to one server: Args (such as GET key), or, when
// Script is set, a run of that Lua source on Keys with Args, sent as
// go-redis's Script.Run sends it: EVALSHA of its SHA1, and EVAL if the
// server answers that it does not have the script (NOSCRIPT); or, when Tx
// is set (the priority lock's), a transaction: its commands sent as
// go-redis's TxPipelined sends them (MULTI, each command, EXEC), Val the
// []any of their replies (nil for a nil reply), Err the first error.
type Cmd struct {
	Script string
	Keys   []string
	Args   []string
	Tx     [][]string
}

// A Result is one server's answer to a Cmd: Val is an int64, a string, a
// []any of those, or nil for Redis's nil reply; Err is an error reply, or
// the failure to get any answer (a refused connection, a timeout).
type Result struct {
	Val any
	Err error
}

// redisEnv is the real Env: go-redis clients, CLOCK_MONOTONIC.
type redisEnv struct {
	servers []*goredis.Client
}

// RedisEnv is the Env New uses: the servers at addrs (host:port), the
// machine's CLOCK_MONOTONIC. A caller wraps it to watch the lock's clock
// or rounds (the prover does, to record an operation as invoked when the
// lock first reads its clock for it).
func RedisEnv(addrs []string) Env { return newRedisEnv(addrs) }

func newRedisEnv(addrs []string) *redisEnv {
	e := &redisEnv{}
	for _, a := range addrs {
		e.servers = append(e.servers, client(a, 16))
	}
	return e
}

func (e *redisEnv) Now() int64   { return Monotonic() }
func (e *redisEnv) Servers() int { return len(e.servers) }

// Round runs each server's command in a goroutine of its own, under a
// context of its own bounded by timeout.
func (e *redisEnv) Round(ctx context.Context, timeout time.Duration, cmds []Cmd) []Result {
	out := make([]Result, len(e.servers))
	var wg sync.WaitGroup
	for i, c := range e.servers {
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

// send sends one command on c; a nil reply is a nil Val.
func send(ctx context.Context, c *goredis.Client, cmd Cmd) Result {
	var v any
	var err error
	switch {
	case len(cmd.Tx) > 0:
		return sendTx(ctx, c, cmd.Tx)
	case cmd.Script != "":
		v, err = goredis.NewScript(cmd.Script).Run(ctx, c, cmd.Keys, anys(cmd.Args)...).Result()
	default:
		v, err = c.Do(ctx, anys(cmd.Args)...).Result()
	}
	if errors.Is(err, goredis.Nil) {
		return Result{}
	}
	return Result{Val: v, Err: err}
}

// sendTx sends the commands of tx as one MULTI/EXEC transaction.
func sendTx(ctx context.Context, c *goredis.Client, tx [][]string) Result {
	var cmds []*goredis.Cmd
	_, err := c.TxPipelined(ctx, func(pipe goredis.Pipeliner) error {
		for _, args := range tx {
			cmds = append(cmds, pipe.Do(ctx, anys(args)...))
		}
		return nil
	})
	vals := make([]any, len(cmds))
	for i, x := range cmds {
		v, e := x.Result()
		switch {
		case errors.Is(e, goredis.Nil):
		case e != nil:
			vals[i] = e
		default:
			vals[i] = v
		}
	}
	if errors.Is(err, goredis.Nil) {
		err = nil
	}
	return Result{Val: vals, Err: err}
}

func anys(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

func (e *redisEnv) Close() error {
	var first error
	for _, c := range e.servers {
		if err := c.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}
