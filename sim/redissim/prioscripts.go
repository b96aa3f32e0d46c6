package redissim

import (
	"fmt"
	"github.com/lockprover/lockprover/model/redlock"
	"math"
	"strconv"
)

// The priority lock's scripts (model/redlock/scripts.go: obtain, undo, settle,
// refreshPrio, releasePrio), natively: each calls the commands its Lua
// calls, in the same order (a script's effects before an error stay, as
// on Redis), and converts numbers as Lua and Redis do.
func priorityScripts() []*script {
	sources := redlock.ScriptSources()
	return []*script{
		{name: "obtain", src: sources["obtain"], run: runObtain},
		{name: "undo", src: sources["undo"], run: runUndo},
		{name: "settle", src: sources["settle"], run: runSettle},
		{name: "refreshPrio", src: sources["refreshPrio"], run: runRefreshPrio},
		{name: "releasePrio", src: sources["releasePrio"], run: runReleasePrio},
	}
}

// luaArg is a Lua number as redis.call sends it ("%.17g"): an integer's
// digits.
func luaArg(f float64) *string {
	if f == math.Trunc(f) && math.Abs(f) < 1e15 {
		return lit(strconv.FormatInt(int64(f), 10))
	}
	return lit(strconv.FormatFloat(f, 'g', 17, 64))
}

// luaNumber is tonumber of a reply: nil (false) for a nil reply.
func luaNumber(v any) (float64, bool) {
	switch v := v.(type) {
	case string:
		return tonumber(&v)
	case int64:
		return float64(v), true
	}
	return 0, false
}

// luaString is a reply as a Lua value passed back to redis.call: nil for
// a nil reply (false, which redis.call refuses).
func luaString(v any) *string {
	switch v := v.(type) {
	case string:
		return &v
	case int64:
		return luaArg(float64(v))
	}
	return nil
}

var errCompareNil = fmt.Errorf("attempt to compare nil with number")

// serverMs is the script's "now": TIME's seconds * 1000 + floor(micros/1000).
func serverMs(s *server) (float64, error) {
	t, err := call(s, lit("TIME"))
	if err != nil {
		return 0, err
	}
	ts := t.([]any)
	sec, _ := luaNumber(ts[0])
	us, _ := luaNumber(ts[1])
	return sec*1000 + math.Floor(us/1000), nil
}

func runObtain(s *server, keys, argv []string) (Result, error) {
	cur, err := call(s, lit("HGET"), at(keys, 1), lit("acq"))
	if err != nil {
		return Result{}, err
	}
	mine, mineOK := tonumber(at(argv, 2))
	ttl, ttlOK := tonumber(at(argv, 3))
	if cur == nil {
		f, err := call(s, lit("INCR"), at(keys, 2))
		if err != nil {
			return Result{}, err
		}
		if _, err := call(s, lit("HSET"), at(keys, 1), lit("acq"), at(argv, 1), lit("prio"), at(argv, 2), lit("fence"), luaString(f)); err != nil {
			return Result{}, err
		}
		if _, err := call(s, lit("PEXPIRE"), at(keys, 1), numArg(ttl, ttlOK)); err != nil {
			return Result{}, err
		}
		return Result{Val: []any{int64(1), f}}, nil
	}
	v, err := call(s, lit("HMGET"), at(keys, 1), lit("prio"), lit("fence"))
	if err != nil {
		return Result{}, err
	}
	vs := v.([]any)
	p, pOK := luaNumber(vs[0])
	if !pOK || !mineOK {
		return Result{}, errCompareNil
	}
	if !(p < mine || argIs(at(argv, 4), "1") && p == mine) {
		return Result{Val: []any{int64(0), int64(p)}}, nil
	}
	return steal(s, keys, argv, cur, vs, ttl, ttlOK)
}

