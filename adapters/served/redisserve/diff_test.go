package redisserve_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockprover/lockprover/adapters/served/redisserve"
	redisservers "github.com/lockprover/lockprover/adapters/servers/redis"
	"github.com/lockprover/lockprover/adapters/servers/versions"
	"github.com/lockprover/lockprover/sim/redissim"
)

// The scripts the differential draws: the release and extend scripts of
// redsync (v4) and of redis-py's Lock (4.3.4), and a few of its own that
// exercise the conversions between Lua and RESP.
var diffScripts = map[string]string{
	"redsync-delete": `
	local val = redis.call("GET", KEYS[1])
	if val == ARGV[1] then
		return redis.call("DEL", KEYS[1])
	elseif val == false then
		return -1
	else
		return 0
	end`,
	"redsync-touch": `
	local val = redis.call("GET", KEYS[1])
	if val == ARGV[1] then
		return redis.call("PEXPIRE", KEYS[1], ARGV[2])
	elseif val == false then
		return -1
	else
		return 0
	end`,
	"redispy-release": `
        local token = redis.call('get', KEYS[1])
        if not token or token ~= ARGV[1] then
            return 0
        end
        redis.call('del', KEYS[1])
        return 1`,
	"redispy-extend": `
        local token = redis.call('get', KEYS[1])
        if not token or token ~= ARGV[1] then
            return 0
        end
        local expiration = redis.call('pttl', KEYS[1])
        if not expiration then
            expiration = 0
        end
        if expiration < 0 then
            return 0
        end

        local newttl = ARGV[2]
        if ARGV[3] == "0" then
            newttl = ARGV[2] + expiration
        end
        redis.call('pexpire', KEYS[1], newttl)
        return 1`,
	"values":   `return {1, 2.9, "s", false, true, {KEYS[1], #ARGV}, redis.call("exists", KEYS[1])}`,
	"status":   `return redis.call("set", KEYS[1], ARGV[1])`,
	"pcall":    `local r = redis.pcall("incr", KEYS[1]) if type(r) == "table" and r.err then return redis.error_reply("BUSYKEY " .. r.err) end return r`,
	"raise":    `return redis.call("incr", KEYS[1])`,
	"lua-err":  `local x = nil return x + 1`,
	"err-ret":  `return {err = "CUSTOM failure here"}`,
	"ok-ret":   `return redis.status_reply("DONE")`,
	"get-type": `local t = redis.call("type", KEYS[1]) return t.ok`,
	"hash":     `redis.call("hset", KEYS[1], "f", ARGV[1]) return redis.call("hmget", KEYS[1], "f", "g")`,
	"nil-arg":  `return redis.call("get", ARGV[5])`,
	"numbers":  `return redis.call("set", KEYS[1], 3.5) and redis.call("get", KEYS[1])`,
	"global":   `x = 5 return x`,
	"no-such":  `return undefined_thing`,
	"arity":    `return redis.pcall("get")`,
	"noscript": `return redis.call("eval", "return 1", 0)`,
	"no-args":  `return redis.call()`,
	"loop":     `local n = 0 for i, k in ipairs(KEYS) do n = n + redis.call("exists", k) end for _, a in ipairs(ARGV) do n = n + #a end return n`,
	"strings":  `return string.format("%s-%d-%s", ARGV[1], #ARGV, string.upper(string.sub(ARGV[1], 1, 1)))`,
	"table-ok": `local t = redis.call("set", KEYS[1], "v") return {t, t.ok, type(t)}`,
	"zset":     `redis.call("zadd", KEYS[1], 1.5, ARGV[1], 0.1, "m") return {redis.call("zscore", KEYS[1], ARGV[1]), redis.call("zrange", KEYS[1], 0, -1, "withscores"), redis.call("zcard", KEYS[1])}`,
	"zincr":    `return redis.call("zadd", KEYS[1], "incr", ARGV[2], ARGV[1])`,
	// npm redis-semaphore 5.8.0's acquire and refresh (lib/semaphore),
	// run with their own arguments (semArgs).
	"sem-acquire": semAcquire,
	"sem-refresh": semRefresh,
}

