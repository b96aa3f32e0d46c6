package redisconform

import (
	"slices"
	"strings"

	"pgregory.net/rapid"

	"github.com/lockprover/lockprover/sim/redissim"
)

// The differential's steps of sorted sets (see differential.go): npm
// redis-semaphore 5.8.0's scripts (its Semaphore's acquire and refresh,
// run by the served servers' Lua interpreter, as on the wire), and ZADD
// with its options, ZREM, ZREMRANGEBYSCORE, ZCARD, ZSCORE, ZCOUNT, ZRANK
// and ZRANGE, with good and bad scores and ranges, on sets and on keys of
// other types. Their errors must have Redis's words too, the scripts'
// aside (Lua's own runtime errors are gopher-lua's words).

// zsetKinds are the steps' kinds of sorted sets.
var zsetKinds = []string{"semAcquire", "semRefresh", "ZADD", "ZADD", "ZREM", "ZREMRANGEBYSCORE",
	"ZCARD", "ZSCORE", "ZSCORE", "ZCOUNT", "ZRANK", "ZRANGE", "ZRANGE"}

// semSources are npm redis-semaphore 5.8.0's scripts (lib/semaphore/
// acquire/lua.js and refresh/lua.js, between their backquotes).
var semSources = map[string]string{
	"semAcquire": `
  local key = KEYS[1]
  local limit = tonumber(ARGV[1])
  local identifier = ARGV[2]
  local lockTimeout = tonumber(ARGV[3])
  local now = tonumber(ARGV[4])
  local expiredTimestamp = now - lockTimeout

  redis.call('zremrangebyscore', key, '-inf', expiredTimestamp)

  if redis.call('zcard', key) < limit then
    redis.call('zadd', key, now, identifier)
    redis.call('pexpire', key, lockTimeout)
    return 1
  else
    return 0
  end`,
	"semRefresh": `
  local key = KEYS[1]
  local limit = tonumber(ARGV[1])
  local identifier = ARGV[2]
  local lockTimeout = tonumber(ARGV[3])
  local now = tonumber(ARGV[4])
  local expiredTimestamp = now - lockTimeout

  redis.call('zremrangebyscore', key, '-inf', expiredTimestamp)

  if redis.call('zscore', key, identifier) then
    redis.call('zadd', key, now, identifier)
    redis.call('pexpire', key, lockTimeout)
    return 1
  else
    return 0
  end`,
}

// drawZset draws the rest of a step of the sorted sets' kinds, and says
// whether s is one: its command in s.zcmd, its key (unprefixed) at
// s.zcmd[s.zkey].
func drawZset(t *rapid.T, s *step, label func(string) string) bool {
	if !slices.Contains(zsetKinds, s.kind) {
		return false
	}
	pick := func(what string, xs ...string) string { return rapid.SampledFrom(xs).Draw(t, label(what)) }
	key := pick("zkey", "{z}:sem", "{z}:sem", "{z}:sem", "{z}:other", "k1", "{p}:lock")
	member := func() string { return pick("member", "t1", "t2", "5", s.token) }
	score := func() string { // one in five bad
		if rapid.IntRange(0, 4).Draw(t, label("badscore")) == 0 {
			return pick("score", "x", "nan", " 1", "1e400", "", "1e-400", "(1")
		}
		return pick("score", "1", "2", "1.5", "0.1", "-0", "1e20", "inf", "-inf", "+inf", "3.0", "0x10", "2.5e-3")
	}
	bound := func() string {
		return pick("bound", "-inf", "+inf", "1", "(1", "1.5", "(2", "2", "x", "", "(", "1e400")
	}
	s.zkey = 1
	switch s.kind {
	case "semAcquire", "semRefresh":
		s.sha = rapid.IntRange(0, 3).Draw(t, label("evalsha")) == 0
		s.zcmd, s.zkey = []string{"EVAL", semSources[s.kind], "1", key}, 3
		if s.sha {
			s.zcmd[0], s.zcmd[1] = "EVALSHA", redissim.ScriptSHA1(semSources[s.kind])
		}
		s.zcmd = append(s.zcmd, pick("limit", "1", "1", "2", "2", "x"), s.token, s.ttl, pick("now", "1000", "1050", "100000", "1735689600000"))
	case "ZADD":
		s.zcmd = []string{"ZADD", key}
		for _, f := range []string{"NX", "XX", "GT", "LT", "CH", "INCR"} {
			if rapid.IntRange(0, 9).Draw(t, label("flag"+f)) == 0 {
				s.zcmd = append(s.zcmd, f)
			}
		}
		for range rapid.IntRange(1, 2).Draw(t, label("pairs")) {
			s.zcmd = append(s.zcmd, score(), member())
		}
	case "ZREM", "ZSCORE", "ZRANK":
		s.zcmd = []string{s.kind, key, member()}
	case "ZCARD":
		s.zcmd = []string{s.kind, key}
	case "ZREMRANGEBYSCORE", "ZCOUNT":
		s.zcmd = []string{s.kind, key, bound(), bound()}
	case "ZRANGE":
		s.zcmd = drawZrange(t, key, bound, label)
	}
	return true
}

// drawZrange draws a ZRANGE, by rank or BYSCORE, or a ZRANGEBYSCORE.
func drawZrange(t *rapid.T, key string, bound func() string, label func(string) string) []string {
	opt := func(what string) bool { return rapid.Bool().Draw(t, label(what)) }
	var c []string
	switch rapid.IntRange(0, 2).Draw(t, label("zrange")) {
	case 0:
		c = []string{"ZRANGE", key, rapid.SampledFrom([]string{"0", "1", "-1", "-2", "x"}).Draw(t, label("start")),
			rapid.SampledFrom([]string{"-1", "0", "5", "-3"}).Draw(t, label("stop"))}
		if opt("rev") {
			c = append(c, "REV")
		}
	case 1:
		c = []string{"ZRANGE", key, bound(), bound(), "BYSCORE"}
		if opt("rev") {
			c = append(c, "REV")
		}
	default:
		c = []string{"ZRANGEBYSCORE", key, bound(), bound()}
	}
	if opt("withscores") {
		c = append(c, "WITHSCORES")
	}
	if opt("limit") {
		c = append(c, "LIMIT", rapid.SampledFrom([]string{"0", "1", "-1"}).Draw(t, label("offset")),
			rapid.SampledFrom([]string{"1", "-1", "0", "5"}).Draw(t, label("count")))
	}
	return c
}

// zsetArgs is a step of the sorted sets' kinds as a command, its key
// prefixed with prefix; nil for another kind.
func (s step) zsetArgs(prefix string) []string {
	if s.zcmd == nil {
		return nil
	}
	c := slices.Clone(s.zcmd)
	c[s.zkey] = prefix + c[s.zkey]
	return c
}

// zsetDescribe is a step of the sorted sets' kinds as the trace shows it,
// a script by its name; "" for another kind.
func (s step) zsetDescribe() string {
	if s.zcmd == nil {
		return ""
	}
	c := slices.Clone(s.zcmd)
	if _, ok := semSources[s.kind]; ok {
		c[1] = s.kind
	}
	return strings.Join(c, " ")
}

// sameZsetError says whether the two errors of a sorted set's step agree:
// in their words, but for a script's (Lua's own runtime errors are worded
// by gopher-lua).
func sameZsetError(s step, sim, real error) bool {
	if _, ok := semSources[s.kind]; ok {
		return sim != nil && real != nil
	}
	return sim != nil && real != nil && sim.Error() == real.Error()
}
