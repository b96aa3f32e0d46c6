package redissim

import (
	"math"
	"testing"
)

// A zstep is a command and Redis 7.0.15's answer to it (an Error: its
// exact text), each answer taken from the machine's redis-server.
type zstep struct {
	args []string
	want any
}

func zrun(t *testing.T, cases []zstep) {
	t.Helper()
	steps(t, Options{}, func(p *Process, w *World) {
		for _, c := range cases {
			got := p.Do(0, c.args...)
			if e, ok := c.want.(Error); ok {
				if got.Err == nil || got.Err.Error() != string(e) {
					t.Errorf("%v: got %s, want the error %q", c.args, got, e)
				}
				continue
			}
			want(t, Describe(c.args), got, c.want)
		}
	})
}

func a(xs ...string) []string { return xs }

// ZADD's options and scores, and the scores as Redis 7.0 writes them.
func TestZaddAndScores(t *testing.T) { zrun(t, zaddSteps) }

var zaddSteps = []zstep{
	{a("ZADD", "z", "1.5", "a", "1", "b", "1e20", "c", "-inf", "d", "+inf", "e", "0", "f", "-0", "g", "3.0", "h", "0.1", "i", "1e-5", "j"), int64(10)},
	{a("ZRANGE", "z", "0", "-1", "WITHSCORES"), []any{"d", "-inf", "f", "0", "g", "0", "j", "1.0000000000000001e-05", "i", "0.10000000000000001", "b", "1", "a", "1.5", "h", "3", "c", "1e+20", "e", "inf"}},
	{a("ZSCORE", "z", "g"), "0"},
	{a("ZSCORE", "z", "nope"), nil},
	{a("ZSCORE", "nokey", "a"), nil},
	{a("ZADD", "z", "nan", "x"), errNotFloat},
	{a("ZADD", "z", "abc", "x"), errNotFloat},
	{a("ZADD", "z", "", "x"), errNotFloat},
	{a("ZADD", "z", " 1", "x"), errNotFloat},
	{a("ZADD", "z", "1 ", "x"), errNotFloat},
	{a("ZADD", "z", "1e400", "x"), errNotFloat},
	{a("ZADD", "z", "1e-400", "x"), errNotFloat},
	{a("ZADD", "z", "1", "a", "2"), errSyntax},
	{a("ZADD", "z", "nx", "1"), errSyntax},
	{a("ZADD", "z", "1"), Error("ERR wrong number of arguments for 'zadd' command")},
	{a("ZADD", "z", "nx", "xx", "1", "a"), Error("ERR XX and NX options at the same time are not compatible")},
	{a("ZADD", "z", "gt", "lt", "1", "a"), Error("ERR GT, LT, and/or NX options at the same time are not compatible")},
	{a("ZADD", "z", "nx", "gt", "1", "a"), Error("ERR GT, LT, and/or NX options at the same time are not compatible")},
	{a("ZADD", "z", "incr", "1", "a", "2", "b"), Error("ERR INCR option supports a single increment-element pair")},
	{a("ZADD", "z", "0x10", "x", "Infinity", "y", "1e-310", "w"), int64(3)},
	{a("ZSCORE", "z", "x"), "16"},
	{a("ZSCORE", "z", "w"), "9.9999999999999694e-311"},
	{a("ZADD", "z", "INCR", "2", "a"), "3.5"},
	{a("ZADD", "z", "INCR", "-inf", "e"), Error("ERR resulting score is not a number (NaN)")},
	{a("ZADD", "z", "XX", "INCR", "1", "new"), nil},
	{a("ZADD", "z", "NX", "INCR", "1", "a"), nil},
	{a("ZADD", "z", "GT", "CH", "1", "a", "9", "b", "5", "new"), int64(2)},
	{a("ZADD", "z", "LT", "1", "a", "100", "b"), int64(0)},
	{a("ZSCORE", "z", "a"), "1"},
	{a("ZADD", "z", "XX", "CH", "1", "a", "7", "zz"), int64(0)},
	{a("ZADD", "none", "XX", "1", "a"), int64(0)},
	{a("EXISTS", "none"), int64(0)},
	{a("ZADD", "n", "INCR", "-0", "m"), "-0"},
	{a("ZSCORE", "n", "m"), "0"},
}