const semAcquire = `
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
  end`

const semRefresh = `
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
  end`

// A diffStep is one command of a sequence, or a sleep (Sleep > 0).
type diffStep struct {
	Args  []any
	Tx    [][]any
	Sleep time.Duration
}

func (s diffStep) String() string {
	switch {
	case s.Sleep > 0:
		return "sleep " + s.Sleep.String()
	case s.Tx != nil:
		parts := []string{"MULTI"}
		for _, a := range s.Tx {
			parts = append(parts, words(a))
		}
		return strings.Join(append(parts, "EXEC"), "; ")
	}
	if len(s.Args) > 2 && (s.Args[0] == "EVAL") {
		return words(append([]any{"EVAL", scriptName(s.Args[1].(string))}, s.Args[2:]...))
	}
	return words(s.Args)
}

func words(args []any) string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = fmt.Sprint(a)
		if src, ok := a.(string); ok && i == 1 && (args[0] == "EVAL" || args[0] == "SCRIPT") || i == 2 && args[0] == "SCRIPT" {
			if n := scriptName(src); n != "?" {
				out[i] = n
			}
		}
	}
	return strings.Join(out, " ")
}

func scriptName(src string) string {
	for n, s := range diffScripts {
		if s == src {
			return n
		}
	}
	return "?"
}

// drawSequence draws a sequence of n steps from r: commands on a few keys
// of every type (so that WRONGTYPE comes), scripts by EVAL and EVALSHA
// (loaded or not), transactions, and sleeps long enough that the short
// deadlines pass (and far from them, so that real time's jitter does not
// decide).
func drawSequence(r *rand.Rand, n int) []diffStep {
	keys := []string{"a", "b", "h", "l", "z"}
	names := make([]string, 0, len(diffScripts))
	for k := range diffScripts {
		names = append(names, k)
	}
	slicesSort(names)
	key := func() string { return keys[r.Intn(len(keys))] }
	tok := func() string { return []string{"t1", "t2", "7"}[r.Intn(3)] }
	ttl := func() string { return []string{"60", "10000"}[r.Intn(2)] }
	var out []diffStep
	cmd := func() []any {
		if r.Intn(3) == 0 {
			return zsetCmd(r, key, tok)
		}
		switch k := r.Intn(22); k {
		case 0, 1:
			return drawSet(r, key, tok, ttl)
		case 2:
			return []any{"GET", key()}
		case 3:
			return []any{"DEL", key(), key()}
		case 4:
			return []any{"EXISTS", key(), key()}
		case 5:
			return []any{"PEXPIRE", key(), []string{"60", "10000", "0", "-5"}[r.Intn(4)]}
		case 6:
			return []any{"PTTL", key()}
		case 7:
			return []any{"INCR", key()}
		case 8:
			return []any{"TYPE", key()}
		case 9:
			return []any{"HSET", key(), "f", tok(), "g", "2"}
		case 10:
			return []any{"HGET", key(), "f"}
		case 11:
			return []any{"RPUSH", key(), tok(), tok()}
		case 12:
			return []any{"LRANGE", key(), "0", "-1"}
		case 13:
			return []any{"DBSIZE"}
		case 14:
			return []any{"BLPOP", key(), "0.05"}
		case 15, 16, 17, 18, 19:
			return drawEval(r, diffScripts[names[r.Intn(len(names))]], k == 19, key, tok, ttl)
		case 20:
			return []any{"SCRIPT", "LOAD", diffScripts[names[r.Intn(len(names))]]}
		}
		return drawMore(r, key, tok)
	}
	for range n {
		switch k := r.Intn(12); {
		case k == 0:
			out = append(out, diffStep{Sleep: 100 * time.Millisecond})
		case k == 1:
			var tx [][]any
			for range 1 + r.Intn(3) {
				c := cmd()
				if c[0] == "BLPOP" || c[0] == "SCRIPT" {
					c = []any{"GET", key()}
				}
				tx = append(tx, c)
			}
			out = append(out, diffStep{Tx: tx})
		default:
			out = append(out, diffStep{Args: cmd()})
		}
	}
	return out
}

