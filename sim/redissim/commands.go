package redissim

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// command returns the command a server knows by name: what the Redlock
// reference sends, and what its scripts call. Each answers as Redis 7.0 does, its errors with Redis's
// words (what adapters compare is that an error came, not its text).
func command(name string) func(s *server, args []string) Result {
	switch name {
	case "PING":
		return cmdPing
	case "GET":
		return cmdGet
	case "SET":
		return cmdSet
	case "DEL":
		return cmdDel
	case "EXISTS":
		return cmdExists
	case "PEXPIRE":
		return cmdPexpire
	case "PTTL":
		return cmdPttl
	case "INCR":
		return cmdIncr
	case "DBSIZE":
		return cmdDbsize
	case "EVAL":
		return cmdEval
	case "EVALSHA":
		return cmdEvalsha
	case "SCRIPT":
		return cmdScript
	case "ECHO":
		return cmdEcho
	case "MSETNX":
		return cmdMsetnx
	case "MSET":
		return cmdMset
	case "MGET":
		return cmdMget
	case "GETRANGE":
		return cmdGetrange
	}
	if f := priorityCommand(name); f != nil {
		return f
	}
	return zsetCommand(name)
}

// arity is each command's number of arguments, its name included: n, or
// at least -n.
var arity = map[string]int{
	"PING": -1, "GET": 2, "SET": -3, "DEL": -2, "EXISTS": -2, "PEXPIRE": 3,
	"PTTL": 2, "INCR": 2, "DBSIZE": 1, "EVAL": -3, "EVALSHA": -3, "SCRIPT": -2, "ECHO": 2, "MSETNX": -3, "MSET": -3, "MGET": -2, "GETRANGE": 4,
	"HSET": -4, "HGET": 3, "HMGET": -3, "HLEN": 2, "HDEL": -3, "RPUSH": -3, "LLEN": 2,
	"LRANGE": 4, "BLPOP": -3, "PUBLISH": 3, "TIME": 1, "TYPE": 2,
	"ZADD": -4, "ZCARD": 2, "ZREM": -3, "ZREMRANGEBYSCORE": 4, "ZSCORE": 3,
	"ZCOUNT": 4, "ZRANK": 3, "ZRANGE": -4, "ZRANGEBYSCORE": -4,
}

// exec runs one command. A command the server does not model is an error
// reply, and a failure of the World: the simulator would otherwise answer
// what Redis might not.
func (s *server) exec(args []string) Result {
	if len(args) == 0 {
		return Result{Err: Error("ERR empty command")}
	}
	name := strings.ToUpper(args[0])
	f := command(name)
	if f == nil {
		s.unmodelled(Describe(args), fmt.Errorf("redissim: %s: a command the simulator does not model: %s", s.name, Describe(args)))
		return Result{Err: errUnknown(args)}
	}
	if n := arity[name]; n > 0 && len(args) != n || n < 0 && len(args) < -n {
		return Result{Err: Error(fmt.Sprintf("ERR wrong number of arguments for '%s' command", strings.ToLower(name)))}
	}
	return f(s, args)
}

var (
	errNotInteger  = Error("ERR value is not an integer or out of range")
	errSyntax      = Error("ERR syntax error")
	errNoScript    = Error("NOSCRIPT No matching script. Please use EVAL.")
	errNumKeys     = Error("ERR Number of keys can't be greater than number of args")
	errNegNumKeys  = Error("ERR Number of keys can't be negative")
	errIncrOverflw = Error("ERR increment or decrement would overflow")
	errWrongType   = Error("WRONGTYPE Operation against a key holding the wrong kind of value")
)

func errExpireTime(cmd string) Error {
	return Error(fmt.Sprintf("ERR invalid expire time in '%s' command", cmd))
}

func integer(v string) (int64, bool) {
	n, err := strconv.ParseInt(v, 10, 64)
	return n, err == nil
}

