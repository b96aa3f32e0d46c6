package redisconform

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"pgregory.net/rapid"

	"github.com/lockprover/lockprover/sim/redissim"
)

// The differential's steps of the priority lock (see differential.go).

// kinds are the steps' kinds: Redlock's, then the priority lock's, then
// the sorted sets' (diffzset.go).
var kinds = slices.Concat([]string{"acquire", "raise", "refresh", "refreshSetNX", "release",
	"GET", "DEL", "PEXPIRE", "PTTL", "SET", "INCR", "EXISTS", "badnumkeys"}, prioKinds, zsetKinds)

// prioKinds are the priority lock's.
var prioKinds = []string{"obtain", "undo", "refreshPrio", "releasePrio", "HSET", "HGET", "HMGET", "HLEN",
	"RPUSH", "LLEN", "LRANGE", "BLPOP", "tx", "PUBLISH", "TYPE", "HDEL", "settle"}

// drawPrio draws the rest of a step of the priority lock's kinds, and
// says whether s is one.
func drawPrio(t *rapid.T, s *step, label func(string) string) bool {
	if !slices.Contains(prioKinds, s.kind) {
		return false
	}
	s.lock = rapid.SampledFrom([]string{"{p}:lock", "{p}:lock", "{p}:lock", "k1"}).Draw(t, label("lock"))
	s.fence = rapid.SampledFrom([]string{"{p}:fence", "{p}:fence", "k1"}).Draw(t, label("pfence"))
	s.list = rapid.SampledFrom([]string{"{p}:note:t1", "{p}:note:t1", "{p}:note:t2", "{p}:lock", "k1"}).Draw(t, label("list"))
	s.prio = rapid.SampledFrom([]string{"1", "2", "3", "x"}).Draw(t, label("prio"))
	switch s.kind {
	case "obtain", "undo", "settle", "refreshPrio", "releasePrio":
		s.sha = rapid.Bool().Draw(t, label("evalsha"))
		s.flags = rapid.SampledFrom([]string{"00", "00", "10", "01"}).Draw(t, label("flags"))
	case "HGET", "HDEL":
		// Not the deadlines (vdl<i>): they are the server's clock.
		s.field = rapid.SampledFrom([]string{"acq", "prio", "fence", "vn", "told", "vacq1", "vprio1", "vfence1", "vacq2"}).Draw(t, label("field"))
	case "BLPOP":
		s.list2 = rapid.SampledFrom([]string{"", "{p}:note:t2"}).Draw(t, label("list2"))
		s.tmo = rapid.SampledFrom([]string{"0.2", "0.2", "0.2", "x", "-1"}).Draw(t, label("timeout"))
	}
	return true
}

// prioArgs is a step of the priority lock's kinds as a command, its keys
// prefixed with prefix; nil for another kind, and for a transaction.
func (s step) prioArgs(prefix string) []string {
	lock, list := prefix+s.lock, prefix+s.list
	eval := func() []string {
		if s.sha {
			return []string{"EVALSHA", redissim.ScriptSHA1(sources[s.kind])}
		}
		return []string{"EVAL", sources[s.kind]}
	}
	switch s.kind {
	case "obtain":
		return append(eval(), "2", lock, prefix+s.fence, s.token, s.prio, s.ttl, s.flags[:1], s.flags[1:])
	case "undo": // ARGV[2], "1": the token's key was a fresh grant
		return append(eval(), "1", lock, s.token, s.flags[:1])
	case "settle":
		return append(eval(), "1", lock, s.token)
	case "refreshPrio":
		return append(eval(), "1", lock, s.token, s.ttl)
	case "releasePrio":
		return append(eval(), "2", lock, prefix+"{p}:note:"+s.token, s.token)
	case "HSET":
		return []string{"HSET", lock, "acq", s.token, "prio", s.prio, "fence", "1"}
	case "HGET":
		return []string{"HGET", lock, s.field}
	case "HDEL":
		return []string{"HDEL", lock, s.field, "vn"}
	case "HMGET":
		return []string{"HMGET", lock, "prio", "fence"}
	case "HLEN":
		return []string{"HLEN", lock}
	case "RPUSH", "PUBLISH":
		return []string{s.kind, list, s.token}
	case "LLEN", "TYPE":
		return []string{s.kind, list}
	case "LRANGE":
		return []string{"LRANGE", list, "0", "-1"}
	case "BLPOP":
		if s.list2 != "" {
			return []string{"BLPOP", list, prefix + s.list2, s.tmo}
		}
		return []string{"BLPOP", list, s.tmo}
	}
	return nil
}

// tx is a "tx" step's transaction: the notify and acknowledge pushes.
func (s step) tx(prefix string) [][]string {
	list := prefix + s.list
	return [][]string{{"rpush", list, s.token}, {"pexpire", list, s.ttl}}
}

// onSim runs the step on server 0 of the simulator; a BLPOP that waited
// out its timeout lasts what the next of blocked says it did on Redis.
func (s step) onSim(p *redissim.Process, blocked *[]time.Duration) redissim.Result {
	if s.kind == "tx" {
		return p.Tx(0, s.tx(""))
	}
	t0 := p.Now()
	r := p.Do(0, s.args("")...)
	if s.kind == "BLPOP" && r.Err == nil && r.Val == nil && len(*blocked) > 0 {
		d := (*blocked)[0]
		*blocked = (*blocked)[1:]
		if rest := d - time.Duration(p.Now()-t0); rest > 0 {
			p.Sleep(rest)
		}
	}
	return r
}

// onRedis runs the step on the server of c, its keys prefixed with
// prefix; a transaction as go-redis's TxPipelined sends it.
func (s step) onRedis(ctx context.Context, c *goredis.Client, prefix string) (redissim.Result, error) {
	if s.kind != "tx" {
		v, err := c.Do(ctx, anys(s.args(prefix))...).Result()
		if kv, ok := v.([]any); ok && s.kind == "BLPOP" && len(kv) == 2 {
			k, _ := kv[0].(string)
			v = []any{strings.TrimPrefix(k, prefix), kv[1]}
		}
		return redisResult(v, err)
	}
	var cmds []*goredis.Cmd
	_, err := c.TxPipelined(ctx, func(pipe goredis.Pipeliner) error {
		for _, args := range s.tx(prefix) {
			cmds = append(cmds, pipe.Do(ctx, anys(args)...))
		}
		return nil
	})
	var re goredis.Error
	if err != nil && !errors.As(err, &re) {
		return redissim.Result{}, err
	}
	vals := make([]any, len(cmds))
	for i, x := range cmds {
		v, err := x.Result()
		r, err := redisResult(v, err)
		if err != nil {
			return redissim.Result{}, fmt.Errorf("in the transaction: %w", err)
		}
		vals[i] = r.Val
		if r.Err != nil {
			vals[i] = r.Err
		}
	}
	return redissim.Result{Val: vals}, nil
}