// Ranges of scores: "(" excludes, white space before a number and the
// empty string (0) are taken, a bad end is refused before the key is
// looked at; a set left empty is gone; every type but a sorted set is
// WRONGTYPE.
func TestZsetRangesAndTypes(t *testing.T) { zrun(t, zrangeSteps) }

var zrangeSteps = []zstep{
	{a("ZADD", "z", "1", "a", "1.5", "b", "2", "c", "3", "d"), int64(4)},
	{a("ZCOUNT", "z", "(1", "2"), int64(2)},
	{a("ZCOUNT", "z", " 1", "(2"), int64(2)},
	{a("ZCOUNT", "z", "", "("), int64(0)},
	{a("ZCOUNT", "z", "1e400", "2"), int64(0)},
	{a("ZCOUNT", "z", "-inf", "+inf"), int64(4)},
	{a("ZCOUNT", "z", "x", "2"), errRangeNotFloat},
	{a("ZCOUNT", "z", "[1", "2"), errRangeNotFloat},
	{a("ZCOUNT", "z", "nan", "2"), errRangeNotFloat},
	{a("ZRANGEBYSCORE", "z", "(1", "+inf", "WITHSCORES", "LIMIT", "1", "5"), []any{"c", "2", "d", "3"}},
	{a("ZRANGEBYSCORE", "z", "-inf", "+inf", "LIMIT", "-1", "5"), []any{}},
	{a("ZRANGEBYSCORE", "z", "-inf", "+inf", "LIMIT", "0", "-1"), []any{"a", "b", "c", "d"}},
	{a("ZRANGEBYSCORE", "z", "-inf", "+inf", "REV"), errSyntax},
	{a("ZRANGE", "z", "+inf", "(1.5", "BYSCORE", "REV", "LIMIT", "0", "1"), []any{"d"}},
	{a("ZRANGE", "z", "-2", "-1", "REV"), []any{"b", "a"}},
	{a("ZRANGE", "z", "0", "-1", "LIMIT", "0", "1"), errLimitRank},
	{a("ZRANGE", "z", "0", "-1", "BYLEX", "WITHSCORES"), errBylexScores},
	{a("ZRANGE", "z", "a", "1"), errNotInteger},
	{a("ZRANGE", "z", "5", "10"), []any{}},
	{a("ZRANK", "z", "c"), int64(2)},
	{a("ZRANK", "z", "x"), nil},
	{a("ZREMRANGEBYSCORE", "z", "-inf", "(2"), int64(2)},
	{a("ZCARD", "z"), int64(2)},
	{a("ZREM", "z", "c", "x"), int64(1)},
	{a("TYPE", "z"), "zset"},
	{a("PEXPIRE", "z", "100000"), int64(1)},
	{a("ZREM", "z", "d"), int64(1)},
	{a("EXISTS", "z"), int64(0)},
	{a("ZADD", "z", "1", "a"), int64(1)},
	{a("ZREMRANGEBYSCORE", "z", "1", "1"), int64(1)},
	{a("TYPE", "z"), "none"},
	{a("SET", "s", "v"), "OK"},
	{a("ZADD", "s", "1", "a"), errWrongType},
	{a("ZADD", "s", "x", "a"), errNotFloat},
	{a("ZREMRANGEBYSCORE", "s", "x", "2"), errRangeNotFloat},
	{a("ZREMRANGEBYSCORE", "s", "1", "2"), errWrongType},
	{a("ZCARD", "s"), errWrongType},
	{a("ZSCORE", "s", "a"), errWrongType},
	{a("ZREM", "s", "a"), errWrongType},
	{a("ZRANGE", "s", "0", "1"), errWrongType},
	{a("ZADD", "q", "1", "a"), int64(1)},
	{a("GET", "q"), errWrongType},
	{a("HSET", "q", "f", "v"), errWrongType},
	{a("INCR", "q"), errWrongType},
	{a("ZCARD", "nokey"), int64(0)},
	{a("ZREM", "nokey", "a"), int64(0)},
	{a("ZRANGE", "nokey", "0", "-1"), []any{}},
}