func cmdPing(s *server, args []string) Result {
	if len(args) == 2 {
		return Result{Val: args[1]}
	}
	if len(args) > 2 {
		return Result{Err: Error("ERR wrong number of arguments for 'ping' command")}
	}
	return Result{Val: "PONG"}
}

func cmdEcho(s *server, args []string) Result { return Result{Val: args[1]} }

func cmdGet(s *server, args []string) Result {
	e := s.lookup(args[1])
	switch {
	case e == nil:
		return Result{}
	case e.kind() != "string":
		return Result{Err: errWrongType}
	}
	return Result{Val: e.val}
}

// cmdSet is SET key value [NX|XX] [GET] [PX ms|EX s|KEEPTTL]: the options
// Redlock sends, and those of SET other clients send (EXAT and PXAT are
// not modelled). Options are parsed as Redis 7.0 parses them (a conflict
// is a syntax error), then the expiry.
func cmdSet(s *server, args []string) Result {
	var nx, xx, get, keep bool
	var unit, expire string // "PX" or "EX", and its argument
	for i := 3; i < len(args); i++ {
		opt := strings.ToUpper(args[i])
		next := i+1 < len(args)
		switch {
		case opt == "NX" && !xx:
			nx = true
		case opt == "XX" && !nx:
			xx = true
		case opt == "GET":
			get = true
		case opt == "KEEPTTL" && unit == "":
			keep = true
		case (opt == "PX" || opt == "EX") && !keep && (unit == "" || unit == opt) && next:
			i++
			unit, expire = opt, args[i]
		case opt == "EXAT" || opt == "PXAT":
			s.unmodelled("SET "+opt, fmt.Errorf("redissim: %s: SET option %q is not modelled", s.name, args[i]))
			return Result{Err: errSyntax}
		default:
			if s.w.wire == nil && opt != "PX" && opt != "NX" {
				// Not sent by the reference: the simulator was held to Redis
				// on its options alone.
				s.w.fail(fmt.Errorf("redissim: %s: SET option %q is not modelled", s.name, args[i]))
			}
			return Result{Err: errSyntax}
		}
	}
	px := int64(0)
	if unit != "" {
		n, ok := integer(expire)
		if !ok {
			return Result{Err: errNotInteger}
		}
		if n <= 0 || unit == "EX" && n > math.MaxInt64/1000 {
			return Result{Err: errExpireTime("set")}
		}
		if unit == "EX" {
			n *= 1000
		}
		if n > math.MaxInt64-s.clock() {
			return Result{Err: errExpireTime("set")}
		}
		px = n
	}
	old := s.lookup(args[1])
	var prev any
	if get && old != nil {
		if old.kind() != "string" {
			return Result{Err: errWrongType}
		}
		prev = old.val
	}
	if nx && old != nil || xx && old == nil {
		return Result{Val: prev}
	}
	e := &entry{val: args[2]}
	switch {
	case px > 0:
		e.deadline = s.clock() + px
	case keep && old != nil:
		e.deadline = old.deadline
	}
	s.keys[args[1]] = e
	if get {
		return Result{Val: prev}
	}
	return Result{Val: "OK"}
}

func cmdDel(s *server, args []string) Result {
	n := int64(0)
	for _, k := range args[1:] {
		if s.lookup(k) != nil {
			delete(s.keys, k)
			n++
		}
	}
	return Result{Val: n}
}

// cmdMsetnx sets every key to its value, none expiring, if none of them
// exists (1), else nothing (0): bsm/redislock's obtain.
func cmdMsetnx(s *server, args []string) Result {
	if len(args)%2 != 1 {
		return Result{Err: Error("ERR wrong number of arguments for 'msetnx' command")}
	}
	for i := 1; i < len(args); i += 2 {
		if s.lookup(args[i]) != nil {
			return Result{Val: int64(0)}
		}
	}
	for i := 1; i < len(args); i += 2 {
		s.keys[args[i]] = &entry{val: args[i+1]}
	}
	return Result{Val: int64(1)}
}

