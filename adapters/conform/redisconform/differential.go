package redisconform

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
	"pgregory.net/rapid"

	"github.com/lockprover/lockprover/internal/realtime"
	"github.com/lockprover/lockprover/model/redlock"
	"github.com/lockprover/lockprover/sim/redissim"
)

// The differential: is the simulator telling the truth about Redis?
// rapid draws sequences of the commands and scripts the Redlock reference
// sends (its scripts by EVAL and EVALSHA, GET, DEL, PEXPIRE, and beside
// them PTTL, SET NX PX, INCR and EXISTS, with bad arguments now and then)
// and those of the priority lock (its scripts obtain, undo, settle, refreshPrio
// and releasePrio, HGET, MULTI/EXEC of RPUSH and PEXPIRE, BLPOP, PUBLISH,
// and beside them HSET, HMGET, HLEN, RPUSH, LLEN, LRANGE and TYPE, on
// keys of every type) and those of sorted sets (diffzset.go: npm
// redis-semaphore's scripts, ZADD, ZREM, ZREMRANGEBYSCORE, ZCARD, ZSCORE,
// ZCOUNT, ZRANK, ZRANGE), with sleeps; each runs on a private
// redis-server and on a simulated server, which must give the same
// answers: the same values, an error where Redis gives one (its text
// aside, and inside a transaction's answer too; but a sorted set's
// command's error has Redis's words), and PTTLs (and the remaining times obtain
// answers) within a tolerance.
//
// A BLPOP that finds its lists empty waits out its timeout (0.2 s; Redis
// answers on its 100 ms cron, so up to 100 ms later): on the simulator it
// then lasts as long as it did on Redis, as a sleep does, and the time it
// took does not count as the commands' time.
//
// Expiry is judged on the real clock: the sequence runs on Redis first,
// which records when each command was sent and how long its answer took;
// on the simulator each command is then sent at the same time after the
// start (the simulator's clock follows the real one, sleeps and the
// commands' own time alike). Redis ran a command somewhere within its
// round trip, so the two clocks differ by at most one command's round
// trip: a run in which a command (a BLPOP waiting out its timeout aside)
// took more than 25 ms cannot be judged, and neither can one in which a
// command's round trip came within 2 ms of a short ttl's (50 ms) deadline
// as Redis may have set it (the key's fate there is either). PTTLs agree
// within that round trip (28 ms either way). Such a run is made again, and
// a sequence that cannot be judged on any try is inconclusive, not a
// divergence. What a run's judging depends on is each command's round
// trip, not the sum of them: a loaded machine makes a few runs again,
// not most.

const (
	shortTTL = "50"
	napTime  = 120 * time.Millisecond
	// maxLatency is the longest round trip of a command in a run judged.
	maxLatency = 25 * time.Millisecond
	// nearDeadline is how close to a short ttl's deadline a command may not
	// come: Redis counts whole ms.
	nearDeadline = 2 * time.Millisecond
	pttlSlack    = 28 // ms: maxLatency, and a ms of rounding on each side
	// maxTries is how many times a sequence runs while the machine is too
	// slow to judge it.
	maxTries = 5
)

// A step is one command of a sequence, after a sleep if sleep is set. Its
// keys are without a run's prefix.
type step struct {
	sleep bool
	// kind is a command (GET, DEL, PEXPIRE, PTTL, SET, INCR, EXISTS), a
	// script's name, or badnumkeys: an EVAL with more keys than arguments.
	kind string
	sha  bool // a script sent by EVALSHA, not EVAL
	// key is k1, k2 or k1:fence; fence a fence counter; raise the raise
	// script's argument.
	key, fence, token, ttl, raise string
	// The priority lock's: lock is a hash's key, list a list's, list2
	// BLPOP's second list, prio a priority, field a hash's field, flags
	// obtain's ARGV[4] and ARGV[5], tmo BLPOP's timeout.
	lock, list, list2, prio, field, flags, tmo string
	// A sorted set's (diffzset.go): its command, its key (unprefixed) at
	// zcmd[zkey].
	zcmd []string
	zkey int
}