// steal is obtain's theft: the thief replaces the holder cur, keeping
// the victim's fields vs (prio, fence) and deadline.
func steal(s *server, keys, argv []string, cur any, vs []any, ttl float64, ttlOK bool) (Result, error) {
	left, err := call(s, lit("PTTL"), at(keys, 1))
	if err != nil {
		return Result{}, err
	}
	now, err := serverMs(s)
	if err != nil {
		return Result{}, err
	}
	f, err := call(s, lit("INCR"), at(keys, 2))
	if err != nil {
		return Result{}, err
	}
	l := float64(left.(int64))
	vn, err := call(s, lit("HGET"), at(keys, 1), lit("vn"))
	if err != nil {
		return Result{}, err
	}
	n, _ := luaNumber(vn) // tonumber(...) or 0
	n++
	chain, err := earlierVictims(s, keys, n, now)
	if err != nil {
		return Result{}, err
	}
	i := *luaArg(n)
	if _, err := call(s, lit("HSET"), at(keys, 1), lit("acq"), at(argv, 1), lit("prio"), at(argv, 2), lit("fence"), luaString(f), lit("vn"), luaArg(n),
		lit("vacq"+i), luaString(cur), lit("vprio"+i), luaString(vs[0]), lit("vfence"+i), luaString(vs[1]), lit("vdl"+i), luaArg(now+l)); err != nil {
		return Result{}, err
	}
	if !ttlOK {
		return Result{}, errCompareNil // left > ttl, ttl nil
	}
	life := ttl
	if !argIs(at(argv, 5), "1") && l > ttl {
		life = l
	}
	if _, err := call(s, lit("PEXPIRE"), at(keys, 1), luaArg(life)); err != nil {
		return Result{}, err
	}
	return Result{Val: append([]any{int64(2), f, cur, left, int64(life)}, chain...)}, nil
}

// earlierVictims is the steal's answer about the chain before it: for
// each of its first n-1 victims after the told ones, its token (nil where
// the field is gone) and remaining ms.
func earlierVictims(s *server, keys []string, n, now float64) ([]any, error) {
	t, err := call(s, lit("HGET"), at(keys, 1), lit("told"))
	if err != nil {
		return nil, err
	}
	told, _ := luaNumber(t) // tonumber(...) or 0
	var chain []any
	for i := told + 1; i <= n-1; i++ {
		j := *luaArg(i)
		c, err := call(s, lit("HMGET"), at(keys, 1), lit("vacq"+j), lit("vdl"+j))
		if err != nil {
			return nil, err
		}
		cs := c.([]any)
		dl, ok := luaNumber(cs[1])
		if !ok {
			return nil, fmt.Errorf("attempt to perform arithmetic on a nil value")
		}
		chain = append(chain, cs[0], int64(dl-now))
	}
	return chain, nil
}

// argIs is ARGV[i] == s.
func argIs(a *string, s string) bool { return a != nil && *a == s }

// numArg is a number passed to redis.call: nil if tonumber failed.
func numArg(f float64, ok bool) *string {
	if !ok {
		return nil
	}
	return luaArg(f)
}

// forgetVictim is undo's first branch: where another (a thief) holds the
// key, and token ARGV[1]'s key there was a fresh grant (ARGV[2] = "1"),
// the first of the chain of victims, ARGV[1] gives up its claim to it
// (its deadline becomes 0), so that the undo that reaches it does not give
// the key back to an acquire that failed. A key ARGV[1] stole keeps the
// claim: its life is its own victim's deadline, which must outlast the
// undo.
func forgetVictim(s *server, keys, argv []string, cur any) error {
	if cur == nil || !argIs(at(argv, 2), "1") {
		return nil
	}
	v, err := call(s, lit("HGET"), at(keys, 1), lit("vacq1"))
	if err != nil || !eq(v, at(argv, 1)) {
		return err
	}
	_, err = call(s, lit("HSET"), at(keys, 1), lit("vdl1"), lit("0"))
	return err
}

