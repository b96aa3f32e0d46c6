package consulconform

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/lockprover/lockprover/model/consulsem"
	"github.com/lockprover/lockprover/sim/consulsim"
)

// The cluster differential holds the simulated cluster (ClusterOptions)
// to a real one: drawn sequences of the recipe's calls (those of the
// single-server differential but the waits, sessions of a TTL no sequence
// outlives), each through a client on one node (Consul: A through agent
// a1, B through a2; etcd: A through e1, B e2, C e3), and at most one
// fault on the cluster a sequence (a node cut off, a server and an agent
// cut off together from the majority, a server paused, killed or
// restarted) and its end, run on both and compared step by step as the
// single-server differential compares them (tokens and indexes by their
// order). While a fault holds a client's node off the majority's side,
// that client only renews and lists (consistent or stale): whether a
// write that got no answer takes effect later is left out.
//
// A fault is followed by a settle long enough that what comes after no
// longer hangs on how fast the cluster noticed: 15 s after a Consul agent
// is cut off (its node is declared failed after 6.4 to 8.5 s, K.3), 10 s
// after another fault on Consul (an election takes 2 to 2.7 s, and an
// agent stops sending to a server it cannot reach once Serf says so), 4 s
// on etcd (an election takes 1.1 to 1.2 s); a fault's end (heal, resume,
// a node started again) is followed on the real cluster by a wait until
// it is whole again (Cluster.Whole: every server naming one leader
// and, on Consul, a voter again, K.6; every agent alive and answered
// through each server, K.8; up to two minutes),
// on the simulated one by nothing. So
// it is what the cluster does that is compared, not how fast: detection
// times are the K rows' business. Expiry by TTL is left out (the TTL of a
// minute outlives every sequence): the fresh TTL an election gives is
// checked against K.1 and K.4 by the tests, not here.

// A Cluster is a real cluster the cluster differential runs on,
// started once and reused: Consul's s1, s2, s3, a1, a2 or etcd's e1, e2,
// e3 (ClusterNodes).
type Cluster interface {
	// Kind is the cluster's server.
	Kind() consulsim.Kind
	// Server names the server and its version, for the report.
	Server(ctx context.Context) string
	// Client is a new client of the recipe's calls that talks to node
	// only, and what closes it.
	Client(node string) (consulsem.Backend, func(), error)
	// Strike strikes a fault as World.Strike names it ("partition",
	// "heal", "pause", "resume", "kill", "restart-broker"), but a kill
	// starts the node again at once, as restart-broker does after
	// stopping it: both return once it is up.
	Strike(ctx context.Context, fault, target string) error
	// Whole waits until the cluster is whole again (every link restored,
	// every node running, one leader every server names, every agent
	// alive and, on Consul, answered through each server), for two
	// minutes at most.
	Whole(ctx context.Context) error
}

// A clusterStep is one step of a cluster sequence: a call of a client
// (on is A, B or C), or a fault on the cluster (fault set; on "").
type clusterStep struct {
	on    string
	call  step
	fault string // isolate, split, pause, kill, restart; heal, resume
	arg   string // the fault's node, or a split's server and agent ("s2+a1")
}

func (s clusterStep) String() string {
	if s.fault != "" {
		return strings.TrimSpace(s.fault + " " + s.arg)
	}
	return s.on + ": " + s.call.String()
}

// clusterClients are the differential's clients and the nodes they talk
// to.
func clusterClients(k consulsim.Kind) map[string]string {
	if k == consulsim.Etcd {
		return map[string]string{"A": "e1", "B": "e2", "C": "e3"}
	}
	return map[string]string{"A": "a1", "B": "a2"}
}

// clusterSeqSteps is the number of steps of a sequence.
const clusterSeqSteps = 8

