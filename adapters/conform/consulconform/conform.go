package consulconform

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/lockprover/lockprover/adapters/servers/consul"
	"github.com/lockprover/lockprover/adapters/servers/etcd"
	"github.com/lockprover/lockprover/internal/diffrun"
	"github.com/lockprover/lockprover/internal/realtime"
	"github.com/lockprover/lockprover/model/consulsem"
	"github.com/lockprover/lockprover/sim/consulsim"
)

// A Server is the real server a Differential runs against: a private one
// (its sessions come and go by the thousand), such as adapters/servers/consul's
// and adapters/servers/etcd's with their default options.
type Server struct {
	Kind consulsim.Kind
	// Addr is the Consul agent's HTTP API (host:port) or etcd's client
	// URL (http://host:port).
	Addr string
	// Floor is the server's: Consul's session_ttl_min (at most 1 s: the
	// differential's short sessions have a TTL of 1 s), etcd's lease
	// floor (adapters/servers/etcd's Server.MinTTL).
	Floor time.Duration

	// alter, if set, changes the simulator's canonical answer to a step:
	// tests break the simulator with it to see the differential catch it.
	alter func(s step, answer string) string
}

// A Report is what Differential found.
type Report struct {
	Server string // "consul 1.20.2", "etcd 3.4.23"
	// Sequences counts the sequences run (up to and including the first
	// divergence), Steps the steps of those judged, Inconclusive those
	// the machine was too slow to judge on every try.
	Sequences, Steps, Inconclusive int
	Elapsed                        time.Duration
	// Divergence is the first sequence on which the simulator and the
	// server answered differently, step by step with both answers, and
	// the seed and number that draw it again; "" if none did. Shrunk is
	// the smallest diverging sequence found from it by dropping steps and
	// sleeps ("" if none diverged, or it did not diverge again).
	Divergence, Shrunk string
}

func (r Report) String() string {
	return fmt.Sprintf("%s: %d sequences, %d steps, %d inconclusive, %.1fs", r.Server, r.Sequences, r.Steps, r.Inconclusive, r.Elapsed.Seconds())
}

const (
	diffBatch = 100 // sequences in each of rapidbatch's batches
	maxTries  = 3   // runs of a sequence while the machine is too slow to judge it
	// sequences run at once on Consul and on etcd (their sleeps are real
	// time)
	parallelConsul, parallelEtcd = 16, 16
	// shrinkTime bounds the shrinking of a divergence (each try runs on
	// the real server, in real time).
	shrinkTime = 40 * time.Second
)

// Differential runs n sequences drawn from seed of the calls consulsem's
// recipe makes, with sleeps, on the real server t and on a simulated one,
// and compares the answers step by step (see differential.go for what is
// compared, and when a sequence is inconclusive). Sequences run side by
// side, each on a prefix of its own. The first divergence (the
// lowest-numbered diverging sequence) is described in Report.Divergence,
// and shrunk into Report.Shrunk. Progress lines go to progress
// (nil: none).
//
// The same seed draws the same sequences (internal/rapidbatch). An error
// is the harness's (the server could not be reached, the simulator
// failed); if ctx ends, it wraps ctx's error.
func Differential(ctx context.Context, t Server, n int, seed uint64, progress io.Writer) (Report, error) {
	start := time.Now()
	if n <= 0 {
		return Report{}, fmt.Errorf("consulsim: a differential of %d sequences", n)
	}
	j, err := openJudge(ctx, t)
	if err != nil {
		return Report{}, err
	}
	defer j.close()
	rep := Report{Server: j.server}
	vs, first, err := j.runAll(ctx, n, seed, progress)
	var reached bool
	rep.Sequences, rep.Steps, rep.Inconclusive, reached = diffrun.Tally(vs, first)
	if reached {
		rep.Divergence = first.String(seed)
	}
	if err == nil && first != nil {
		var small *verdict
		small, err = j.shrink(ctx, first)
		if small != nil {
			rep.Shrunk = small.shrunk(seed)
		}
	}
	rep.Elapsed = time.Since(start)
	if ctx.Err() != nil {
		return rep, fmt.Errorf("consulsim: differential: %w", ctx.Err())
	}
	return rep, err
}