// cmdMset sets every key to its value, none expiring.
func cmdMset(s *server, args []string) Result {
	if len(args)%2 != 1 {
		return Result{Err: Error("ERR wrong number of arguments for 'mset' command")}
	}
	for i := 1; i < len(args); i += 2 {
		s.keys[args[i]] = &entry{val: args[i+1]}
	}
	return Result{Val: "OK"}
}

// cmdMget is each key's value, nil where it holds none or not a string.
func cmdMget(s *server, args []string) Result {
	out := make([]any, len(args)-1)
	for i, k := range args[1:] {
		if e := s.lookup(k); e != nil && e.kind() == "string" {
			out[i] = e.val
		}
	}
	return Result{Val: out}
}

// cmdGetrange is GETRANGE key start end: the bytes of the string from
// start to end, both included, negative counting from its end, clamped
// to it; "" for no key or an empty range.
func cmdGetrange(s *server, args []string) Result {
	e, start, end, err := s.ranged(args, "string")
	if err != nil {
		return Result{Err: err}
	}
	if e == nil {
		return Result{Val: ""}
	}
	n := int64(len(e.val))
	if start < 0 && end < 0 && start > end {
		return Result{Val: ""}
	}
	if start < 0 {
		start = max(n+start, 0)
	}
	if end < 0 {
		end = max(n+end, 0)
	}
	end = min(end, n-1)
	if start > end || n == 0 {
		return Result{Val: ""}
	}
	return Result{Val: e.val[start : end+1]}
}

func cmdExists(s *server, args []string) Result {
	n := int64(0)
	for _, k := range args[1:] {
		if s.lookup(k) != nil {
			n++
		}
	}
	return Result{Val: n}
}

// cmdPexpire is PEXPIRE key ms: 1 if the key exists (a deadline not in
// the future deletes it, as Redis 7 does), 0 if not.
func cmdPexpire(s *server, args []string) Result {
	n, ok := integer(args[2])
	if !ok {
		return Result{Err: errNotInteger}
	}
	now := s.clock()
	if n > 0 && n > math.MaxInt64-now || n < 0 && n < math.MinInt64+now {
		return Result{Err: errExpireTime("pexpire")}
	}
	e := s.lookup(args[1])
	if e == nil {
		return Result{Val: int64(0)}
	}
	if n <= 0 {
		delete(s.keys, args[1])
		return Result{Val: int64(1)}
	}
	e.deadline = now + n
	return Result{Val: int64(1)}
}

// cmdPttl is PTTL key: -2 if missing, -1 without deadline, else the ms
// left.
func cmdPttl(s *server, args []string) Result {
	e := s.lookup(args[1])
	switch {
	case e == nil:
		return Result{Val: int64(-2)}
	case e.deadline == 0:
		return Result{Val: int64(-1)}
	}
	return Result{Val: max(e.deadline-s.clock(), 0)}
}

// cmdIncr is INCR key: a missing key counts from 0; the deadline stays.
func cmdIncr(s *server, args []string) Result {
	e := s.lookup(args[1])
	var n int64
	if e != nil && e.kind() != "string" {
		return Result{Err: errWrongType}
	}
	if e != nil {
		v, ok := integer(e.val)
		if !ok || strconv.FormatInt(v, 10) != e.val {
			return Result{Err: errNotInteger}
		}
		n = v
	} else {
		e = &entry{}
		s.keys[args[1]] = e
	}
	if n == math.MaxInt64 {
		return Result{Err: errIncrOverflw}
	}
	n++
	e.val = strconv.FormatInt(n, 10)
	return Result{Val: n}
}

func cmdDbsize(s *server, args []string) Result {
	return Result{Val: int64(len(s.live()))}
}

// live returns the server's live keys, sorted, expiring those past their
// deadline.
func (s *server) live() []string {
	var ks []string
	for k := range s.keys {
		ks = append(ks, k)
	}
	var out []string
	for _, k := range sortedStrings(ks) {
		if s.lookup(k) != nil {
			out = append(out, k)
		}
	}
	return out
}