// drawClusterSteps draws a sequence from r: calls, and in one sequence of
// four a fault on the cluster at one of the first steps, ended (healed,
// resumed) at a later one or after the last.
func drawClusterSteps(r *rand.Rand, k consulsim.Kind) []clusterStep {
	clients := slices.Sorted(func(yield func(string) bool) {
		for c := range clusterClients(k) {
			if !yield(c) {
				return
			}
		}
	})
	var servers []string
	for _, n := range consulsim.ClusterNodes(k) {
		if !slices.Contains(consulsim.AppNodes(k), n) || k == consulsim.Etcd {
			servers = append(servers, n)
		}
	}
	faultAt, endAt := -1, -1
	var fault clusterStep
	if r.IntN(4) == 0 {
		faultAt = 1 + r.IntN(clusterSeqSteps-3)
		kinds := []string{"isolate", "isolate", "pause", "kill", "restart"}
		if k == consulsim.Consul {
			kinds = append(kinds, "isolate-agent", "isolate-agent", "split", "split")
		}
		fault.fault = kinds[r.IntN(len(kinds))]
		server := servers[r.IntN(len(servers))]
		agent := consulsim.AppNodes(k)[r.IntN(len(consulsim.AppNodes(k)))]
		switch fault.fault {
		case "isolate-agent":
			fault.fault, fault.arg = "isolate", agent
		case "split":
			fault.arg = server + "+" + agent
		default:
			fault.arg = server
		}
		if fault.fault == "isolate" || fault.fault == "split" || fault.fault == "pause" {
			endAt = faultAt + 1 + r.IntN(clusterSeqSteps-faultAt)
		}
	}
	var out []clusterStep
	cut := "" // the node held off the majority's side by the fault in force
	for i := range clusterSeqSteps {
		switch i {
		case faultAt:
			out = append(out, fault)
			cut = fault.cuts(k)
		case endAt:
			end := clusterStep{fault: "heal"}
			if fault.fault == "pause" {
				end = clusterStep{fault: "resume", arg: fault.arg}
			}
			out = append(out, end)
			cut = ""
		}
		on := clients[r.IntN(len(clients))]
		s := clusterStep{on: on, call: drawCall(r)}
		if clusterClients(k)[on] == cut && s.call.kind != "list" {
			s.call = step{kind: "renew", ses: s.call.ses}
			if r.IntN(2) == 0 {
				s.call = step{kind: "list", stale: r.IntN(3) > 0}
			}
		}
		out = append(out, s)
	}
	return out
}

// cuts is the client node a fault holds off the majority's side ("" if
// none): the node cut off or paused, a split's agent; on Consul a server
// holds no client.
func (s clusterStep) cuts(k consulsim.Kind) string {
	switch {
	case s.fault == "split":
		_, agent, _ := strings.Cut(s.arg, "+")
		return agent
	case k == consulsim.Etcd && (s.fault == "isolate" || s.fault == "pause"):
		return s.arg
	case k == consulsim.Consul && s.fault == "isolate" && slices.Contains(consulsim.AppNodes(consulsim.Consul), s.arg):
		return s.arg
	}
	return ""
}

// drawCall draws a call as the single-server differential does (drawStep),
// without sleeps and waits, its sessions long-lived.
func drawCall(r *rand.Rand) step {
	pick := func(xs ...string) string { return xs[r.IntN(len(xs))] }
	s := step{
		kind: pick("create", "create", "create", "renew", "destroy", "contender", "contender", "list", "list", "write", "write", "delete"),
		ses:  []int{1, 1, 1, 2, 2, 3, 0}[r.IntN(7)],
	}
	switch s.kind {
	case "create":
		s.ttl = "long"
		s.release = r.IntN(4) == 0
		s.delay = r.IntN(3) == 0
	case "contender", "delete":
		s.key = pick("own", "own", "own", "lock", "other")
		s.bound = r.IntN(5) > 0
	case "list":
		s.stale = r.IntN(2) == 0
	case "write":
		s.cas = pick("last", "last", "last", "zero", "prev", "none")
		s.live = r.IntN(5) > 0
	}
	return s
}

// wholeSettle is how long the simulated side waits after a fault's end,
// as the real side waits for its cluster to be whole: past any election.
const wholeSettle = 5 * time.Second