// args is the step's command, its keys prefixed with prefix.
func (s step) args(prefix string) []string {
	key, fence := prefix+s.key, prefix+s.fence
	if a := s.prioArgs(prefix); a != nil {
		return a
	}
	if a := s.zsetArgs(prefix); a != nil {
		return a
	}
	switch s.kind {
	case "GET", "DEL", "PTTL", "INCR", "EXISTS":
		return []string{s.kind, key}
	case "PEXPIRE":
		return []string{s.kind, key, s.ttl}
	case "SET":
		return []string{s.kind, key, s.token, "NX", "PX", s.ttl}
	case "badnumkeys":
		return []string{"EVAL", sources["acquire"], "5", key}
	}
	eval := []string{"EVAL", sources[s.kind]}
	if s.sha {
		eval = []string{"EVALSHA", redissim.ScriptSHA1(sources[s.kind])}
	}
	switch s.kind {
	case "acquire":
		return append(eval, "2", key, fence, s.token, s.ttl)
	case "raise":
		return append(eval, "1", fence, s.raise)
	case "release":
		return append(eval, "1", key, s.token)
	}
	return append(eval, "1", key, s.token, s.ttl)
}

func (s step) String() string {
	if s.sleep {
		return "sleep; " + s.describe()
	}
	return s.describe()
}

// describe is the step's command, as the trace shows it.
func (s step) describe() string {
	if s.kind == "tx" {
		return redissim.DescribeTx(s.tx(""))
	}
	if d := s.zsetDescribe(); d != "" {
		return d
	}
	return redissim.Describe(s.args(""))
}

// drawSequence draws 1 to 20 steps. One sequence in four is of sorted
// sets' steps alone, so that their sets grow and are read.
func drawSequence(t *rapid.T) []step {
	var steps []step
	zsets := rapid.IntRange(0, 3).Draw(t, "zsets") == 0
	for i := range rapid.IntRange(1, 20).Draw(t, "steps") {
		steps = append(steps, drawStep(t, i, zsets))
	}
	return steps
}

// drawStep draws one command of the reference's kinds (only of the
// sorted sets' if zsets).
func drawStep(t *rapid.T, i int, zsets bool) step {
	label := func(what string) string { return fmt.Sprintf("%s%d", what, i) }
	s := step{
		key:   rapid.SampledFrom([]string{"k1", "k2", "k1:fence"}).Draw(t, label("key")),
		fence: rapid.SampledFrom([]string{"k1:fence", "k2:fence"}).Draw(t, label("fence")),
		token: rapid.SampledFrom([]string{"t1", "t2", "5"}).Draw(t, label("token")),
		ttl:   rapid.SampledFrom([]string{shortTTL, shortTTL, "100000", "100000", "0", "-5", "x"}).Draw(t, label("ttl")),
		sleep: rapid.IntRange(0, 9).Draw(t, label("sleep")) == 0,
	}
	if zsets {
		s.kind = rapid.SampledFrom(zsetKinds).Draw(t, label("zkind"))
	} else {
		s.kind = rapid.SampledFrom(kinds).Draw(t, label("kind"))
	}
	if drawPrio(t, &s, label) || drawZset(t, &s, label) {
		return s
	}
	if _, ok := sources[s.kind]; ok {
		s.sha = rapid.Bool().Draw(t, label("evalsha"))
		if s.kind == "raise" {
			s.raise = rapid.SampledFrom([]string{"1", "3", "7", "x"}).Draw(t, label("fence"))
		}
	}
	return s
}

// sources are the reference's scripts by name (model/redlock), which the
// simulator knows by their exact source: a step of a script's kind sends
// it.
var sources = redlock.ScriptSources()

// Scripts, if set, makes the interpreter the simulator runs the scripts
// it does not know natively on (redis-semaphore's): the served servers'
// (redisserve.NewLua), which the caller gives from above this floor
// (conform imports no simulator served on the wire). Unset, a sequence
// that runs such a script fails on the simulator.
var Scripts func() redissim.Lua

// alterSim, if set, changes the simulator's answer to a step: tests break
// the simulator with it to see the differential catch it.
var alterSim func(s step, r redissim.Result) redissim.Result