// runUndo is undoScript: the holder ARGV[1] gives the key back to the last
// of its chain of victims, with the rest of the chain, until that
// victim's deadline (2), or deletes it (1).
func runUndo(s *server, keys, argv []string) (Result, error) {
	cur, err := call(s, lit("HGET"), at(keys, 1), lit("acq"))
	if err != nil {
		return Result{}, err
	}
	if !eq(cur, at(argv, 1)) {
		return Result{Val: int64(0)}, forgetVictim(s, keys, argv, cur)
	}
	vn, err := call(s, lit("HGET"), at(keys, 1), lit("vn"))
	if err != nil {
		return Result{}, err
	}
	n, ok := luaNumber(vn)
	if !ok {
		_, err := call(s, lit("DEL"), at(keys, 1))
		return Result{Val: int64(1)}, err
	}
	i := *luaArg(n)
	fields := []*string{lit("vacq" + i), lit("vprio" + i), lit("vfence" + i), lit("vdl" + i)}
	v, err := call(s, append([]*string{lit("HMGET"), at(keys, 1)}, fields...)...)
	if err != nil {
		return Result{}, err
	}
	vs := v.([]any)
	now, err := serverMs(s)
	if err != nil {
		return Result{}, err
	}
	dl, ok := luaNumber(vs[3])
	if !ok {
		return Result{}, fmt.Errorf("attempt to perform arithmetic on a nil value")
	}
	left := dl - now
	if left <= 0 {
		_, err := call(s, lit("DEL"), at(keys, 1))
		return Result{Val: int64(1)}, err
	}
	return Result{Val: int64(2)}, restoreVictim(s, keys, fields, vs, n, left)
}

// restoreVictim is the end of undo's give-back: the victim vs (the chain's
// n-th) holds the key again for left ms, with the chain before it.
func restoreVictim(s *server, keys []string, fields []*string, vs []any, n, left float64) error {
	if _, err := call(s, append([]*string{lit("HDEL"), at(keys, 1)}, fields...)...); err != nil {
		return err
	}
	if _, err := call(s, lit("HSET"), at(keys, 1), lit("acq"), luaString(vs[0]), lit("prio"), luaString(vs[1]), lit("fence"), luaString(vs[2]), lit("vn"), luaArg(n-1)); err != nil {
		return err
	}
	t, err := call(s, lit("HGET"), at(keys, 1), lit("told"))
	if err != nil {
		return err
	}
	if told, ok := luaNumber(t); ok && told > n-1 {
		if _, err := call(s, lit("HSET"), at(keys, 1), lit("told"), luaArg(n-1)); err != nil {
			return err
		}
	}
	if n == 1 {
		if _, err := call(s, lit("HDEL"), at(keys, 1), lit("vn"), lit("told")); err != nil {
			return err
		}
	}
	_, err = call(s, lit("PEXPIRE"), at(keys, 1), luaArg(left))
	return err
}

// runSettle is settleScript: 1 where token ARGV[1] holds the lock (the
// chain below it marked told), -1 where another does, 0 where nobody does.
func runSettle(s *server, keys, argv []string) (Result, error) {
	cur, err := call(s, lit("HGET"), at(keys, 1), lit("acq"))
	if err != nil {
		return Result{}, err
	}
	if !eq(cur, at(argv, 1)) {
		if cur != nil {
			return Result{Val: int64(-1)}, nil
		}
		return Result{Val: int64(0)}, nil
	}
	n, err := call(s, lit("HGET"), at(keys, 1), lit("vn"))
	if err != nil {
		return Result{}, err
	}
	if n != nil {
		if _, err := call(s, lit("HSET"), at(keys, 1), lit("told"), luaString(n)); err != nil {
			return Result{}, err
		}
	}
	return Result{Val: int64(1)}, nil
}

func runRefreshPrio(s *server, keys, argv []string) (Result, error) {
	cur, err := call(s, lit("HGET"), at(keys, 1), lit("acq"))
	if err != nil {
		return Result{}, err
	}
	if eq(cur, at(argv, 1)) {
		if _, err := call(s, lit("PEXPIRE"), at(keys, 1), at(argv, 2)); err != nil {
			return Result{}, err
		}
		return Result{Val: int64(1)}, nil
	}
	if cur != nil {
		return Result{Val: int64(-1)}, nil
	}
	return Result{Val: int64(0)}, nil
}

func runReleasePrio(s *server, keys, argv []string) (Result, error) {
	cur, err := call(s, lit("HGET"), at(keys, 1), lit("acq"))
	if err != nil {
		return Result{}, err
	}
	if eq(cur, at(argv, 1)) {
		if _, err := call(s, lit("DEL"), at(keys, 1)); err != nil {
			return Result{}, err
		}
		if _, err := call(s, lit("DEL"), at(keys, 2)); err != nil {
			return Result{}, err
		}
		return Result{Val: int64(1)}, nil
	}
	if cur != nil {
		return Result{Val: int64(-1)}, nil
	}
	return Result{Val: int64(0)}, nil
}