// clusterCallTimeout bounds one call: a client whose node is off the
// majority's side gets no answer.
const clusterCallTimeout = 2 * time.Second

// settleAfter is how long a sequence waits after fault s.
func settleAfter(k consulsim.Kind, s clusterStep) time.Duration {
	switch {
	case k == consulsim.Etcd:
		return 4 * time.Second
	case s.cuts(k) != "":
		return 15 * time.Second
	}
	return 10 * time.Second
}

// faultCut is the directions the fault cuts (isolate, split) on a
// cluster of kind k.
func faultCut(k consulsim.Kind, s clusterStep) string {
	return consulsim.Cut(strings.Split(s.arg, "+"), consulsim.ClusterNodes(k))
}

// A clusterSide is where a sequence runs: the simulated cluster or the
// real one.
type clusterSide struct {
	kind    consulsim.Kind
	clients map[string]consulsem.Backend
	call    func() (context.Context, context.CancelFunc) // a call's context
	// strike strikes a fault; whole follows a fault's end; settle waits.
	strike func(fault, target string) error
	whole  func() error
	settle func(d time.Duration)
	// reconnect, if set, gives each client a new connection after a
	// fault (a client whose member was killed reconnects only after a
	// backoff).
	reconnect func() error
	// notes, on the real side, makes run note how each step went
	// (run.notes): its time, and the error behind an "error".
	notes bool
	// stepped, if set, is called after each step (matchSim's search
	// marks the choices made by then).
	stepped func()
}

// run runs steps on side, after giving the prefix a history of its own,
// and says what each step observed (run.canonical makes them comparable).
// The error is the harness's.
func (side clusterSide) run(prefix string, steps []clusterStep) (run, error) {
	var out run
	var lists []consulsem.Listing
	pr := profileOf(side.kind, time.Second)
	ctx, cancel := side.call()
	r0 := runner{b: side.clients["A"], kind: side.kind, pr: pr, prefix: prefix}
	_, err := r0.b.PutContender(ctx, prefix+"/setup", "", false)
	if err == nil {
		err = r0.b.DeleteKey(ctx, prefix+"/setup")
	}
	cancel()
	if err != nil {
		return out, fmt.Errorf("setup: %w", err)
	}
	cut := ""
	for _, s := range steps {
		if s.fault == "" {
			ctx, cancel := side.call()
			var why error
			r := runner{b: side.clients[s.on], kind: side.kind, pr: pr, prefix: prefix, failed: func(err error) { why = err }}
			t0 := time.Now()
			out.answers = append(out.answers, r.step(ctx, s.call, &out.toks, &lists))
			if side.notes {
				out.notes = append(out.notes, noteOf(time.Since(t0), why))
			}
			cancel()
			if side.stepped != nil {
				side.stepped()
			}
			continue
		}
		t0 := time.Now()
		var err error
		switch s.fault {
		case "isolate", "split":
			cut = faultCut(side.kind, s)
			err = side.strike("partition", cut)
		case "heal":
			err = side.strike("heal", cut)
			cut = ""
		case "restart":
			err = side.strike("restart-broker", s.arg)
		default:
			err = side.strike(s.fault, s.arg)
		}
		if err != nil {
			return out, fmt.Errorf("%s: %w", s, err)
		}
		switch s.fault {
		case "heal", "resume", "kill", "restart":
			err = side.whole()
		default:
			side.settle(settleAfter(side.kind, s))
		}
		if err == nil && side.reconnect != nil {
			err = side.reconnect()
		}
		if err != nil {
			return out, fmt.Errorf("after %s: %w", s, err)
		}
		out.answers = append(out.answers, "done")
		if side.notes {
			out.notes = append(out.notes, noteOf(time.Since(t0), nil))
		}
		if side.stepped != nil {
			side.stepped()
		}
	}
	if cut != "" {
		if err := side.strike("heal", cut); err != nil {
			return out, fmt.Errorf("heal at the end: %w", err)
		}
	}
	return out, nil
}