// A sorted set past 128 members is a skip list, which keeps -0.
func TestZsetSkipListKeepsMinusZero(t *testing.T) {
	steps(t, Options{}, func(p *Process, w *World) {
		args := []string{"ZADD", "big"}
		for i := range 129 {
			args = append(args, "1", string(rune('A'+i%26))+string(rune('a'+i/26)))
		}
		want(t, "zadd", p.Do(0, args...), int64(129))
		want(t, "zadd -0", p.Do(0, "ZADD", "big", "-0", "neg"), int64(1))
		want(t, "zscore", p.Do(0, "ZSCORE", "big", "neg"), "-0")
		want(t, "keys", Result{Val: len(p.Do(0, "ZRANGE", "big", "0", "-1").Val.([]any))}, 130)
	})
}

// strtod reads what glibc's reads, and how much of it.
func TestStrtod(t *testing.T) {
	for _, c := range []struct {
		s   string
		f   float64
		n   int
		oor bool
	}{
		{"1.5", 1.5, 3, false}, {"  -2e3x", -2000, 6, false}, {"0x10", 16, 4, false},
		{"0x", 0, 1, false}, {"0x.8p1", 1, 6, false}, {"1e", 1, 1, false}, {"1e+", 1, 1, false},
		{".", 0, 0, false}, {"", 0, 0, false}, {"-InFiNiTy", math.Inf(-1), 9, false},
		{"infinit", math.Inf(1), 3, false}, {"1e400", math.Inf(1), 5, true},
		{"1e-400", 0, 6, true}, {"0e-400", 0, 6, false}, {"1_0", 1, 1, false},
	} {
		f, n, oor := strtod(c.s)
		if f != c.f || n != c.n || oor != c.oor {
			t.Errorf("strtod(%q) = %v, %d, %v; want %v, %d, %v", c.s, f, n, oor, c.f, c.n, c.oor)
		}
	}
}

// Members are ordered by score, then by their bytes, whatever order they
// came in: two servers sent the same members in opposite orders hold and
// show the same set.
func TestZsetOrderIsScoreThenBytes(t *testing.T) {
	members := []string{"b", "a", "B", "ab", "", "\xff", "a\x00", "z"}
	w := world(t, Options{Servers: 2})
	w.Go("c", func(p *Process) {
		for i := range members {
			p.Do(0, "ZADD", "z", "1", members[i])
			p.Do(1, "ZADD", "z", "1", members[len(members)-1-i])
		}
		p.Do(0, "ZADD", "z", "-1", "z", "+inf", "B")
		p.Do(1, "ZADD", "z", "-1", "z", "+inf", "B")
		want(t, "zrange", p.Do(0, "ZRANGE", "z", "0", "-1"), []any{"z", "", "a", "a\x00", "ab", "b", "\xff", "B"})
		want(t, "zrange of the other", p.Do(1, "ZRANGE", "z", "0", "-1"), []any{"z", "", "a", "a\x00", "ab", "b", "\xff", "B"})
	})
	run(t, w)
	k0, _ := w.Keys(0)
	k1, _ := w.Keys(1)
	if len(k0) != 1 || k0[0] != k1[0] || k0[0] != "z=<z:-1 :1 a:1 a\x00:1 ab:1 b:1 \xff:1 B:inf>" {
		t.Errorf("the servers show %q and %q", k0, k1)
	}
}
