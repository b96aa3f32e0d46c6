package redissim

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The priority lock's commands (redlock's Priority): hashes, lists, a
// blocking pop, PUBLISH, TIME, and transactions (MULTI/EXEC, which a
// round sends as one message: see execTx).

// priorityCommand returns the command of that name the priority lock (or
// a test looking at its keys) sends, nil if none.
func priorityCommand(name string) func(s *server, args []string) Result {
	switch name {
	case "HSET":
		return cmdHset
	case "HGET":
		return cmdHget
	case "HMGET":
		return cmdHmget
	case "HLEN":
		return cmdHlen
	case "HDEL":
		return cmdHdel
	case "RPUSH":
		return cmdRpush
	case "LLEN":
		return cmdLlen
	case "LRANGE":
		return cmdLrange
	case "BLPOP":
		return cmdBlpop
	case "PUBLISH":
		return cmdPublish
	case "TIME":
		return cmdTime
	case "TYPE":
		return cmdType
	}
	return nil
}

// show is the entry's value as Keys shows it: a string as it is, a hash
// as {field:value ...} sorted by field, a list as [a b], a sorted set as
// <member:score ...> in its order.
func (e *entry) show() string {
	switch e.kind() {
	case "hash":
		fs := make([]string, 0, len(e.hash))
		for f := range e.hash {
			fs = append(fs, f)
		}
		slices.Sort(fs)
		for i, f := range fs {
			fs[i] = f + ":" + e.hash[f]
		}
		return "{" + strings.Join(fs, " ") + "}"
	case "list":
		return "[" + strings.Join(e.list, " ") + "]"
	case "zset":
		return e.zset.show()
	}
	return e.val
}

// typed returns key's entry if it is of kind, nil if the key is missing,
// and WRONGTYPE if it is of another.
func (s *server) typed(key, kind string) (*entry, error) {
	e := s.lookup(key)
	if e != nil && e.kind() != kind {
		return nil, errWrongType
	}
	return e, nil
}

// cmdHset is HSET key field value [field value ...]: the number of fields
// added; the deadline stays.
func cmdHset(s *server, args []string) Result {
	if len(args)%2 != 0 {
		return Result{Err: Error("ERR wrong number of arguments for 'hset' command")}
	}
	e, err := s.typed(args[1], "hash")
	if err != nil {
		return Result{Err: err}
	}
	if e == nil {
		e = &entry{hash: map[string]string{}}
		s.keys[args[1]] = e
	}
	n := int64(0)
	for i := 2; i < len(args); i += 2 {
		if _, ok := e.hash[args[i]]; !ok {
			n++
		}
		e.hash[args[i]] = args[i+1]
	}
	return Result{Val: n}
}

func cmdHget(s *server, args []string) Result {
	e, err := s.typed(args[1], "hash")
	if err != nil {
		return Result{Err: err}
	}
	if v, ok := e.field(args[2]); ok {
		return Result{Val: v}
	}
	return Result{}
}

func (e *entry) field(f string) (string, bool) {
	if e == nil {
		return "", false
	}
	v, ok := e.hash[f]
	return v, ok
}

func cmdHmget(s *server, args []string) Result {
	e, err := s.typed(args[1], "hash")
	if err != nil {
		return Result{Err: err}
	}
	out := make([]any, len(args)-2)
	for i, f := range args[2:] {
		if v, ok := e.field(f); ok {
			out[i] = v
		}
	}
	return Result{Val: out}
}

func cmdHlen(s *server, args []string) Result {
	e, err := s.typed(args[1], "hash")
	if err != nil {
		return Result{Err: err}
	}
	if e == nil {
		return Result{Val: int64(0)}
	}
	return Result{Val: int64(len(e.hash))}
}

// cmdHdel is HDEL key field...: how many of the fields were there; a hash
// left with no field is no more.
func cmdHdel(s *server, args []string) Result {
	e, err := s.typed(args[1], "hash")
	if err != nil {
		return Result{Err: err}
	}
	if e == nil {
		return Result{Val: int64(0)}
	}
	n := int64(0)
	for _, f := range args[2:] {
		if _, ok := e.hash[f]; ok {
			delete(e.hash, f)
			n++
		}
	}
	if len(e.hash) == 0 {
		delete(s.keys, args[1])
	}
	return Result{Val: n}
}

// cmdRpush is RPUSH key value...: the list's length; clients blocked on
// the key are served once the command (its script, its transaction) is
// done.
func cmdRpush(s *server, args []string) Result {
	e, err := s.typed(args[1], "list")
	if err != nil {
		return Result{Err: err}
	}
	if e == nil {
		e = &entry{list: []string{}}
		s.keys[args[1]] = e
	}
	e.list = append(e.list, args[2:]...)
	s.signalReady(args[1])
	return Result{Val: int64(len(e.list))}
}

func cmdLlen(s *server, args []string) Result {
	e, err := s.typed(args[1], "list")
	if err != nil {
		return Result{Err: err}
	}
	if e == nil {
		return Result{Val: int64(0)}
	}
	return Result{Val: int64(len(e.list))}
}