// drawSet draws a SET with some of its options.
func drawSet(r *rand.Rand, key, tok, ttl func() string) []any {
	a := []any{"SET", key(), tok()}
	if r.Intn(2) == 0 {
		a = append(a, []string{"NX", "XX"}[r.Intn(2)])
	}
	if r.Intn(3) > 0 {
		a = append(a, "PX", ttl())
	} else if r.Intn(2) == 0 {
		a = append(a, "EX", "10")
	}
	if r.Intn(5) == 0 {
		a = append(a, "GET")
	}
	return a
}

// drawEval draws an EVAL of src on a key (EVALSHA if sha):
// redis-semaphore's scripts with their own arguments, any other with a
// token, a ttl and a flag.
func drawEval(r *rand.Rand, src string, sha bool, key, tok, ttl func() string) []any {
	head := []any{"EVAL", src, "1", key()}
	if sha {
		head[0], head[1] = "EVALSHA", redissim.ScriptSHA1(src)
	}
	switch {
	case src == semAcquire || src == semRefresh:
		return append(head, semArgs(r, tok(), ttl())...)
	case sha:
		return append(head, tok(), ttl(), "0")
	}
	return append(head, tok(), ttl(), []string{"0", "1"}[r.Intn(2)])
}

// drawMore draws one of the other string commands, or HLEN.
func drawMore(r *rand.Rand, key, tok func() string) []any {
	switch r.Intn(5) {
	case 0:
		return []any{"MSETNX", key(), tok(), key(), tok()}
	case 1:
		return []any{"MSET", key(), tok(), key(), tok()}
	case 2:
		return []any{"MGET", key(), key(), key()}
	case 3:
		return []any{"GETRANGE", key(), []string{"0", "1", "-2", "-5"}[r.Intn(4)], []string{"0", "1", "-1", "5"}[r.Intn(4)]}
	}
	return []any{"HLEN", key()}
}

// semArgs are redis-semaphore's scripts' arguments: the limit, the
// identifier, the lock's timeout (ms) and the client's clock (ms).
func semArgs(r *rand.Rand, id, ttl string) []any {
	limit := []string{"1", "2", "x"}[r.Intn(3)]
	now := []string{"1000", "1050", "20000", "1735689600000"}[r.Intn(4)]
	return []any{limit, id, ttl, now}
}