// noteOf notes a step that took d and failed with err (nil: did not).
func noteOf(d time.Duration, err error) string {
	if err != nil {
		return fmt.Sprintf("%.2fs: %v", d.Seconds(), err)
	}
	return fmt.Sprintf("%.2fs", d.Seconds())
}

// onSimCluster runs steps on a simulated cluster of kind k, its choices
// made by decide (nil: the first always: no stale listing lags, the
// first candidate is elected, a server cut off keeps the cluster's last
// state, an agent split off with it answers stale listings from it at
// once); stepped, if not nil, is called after each step.
func onSimCluster(k consulsim.Kind, decide func(int) int, stepped func(), steps []clusterStep) (run, error) {
	w, err := consulsim.New(consulsim.Options{Kind: k, Timeout: clusterCallTimeout, Persistent: true, Cluster: &consulsim.ClusterOptions{},
		Decide: decide})
	if err != nil {
		return run{}, err
	}
	var out run
	var runErr error
	w.Go("driver", func(p *consulsim.Process) {
		side := clusterSide{kind: k, clients: map[string]consulsem.Backend{}, stepped: stepped,
			call: func() (context.Context, context.CancelFunc) { return context.Background(), func() {} },
			strike: func(fault, target string) error {
				if err := w.Strike(fault, target); err != nil || fault != "kill" {
					return err
				}
				return w.Strike("restart-broker", target) // as the real side's kill
			},
			// the real side waits until the cluster is whole: past any
			// election
			whole:  func() error { p.Sleep(wholeSettle); return nil },
			settle: func(d time.Duration) { p.Sleep(d) },
		}
		for c, n := range clusterClients(k) {
			side.clients[c] = p.BackendOn(n)
		}
		out, runErr = side.run("seq", steps)
	})
	if err := w.Run(); err != nil {
		return out, err
	}
	return out, runErr
}

// clusterSeed is a decide drawing from seed (0: nil, the first choice always).
func clusterSeed(seed uint64) func(int) int {
	if seed == 0 {
		return nil
	}
	r := rand.New(rand.NewPCG(seed, seed))
	return func(n int) int { return r.IntN(n) }
}

// clusterSimSeeds is how many runs of the simulated cluster, each making
// its choices by a seed of its own, a sequence's real observations are
// first matched against: where the real outcome hangs on a choice the
// simulator makes (who is elected, whether a stale listing lags, how far
// behind a server cut off is, when an agent split off with it answers
// stale listings), one of them gives it most often; the first (seed 0)
// makes the first choice always.
const clusterSimSeeds = 64

// clusterSearchRuns bounds the search that follows the seeds when none
// gave the real observations: the seeds draw each choice at random, so a
// sequence whose answers hang on several rare choices together (three
// stale listings, each lagging by a given number of writes) can be missed
// by all 64 (a Consul ?stale listing that had missed a write at step 1,
// then answered the current state at step 7, in a run beside a busy
// machine). The search tries every choice the simulator makes up to the
// first step that differs, the latest first, and no choice made after it
// (it cannot change what came before), so it ends once each was tried.
const clusterSearchRuns = 4096