// A judge runs sequences on a real server and on the simulator.
type judge struct {
	t      Server
	b      consulsem.Backend
	etcd   *clientv3.Client
	server string
	run    string       // this Differential's own, in the real server's prefixes
	runs   atomic.Int64 // runs on the real server so far: each has a prefix of its own
}

func openJudge(ctx context.Context, t Server) (*judge, error) {
	var id [4]byte
	rand.Read(id[:])
	j := &judge{t: t, run: fmt.Sprintf("%x", id)}
	var err error
	switch t.Kind {
	case consulsim.Consul:
		if t.Floor < 2*time.Millisecond || t.Floor > time.Second {
			return nil, fmt.Errorf("consulsim: the agent's session_ttl_min %v: the differential needs one of 2ms to 1s", t.Floor)
		}
		if j.b, err = consulsem.ConsulBackend(t.Addr, nil); err != nil {
			return nil, err
		}
		j.server, err = consul.AgentVersion(ctx, t.Addr)
	case consulsim.Etcd:
		if t.Floor < time.Second || t.Floor%time.Second != 0 {
			return nil, fmt.Errorf("consulsim: etcd's lease floor %v: whole seconds", t.Floor)
		}
		if j.etcd, err = clientv3.New(clientv3.Config{Endpoints: []string{t.Addr}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()}); err != nil {
			return nil, err
		}
		if j.b, err = consulsem.EtcdBackend(j.etcd); err == nil {
			j.server, err = etcd.ServerVersion(ctx, j.etcd, t.Addr)
		}
	default:
		return nil, fmt.Errorf("consulsim: unknown kind %d", int(t.Kind))
	}
	if err != nil {
		j.close()
		return nil, err
	}
	return j, nil
}

func (j *judge) close() {
	if j.b != nil {
		j.b.Close()
	}
	if j.etcd != nil {
		j.etcd.Close()
	}
}

// A verdict is how a sequence came out.
type verdict struct {
	n         int // the sequence's number, from 0
	steps     []step
	sim, real []string // canonical answers
	slept     []time.Duration
	first     int  // the first step that differs; -1 if none
	slow      bool // too slow to judge on every try: inconclusive
}

// judge runs sequence n on the real server and on the simulator, again
// while the machine is too slow to judge it, up to maxTries times.
func (j *judge) judge(ctx context.Context, n int, steps []step) (verdict, error) {
	v := verdict{n: n, steps: steps, first: -1, slow: true}
	pr := profileOf(j.t.Kind, j.t.Floor)
	for try := 0; try < maxTries && v.slow; try++ {
		prefix := fmt.Sprintf("consulsim-diff/%s/%d.%d", j.run, n+1, j.runs.Add(1))
		real, err := j.onReal(ctx, pr, prefix, steps)
		if errors.Is(err, errTooSlow) {
			continue
		}
		if err != nil {
			return v, fmt.Errorf("sequence %d: %s: %w", n+1, j.server, err)
		}
		sim, err := onSimulator(j.t.Kind, j.t.Floor, steps, real.slept)
		if err != nil {
			return v, fmt.Errorf("sequence %d: the simulator: %w", n+1, err)
		}
		v.sim, v.real, v.slept, v.slow = sim.canonical(j.t.Kind), real.canonical(j.t.Kind), real.slept, false
		if j.t.alter != nil {
			for i := range v.sim {
				v.sim[i] = j.t.alter(steps[i], v.sim[i])
			}
		}
		v.first = firstDifference(v.sim, v.real)
	}
	return v, nil
}

// onReal runs steps on the real server under prefix, then destroys the
// sessions they created.
func (j *judge) onReal(ctx context.Context, pr profile, prefix string, steps []step) (run, error) {
	last := time.Now()
	r := runner{b: j.b, kind: j.t.Kind, pr: pr, prefix: prefix, indexed: true, nap: func(int) (time.Duration, error) {
		if time.Since(last) > pr.maxBusy {
			return 0, errTooSlow
		}
		t0 := time.Now()
		if err := realtime.Sleep(ctx, pr.nap); err != nil {
			return 0, err
		}
		last = time.Now()
		return last.Sub(t0), nil
	}}
	out, err := r.run(ctx, steps)
	if err == nil && time.Since(last) > pr.maxBusy {
		err = errTooSlow
	}
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, tok := range out.toks {
		j.b.DestroySession(c, tok)
	}
	return out, err
}