// onSimulator runs steps on one simulated server, each sent as long after
// the start as real.at says it was on Redis (a step real does not time is
// sent at once, after napTime if it sleeps), and the j-th BLPOP that waits
// out its timeout lasting real.blocked[j] in all.
func onSimulator(steps []step, real realRun) ([]redissim.Result, error) {
	w, err := redissim.New(redissim.Options{})
	if err != nil {
		return nil, err
	}
	// Scripts it does not know natively (redis-semaphore's) run as on the
	// wire; what it does not model still fails the run.
	if Scripts != nil {
		w.Serve(redissim.Wire{Lua: Scripts()})
	}
	var out []redissim.Result
	blocked := real.blocked
	w.Go("d", func(p *redissim.Process) {
		start := p.Now()
		for i, s := range steps {
			switch {
			case i < len(real.at):
				if d := real.at[i] - time.Duration(p.Now()-start); d > 0 {
					p.Sleep(d)
				}
			case s.sleep:
				p.Sleep(napTime)
			}
			r := s.onSim(p, &blocked)
			if alterSim != nil {
				r = alterSim(s, r)
			}
			out = append(out, r)
		}
	})
	return out, w.Run()
}

// A realRun is a sequence's run on redis-server.
type realRun struct {
	results []redissim.Result
	at      []time.Duration // when each step's command was sent, from the start
	took    []time.Duration // how long each step's command took to answer
	slept   []time.Duration // how long each sleep took in real time
	blocked []time.Duration // how long each BLPOP that waited took
	busy    time.Duration   // the real time of the rest: the commands
}

// judgeable says whether the run can be judged on the simulator's clock,
// which follows at: no command (a BLPOP that waited aside) took longer
// than maxLatency, and none was under way within nearDeadline of the
// deadline of a short ttl an earlier step set (sent at at[j] and answered
// took[j] later, Redis set it somewhere in between). It names the first
// reason it cannot, for the trace.
func (run realRun) judgeable(steps []step) (ok bool, why string) {
	// A BLPOP that waited out its timeout found its lists empty as it
	// arrived, up to maxLatency after it was sent: that is its round trip
	// here, the wait aside.
	took := slices.Clone(run.took)
	for i, s := range steps {
		if i >= len(took) {
			break
		}
		if s.kind == "BLPOP" && run.results[i].Err == nil && run.results[i].Val == nil {
			took[i] = maxLatency
			continue
		}
		if took[i] > maxLatency {
			return false, fmt.Sprintf("step %d took %v", i+1, took[i].Round(100*time.Microsecond))
		}
	}
	ttl := time.Duration(0)
	if n, err := strconv.Atoi(shortTTL); err == nil {
		ttl = time.Duration(n) * time.Millisecond
	}
	for j, s := range steps {
		if j >= len(took) || !s.setsShortTTL() {
			continue
		}
		lo, hi := run.at[j]+ttl-nearDeadline, run.at[j]+took[j]+ttl+nearDeadline
		for k := j + 1; k < len(took); k++ {
			if run.at[k] <= hi && run.at[k]+took[k] >= lo {
				return false, fmt.Sprintf("step %d ran at step %d's short ttl's deadline", k+1, j+1)
			}
		}
	}
	return true, ""
}

// setsShortTTL says whether the step sends the short ttl (as a command's
// or a script's argument, or in a transaction).
func (s step) setsShortTTL() bool {
	if s.kind == "tx" {
		for _, c := range s.tx("") {
			if slices.Contains(c, shortTTL) {
				return true
			}
		}
		return false
	}
	return slices.Contains(s.args(""), shortTTL)
}