// matchSim runs steps on the simulated cluster, first under
// clusterSimSeeds seeds, then by the search of its choices, and returns
// the canonical observations of the first run that gives real, with -1;
// else those that agree with real longest, the step where they first
// differ, and whether the search tried every choice before that step
// (exhausted: no choice of the simulator gives what the real cluster
// did).
func matchSim(k consulsim.Kind, steps []clusterStep, real []string) (sim []string, at int, exhausted bool, err error) {
	at = -1
	// better keeps r's observations if they agree with real longest so
	// far, and says where they differ (-1: nowhere)
	better := func(r run) int {
		s := r.canonical(k)
		i := firstDifference(s, real)
		if i < 0 || i > at {
			sim, at = s, i
		}
		return i
	}
	for seed := range uint64(clusterSimSeeds) {
		r, err := onSimCluster(k, clusterSeed(seed), nil, steps)
		if err != nil {
			return nil, -1, false, err
		}
		if better(r) < 0 {
			return sim, -1, false, nil
		}
	}
	var prefix []int
	for range clusterSearchRuns {
		var picks, ns, upTo []int
		decide := func(n int) int {
			c := 0
			if i := len(picks); i < len(prefix) {
				c = min(prefix[i], n-1)
			}
			picks, ns = append(picks, c), append(ns, n)
			return c
		}
		r, err := onSimCluster(k, decide, func() { upTo = append(upTo, len(picks)) }, steps)
		if err != nil {
			return nil, -1, false, err
		}
		i := better(r)
		if i < 0 {
			return sim, -1, false, nil
		}
		// the choices made by the end of the step that differs; the
		// latest of them with another left to try is tried next
		j := len(picks)
		if i < len(upTo) {
			j = upTo[i]
		}
		for j--; j >= 0 && picks[j]+1 >= ns[j]; j-- {
		}
		if j < 0 {
			return sim, at, true, nil
		}
		prefix = append(picks[:j:j], picks[j]+1)
	}
	return sim, at, false, nil
}

// A ClusterReport is what ClusterDifferential found.
type ClusterReport struct {
	Server string
	// Sequences counts the sequences run, Agreed those on which the
	// simulator gave the real cluster's answers, WithFaults those of
	// them with a fault on the cluster; Steps the steps run.
	Sequences, Agreed, WithFaults, Steps int
	Elapsed                              time.Duration
	// Divergence is the first diverging sequence, step by step with both
	// sides' answers ("" if none); Shrunk that sequence with fewer steps,
	// still diverging ("" if none was found in the time given).
	Divergence, Shrunk string
}

func (r ClusterReport) String() string {
	return fmt.Sprintf("%s cluster: %d of %d sequences agreed (%d of them with a fault on the cluster), %d steps, %.0fs",
		r.Server, r.Agreed, r.Sequences, r.WithFaults, r.Steps, r.Elapsed.Seconds())
}

// ClusterDifferential runs n sequences drawn from seed on the real
// cluster t and on the simulated one and compares them step by step. It
// runs them all; the first divergence is shown in full and shrunk for
// at most shrink; a line per sequence goes to progress (nil: none).
func ClusterDifferential(ctx context.Context, t Cluster, n int, seed uint64, shrink time.Duration, progress io.Writer) (ClusterReport, error) {
	start := time.Now()
	k := t.Kind()
	rep := ClusterReport{Server: t.Server(ctx)}
	runs := 0
	var notes []string // how the last real run's steps went
	var exhausted bool // whether the simulator's every choice was tried
	diverges := func(steps []clusterStep) (real, sim []string, at int, err error) {
		runs++
		rr, err := onRealCluster(ctx, t, fmt.Sprintf("lockprover-cd-%d-%d", seed%100000, runs), steps)
		notes = rr.notes
		if err != nil {
			return nil, nil, -1, err
		}
		real = rr.canonical(k)
		sim, at, exhausted, err = matchSim(k, steps, real)
		return real, sim, at, err
	}
	var first []clusterStep
	for i := range n {
		steps := drawClusterSteps(rand.New(rand.NewPCG(seed, uint64(i))), k)
		t0 := time.Now()
		real, sim, at, err := diverges(steps)
		rep.Elapsed = time.Since(start)
		if err != nil {
			return rep, fmt.Errorf("sequence %d: %w", i, err)
		}
		rep.Sequences++
		rep.Steps += len(steps)
		faulted := slices.ContainsFunc(steps, func(s clusterStep) bool { return s.fault != "" })
		verdict := "agrees"
		if at < 0 {
			rep.Agreed++
			if faulted {
				rep.WithFaults++
			}
		} else {
			verdict = fmt.Sprintf("DIVERGES at step %d", at+1)
			if first == nil {
				first = steps
				rep.Divergence = showClusterRun(i, seed, steps, real, sim, notes, at, exhausted)
			}
		}
		if progress != nil {
			fmt.Fprintf(progress, "sequence %d%s: %s in %.1fs\n", i, map[bool]string{true: " (fault)"}[faulted], verdict, time.Since(t0).Seconds())
			if at >= 0 {
				// every divergence, as it comes: a run may be
				// interrupted before its end
				fmt.Fprint(progress, showClusterRun(i, seed, steps, real, sim, notes, at, exhausted))
			}
		}
	}
	if first != nil && shrink > 0 {
		end := time.Now().Add(shrink)
		cur := first
		for j := 0; j < len(cur) && time.Now().Before(end) && ctx.Err() == nil; {
			try := slices.Delete(slices.Clone(cur), j, j+1)
			if _, _, at, err := diverges(try); err == nil && at >= 0 {
				cur = try
				continue
			}
			j++
		}
		if len(cur) < len(first) {
			var b strings.Builder
			for j, s := range cur {
				fmt.Fprintf(&b, "  %2d %s\n", j+1, s)
			}
			rep.Shrunk = b.String()
		}
	}
	rep.Elapsed = time.Since(start)
	return rep, ctx.Err()
}