// zsetCmd draws a sorted set's command: ZADD with its options, good and
// bad scores; ranges of scores with "(" and bad ends; ZRANGE's options;
// redis-semaphore's scripts.
func zsetCmd(r *rand.Rand, anyKey func() string, anyTok func() string) []any {
	pick := func(xs ...string) string { return xs[r.Intn(len(xs))] }
	// Mostly sets: z (which other commands touch too) and y (which only
	// these do); now and then a key of any type.
	key := func() string { return pick("z", "z", "z", "y", "y", anyKey()) }
	tok := func() string { return pick("m1", "m2", "m3", anyTok()) }
	score := func() string {
		if r.Intn(4) > 0 {
			return pick("1", "2", "1.5", "0.1", "-0", "1e20", "inf", "-inf", "+inf", "3.0", "0x10", "2.5e-3")
		}
		return pick("x", "nan", " 1", "1e400", "", "1e-400", "(1")
	}
	bound := func() string { return pick("-inf", "+inf", "1", "(1", "1.5", "(2", "2", "x", "", "(", "1e400") }
	switch r.Intn(14) {
	case 0, 1, 2:
		a := []any{"ZADD", key()}
		for _, f := range []string{"NX", "XX", "GT", "LT", "CH", "INCR"} {
			if r.Intn(6) == 0 {
				a = append(a, f)
			}
		}
		for range 1 + r.Intn(2) {
			a = append(a, score(), tok())
		}
		if r.Intn(10) == 0 {
			a = a[:len(a)-1]
		}
		return a
	case 3:
		return []any{"ZREM", key(), tok(), tok()}
	case 4:
		return []any{"ZREMRANGEBYSCORE", key(), bound(), bound()}
	case 5:
		return []any{"ZCARD", key()}
	case 6:
		return []any{"ZSCORE", key(), tok()}
	case 7:
		return []any{"ZCOUNT", key(), bound(), bound()}
	case 8:
		return []any{"ZRANK", key(), tok()}
	case 9:
		a := []any{"ZRANGE", key(), pick("0", "1", "-1", "-2", "x"), pick("-1", "0", "5", "-3")}
		return append(a, []any{"WITHSCORES", "REV"}[:r.Intn(3)]...)
	case 10:
		a := []any{"ZRANGE", key(), bound(), bound(), "BYSCORE"}
		for _, o := range []string{"REV", "WITHSCORES"} {
			if r.Intn(2) == 0 {
				a = append(a, o)
			}
		}
		if r.Intn(2) == 0 {
			a = append(a, "LIMIT", pick("0", "1", "-1"), pick("1", "-1", "0"))
		}
		return a
	case 11:
		return []any{"ZRANGEBYSCORE", key(), bound(), bound(), "WITHSCORES", "LIMIT", pick("0", "1"), pick("1", "5")}
	case 12:
		return append([]any{"EVALSHA", redissim.ScriptSHA1(semAcquire), "1", key()}, semArgs(r, tok(), pick("60", "10000"))...)
	}
	return append([]any{"EVAL", pick(semAcquire, semRefresh), "1", key()}, semArgs(r, tok(), pick("60", "10000"))...)
}

// runSequence runs seq through c: each step's reply as text (a sleep's
// "slept"). before is called before each step with its index.
func runSequence(ctx context.Context, c *redis.Client, seq []diffStep, before func(int), sleep func(time.Duration)) []string {
	var out []string
	for i, st := range seq {
		before(i)
		switch {
		case st.Sleep > 0:
			sleep(st.Sleep)
			out = append(out, "slept")
		case st.Tx != nil:
			cmds, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
				for _, a := range st.Tx {
					p.Do(ctx, a...)
				}
				return nil
			})
			parts := []string{replyText(nil, err)}
			for i, cmd := range cmds {
				parts = append(parts, replyText(st.Tx[i], cmd.(*redis.Cmd).Val(), cmd.Err()))
			}
			out = append(out, strings.Join(parts, " | "))
		default:
			v, err := c.Do(ctx, st.Args...).Result()
			out = append(out, replyText(st.Args, v, err))
		}
	}
	return out
}

func replyText(args []any, vs ...any) string {
	if len(vs) == 1 {
		// TxPipelined's own error
		if vs[0] == nil {
			return "tx ok"
		}
		return "tx error: " + vs[0].(error).Error()
	}
	v, err := vs[0], vs[1]
	if err != nil {
		if errors.Is(err.(error), redis.Nil) {
			return "nil"
		}
		return "error: " + err.(error).Error()
	}
	if len(args) > 0 && args[0] == "PTTL" {
		if n, ok := v.(int64); ok && n > 0 {
			return "pttl " + strconv.FormatInt(n, 10)
		}
	}
	return fmt.Sprintf("%#v", v)
}