// onRedis runs steps on the server of c, their keys prefixed with prefix,
// after emptying its script cache (a simulated server starts without
// scripts). ok is false when the commands took too long to judge expiry
// by (maxBetween). An error is the harness's, or ctx's: an answer that
// is not an error reply of Redis.
func onRedis(ctx context.Context, c *goredis.Client, steps []step, prefix string) (run realRun, ok bool, err error) {
	if err := c.Do(ctx, "SCRIPT", "FLUSH").Err(); err != nil {
		return run, false, fmt.Errorf("SCRIPT FLUSH: %w", err)
	}
	start := time.Now()
	for _, s := range steps {
		if s.sleep {
			t0 := time.Now()
			if err := realtime.Sleep(ctx, napTime); err != nil {
				return run, false, err
			}
			run.slept = append(run.slept, time.Since(t0))
		}
		t0 := time.Now()
		r, err := s.onRedis(ctx, c, prefix)
		if err != nil {
			return run, false, fmt.Errorf("%s: %w", s.describe(), err)
		}
		d := time.Since(t0)
		run.at, run.took = append(run.at, t0.Sub(start)), append(run.took, d)
		if s.kind == "BLPOP" && r.Err == nil && r.Val == nil {
			run.blocked = append(run.blocked, d)
		} else {
			run.busy += d
		}
		run.results = append(run.results, r)
	}
	ok, _ = run.judgeable(steps)
	return run, ok, nil
}

// redisResult is go-redis's answer as a Result: a nil reply is a nil Val;
// an error that is not an error reply is returned as such.
func redisResult(v any, err error) (redissim.Result, error) {
	var re goredis.Error
	switch {
	case errors.Is(err, goredis.Nil):
		return redissim.Result{}, nil
	case err == nil:
		return redissim.Result{Val: v}, nil
	case errors.As(err, &re):
		return redissim.Result{Err: err}, nil
	}
	return redissim.Result{}, err
}