// Diverged, Inconclusive and Steps make a verdict a diffrun.Verdict.
func (v verdict) Diverged() bool     { return v.first >= 0 }
func (v verdict) Inconclusive() bool { return v.slow }
func (v verdict) Steps() int         { return len(v.steps) }

// firstDifference is the first step on which sim and real differ, or -1.
func firstDifference(sim, real []string) int {
	for i := range max(len(sim), len(real)) {
		if i >= len(sim) || i >= len(real) || sim[i] != real[i] {
			return i
		}
	}
	return -1
}

// String shows a diverging sequence, each step with both answers, and
// how to draw it again.
func (v *verdict) String(seed uint64) string {
	return v.show(fmt.Sprintf("sequence %d of seed %d (replay: --seed %d --sequences %d), %d steps: step %d differs\n",
		v.n+1, seed, seed, v.n+1, len(v.steps), v.first+1))
}

// shrunk shows a diverging sequence shrunk from sequence v.n.
func (v *verdict) shrunk(seed uint64) string {
	return v.show(fmt.Sprintf("sequence %d of seed %d shrunk to %d steps: step %d differs\n", v.n+1, seed, len(v.steps), v.first+1))
}

func (v *verdict) show(head string) string {
	var b strings.Builder
	b.WriteString(head)
	naps := 0
	for i, s := range v.steps {
		mark, what := "  ", s.String()
		if s.sleep && naps < len(v.slept) {
			what = fmt.Sprintf("sleep %v; %s", v.slept[naps].Round(time.Millisecond), strings.TrimPrefix(what, "sleep; "))
			naps++
		}
		if i == v.first {
			mark = "!!"
		}
		fmt.Fprintf(&b, "%s %2d  %s\n      simulator: %s\n      server:    %s\n", mark, i+1, what, at(v.sim, i), at(v.real, i))
	}
	return b.String()
}

func at(ss []string, i int) string {
	if i < len(ss) {
		return ss[i]
	}
	return "(not run)"
}

// runAll runs the sequences, parallel at a time, until all have run, one
// diverges, or an error stops them (diffrun.Run).
func (j *judge) runAll(ctx context.Context, n int, seed uint64, progress io.Writer) (vs []*verdict, first *verdict, err error) {
	parallel := parallelConsul
	if j.t.Kind == consulsim.Etcd {
		parallel = parallelEtcd
	}
	c := diffrun.Config[[]step, verdict]{N: n, Batch: diffBatch, Seed: seed, Draw: drawSequence, Workers: parallel,
		Judge: func(ctx context.Context, _, k int, steps []step) (verdict, error) { return j.judge(ctx, k, steps) }}
	if progress != nil {
		c.Progress = func(ran, _, _ int) { fmt.Fprintf(progress, "  %d/%d sequences\n", ran, n) }
	}
	return diffrun.Run(ctx, c)
}

// shrink shrinks diverging sequence v greedily: it drops one step at a
// time, then one sleep at a time, keeping each change after which the
// sequence still diverges, until no change does or shrinkTime has
// passed. It returns the smallest diverging sequence it ran (nil if
// none diverged again).
func (j *judge) shrink(ctx context.Context, v *verdict) (*verdict, error) {
	deadline := time.Now().Add(shrinkTime)
	var small *verdict
	try := func(steps []step) (bool, error) {
		if ctx.Err() != nil || time.Now().After(deadline) {
			return false, ctx.Err()
		}
		w, err := j.judge(ctx, v.n, steps)
		if err != nil || w.first < 0 {
			return false, err
		}
		small = &w
		return true, nil
	}
	cur := v.steps
	if ok, err := try(cur); !ok || err != nil {
		return nil, err
	}
	for progress := true; progress; {
		progress = false
		for i := len(cur) - 1; i >= 0 && len(cur) > 1; i-- {
			cand := slices.Delete(slices.Clone(cur), i, i+1)
			ok, err := try(cand)
			if err != nil {
				return small, err
			}
			if ok {
				cur, progress = cand, true
			}
		}
		for i := range cur {
			if !cur[i].sleep {
				continue
			}
			cand := slices.Clone(cur)
			cand[i].sleep = false
			ok, err := try(cand)
			if err != nil {
				return small, err
			}
			if ok {
				cur, progress = cand, true
			}
		}
	}
	return small, nil
}