// ranged reads a range command's key, start and end (LRANGE, GETRANGE):
// the key's entry, of kind (nil if none), and the two indices, integers
// before the key's kind is checked, as Redis reads them.
func (s *server) ranged(args []string, kind string) (e *entry, start, end int64, err error) {
	start, ok1 := integer(args[2])
	end, ok2 := integer(args[3])
	if !ok1 || !ok2 {
		return nil, 0, 0, errNotInteger
	}
	e, err = s.typed(args[1], kind)
	return e, start, end, err
}

// cmdLrange is LRANGE key start stop, Redis's way with negative indices.
func cmdLrange(s *server, args []string) Result {
	e, a, b, err := s.ranged(args, "list")
	if err != nil {
		return Result{Err: err}
	}
	out := []any{}
	if e == nil {
		return Result{Val: out}
	}
	n := int64(len(e.list))
	if a < 0 {
		a = max(n+a, 0)
	}
	if b < 0 {
		b = n + b
	}
	for i := a; i <= min(b, n-1); i++ {
		out = append(out, e.list[i])
	}
	return Result{Val: out}
}

// pop takes the head of the list key (an entry of kind list), deleting
// the key once it is empty.
func (s *server) pop(key string, e *entry) string {
	v := e.list[0]
	e.list = e.list[1:]
	if len(e.list) == 0 {
		delete(s.keys, key)
	}
	return v
}

// blockOn is BLPOP's answer when it must wait: the server's loop blocks
// the client (see blocking.go).
type blockOn struct {
	keys    []string
	timeout int64 // ms; 0 for ever
}

// cmdBlpop is BLPOP key... timeout (seconds, a decimal): the first
// non-empty list's [key, head]; otherwise the client waits (within a
// script or a transaction, it answers nil at once, as Redis does).
func cmdBlpop(s *server, args []string) Result {
	keys, tmo := args[1:len(args)-1], args[len(args)-1]
	f, err := strconv.ParseFloat(tmo, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return Result{Err: Error("ERR timeout is not a float or out of range")}
	}
	ms := math.Ceil(f * 1000)
	if ms < 0 {
		return Result{Err: Error("ERR timeout is negative")}
	}
	if ms > float64(math.MaxInt64/2) {
		return Result{Err: Error("ERR timeout is out of range")}
	}
	for _, k := range keys {
		e, err := s.typed(k, "list")
		if err != nil {
			return Result{Err: err}
		}
		if e != nil {
			return Result{Val: []any{k, s.pop(k, e)}}
		}
	}
	if s.atomic {
		return Result{}
	}
	return Result{Val: blockOn{keys: keys, timeout: int64(ms)}}
}

// cmdPublish is PUBLISH channel message: the number of the server's
// subscribers to channel, each of which receives it.
func cmdPublish(s *server, args []string) Result {
	return Result{Val: int64(s.publish(args[1], args[2]))}
}

// cmdTime is TIME: the server's clock as [seconds, microseconds].
func cmdTime(s *server, args []string) Result {
	us := epochMs*1000 + floorDiv(s.w.now+int64(s.skew), int64(time.Microsecond))
	return Result{Val: []any{strconv.FormatInt(us/1e6, 10), strconv.FormatInt(us%1e6, 10)}}
}

func cmdType(s *server, args []string) Result {
	if e := s.lookup(args[1]); e != nil {
		return Result{Val: e.kind()}
	}
	return Result{Val: "none"}
}

var errExecAbort = Error("EXECABORT Transaction discarded because of previous errors.")

// execTx runs a transaction (MULTI, the commands, EXEC) atomically: EXEC's
// answer, the []any of the commands' replies (an error reply among them
// as an Error); EXECABORT, running nothing, if one of them could not be
// queued (an unknown command, a wrong number of arguments).
func (s *server) execTx(tx [][]string) Result {
	for _, args := range tx {
		if len(args) == 0 {
			return Result{Err: errExecAbort}
		}
		name := strings.ToUpper(args[0])
		if command(name) == nil {
			s.unmodelled(Describe(args), fmt.Errorf("redissim: %s: a command the simulator does not model, in a transaction: %s", s.name, Describe(args)))
			return Result{Err: errExecAbort}
		}
		if n := arity[name]; n > 0 && len(args) != n || n < 0 && len(args) < -n {
			return Result{Err: errExecAbort}
		}
	}
	s.atomic = true
	defer func() { s.atomic = false }()
	out := make([]any, len(tx))
	for i, args := range tx {
		r := s.exec(args)
		if r.Err != nil {
			out[i] = r.Err
		} else {
			out[i] = r.Val
		}
	}
	return Result{Val: out}
}

// DescribeTx is a transaction as the trace shows it (MULTI; each command
// as Describe shows it; EXEC): exported for the differential
// (adapters/conform/redisconform), which shows its steps as the trace does.
func DescribeTx(tx [][]string) string {
	parts := []string{"MULTI"}
	for _, args := range tx {
		parts = append(parts, Describe(args))
	}
	return strings.Join(append(parts, "EXEC"), "; ")
}