// The differential: drawn sequences of commands and scripts, each run
// through go-redis on the served simulator and on a private
// redis-server, reply by reply, in RESP2 and RESP3 in turn.
// LOCKPROVER_RESP_SEQUENCES sets how many
// (20 by default), LOCKPROVER_RESP_SEED the first seed, and
// LOCKPROVER_RESP_VERSION the server (a --server-version value: 8.0.6,
// valkey-9.1.2; the machine's redis-server by default).
func TestDifferentialWithRedisServer(t *testing.T) {
	n, seed := 20, int64(2026112900)
	if v, err := strconv.Atoi(os.Getenv("LOCKPROVER_RESP_SEQUENCES")); err == nil && v > 0 {
		n = v
	}
	if v, err := strconv.ParseInt(os.Getenv("LOCKPROVER_RESP_SEED"), 10, 64); err == nil {
		seed = v
	}
	var o redisservers.Options
	if v := os.Getenv("LOCKPROVER_RESP_VERSION"); v != "" {
		var err error
		if o.Version, err = versions.Parse(v, "redis", "valkey"); err != nil {
			t.Fatalf("LOCKPROVER_RESP_VERSION: %v", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Minute)
	defer cancel()
	srv, err := redisservers.Start(ctx, t.TempDir(), o)
	if errors.Is(err, redisservers.ErrNoRedis) {
		t.Skipf("the differential needs redis-server: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	// Even sequences speak RESP2, odd ones RESP3 (go-redis's HELLO 3).
	clients := map[int]*redis.Client{}
	for _, proto := range []int{2, 3} {
		clients[proto] = redis.NewClient(&redis.Options{Addr: srv.Addr(), Protocol: proto, PoolSize: 1, MaxRetries: -1, ReadTimeout: 5 * time.Second})
		defer clients[proto].Close()
	}
	agree, steps, stepsAgree, luaWording, dbsize, valkeyWording := 0, 0, 0, 0, 0, 0
	valkey := o.Version.Server == "valkey"
	for i := range n {
		seq := drawSequence(rand.New(rand.NewSource(seed+int64(i))), 15+i%10)
		proto := 2 + i%2
		real := clients[proto]
		if err := real.FlushAll(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		if err := real.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		// The simulator's clock follows the real run's: before each step,
		// the virtual time that passed since the first is made as long as
		// the real time that did (a BLPOP that timed out, the round trips);
		// so deadlines pass on both at the same steps.
		var at []time.Duration
		start := time.Now()
		want := runSequence(ctx, real, seq, func(int) { at = append(at, time.Since(start)) }, time.Sleep)
		var got []string
		// Grace of a second: a client slowed down by the machine (a
		// collection, a busy core) would otherwise idle, and move the
		// simulator's clock past the real run's.
		_, s, errs := serve(t, redissim.Options{}, redisserve.Options{Grace: time.Second}, map[string]client{"c1": func(w *redissim.World, wp *redissim.Process, sp *redisserve.Process) error {
			c := redis.NewClient(&redis.Options{Addr: sp.Addrs()[0], Protocol: proto, PoolSize: 1, MaxRetries: -1, ReadTimeout: 5 * time.Second})
			defer c.Close()
			v0 := int64(-1)
			follow := func(i int) {
				sp.Do(func() {
					if v0 < 0 {
						v0 = w.Now()
					}
					if d := at[i] - time.Duration(w.Now()-v0); d > 0 {
						wp.Sleep(d)
					}
				})
			}
			got = runSequence(ctx, c, seq, follow, func(d time.Duration) {})
			return nil
		}})
		check(errs, t)
		if u := s.Unserved(); len(u) > 0 {
			t.Errorf("sequence %d (seed %d): unserved %q", i, seed+int64(i), u)
		}
		same := true
		for j := range seq {
			steps++
			if j < len(got) && (got[j] == want[j] || closePTTL(got[j], want[j])) {
				stepsAgree++
				continue
			}
			if j < len(got) && valkey && (asRedis(got[j]) == asRedis(want[j]) || closePTTL(asRedis(got[j]), asRedis(want[j]))) {
				// Valkey's own wording of an error Redis words
				// otherwise (the simulator words it as Redis 7.0 does).
				stepsAgree++
				valkeyWording++
				continue
			}
			if j < len(got) && luaError.ReplaceAllString(got[j], "$1") == luaError.ReplaceAllString(want[j], "$1") {
				// Lua's own runtime errors are worded by gopher-lua, not
				// by Lua 5.1 (an arithmetic on nil, say): the same error,
				// from the same line.
				stepsAgree++
				luaWording++
				continue
			}
			if strings.Contains(seq[j].String(), "DBSIZE") {
				// Known: Redis counts the keys past their deadline its
				// active expiry (every 100 ms) has not collected yet;
				// redissim counts only the live ones (a key is gone to
				// every command once its deadline passed).
				dbsize++
				continue
			}
			if same {
				var b strings.Builder
				for k := range seq {
					fmt.Fprintf(&b, "\n  %2d at %7.1f ms  %-40.40s  sim %-30.30s  real %.30s", k, float64(at[k])/1e6, seq[k], atOr(got, k), want[k])
				}
				t.Errorf("sequence %d (seed %d, RESP%d) differs first at step %d, %s:\n  simulator:    %s\n  redis-server: %s%s", i, seed+int64(i), proto, j, seq[j], atOr(got, j), want[j], b.String())
			}
			same = false
		}
		if same {
			agree++
		}
	}
	t.Logf("against %s: %d sequences (seeds %d to %d), %d have no difference but the known; %d steps, %d agree (%d of them up to the wording of Lua's own runtime error, %d up to Valkey's wording of an error), %d differ as known (DBSIZE counting keys Redis has not yet expired)", serverName(o.Version), n, seed, seed+int64(n)-1, agree, steps, stepsAgree, luaWording, valkeyWording, dbsize)
}

// serverName names the differential's server for its log.
func serverName(v versions.Version) string {
	if v.Name == "" {
		return "the machine's redis-server"
	}
	return v.String()
}

// closePTTL says whether two PTTL replies are within 50 ms: the real
// server's clock is read when the command arrives, a little after the
// step began (6 ms after, beside a loaded suite).
func closePTTL(a, b string) bool {
	as, bs := strings.Split(a, " | "), strings.Split(b, " | ")
	if len(as) > 1 && len(as) == len(bs) {
		for i := range as {
			if as[i] != bs[i] && !closePTTL(as[i], bs[i]) {
				return false
			}
		}
		return true
	}
	x, ok1 := strings.CutPrefix(a, "pttl ")
	y, ok2 := strings.CutPrefix(b, "pttl ")
	m, err1 := strconv.ParseInt(x, 10, 64)
	n, err2 := strconv.ParseInt(y, 10, 64)
	return ok1 && ok2 && err1 == nil && err2 == nil && m-n <= 50 && n-m <= 50
}

// asRedis is a reply with Valkey's wording of its errors, and Redis's
// (the simulator's), made one: Valkey leaves the script's SHA out of
// "script: SHA, on @user_script", shortens NOSCRIPT's text, and says
// Valkey, or nothing, where Redis says Redis or redis lib; a runtime error
// of Lua's own is cut to its line, as luaError does.
func asRedis(s string) string {
	for _, r := range valkeyWords {
		s = r[0].(*regexp.Regexp).ReplaceAllString(s, r[1].(string))
	}
	return s
}

var valkeyWords = [][2]any{
	{regexp.MustCompile(`script: [0-9a-f]{40}, on @`), "script: on @"},
	{regexp.MustCompile(`(ERR user_script:\d+:) [^|]*?( script: on @user_script:\d+\.)`), "$1$2"},
	{regexp.MustCompile(`NOSCRIPT No matching script\. Please use EVAL\.`), "NOSCRIPT No matching script."},
	{regexp.MustCompile(`This (Redis|Valkey) command`), "This command"},
	{regexp.MustCompile(`for this redis lib call`), "for this call"},
	{regexp.MustCompile(`Lua redis lib command arguments must be`), "Command arguments must be"},
	{regexp.MustCompile(`calling Redis command from script`), "calling command from script"},
}

// luaError is a runtime error of Lua's own (not a command's): its
// message, which gopher-lua words its own way, goes.
var luaError = regexp.MustCompile(`(ERR user_script:\d+:) [^|]*?( script: [0-9a-f]{40}, on @user_script:\d+\.)`)

func atOr(xs []string, i int) string {
	if i < len(xs) {
		return xs[i]
	}
	return "(none)"
}