// showClusterRun shows a diverging sequence step by step, with how each
// step went on the real cluster (notes: its time, an error's text), and
// whether every choice of the simulator was tried (exhausted) or the
// search ran out of runs first.
func showClusterRun(i int, seed uint64, steps []clusterStep, real, sim, notes []string, at int, exhausted bool) string {
	var b strings.Builder
	how := fmt.Sprintf("no choice of the simulator gives step %d's answer", at+1)
	if !exhausted {
		how = fmt.Sprintf("none of %d seeds and %d runs of the search of its choices gave step %d's answer", clusterSimSeeds, clusterSearchRuns, at+1)
	}
	fmt.Fprintf(&b, "sequence %d of seed %d, step %d differs (%s):\n", i, seed, at+1, how)
	for j, s := range steps {
		mark := "  "
		if j == at {
			mark = "> "
		}
		fmt.Fprintf(&b, "%s%2d %s\n       real: %s (%s)\n       sim:  %s\n", mark, j+1, s, at2(real, j), at2(notes, j), at2(sim, j))
	}
	return b.String()
}

func at2(ss []string, i int) string {
	if i < len(ss) {
		return ss[i]
	}
	return "-"
}

// onRealCluster runs steps on the real cluster, on keys under prefix,
// with a client of its own on each node, and leaves it whole.
func onRealCluster(ctx context.Context, t Cluster, prefix string, steps []clusterStep) (run, error) {
	k := t.Kind()
	side := clusterSide{kind: k, clients: map[string]consulsem.Backend{}, notes: true,
		call:   func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, clusterCallTimeout) },
		strike: func(fault, target string) error { return t.Strike(ctx, fault, target) },
		whole:  func() error { return t.Whole(ctx) },
		settle: func(d time.Duration) {
			select {
			case <-time.After(d):
			case <-ctx.Done():
			}
		},
	}
	var closers []func()
	closeAll := func() {
		for _, c := range closers {
			c()
		}
		closers = nil
	}
	defer closeAll()
	side.reconnect = func() error {
		closeAll()
		for c, node := range clusterClients(k) {
			b, close, err := t.Client(node)
			if err != nil {
				return err
			}
			side.clients[c] = b
			closers = append(closers, close)
		}
		return nil
	}
	if err := side.reconnect(); err != nil {
		return run{}, err
	}
	out, err := side.run(prefix, steps)
	if err == nil && slices.ContainsFunc(steps, func(s clusterStep) bool { return s.fault != "" }) {
		for _, s := range steps {
			if s.fault == "pause" {
				t.Strike(ctx, "resume", s.arg)
			}
		}
		err = t.Whole(ctx)
	}
	if ctx.Err() != nil {
		return out, ctx.Err()
	}
	return out, err
}