func anys(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// client is a go-redis client of addr, set as the reference's are
// (RESP2, no retries), one connection at a time.
func client(addr string) *goredis.Client {
	return goredis.NewClient(&goredis.Options{
		Addr:                     addr,
		Protocol:                 2,
		DisableIdentity:          true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
		MaxRetries:               -1,
		ContextTimeoutEnabled:    true,
		DialTimeout:              5 * time.Second,
		ReadTimeout:              10 * time.Second,
		PoolSize:                 1,
	})
}

// same says whether the simulator's result agrees with Redis's.
func same(s step, sim, real redissim.Result) bool {
	if sim.Err != nil || real.Err != nil {
		var re goredis.Error
		if s.zcmd != nil {
			return errors.As(real.Err, &re) && sameZsetError(s, sim.Err, real.Err)
		}
		return sim.Err != nil && errors.As(real.Err, &re)
	}
	switch s.kind {
	case "PTTL":
		return samePTTL(sim.Val, real.Val)
	case "obtain":
		a, _ := sim.Val.([]any)
		b, _ := real.Val.([]any)
		if len(a) >= 5 && len(a)%2 == 1 && len(b) == len(a) { // a theft: the times left within the tolerance
			return normText(a[:3]) == normText(b[:3]) && samePTTL(a[3], b[3]) && samePTTL(a[4], b[4]) && sameChain(a[5:], b[5:])
		}
	}
	return normText(sim.Val) == normText(real.Val)
}

// sameChain says whether two theft answers name the same earlier victims
// (token, remaining ms pairs) with times that agree: within the
// tolerance, or both 0 or less (over, or a claim given up: its deadline 0
// less the server's clock, which differs between the two).
func sameChain(a, b []any) bool {
	for i := 0; i+1 < len(a); i += 2 {
		x, _ := a[i+1].(int64)
		y, _ := b[i+1].(int64)
		if normText(a[i]) != normText(b[i]) || !(x <= 0 && y <= 0 || samePTTL(x, y)) {
			return false
		}
	}
	return true
}

// samePTTL says whether two remaining times agree: both clocks count
// whole ms, and Redis ran each command within its round trip of when the
// simulator did, either way.
func samePTTL(sim, real any) bool {
	a, _ := sim.(int64)
	b, _ := real.(int64)
	if a >= 0 && b >= 0 {
		return b-a <= pttlSlack && a-b <= pttlSlack
	}
	return a == b
}

// normText is valText, but that an error reply within an array (a
// transaction's answer) is "error", whatever its text.
func normText(v any) string {
	switch v := v.(type) {
	case error:
		return "error"
	case []any:
		parts := make([]string, len(v))
		for i, x := range v {
			parts[i] = normText(x)
		}
		return "[" + strings.Join(parts, " ") + "]"
	}
	return redissim.Result{Val: v}.String()
}

// firstDifference is the first step on which sim and real differ, or -1.
func firstDifference(steps []step, sim, real []redissim.Result) int {
	for i, s := range steps {
		if i >= len(sim) || i >= len(real) || !same(s, sim[i], real[i]) {
			return i
		}
	}
	return -1
}

// A verdict is how a sequence came out.
type verdict struct {
	n      int    // the sequence's number, from 0
	prefix string // of its keys on Redis, in the run judged
	steps  []step
	sim    []redissim.Result
	real   realRun
	first  int  // the first step that differs; -1 if none
	slow   bool // too slow to judge on every try: inconclusive
	// again and replays: how many runs of a diverging sequence diverged
	// again, of how many that could be judged.
	again, replays int
}

// judge runs sequence n on the server of c and on the simulator, again
// while the machine is too slow to judge it, up to maxTries times. An
// error is the harness's or the simulator's, or ctx's.
func judge(ctx context.Context, c *goredis.Client, n int, steps []step) (verdict, error) {
	v := verdict{n: n, steps: steps, first: -1, slow: true}
	for try := 0; try < maxTries && v.slow; try++ {
		prefix := fmt.Sprintf("s%d.%d:", n+1, try+1)
		real, ok, err := onRedis(ctx, c, steps, prefix)
		if err != nil {
			return v, fmt.Errorf("sequence %d: redis-server: %w", n+1, err)
		}
		if !ok {
			continue
		}
		sim, err := onSimulator(steps, real)
		if err != nil {
			return v, fmt.Errorf("sequence %d: the simulator: %w", n+1, err)
		}
		v.sim, v.real, v.slow, v.prefix = sim, real, false, prefix
		v.first = firstDifference(steps, sim, real.results)
	}
	return v, nil
}

// replay runs a diverging sequence again, times times, counting the runs
// that diverge again at the same step.
func (v *verdict) replay(ctx context.Context, c *goredis.Client, times int) error {
	for i := range times {
		real, ok, err := onRedis(ctx, c, v.steps, fmt.Sprintf("s%d.r%d:", v.n+1, i+1))
		if err != nil {
			return fmt.Errorf("replay of sequence %d: redis-server: %w", v.n+1, err)
		}
		if !ok {
			continue
		}
		sim, err := onSimulator(v.steps, real)
		if err != nil {
			return fmt.Errorf("replay of sequence %d: the simulator: %w", v.n+1, err)
		}
		v.replays++
		if firstDifference(v.steps, sim, real.results) == v.first {
			v.again++
		}
	}
	return nil
}

// answer is rs[i] shown short: an error's text (which is not compared)
// cut to its first words.
func answer(rs []redissim.Result, i int) string {
	if i >= len(rs) {
		return "(not run)"
	}
	s := rs[i].String()
	if rs[i].Err != nil && len(s) > 30 {
		s = s[:27] + "..."
	}
	return s
}

// String shows a diverging sequence, each step with both answers, and
// how to draw it again.
func (v *verdict) String(seed uint64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "sequence %d of seed %d (replay: --seed %d --sequences %d), %d steps: step %d differs; it differed there again in %d of %d runs more\n",
		v.n+1, seed, seed, v.n+1, len(v.steps), v.first+1, v.again, v.replays)
	naps := 0
	for i, s := range v.steps {
		mark, cmd := "  ", s.describe()
		if s.sleep {
			cmd = fmt.Sprintf("sleep %v; %s", v.real.slept[naps].Round(100*time.Microsecond), cmd)
			naps++
		}
		if i == v.first {
			mark = "!!"
		}
		fmt.Fprintf(&b, "%s %2d  %-48s  simulator: %-16s  redis: %s\n", mark, i+1, cmd, answer(v.sim, i), answer(v.real.results, i))
	}
	fmt.Fprintf(&b, "(on Redis the keys had the prefix %s; the commands took %v in all, sleeps aside)\n", v.prefix, v.real.busy.Round(10*time.Microsecond))
	return b.String()
}
